//! Fleet mode end to end: a real three-member etcd cluster, three hosts (each its own state
//! directory, configuration and real nginx), one sandbox whose validator fetches from a host
//! that is not the leader. One billed order for the fleet; every host serves the same serial;
//! a reissue reaches every host; `fleet status` reports the hosts; etcd without quorum stops
//! orders and keeps what is served; a host whose install fails rolls back alone; a revoked
//! certificate is replaced once for the fleet.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use support::env::{AgentOutput, InstallFiles, Publish, TestEnv, Web, norm_serial, wait_until};
use support::etcd::{self, EtcdClient, EtcdCluster};
use support::webserver::{Server, require};

/// One host of the fleet.
pub(crate) struct Host {
    pub(crate) name: String,
    pub(crate) web: Web,
    pub(crate) config: PathBuf,
    pub(crate) state: PathBuf,
    daemon: Option<Child>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop_daemon();
    }
}

impl Host {
    fn stop_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) struct Fleet {
    pub(crate) hosts: Vec<Host>,
    pub(crate) env: TestEnv,
    /// The cluster, when this fleet started its own.
    own_cluster: Option<EtcdCluster>,
    /// The hosts' `[fleet] prefix`.
    prefix: String,
}

pub(crate) const DOMAIN: &str = "www.fleet.test";

/// `run`'s arguments for a daemon that only follows the fleet for the length of a test: its
/// first scheduled run (which may lead, and carry on an order another host's run placed)
/// comes after an hour.
pub(crate) const FOLLOW_ONLY: &[&str] = &["--first-run-delay", "3600"];

/// A fleet's `n` certificates `c0`, `c1`, … for `c0.fleet.test`, `c1.fleet.test`, …: (name,
/// domain).
pub(crate) fn numbered(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("c{i}"), format!("c{i}.fleet.test")))
        .collect()
}

impl Fleet {
    /// `n` hosts with nginx, one certificate `www` for [`DOMAIN`]; the validator fetches from
    /// every host (see [`Fleet::build`]).
    pub(crate) fn start(n: usize) -> Self {
        Self::start_under("/cert-agent/", &vec![Server::Nginx; n], &[("www", DOMAIN)])
    }

    /// A three-member cluster of its own, one host per entry of `servers` under `prefix`, each
    /// with the certificates `certs` (see [`Fleet::build`]).
    pub(crate) fn start_under(prefix: &str, servers: &[Server], certs: &[(&str, &str)]) -> Self {
        let env = TestEnv::new();
        let cluster = EtcdCluster::start(env.dir.path(), 3);
        let mut f = Self::build(env, &cluster.endpoints(), prefix, servers, certs);
        f.own_cluster = Some(cluster);
        f
    }

    /// Two hosts with nginx on a cluster of their own, under `prefix`, one certificate `www`
    /// for [`DOMAIN`].
    pub(crate) fn pair(prefix: &str) -> Self {
        Self::start_under(prefix, &[Server::Nginx, Server::Nginx], &[("www", DOMAIN)])
    }

    /// [`pair`](Self::pair) once both hosts serve `www`: web1 ordered it (serving the
    /// validation file), web2 installed it; returns the fleet and the serial both serve.
    pub(crate) fn pair_serving(prefix: &str) -> (Self, String) {
        let f = Self::pair(prefix);
        f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
        f.agent(0, &["--json", "renew", "--wait", "60"])
            .expect_code(0);
        f.agent(1, &["--json", "renew"]).expect_code(0);
        // web2 just reloaded: every later handshake must meet the new certificate.
        let serial = f.installed(0).expect("web1 installed");
        f.wait_all_settled(&serial, Duration::from_secs(30));
        (f, serial)
    }

    pub(crate) fn cluster(&mut self) -> &mut EtcdCluster {
        self.own_cluster.as_mut().expect("a cluster of its own")
    }

    /// A client of its own cluster for the keys under the hosts' prefix.
    pub(crate) fn etcd(&self) -> EtcdClient {
        EtcdClient::connect(self.endpoints(), &self.prefix)
    }

