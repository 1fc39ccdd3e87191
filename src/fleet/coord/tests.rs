//! etcd's refusals told apart: what to check for each kind.

use super::{FleetError, unavailable};

fn refused(code: tonic::Code, message: &str) -> String {
    let e = etcd_client::Error::GRpcStatus(tonic::Status::new(code, message));
    let err = unavailable("http://127.0.0.1:2379", &e);
    assert!(matches!(err, FleetError::Refused { .. }), "{err}");
    err.to_string()
}

#[test]
fn a_refusal_names_what_to_check_by_its_kind() {
    let text = refused(tonic::Code::PermissionDenied, "permission denied");
    assert!(text.contains("[fleet] user, password_file"), "{text}");
    let text = refused(
        tonic::Code::InvalidArgument,
        "etcdserver: too many operations in txn request",
    );
    assert!(text.contains("--max-txn-ops"), "{text}");
    assert!(!text.contains("password_file"), "{text}");
    // etcd's answer to a wrong password.
    let text = refused(
        tonic::Code::InvalidArgument,
        "etcdserver: authentication failed, invalid user ID or password",
    );
    assert!(text.contains("[fleet] user, password_file"), "{text}");
    assert!(!text.contains("--max-txn-ops"), "{text}");
    let e = etcd_client::Error::GRpcStatus(tonic::Status::new(tonic::Code::Unavailable, "x"));
    assert!(matches!(
        unavailable("e", &e),
        FleetError::Unavailable { .. }
    ));
}
