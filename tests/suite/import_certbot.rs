//! `cert-agent import certbot`: certbot's own directory, made by Debian's `certbot` against
//! Pebble through a real nginx, taken over without a new order (the first `renew` orders
//! nothing), then renewed through cert-agent and served by the same nginx from certbot's
//! `live/` paths; and certbot-shaped directories with hostile parts (a path outside the
//! directory, a link leading out, a garbage certificate, a key of another certificate), each
//! named with its file, nothing written for it.

use crate::support;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use support::env::{Leaf, TestEnv, Web, files_under};
use support::pebble::{self, EAB_KID, Pebble};
use support::webserver::{Server, require};

/// Whether Debian's certbot is installed; panics when it is not and `CI` is set.
fn require_certbot() -> bool {
    if Path::new("/usr/bin/certbot").is_file() {
        return true;
    }
    let msg = "certbot is not installed (apt-get install certbot)";
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this test must not be skipped");
    }
    eprintln!("skipping: {msg}");
    false
}

/// A TOML string.
fn s(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn list(items: &[String]) -> String {
    format!(
        "[{}]",
        items.iter().map(|i| s(i)).collect::<Vec<_>>().join(", ")
    )
}

/// The main configuration file of a host that takes certbot's certificates over: the state
/// directory, the included files, the web server's commands in `[defaults]`, and `extra`
/// (with the tests' `[preflight]`: their names are in no DNS).
fn write_main_config(env: &TestEnv, defaults: &str, extra: &str) -> PathBuf {
    let config = env.config_path();
    fs::write(
        &config,
        format!(
            "[agent]\nstate_dir = {}\ninclude = [{}]\n{}\n[defaults]\n{defaults}\n{extra}",
            s(&env.state_dir().to_string_lossy()),
            s(&env.path("conf.d").join("*.toml").to_string_lossy()),
            env.preflight,
        ),
    )
    .unwrap();
    config
}

fn is_link(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// certbot's directory made by `certbot certonly --webroot` against Pebble, its http-01 file
/// served by nginx from the web root; nginx then serves certbot's `live/` files. Import,
/// `renew` orders nothing; `renew --force` orders once through cert-agent, installs into the
/// same `live/` paths and nginx serves the new serial.
/// Debian's certbot with its directories (`le` for its configuration) under the test's, and
/// Pebble's CA trusted.
fn certbot(env: &TestEnv, le: &Path, pebble: &Pebble) -> Command {
    let mut command = Command::new("/usr/bin/certbot");
    command
        .arg("--config-dir")
        .arg(le)
        .arg("--work-dir")
        .arg(env.path("certbot-work"))
        .arg("--logs-dir")
        .arg(env.path("certbot-logs"))
        .env("REQUESTS_CA_BUNDLE", &pebble.ca_file);
    command
}

#[test]
fn certbots_own_directory_is_taken_over_without_an_order_and_renewed_through_cert_agent() {
    if !require(Server::Nginx) || !pebble::require() || !require_certbot() {
        return;
    }
    let domain = "www.certbot-import.test";
    let env = TestEnv::new();
    let webroot = env.path("www-root");
    let spec = env.cert_spec("site", &[domain], "nginx");
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    let pebble = Pebble::start(web.http_port());
    let root = env.path("pebble-root.pem");
    pebble.write_root(&root);
    let le = env.path("letsencrypt");
    use base64::Engine;
    let hmac = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&pebble.eab_key);
    let issued = certbot(&env, &le, &pebble)
        .args(["certonly", "--non-interactive", "--agree-tos"])
        .args(["-m", "ops@example.test", "--no-eff-email"])
        .args(["--server", &pebble.directory])
        .args(["--eab-kid", EAB_KID, "--eab-hmac-key", &hmac])
        .arg("--webroot")
        .arg("-w")
        .arg(&webroot)
        .args(["-d", domain, "--cert-name", domain])
        .output()
        .expect("run certbot");
    assert!(
        issued.status.success(),
        "certbot: {}\n{}\n{}",
        String::from_utf8_lossy(&issued.stdout),
        String::from_utf8_lossy(&issued.stderr),
        pebble.log()
    );
    assert_eq!(pebble.requests("/order-plz"), 1, "certbot's order");
    let live = le.join("live").join(domain);
    let certbots = Leaf::from_pem_file(&live.join("cert.pem"));
    // nginx now names certbot's files, as on a host certbot manages.
    let Web::Nginx(nginx) = &web else {
        unreachable!()
    };
    let conf_file = nginx.prefix().join("nginx.conf");
    let conf = fs::read_to_string(&conf_file).unwrap();
    let files = &spec.files;
    let conf = conf
        .replace(
            &files
                .fullchain
                .as_ref()
                .unwrap()
                .to_string_lossy()
                .to_string(),
            &live.join("fullchain.pem").to_string_lossy(),
        )
        .replace(
            &files.key.to_string_lossy().to_string(),
            &live.join("privkey.pem").to_string_lossy(),
        );
    fs::write(&conf_file, conf).unwrap();
    let reload = web.reload_command();
    assert!(
        Command::new(&reload[0])
            .args(&reload[1..])
            .status()
            .unwrap()
            .success()
    );
    served(&web, &root, domain, &certbots.serial);

    let defaults = format!(
        "configtest_command = {}\nreload_command = {}\nverify_address = {}\n",
        list(&web.configtest_command()),
        list(&web.reload_command()),
        s(&web.https_addr())
    );
    let ca = pebble.config_table("pebble", &env.path("eab.key"));
    let config = write_main_config(&env, &defaults, &ca);
    let from = le.to_string_lossy().to_string();

    // A look first: nothing is written.
    let look = env
        .agent_at(&config, ["import", "certbot", "--from", &from])
        .run();
    look.expect_code(0);
    assert!(look.stdout.contains(domain), "{}", look.describe());
    assert!(look.stdout.contains("[acme.pebble]"), "{}", look.describe());
    assert!(
        look.stdout
            .contains("a new account is registered on the first order"),
        "certbot's account key is RSA: {}",
        look.describe()
    );
    assert!(
        look.stdout.contains("Nothing was written"),
        "{}",
        look.describe()
    );
    assert!(!env.path("conf.d").exists());
    assert!(env.record(domain).is_none());
    assert!(is_link(&live.join("cert.pem")));

    let conf_d = env.path("conf.d").to_string_lossy().to_string();
    let took = env
        .agent_at(
            &config,
            [
                "import", "certbot", "--from", &from, "--write", &conf_d, "--yes",
            ],
        )
        .run();
    took.expect_code(0);
    for step in [
        "cert-agent config check",
        "renew --dry-run",
        "certbot.timer",
    ] {
        assert!(took.stdout.contains(step), "{step}: {}", took.describe());
    }
    let fragment = fs::read_to_string(env.path("conf.d").join(format!("{domain}.toml"))).unwrap();
    assert!(fragment.contains("issuer = \"pebble\""), "{fragment}");
    assert!(
        fragment.contains(&webroot.to_string_lossy().to_string()),
        "{fragment}"
    );
    for f in ["cert.pem", "chain.pem", "fullchain.pem", "privkey.pem"] {
        assert!(!is_link(&live.join(f)), "{f} is a regular file now");
    }
    assert_eq!(
        fs::metadata(live.join("privkey.pem"))
            .unwrap()
            .permissions()
            .mode()
            & 0o077,
        0,
        "the key stays private"
    );
    let rec = env.record(domain).expect("a record");
    assert_eq!(rec["acme"]["ca"], "pebble");
    assert_eq!(
        support::env::norm_serial(rec["installed"]["serial"].as_str().unwrap()),
        certbots.serial
    );
    served(&web, &root, domain, &certbots.serial);

    env.agent_at(&config, ["config", "check"])
        .run()
        .expect_code(0);
    let first = env.agent_at(&config, ["--json", "renew"]).run();
    first.expect_code(0);
    assert_eq!(
        first.outcome(domain)["outcome"],
        "unchanged",
        "{}",
        first.describe()
    );
    assert_eq!(
        pebble.requests("/order-plz"),
        1,
        "no order: {}",
        pebble.log()
    );

    // certbot, were its timer still on, renews nothing: the lineage's live files are no
    // longer its links.
    let certbot_renew = certbot(&env, &le, &pebble)
        .args(["renew", "--non-interactive", "--force-renewal"])
        .output()
        .expect("run certbot renew");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&certbot_renew.stdout),
        String::from_utf8_lossy(&certbot_renew.stderr)
    );
    assert!(said.contains("symlink"), "{said}");
    assert!(said.contains("No renewals were attempted"), "{said}");
    assert_eq!(pebble.requests("/order-plz"), 1, "certbot ordered: {said}");

    // A second import takes nothing over twice.
    let again = env
        .agent_at(
            &config,
            [
                "import", "certbot", "--from", &from, "--write", &conf_d, "--yes",
            ],
        )
        .run();
    again.expect_code(3);
    assert!(
        again.stdout.contains("already configured"),
        "{}",
        again.describe()
    );

    let forced = env.agent_at(&config, ["--json", "renew", "--force"]).run();
    forced.expect_code(0);
    let serial = forced.installed_serial(domain);
    assert_ne!(serial, certbots.serial);
    assert_eq!(pebble.requests("/order-plz"), 2, "one order by cert-agent");
    assert_eq!(
        pebble.requests("/sign-me-up"),
        2,
        "certbot's RSA account, then cert-agent's own"
    );
    let leaf = served(&web, &root, domain, &serial);
    assert_eq!(
        leaf.serial,
        Leaf::from_pem_file(&live.join("fullchain.pem")).serial
    );
    assert!(
        files_under(&webroot).is_empty(),
        "nothing left in the web root"
    );
}

