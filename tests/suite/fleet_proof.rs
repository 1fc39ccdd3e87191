//! Every host proves what it serves after a fleet install (real etcd of three members, two
//! hosts each with its own nginx, the sandbox): a TLS handshake to its verify address for each
//! name of the certificate shows the new serial and a chain that verifies, the health command
//! runs, and the proof is written sealed under the host's own key, where `fleet status` shows
//! it. A vhost left on the old certificate fails the proof naming the host, the name and both
//! serials; a forged proof, and another host's proof copied to a host's key, are refused naming
//! the key.

use std::fs;
use std::time::Duration;

use crate::fleet_e2e::{Fleet, ready};
use crate::support::env::{norm_serial, wait_until};
use crate::support::webserver::Server;

pub(crate) const NAMES: &str = "www.fleet.test shop.fleet.test";

/// Host `i`'s nginx serves what it serves now for `name` from then on: a server block of its
/// own with a copy of the files installed now, ahead of the managed one.
pub(crate) fn stale_vhost(f: &Fleet, i: usize, name: &str) {
    let dir = f.env.path(&format!("web{}", i + 1));
    let stale = dir.join("stale");
    fs::create_dir_all(&stale).unwrap();
    for file in ["fullchain.pem", "privkey.pem"] {
        fs::copy(dir.join("out").join(file), stale.join(file)).unwrap();
    }
    let conf_path = dir.join("nginx/nginx.conf");
    let conf = fs::read_to_string(&conf_path).unwrap();
    let block = format!(
        "  server {{\n    listen {} ssl;\n    server_name {name};\n    \
         ssl_certificate {};\n    ssl_certificate_key {};\n  }}\n  server {{",
        f.hosts[i].web.https_addr(),
        stale.join("fullchain.pem").display(),
        stale.join("privkey.pem").display()
    );
    fs::write(&conf_path, conf.replacen("  server {", &block, 1)).unwrap();
    let reload = f.hosts[i].web.reload_command();
    let ok = std::process::Command::new(&reload[0])
        .args(&reload[1..])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Host `i`'s nginx without the server block [`stale_vhost`] put first, reloaded.
pub(crate) fn fix_vhost(f: &Fleet, i: usize) {
    let conf_path = f.env.path(&format!("web{}/nginx/nginx.conf", i + 1));
    let conf = fs::read_to_string(&conf_path).unwrap();
    let block_at = conf.find("  server {\n    listen 127.0.0.1:").unwrap();
    let end = conf[block_at..].find("  }\n").unwrap() + block_at + 4;
    fs::write(&conf_path, format!("{}{}", &conf[..block_at], &conf[end..])).unwrap();
    let reload = f.hosts[i].web.reload_command();
    let ok = std::process::Command::new(&reload[0])
        .args(&reload[1..])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// `fleet status --json` of host `i`, with its exit code.
pub(crate) fn status(f: &Fleet, i: usize) -> (Option<i32>, serde_json::Value) {
    let out = f.agent(i, &["--json", "fleet", "status"]);
    (out.code, out.json())
}

/// Host `host`'s row of certificate `www` in `v`.
pub(crate) fn row<'a>(v: &'a serde_json::Value, host: &str) -> &'a serde_json::Value {
    v["certificates"][0]["hosts"]
        .as_array()
        .and_then(|h| h.iter().find(|r| r["host"] == host))
        .unwrap_or(&serde_json::Value::Null)
}

/// The serial of host `host`'s proof in `v`.
pub(crate) fn proved(v: &serde_json::Value, host: &str) -> Option<String> {
    row(v, host)["proof"]["serial"].as_str().map(norm_serial)
}