    /// The client URLs of its own cluster.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.own_cluster
            .as_ref()
            .expect("a cluster of its own")
            .endpoints()
    }

    /// `n` hosts on the etcd members `endpoints`, under `prefix`.
    fn on(env: TestEnv, endpoints: &[String], prefix: &str, n: usize) -> Self {
        Self::build(
            env,
            endpoints,
            prefix,
            &vec![Server::Nginx; n],
            &[("www", DOMAIN)],
        )
    }

    /// One host per entry of `servers` on the etcd members `endpoints`, under `prefix`, each
    /// with the `n` certificates of [`numbered`]; the sandbox validates through web1 alone.
    pub(crate) fn numbered(
        env: TestEnv,
        endpoints: &[String],
        prefix: &str,
        servers: &[Server],
        n: usize,
    ) -> Self {
        let names = numbered(n);
        let certs: Vec<(&str, &str)> = names
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_str()))
            .collect();
        let f = Self::build(env, endpoints, prefix, servers, &certs);
        f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
        f
    }

    /// One host per entry of `servers`, each with the certificates `certs` (name, domains
    /// separated by spaces, the first the common name):
    /// `www`'s files under `out/`, the others' under `out/NAME/`, one web root. The sandbox
    /// validates through every host's HTTP port in the strict mode: a validation passes only
    /// when the file is on every host (a test may still pin one host with `set_dcv_ports`).
    pub(crate) fn build(
        mut env: TestEnv,
        endpoints: &[String],
        prefix: &str,
        servers: &[Server],
        certs: &[(&str, &str)],
    ) -> Self {
        let n = servers.len();
        let key = env.path("fleet.key");
        fs::write(&key, [0x5au8; 32]).unwrap();
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
        // The test clusters serve plain http on loopback: asked for explicitly.
        let plaintext = if endpoints.iter().any(|e| e.starts_with("http://")) {
            "insecure_plaintext = true\n"
        } else {
            ""
        };
        let endpoints = endpoints
            .iter()
            .map(|e| format!("\"{e}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let mut hosts = Vec::new();
        for i in 1..=n {
            let name = format!("web{i}");
            let dir = env.path(&name);
            let webroot = dir.join("www-root");
            fs::create_dir_all(&webroot).unwrap();
            fs::create_dir_all(dir.join("out")).unwrap();
            let server = servers[i - 1];
            let mut specs = Vec::new();
            for (cert, domain) in certs {
                let out = if *cert == "www" {
                    dir.join("out")
                } else {
                    dir.join("out").join(cert)
                };
                fs::create_dir_all(&out).unwrap();
                let mut spec;
                let domains: Vec<&str> = domain.split_whitespace().collect();
                if server == Server::Apache {
                    spec = env.cert_spec(cert, &domains, "apache");
                    spec.files = InstallFiles {
                        cert: Some(out.join("certificate.crt")),
                        chain: Some(out.join("ca_bundle.crt")),
                        key: out.join("private.key"),
                        ..Default::default()
                    };
                } else {
                    spec = env.cert_spec(cert, &domains, "nginx");
                    spec.files = InstallFiles {
                        fullchain: Some(out.join("fullchain.pem")),
                        key: out.join("privkey.pem"),
                        ..Default::default()
                    };
                }
                if domains.len() > 1 {
                    // A multi-domain product.
                    spec.product_id = 1103;
                }
                spec.publish = Publish::Webroot(webroot.clone());
                env.write_placeholder(&spec);
                specs.push(spec);
            }
            let sites: Vec<_> = specs.iter().map(|s| env.site(s, &webroot)).collect();
            let web = Web::start(server, &dir, &sites);
            let specs = specs.into_iter().map(|s| web.configure(s)).collect();
            let saved = std::mem::replace(&mut env.certs, specs);
            let text = env.config_text();
            env.certs = saved;
            let state = dir.join("state");
            let mut config: String = text
                .lines()
                .map(|l| {
                    if l.starts_with("state_dir = ") {
                        format!("state_dir = \"{}\"", state.display())
                    } else {
                        l.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            config.push_str(&format!(
                "\n\n[fleet]\nendpoints = [{endpoints}]\nhost = \"{name}\"\n\
                 prefix = \"{prefix}\"\nsecret_file = \"{}\"\nlease_ttl_secs = 5\n\
                 lag_alert_secs = 60\n{plaintext}",
                key.display()
            ));
            let path = dir.join("config.toml");
            fs::write(&path, config).unwrap();
            hosts.push(Host {
                name,
                web,
                config: path,
                state,
                daemon: None,
            });
        }
        let ports: Vec<u16> = hosts.iter().map(|h| h.web.http_port()).collect();
        support::balancer::validate_on_every_host(&env.sandbox, &ports);
        Fleet {
            hosts,
            env,
            own_cluster: None,
            prefix: prefix.to_owned(),
        }
    }

    pub(crate) fn agent(&self, i: usize, args: &[&str]) -> AgentOutput {
        self.env.agent_at(&self.hosts[i].config, args).run()
    }

    /// Starts `cert-agent run` on host `i` (it follows the fleet at once; its first scheduled
    /// run comes within a minute).
    pub(crate) fn start_daemon(&mut self, i: usize) {
        self.start_daemon_with(i, &[]);
    }

    /// [`start_daemon`](Self::start_daemon) with extra environment variables.
    pub(crate) fn start_daemon_with(&mut self, i: usize, vars: &[(&str, &str)]) {
        self.start_daemon_args(i, &[], vars);
    }

    /// [`start_daemon_with`](Self::start_daemon_with) with extra arguments of `run`.
    pub(crate) fn start_daemon_args(&mut self, i: usize, args: &[&str], vars: &[(&str, &str)]) {
        let mut argv = vec!["run"];
        if !args.contains(&"--interval") {
            argv.extend(["--interval", "3600"]);
        }
        argv.extend_from_slice(args);
        let mut agent = self.env.agent_at(&self.hosts[i].config, argv);
        for (k, v) in vars {
            agent = agent.env(k, v);
        }
        self.hosts[i].daemon = Some(agent.spawn());
    }

    /// Host `i`'s daemon (see [`start_daemon`](Self::start_daemon)).
    pub(crate) fn daemon(&self, i: usize) -> &Child {
        self.hosts[i].daemon.as_ref().expect("a daemon started")
    }

    /// Kills host `i`'s daemon with SIGKILL (nothing of it runs on: no resignation).
    pub(crate) fn kill_daemon(&mut self, i: usize) {
        self.hosts[i].stop_daemon();
    }

    /// The serial host `i` has installed, from its record.
    pub(crate) fn installed(&self, i: usize) -> Option<String> {
        let text = fs::read_to_string(self.hosts[i].state.join("certs/www.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["installed"]["serial"].as_str().map(norm_serial)
    }

    /// The serial host `i`'s nginx serves for the domain.
    pub(crate) fn served(&self, i: usize) -> Option<String> {
        self.env
            .served_leaf(&self.hosts[i].web.https_addr(), DOMAIN)
            .ok()
            .map(|l| l.serial)
    }

    /// The serial host `i`'s nginx serves for the domain once it serves `serial` (up to 10 s:
    /// right after a reload, nginx's old workers may still take a connection), or the last
    /// one it served.
    pub(crate) fn served_settled(&self, i: usize, serial: &str) -> Option<String> {
        self.env
            .served_leaf_with_serial(&self.hosts[i].web.https_addr(), DOMAIN, serial)
            .ok()
            .map(|l| l.serial)
    }

    /// Waits until every host serves `serial` and has recorded it.
    pub(crate) fn wait_all_serve(&self, serial: &str, limit: Duration) {
        let ok = wait_until(limit, || {
            (0..self.hosts.len()).all(|i| {
                self.installed(i).as_deref() == Some(serial)
                    && self.served(i).as_deref() == Some(serial)
            })
        });
        assert!(
            ok,
            "not every host serves {serial}: {:?}\n{}",
            (0..self.hosts.len())
                .map(|i| (
                    self.hosts[i].name.clone(),
                    self.served(i),
                    self.installed(i)
                ))
                .collect::<Vec<_>>(),
            self.logs()
        );
    }

    /// Waits until every host serves `serial` on every handshake for half a second. After a
    /// reload nginx's old worker still takes some connections for a while (about 0.1 s after
    /// the new worker's first on an idle machine, longer on a loaded one), so one handshake
    /// with the new certificate, as the agent's served check and [`Fleet::wait_all_serve`]
    /// make, does not mean the next one meets it too.
    pub(crate) fn wait_all_settled(&self, serial: &str, limit: Duration) {
        let settled = |i: usize| {
            (0..10).all(|_| {
                let same = self.served(i).as_deref() == Some(serial);
                std::thread::sleep(Duration::from_millis(50));
                same
            })
        };
        let ok = wait_until(limit, || (0..self.hosts.len()).all(settled));
        assert!(
            ok,
            "not every host serves {serial} on every handshake: {:?}\n{}",
            (0..self.hosts.len())
                .map(|i| (self.hosts[i].name.clone(), self.served(i)))
                .collect::<Vec<_>>(),
            self.logs()
        );
    }

    pub(crate) fn logs(&self) -> String {
        let mut out = String::new();
        for entry in fs::read_dir(self.env.path("logs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = fs::read_to_string(entry.path()).unwrap_or_default();
            if !text.is_empty() {
                out.push_str(&format!("--- {} ---\n{text}\n", entry.path().display()));
            }
        }
        out
    }
}

fn norm(s: &str) -> String {
    norm_serial(s)
}

/// The CA revokes the certificate `www` that host 0's record names (key compromise).
pub(crate) fn revoke_www(f: &Fleet) {
    let text = fs::read_to_string(f.hosts[0].state.join("certs/www.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let id = v["order"]["certificate_id"].as_u64().unwrap();
    f.env
        .sandbox
        .revoke(
            partner_sandbox::state::RevokeTarget::CertificateId(id),
            "keyCompromise",
            false,
        )
        .unwrap();
}

pub(crate) fn ready() -> bool {
    etcd::require() && require(Server::Nginx)
}

#[test]
fn one_order_for_the_fleet_and_every_host_serves_it() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start(3);

    // web1 leads: it orders and publishes the validation file; the validator fetches it from
    // every host, whose daemons serve it as soon as it is published.
    let leader = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "60"]);
    let leader = leader.spawn();
    f.start_daemon(1);
    f.start_daemon(2);
    let mut leader = leader;
    let status = support::env::wait_exit(&mut leader, Duration::from_secs(90));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", f.logs());
    assert_eq!(f.env.billed(), 1, "one billed order for the fleet");
    let serial = f.installed(0).expect("the leader installed");
    f.wait_all_serve(&serial, Duration::from_secs(30));
    for i in 0..3 {
        assert_eq!(
            f.installed(i).as_deref(),
            Some(serial.as_str()),
            "{}: {:?} served {:?} files {:?}\n{}",
            f.hosts[i].name,
            fs::read_to_string(f.hosts[i].state.join("certs/www.json")),
            f.served(i),
            fs::read_dir(&f.hosts[i].state)
                .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>()),
            f.logs()
        );
    }
    // Every host holds its own copy of the same key, installed 0600.
    let keys: Vec<Vec<u8>> = (1..=3)
        .map(|i| fs::read(f.env.path(&format!("web{i}/out/privkey.pem"))).unwrap())
        .collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    // The followers' validation files were removed once validated.
    let pv = f.env.path("web2/www-root/.well-known/pki-validation");
    assert!(
        wait_until(Duration::from_secs(10), || fs::read_dir(&pv)
            .map(|d| d.count() == 0)
            .unwrap_or(true)),
        "validation file left on web2"
    );

    // The audit logs: the leader took and gave up the lead and ordered; every host logged
    // its own install.
    let audit =
        |i: usize| fs::read_to_string(f.hosts[i].state.join("audit.log")).unwrap_or_default();
    let lead_log = audit(0);
    for event in ["fleet-lead-taken", "ordered", "fleet-lead-given"] {
        assert!(
            lead_log.contains(&format!("\"event\":\"{event}\"")),
            "{event}: {lead_log}"
        );
    }
    for i in 0..3 {
        let log = audit(i);
        assert!(
            log.contains("\"event\":\"installed\""),
            "web{}: {log}",
            i + 1
        );
        f.agent(i, &["audit", "--verify"]).expect_code(0);
    }
    assert!(
        !audit(1).contains("\"event\":\"ordered\""),
        "a follower orders nothing"
    );
    // Followers never order: a renew on web3 installs nothing new and places no order.
    let calls = f.env.calls().len();
    // Beside web3's daemon: a renew waits for the state lock while a synchronisation holds it.
    let out = f.agent(2, &["--json", "renew"]);
    out.expect_code(0);
    assert_eq!(f.env.billed(), 1);
    let after = f.env.calls().len();
    assert!(
        after - calls <= 2,
        "a no-op run calls nothing much: {}",
        after - calls
    );

    // fleet status: every host current.
    let st = f.agent(2, &["--json", "fleet", "status"]);
    st.expect_code(0);
    let v = st.json();
    let cert = &v["certificates"][0];
    assert_eq!(norm(cert["serial"].as_str().unwrap()), serial);
    let hosts = cert["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3, "{v}");
    for h in hosts {
        assert_eq!(norm(h["serial"].as_str().unwrap()), serial, "{v}");
        assert_eq!(h["lagging"], false);
    }

    // A reissue on the leader reaches every host.
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let second = re.installed_serial("www");
    assert_ne!(second, serial);
    f.wait_all_serve(&second, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1, "a reissue is not billed");
}

#[test]
fn one_member_down_the_work_goes_on_two_down_nothing_is_ordered_and_what_is_served_stays() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start(2);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    // One member of three down: the quorum holds, the fleet orders and installs.
    f.cluster().stop(2);
    f.start_daemon(1);
    let out = f.agent(0, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    let serial = out.installed_serial("www");
    f.wait_all_serve(&serial, Duration::from_secs(30));

    // Two down: no quorum. A reissue is refused before anything reaches the API; both
    // hosts keep serving what they have.
    f.cluster().stop(1);
    let calls = f.env.calls().len();
    let out = f.agent(0, &["--json", "reissue", "www", "--wait", "10"]);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.text().contains("cannot be reached or has no quorum")
            && out.text().contains("places no order and no reissue"),
        "{}",
        out.describe()
    );
    assert_eq!(
        f.env.calls().len(),
        calls,
        "no Partner API call without quorum"
    );
    assert_eq!(f.served(0).as_deref(), Some(serial.as_str()));
    assert_eq!(f.served(1).as_deref(), Some(serial.as_str()));

    // The members return: the reissue goes through and reaches both hosts.
    f.cluster().restart(1);
    f.cluster().restart(2);
    let out = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    out.expect_code(0);
    let second = out.installed_serial("www");
    assert_ne!(second, serial);
    f.wait_all_serve(&second, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1);
}

/// Host web1 leads and is killed (abort, as `kill -9`) at `point`; web2 takes over once the
/// lease ends and finishes the work; then web1 comes back. One billed order, both hosts serve
/// the same certificate. A kill between the intent and the order leaves an intent nobody can
/// reconcile: web2 refuses to order until the operator clears it (as on one host).
fn leader_killed_at(cluster: &EtcdCluster, case: usize, point: &str) {
    let f = Fleet::on(
        TestEnv::new(),
        &cluster.endpoints(),
        &format!("/kill-{case}/"),
        2,
    );
    // The CA reaches web1 while it leads, web2 after it took over.
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let killed = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "30"])
        .env("CERT_AGENT_FAILPOINT", point)
        .run();
    assert!(
        killed
            .stderr
            .contains(&format!("failpoint '{point}' reached")),
        "{point}: {}",
        killed.describe()
    );
    // web2 runs until it has taken over and installed (the dead leader's lease ends within
    // 5 s); it serves the validation files itself as the leader.
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    let mut cleared = false;
    let done = wait_until(Duration::from_secs(90), || {
        let out = f.agent(1, &["--json", "renew", "--wait", "30", "--force"]);
        if out.text().contains("no order with this certificate's CSR") && !cleared {
            assert_eq!(point, "intent-saved", "{}", out.describe());
            assert_eq!(f.env.billed(), 0);
            f.agent(
                1,
                &[
                    "--json",
                    "issue",
                    "www",
                    "--yes",
                    "--clear-intent",
                    "--wait",
                    "30",
                ],
            );
            cleared = true;
        }
        f.installed(1).is_some()
    });
    assert!(done, "{point}: web2 did not take over\n{}", f.logs());
    assert_eq!(point == "intent-saved", cleared, "{point}");
    let serial = f.installed(1).unwrap();
    // web1 comes back and installs what the fleet has.
    f.agent(0, &["--json", "renew", "--wait", "30"])
        .expect_code(0);
    f.wait_all_serve(&serial, Duration::from_secs(20));
    assert_eq!(f.env.billed(), 1, "{point}: billed once");
    assert_eq!(f.env.order_posts(), 1, "{point}: one POST /order");
    for h in ["web1", "web2"] {
        let pv = f
            .env
            .path(&format!("{h}/www-root/.well-known/pki-validation"));
        let left: Vec<_> = fs::read_dir(&pv)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{point}: left on {h}: {left:?}");
    }
}

#[test]
fn a_leader_killed_while_ordering_is_followed_without_a_second_order() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    for (i, point) in ["key-saved", "intent-saved", "order-sent", "response-saved"]
        .iter()
        .enumerate()
    {
        leader_killed_at(&cluster, i, point);
    }
}

#[test]
fn a_leader_killed_while_validating_or_installing_is_followed_without_a_second_order() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), 3);
    for (i, point) in [
        "dcv-placed",
        "poll",
        "download",
        "files-staged",
        "files-swapped",
        "config-tested",
        "reloaded",
        "committed",
    ]
    .iter()
    .enumerate()
    {
        leader_killed_at(&cluster, 10 + i, point);
    }
}

