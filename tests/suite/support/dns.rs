//! A real DNS world for the pre-flight tests: Debian's `nsd` serving zones the test writes
//! (`ok.test` signed with `ldns-signzone`, `bad.test` signed and then altered so that its
//! signatures fail, `plain.test` unsigned) and Debian's `unbound` validating in front of it
//! with the signed zones' trust anchors, each on a free loopback port. Stopped on drop.
// Also compiled into tests/api_logs.rs through `mod support`, which uses none of it.
#![allow(dead_code)]

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::webserver::free_port_pair;

/// The CAA identity of the sandbox's product 1101 (issuer `s-one`).
pub(crate) const OURS: &str = "s-one.partner-sandbox.test";

const OK_ZONE: &str = r#"$ORIGIN ok.test.
$TTL 300
@ IN SOA ns.ok.test. host.ok.test. 1 3600 600 86400 300
@ IN NS ns.ok.test.
ns IN A 127.0.0.1
allow IN CAA 0 issue "OURS"
allow IN A 127.0.0.1
*.allow IN A 127.0.0.1
forbid IN CAA 0 issue "letsencrypt.org"
forbid IN A 127.0.0.1
wild IN CAA 0 issue "OURS"
wild IN CAA 0 issuewild ";"
wild IN A 127.0.0.1
parent IN CAA 0 issue "letsencrypt.org"
www.parent IN A 127.0.0.1
critical IN CAA 128 tbs "x"
critical IN CAA 0 issue "OURS"
critical IN A 127.0.0.1
noaddr IN CAA 0 issue "OURS"
elsewhere IN CAA 0 issue "OURS"
elsewhere IN A ELSEWHERE
deleg IN CAA 0 issue "OURS"
acct IN CAA 0 issue "pebble.letsencrypt.org; accounturi=https://127.0.0.1:1/my-account/1"
acct IN A 127.0.0.1
_pki-validation.deleg IN CNAME _pki-validation.www.bad.test.
"#;

/// Where `elsewhere.ok.test` points: a loopback address no test serves port 80 on.
pub(crate) const ELSEWHERE: &str = "127.0.0.86";

const BAD_ZONE: &str = r#"$ORIGIN bad.test.
$TTL 300
@ IN SOA ns.bad.test. host.bad.test. 1 3600 600 86400 300
@ IN NS ns.bad.test.
ns IN A 127.0.0.1
www IN CAA 0 issue "OURS"
www IN A 127.0.0.1
_pki-validation.www IN TXT "SIGNED-TOKEN"
"#;

/// An unsigned zone: no DNSSEC at all (a warning, the order goes on).
const PLAIN_ZONE: &str = r#"$ORIGIN plain.test.
$TTL 300
@ IN SOA ns.plain.test. host.plain.test. 1 3600 600 86400 300
@ IN NS ns.plain.test.
ns IN A 127.0.0.1
www IN A 127.0.0.1
www IN CAA 0 issue "OURS"
"#;

/// Whether nsd, unbound and the ldns tools are installed: `false` (with a notice) when not,
/// a panic when `CI` is set.
pub(crate) fn require() -> bool {
    let missing: Vec<&str> = ["nsd", "unbound", "ldns-keygen", "ldns-signzone"]
        .into_iter()
        .filter(|p| cert_agent::testing::process::find_program(p).is_none())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{missing:?} not installed (apt-get install nsd unbound ldnsutils)");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this test must not be skipped");
    }
    eprintln!("skipping: {msg}");
    false
}

/// The zones nsd serves and unbound asks it for.
const ZONES: [&str; 3] = ["ok.test", "bad.test", "plain.test"];

/// nsd and unbound running for one test.
pub(crate) struct DnsWorld {
    nsd: Child,
    unbound: Child,
    /// The validating resolver, for `[preflight] resolver`.
    pub resolver: SocketAddr,
    _dir: tempfile::TempDir,
}

fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Signs `zone` (text for `name`) in `dir`; returns the DS of its key-signing key.
fn sign(dir: &Path, name: &str, zone: &str) -> String {
    let zone = zone.replace("OURS", OURS).replace("ELSEWHERE", ELSEWHERE);
    fs::write(dir.join(format!("{name}.zone")), zone).unwrap();
    let ksk = run(dir, "ldns-keygen", &["-a", "ECDSAP256SHA256", "-k", name]);
    let zsk = run(dir, "ldns-keygen", &["-a", "ECDSAP256SHA256", name]);
    run(dir, "ldns-signzone", &[&format!("{name}.zone"), &ksk, &zsk]);
    fs::read_to_string(dir.join(format!("{ksk}.ds"))).unwrap()
}