/// The leaf nginx serves for `name` once it has `serial`, checked against Pebble's root.
fn served(web: &Web, root: &Path, name: &str, serial: &str) -> Leaf {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match support::env::served_leaf(root, &web.https_addr(), name) {
            Ok(l) if l.serial == serial => return l,
            other if std::time::Instant::now() > deadline => {
                panic!("served for {name}: {other:?}\n{}", web.logs())
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

/// A lineage laid out as certbot 2.1 writes it (`archive/NAME/*1.pem`, relative links in
/// `live/NAME/`, `renewal/NAME.conf`, an account with an EC P-256 key), with a certificate
/// and key made here.
fn lineage(le: &Path, name: &str, webroot: &Path) {
    lineage_of(
        le,
        name,
        webroot,
        "https://acme-v02.api.letsencrypt.org/directory",
        "0123456789abcdef0123456789abcdef",
    );
}

/// [`lineage`] of the ACME directory `server` and the account `account`.
fn lineage_of(le: &Path, name: &str, webroot: &Path, server: &str, account: &str) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    let archive = le.join("archive").join(name);
    let live = le.join("live").join(name);
    fs::create_dir_all(&archive).unwrap();
    fs::create_dir_all(&live).unwrap();
    fs::create_dir_all(le.join("renewal")).unwrap();
    for (f, data) in [
        ("cert", cert.pem()),
        ("chain", cert.pem()),
        ("fullchain", format!("{}{}", cert.pem(), cert.pem())),
        ("privkey", key.serialize_pem()),
    ] {
        let file = archive.join(format!("{f}1.pem"));
        fs::write(&file, data).unwrap();
        if f == "privkey" {
            fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        }
        symlink(
            format!("../../archive/{name}/{f}1.pem"),
            live.join(format!("{f}.pem")),
        )
        .unwrap();
    }
    let l = le.display();
    fs::write(
        le.join("renewal").join(format!("{name}.conf")),
        format!(
            "# renew_before_expiry = 30 days\nversion = 2.1.0\n\
             archive_dir = {l}/archive/{name}\ncert = {l}/live/{name}/cert.pem\n\
             privkey = {l}/live/{name}/privkey.pem\nchain = {l}/live/{name}/chain.pem\n\
             fullchain = {l}/live/{name}/fullchain.pem\n\n\
             # Options used in the renewal process\n[renewalparams]\n\
             account = {account}\nauthenticator = webroot\n\
             webroot_path = {},\nserver = {server}\n\
             key_type = ecdsa\n[[webroot_map]]\n{name} = {}\n",
            webroot.display(),
            webroot.display()
        ),
    )
    .unwrap();
}

/// A certbot directory with a good lineage `good.example.test`, and `bad.example.test` broken
/// by `breaking`; the import takes the good one over and names the bad one's fault
/// (`expect`), writing nothing for it: no configuration file, no record, its links as they
/// were.
fn hostile(breaking: impl FnOnce(&Path, &Path), expect: &[&str]) {
    let env = TestEnv::new();
    let le = env.path("le");
    let webroot = env.path("www");
    let (good, bad) = ("good.example.test", "bad.example.test");
    lineage(&le, good, &webroot);
    lineage(&le, bad, &webroot);
    breaking(&le, env.dir.path());
    let config = write_main_config(
        &env,
        "verify_address = \"\"\n",
        "[acme.letsencrypt]\ndirectory = \"https://acme-v02.api.letsencrypt.org/directory\"\n",
    );
    let bad_live: Vec<(PathBuf, Option<PathBuf>)> = fs::read_dir(le.join("live").join(bad))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let t = fs::read_link(&p).ok();
            (p, t)
        })
        .collect();
    let conf_d = env.path("conf.d").to_string_lossy().to_string();
    let from = le.to_string_lossy().to_string();
    let look = env
        .agent_at(&config, ["--json", "import", "certbot", "--from", &from])
        .run();
    look.expect_code(3);
    let report = look.json();
    assert_eq!(report["applied"], false);
    assert_eq!(report["lineages"][0]["name"], good, "{}", look.describe());
    let refused = report["refused"][0]["error"].as_str().unwrap_or_default();
    assert!(refused.contains(expect[0]), "{}", look.describe());
    let out = env
        .agent_at(
            &config,
            [
                "import", "certbot", "--from", &from, "--write", &conf_d, "--yes",
            ],
        )
        .run();
    out.expect_code(3);
    for e in expect {
        assert!(out.stdout.contains(e), "{e}: {}", out.describe());
    }
    assert!(env.path("conf.d").join(format!("{good}.toml")).is_file());
    assert!(env.record(good).is_some());
    assert!(!env.path("conf.d").join(format!("{bad}.toml")).exists());
    assert!(
        env.record(bad).is_none(),
        "no record for the refused lineage"
    );
    for (p, t) in bad_live {
        assert_eq!(fs::read_link(&p).ok(), t, "{} untouched", p.display());
    }
    assert!(!out.text().contains("PRIVATE KEY"), "{}", out.describe());
}

