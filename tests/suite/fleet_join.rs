//! A run takes the fleet's lead only when the fleet has work for a leader. Real parts: a
//! three-member etcd cluster, two hosts with real nginx, the sandbox. A host joining a fleet
//! whose certificate is installed installs it from the fleet without leading (no Partner API
//! call, no import, the lead never held by it), and so do its scheduled no-op runs; the same
//! host leads when a certificate is due, and when the fleet's shared record holds work in
//! flight. A leader paused past its lease counts the lead as lost
//! (`cert_agent_fleet_leads_lost_total`, `fleet status`).

use crate::fleet_e2e::{DOMAIN, Fleet, edit_config, ready};
use crate::fleet_pause::{signal, stopped};
use crate::support;

use std::fs;
use std::time::Duration;

use nix::sys::signal::Signal;
use support::env::{AgentOutput, wait_exit, wait_until};
use support::webserver::Server;

const LEADING: &str = "leading the fleet for this run";

/// Two hosts under `prefix`; web1 issues `www` for the fleet (validated through web1).
fn issued(prefix: &str) -> Fleet {
    let f = Fleet::start_under(prefix, &[Server::Nginx, Server::Nginx], &[("www", DOMAIN)]);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    assert!(f.installed(0).is_some(), "{}", f.logs());
    f
}

fn audit(f: &Fleet, i: usize) -> String {
    fs::read_to_string(f.hosts[i].state.join("audit.log")).unwrap_or_default()
}

fn journal(f: &Fleet, i: usize) -> String {
    fs::read_to_string(f.hosts[i].state.join("journal.log")).unwrap_or_default()
}

/// Host `i`'s `renew`, with its log (`-v`).
fn renew(f: &Fleet, i: usize) -> AgentOutput {
    f.agent(i, &["-v", "--json", "renew", "--wait", "60"])
}

/// That host `i`'s run did not lead: its log says so, its audit log has no lead taken, the
/// host that last gave the lead up is not it, no shared record was imported.
fn did_not_lead(f: &Fleet, i: usize, out: &AgentOutput) {
    let text = out.text();
    assert!(!text.contains(LEADING), "{}", out.describe());
    assert!(
        text.contains("the fleet has no work for a leader"),
        "{}",
        out.describe()
    );
    assert!(
        !audit(f, i).contains("\"event\":\"fleet-lead-taken\""),
        "{}",
        audit(f, i)
    );
    assert!(
        !journal(f, i).contains("fleet-imported"),
        "{}",
        journal(f, i)
    );
    assert_eq!(
        f.etcd().get("resigned").as_deref(),
        Some(f.hosts[0].name.as_bytes()),
        "the lead was last given up by web1"
    );
}

#[test]
fn a_joiner_installs_from_the_fleet_without_leading_and_leads_when_a_certificate_is_due() {
    if !ready() {
        return;
    }
    let f = issued("/join/");
    let serial = f.installed(0).expect("web1 installed");
    let calls = f.env.calls().len();

    // web2 joins: its first run installs the fleet's certificate and does not lead.
    let out = renew(&f, 1);
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "installed",
        "{}",
        out.describe()
    );
    assert_eq!(f.installed(1).as_deref(), Some(serial.as_str()));
    did_not_lead(&f, 1, &out);
    // Its next (scheduled) run: nothing due, unchanged, no lead either.
    let out = renew(&f, 1);
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "unchanged",
        "{}",
        out.describe()
    );
    let reason = out.outcome("www")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("nothing due"), "{}", out.describe());
    did_not_lead(&f, 1, &out);
    assert_eq!(
        f.env.calls().len(),
        calls,
        "no Partner API call: {:?}",
        &f.env.calls()[calls..]
    );

    // The certificate nears its end (web2's record of it ends in 10 days): web2 leads and
    // reissues it for the fleet (validated through web2), web1 installs it next.
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    let record = f.hosts[1].state.join("certs/www.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&record).unwrap()).unwrap();
    let soon = time::OffsetDateTime::now_utc() + time::Duration::days(10);
    v["installed"]["not_after"] = soon
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
        .into();
    fs::write(&record, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let out = renew(&f, 1);
    out.expect_code(0);
    assert!(out.text().contains(LEADING), "{}", out.describe());
    let reissued = out.installed_serial("www");
    assert_ne!(reissued, serial, "{}", out.describe());
    assert_eq!(f.env.billed(), 1, "a reissue, not an order");
    let out = renew(&f, 0);
    out.expect_code(0);
    assert_eq!(
        f.installed(0).as_deref(),
        Some(reissued.as_str()),
        "{}",
        out.describe()
    );
}

#[test]
fn a_run_leads_when_the_fleets_record_holds_work_in_flight() {
    if !ready() {
        return;
    }
    let f = issued("/join-flight/");
    renew(&f, 1).expect_code(0);
    // web1 sends a reissue and does not wait for it: the fleet's record holds it.
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "0"]);
    assert!(
        re.outcome("www")["outcome"] == "pending",
        "{}",
        re.describe()
    );
    let out = renew(&f, 1);
    assert!(out.text().contains(LEADING), "{}", out.describe());
    assert!(
        audit(&f, 1).contains("\"event\":\"fleet-lead-taken\""),
        "{}",
        audit(&f, 1)
    );
}

/// The value of the counter in `text` (a metrics file).
fn leads_lost(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("cert_agent_fleet_leads_lost_total "))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn a_leader_paused_past_its_lease_counts_a_lead_lost() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under(
        "/join-lost/",
        &[Server::Nginx, Server::Nginx],
        &[("www", DOMAIN)],
    );
    let metrics = f.hosts[0].state.parent().unwrap().join("metrics.prom");
    edit_config(
        &f,
        0,
        "\nstate_dir = ",
        &format!("\nmetrics_file = \"{}\"\nstate_dir = ", metrics.display()),
    );
    // web1 orders (nobody serves the validation file: the sandbox validates through web2,
    // whose run does not start) and stops itself in its second round, holding the lead.
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    let mut a = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "300"])
        .env("CERT_AGENT_FAILPOINT", "status-check@2:stop")
        .spawn();
    assert!(
        wait_until(Duration::from_secs(60), || stopped(&a)),
        "web1 did not order and poll\n{}",
        f.logs()
    );
    // Past its lease (5 s) and the lead's margin.
    std::thread::sleep(Duration::from_secs(8));
    signal(&a, Signal::SIGCONT);
    assert!(
        wait_exit(&mut a, Duration::from_secs(60)).is_some(),
        "web1 did not end\n{}",
        f.logs()
    );
    // Its next run writes the metrics again (whatever the last one ended with): one lead lost.
    let _ = f.agent(0, &["--json", "renew", "--wait", "0"]);
    let text = fs::read_to_string(&metrics).unwrap_or_default();
    assert_eq!(leads_lost(&text), Some(1), "{text}\n{}", f.logs());
    assert!(
        text.contains("# TYPE cert_agent_fleet_leads_lost_total counter"),
        "{text}"
    );
    let st = f.agent(0, &["fleet", "status"]);
    assert!(
        st.stdout.contains("leads lost by this host: 1"),
        "{}",
        st.describe()
    );
}
