//! Daemon mode (`cert_agent::testing::daemon::run_daemon`): the configuration is reloaded when its file
//! changes (an invalid new one is reported and the old one kept), and SIGTERM/SIGINT stop the
//! daemon within a bound — letting a run in progress finish, or abandoning it after the grace
//! time.
//!
//! The runs need no API: certificates without an order, with orders not allowed, end as
//! "needs an order" without a call. A `notify_command` that sleeps makes a run last long enough
//! to be interrupted.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cert_agent::testing::daemon::{DaemonEvent, DaemonOptions, run_daemon};
use cert_agent::testing::engine::RunStatus;
use tokio::sync::{mpsc, watch};

/// Signals reach every daemon of this process: tests that send them run one at a time.
static SIGNAL_TESTS: Mutex<()> = Mutex::new(());

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    /// A configuration with these certificates (and an optional `notify_command`).
    fn config(&self, names: &[&str], notify: Option<&str>) -> String {
        let root = self.dir.path();
        let mut text = format!(
            "[api]\nbase_url = \"https://127.0.0.1:9\"\nlogin = \"ops@example.com\"\n\
             password_file = \"{}\"\n\n[agent]\nstate_dir = \"{}\"\n",
            root.join("password").display(),
            root.join("state").display(),
        );
        if let Some(n) = notify {
            text.push_str(&format!("notify_command = {n}\n"));
        }
        for name in names {
            text.push_str(&format!(
                "\n[[certificate]]\nname = \"{name}\"\ndomains = [\"{name}.example.com\"]\n\
                 product_id = 101\ndcv = \"http\"\nwebroot = \"{www}\"\nserver = \"none\"\n\
                 country = \"DE\"\nregion = \"Berlin\"\ncity = \"Berlin\"\n\
                 key_path = \"{www}/{name}.key\"\nfullchain_path = \"{www}/{name}.pem\"\n",
                www = root.join("www").display()
            ));
        }
        text
    }

    /// A `notify_command` (TOML) that creates the returned marker file, then sleeps `secs`:
    /// a run that fails lasts that long, and the marker shows when it got there.
    fn notify_that_sleeps(&self, secs: u32) -> (String, PathBuf) {
        let marker = self.dir.path().join("notify-started");
        let command = format!(
            r#"["sh", "-c", "touch '{}' && exec sleep {secs}"]"#,
            marker.display()
        );
        (command, marker)
    }

    /// Replaces the file the way editors and configuration management do: write, rename.
    fn replace_config(&self, text: &str) {
        let tmp = self.dir.path().join(".config.toml.new");
        std::fs::write(&tmp, text).expect("write config");
        std::fs::rename(&tmp, self.config_path()).expect("rename config");
    }

    /// Rewrites the file in place.
    fn rewrite_config(&self, text: &str) {
        std::fs::write(self.config_path(), text).expect("write config");
    }
}

fn options(events: mpsc::UnboundedSender<DaemonEvent>) -> DaemonOptions {
    DaemonOptions {
        interval: Duration::from_secs(2),
        jitter: Duration::ZERO,
        first_run_delay: Duration::ZERO,
        pending_interval: Some(Duration::from_secs(2)),
        run_wait: Duration::from_secs(5),
        retry_after_failure: Duration::from_millis(300),
        stop_grace: Duration::from_secs(10),
        reload_settle: Duration::from_millis(200),
        run_after_reload: Some(Duration::ZERO),
        handle_signals: false,
        stop: None,
        events: Some(events),
        clock: cert_agent::testing::clock::Clock::SYSTEM,
        takeover_jitter: Duration::ZERO,
    }
}

/// The next event matching `pred`, skipping others; panics after `within`.
async fn expect_event(
    rx: &mut mpsc::UnboundedReceiver<DaemonEvent>,
    within: Duration,
    what: &str,
    pred: impl Fn(&DaemonEvent) -> bool,
) -> DaemonEvent {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) if pred(&e) => return e,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the daemon stopped before {what}"),
            Err(_) => panic!("no {what} within {within:?}"),
        }
    }
}