/// Replaces `from` with `to` in host `i`'s configuration; returns the original text.
pub(crate) fn edit_config(f: &Fleet, i: usize, from: &str, to: &str) -> String {
    let text = fs::read_to_string(&f.hosts[i].config).unwrap();
    assert!(text.contains(from), "{from:?} not in\n{text}");
    fs::write(&f.hosts[i].config, text.replace(from, to)).unwrap();
    text
}

/// A host whose install of the fleet's certificate fails (here: its config test) reports the
/// failure and, when it leads, does not renew the certificate for the fleet because of it: no
/// reissue, no order (before, a joiner whose installs failed reissued every certificate of the
/// fleet); `renew --force` still reissues.
#[test]
fn a_host_that_cannot_install_the_fleets_certificate_does_not_renew_it_when_it_leads() {
    if !ready() {
        return;
    }
    let f = Fleet::start(2);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    edit_config(
        &f,
        1,
        "configtest_command = [",
        "configtest_command = [\"/bin/false\", ",
    );
    let calls = f.env.calls().len();
    // Nothing else due: a run leads only when the fleet has work (fleet_join), this one
    // leads all the same (debug builds) to show what its lead does.
    let failed = f
        .env
        .agent_at(&f.hosts[1].config, ["--json", "renew"])
        .env("CERT_AGENT_TEST_LEAD_NO_OP", "1")
        .run();
    assert_ne!(failed.code, Some(0), "{}", failed.describe());
    assert!(
        failed.text().contains("leaves it to the fleet"),
        "web2 led and said why it left www alone\n{}",
        failed.describe()
    );
    assert_eq!(f.installed(1), None, "{}", failed.describe());
    let after = f.env.calls();
    let acted: Vec<_> = after[calls..]
        .iter()
        .filter(|c| c.path.ends_with("/reissue") || c.path == "/api/v1/order")
        .collect();
    assert!(acted.is_empty(), "web2 renewed: {acted:?}\n{}", f.logs());
    assert_eq!(f.env.order_posts(), 1);
    assert_eq!(f.installed(0).as_deref(), Some(serial.as_str()));
}

