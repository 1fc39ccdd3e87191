//! The README's first command (`scripts/demo`, which is `cargo run --example demo`): the main
//! job end to end against the bundled sandbox — order, validation, issuance, install, and with
//! nginx a reload and the served certificate checked — runs as printed. The example is built
//! beside the agent (`cargo build --examples`, as `scripts/test-all` does before the suite).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_readmes_demo_orders_validates_installs_and_serves() {
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_cert-agent"));
    let Some(demo) = agent.parent().map(|d| d.join("examples/demo")) else {
        panic!("no directory above {}", agent.display());
    };
    if !demo.is_file() {
        let msg = format!("{} is not built (cargo build --examples)", demo.display());
        assert!(std::env::var_os("CI").is_none(), "{msg}; CI is set");
        eprintln!("skipping: {msg}");
        return;
    }
    let mut child = Command::new(&demo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the demo");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the demo did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("the demo's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the demo failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    for n in [
        "$ cert-agent --config",
        "installed ",
        "subject  CN=www.example.test",
        "billed orders on the sandbox account: 1",
    ] {
        assert!(stdout.contains(n), "{n:?} not in\n{stdout}\n{stderr}");
    }
}
