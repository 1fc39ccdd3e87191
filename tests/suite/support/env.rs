//! The world of one end-to-end test: a temporary directory, a running sandbox (instant
//! validation and issuance), the configuration and password file for the real `cert-agent`
//! binary, and helpers to run it, read its state and installed files, and look at what a
//! server serves over TLS (a rustls client trusting only the sandbox's issuing root).
//!
//! The configuration is rewritten before every run from [`TestEnv::certs`] and the `[agent]`
//! knobs, so a test can change them between runs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use partner_sandbox::{CallRecord, Sandbox, SandboxConfig, SandboxHandle};
use rcgen::PublicKeyData;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// The sandbox partner account used by every test.
pub(crate) const LOGIN: &str = "partner@sandbox.test";
/// Its password.
pub(crate) const PASSWORD: &str = "sandbox";
/// Longest a single agent run may take before the test kills it and fails.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// The order call's path.
pub(crate) const ORDER_PATH: &str = "/api/v1/order";

/// How the validation file is published.
#[derive(Debug, Clone)]
pub(crate) enum Publish {
    /// `webroot = DIR`.
    Webroot(PathBuf),
    /// `webroot = { "name" = "DIR", ... }`: a document root per domain.
    WebrootPerDomain(Vec<(String, PathBuf)>),
    /// `standalone = true`, `listen = "127.0.0.1:PORT"`.
    Standalone(u16),
    /// Neither (DNS methods).
    Nothing,
}

/// The install paths of one certificate; `None` = not configured (not written).
#[derive(Debug, Clone, Default)]
pub(crate) struct InstallFiles {
    pub cert: Option<PathBuf>,
    pub chain: Option<PathBuf>,
    pub fullchain: Option<PathBuf>,
    pub key: PathBuf,
}

impl InstallFiles {
    /// Every configured path (certificate files first, the key last).
    pub(crate) fn all(&self) -> Vec<PathBuf> {
        [&self.cert, &self.chain, &self.fullchain]
            .into_iter()
            .flatten()
            .cloned()
            .chain(std::iter::once(self.key.clone()))
            .collect()
    }

    /// The file holding the leaf first: fullchain for nginx-like layouts, else cert.
    pub(crate) fn leaf_file(&self) -> PathBuf {
        self.fullchain
            .clone()
            .or_else(|| self.cert.clone())
            .expect("a certificate path")
    }
}

/// One `[[certificate]]`.
#[derive(Debug, Clone)]
pub(crate) struct CertSpec {
    pub name: String,
    pub domains: Vec<String>,
    pub product_id: u64,
    /// `dcv = "..."`; `None` leaves the default (http).
    pub dcv: Option<String>,
    pub publish: Publish,
    /// `nginx`, `apache` or `none`.
    pub server: String,
    pub files: InstallFiles,
    pub configtest_command: Option<Vec<String>>,
    pub reload_command: Option<Vec<String>>,
    /// `verify_address`; `""` disables the check.
    pub verify_address: String,
    pub dns_hook: Option<Vec<String>>,
    /// Raw TOML lines appended to the section.
    pub extra: String,
}

impl CertSpec {
    /// Points the layout at a web server: `server`, config test, reload and verification.
    pub(crate) fn served_by(
        mut self,
        server: &str,
        configtest: Vec<String>,
        reload: Vec<String>,
        verify_address: String,
    ) -> Self {
        self.server = server.to_string();
        self.configtest_command = Some(configtest);
        self.reload_command = Some(reload);
        self.verify_address = verify_address;
        self
    }

    pub(crate) fn common_name(&self) -> &str {
        &self.domains[0]
    }
}

/// What one agent run did.
#[derive(Debug, Clone)]
pub(crate) struct AgentOutput {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub args: Vec<String>,
}