#[test]
fn hosts_that_differ_or_fail_are_refused_or_roll_back_alone_and_an_offline_host_catches_up() {
    if !ready() {
        return;
    }
    let f = Fleet::start(3);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    f.agent(1, &["--json", "renew"]).expect_code(0);
    f.agent(2, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&serial, Duration::from_secs(20));

    // A host whose names differ from the fleet's record is refused, naming the difference.
    let saved = edit_config(
        &f,
        2,
        &format!("domains = [\"{DOMAIN}\"]"),
        &format!("domains = [\"{DOMAIN}\", \"other.fleet.test\"]"),
    );
    let refused = f.agent(2, &["--json", "renew"]);
    assert_ne!(refused.code, Some(0), "{}", refused.describe());
    assert!(
        refused.text().contains("differs from the fleet's record")
            && refused.text().contains("other.fleet.test"),
        "{}",
        refused.describe()
    );
    fs::write(&f.hosts[2].config, saved).unwrap();

    // web2's config test fails from now on; web3 is offline (runs nothing) during a reissue.
    let saved2 = edit_config(
        &f,
        1,
        "configtest_command = [",
        "configtest_command = [\"/bin/false\", ",
    );
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let second = re.installed_serial("www");
    assert_ne!(second, serial);

    // web2 rolls back alone: it keeps serving the first certificate and says why.
    let failed = f.agent(1, &["--json", "renew"]);
    assert_ne!(failed.code, Some(0), "{}", failed.describe());
    assert_eq!(f.served(1).as_deref(), Some(serial.as_str()));
    assert_eq!(f.installed(1).as_deref(), Some(serial.as_str()));
    // (A graceful reload settles asynchronously: old workers may answer for a moment.)
    assert!(
        wait_until(Duration::from_secs(10), || f.served(0).as_deref()
            == Some(second.as_str())),
        "web1 serves {:?}",
        f.served(0)
    );

    // fleet status shows it, and exits 1 once it lags longer than lag_alert_secs (60 s: the
    // clock is moved on by two minutes).
    let st = f.agent(0, &["--json", "fleet", "status"]);
    st.expect_code(0);
    let v = st.json();
    let web2 = v["certificates"][0]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == "web2")
        .cloned()
        .unwrap();
    assert_eq!(norm(web2["serial"].as_str().unwrap()), serial, "{v}");
    assert!(web2["error"].as_str().is_some(), "{v}");
    let later = f
        .env
        .agent_at(&f.hosts[0].config, ["fleet", "status"])
        .env("CERT_AGENT_TEST_CLOCK_OFFSET_SECS", "120")
        .run();
    later.expect_code(1);
    assert!(
        later.stdout.contains("LAGGING") || later.stdout.contains("error:"),
        "{}",
        later.describe()
    );
    assert!(later.stdout.contains("web2"), "{}", later.describe());

    // A fleet key that does not open the certificate: refused, nothing installed.
    fs::write(f.env.path("other.key"), [0x11u8; 32]).unwrap();
    fs::set_permissions(f.env.path("other.key"), fs::Permissions::from_mode(0o600)).unwrap();
    let saved3 = edit_config(
        &f,
        2,
        &format!("secret_file = \"{}\"", f.env.path("fleet.key").display()),
        &format!("secret_file = \"{}\"", f.env.path("other.key").display()),
    );
    let wrong = f.agent(2, &["--json", "renew"]);
    assert_ne!(wrong.code, Some(0), "{}", wrong.describe());
    assert!(
        wrong.text().contains("is not the fleet's"),
        "{}",
        wrong.describe()
    );
    assert_eq!(f.served(2).as_deref(), Some(serial.as_str()));

    // web3 comes back with the right key (its daemon catches up at start); web2 is fixed.
    fs::write(&f.hosts[2].config, saved3).unwrap();
    fs::write(&f.hosts[1].config, saved2).unwrap();
    let mut f = f;
    f.start_daemon(2);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&second, Duration::from_secs(30));
    f.agent(0, &["fleet", "status"]).expect_code(0);
    assert_eq!(f.env.billed(), 1);
}

