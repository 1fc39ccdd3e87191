//! A real etcd cluster of three members on loopback, for the fleet tests: each member its own
//! process, data directory and pair of free ports; members can be stopped (SIGKILL) and
//! started again on the same data. Elections are tuned for loopback (heartbeat 50 ms,
//! election timeout 500 ms). `etcd` comes from Debian's `etcd-server`; without it the tests
//! skip, and fail when `CI` is set. [`EtcdClient`]: a small synchronous client for the tests
//! that read and write the fleet's keys themselves.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::webserver::free_port_pair;

/// Whether etcd is installed; panics when it is not and `CI` is set.
pub(crate) fn require() -> bool {
    if binary().is_some() {
        return true;
    }
    let msg = "etcd is not installed (apt-get install etcd-server)";
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this test must not be skipped");
    }
    eprintln!("skipping: {msg}");
    false
}

fn binary() -> Option<PathBuf> {
    ["/usr/bin/etcd", "/usr/local/bin/etcd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// Plain HTTP `/health` and `/metrics`, also when the client URL is TLS.
    metrics_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// The client side of a cluster served over TLS with client certificates.
#[derive(Clone)]
pub(crate) struct EtcdTls {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate (CN `agent`) and its key, issued by `ca`.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl EtcdTls {
    /// A CA, a server certificate for 127.0.0.1 and a client certificate, under `dir`.
    pub(crate) fn generate(dir: &Path) -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, SanType,
        };
        let write = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            if name.ends_with(".key") {
                // Private keys are read only when private to their owner.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
            p
        };
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "etcd test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let ca = write("etcd-ca.pem", ca_cert.pem());
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |cn: &str, server: bool| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, cn);
            if server {
                params.subject_alt_names = vec![
                    SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])),
                    SanType::DnsName("localhost".try_into().unwrap()),
                ];
            }
            params.extended_key_usages = vec![if server {
                ExtendedKeyUsagePurpose::ServerAuth
            } else {
                ExtendedKeyUsagePurpose::ClientAuth
            }];
            let cert = params.signed_by(&key, &issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (sc, sk) = leaf("127.0.0.1", true);
        let (cc, ck) = leaf("agent", false);
        EtcdTls {
            ca,
            server_cert: write("etcd-server.pem", sc),
            server_key: write("etcd-server.key", sk),
            client_cert: write("etcd-client.pem", cc),
            client_key: write("etcd-client.key", ck),
        }
    }
}

/// A running cluster; every member is killed when it is dropped.
pub(crate) struct EtcdCluster {
    members: Vec<Member>,
    token: String,
    tls: Option<EtcdTls>,
}

impl EtcdCluster {
    /// Starts `n` members under `dir` and waits until the cluster has a leader.
    pub(crate) fn start(dir: &Path, n: usize) -> Self {
        Self::start_with(dir, n, None)
    }

    /// [`start`](Self::start) with the client URLs over TLS, client certificates required.
    pub(crate) fn start_tls(dir: &Path, n: usize, tls: &EtcdTls) -> Self {
        Self::start_with(dir, n, Some(tls.clone()))
    }

    fn start_with(dir: &Path, n: usize, tls: Option<EtcdTls>) -> Self {
        for attempt in 0..3 {
            let mut cluster = Self::configure(dir, n, attempt);
            cluster.tls.clone_from(&tls);
            for i in 0..n {
                cluster.spawn(i, "new");
            }
            // Every member, not only a quorum: a member whose port another test took in the
            // meantime would leave the test's clients one endpoint that refuses them.
            if cluster.wait_all_healthy(Duration::from_secs(20)) {
                return cluster;
            }
            cluster.stop_all();
            eprintln!(
                "etcd cluster did not form (attempt {attempt}):\n{}",
                cluster.logs()
            );
        }
        panic!("an etcd cluster of {n} members could not be started");
    }