impl AgentOutput {
    /// Everything, for assertion messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "cert-agent {:?} exited {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.args, self.code, self.stdout, self.stderr
        )
    }

    /// Panics (with the output) unless the exit code is `code`.
    #[track_caller]
    pub(crate) fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n{}",
            self.describe()
        );
        self
    }

    /// Panics unless the run failed (non-zero exit, not killed).
    #[track_caller]
    pub(crate) fn expect_failure(&self) -> &Self {
        assert!(
            matches!(self.code, Some(c) if c != 0),
            "the run should have failed\n{}",
            self.describe()
        );
        self
    }

    /// stdout parsed as JSON (runs with `--json`).
    #[track_caller]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{}", self.describe()))
    }

    /// The report line of certificate `name` (runs with `--json`).
    #[track_caller]
    pub(crate) fn outcome(&self, name: &str) -> serde_json::Value {
        let json = self.json();
        json["certificates"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no report for '{name}'\n{}", self.describe()))
    }

    /// The serial the run reported as installed for `name` (runs with `--json`), normalised.
    #[track_caller]
    pub(crate) fn installed_serial(&self, name: &str) -> String {
        let o = self.outcome(name);
        assert_eq!(
            o["outcome"],
            "installed",
            "'{name}' was not installed\n{}",
            self.describe()
        );
        norm_serial(o["serial"].as_str().expect("serial string"))
    }

    /// stdout and stderr together, for message checks.
    pub(crate) fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// One test's world. Fields drop in order: the sandbox stops before the directory goes.
pub(crate) struct TestEnv {
    pub sandbox: SandboxHandle,
    pub certs: Vec<CertSpec>,
    pub allow_orders: bool,
    pub max_order_price: Option<String>,
    pub poll_interval_secs: u64,
    /// Raw TOML lines appended to `[agent]`.
    pub agent_extra: String,
    /// Raw TOML lines appended to `[api]`.
    pub api_extra: String,
    /// Raw TOML appended after the certificates (further tables, such as `[acme.NAME]`).
    pub tail_extra: String,
    /// The `[preflight]` section: off unless a test sets it (the tests' names are not in DNS).
    pub preflight: String,
    /// Working directory of the agent: `DIR/cwd/a/b` (so `../x` and `../../x` stay inside DIR).
    pub cwd: PathBuf,
    runs: AtomicU32,
    pub dir: tempfile::TempDir,
}

impl TestEnv {
    /// A fresh world with an instant sandbox.
    pub(crate) fn new() -> Self {
        Self::with_sandbox(SandboxConfig::default().instant(true))
    }

    /// A fresh world with a sandbox started from `config`.
    pub(crate) fn with_sandbox(config: SandboxConfig) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        // Web server workers (apache runs them as nobody) must reach the web roots.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let sandbox = Sandbox::start(config).expect("sandbox starts");
        let password = dir.path().join("password");
        fs::write(&password, PASSWORD).unwrap();
        fs::set_permissions(&password, fs::Permissions::from_mode(0o600)).unwrap();
        let cwd = dir.path().join("cwd/a/b");
        fs::create_dir_all(&cwd).unwrap();
        for sub in ["out", "logs"] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        TestEnv {
            sandbox,
            certs: Vec::new(),
            allow_orders: true,
            max_order_price: None,
            poll_interval_secs: 1,
            agent_extra: String::new(),
            api_extra: String::new(),
            tail_extra: String::new(),
            preflight: "\n[preflight]\ncaa = false\ndnssec = false\nhttp = false\n".to_owned(),
            cwd,
            runs: AtomicU32::new(0),
            dir,
        }
    }

    /// `DIR/rel`.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub(crate) fn state_dir(&self) -> PathBuf {
        self.path("state")
    }

    pub(crate) fn config_path(&self) -> PathBuf {
        self.path("config.toml")
    }

    /// A certificate for `domains` (product 1101, single name DV), files for `server` under
    /// `DIR/out/NAME/`, not yet validated anywhere (set `publish`), no verification.
    pub(crate) fn cert_spec(&self, name: &str, domains: &[&str], server: &str) -> CertSpec {
        let out = self.path(&format!("out/{name}"));
        fs::create_dir_all(&out).unwrap();
        let f = |n: &str| Some(out.join(n));
        let files = match server {
            "nginx" => InstallFiles {
                fullchain: f("fullchain.pem"),
                key: out.join("privkey.pem"),
                ..Default::default()
            },
            "apache" => InstallFiles {
                cert: f("certificate.crt"),
                chain: f("ca_bundle.crt"),
                key: out.join("private.key"),
                ..Default::default()
            },
            _ => InstallFiles {
                cert: f("cert.pem"),
                chain: f("chain.pem"),
                fullchain: f("fullchain.pem"),
                key: out.join("privkey.pem"),
            },
        };
        CertSpec {
            name: name.to_string(),
            domains: domains.iter().map(|s| s.to_string()).collect(),
            product_id: 1101,
            dcv: None,
            publish: Publish::Nothing,
            server: server.to_string(),
            files,
            configtest_command: None,
            reload_command: None,
            verify_address: String::new(),
            dns_hook: None,
            extra: String::new(),
        }
    }

    /// A certificate served by the built-in DCV server on a free port, whose port the sandbox
    /// fetches from; files only (`server = "none"`).
    pub(crate) fn standalone_spec(&self, name: &str, domains: &[&str]) -> CertSpec {
        let port = super::webserver::free_port();
        self.sandbox.set_dcv_ports(port, 0);
        let mut spec = self.cert_spec(name, domains, "none");
        spec.publish = Publish::Standalone(port);
        spec
    }

    /// The certificate named `name`.
    pub(crate) fn spec(&self, name: &str) -> &CertSpec {
        self.certs
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no certificate '{name}' configured"))
    }

    pub(crate) fn spec_mut(&mut self, name: &str) -> &mut CertSpec {
        self.certs
            .iter_mut()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no certificate '{name}' configured"))
    }

    /// The configuration text for the current settings.
    pub(crate) fn config_text(&self) -> String {
        let mut c = String::new();
        let s = |v: &str| toml_str(v);
        writeln!(c, "[api]").unwrap();
        writeln!(c, "base_url = {}", s(self.sandbox.base_url())).unwrap();
        writeln!(c, "login = {}", s(LOGIN)).unwrap();
        writeln!(
            c,
            "password_file = {}",
            s(&path_str(&self.path("password")))
        )
        .unwrap();
        writeln!(c, "ca_file = {}", s(&path_str(&self.sandbox.api_ca_path()))).unwrap();
        c.push_str(&self.api_extra);
        writeln!(c, "\n[agent]").unwrap();
        writeln!(c, "state_dir = {}", s(&path_str(&self.state_dir()))).unwrap();
        // `serve` started as root switches to a user of the test host (the packages create
        // the default, cert-agent-serve).
        if !self.agent_extra.contains("serve_user") {
            writeln!(c, "serve_user = \"nobody\"").unwrap();
        }
        writeln!(c, "poll_interval_secs = {}", self.poll_interval_secs).unwrap();
        writeln!(c, "allow_orders = {}", self.allow_orders).unwrap();
        if let Some(max) = &self.max_order_price {
            writeln!(c, "max_order_price = {}", s(max)).unwrap();
        }
        c.push_str(&self.agent_extra);
        writeln!(
            c,
            "\n[defaults]\ncountry = \"DE\"\nregion = \"Berlin\"\ncity = \"Berlin\""
        )
        .unwrap();
        for cert in &self.certs {
            writeln!(c, "\n[[certificate]]").unwrap();
            writeln!(c, "name = {}", s(&cert.name)).unwrap();
            writeln!(c, "domains = {}", toml_list(&cert.domains)).unwrap();
            writeln!(c, "product_id = {}", cert.product_id).unwrap();
            if let Some(dcv) = &cert.dcv {
                writeln!(c, "dcv = {}", s(dcv)).unwrap();
            }
            match &cert.publish {
                Publish::Webroot(dir) => {
                    writeln!(c, "webroot = {}", s(&path_str(dir))).unwrap();
                }
                Publish::WebrootPerDomain(map) => {
                    let entries = map
                        .iter()
                        .map(|(d, p)| format!("{} = {}", s(d), s(&path_str(p))))
                        .collect::<Vec<_>>()
                        .join(", ");
                    writeln!(c, "webroot = {{ {entries} }}").unwrap();
                }
                Publish::Standalone(port) => {
                    writeln!(c, "standalone = true\nlisten = \"127.0.0.1:{port}\"").unwrap();
                }
                Publish::Nothing => {}
            }
            writeln!(c, "server = {}", s(&cert.server)).unwrap();
            let files = &cert.files;
            for (key, p) in [
                ("cert_path", &files.cert),
                ("chain_path", &files.chain),
                ("fullchain_path", &files.fullchain),
            ] {
                if let Some(p) = p {
                    writeln!(c, "{key} = {}", s(&path_str(p))).unwrap();
                }
            }
            writeln!(c, "key_path = {}", s(&path_str(&files.key))).unwrap();
            if let Some(cmd) = &cert.configtest_command {
                writeln!(c, "configtest_command = {}", toml_list(cmd)).unwrap();
            }
            if let Some(cmd) = &cert.reload_command {
                writeln!(c, "reload_command = {}", toml_list(cmd)).unwrap();
            }
            if let Some(cmd) = &cert.dns_hook {
                writeln!(c, "dns_hook = {}", toml_list(cmd)).unwrap();
            }
            writeln!(c, "verify_address = {}", s(&cert.verify_address)).unwrap();
            c.push_str(&cert.extra);
        }
        c.push_str(&self.tail_extra);
        c.push_str(&self.preflight);
        c
    }

    /// Writes `config.toml` from the current settings.
    pub(crate) fn write_config(&self) -> PathBuf {
        let path = self.config_path();
        fs::write(&path, self.config_text()).unwrap();
        path
    }

    /// The agent with `args` (after `--config`); nothing runs until [`Agent::run`] or
    /// [`Agent::spawn`]. The configuration is written when it runs.
    pub(crate) fn agent<I, S>(&self, args: I) -> Agent<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Agent {
            env: self,
            args: args.into_iter().map(Into::into).collect(),
            config: None,
            vars: Vec::new(),
        }
    }

    /// The agent with the configuration file `config` (written by the caller) and `args`.
    pub(crate) fn agent_at<I, S>(&self, config: &Path, args: I) -> Agent<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Agent {
            config: Some(config.to_path_buf()),
            ..self.agent(args)
        }
    }

    /// `renew --json --wait 30`.
    pub(crate) fn renew(&self) -> AgentOutput {
        self.agent(["--json", "renew", "--wait", "30"]).run()
    }

    /// `renew --json --wait 30 --force`: also retries certificates whose last attempt failed
    /// (they are otherwise left alone for a while).
    pub(crate) fn renew_force(&self) -> AgentOutput {
        self.agent(["--json", "renew", "--wait", "30", "--force"])
            .run()
    }

    /// The stored record of `name` (`state_dir/certs/NAME.json`), if any.
    pub(crate) fn record(&self, name: &str) -> Option<serde_json::Value> {
        let p = self.state_dir().join(format!("certs/{name}.json"));
        let text = fs::read_to_string(p).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Rewrites the stored record of `name` with `edit` applied.
    pub(crate) fn edit_record(&self, name: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let p = self.state_dir().join(format!("certs/{name}.json"));
        let mut v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
        edit(&mut v);
        fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }

    /// Adds a `metrics_file` (`metrics.prom`) and a `notify_command` that logs each
    /// notification's JSON document as one line (`notify.log`), both beside the state
    /// directory; read them with [`TestEnv::metric`] and [`TestEnv::notified`].
    pub(crate) fn watch_surfaces(&mut self) {
        let hook = format!(
            "cat >> '{log}'; echo >> '{log}'",
            log = self.path("notify.log").display()
        );
        self.agent_extra.push_str(&format!(
            "metrics_file = \"{}\"\nnotify_command = [\"/bin/sh\", \"-c\", {hook:?}]\n",
            self.path("metrics.prom").display()
        ));
    }

    /// The value of metric `family` for certificate `name` in the metrics file of
    /// [`TestEnv::watch_surfaces`], if written.
    pub(crate) fn metric(&self, family: &str, name: &str) -> Option<f64> {
        let text = fs::read_to_string(self.path("metrics.prom")).ok()?;
        let start = format!("{family}{{name=\"{name}\"");
        text.lines()
            .find(|l| l.starts_with(&start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// Every event `notify_command` received (see [`TestEnv::watch_surfaces`]), in order.
    pub(crate) fn notified(&self) -> Vec<serde_json::Value> {
        let text = fs::read_to_string(self.path("notify.log")).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .flat_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["events"].as_array().cloned().unwrap_or_default()
            })
            .collect()
    }

    /// The journal (`state_dir/journal.log`).
    pub(crate) fn journal(&self) -> String {
        fs::read_to_string(self.state_dir().join("journal.log")).unwrap_or_default()
    }

    /// Billed orders of the test account.
    pub(crate) fn billed(&self) -> u64 {
        self.sandbox.billed_orders(LOGIN)
    }

    /// The partner-API calls so far.
    pub(crate) fn calls(&self) -> Vec<CallRecord> {
        self.sandbox.calls()
    }

    /// `POST /api/v1/order` calls so far.
    pub(crate) fn order_posts(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.method == "POST" && c.path == ORDER_PATH)
            .count()
    }

    /// Writes a self-signed placeholder certificate for `spec`'s names at every configured
    /// path (chain files get the certificate too) and its key, 0600; returns their bytes.
    pub(crate) fn write_placeholder(&self, spec: &CertSpec) -> BTreeMap<PathBuf, Vec<u8>> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(spec.domains.clone()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, spec.common_name());
        let cert = params.self_signed(&key).unwrap();
        let files = &spec.files;
        for p in [&files.cert, &files.chain, &files.fullchain]
            .into_iter()
            .flatten()
        {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, cert.pem()).unwrap();
        }
        fs::create_dir_all(files.key.parent().unwrap()).unwrap();
        fs::write(&files.key, key.serialize_pem()).unwrap();
        fs::set_permissions(&files.key, fs::Permissions::from_mode(0o600)).unwrap();
        snapshot(&files.all())
    }

    /// The web server site for `spec` (nginx: fullchain; apache: cert + chain).
    pub(crate) fn site(&self, spec: &CertSpec, webroot: &Path) -> super::webserver::Site {
        let f = &spec.files;
        let site = super::webserver::Site::new(spec.common_name(), f.leaf_file(), &f.key, webroot)
            .with_aliases(
                &spec.domains[1..]
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            );
        match (&f.cert, &f.chain, &f.fullchain) {
            (Some(cert), Some(chain), None) => {
                let mut s = site.with_chain(chain);
                s.cert_path = cert.clone();
                s
            }
            _ => site,
        }
    }

    /// The leaf served at `addr` for SNI `name`, trusted through the sandbox root only.
    pub(crate) fn served_leaf(&self, addr: &str, name: &str) -> Result<Leaf, String> {
        served_leaf(&self.sandbox.root_path(), addr, name)
    }

    /// [`served_leaf`](Self::served_leaf), retried for up to 10 s until its serial is
    /// `serial` (a graceful reload settles asynchronously); the last leaf or error otherwise.
    pub(crate) fn served_leaf_with_serial(
        &self,
        addr: &str,
        name: &str,
        serial: &str,
    ) -> Result<Leaf, String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.served_leaf(addr, name);
            match &got {
                Ok(l) if l.serial == serial => return got,
                _ if Instant::now() > deadline => return got,
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Every file under DIR except the agent's state and the web servers' own runtime files,
    /// with its bytes.
    pub(crate) fn tree(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let skip = [
            self.state_dir(),
            self.path("logs"),
            self.path("nginx"),
            self.path("apache"),
            self.config_path(),
        ];
        walk(self.dir.path(), &skip, &mut out);
        out
    }
}

