//! DNS validation end to end: `dcv = "dns-txt"` with a `dns_hook` script that writes the TXT
//! record into the sandbox's zone through its control API, and removes it afterwards.

use crate::support;

use std::fs;

use support::env::{Publish, TestEnv, write_script};

/// Guards the DNS hook contract and the DNS-TXT path: the hook gets action, record name, type,
/// value and domain; the record it publishes validates the order; after issuance the hook is
/// called with `remove` for the same record, and the certificate is installed.
#[test]
fn dns_txt_hook_publishes_validates_and_removes() {
    let mut env = TestEnv::new();
    let domain = "www.e2e-dns.test";
    let hook = env.path("dns-hook.sh");
    let log = env.path("dns-hook.log");
    write_script(&hook, &zone_hook(&env, &log));
    let mut spec = env.cert_spec("www", &[domain], "none");
    spec.dcv = Some("dns-txt".into());
    spec.publish = Publish::Nothing;
    spec.dns_hook = Some(vec![hook.to_string_lossy().into_owned()]);
    let files = spec.files.clone();
    env.certs.push(spec);

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(
        support::env::Leaf::from_pem_file(files.cert.as_ref().unwrap()).serial,
        serial
    );

    let lines: Vec<Vec<String>> = fs::read_to_string(&log)
        .expect("the hook ran")
        .lines()
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect();
    assert_eq!(lines.len(), 2, "one add, one remove: {lines:?}");
    let (add, remove) = (&lines[0], &lines[1]);
    assert_eq!(add[0], "add");
    assert_eq!(add[1], format!("_pki-validation.{domain}"));
    assert_eq!(add[2], "TXT");
    assert!(!add[3].is_empty(), "a TXT value");
    assert_eq!(add[4], domain);
    assert_eq!(add[5], "www");
    assert_eq!(remove[0], "remove");
    assert_eq!(&remove[1..], &add[1..], "the same record is removed");
    assert!(
        env.sandbox.dns_records().is_empty(),
        "the zone is clean again: {:?}",
        env.sandbox.dns_records()
    );
}

/// Guards CNAME_CSR_HASH through the hook: with `cname_target_domain` set, the hook creates
/// `_<md5>.<domain>` CNAME `<sha256 halves>[.<unique value>].<CA domain>` (the unique value for
/// family S), the sandbox validates it, and the record is removed afterwards.
#[test]
fn cname_hook_publishes_validates_and_removes_families_s_and_d() {
    for (product, family, ca) in [
        (1101, "S", "ca-s.sandbox.test"),
        (2101, "D", "ca-d.sandbox.test"),
    ] {
        let mut env = TestEnv::new();
        let domain = "www.e2e-cname.test";
        let hook = env.path("dns-hook.sh");
        let log = env.path("dns-hook.log");
        write_script(&hook, &zone_hook(&env, &log));
        let mut spec = env.cert_spec("www", &[domain], "none");
        spec.product_id = product;
        spec.dcv = Some("cname".into());
        spec.publish = Publish::Nothing;
        spec.dns_hook = Some(vec![hook.to_string_lossy().into_owned()]);
        spec.extra = format!("family = \"{family}\"\ncname_target_domain = \"{ca}\"\n");
        env.certs.push(spec);

        let out = env.renew();
        out.expect_code(0);
        out.installed_serial("www");
        assert_eq!(env.billed(), 1);
        let lines: Vec<Vec<String>> = fs::read_to_string(&log)
            .expect("the hook ran")
            .lines()
            .map(|l| l.split(' ').map(str::to_owned).collect())
            .collect();
        assert_eq!(
            lines.len(),
            2,
            "family {family}: one add, one remove: {lines:?}"
        );
        assert_eq!(lines[0][0], "add");
        assert_eq!(lines[0][2], "CNAME");
        assert!(lines[0][1].starts_with('_') && lines[0][1].ends_with(domain));
        assert!(lines[0][3].ends_with(ca), "{:?}", lines[0]);
        assert_eq!(lines[1][0], "remove");
        assert!(env.sandbox.dns_records().is_empty());
    }
}

/// A hook that logs its call to `log` and writes the record into the sandbox's zone.
fn zone_hook(env: &TestEnv, log: &std::path::Path) -> String {
    format!(
        r#"set -eu
LOG='{log}'
CA='{ca}'
BASE='{base}'
printf '%s %s %s %s %s %s\n' "$CERT_AGENT_DCV_ACTION" "$CERT_AGENT_DCV_RECORD_NAME" \
  "$CERT_AGENT_DCV_RECORD_TYPE" "$CERT_AGENT_DCV_RECORD_VALUE" "$CERT_AGENT_DCV_DOMAIN" \
  "$CERT_AGENT_NAME" >> "$LOG"
case "$CERT_AGENT_DCV_ACTION" in
  add)
    body=$(printf '{{"name":"%s","rtype":"%s","value":"%s"}}' "$CERT_AGENT_DCV_RECORD_NAME" \
      "$CERT_AGENT_DCV_RECORD_TYPE" "$CERT_AGENT_DCV_RECORD_VALUE")
    curl -sS --fail --cacert "$CA" -H 'Content-Type: application/json' -X POST \
      --data "$body" "$BASE/_sandbox/dns" >/dev/null ;;
  remove)
    body=$(printf '{{"name":"%s","rtype":"%s"}}' "$CERT_AGENT_DCV_RECORD_NAME" \
      "$CERT_AGENT_DCV_RECORD_TYPE")
    curl -sS --fail --cacert "$CA" -H 'Content-Type: application/json' -X POST \
      --data "$body" "$BASE/_sandbox/dns/remove" >/dev/null ;;
  *) exit 3 ;;