    fn configure(dir: &Path, n: usize, attempt: usize) -> Self {
        let members = (0..n)
            .map(|i| {
                let (client_port, peer_port) = free_port_pair();
                let metrics_port = super::webserver::free_port();
                let name = format!("m{i}");
                let data_dir = dir.join(format!("etcd-{attempt}-{name}"));
                Member {
                    log: dir.join(format!("etcd-{attempt}-{name}.log")),
                    name,
                    client_port,
                    peer_port,
                    metrics_port,
                    data_dir,
                    child: None,
                }
            })
            .collect();
        Self {
            members,
            token: format!("cert-agent-test-{}-{attempt}", std::process::id()),
            tls: None,
        }
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        let m = &mut self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.log)
            .expect("etcd log file");
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let metrics = format!("http://127.0.0.1:{}", m.metrics_port);
        let mut cmd = Command::new(binary().expect("etcd"));
        if let Some(t) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&t.server_cert)
                .arg("--key-file")
                .arg(&t.server_key)
                .arg("--trusted-ca-file")
                .arg(&t.ca)
                .arg("--client-cert-auth");
        }
        let child = cmd
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--listen-metrics-urls", &metrics])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", &self.token])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd log"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        m.child = Some(child);
    }

    /// The client URLs of every member (stopped ones included).
    pub(crate) fn endpoints(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members
            .iter()
            .map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// Kills member `i` (SIGKILL).
    pub(crate) fn stop(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again on its data and waits until the cluster is healthy.
    pub(crate) fn restart(&mut self, i: usize) {
        self.stop(i);
        self.spawn(i, "existing");
        assert!(
            self.wait_healthy(Duration::from_secs(20)),
            "etcd did not recover after member {i} restarted:\n{}",
            self.logs()
        );
    }

    /// Waits until every running member answers `/health` with a leader.
    fn wait_all_healthy(&self, limit: Duration) -> bool {
        self.wait_members(limit, true)
    }

    fn stop_all(&mut self) {
        for i in 0..self.members.len() {
            self.stop(i);
        }
    }

    /// Waits until a running member answers `/health` with a leader.
    pub(crate) fn wait_healthy(&self, limit: Duration) -> bool {
        self.wait_members(limit, false)
    }

    /// Waits until every running member (`all`) or one of them answers `/health` with a leader.
    fn wait_members(&self, limit: Duration, all: bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let mut running = self.members.iter().filter(|m| m.child.is_some());
            let ready = if all {
                running.all(|m| healthy(m.metrics_port))
            } else {
                running.any(|m| healthy(m.metrics_port))
            };
            if ready {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// The members' logs, for failure messages.
    pub(crate) fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(&m.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!(
                    "--- {} ---\n{}",
                    m.name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.stop(i);
        }
    }
}

/// A small synchronous etcd client for tests: the keys under one prefix, named relative to it;
/// every call waits for its answer (a single-thread runtime of its own) and panics when etcd
/// does not answer (the test fails there).
pub(crate) struct EtcdClient {
    rt: tokio::runtime::Runtime,
    client: etcd_client::Client,
    prefix: String,
}

impl EtcdClient {
    /// Connects to the members `endpoints` (plain http) for the keys under `prefix`.
    pub(crate) fn connect(endpoints: Vec<String>, prefix: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client = rt
            .block_on(etcd_client::Client::connect(endpoints, None))
            .expect("etcd answers");
        Self {
            rt,
            client,
            prefix: prefix.to_owned(),
        }
    }

    fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    /// The value of `PREFIX + rel`, if any.
    pub(crate) fn get(&mut self, rel: &str) -> Option<Vec<u8>> {
        let key = self.key(rel);
        let resp = self.retried(|mut c| {
            let key = key.clone();
            async move { c.get(key, None).await }
        });
        resp.kvs().first().map(|kv| kv.value().to_vec())
    }

    /// A read, or a write that may be made twice (a put of one value, a delete), tried again
    /// for up to ten seconds while the member the client picked does not take the connection
    /// or times the request out (a loaded machine: the cluster keeps its quorum meanwhile).
    fn retried<F, Fut, R>(&mut self, call: F) -> R
    where
        F: Fn(etcd_client::Client) -> Fut,
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            match self.rt.block_on(call(self.client.clone())) {
                Ok(resp) => return resp,
                Err(e) if Instant::now() < until => {
                    eprintln!("etcd call failed, trying again: {e}");
                    std::thread::sleep(Duration::from_millis(300));
                }
                Err(e) => panic!("etcd answers: {e}"),
            }
        }
    }

    pub(crate) fn put(&mut self, rel: &str, value: impl Into<Vec<u8>>) {
        let key = self.key(rel);
        let value = value.into();
        self.retried(|mut c| {
            let (key, value) = (key.clone(), value.clone());
            async move { c.put(key, value, None).await }
        });
    }

    pub(crate) fn delete(&mut self, rel: &str) {
        let key = self.key(rel);
        self.retried(|mut c| {
            let key = key.clone();
            async move { c.delete(key, None).await }
        });
    }

    /// Puts `value` on a lease of `ttl_secs` of its own (as another host's lead would hold the
    /// leader key); returns the lease, for [`revoke`](Self::revoke).
    pub(crate) fn put_on_lease(&mut self, rel: &str, value: &str, ttl_secs: i64) -> i64 {
        let key = self.key(rel);
        // A lease granted twice (the first answer lost) only leaves a spare lease to expire.
        let lease = self
            .retried(|mut c| async move { c.lease_grant(ttl_secs, None).await })
            .id();
        self.retried(|mut c| {
            let (key, value) = (key.clone(), value.to_owned());
            let options = etcd_client::PutOptions::new().with_lease(lease);
            async move { c.put(key, value, Some(options)).await }
        });
        lease
    }

    /// Ends `lease`: the keys put on it are deleted.
    pub(crate) fn revoke(&mut self, lease: i64) {
        self.retried(|mut c| async move {
            match c.lease_revoke(lease).await {
                // Revoked by an earlier try whose answer was lost.
                Err(etcd_client::Error::GRpcStatus(s))
                    if s.message().contains("lease not found") =>
                {
                    Ok(())
                }
                other => other.map(drop),
            }
        });
    }

    /// Every key under the prefix (full keys) with its modification revision.
    pub(crate) fn revisions(&mut self) -> BTreeMap<String, i64> {
        let prefix = self.prefix.clone();
        let resp = self.retried(|mut c| {
            let prefix = prefix.clone();
            async move {
                c.get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
                    .await
            }
        });
        resp.kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    kv.mod_revision(),
                )
            })
            .collect()
    }
}