fn walk(dir: &Path, skip: &[PathBuf], out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if skip.contains(&p) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            walk(&p, skip, out);
        } else if meta.file_type().is_symlink() {
            let target = fs::read_link(&p).unwrap_or_default();
            out.insert(p, format!("symlink -> {}", target.display()).into_bytes());
        } else {
            out.insert(p.clone(), fs::read(&p).unwrap_or_default());
        }
    }
}

/// The bytes of each existing path.
pub(crate) fn snapshot(paths: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
    paths
        .iter()
        .filter_map(|p| fs::read(p).ok().map(|b| (p.clone(), b)))
        .collect()
}

/// A run of the agent being prepared.
pub(crate) struct Agent<'a> {
    env: &'a TestEnv,
    args: Vec<OsString>,
    /// A configuration file of the caller's; `None`: the environment's, written at start.
    config: Option<PathBuf>,
    /// Extra environment variables.
    vars: Vec<(OsString, OsString)>,
}

impl Agent<'_> {
    pub(crate) fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Sets an environment variable of the run.
    pub(crate) fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.vars.push((key.into(), value.into()));
        self
    }

    fn command(&self) -> (Command, Vec<String>, PathBuf, PathBuf) {
        let config = match &self.config {
            Some(c) => c.clone(),
            None => self.env.write_config(),
        };
        let n = self.env.runs.fetch_add(1, Ordering::Relaxed);
        let out = self.env.path(&format!("logs/run-{n}.out"));
        let err = self.env.path(&format!("logs/run-{n}.err"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cert-agent"));
        cmd.arg("--config")
            .arg(&config)
            .args(&self.args)
            .current_dir(&self.env.cwd)
            .env_remove("CERT_AGENT_CONFIG")
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap());
        let args = self
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        (cmd, args, out, err)
    }

    /// Runs to completion (killed and failed after [`RUN_TIMEOUT`]).
    #[track_caller]
    pub(crate) fn run(self) -> AgentOutput {
        self.run_within(RUN_TIMEOUT)
    }

    /// Runs to completion (killed and failed after `limit`: a run over many certificates).
    #[track_caller]
    pub(crate) fn run_within(self, limit: Duration) -> AgentOutput {
        let (mut cmd, args, out, err) = self.command();
        let mut child = cmd.spawn().expect("cert-agent starts");
        let status = wait_exit(&mut child, limit);
        let output = AgentOutput {
            code: status.and_then(|s| s.code()),
            stdout: fs::read_to_string(out).unwrap_or_default(),
            stderr: fs::read_to_string(err).unwrap_or_default(),
            args,
        };
        assert!(
            status.is_some(),
            "cert-agent did not finish within {limit:?}\n{}",
            output.describe()
        );
        output
    }

    /// Starts the agent in the background.
    pub(crate) fn spawn(self) -> Child {
        let (mut cmd, _, _, _) = self.command();
        cmd.spawn().expect("cert-agent starts")
    }
}

fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => write!(out, "\\u{:04X}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn toml_list(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|i| toml_str(i))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn path_str(p: &Path) -> String {
    p.to_str().expect("UTF-8 path").to_string()
}

/// Upper-case hex without leading zero bytes.
pub(crate) fn norm_serial(s: &str) -> String {
    let s = s.trim().to_ascii_uppercase().replace(':', "");
    let t = s.trim_start_matches('0');
    if t.is_empty() { "0".into() } else { t.into() }
}

/// A served (or installed) leaf certificate.
#[derive(Debug, Clone)]
pub(crate) struct Leaf {
    pub der: Vec<u8>,
    /// Upper-case hex, no leading zeros.
    pub serial: String,
    /// DER SubjectPublicKeyInfo.
    pub spki: Vec<u8>,
    pub dns_names: Vec<String>,
    pub issuer: String,
}

impl Leaf {
    pub(crate) fn from_der(der: &[u8]) -> Self {
        let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a certificate");
        let dns_names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|g| match g {
                        x509_parser::extensions::GeneralName::DNSName(n) => Some(n.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Leaf {
            der: der.to_vec(),
            serial: norm_serial(&hex::encode(cert.raw_serial())),
            spki: cert.public_key().raw.to_vec(),
            dns_names,
            issuer: cert.issuer().to_string(),
        }
    }

    /// The first certificate of a PEM file.
    pub(crate) fn from_pem_file(path: &Path) -> Self {
        let der = CertificateDer::pem_file_iter(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .next()
            .unwrap_or_else(|| panic!("{}: no certificate", path.display()))
            .unwrap();
        Self::from_der(&der)
    }
}

/// DER SubjectPublicKeyInfo of a PEM private key file.
pub(crate) fn key_spki(path: &Path) -> Vec<u8> {
    let pem = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rcgen::KeyPair::from_pem(&pem)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .subject_public_key_info()
}

/// A TLS handshake with `addr` (SNI `name`), verifying the chain against `root` (PEM) and the
/// name; returns the leaf.
/// [`served_leaf`] retried for up to 10 s until the served leaf has `serial` (a graceful
/// reload settles asynchronously); panics with the last leaf or error otherwise.
pub(crate) fn served_leaf_until(root: &Path, addr: &str, name: &str, serial: &str) -> Leaf {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match served_leaf(root, addr, name) {
            Ok(l) if l.serial == serial => return l,
            other if Instant::now() > deadline => panic!("served for {name}: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

pub(crate) fn served_leaf(root: &Path, addr: &str, name: &str) -> Result<Leaf, String> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_file_iter(root).map_err(|e| e.to_string())? {
        roots
            .add(der.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
    let conn =
        rustls::ClientConnection::new(Arc::new(config), server_name).map_err(|e| e.to_string())?;
    let sock = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).ok();
    sock.set_write_timeout(Some(Duration::from_secs(5))).ok();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("TLS handshake with {addr} (SNI {name}): {e}"))?;
    }
    let leaf = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no certificate served")?;
    Ok(Leaf::from_der(leaf))
}

/// Writes an executable `sh` script.
pub(crate) fn write_script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Waits for `child` to exit; kills it (and returns `None`) after `limit`.
pub(crate) fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `check` until it is true or `timeout` passes (see [`super::wait`]).
pub(crate) fn wait_until(timeout: Duration, check: impl FnMut() -> bool) -> bool {
    super::wait::poll(timeout, check)
}

/// A real web server under the test's directory.
pub(crate) enum Web {
    Nginx(super::webserver::Nginx),
    Apache(super::webserver::Apache),
}

impl Web {
    /// Starts `kind` on free ports for `sites`.
    pub(crate) fn start(
        kind: super::webserver::Server,
        dir: &Path,
        sites: &[super::webserver::Site],
    ) -> Self {
        use super::webserver::{Apache, Nginx, Server};
        match kind {
            Server::Nginx => {
                Web::Nginx(Nginx::start_on_free_ports(dir, sites).expect("nginx starts"))
            }
            Server::Apache => {
                Web::Apache(Apache::start_on_free_ports(dir, sites).expect("apache2 starts"))
            }
        }
    }

    /// `nginx` or `apache` (the `server` value).
    pub(crate) fn server_name(&self) -> &'static str {
        match self {
            Web::Nginx(_) => "nginx",
            Web::Apache(_) => "apache",
        }
    }

    pub(crate) fn configtest_command(&self) -> Vec<String> {
        match self {
            Web::Nginx(n) => n.configtest_command(),
            Web::Apache(a) => a.configtest_command(),
        }
    }

    pub(crate) fn reload_command(&self) -> Vec<String> {
        match self {
            Web::Nginx(n) => n.reload_command(),
            Web::Apache(a) => a.reload_command(),
        }
    }

    pub(crate) fn https_addr(&self) -> String {
        match self {
            Web::Nginx(n) => n.https_addr(),
            Web::Apache(a) => a.https_addr(),
        }
    }

    pub(crate) fn https_port(&self) -> u16 {
        match self {
            Web::Nginx(n) => n.https_port,
            Web::Apache(a) => a.https_port,
        }
    }

    pub(crate) fn http_port(&self) -> u16 {
        match self {
            Web::Nginx(n) => n.http_port,
            Web::Apache(a) => a.http_port,
        }
    }

    pub(crate) fn logs(&self) -> String {
        match self {
            Web::Nginx(n) => n.logs(),
            Web::Apache(a) => a.logs(),
        }
    }

    /// Makes `spec` install for this server: config test, reload and verification here.
    pub(crate) fn configure(&self, spec: CertSpec) -> CertSpec {
        spec.served_by(
            self.server_name(),
            self.configtest_command(),
            self.reload_command(),
            self.https_addr(),
        )
    }
}

/// Every regular file under `dir` (recursively).
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = BTreeMap::new();
    walk(dir, &[], &mut out);
    out.into_keys().collect()
}

/// The main job end to end with a real web server `kind`: a placeholder certificate is
/// served; `cert-agent renew` (orders allowed) orders once, the sandbox fetches the
/// validation file through the server from the web root, the bundle is installed, the server
/// reloaded, and a client trusting the sandbox root sees the new leaf (our key, the printed
/// serial, the name). The validation file is gone afterwards, and a second run makes no API
/// call at all.
pub(crate) fn web_server_flow(kind: super::webserver::Server, domain: &str) {
    if !super::webserver::require(kind) {
        return;
    }
    let mut env = TestEnv::new();
    let server = match kind {
        super::webserver::Server::Nginx => "nginx",
        super::webserver::Server::Apache => "apache",
    };
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &[domain], server);
    spec.publish = Publish::Webroot(webroot.clone());
    let placeholder = env.write_placeholder(&spec);
    let web = Web::start(kind, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    let spec = web.configure(spec);
    let files = spec.files.clone();
    env.certs.push(spec);

    // The placeholder is served and is not trusted by the sandbox root.
    let before = env.served_leaf(&web.https_addr(), domain);
    assert!(
        before.is_err(),
        "the placeholder must not verify: {before:?}"
    );

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");

    // Served: our key, the printed serial, the name, a chain to the sandbox root.
    let leaf = env
        .served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap_or_else(|e| panic!("served leaf: {e}\n{}\n{}", out.describe(), web.logs()));
    assert_eq!(leaf.serial, serial, "served serial is the reported one");
    assert_eq!(
        leaf.spki,
        key_spki(&files.key),
        "the served leaf is for the installed private key"
    );
    assert!(
        leaf.dns_names.iter().any(|n| n == domain),
        "served leaf names {:?}",
        leaf.dns_names
    );
    // The files on disk are what is served, and the key stays private.
    assert_eq!(Leaf::from_pem_file(&files.leaf_file()).serial, serial);
    for p in files.all() {
        assert_ne!(
            fs::read(&p).ok(),
            placeholder.get(&p).cloned(),
            "{} was replaced",
            p.display()
        );
    }
    let key_mode = fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(key_mode & 0o077, 0, "key mode {key_mode:o}");

    // apache: the leaf alone in the certificate file, the intermediates alone in the chain.
    if let (Some(cert), Some(chain)) = (&files.cert, &files.chain) {
        let cert_pem = fs::read_to_string(cert).unwrap();
        let chain_pem = fs::read_to_string(chain).unwrap();
        assert_eq!(
            cert_pem.matches("BEGIN CERTIFICATE").count(),
            1,
            "{cert_pem}"
        );
        assert!(
            chain_pem.matches("BEGIN CERTIFICATE").count() >= 1,
            "{chain_pem}"
        );
        assert!(
            !chain_pem.contains(cert_pem.trim()),
            "the leaf is not in the chain file"
        );
    }

    // Billed once; validated through the web server; nothing left in the web root.
    assert_eq!(env.billed(), 1, "exactly one billed order");
    assert_eq!(env.order_posts(), 1);
    if let Web::Nginx(n) = &web {
        let access = fs::read_to_string(n.prefix().join("logs/access.log")).unwrap_or_default();
        assert!(
            access
                .lines()
                .any(|l| l.contains("GET /.well-known/pki-validation/") && l.contains("\" 200 ")),
            "the sandbox fetched the validation file through nginx:\n{access}"
        );
    }
    let left = files_under(&webroot);
    assert!(
        left.is_empty(),
        "validation files left in the web root: {left:?}"
    );

    // Nothing due: no API call at all.
    let calls = env.calls().len();
    let again = env.renew();
    again.expect_code(0);
    assert_eq!(
        again.outcome("www")["outcome"],
        "unchanged",
        "{}",
        again.describe()
    );
    assert_eq!(
        env.calls().len(),
        calls,
        "a run with nothing due makes no API call: {:?}",
        &env.calls()[calls..]
    );
    assert_eq!(env.billed(), 1);
    // Still served (an old worker of the reload may answer a moment longer under load).
    let still = env
        .served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap();
    assert_eq!(still.serial, serial);
}
