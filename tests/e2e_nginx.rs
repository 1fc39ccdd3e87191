//! `cert-agent renew` end to end with a real nginx: order once, HTTP validation fetched through
//! nginx from the web root, install, config test, reload, verification of what is served.

mod support;

use support::webserver::Server;

/// Guards the product's main path on nginx: a host with a configured certificate and no order
/// ends up serving a sandbox-issued certificate for the name, with the key generated on the
/// host, after exactly one billed order; the next run does nothing and calls nothing.
#[test]
fn renew_orders_validates_through_nginx_installs_and_serves() {
    support::env::web_server_flow(Server::Nginx, "www.e2e-nginx.test");
}