#[test]
fn a_host_that_joins_with_an_installed_certificate_hands_it_over_without_a_new_order() {
    if !ready() {
        return;
    }
    let f = Fleet::start(2);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    // web1 works on its own first: no [fleet] yet.
    let text = fs::read_to_string(&f.hosts[0].config).unwrap();
    let alone = text.split("\n\n[fleet]").next().unwrap().to_owned();
    fs::write(&f.hosts[0].config, &alone).unwrap();
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    assert_eq!(f.env.billed(), 1);

    // It joins the fleet: its next run leads and hands the certificate over; web2 installs it.
    fs::write(&f.hosts[0].config, &text).unwrap();
    let joined = f.agent(0, &["--json", "renew"]);
    joined.expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&serial, Duration::from_secs(20));
    assert_eq!(f.env.billed(), 1, "no new order");
    assert_eq!(f.env.order_posts(), 1);
}

#[test]
fn a_leader_killed_after_sending_a_reissue_is_followed_and_both_hosts_switch() {
    if !ready() {
        return;
    }
    let f = Fleet::start(2);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    f.agent(1, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&serial, Duration::from_secs(20));

    let killed = f
        .env
        .agent_at(
            &f.hosts[0].config,
            ["--json", "reissue", "www", "--wait", "30"],
        )
        .env("CERT_AGENT_FAILPOINT", "reissue-sent")
        .run();
    assert!(
        killed.stderr.contains("failpoint 'reissue-sent' reached"),
        "{}",
        killed.describe()
    );
    // web2 takes over once the lease ends, finds the reissue in the shared record, validates
    // it (the CA now reaches web2) and installs it; web1 follows.
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    let switched = wait_until(Duration::from_secs(90), || {
        f.agent(1, &["--json", "renew", "--wait", "30", "--force"]);
        f.installed(1).is_some_and(|s| s != serial)
    });
    assert!(switched, "web2 did not finish the reissue\n{}", f.logs());
    let second = f.installed(1).unwrap();
    f.agent(0, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&second, Duration::from_secs(20));
    assert_eq!(f.env.billed(), 1);
    assert_eq!(f.env.order_posts(), 1);
}