#[test]
fn a_renewal_conf_naming_a_path_outside_the_directory_is_refused_with_its_line() {
    hostile(
        |le, dir| {
            let conf = le.join("renewal/bad.example.test.conf");
            let text = fs::read_to_string(&conf).unwrap();
            let outside = dir.join("elsewhere/cert.pem");
            let text = text.replace(
                &format!("cert = {}/live/bad.example.test/cert.pem", le.display()),
                &format!("cert = {}", outside.display()),
            );
            fs::write(conf, text).unwrap();
        },
        &["renewal/bad.example.test.conf line 4", "is not inside"],
    );
}

#[test]
fn a_live_link_leading_out_of_the_directory_is_refused() {
    hostile(
        |le, dir| {
            let outside = dir.join("outside-key.pem");
            let key = rcgen::KeyPair::generate().unwrap();
            fs::write(&outside, key.serialize_pem()).unwrap();
            let link = le.join("live/bad.example.test/privkey.pem");
            fs::remove_file(&link).unwrap();
            symlink(&outside, &link).unwrap();
        },
        &["live/bad.example.test/privkey.pem leads to", "outside"],
    );
}

/// A `live/NAME` directory that is a link to a directory outside, whose links lead back into
/// the archive: `--yes` would otherwise write there.
#[test]
fn a_live_directory_reached_through_a_link_is_refused() {
    hostile(
        |le, dir| {
            let live = le.join("live/bad.example.test");
            let elsewhere = dir.join("elsewhere-live");
            fs::rename(&live, &elsewhere).unwrap();
            for f in ["cert", "chain", "fullchain", "privkey"] {
                let link = elsewhere.join(format!("{f}.pem"));
                fs::remove_file(&link).unwrap();
                symlink(le.join(format!("archive/bad.example.test/{f}1.pem")), &link).unwrap();
            }
            symlink(&elsewhere, &live).unwrap();
        },
        &["live/bad.example.test is reached through a link"],
    );
}

