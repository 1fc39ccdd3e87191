//! `cert-agent renew` end to end with a real apache2: order once, HTTP validation fetched
//! through apache from the web root, install (leaf + chain files), config test, graceful
//! reload, verification of what is served.

use crate::combined_flow;
use crate::support;

use support::webserver::Server;

/// Guards the product's main path on apache: a host with a configured certificate and no
/// order ends up serving a sandbox-issued certificate (leaf and chain from separate files) for
/// the name, with the key generated on the host, after exactly one billed order; the next run
/// does nothing and calls nothing.
#[test]
fn renew_orders_validates_through_apache_installs_and_serves() {
    support::env::web_server_flow(Server::Apache, "www.e2e-apache.test");
}

/// Guards `combined_path` with apache: the combined file is the only install path, named in
/// `SSLCertificateFile` without `SSLCertificateKeyFile`; the new certificate is served after
/// the run, the next run sees it installed, and a reinstall reads the key back from it.
#[test]
fn combined_file_only_through_apache() {
    combined_flow::combined_only_flow(Server::Apache, "www.e2e-apache-combined.test");
}
