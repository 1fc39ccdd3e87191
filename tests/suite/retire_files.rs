//! What `retire --remove-files` deletes, against the sandbox and a real nginx run with its own
//! `-c` configuration (only read with `-t`/`-T`, never started): a file that nginx still
//! names — also as the second pair of a dual RSA/ECDSA server, through a path relative to
//! its configuration — stops the retirement with nothing changed; an entry renamed with the
//! same paths keeps its live files when the old name is retired; a certificate no longer
//! configured is checked against the configured servers; a private Apache's server-wide
//! `SSLCertificateFile` counts; a placeholder path holding another certificate stays; an include file written by `discover` and edited since stays.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use support::env::{Publish, TestEnv};
use support::scenario;
use support::webserver::{Apache, Nginx, Server, require};

/// A private nginx under `DIR/private-nginx` whose configuration holds `servers` in `http`;
/// its config test command (`nginx -p .. -c .. -e .. -t`).
fn private_nginx(env: &TestEnv, servers: &str) -> (PathBuf, Vec<String>) {
    let binary = Nginx::binary().expect("nginx");
    let prefix = env.path("private-nginx");
    let tmp = prefix.join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    let conf = prefix.join("nginx.conf");
    let error_log = prefix.join("error.log");
    write_conf(&conf, &prefix, &tmp, servers);
    let arg = |p: &Path| p.display().to_string();
    let test = vec![
        arg(&binary),
        "-p".into(),
        format!("{}/", prefix.display()),
        "-c".into(),
        arg(&conf),
        "-e".into(),
        arg(&error_log),
        "-t".into(),
    ];
    (conf, test)
}

fn write_conf(conf: &Path, prefix: &Path, tmp: &Path, servers: &str) {
    let t = tmp.display();
    fs::write(
        conf,
        format!(
            "pid {}/nginx.pid;\nevents {{ worker_connections 16; }}\nhttp {{\n  \
             client_body_temp_path {t}; proxy_temp_path {t}; fastcgi_temp_path {t};\n  \
             uwsgi_temp_path {t}; scgi_temp_path {t};\n{servers}}}\n",
            prefix.display()
        ),
    )
    .unwrap();
}

/// A TLS server of the private nginx with the given `ssl_certificate`/`_key` pairs.
fn tls_server(name: &str, pairs: &[(&str, &str)]) -> String {
    let mut s = format!(
        "  server {{\n    listen 127.0.0.1:{} ssl;\n    server_name {name};\n",
        support::webserver::free_port()
    );
    for (cert, key) in pairs {
        s.push_str(&format!(
            "    ssl_certificate {cert};\n    ssl_certificate_key {key};\n"
        ));
    }
    s.push_str("  }\n");
    s
}

/// `www` issued through the sandbox into nginx's layout (validation by the built-in server;
/// the config test a no-op until the private nginx is set up).
fn issued_for_nginx(env: &mut TestEnv, extra: &str) {
    let port = support::webserver::free_port();
    env.sandbox.set_dcv_ports(port, 0);
    let mut spec = env.cert_spec("www", &["www.retire-private.test"], "nginx");
    spec.publish = Publish::Standalone(port);
    spec.reload_command = Some(vec!["true".into()]);
    spec.configtest_command = Some(vec!["true".into()]);
    spec.extra = extra.to_owned();
    env.certs.push(spec);
    scenario::renew_synced(env).expect_code(0);
}

fn retire_www(env: &TestEnv) -> support::env::AgentOutput {
    env.agent(["retire", "www", "--remove-files", "--yes"])
        .run()
}

