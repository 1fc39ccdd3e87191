//! A fleet host's daemon: the synchronisations of its follow loop are not runs (the
//! `cert_agent_last_sync_*` metrics move with them, `cert_agent_last_run_*` only with runs),
//! and their notifications are delivered without the state directory's lock, so that an
//! operator's `renew` beside the daemon is not held up by a slow `notify_command`. Two hosts
//! with real nginx on a real three-member etcd.

use crate::fleet_e2e::{Fleet, ready};
use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::env::wait_until;

fn host_dir(f: &Fleet, i: usize) -> PathBuf {
    f.hosts[i].state.parent().unwrap().to_path_buf()
}

/// The value of the sample of host `i`'s metrics file whose line starts with `sample` (the
/// name with its labels, e.g. `cert_agent_last_sync_certificates{outcome="installed"}`).
fn sample(f: &Fleet, i: usize, sample: &str) -> Option<f64> {
    value_in(&host_dir(f, i).join("metrics.prom"), sample)
}

fn value_in(file: &Path, sample: &str) -> Option<f64> {
    let text = fs::read_to_string(file).ok()?;
    text.lines()
        .find(|l| l.starts_with(sample) && l[sample.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

const LAST_RUN: &str = "cert_agent_last_run_start_timestamp_seconds";
const LAST_SYNC: &str = "cert_agent_last_sync_timestamp_seconds";
const SYNC_INSTALLED: &str = "cert_agent_last_sync_certificates{outcome=\"installed\"}";
const RUN_INSTALLED: &str = "cert_agent_last_run_certificates{outcome=\"installed\"}";

#[test]
fn a_fleet_daemons_synchronisations_are_not_runs_and_notify_without_the_lock() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start(2);
    // web2 writes its metrics file; its notify_command records what it got, then takes 30 s.
    let dir = host_dir(&f, 1);
    let marker = dir.join("notified.json");
    let hook = format!(
        "cat > '{m}.part' && mv '{m}.part' '{m}'; sleep 30",
        m = marker.display()
    );
    let extra = format!(
        "metrics_file = \"{}\"\nnotify_command = [\"/bin/sh\", \"-c\", {hook:?}]\n",
        dir.join("metrics.prom").display()
    );
    let text = fs::read_to_string(&f.hosts[1].config).unwrap();
    let text = text.replacen("\nstate_dir = ", &format!("\n{extra}state_dir = "), 1);
    fs::write(&f.hosts[1].config, text).unwrap();
    // No scheduled run of web2's daemon within the test: what it does, it does by following.
    f.start_daemon_args(1, &["--first-run-delay", "3600"], &[]);

    // web1 leads; web2's daemon serves the validation file and installs what web1 publishes.
    let lead = f.agent(0, &["--json", "renew", "--wait", "60"]);
    lead.expect_code(0);
    let first = lead.installed_serial("www");
    assert!(
        wait_until(Duration::from_secs(60), || sample(&f, 1, SYNC_INSTALLED)
            == Some(1.0)),
        "web2's follow loop installed the certificate: {:?}\n{}",
        fs::read_to_string(dir.join("metrics.prom")),
        f.logs()
    );
    assert_eq!(f.installed(1).as_deref(), Some(first.as_str()));
    assert!(sample(&f, 1, LAST_SYNC).is_some());
    assert_eq!(
        sample(&f, 1, LAST_RUN),
        None,
        "web2 has made no run yet: its synchronisations are not runs\n{:?}",
        fs::read_to_string(dir.join("metrics.prom"))
    );

    // The install's notification is being delivered (30 s): the state lock is free meanwhile,
    // a renew beside the daemon runs at once.
    assert!(
        wait_until(Duration::from_secs(30), || marker.exists()),
        "notify_command ran\n{}",
        f.logs()
    );
    let notified: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&marker).unwrap()).unwrap();
    assert_eq!(notified["events"][0]["event"], "installed", "{notified}");
    let manual = f.agent(1, &["--json", "renew", "--lock-wait", "10"]);
    manual.expect_code(0);
    let run_start = sample(&f, 1, LAST_RUN).expect("the run's start");
    assert_eq!(sample(&f, 1, RUN_INSTALLED), Some(0.0));

    // A reissue on web1 reaches web2 by a synchronisation: the sync families move, the run's
    // stay those of the manual run.
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let second = re.installed_serial("www");
    assert!(
        wait_until(Duration::from_secs(60), || f.installed(1).as_deref()
            == Some(second.as_str())
            && sample(&f, 1, SYNC_INSTALLED) == Some(1.0)),
        "web2 installed the reissue\n{}",
        f.logs()
    );
    assert!(sample(&f, 1, LAST_SYNC).unwrap() >= run_start);
    assert_eq!(sample(&f, 1, LAST_RUN), Some(run_start));
    assert_eq!(sample(&f, 1, RUN_INSTALLED), Some(0.0));
}