fn run_started_with(names: &'static [&'static str]) -> impl Fn(&DaemonEvent) -> bool {
    move |e| matches!(e, DaemonEvent::RunStarted { certificates } if certificates == names)
}

fn is_run_finished(e: &DaemonEvent) -> bool {
    matches!(e, DaemonEvent::RunFinished { .. })
}

#[test]
fn a_changed_config_is_reloaded_and_an_invalid_one_keeps_the_previous() {
    local_test(async {
        let env = Env::new();
        env.rewrite_config(&env.config(&["a"], None));
        let (daemon, mut rx, stop_tx) = start_stoppable(&env, Duration::from_secs(2));
        let t = Duration::from_secs(10);

        expect_event(&mut rx, t, "the first run", run_started_with(&["a"])).await;
        let finished = expect_event(&mut rx, t, "the end of the first run", is_run_finished).await;
        match finished {
            DaemonEvent::RunFinished {
                status,
                report: Some(report),
            } => {
                // No order and orders not allowed: reported as a failure, without an API call.
                assert_eq!(status, Some(RunStatus::Failed));
                assert_eq!(report.certificates.len(), 1);
            }
            other => panic!("unexpected {other:?}"),
        }

        // A valid change, written by rename: used from the next run, which starts soon.
        env.replace_config(&env.config(&["a", "b"], None));
        expect_event(&mut rx, t, "the reload", |e| {
        matches!(e, DaemonEvent::ConfigReloaded { certificates } if certificates == &["a", "b"])
    })
    .await;
        expect_event(&mut rx, t, "a run with the new config", |e| {
            matches!(e, DaemonEvent::RunStarted { .. })
        })
        .await;

        // An invalid change: reported, with the file, line and key; the previous config stays.
        env.rewrite_config(&format!("{}webrot = \"/x\"\n", env.config(&["c"], None)));
        let rejected = expect_event(&mut rx, t, "the rejection", |e| {
            matches!(
                e,
                DaemonEvent::ConfigRejected { .. } | DaemonEvent::ConfigReloaded { .. }
            )
        })
        .await;
        match rejected {
            DaemonEvent::ConfigRejected { error } => {
                assert!(error.contains("webrot"), "{error}");
                assert!(error.contains("config.toml line"), "{error}");
            }
            other => panic!("an invalid config was accepted: {other:?}"),
        }
        let next = expect_event(&mut rx, t, "a run after the rejection", |e| {
            matches!(e, DaemonEvent::RunStarted { .. })
        })
        .await;
        match next {
            DaemonEvent::RunStarted { certificates } => assert_eq!(certificates, ["a", "b"]),
            other => panic!("unexpected {other:?}"),
        }

        // Fixed in place: loaded again.
        env.rewrite_config(&env.config(&["c"], None));
        expect_event(
            &mut rx,
            t,
            "the reload of the fixed file",
            |e| matches!(e, DaemonEvent::ConfigReloaded { certificates } if certificates == &["c"]),
        )
        .await;
        expect_event(
            &mut rx,
            t,
            "a run with the fixed config",
            run_started_with(&["c"]),
        )
        .await;

        stop_tx.send(true).expect("daemon listens");
        expect_event(&mut rx, t, "the stop", |e| {
            matches!(e, DaemonEvent::Stopped { .. })
        })
        .await;
        tokio::time::timeout(t, daemon)
            .await
            .expect("stops")
            .expect("joins")
            .expect("clean stop");
    });
}

#[test]
fn an_unchanged_rewrite_does_not_reload() {
    local_test(async {
        let env = Env::new();
        let text = env.config(&["a"], None);
        env.rewrite_config(&text);
        let (daemon, mut rx, stop_tx) = start_stoppable(&env, Duration::from_secs(3600));
        expect_event(
            &mut rx,
            Duration::from_secs(10),
            "the first run",
            is_run_finished,
        )
        .await;
        env.replace_config(&text);
        // A window in which no reload may happen: the time passing is what is checked.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        drop(stop_tx);
        daemon.await.expect("joins").expect("clean stop");
        while let Ok(e) = rx.try_recv() {
            assert!(
                !matches!(
                    e,
                    DaemonEvent::ConfigReloaded { .. } | DaemonEvent::RunStarted { .. }
                ),
                "same content, yet {e:?}"
            );
        }
    });
}