impl EtcdCluster {
    /// The gRPC messages the members received so far, summed over the members, by method
    /// (`Range`, `Txn`, `Put`, `Watch`, `LeaseKeepAlive`, …), from their `/metrics`.
    pub(crate) fn messages_received(&self) -> BTreeMap<String, u64> {
        self.grpc_counts("grpc_server_msg_received_total")
    }

    /// The `Watch` streams the members started so far (a daemon that follows the fleet
    /// starts one once its first synchronisation is done).
    pub(crate) fn watches(&self) -> u64 {
        self.calls_started()
            .get("Watch")
            .copied()
            .unwrap_or_default()
    }

    /// The gRPC calls the members started so far, summed over the members, by method: a
    /// stream (`Watch`, `LeaseKeepAlive`) counts once however many messages it carries.
    pub(crate) fn calls_started(&self) -> BTreeMap<String, u64> {
        self.grpc_counts("grpc_server_started_total")
    }

    /// The gauge `name` (a metric without labels) summed over the members.
    pub(crate) fn gauge(&self, name: &str) -> f64 {
        let prefix = format!("{name} ");
        self.members
            .iter()
            .flat_map(|m| {
                get(m.metrics_port, "/metrics")
                    .lines()
                    .filter_map(|l| l.strip_prefix(&prefix)?.trim().parse::<f64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// The counter `metric` of the members' gRPC server, summed over the members, by method.
    fn grpc_counts(&self, metric: &str) -> BTreeMap<String, u64> {
        let open = format!("{metric}{{");
        let mut out = BTreeMap::new();
        for m in &self.members {
            for line in get(m.metrics_port, "/metrics").lines() {
                let Some(rest) = line.strip_prefix(open.as_str()) else {
                    continue;
                };
                let Some(method) = rest
                    .split("grpc_method=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                else {
                    continue;
                };
                let count = line
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or_default();
                *out.entry(method.to_owned()).or_default() += count as u64;
            }
        }
        out
    }
}

/// The body of `GET path` on a member's plain HTTP port (empty when it does not answer).
fn get(port: u16, path: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `GET /health` answers `"health":"true"` (the member sees a leader and a quorum).
fn healthy(port: u16) -> bool {
    get(port, "/health").contains("\"health\":\"true\"")
}