esac
"#,
        log = log.display(),
        ca = env.sandbox.api_ca_path().display(),
        base = env.sandbox.base_url(),
    )
}

/// Guards a failing DNS hook: the run fails quoting the hook's output, nothing is installed,
/// and once the hook works the next (forced) run validates and installs the same order.
#[test]
fn failing_dns_hook_fails_the_run_and_next_run_completes() {
    let mut env = TestEnv::new();
    let domain = "www.e2e-dns-fail.test";
    let hook = env.path("dns-hook.sh");
    let log = env.path("dns-hook.log");
    write_script(&hook, "echo 'zone API unavailable' >&2\nexit 1\n");
    let mut spec = env.cert_spec("www", &[domain], "none");
    spec.dcv = Some("dns-txt".into());
    spec.dns_hook = Some(vec![hook.to_string_lossy().into_owned()]);
    let files = spec.files.clone();
    env.certs.push(spec);

    let out = env.renew();
    out.expect_code(1);
    assert!(
        out.text().contains("zone API unavailable"),
        "the hook's output is quoted\n{}",
        out.describe()
    );
    assert!(!files.key.exists(), "nothing installed");
    assert_eq!(env.billed(), 1);

    write_script(&hook, &zone_hook(&env, &log));
    let again = env.renew_force();
    again.expect_code(0);
    again.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);
    assert!(env.sandbox.dns_records().is_empty());
}

/// One DNS-TXT issuance of `product_id` for `domains` through the zone-writing hook; returns
/// the run and the hook's log lines.
fn dns_issue(product_id: u64, domains: &[&str]) -> (TestEnv, support::env::AgentOutput, String) {
    let mut env = TestEnv::new();
    let hook = env.path("dns-hook.sh");
    let log = env.path("dns-hook.log");
    write_script(&hook, &zone_hook(&env, &log));
    let mut spec = env.cert_spec("www", domains, "none");
    spec.product_id = product_id;
    spec.dcv = Some("dns-txt".into());
    spec.dns_hook = Some(vec![hook.to_string_lossy().into_owned()]);
    env.certs.push(spec);
    let out = env.agent(["--json", "renew", "--wait", "8"]).run();
    let log = fs::read_to_string(&log).unwrap_or_default();
    (env, out, log)
}

/// Guards wildcard names with DNS-TXT (product 1102, which also covers the bare domain): the
/// record is `_pki-validation.<domain without *.>`, and the leaf covers the wildcard.
#[test]
fn dns_txt_wildcard_certificate() {
    let (env, out, log) = dns_issue(1102, &["*.e2e-wild.test"]);
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert!(
        log.lines()
            .any(|l| l.starts_with("add _pki-validation.e2e-wild.test TXT ")),
        "{log}"
    );
    let leaf = support::env::Leaf::from_pem_file(env.spec("www").files.cert.as_ref().unwrap());
    assert_eq!(leaf.serial, serial);
    assert!(leaf.dns_names.iter().any(|n| n == "*.e2e-wild.test"));
    assert!(env.sandbox.dns_records().is_empty());
}

/// Guards DNS-TXT for several names where the CA gives each name its own value (family C,
/// ucc product 3103; the document states one value per domain for families D and C): every
/// name gets its own record with its own value, and the certificate is issued.
#[test]
fn dns_txt_per_domain_values_family_c() {
    let names = ["www.e2e-dns-c.test", "api.e2e-dns-c.test"];
    let (env, out, log) = dns_issue(3103, &names);
    assert_eq!(
        out.code,
        Some(0),
        "hook calls:\n{log}\nsandbox zone: {:?}\n{}",
        env.sandbox.dns_records(),
        out.describe()
    );
    out.installed_serial("www");
    let adds: Vec<Vec<&str>> = log
        .lines()
        .filter(|l| l.starts_with("add "))
        .map(|l| l.split(' ').collect())
        .collect();
    for n in names {
        assert!(
            adds.iter().any(|a| a[1] == format!("_pki-validation.{n}")),
            "a record for {n}: {log}"
        );
    }
    assert_ne!(adds[0][3], adds[1][3], "each name has its own value");
}

/// Guards DNS-TXT for several names of family S (ucc product 1103): one value for the order,
/// a record per name.
#[test]
fn dns_txt_several_names_family_s() {
    let names = ["www.e2e-dns-s.test", "api.e2e-dns-s.test"];
    let (env, out, log) = dns_issue(1103, &names);
    assert_eq!(out.code, Some(0), "hook calls:\n{log}\n{}", out.describe());
    out.installed_serial("www");
    assert!(env.sandbox.dns_records().is_empty());
}