/// With `include = ["conf.d/*.toml"]`, a fragment dropped into conf.d (as a hosting panel
/// does for a new site) is picked up without a signal; an invalid one keeps the previous set.
#[test]
fn a_fragment_added_to_an_included_directory_is_reloaded() {
    local_test(async {
        let env = Env::new();
        let conf_d = env.dir.path().join("conf.d");
        std::fs::create_dir(&conf_d).expect("conf.d");
        let main = env
            .config(&["a"], None)
            .replace("[agent]\n", "[agent]\ninclude = [\"conf.d/*.toml\"]\n");
        env.rewrite_config(&main);
        let (daemon, mut rx, stop_tx) = start_stoppable(&env, Duration::from_secs(3600));
        let t = Duration::from_secs(10);
        expect_event(&mut rx, t, "the first run", run_started_with(&["a"])).await;
        // The certificate part of a configuration for "b", alone in its own file.
        let whole = env.config(&["b"], None);
        let fragment = &whole[whole.find("[[certificate]]").expect("a certificate")..];
        let tmp = env.dir.path().join("b.toml.tmp");
        std::fs::write(&tmp, fragment).expect("write");
        std::fs::rename(&tmp, conf_d.join("b.toml")).expect("rename");
        expect_event(&mut rx, t, "the reload", |e| {
            matches!(e, DaemonEvent::ConfigReloaded { certificates } if certificates == &["a", "b"])
        })
        .await;
        std::fs::write(conf_d.join("c.toml"), "[[certificate]]\nname = \"c\"\n").expect("write");
        let rejected = expect_event(&mut rx, t, "the rejection", |e| {
            matches!(e, DaemonEvent::ConfigRejected { .. })
        })
        .await;
        assert!(
            format!("{rejected:?}").contains("c.toml line"),
            "{rejected:?}"
        );
        drop(stop_tx);
        daemon.await.expect("joins").expect("clean stop");
    });
}

/// A run that fails as a whole (here: its state directory cannot be created) is tried again
/// after `retry_after_failure`, doubling, not after the hour's interval; once a run works, the
/// schedule is back.
#[test]
fn a_run_that_failed_as_a_whole_is_retried_soon_then_the_schedule_is_back() {
    local_test(async {
        let env = Env::new();
        let blocker = env.dir.path().join("blocked");
        std::fs::write(&blocker, "a file where a directory should be").expect("write");
        let state = env.dir.path().join("state");
        let text = env.config(&["a"], None).replace(
            &format!("state_dir = \"{}\"", state.display()),
            &format!("state_dir = \"{}\"", blocker.join("state").display()),
        );
        assert!(text.contains("blocked/state"), "{text}");
        env.rewrite_config(&text);
        let (daemon, mut rx, stop_tx) = start_stoppable(&env, Duration::from_secs(3600));
        let t = Duration::from_secs(10);
        let failed = |e: &DaemonEvent| {
            matches!(
                e,
                DaemonEvent::RunFinished {
                    status: None,
                    report: None
                }
            )
        };
        expect_event(&mut rx, t, "the first run's failure", failed).await;
        let first = Instant::now();
        expect_event(&mut rx, t, "the second run's failure", failed).await;
        let second = Instant::now();
        // 300 ms plus up to half of it, then 600 ms plus up to half of it.
        let gap = second - first;
        assert!(
            gap >= Duration::from_millis(300) && gap < Duration::from_secs(3),
            "{gap:?}"
        );
        std::fs::remove_file(&blocker).expect("unblock");
        let done = expect_event(&mut rx, t, "a run that works", |e| {
            matches!(
                e,
                DaemonEvent::RunFinished {
                    status: Some(_),
                    ..
                }
            )
        })
        .await;
        let gap = Instant::now() - second;
        assert!(gap >= Duration::from_millis(600), "{gap:?} {done:?}");
        // Back on the hour's schedule: no further run in a window longer than the backoff
        // steps above (the time passing is what is checked).
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(stop_tx);
        daemon.await.expect("joins").expect("clean stop");
        while let Ok(e) = rx.try_recv() {
            assert!(
                !matches!(e, DaemonEvent::RunStarted { .. }),
                "a run after one that worked, yet {e:?}"
            );
        }
    });
}

