//! A follower whose watch fell behind: while its daemon is stopped (SIGSTOP), [`COUNT`] values
//! of [`VALUE`] bytes land under the fleet's prefix (under `lag/`, which no host reads), then
//! the leader reissues the certificate. etcd sends a watcher that fell behind the events of up
//! to 1,000 revisions in one answer, here far over a client's default 4 MiB. Resumed, the
//! daemon reads that answer in parts, keeps its watch (a watch that failed would be started
//! again, after a full read) and installs the reissued certificate. Real etcd (three
//! members), real nginx on both hosts.

use crate::support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use support::env::{TestEnv, wait_until};
use support::etcd::{EtcdClient, EtcdCluster};
use support::webserver::Server;

use crate::fleet_e2e::{Fleet, ready};
use crate::fleet_pause::{signal, stopped};

const PREFIX: &str = "/lag/";
/// Values written while the follower is stopped: what etcd and the stopped client buffer
/// (the stream's window, 128 answers queued) is a few MiB; the rest comes in one answer.
const COUNT: usize = 600;
/// Bytes of each value (etcd accepts requests of up to 1.5 MiB).
const VALUE: usize = 24 << 10;

/// The serial host `i` recorded as installed for `c0`.
fn installed(f: &Fleet, i: usize) -> Option<String> {
    crate::fleet_batch::installed(f, i, "c0")
}

/// The watch streams the cluster's members started so far.
fn watches(cluster: &EtcdCluster) -> u64 {
    cluster
        .calls_started()
        .get("Watch")
        .copied()
        .unwrap_or_default()
}

#[test]
fn a_follower_whose_watch_fell_behind_reads_the_large_answer_in_parts_and_installs() {
    if !ready() {
        return;
    }
    let env = TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let servers = [Server::Nginx, Server::Nginx];
    let mut f = Fleet::numbered(env, &cluster.endpoints(), PREFIX, &servers, 1);
    let out = f.agent(0, &["renew", "--wait", "120"]);
    let first = installed(&f, 0);
    assert!(
        first.is_some(),
        "web1 did not issue c0\n{out:?}\n{}",
        f.logs()
    );
    // web2's daemon only follows (no scheduled run during the test).
    f.start_daemon_args(1, &["--first-run-delay", "3600"], &[]);
    assert!(
        wait_until(Duration::from_secs(60), || installed(&f, 1) == first),
        "web2 did not install c0\n{}",
        f.logs()
    );
    // Its watch started (from the revision its first synchronisation read).
    assert!(
        wait_until(Duration::from_secs(30), || watches(&cluster) >= 1),
        "web2's daemon did not watch the fleet\n{}",
        f.logs()
    );
    // The count above rises when the watch call starts; etcd shows no sign of the watch
    // being registered, so a pause lets it settle before the daemon is stopped.
    std::thread::sleep(Duration::from_secs(2));

    signal(f.daemon(1), Signal::SIGSTOP);
    assert!(
        wait_until(Duration::from_secs(10), || stopped(f.daemon(1))),
        "web2's daemon did not stop"
    );
    let mut etcd = EtcdClient::connect(cluster.endpoints(), PREFIX);
    for i in 0..COUNT {
        let value: Vec<u8> = format!("{i:08}").bytes().cycle().take(VALUE).collect();
        etcd.put(&format!("lag/{i}"), value);
    }
    let out = f.agent(0, &["reissue", "c0", "--wait", "120"]);
    let new = installed(&f, 0);
    assert!(
        new.is_some() && new != first,
        "web1 did not reissue c0\n{out:?}\n{}",
        f.logs()
    );
    // etcd holds web2's watch as one that fell behind: the answer that catches it up is sent
    // at once when it reads again.
    let slow = cluster.gauge("etcd_debugging_mvcc_slow_watcher_total");
    assert!(
        slow >= 1.0,
        "web2's watch did not fall behind ({slow} slow watchers)"
    );
    let before = watches(&cluster);

    signal(f.daemon(1), Signal::SIGCONT);
    let resumed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(90), || installed(&f, 1) == new),
        "web2 did not install the reissued c0 ({new:?}) after it resumed\n{}",
        f.logs()
    );
    let took = resumed.elapsed();
    // A watch that failed is started again after five seconds: wait past that.
    std::thread::sleep(Duration::from_secs(8));
    let again = watches(&cluster) - before;
    assert_eq!(
        again,
        0,
        "web2's daemon watched again {again} time(s) after it resumed (it installed the \
         reissue after {took:?}): the answer it fell behind by was not read\n{}",
        f.logs()
    );
    assert_eq!(
        cluster.gauge("etcd_debugging_mvcc_slow_watcher_total"),
        0.0,
        "web2's watch did not catch up"
    );
}
