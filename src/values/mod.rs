//! Value types and rules that several layers name — the configuration, the API client, the
//! bundle reader, the install layer — kept here so that none of those layers has to import
//! another. Depends on nothing of ours.

mod dcv_type;
mod decimal;
pub(crate) mod endpoint;
mod secret;
mod server_kind;
pub(crate) mod text;

pub use dcv_type::DcvType;
pub(crate) use decimal::Decimal;
pub use secret::Secret;
pub use server_kind::ServerKind;