#[test]
fn an_invalid_config_at_start_is_an_error() {
    local_test(async {
        let env = Env::new();
        env.rewrite_config("[api]\nbase_url = \"http://insecure\"\n");
        let (tx, _rx) = mpsc::unbounded_channel();
        let err = run_daemon(&env.config_path(), options(tx))
            .await
            .expect_err("invalid config");
        assert!(
            err.downcast_ref::<cert_agent::testing::config::ConfigError>()
                .is_some(),
            "{err:#}"
        );
    });
}

/// Runs `body` on a single-threaded runtime with a `LocalSet`: the daemon's future is not
/// `Send` (neither is `run::once`), as in the binary.
fn local_test(body: impl Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&runtime, body);
}

/// [`local_test`], one signal test at a time.
fn signal_test<F: Future<Output = ()>>(body: impl FnOnce() -> F) {
    let _guard = SIGNAL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    local_test(body());
}

fn send(signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::getpid(), signal).expect("kill");
}

/// Starts a daemon on `env`'s configuration that runs every `interval`; returns it with its
/// events and the sender that stops it (by sending `true` or by being dropped).
fn start_stoppable(
    env: &Env,
    interval: Duration,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    mpsc::UnboundedReceiver<DaemonEvent>,
    watch::Sender<bool>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = watch::channel(false);
    let opts = DaemonOptions {
        interval,
        stop: Some(stop_rx),
        ..options(tx)
    };
    let path = env.config_path();
    let daemon = tokio::task::spawn_local(async move { run_daemon(&path, opts).await });
    (daemon, rx, stop_tx)
}

/// Starts a daemon with real signal handlers; returns it with its events.
fn start_with_signals(
    env: &Env,
    notify: Option<&str>,
    stop_grace: Duration,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    mpsc::UnboundedReceiver<DaemonEvent>,
) {
    env.rewrite_config(&env.config(&["a"], notify));
    let (tx, rx) = mpsc::unbounded_channel();
    let opts = DaemonOptions {
        interval: Duration::from_secs(3600),
        handle_signals: true,
        stop_grace,
        ..options(tx)
    };
    let path: PathBuf = env.config_path();
    (
        tokio::task::spawn_local(async move { run_daemon(&path, opts).await }),
        rx,
    )
}

async fn stopped_within(
    daemon: tokio::task::JoinHandle<anyhow::Result<()>>,
    rx: &mut mpsc::UnboundedReceiver<DaemonEvent>,
    bound: Duration,
) -> bool {
    let started = Instant::now();
    let event = expect_event(rx, bound, "the stop", |e| {
        matches!(e, DaemonEvent::Stopped { .. })
    })
    .await;
    tokio::time::timeout(bound, daemon)
        .await
        .expect("stops in time")
        .expect("joins")
        .expect("clean stop");
    assert!(started.elapsed() <= bound, "took {:?}", started.elapsed());
    match event {
        DaemonEvent::Stopped { run_abandoned } => run_abandoned,
        _ => unreachable!(),
    }
}

/// After its first run, `signal` stops the idle daemon within 2 s, abandoning nothing.
fn stops_at_once_while_idle(signal: nix::sys::signal::Signal) {
    signal_test(|| async move {
        let env = Env::new();
        let (daemon, mut rx) = start_with_signals(&env, None, Duration::from_secs(10));
        expect_event(
            &mut rx,
            Duration::from_secs(10),
            "the first run",
            is_run_finished,
        )
        .await;
        send(signal);
        let abandoned = stopped_within(daemon, &mut rx, Duration::from_secs(2)).await;
        assert!(!abandoned);
    });
}

