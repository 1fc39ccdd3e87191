//! Real web servers for end-to-end tests: an nginx or apache2 instance under a temporary
//! directory, with its own config, pid file, logs and temp paths, listening on 127.0.0.1
//! ports, stopped when dropped.
//!
//! Each [`Site`] gets a plain-HTTP vhost serving its `webroot` (so
//! `/.well-known/pki-validation/X.txt` is served for its Host header) and an HTTPS vhost with
//! its certificate (chosen by SNI). [`Nginx::server_commands`] / [`Apache::server_commands`]
//! give the config test and reload commands the install layer should use for the instance.
//!
//! Certificate and key files that do not exist yet are created as a self-signed placeholder,
//! so a server can be started before the agent's first install. A site whose `cert_path` and
//! `key_path` are the same file uses it as a combined file (key followed by the certificates):
//! nginx names it in both `ssl_certificate` and `ssl_certificate_key`, apache in
//! `SSLCertificateFile` without `SSLCertificateKeyFile`.
//!
//! When the server binary is missing, [`require`] makes tests skip with a notice, or fail when
//! the `CI` environment variable is set.
#![allow(dead_code)]

use std::fs;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cert_agent::testing::install::ServerCommands;

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a server may take to stop before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// One virtual host.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    /// The name matched against SNI and the Host header.
    pub server_name: String,
    /// Further names for the same site.
    pub aliases: Vec<String>,
    /// nginx: the full chain; apache: the leaf certificate (`SSLCertificateFile`).
    pub cert_path: PathBuf,
    /// apache only: the intermediates (`SSLCertificateChainFile`); ignored by nginx.
    pub chain_path: Option<PathBuf>,
    /// The private key; equal to `cert_path` for a combined file.
    pub key_path: PathBuf,
    /// Document root of both vhosts; created if missing.
    pub webroot: PathBuf,
}

impl Site {
    /// A site without aliases or separate chain file.
    pub(crate) fn new(
        server_name: &str,
        cert_path: impl Into<PathBuf>,
        key_path: impl Into<PathBuf>,
        webroot: impl Into<PathBuf>,
    ) -> Self {
        Site {
            server_name: server_name.to_string(),
            aliases: Vec::new(),
            cert_path: cert_path.into(),
            chain_path: None,
            key_path: key_path.into(),
            webroot: webroot.into(),
        }
    }

    /// Sets apache's chain file.
    pub(crate) fn with_chain(mut self, chain_path: impl Into<PathBuf>) -> Self {
        self.chain_path = Some(chain_path.into());
        self
    }

    /// Adds names for the same site.
    pub(crate) fn with_aliases(mut self, aliases: &[&str]) -> Self {
        self.aliases = aliases.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Whether certificate and key come from one combined file.
    pub(crate) fn combined(&self) -> bool {
        self.cert_path == self.key_path
    }

    fn names(&self) -> Vec<&str> {
        std::iter::once(self.server_name.as_str())
            .chain(self.aliases.iter().map(String::as_str))
            .collect()
    }
}

/// Which server a test needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// nginx.
    Nginx,
    /// Apache httpd (apache2 on Debian).
    Apache,
}

/// Whether `server` is installed. Returns `false` (after printing a notice) when it is not,
/// so the test can return early; panics instead when the `CI` variable is set, because CI must
/// run these tests.
pub(crate) fn require(server: Server) -> bool {
    let found = match server {
        Server::Nginx => Nginx::binary().is_some(),
        Server::Apache => Apache::binary().is_some() && Apache::modules_dir().is_some(),
    };
    if found {
        return true;
    }
    let msg = format!("{server:?} is not installed (apt-get install nginx apache2)");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this test must not be skipped");
    }
    eprintln!("skipping: {msg}");
    false
}

/// A free 127.0.0.1 port: bound to port 0 and released (another process may take it before
/// use; the `start_on_free_ports` constructors retry).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Two distinct free ports (the first is held while the second is chosen, so the kernel cannot
/// hand out the same number twice).
pub(crate) fn free_port_pair() -> (u16, u16) {
    let first = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let a = first.local_addr().expect("local address").port();
    (a, free_port())
}

fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// A double-quoted string for nginx and apache configs.
fn q(path: &Path) -> String {
    let s = path.to_string_lossy();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A running server process (foreground child) and its files.
#[derive(Debug)]
struct Instance {
    name: &'static str,
    dir: PathBuf,
    pid_file: PathBuf,
    error_log: PathBuf,
    stderr_log: PathBuf,
    child: Option<Child>,
}

impl Instance {
    fn spawn(
        name: &'static str,
        dir: &Path,
        mut cmd: Command,
        pid_file: PathBuf,
        error_log: PathBuf,
        ports: &[u16],
    ) -> io::Result<Instance> {
        let stderr_log = dir.join("stderr.log");
        let stderr = fs::File::create(&stderr_log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(stderr.try_clone()?)
            .stderr(stderr)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("starting {name}: {e}")))?;
        let mut inst = Instance {
            name,
            dir: dir.to_path_buf(),
            pid_file,
            error_log,
            stderr_log,
            child: Some(child),
        };
        inst.wait_ready(ports)?;
        Ok(inst)
    }

    fn wait_ready(&mut self, ports: &[u16]) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                return Err(io::Error::other(format!(
                    "{} exited during start ({status}):\n{}",
                    self.name,
                    self.logs()
                )));
            }
            let listening = ports
                .iter()
                .all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok());
            if self.pid_file.exists() && listening {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.stop();
                return Err(io::Error::other(format!(
                    "{} did not start listening on {ports:?}:\n{}",
                    self.name,
                    self.logs()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's stderr and error log, for failure messages.
    fn logs(&self) -> String {
        let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
        format!(
            "--- {} ---\n{}--- {} ---\n{}",
            self.stderr_log.display(),
            read(&self.stderr_log),
            self.error_log.display(),
            read(&self.error_log)
        )
    }

    fn stop(&mut self) {
        // The pid file names the master even if a reload command restarted the server as a
        // daemon after it died.
        let pid_from_file = fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        let term = |pid: i32| {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        };
        if let Some(mut child) = self.child.take() {
            let child_pid = child.id() as i32;
            term(child_pid);
            if let Some(pid) = pid_from_file.filter(|&p| p != child_pid) {
                term(pid);
            }
            let deadline = Instant::now() + STOP_TIMEOUT;
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        } else if let Some(pid) = pid_from_file {
            term(pid);
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Creates `dir` and its missing parents with mode 0755 whatever the umask (the install layer
/// refuses group- or world-writable directories).
fn create_dirs_0755(dir: &Path) -> io::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs_0755(parent)?;
    }
    fs::create_dir(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
}

/// Creates each site's webroot and, where its certificate or key file does not exist yet, a
/// self-signed placeholder for the server name, so that the server can start before the first
/// install (the agent then replaces the placeholder, keeping its owner and mode).
fn prepare_sites(sites: &[Site]) -> io::Result<()> {
    for site in sites {
        create_dirs_0755(&site.webroot)?;
        let files = std::iter::once(&site.cert_path)
            .chain(&site.chain_path)
            .chain(std::iter::once(&site.key_path));
        if files.clone().all(|p| p.exists()) {
            continue;
        }
        let placeholder = rcgen::generate_simple_self_signed(
            site.names()
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>(),
        )
        .map_err(|e| io::Error::other(format!("placeholder certificate: {e}")))?;
        let cert = placeholder.cert.pem();
        let key = placeholder.signing_key.serialize_pem();
        let write = |path: &Path, data: &str, mode: u32| -> io::Result<()> {
            if path.exists() {
                return Ok(());
            }
            if let Some(dir) = path.parent() {
                create_dirs_0755(dir)?;
            }
            fs::write(path, data)?;
            fs::set_permissions(path, fs::Permissions::from_mode(mode))
        };
        if site.combined() {
            write(&site.key_path, &format!("{key}{cert}"), 0o600)?;
        }
        write(&site.key_path, &key, 0o600)?;
        write(&site.cert_path, &cert, 0o644)?;
        if let Some(chain) = &site.chain_path {
            write(chain, &cert, 0o644)?;
        }
    }
    Ok(())
}

fn addr_in_use(e: &io::Error) -> bool {
    let s = e.to_string();
    s.contains("Address already in use") || s.contains("could not bind")
}

/// An nginx master process running in the foreground (`daemon off`) as a child of the test,
/// with prefix `DIR/nginx`.
#[derive(Debug)]
pub(crate) struct Nginx {
    inst: Instance,
    binary: PathBuf,
    conf: PathBuf,
    /// The HTTPS port on 127.0.0.1.
    pub https_port: u16,
    /// The plain-HTTP port on 127.0.0.1.
    pub http_port: u16,
}

impl Nginx {
    /// The nginx binary, if installed.
    pub(crate) fn binary() -> Option<PathBuf> {
        find_binary(&["nginx"])
    }

    /// Writes `DIR/nginx/nginx.conf` for `sites` and starts nginx on the given ports; returns
    /// once the pid file exists and both ports accept connections. Workers run as root when
    /// the test does (so keys stay 0600 root).
    pub(crate) fn start(
        dir: &Path,
        https_port: u16,
        http_port: u16,
        sites: &[Site],
    ) -> io::Result<Self> {
        let binary = Self::binary().ok_or_else(|| io::Error::other("nginx is not installed"))?;
        prepare_sites(sites)?;
        let prefix = dir.join("nginx");
        for sub in ["logs", "tmp"] {
            fs::create_dir_all(prefix.join(sub))?;
        }
        let pid_file = prefix.join("nginx.pid");
        let error_log = prefix.join("logs/error.log");
        let _ = fs::remove_file(&pid_file);
        let conf = prefix.join("nginx.conf");
        fs::write(
            &conf,
            nginx_conf(&prefix, &pid_file, &error_log, https_port, http_port, sites),
        )?;
        let mut cmd = Command::new(&binary);
        cmd.arg("-p")
            .arg(format!("{}/", prefix.display()))
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(&error_log);
        let inst = Instance::spawn(
            "nginx",
            &prefix,
            cmd,
            pid_file,
            error_log,
            &[https_port, http_port],
        )?;
        Ok(Nginx {
            inst,
            binary,
            conf,
            https_port,
            http_port,
        })
    }

    /// [`start`](Self::start) on free ports, retrying when a port was taken meanwhile.
    pub(crate) fn start_on_free_ports(dir: &Path, sites: &[Site]) -> io::Result<Self> {
        let mut last = None;
        for _ in 0..5 {
            let (http, https) = free_port_pair();
            match Self::start(dir, http, https, sites) {
                Err(e) if addr_in_use(&e) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free ports")))
    }

    fn base_argv(&self) -> Vec<String> {
        let prefix = self.inst.dir.display();
        vec![
            path_arg(&self.binary),
            "-p".into(),
            format!("{prefix}/"),
            "-c".into(),
            path_arg(&self.conf),
            "-e".into(),
            path_arg(&self.inst.error_log),
        ]
    }

    /// `nginx -p PREFIX -c CONF -e LOG -t`.
    pub(crate) fn configtest_command(&self) -> Vec<String> {
        let mut v = self.base_argv();
        v.push("-t".into());
        v
    }

    /// `nginx -p PREFIX -c CONF -e LOG -s reload`.
    pub(crate) fn reload_command(&self) -> Vec<String> {
        let mut v = self.base_argv();
        v.extend(argv(&["-s", "reload"]));
        v
    }

    /// The config test and reload of this instance, with a 30 s limit.
    pub(crate) fn server_commands(&self) -> ServerCommands {
        ServerCommands {
            configtest: Some(self.configtest_command()),
            reload: Some(self.reload_command()),
            timeout: Duration::from_secs(30),
        }
    }

    /// `127.0.0.1:HTTPS_PORT`.
    pub(crate) fn https_addr(&self) -> String {
        format!("127.0.0.1:{}", self.https_port)
    }

    /// `127.0.0.1:HTTP_PORT`.
    pub(crate) fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    /// The prefix directory (`DIR/nginx`).
    pub(crate) fn prefix(&self) -> &Path {
        &self.inst.dir
    }

    /// stderr and error log, for failure messages.
    pub(crate) fn logs(&self) -> String {
        self.inst.logs()
    }

    /// Stops the server (also done on drop).
    pub(crate) fn stop(&mut self) {
        self.inst.stop();
    }
}

fn nginx_conf(
    prefix: &Path,
    pid_file: &Path,
    error_log: &Path,
    https_port: u16,
    http_port: u16,
    sites: &[Site],
) -> String {
    let tmp = prefix.join("tmp");
    let mut c = String::new();
    if is_root() {
        c.push_str("user root root;\n");
    }
    c.push_str(&format!(
        "daemon off;\nmaster_process on;\nworker_processes 1;\npid {};\nerror_log {} info;\n\
         events {{ worker_connections 128; }}\nhttp {{\n\
         \x20 access_log {};\n\
         \x20 client_body_temp_path {};\n  proxy_temp_path {};\n  fastcgi_temp_path {};\n\
         \x20 uwsgi_temp_path {};\n  scgi_temp_path {};\n\
         \x20 types {{ text/plain txt; text/html html; }}\n  default_type application/octet-stream;\n",
        q(pid_file),
        q(error_log),
        q(&prefix.join("logs/access.log")),
        q(&tmp.join("body")),
        q(&tmp.join("proxy")),
        q(&tmp.join("fastcgi")),
        q(&tmp.join("uwsgi")),
        q(&tmp.join("scgi")),
    ));
    for site in sites {
        let names = site.names().join(" ");
        c.push_str(&format!(
            "  server {{\n    listen 127.0.0.1:{http_port};\n    server_name {names};\n    root {};\n  }}\n",
            q(&site.webroot)
        ));
        c.push_str(&format!(
            "  server {{\n    listen 127.0.0.1:{https_port} ssl;\n    server_name {names};\n    \
             ssl_certificate {};\n    ssl_certificate_key {};\n    root {};\n  }}\n",
            q(&site.cert_path),
            q(&site.key_path),
            q(&site.webroot)
        ));
    }
    c.push_str("}\n");
    c
}

/// An apache2 (httpd) parent process running in the foreground (`-DFOREGROUND`) as a child of
/// the test, with ServerRoot `DIR/apache`. When the test runs as root, workers run as
/// `nobody`: the webroots (and the directories from `DIR` down to them) are made
/// world-readable; certificates and keys are read by the root parent.
#[derive(Debug)]
pub(crate) struct Apache {
    inst: Instance,
    binary: PathBuf,
    conf: PathBuf,
    /// The HTTPS port on 127.0.0.1.
    pub https_port: u16,
    /// The plain-HTTP port on 127.0.0.1.
    pub http_port: u16,
}

impl Apache {
    /// The apache2 / httpd binary, if installed.
    pub(crate) fn binary() -> Option<PathBuf> {
        find_binary(&["apache2", "httpd"])
    }

    /// The directory holding mod_ssl.so.
    pub(crate) fn modules_dir() -> Option<PathBuf> {
        [
            "/usr/lib/apache2/modules",
            "/usr/lib64/httpd/modules",
            "/usr/lib/httpd/modules",
            "/usr/libexec/apache2",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("mod_ssl.so").is_file())
    }

    /// Writes `DIR/apache/httpd.conf` for `sites` and starts apache on the given ports;
    /// returns once the pid file exists and both ports accept connections.
    pub(crate) fn start(
        dir: &Path,
        https_port: u16,
        http_port: u16,
        sites: &[Site],
    ) -> io::Result<Self> {
        let binary = Self::binary().ok_or_else(|| io::Error::other("apache2 is not installed"))?;
        let modules =
            Self::modules_dir().ok_or_else(|| io::Error::other("apache modules not found"))?;
        prepare_sites(sites)?;
        if is_root() {
            for site in sites {
                make_world_reachable(dir, &site.webroot)?;
            }
        }
        let root = dir.join("apache");
        for sub in ["logs", "run"] {
            fs::create_dir_all(root.join(sub))?;
        }
        let pid_file = root.join("run/httpd.pid");
        let error_log = root.join("logs/error.log");
        let _ = fs::remove_file(&pid_file);
        let compiled_in = Command::new(&binary)
            .arg("-l")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let conf = root.join("httpd.conf");
        let text = apache_conf(
            &root,
            &modules,
            &compiled_in,
            &pid_file,
            &error_log,
            https_port,
            http_port,
            sites,
        );
        fs::write(&conf, text)?;
        let mut cmd = Command::new(&binary);
        cmd.arg("-f").arg(&conf).arg("-DFOREGROUND");
        let inst = Instance::spawn(
            "apache2",
            &root,
            cmd,
            pid_file,
            error_log,
            &[https_port, http_port],
        )?;
        Ok(Apache {
            inst,
            binary,
            conf,
            https_port,
            http_port,
        })
    }

    /// [`start`](Self::start) on free ports, retrying when a port was taken meanwhile.
    pub(crate) fn start_on_free_ports(dir: &Path, sites: &[Site]) -> io::Result<Self> {
        let mut last = None;
        for _ in 0..5 {
            let (http, https) = free_port_pair();
            match Self::start(dir, http, https, sites) {
                Err(e) if addr_in_use(&e) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free ports")))
    }

    /// `apache2 -f CONF -t`.
    pub(crate) fn configtest_command(&self) -> Vec<String> {
        vec![
            path_arg(&self.binary),
            "-f".into(),
            path_arg(&self.conf),
            "-t".into(),
        ]
    }

    /// `apache2 -f CONF -k graceful`.
    pub(crate) fn reload_command(&self) -> Vec<String> {
        vec![
            path_arg(&self.binary),
            "-f".into(),
            path_arg(&self.conf),
            "-k".into(),
            "graceful".into(),
        ]
    }

    /// The config test and reload of this instance, with a 30 s limit.
    pub(crate) fn server_commands(&self) -> ServerCommands {
        ServerCommands {
            configtest: Some(self.configtest_command()),
            reload: Some(self.reload_command()),
            timeout: Duration::from_secs(30),
        }
    }

    /// `127.0.0.1:HTTPS_PORT`.
    pub(crate) fn https_addr(&self) -> String {
        format!("127.0.0.1:{}", self.https_port)
    }

    /// `127.0.0.1:HTTP_PORT`.
    pub(crate) fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    /// The ServerRoot (`DIR/apache`).
    pub(crate) fn server_root(&self) -> &Path {
        &self.inst.dir
    }

    /// stderr and error log, for failure messages.
    pub(crate) fn logs(&self) -> String {
        self.inst.logs()
    }

    /// Stops the server (also done on drop).
    pub(crate) fn stop(&mut self) {
        self.inst.stop();
    }
}

#[allow(clippy::too_many_arguments)]
fn apache_conf(
    root: &Path,
    modules: &Path,
    compiled_in: &str,
    pid_file: &Path,
    error_log: &Path,
    https_port: u16,
    http_port: u16,
    sites: &[Site],
) -> String {
    let mut c = format!(
        "ServerRoot {}\nServerName localhost\nPidFile {}\nDefaultRuntimeDir {}\n\
         ErrorLog {}\nLogLevel warn\n",
        q(root),
        q(pid_file),
        q(&root.join("run")),
        q(error_log),
    );
    // (module name, source file as listed by `-l` when compiled in)
    let wanted = [
        ("mpm_event", "event.c"),
        ("unixd", "mod_unixd.c"),
        ("authz_core", "mod_authz_core.c"),
        ("mime", "mod_mime.c"),
        ("dir", "mod_dir.c"),
        ("log_config", "mod_log_config.c"),
        ("ssl", "mod_ssl.c"),
    ];
    for (name, source) in wanted {
        let file = modules.join(format!("mod_{name}.so"));
        if !compiled_in.contains(source) && file.is_file() {
            c.push_str(&format!("LoadModule {name}_module {}\n", q(&file)));
        }
    }
    if is_root() {
        let (uid, gid) = nix::unistd::User::from_name("nobody")
            .ok()
            .flatten()
            .map(|u| (u.uid.as_raw(), u.gid.as_raw()))
            .unwrap_or((65534, 65534));
        c.push_str(&format!("User #{uid}\nGroup #{gid}\n"));
    }
    c.push_str(
        "StartServers 1\nServerLimit 2\nThreadsPerChild 8\nMaxRequestWorkers 16\n\
         MinSpareThreads 1\nMaxSpareThreads 16\nTypesConfig /dev/null\n\
         AddType text/plain .txt\nAddType text/html .html\nSSLSessionCache none\n",
    );
    c.push_str(&format!(
        "Listen 127.0.0.1:{http_port}\nListen 127.0.0.1:{https_port}\n"
    ));
    for site in sites {
        let aliases = if site.aliases.is_empty() {
            String::new()
        } else {
            format!("  ServerAlias {}\n", site.aliases.join(" "))
        };
        let webroot = q(&site.webroot);
        let dir_block =
            format!("  <Directory {webroot}>\n    Require all granted\n  </Directory>\n");
        c.push_str(&format!(
            "<VirtualHost 127.0.0.1:{http_port}>\n  ServerName {}\n{aliases}  DocumentRoot {webroot}\n{dir_block}</VirtualHost>\n",
            site.server_name
        ));
        let chain = site
            .chain_path
            .as_ref()
            .map(|p| format!("  SSLCertificateChainFile {}\n", q(p)))
            .unwrap_or_default();
        let key = if site.combined() {
            String::new()
        } else {
            format!("  SSLCertificateKeyFile {}\n", q(&site.key_path))
        };
        c.push_str(&format!(
            "<VirtualHost 127.0.0.1:{https_port}>\n  ServerName {}\n{aliases}  DocumentRoot {webroot}\n{dir_block}\
             \x20 SSLEngine on\n  SSLCertificateFile {}\n{key}{chain}</VirtualHost>\n",
            site.server_name,
            q(&site.cert_path),
        ));
    }
    c
}

/// Lets `nobody` reach `webroot`: o+x on `base` and every directory between it and the
/// webroot, o+rx on the webroot. Directories outside `base` are left alone.
fn make_world_reachable(base: &Path, webroot: &Path) -> io::Result<()> {
    let add = |p: &Path, bits: u32| -> io::Result<()> {
        let mode = fs::metadata(p)?.permissions().mode();
        if mode & bits != bits {
            fs::set_permissions(p, fs::Permissions::from_mode(mode | bits))?;
        }
        Ok(())
    };
    add(webroot, 0o005)?;
    let mut cur = webroot.parent();
    while let Some(d) = cur {
        if !d.starts_with(base) {
            break;
        }
        add(d, 0o001)?;
        cur = d.parent();
    }
    Ok(())
}

/// The serial of the certificate served at `address` for SNI
/// `server_name`.
pub(crate) async fn served_serial(
    address: &str,
    server_name: &str,
) -> Result<cert_agent::testing::crypto::Serial, String> {
    cert_agent::testing::install::verify::served_serial(
        address,
        server_name,
        Duration::from_secs(5),
    )
    .await
    .map_err(|e| e.to_string())
}

/// Waits until `address` serves `serial` for `server_name` (reloads settle asynchronously).
pub(crate) async fn wait_for_serial(
    address: &str,
    server_name: &str,
    serial: &cert_agent::testing::crypto::Serial,
    timeout: Duration,
) -> Result<(), String> {
    let target = cert_agent::testing::install::VerifyTarget {
        address: address.to_string(),
        server_name: server_name.to_string(),
        timeout,
    };
    cert_agent::testing::install::verify::verify_served(&target, serial)
        .await
        .map_err(|e| e.to_string())
}

/// A blocking plain-HTTP GET of `path` at `address` with `Host: host`; returns status and
/// body.
pub(crate) fn http_get(address: &str, host: &str, path: &str) -> io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(address)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: cert-agent-tests\r\n\r\n"
    )?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)?;
    let head_end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other("no HTTP header end"))?;
    let head = String::from_utf8_lossy(&resp[..head_end]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line: {head}")))?;
    Ok((status, resp[head_end + 4..].to_vec()))
}