/// Guards the nginx that is asked: the one `configtest_command` tests (a private nginx with
/// `-c`), not the system's. While it names the installed files the retirement stops, naming
/// the file and the line, and nothing changes; once the site is gone from that
/// configuration the files are deleted.
#[test]
fn retire_asks_the_private_nginx_of_configtest_command() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    issued_for_nginx(&mut env, "");
    let files = env.spec("www").files.clone();
    let leaf = files.leaf_file();
    let server = tls_server(
        "www.retire-private.test",
        &[(
            &leaf.display().to_string(),
            &files.key.display().to_string(),
        )],
    );
    let (conf, test) = private_nginx(&env, &server);
    env.spec_mut("www").configtest_command = Some(test.clone());
    let out = retire_www(&env);
    out.expect_failure();
    assert!(
        out.stderr.contains("the web server still uses")
            && out
                .stderr
                .contains(&format!("{} (named at {}:", leaf.display(), conf.display()))
            && out.stderr.contains("nothing was changed"),
        "{}",
        out.describe()
    );
    for f in files.all() {
        assert!(f.exists(), "{} kept", f.display());
    }
    assert!(env.record("www").is_some(), "not retired");

    // The site is gone from the private nginx: the files go.
    write_conf(
        &conf,
        &env.path("private-nginx"),
        &env.path("private-nginx/tmp"),
        "",
    );
    let out = retire_www(&env);
    out.expect_code(0);
    for f in files.all() {
        assert!(!f.exists(), "{} deleted: {}", f.display(), out.describe());
    }
}

/// Guards the second pair of a dual RSA/ECDSA server: the certificate (RSA) is nginx's second
/// `ssl_certificate` pair, named through a path relative to the configuration's directory,
/// after another certificate's ECDSA pair; the retirement stops and names it.
#[test]
fn the_second_pair_of_a_dual_rsa_ecdsa_server_is_in_use() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    issued_for_nginx(&mut env, "key_type = \"rsa-2048\"\n");
    let files = env.spec("www").files.clone();
    let other = env.cert_spec("ecdsa", &["www.retire-private.test"], "nginx");
    env.write_placeholder(&other);
    // From DIR/private-nginx, the installed files are ../out/www/...
    let server = tls_server(
        "www.retire-private.test",
        &[
            (
                &other.files.leaf_file().display().to_string(),
                &other.files.key.display().to_string(),
            ),
            ("../out/www/fullchain.pem", "../out/www/privkey.pem"),
        ],
    );
    let (conf, test) = private_nginx(&env, &server);
    env.spec_mut("www").configtest_command = Some(test);
    let out = retire_www(&env);
    out.expect_failure();
    for f in [&files.leaf_file(), &files.key] {
        assert!(
            out.stderr
                .contains(&format!("{} (named at {}:", f.display(), conf.display())),
            "{}: {}",
            f.display(),
            out.describe()
        );
        assert!(f.exists());
    }
    assert!(env.record("www").is_some(), "not retired");
}

