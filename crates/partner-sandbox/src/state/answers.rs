//! The shapes of the partner API's plain answers: `{error}`, the 404 "not meant to be parsed",
//! `{success, result}` and the 422 `{success: false, error}`.

use serde_json::json;

use crate::wire::{ApiResponse, ResponseBody};

/// `{error: message}` with `status`.
pub(super) fn error(status: u16, message: &str) -> ApiResponse {
    ApiResponse::json(status, json!({ "error": message }))
}

/// The 404 whose body is "not meant to be parsed".
pub(super) fn not_found_text() -> ApiResponse {
    ApiResponse {
        status: 404,
        headers: Vec::new(),
        body: ResponseBody::Text("404 Not Found".to_string()),
        account: None,
        billed: false,
    }
}

/// `{success, result}` with status 200 (change DCV, resend, cancel).
pub(super) fn action(success: bool, result: &str) -> ApiResponse {
    ApiResponse::json(200, json!({ "success": success, "result": result }))
}

/// `{success:false, error}` with status 422 (reissue, DCV status).
pub(super) fn refused(message: &str) -> ApiResponse {
    ApiResponse::json(422, json!({ "success": false, "error": message }))
}