/// A link whose archive file is gone.
#[test]
fn a_missing_archive_file_is_refused_naming_the_link() {
    hostile(
        |le, _| fs::remove_file(le.join("archive/bad.example.test/chain1.pem")).unwrap(),
        &["line 6", "live/bad.example.test/chain.pem"],
    );
}

#[test]
fn a_garbage_certificate_is_refused_naming_its_file() {
    hostile(
        |le, _| {
            fs::write(
                le.join("archive/bad.example.test/cert1.pem"),
                "-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n",
            )
            .unwrap();
        },
        &["archive/bad.example.test/cert1.pem", "not a certificate"],
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    hostile(
        |le, _| {
            let other = rcgen::KeyPair::generate().unwrap();
            fs::write(
                le.join("archive/bad.example.test/privkey1.pem"),
                other.serialize_pem(),
            )
            .unwrap();
        },
        &[
            "archive/bad.example.test/privkey1.pem",
            "is not the key of the certificate",
        ],
    );
}

/// A huge renewal configuration and one that is not UTF-8 are refused like any other fault.
#[test]
fn a_huge_or_binary_renewal_conf_is_refused() {
    hostile(
        |le, _| {
            let conf = le.join("renewal/bad.example.test.conf");
            fs::write(&conf, vec![b'#'; 2 * 1024 * 1024]).unwrap();
        },
        &["renewal/bad.example.test.conf", "more than the"],
    );
    hostile(
        |le, _| {
            fs::write(
                le.join("renewal/bad.example.test.conf"),
                b"cert = \xff\xfe\n",
            )
            .unwrap();
        },
        &["renewal/bad.example.test.conf", "not UTF-8"],
    );
}

/// certbot's account with an EC P-256 key (one Pebble knows, registered by cert-agent on
/// another host and laid out as certbot keeps it) is reused: written for the CA, and the next
/// order is signed with it and accepted by Pebble; no second registration, no key in the
/// output.
#[test]
fn an_ec_p256_certbot_account_is_reused_and_pebble_accepts_it() {
    if !pebble::require() {
        return;
    }
    use base64::Engine;
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let env = TestEnv::new();
    let http_port = support::webserver::free_port();
    let pebble = Pebble::start(http_port);
    let ca = pebble.config_table("pebble", &env.path("eab.key"));
    let registering = write_main_config(&env, "verify_address = \"\"\n", &ca);
    let made = env
        .agent_at(&registering, ["--json", "acme", "account", "pebble"])
        .run();
    made.expect_code(0);
    let url = made.json()["account"].as_str().unwrap().to_owned();
    assert_eq!(pebble.requests("/sign-me-up"), 1);
    let kept: serde_json::Value = serde_json::from_slice(
        &fs::read(env.state_dir().join("acme/pebble/account.json")).unwrap(),
    )
    .unwrap();
    let pkcs8 = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(kept["credentials"]["key_pkcs8"].as_str().unwrap())
        .unwrap();
    let pair = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &pkcs8,
    )
    .unwrap();
    use aws_lc_rs::encoding::AsBigEndian;
    use aws_lc_rs::signature::KeyPair;
    let public = pair.public_key().as_ref().to_vec();
    let d = pair.private_key().as_be_bytes().unwrap();
    let d_text = b64(d.as_ref());

    // certbot's layout on the host that moves: the same account under accounts/.
    let le = env.path("le");
    let id = "9f86d081884c7d659a2feaa0c55ad015";
    let host_path = pebble.directory.trim_start_matches("https://");
    let account_dir = le.join("accounts").join(host_path).join(id);
    fs::create_dir_all(&account_dir).unwrap();
    fs::write(
        account_dir.join("regr.json"),
        serde_json::json!({"body": {"contact": ["mailto:ops@example.test"]}, "uri": url})
            .to_string(),
    )
    .unwrap();
    fs::write(
        account_dir.join("meta.json"),
        r#"{"creation_host": "old-host", "register_to_eff": null}"#,
    )
    .unwrap();
    fs::write(
        account_dir.join("private_key.json"),
        serde_json::json!({
            "kty": "EC", "crv": "P-256",
            "x": b64(&public[1..33]), "y": b64(&public[33..65]), "d": d_text,
        })
        .to_string(),
    )
    .unwrap();
    lineage_of(
        &le,
        "moved.example.test",
        &env.path("www"),
        &pebble.directory,
        id,
    );

    // The new host: its own state directory, the same [acme.pebble].
    let state2 = env.path("state2");
    let moved = env.path("moved.toml");
    fs::write(
        &moved,
        fs::read_to_string(&registering).unwrap().replace(
            &format!("state_dir = {}", s(&env.state_dir().to_string_lossy())),
            &format!("state_dir = {}", s(&state2.to_string_lossy())),
        ),
    )
    .unwrap();
    let conf_d = env.path("conf.d").to_string_lossy().to_string();
    let from = le.to_string_lossy().to_string();
    let look = env
        .agent_at(&moved, ["import", "certbot", "--from", &from])
        .run();
    look.expect_code(0);
    assert!(
        look.stdout.contains("certbot's account is reused"),
        "{}",
        look.describe()
    );
    let took = env
        .agent_at(
            &moved,
            [
                "import", "certbot", "--from", &from, "--write", &conf_d, "--yes",
            ],
        )
        .run();
    took.expect_code(0);
    for out in [&look, &took] {
        assert!(!out.text().contains(&d_text), "the key is never printed");
    }
    let file = state2.join("acme/pebble/account.json");
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let shown = env
        .agent_at(&moved, ["--json", "acme", "account", "pebble"])
        .run();
    shown.expect_code(0);
    assert_eq!(shown.json()["account"], url.as_str());
    assert_eq!(shown.json()["registered_now"], false);
    // An order signed with the reused key under the account's URL: validated by the
    // standalone server on the port Pebble fetches from, installed into certbot's live files.
    let fragment = env.path("conf.d").join("moved.example.test.toml");
    let text = fs::read_to_string(&fragment).unwrap();
    let webroot_line = text
        .lines()
        .find(|l| l.starts_with("webroot = "))
        .unwrap()
        .to_owned();
    fs::write(
        &fragment,
        text.replace(
            &webroot_line,
            &format!("standalone = true\nlisten = \"127.0.0.1:{http_port}\""),
        ),
    )
    .unwrap();
    let renewed = env.agent_at(&moved, ["--json", "renew", "--force"]).run();
    renewed.expect_code(0);
    let serial = renewed.installed_serial("moved.example.test");
    let live = le.join("live/moved.example.test/fullchain.pem");
    assert_eq!(Leaf::from_pem_file(&live).serial, serial);
    assert_eq!(pebble.requests("/order-plz"), 1);
    assert_eq!(pebble.requests("/sign-me-up"), 1, "never registered again");
}