/// Guards an entry renamed with the same paths: the new name's certificate is installed over
/// the old one's files; retiring the old name (no longer configured) keeps every file, each
/// with why (another serial, another certificate's paths), and retires the old record.
#[test]
fn retiring_a_renamed_entry_keeps_the_new_certificates_live_files() {
    let mut env = TestEnv::new();
    env.allow_orders = true;
    let spec = env.standalone_spec("old", &["www.retire-renamed.test"]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);
    let old_serial = env.record("old").unwrap()["installed"]["serial"]
        .as_str()
        .unwrap()
        .to_owned();
    env.spec_mut("old").name = "new".into();
    scenario::renew_synced(&env).expect_code(0);
    let new_serial = env.record("new").unwrap()["installed"]["serial"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(old_serial, new_serial);
    let files = env.spec("new").files.clone();
    let before: Vec<Vec<u8>> = files.all().iter().map(|f| fs::read(f).unwrap()).collect();

    let out = env
        .agent(["retire", "old", "--remove-files", "--yes"])
        .run();
    out.expect_code(0);
    let after: Vec<Vec<u8>> = files.all().iter().map(|f| fs::read(f).unwrap()).collect();
    assert!(before == after, "the new certificate's files are untouched");
    let leaf = files.leaf_file();
    assert!(
        out.stdout.lines().any(|l| l.starts_with(&format!(
            "kept {} (holds serial {new_serial}, not this certificate's {old_serial}",
            leaf.display()
        ))),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout
            .contains(&format!("kept {} (", files.key.display())),
        "{}",
        out.describe()
    );
    assert!(env.record("old").is_none() && env.record("new").is_some());
    // The new name goes on: nothing to do.
    let again = env.agent(["--json", "renew"]).run();
    again.expect_code(0);
    assert_eq!(
        again.outcome("new")["outcome"],
        "unchanged",
        "{}",
        again.describe()
    );
}

/// The include file `discover --write` writes for `domain` (one nginx site, from an `nginx -T`
/// dump) into `conf.d/`, which the configuration then includes.
pub(crate) fn discovered_include(env: &mut TestEnv, domain: &str) -> PathBuf {
    let webroot = env.path("site-root");
    fs::create_dir_all(&webroot).unwrap();
    let dump = env.path("nginx-T.txt");
    fs::write(
        &dump,
        format!(
            "# configuration file /etc/nginx/nginx.conf:\nhttp {{\n  server {{\n    listen 80;\n    \
             server_name {domain};\n    root {};\n  }}\n}}\n",
            webroot.display()
        ),
    )
    .unwrap();
    let conf_d = env.path("conf.d");
    let (dump_arg, conf_arg) = (dump.to_str().unwrap(), conf_d.to_str().unwrap());
    env.agent([
        "discover",
        "--from",
        dump_arg,
        "--product-id",
        "1101",
        "--write",
        conf_arg,
    ])
    .run()
    .expect_code(0);
    env.agent_extra = format!("include = [\"{conf_arg}/*.toml\"]\n");
    conf_d.join(format!("{domain}.toml"))
}

/// Guards an include file `discover --write` wrote and the operator edited since: it is no
/// longer cert-agent's own, so retire names it and leaves it as it is.
#[test]
fn an_include_file_edited_since_discover_wrote_it_stays() {
    let mut env = TestEnv::new();
    let fragment = discovered_include(&mut env, "edited.retire-include.test");
    let mut text = fs::read_to_string(&fragment).unwrap();
    text = text.replace("[[certificate]]", "# my note\n[[certificate]]");
    fs::write(&fragment, &text).unwrap();
    let out = env
        .agent(["retire", "edited.retire-include.test", "--yes"])
        .run();
    out.expect_code(0);
    assert_eq!(
        fs::read_to_string(&fragment).unwrap(),
        text,
        "left as it is"
    );
    assert!(
        out.stdout.contains(&format!(
            "remove the [[certificate]] entry 'edited.retire-include.test' from {}",
            fragment.display()
        )),
        "{}",
        out.describe()
    );
}

/// Guards a certificate no longer configured: its entry is gone, another certificate's private
/// nginx still loads its files; retire asks that nginx all the same and refuses.
#[test]
fn a_certificate_no_longer_configured_still_gets_the_web_server_check() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("old", &["old.retire-private.test"]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);
    let files = env.spec("old").files.clone();
    let server = tls_server(
        "old.retire-private.test",
        &[(
            &files.leaf_file().display().to_string(),
            &files.key.display().to_string(),
        )],
    );
    let (conf, test) = private_nginx(&env, &server);
    let mut other = env.cert_spec("other", &["other.retire-private.test"], "nginx");
    other.publish = Publish::Webroot(env.path("other-root"));
    other.configtest_command = Some(test);
    other.reload_command = Some(vec!["true".into()]);
    env.certs = vec![other];
    let out = env
        .agent(["retire", "old", "--remove-files", "--yes"])
        .run();
    out.expect_failure();
    assert!(
        out.stderr.contains(&format!(
            "{} (named at {}:",
            files.leaf_file().display(),
            conf.display()
        )),
        "{}",
        out.describe()
    );
    for f in files.all() {
        assert!(f.exists(), "{} kept", f.display());
    }
    assert!(env.record("old").is_some(), "not retired");
}

