//! What `fleet status` tells of the fleet's trust: the audit logs of the hosts anchored off
//! each host (every host's sealed `seen` record names the last line of its audit log, and
//! another host's `fleet status` reports a log that went back since it saw a later line — what
//! whoever has root on a host does to hide its actions), a lead held by a name no host
//! announced, and the versions the manifest vouches for per certificate.

use crate::fleet_e2e::{DOMAIN, Fleet, ready};

use std::fs;
use std::time::Duration;

use support::env::wait_until;
use support::webserver::Server;

use crate::support;

const PREFIX: &str = "/audit/";

/// Host `name`'s row of the audit section of `fleet status --json`.
fn audit_row(status: &serde_json::Value, name: &str) -> serde_json::Value {
    status["audit"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["host"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no audit row of {name}: {status}"))
}

/// The `hash` of line `seq` of host `i`'s audit log.
fn hash_of_line(f: &Fleet, i: usize, seq: u64) -> String {
    let text = fs::read_to_string(f.hosts[i].state.join("audit.log")).expect("an audit log");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .find(|v| v["seq"].as_u64() == Some(seq))
        .and_then(|v| v["hash"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no line {seq}:\n{text}"))
}

#[test]
fn a_hosts_audit_log_removed_shows_as_rewound_in_another_hosts_fleet_status() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under(PREFIX, &[Server::Nginx, Server::Nginx], &[("www", DOMAIN)]);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);

    // web2 looks at the fleet: web1's `seen` record names the last line of web1's log at its
    // synchronisation (before the lines of its lead).
    let st = f.agent(1, &["--json", "fleet", "status"]);
    st.expect_code(0);
    let row = audit_row(&st.json(), "web1");
    let seq = row["seq"].as_u64().unwrap_or_default();
    assert!(seq >= 3, "an order, its install and the lead: {row}");
    let hash = hash_of_line(&f, 0, seq);
    assert_eq!(row["hash"].as_str(), Some(hash.as_str()), "{row}");
    // Each line names the host by its fleet name, as `fleet status` does.
    let log = fs::read_to_string(f.hosts[0].state.join("audit.log")).unwrap();
    assert!(
        log.lines().all(|l| l.contains("\"host\":\"web1\"")),
        "{log}"
    );
    assert!(row.get("rewound").is_none(), "{row}");

    // Whoever has root on web1 removes its log and its anchor (`audit --verify` there finds
    // only that the records show actions), and web1 synchronises again.
    let state = &f.hosts[0].state;
    fs::remove_file(state.join("audit.log")).expect("the log");
    fs::remove_file(state.join("audit.anchor")).expect("the anchor");
    f.agent(0, &["--json", "renew"]).expect_code(0);

    // web2 reports it, and again on the next look (the line it saw is kept).
    for _ in 0..2 {
        let st = f.agent(1, &["--json", "fleet", "status"]);
        st.expect_code(1);
        let row = audit_row(&st.json(), "web1");
        let why = row["rewound"].as_str().unwrap_or_default();
        assert!(
            why.contains(&format!("this host saw its line {seq} (hash {hash})")),
            "{}",
            st.describe()
        );
        assert_eq!(audit_row(&st.json(), "web2").get("rewound"), None);
    }
    let text = f.agent(1, &["fleet", "status"]);
    text.expect_code(1);
    assert!(
        text.stdout.contains("web1: AUDIT REWOUND: "),
        "{}",
        text.describe()
    );
    // The host itself does not see it: it has no line of its own kept off the host.
    assert_eq!(
        audit_row(&f.agent(0, &["--json", "fleet", "status"]).json(), "web1").get("rewound"),
        None
    );
}

/// An etcd writer puts a leader key of a name no host announced on a live lease of its own:
/// no host leads while it lasts (no renewal anywhere), so `fleet status` shows it and exits 1.
/// It shows the versions the manifest vouches for per certificate too.
#[test]
fn a_lead_held_by_a_name_no_host_announced_is_shown_with_the_manifests_floors() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under(PREFIX, &[Server::Nginx, Server::Nginx], &[("www", DOMAIN)]);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let st = f.agent(1, &["--json", "fleet", "status"]);
    st.expect_code(0);
    let v = st.json();
    let floor = &v["certificates"][0]["floor"];
    assert!(floor["state"].as_u64() >= Some(1), "{v}");
    assert!(floor["current"].as_u64() >= Some(1), "{v}");
    assert!(
        floor["by"]
            .as_array()
            .is_some_and(|b| b.iter().any(|h| h == "web1")),
        "{v}"
    );
    assert!(v.get("leader_alert").is_none(), "{v}");

    let mut etcd = f.etcd();
    etcd.put_on_lease("leader", "ghost", 600);
    let st = f.agent(1, &["--json", "fleet", "status"]);
    st.expect_code(1);
    let why = st.json()["leader_alert"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        why.contains("'ghost'") && why.contains("no host has announced"),
        "{}",
        st.describe()
    );
    let text = f.agent(1, &["fleet", "status"]);
    text.expect_code(1);
    assert!(
        text.stdout.contains("LEAD SUSPECT: "),
        "{}",
        text.describe()
    );
    assert!(
        text.stdout
            .contains("www: the manifest vouches for shared record "),
        "{}",
        text.describe()
    );
    // A host's own name on the lease is no alert.
    etcd.put_on_lease("leader", "web1", 600);
    let st = f.agent(1, &["--json", "fleet", "status"]);
    assert!(st.json().get("leader_alert").is_none(), "{}", st.describe());
}

/// The daemon watches for it too: web2's daemon looks at the hosts' `seen` records on its
/// schedule (here every second), and once web1's log is cut short (whoever has root on web1
/// keeps its first line and drops the anchor) and web1 synchronised, web2's daemon logs it,
/// notifies `audit_rewound` once, and `check` on web2 is CRITICAL naming web1.
#[test]
fn a_hosts_audit_log_cut_short_is_noticed_by_another_hosts_daemon() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start_under(
        "/audit-daemon/",
        &[Server::Nginx, Server::Nginx],
        &[("www", DOMAIN)],
    );
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let notes = f.env.path("notes.json");
    let state = f.hosts[1].state.display().to_string();
    crate::fleet_e2e::edit_config(
        &f,
        1,
        &format!("state_dir = \"{state}\""),
        &format!(
            "state_dir = \"{state}\"\nnotify_command = [\"/bin/sh\", \"-c\", \"cat >> '{}'\"]",
            notes.display()
        ),
    );
    f.start_daemon_with(1, &[("CERT_AGENT_TEST_AUDIT_LOOK_SECS", "1")]);
    let kept = f.hosts[1].state.join("fleet-audit.json");
    assert!(
        wait_until(Duration::from_secs(30), || fs::read_to_string(&kept)
            .is_ok_and(|t| t.contains("\"web1\""))),
        "web2's daemon saw web1's line\n{}",
        f.logs()
    );
    let check = || f.agent(1, &["check", "--no-balance"]);
    check().expect_code(0);

    let log = f.hosts[0].state.join("audit.log");
    let text = fs::read_to_string(&log).unwrap();
    let first = text.lines().next().unwrap().to_owned();
    fs::write(&log, format!("{first}\n")).unwrap();
    fs::remove_file(f.hosts[0].state.join("audit.anchor")).expect("the anchor");
    f.agent(0, &["--json", "renew"]).expect_code(0);

    assert!(
        wait_until(Duration::from_secs(30), || check().code == Some(2)),
        "web2's check turned CRITICAL\n{}",
        f.logs()
    );
    let c = check();
    assert!(
        c.stdout
            .contains("\nCRITICAL fleet audit: web1: AUDIT REWOUND: its audit log ends at line 1"),
        "{}",
        c.describe()
    );
    // Notified once, however many looks see it since; logged by the daemon.
    std::thread::sleep(Duration::from_secs(3));
    let sent = fs::read_to_string(&notes).unwrap_or_default();
    assert_eq!(
        sent.matches("\"audit_rewound\"").count(),
        1,
        "{sent}\n{}",
        f.logs()
    );
    assert!(sent.contains("web1: AUDIT REWOUND"), "{sent}");
    assert!(f.logs().contains("web1: AUDIT REWOUND"), "{}", f.logs());
}
