//! A lead held too long: a leader key that names a real host (so no `LEAD SUSPECT`), kept
//! alive on a lease (a leader stopped while its lease is kept alive, or an etcd writer's own
//! lease), stops every renewal. A host that saw the same lead held longer than `[fleet]
//! lead_alert_secs` shows `LEAD STUCK` in `fleet status` (exit 1) and `check` warns; once
//! the lead ends, both are quiet again.

use crate::fleet_e2e::{DOMAIN, Fleet, edit_config, ready};
use crate::support;

use std::time::Duration;

use support::webserver::Server;

const PREFIX: &str = "/lead/";

fn check(f: &Fleet, i: usize) -> support::env::AgentOutput {
    f.agent(i, &["check", "--no-balance"])
}

#[test]
fn a_lead_held_longer_than_its_bound_is_shown_and_alerted() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under(PREFIX, &[Server::Nginx, Server::Nginx], &[("www", DOMAIN)]);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    edit_config(
        &f,
        1,
        "lag_alert_secs = 60",
        "lag_alert_secs = 60\nlead_alert_secs = 10",
    );
    f.agent(1, &["--json", "renew"]).expect_code(0);
    check(&f, 1).expect_code(0);

    // web1's name on a lease that stays alive: web1 is not running, so nothing ends it.
    let mut etcd = f.etcd();
    let lease = etcd.put_on_lease("leader", "web1", 600);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let st = f.agent(1, &["--json", "fleet", "status"]);
    st.expect_code(0);
    assert!(st.json().get("lead_stuck").is_none(), "{}", st.describe());
    assert!(st.json().get("leader_alert").is_none(), "{}", st.describe());
    check(&f, 1).expect_code(0);

    std::thread::sleep(Duration::from_secs(11));
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let c = check(&f, 1);
    c.expect_code(1);
    assert!(
        c.stdout.starts_with("CERT-AGENT WARNING - fleet lead: ")
            && c.stdout
                .contains("\nWARNING fleet lead: the lead has been held by 'web1' since "),
        "{}",
        c.describe()
    );
    let st = f.agent(1, &["--json", "fleet", "status"]);
    st.expect_code(1);
    let why = st.json()["lead_stuck"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        why.contains("'web1'") && why.contains("lead_alert_secs (10 s"),
        "{}",
        st.describe()
    );
    let text = f.agent(1, &["fleet", "status"]);
    text.expect_code(1);
    assert!(
        text.stdout
            .contains("LEAD STUCK: the lead has been held by 'web1' since "),
        "{}",
        text.describe()
    );

    // The lead ends: the next synchronisation forgets it.
    etcd.revoke(lease);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    check(&f, 1).expect_code(0);
    f.agent(1, &["--json", "fleet", "status"]).expect_code(0);
}