#[test]
fn hosts_with_different_web_servers_and_paths_share_one_certificate() {
    if !ready() || !require(Server::Apache) {
        return;
    }
    let mut f = Fleet::start_under(
        "/mixed/",
        &[Server::Nginx, Server::Apache],
        &[("www", DOMAIN)],
    );
    // The CA reaches the Apache host, which follows the nginx leader.
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    f.start_daemon(1);
    let out = f.agent(0, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    let serial = out.installed_serial("www");
    f.wait_all_serve(&serial, Duration::from_secs(30));
    assert!(
        f.env.path("web2/out/ca_bundle.crt").is_file(),
        "Apache's own layout"
    );
    assert_eq!(f.env.billed(), 1);
}

/// Revocation in a fleet: the CA revokes the certificate every host serves (its order
/// annulled); each host's `check` says CRITICAL; the leader's next run reads the CRL once, places
/// one new order for the fleet, and every host installs and serves the replacement.
#[test]
fn a_revoked_certificate_is_replaced_once_for_the_whole_fleet() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start(3);
    let leader = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "60"]);
    let mut leader = leader.spawn();
    f.start_daemon(1);
    f.start_daemon(2);
    let status = support::env::wait_exit(&mut leader, Duration::from_secs(90));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", f.logs());
    let first = f.installed(0).expect("the leader installed");
    f.wait_all_serve(&first, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1);

    revoke_www(&f);
    for i in 0..3 {
        // A CRL kept from before stands until its nextUpdate: dropping it stands for that.
        let _ = fs::remove_dir_all(f.hosts[i].state.join("crl"));
        let check = f.agent(i, &["check"]);
        check.expect_code(2);
        assert!(
            check.stdout.contains("was revoked on"),
            "{}",
            check.describe()
        );
    }
    let fetched: u64 = f.env.sandbox.crl_fetches().values().sum();

    // The daemons stop, so that web1 takes the lead once their lease is gone (a daemon may
    // have taken it for its scheduled run); web1's next run replaces the certificate for the
    // fleet (validated on its own web root: the stopped hosts serve no validation file), and
    // the other hosts install it with their own runs.
    f.hosts[1].stop_daemon();
    f.hosts[2].stop_daemon();
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let mut second = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while second.is_none() && std::time::Instant::now() < deadline {
        let run = f.agent(0, &["--json", "renew", "--wait", "60"]);
        run.expect_code(0);
        if run.outcome("www")["outcome"] == "installed" {
            second = Some(run.installed_serial("www"));
        } else {
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    let second = second.unwrap_or_else(|| panic!("web1 never replaced it\n{}", f.logs()));
    assert_ne!(second, first);
    assert_eq!(
        f.env.billed(),
        2,
        "one new order for the fleet\n{}",
        f.logs()
    );
    for i in 1..3 {
        f.agent(i, &["--json", "renew", "--wait", "60"])
            .expect_code(0);
    }
    f.wait_all_serve(&second, Duration::from_secs(60));
    // The leader's run read the CRL once (each host's check had kept its own copy).
    let after: u64 = f.env.sandbox.crl_fetches().values().sum();
    assert!(after - fetched <= 1, "{fetched} -> {after}");
    for i in 0..3 {
        f.agent(i, &["check"]).expect_code(0);
    }
}