#[test]
fn sigterm_while_idle_stops_at_once() {
    stops_at_once_while_idle(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn sigint_while_idle_stops_at_once() {
    stops_at_once_while_idle(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn sigterm_during_a_run_lets_it_finish() {
    signal_test(|| async {
        let env = Env::new();
        // The run ends with a failure ("needs an order"), so it runs notify_command: 2 s.
        let (daemon, mut rx) = in_a_long_run(&env, 2, Duration::from_secs(10)).await;
        send(nix::sys::signal::Signal::SIGTERM);
        let finished = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("the run finishes");
        assert!(
            matches!(
                finished,
                Some(DaemonEvent::RunFinished {
                    status: Some(RunStatus::Failed),
                    ..
                })
            ),
            "{finished:?}"
        );
        let abandoned = stopped_within(daemon, &mut rx, Duration::from_secs(2)).await;
        assert!(!abandoned, "the run had time to finish");
        assert_lock_free(&env.dir.path().join("state"));
    });
}

#[test]
fn a_run_that_outlasts_the_grace_time_is_abandoned() {
    signal_test(|| async {
        let env = Env::new();
        let (daemon, mut rx) = in_a_long_run(&env, 30, Duration::from_millis(500)).await;
        let sent = Instant::now();
        send(nix::sys::signal::Signal::SIGTERM);
        let abandoned = stopped_within(daemon, &mut rx, Duration::from_secs(3)).await;
        assert!(abandoned);
        assert!(sent.elapsed() < Duration::from_secs(3));
        assert_lock_free(&env.dir.path().join("state"));
    });
}

#[test]
fn a_second_signal_abandons_the_run_at_once() {
    signal_test(|| async {
        let env = Env::new();
        let (daemon, mut rx) = in_a_long_run(&env, 30, Duration::from_secs(60)).await;
        send(nix::sys::signal::Signal::SIGTERM);
        // The daemon shows no sign of having taken the first signal (it stops no sooner), so
        // the second follows after a pause long enough for the first to be handled.
        tokio::time::sleep(Duration::from_millis(300)).await;
        send(nix::sys::signal::Signal::SIGINT);
        let abandoned = stopped_within(daemon, &mut rx, Duration::from_secs(3)).await;
        assert!(abandoned);
    });
}

/// A daemon with real signal handlers and `stop_grace`, whose first run fails and so runs a
/// `notify_command` that lasts `secs`: returned once the run is inside that command (its
/// marker file exists).
async fn in_a_long_run(
    env: &Env,
    secs: u32,
    stop_grace: Duration,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    mpsc::UnboundedReceiver<DaemonEvent>,
) {
    let (notify, marker) = env.notify_that_sleeps(secs);
    let (daemon, mut rx) = start_with_signals(env, Some(&notify), stop_grace);
    expect_event(&mut rx, Duration::from_secs(10), "the first run", |e| {
        matches!(e, DaemonEvent::RunStarted { .. })
    })
    .await;
    crate::support::wait::until_async(
        Duration::from_secs(10),
        &format!("the run's notify_command to start ({})", marker.display()),
        || marker.exists(),
    )
    .await;
    (daemon, rx)
}

/// The run lock is free again: a new run can start.
fn assert_lock_free(state_dir: &Path) {
    let store = cert_agent::testing::store::Store::open(state_dir).expect("store");
    let lock = store.lock();
    assert!(lock.is_ok(), "the run lock is still held");
}

/// The binary: `cert-agent run` stops with exit code 0 within a bound after SIGTERM.
#[test]
fn the_binary_stops_on_sigterm() {
    let env = Env::new();
    env.rewrite_config(&env.config(&["a"], None));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cert-agent"))
        .arg("--config")
        .arg(env.config_path())
        .arg("run")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cert-agent run");
    // Wait for the start line: the handlers are installed before it is printed.
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("read");
    assert!(line.contains("daemon started"), "{line}");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let sent = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("cert-agent run did not stop within 5 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

/// The binary: an invalid configuration at start is a configuration error (exit code 2).
#[test]
fn the_binary_refuses_an_invalid_config_at_start() {
    let env = Env::new();
    env.rewrite_config("[api]\nbase_url = \"http://insecure\"\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cert-agent"))
        .arg("--config")
        .arg(env.config_path())
        .arg("run")
        .output()
        .expect("run cert-agent");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