fn wait_for(addr: SocketAddr, what: &str, child: &mut Child) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited: {status}");
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not listen on {addr}");
}

impl DnsWorld {
    pub(crate) fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut anchors = sign(d, "ok.test", OK_ZONE);
        anchors.push_str(&sign(d, "bad.test", BAD_ZONE));
        // A CAA and a TXT record changed after signing: their RRSIGs no longer match (bogus).
        let signed = d.join("bad.test.zone.signed");
        let text = fs::read_to_string(&signed).unwrap();
        let text = text
            .replace(OURS, "s-two.partner-sandbox.test")
            .replace("SIGNED-TOKEN", "ALTERED-TOKEN");
        fs::write(&signed, text).unwrap();
        fs::write(d.join("anchors"), anchors).unwrap();
        fs::write(d.join("plain.test.zone"), PLAIN_ZONE.replace("OURS", OURS)).unwrap();

        let (nsd_port, unbound_port) = free_port_pair();
        let p = d.display();
        fs::write(
            d.join("nsd.conf"),
            format!(
                "server:\n  ip-address: 127.0.0.1\n  port: {nsd_port}\n  zonesdir: \"{p}\"\n  \
                 database: \"\"\n  pidfile: \"{p}/nsd.pid\"\n  xfrdfile: \"{p}/xfrd.state\"\n  \
                 zonelistfile: \"{p}/zone.list\"\n  username: \"\"\n  chroot: \"\"\n\
                 remote-control:\n  control-enable: no\n\
                 zone:\n  name: ok.test\n  zonefile: ok.test.zone.signed\n\
                 zone:\n  name: bad.test\n  zonefile: bad.test.zone.signed\n\
                 zone:\n  name: plain.test\n  zonefile: plain.test.zone\n"
            ),
        )
        .unwrap();
        let mut unbound_conf = format!(
            "server:\n  interface: 127.0.0.1\n  port: {unbound_port}\n  do-daemonize: no\n  \
             username: \"\"\n  chroot: \"\"\n  directory: \"{p}\"\n  pidfile: \"{p}/unbound.pid\"\n  \
             use-syslog: no\n  logfile: \"\"\n  do-not-query-localhost: no\n  \
             access-control: 127.0.0.0/8 allow\n  trust-anchor-file: \"{p}/anchors\"\n  \
             module-config: \"validator iterator\"\n  verbosity: 0\n"
        );
        for zone in ZONES {
            unbound_conf.push_str(&format!("  local-zone: \"{zone}.\" transparent\n"));
        }
        unbound_conf.push_str("remote-control:\n  control-enable: no\n");
        for zone in ZONES {
            unbound_conf.push_str(&format!(
                "stub-zone:\n  name: \"{zone}\"\n  stub-addr: 127.0.0.1@{nsd_port}\n"
            ));
        }
        fs::write(d.join("unbound.conf"), unbound_conf).unwrap();
        let spawn = |program: &str, conf: &str| {
            Command::new(program)
                .args(["-d", "-c"])
                .arg(d.join(conf))
                .current_dir(d)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{program}: {e}"))
        };
        let mut nsd = spawn("nsd", "nsd.conf");
        wait_for(([127, 0, 0, 1], nsd_port).into(), "nsd", &mut nsd);
        let mut unbound = spawn("unbound", "unbound.conf");
        let resolver: SocketAddr = ([127, 0, 0, 1], unbound_port).into();
        wait_for(resolver, "unbound", &mut unbound);
        DnsWorld {
            nsd,
            unbound,
            resolver,
            _dir: dir,
        }
    }

    /// The `[preflight]` section that asks this world's resolver.
    pub(crate) fn section(&self) -> String {
        format!(
            "\n[preflight]\nresolver = \"{}\"\ntimeout_secs = 3\n",
            self.resolver
        )
    }
}

impl Drop for DnsWorld {
    fn drop(&mut self) {
        for child in [&mut self.nsd, &mut self.unbound] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