#[test]
fn every_host_proves_what_it_serves_and_a_stale_vhost_is_named() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start_under(
        "/cert-agent/",
        &[Server::Nginx, Server::Nginx],
        &[("www", NAMES)],
    );
    let health_log = f.env.path("web2/health.log");
    let mut config = fs::read_to_string(&f.hosts[1].config).unwrap();
    config.push_str(&format!(
        "health_command = \"echo \\\"$CERT_AGENT_CERTIFICATE $CERT_AGENT_SERIAL\\\" >> {}\"\n",
        health_log.display()
    ));
    fs::write(&f.hosts[1].config, config).unwrap();

    f.start_daemon(1);
    let out = f.agent(0, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    let first = out.installed_serial("www");
    f.wait_all_serve(&first, Duration::from_secs(30));

    // Both hosts proved the serial for both names, the chain verifying; web2's health
    // command ran with the certificate's name and serial.
    let mut v = serde_json::Value::Null;
    let both = wait_until(Duration::from_secs(30), || {
        v = status(&f, 0).1;
        proved(&v, "web1").as_deref() == Some(first.as_str())
            && proved(&v, "web2").as_deref() == Some(first.as_str())
    });
    assert!(both, "{v:#}\n{}", f.logs());
    for host in ["web1", "web2"] {
        let r = row(&v, host);
        assert!(r["proof_failure"].is_null(), "{host}: {r:#}");
        let answers = r["proof"]["answers"].as_array().unwrap();
        let names: Vec<&str> = answers
            .iter()
            .map(|a| a["server_name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["www.fleet.test", "shop.fleet.test"],
            "{host}: {r:#}"
        );
        for a in answers {
            assert_eq!(
                a["address"],
                f.hosts[if host == "web1" { 0 } else { 1 }].web.https_addr()
            );
            assert_eq!(norm_serial(a["served"].as_str().unwrap()), first, "{a}");
            assert!(a["chain_error"].is_null() && a["error"].is_null(), "{a}");
        }
    }
    assert_eq!(row(&v, "web2")["proof"]["health"]["exit"], 0, "{v:#}");
    assert!(
        row(&v, "web1")["proof"]["health"].is_null(),
        "web1 has no health command"
    );
    let health = fs::read_to_string(&health_log).unwrap();
    assert_eq!(
        health.trim().to_uppercase(),
        format!("WWW {first}"),
        "{health}"
    );
    assert_eq!(status(&f, 1).0, Some(0));

    // web2's nginx keeps serving the first certificate for shop.fleet.test from a vhost of
    // its own (a server block with a copy of the old files, ahead of the managed one).
    stale_vhost(&f, 1, "shop.fleet.test");

    // A reissue reaches web2; its install's own check (the common name) passes, its proof
    // meets the old certificate for shop.fleet.test.
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let second = re.installed_serial("www");
    assert_ne!(second, first);
    let failed = wait_until(Duration::from_secs(40), || {
        v = status(&f, 0).1;
        proved(&v, "web2").as_deref() == Some(second.as_str())
    });
    assert!(failed, "{v:#}\n{}", f.logs());
    let why = row(&v, "web2")["proof_failure"]
        .as_str()
        .unwrap_or_default()
        .to_uppercase();
    assert!(
        why.contains("(SNI SHOP.FLEET.TEST) SERVES SERIAL")
            && why.contains(&format!("{first}, NOT {second}")),
        "{v:#}"
    );
    assert!(
        !why.contains("WWW.FLEET.TEST"),
        "only the stale name fails: {why}"
    );
    assert!(row(&v, "web1")["proof_failure"].is_null(), "{v:#}");
    let unproven = v["unproven"].as_array().unwrap();
    assert_eq!(unproven.len(), 1, "{v:#}");
    assert!(
        unproven[0].as_str().unwrap().starts_with("web2: www: "),
        "{v:#}"
    );
    // Every surface of fleet status: exit 1 and the line naming host, name and serials.
    let text = f.agent(1, &["fleet", "status"]);
    assert_eq!(text.code, Some(1), "{}", text.describe());
    let t = text.text();
    assert!(
        t.contains("www: web2: PROOF FAILED:") && t.contains("shop.fleet.test"),
        "{t}"
    );

    // The vhost fixed (the old server block gone): web2's next run proves again, passes,
    // and fleet status is clean again.
    fix_vhost(&f, 1);
    f.kill_daemon(1);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let (code, v) = status(&f, 0);
    assert_eq!(code, Some(0), "{v:#}");
    assert!(row(&v, "web2")["proof_failure"].is_null(), "{v:#}");
    assert_eq!(proved(&v, "web2").as_deref(), Some(second.as_str()));

    // Forged proofs: garbage at web1's key, and web2's proof copied to web1's key, are
    // refused naming the key; web2's own proof still opens.
    let mut etcd = f.etcd();
    let web2_proof = etcd.get("hosts/web2/proof/www").expect("web2's proof");
    for forged in [
        b"{\"host\":\"web1\",\"serial\":\"01\"}".to_vec(),
        web2_proof,
    ] {
        etcd.put("hosts/web1/proof/www", forged);
        let (code, v) = status(&f, 1);
        assert_eq!(code, Some(1), "{v:#}");
        let why = row(&v, "web1")["proof_failure"]
            .as_str()
            .unwrap_or_default();
        assert!(
            why.contains("/cert-agent/hosts/web1/proof/www") && why.contains("refused"),
            "{v:#}"
        );
        assert!(row(&v, "web1")["proof"].is_null(), "{v:#}");
        assert_eq!(
            proved(&v, "web2").as_deref(),
            Some(second.as_str()),
            "{v:#}"
        );
    }
}
