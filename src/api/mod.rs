//! Partner API v1 client: one async function per endpoint, typed models, `ApiError`.