/// Guards the placeholder's recorded serial: the operator put their own certificate at the
/// install paths after the placeholder was written; retire keeps those files (not the
/// recorded placeholder) and deletes nothing else of theirs.
#[test]
fn a_placeholder_path_holding_another_certificate_is_kept() {
    let mut env = TestEnv::new();
    let mut spec = env.cert_spec("site", &["site.retire-placeholder.test"], "none");
    spec.publish = Publish::Webroot(env.path("site-root"));
    env.certs.push(spec);
    env.agent(["placeholder", "site"]).run().expect_code(0);
    let files = env.spec("site").files.clone();
    // The operator's own certificate and key over the placeholder.
    let theirs = env.write_placeholder(&env.spec("site").clone());
    let out = env.agent(["retire", "site", "--yes"]).run();
    out.expect_code(0);
    for f in files.all() {
        assert!(f.exists(), "{} kept: {}", f.display(), out.describe());
        if let Some(bytes) = theirs.get(&f) {
            assert_eq!(&fs::read(&f).unwrap(), bytes, "{} untouched", f.display());
        }
    }
    assert!(
        out.stdout.contains(&format!(
            "kept {} (not the recorded placeholder: holds serial",
            files.leaf_file().display()
        )),
        "{}",
        out.describe()
    );
}

/// Guards Apache's server-wide `SSLCertificateFile`: a private Apache (`apache2 -f CONF -t`,
/// its main file not under a usual name) names the installed certificate and key at the
/// server level, outside any virtual host and without `SSLEngine on`; retire asks that Apache
/// (`-f CONF -S`), reads its main file and refuses.
#[test]
fn a_global_apache_ssl_certificate_file_is_in_use() {
    if !require(Server::Apache) {
        return;
    }
    let mut env = TestEnv::new();
    let port = support::webserver::free_port();
    env.sandbox.set_dcv_ports(port, 0);
    let mut spec = env.cert_spec("www", &["www.retire-apache.test"], "apache");
    spec.publish = Publish::Standalone(port);
    spec.reload_command = Some(vec!["true".into()]);
    spec.configtest_command = Some(vec!["true".into()]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);
    let files = env.spec("www").files.clone();
    let cert = files.cert.clone().expect("apache's certificate file");

    let root = env.path("private-apache");
    fs::create_dir_all(root.join("run")).unwrap();
    let binary = Apache::binary().expect("apache");
    let modules = Apache::modules_dir().expect("apache modules");
    let compiled = std::process::Command::new(&binary)
        .arg("-l")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let r = root.display();
    let mut conf_text = format!(
        "ServerRoot \"{r}\"\nServerName localhost\nPidFile \"{r}/pid\"\n\
         DefaultRuntimeDir \"{r}/run\"\nErrorLog \"{r}/error.log\"\n"
    );
    for (name, source) in [
        ("mpm_event", "event.c"),
        ("unixd", "mod_unixd.c"),
        ("authz_core", "mod_authz_core.c"),
        ("ssl", "mod_ssl.c"),
    ] {
        let file = modules.join(format!("mod_{name}.so"));
        if !compiled.contains(source) && file.is_file() {
            conf_text.push_str(&format!(
                "LoadModule {name}_module \"{}\"\n",
                file.display()
            ));
        }
    }
    conf_text.push_str(&format!(
        "SSLSessionCache none\nSSLCertificateFile \"{}\"\nSSLCertificateKeyFile \"{}\"\n",
        cert.display(),
        files.key.display()
    ));
    let conf = root.join("private-main.conf");
    fs::write(&conf, conf_text).unwrap();
    let test = vec![
        binary.display().to_string(),
        "-f".into(),
        conf.display().to_string(),
        "-t".into(),
    ];
    let check = std::process::Command::new(&test[0])
        .args(&test[1..])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "the private Apache's config test: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    env.spec_mut("www").configtest_command = Some(test);
    let out = retire_www(&env);
    out.expect_failure();
    for f in [&cert, &files.key] {
        assert!(
            out.stderr
                .contains(&format!("{} (named at {}:", f.display(), conf.display())),
            "{}: {}",
            f.display(),
            out.describe()
        );
    }
    for f in files.all() {
        assert!(f.exists(), "{} kept", f.display());
    }
}
