//! The keys each section accepts: the checker refuses any other (with a suggestion).

pub(super) const TOP_KEYS: &[&str] = &[
    "api",
    "agent",
    "fleet",
    "validation",
    "revocation",
    "preflight",
    "acme",
    "defaults",
    "certificate",
];
pub(super) const VALIDATION_KEYS: &[&str] = &["reuse_days", "warning_days"];
pub(super) const REVOCATION_KEYS: &[&str] =
    &["check", "max_crl_bytes", "timeout_secs", "refresh_secs"];
pub(super) const PREFLIGHT_KEYS: &[&str] = &[
    "caa",
    "dnssec",
    "resolver",
    "timeout_secs",
    "caa_identities",
];
pub(super) const ACME_KEYS: &[&str] = &[
    "directory",
    "contact",
    "eab_kid",
    "eab_hmac_file",
    "profile",
    "ca_file",
];
pub(super) const FLEET_KEYS: &[&str] = &[
    "endpoints",
    "ca_file",
    "cert_file",
    "key_file",
    "user",
    "password_file",
    "insecure_plaintext",
    "prefix",
    "host",
    "secret_file",
    "previous_secret_file",
    "lease_ttl_secs",
    "lag_alert_secs",
    "health_command",
];
pub(super) const API_KEYS: &[&str] = &[
    "base_url",
    "login",
    "password_file",
    "password",
    "ca_file",
    "order_site_url",
    "connect_timeout_secs",
    "timeout_secs",
    "retries",
];
pub(super) const AGENT_KEYS: &[&str] = &[
    "state_dir",
    "renew_before_days",
    "poll_interval_secs",
    "allow_orders",
    "max_order_price",
    "concurrency",
    "notify_command",
    "notify_url",
    "notify_timeout_secs",
    "serve_user",
    "metrics_file",
    "metrics_listen",
    "include",
];
/// Keys of a certificate that cannot come from `[defaults]`.
pub(super) const CERT_ONLY_KEYS: &[&str] = &[
    "name",
    "domains",
    "certificate_id",
    "cert_path",
    "chain_path",
    "fullchain_path",
    "key_path",
    "combined_path",
];
/// Keys of a certificate that `[defaults]` may also set.
pub(super) const SHARED_KEYS: &[&str] = &[
    "issuer",
    "profile",
    "product_id",
    "days",
    "key_type",
    "dcv",
    "webroot",
    "standalone",
    "listen",
    "dns_hook",
    "dcv_email",
    "server",
    "owner",
    "group",
    "mode",
    "reload_command",
    "configtest_command",
    "deploy_hook",
    "verify_address",
    "reuse_key",
    "family",
    "country",
    "region",
    "city",
    "organization_name",
    "organizational_unit",
    "address_1",
    "address_2",
    "zip_code",
    "unique_value",
    "cname_target_domain",
    "ssl_server_software_id",
];
