//! The configuration contract: every key, default, refusal and message.

use super::defs;
use super::error::{distance, suggest};
use super::testing::MINIMAL;
use super::*;
use crate::crypto::KeyType;
use crate::values::DcvType;

/// The example of `docs/configuration.md`, with every commented key set.
pub(crate) const FULL: &str = r#"
[api]
base_url = "https://partner.example.net/"
login = "ops@example.com"
password_file = "/etc/cert-agent/password"
ca_file = "/path/extra-root.pem"
connect_timeout_secs = 5
timeout_secs = 30
retries = 2

[agent]
state_dir = "/var/lib/cert-agent"
renew_before_days = 30
poll_interval_secs = 300
allow_orders = false
max_order_price = "100.00"
concurrency = 2
notify_command = ["/usr/local/bin/notify", "--quiet"]

[defaults]
country = "DE"
region = "Berlin"
city = "Berlin"
key_type = "rsa-2048"

[[certificate]]
name = "www"
domains = ["www.example.com", "Example.com"]
product_id = 101
days = 365
key_type = "ecdsa-p256"
dcv = "http"
webroot = "/var/www/html"
server = "nginx"
cert_path = "/etc/ssl/www/cert.pem"
chain_path = "/etc/ssl/www/chain.pem"
fullchain_path = "/etc/ssl/www/fullchain.pem"
key_path = "/etc/ssl/www/privkey.pem"
owner = "root"
group = "ssl-cert"
mode = "0640"
reload_command = "systemctl reload nginx"
configtest_command = ["nginx", "-t"]
deploy_hook = "/usr/local/bin/deployed"
verify_address = "127.0.0.1:443"
reuse_key = false
organization_name = "Example GmbH"
organizational_unit = "IT"
address_1 = "Street 1"
address_2 = "Floor 2"
zip_code = "10115"
unique_value = "abc123"
ssl_server_software_id = 180

[[certificate]]
name = "wild"
domains = ["*.example.org"]
product_id = 102
dcv = "dns-txt"
dns_hook = "/usr/local/bin/dns-hook"
server = "apache"
verify_address = ""

[[certificate]]
name = "multi"
domains = ["a.example.net", "b.example.net"]
product_id = 103
dcv = "https"
webroot = { "a.example.net" = "/srv/a", "b.example.net" = "/srv/b" }

[[certificate]]
name = "solo"
domains = ["solo.example.net"]
product_id = 101
dcv = "http"
standalone = true
listen = "127.0.0.1:8080"
mode = 0o600

[[certificate]]
name = "mail"
domains = ["mail.example.net"]
product_id = 101
dcv = "email"
dcv_email = "admin@example.net"
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/etc/cert-agent/config.toml"))
}

/// The messages of an invalid file.
fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string().lines().map(str::to_owned).collect(),
    }
}

/// Asserts exactly one problem, at `line`, whose message contains every part.
fn assert_one(text: &str, line: usize, parts: &[&str]) {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let prefix = format!("/etc/cert-agent/config.toml line {line}: ");
    assert!(errs[0].starts_with(&prefix), "{errs:#?}");
    for p in parts {
        assert!(errs[0].contains(p), "{p:?} not in {errs:#?}");
    }
}

fn with_cert(cert: &str) -> String {
    format!(
        "{MINIMAL}\n[defaults]\ncountry = \"DE\"\nregion = \"Berlin\"\ncity = \"Berlin\"\n\n\
         [[certificate]]\nname = \"www\"\ndomains = [\"www.example.com\"]\nproduct_id = 101\n\
         webroot = \"/var/www/html\"\n{cert}"
    )
}

/// Line of `with_cert`'s first added line.
const CERT_LINE: usize = 17;

#[test]
fn minimal_file_gets_the_defaults_of_design_md() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.api.base_url, "https://partner.example.net");
    assert_eq!(c.api.connect_timeout_secs, 10);
    assert_eq!(c.api.timeout_secs, 60);
    assert_eq!(c.api.retries, 3);
    assert_eq!(c.agent.state_dir, Path::new("/var/lib/cert-agent"));
    assert_eq!(c.agent.renew_before_days, 30);
    assert_eq!(c.agent.poll_interval_secs, 300);
    assert!(!c.agent.allow_orders);
    assert_eq!(c.agent.max_order_price, None);
    assert_eq!(c.agent.concurrency, 4);
    assert!(c.certificates.is_empty());
    assert!(c.warnings.is_empty());
}

#[test]
fn a_command_runs_as_its_argv_or_through_the_shell() {
    let argv = CommandLine::Argv(vec!["nginx".into(), "-t".into()]);
    assert_eq!(argv.argv(), ["nginx", "-t"]);
    let shell = CommandLine::Shell("systemctl reload nginx && logger ok".into());
    assert_eq!(
        shell.argv(),
        ["/bin/sh", "-c", "systemctl reload nginx && logger ok"]
    );
}

#[test]
fn full_example_with_every_key() {
    let c = parse(FULL).unwrap();
    assert_eq!(c.api.base_url, "https://partner.example.net");
    assert_eq!(c.agent.max_order_price.as_ref().unwrap().as_str(), "100.00");
    assert_eq!(
        c.agent.notify_command,
        Some(CommandLine::Argv(vec![
            "/usr/local/bin/notify".into(),
            "--quiet".into()
        ]))
    );
    let www = c.certificate("www").unwrap();
    assert_eq!(www.domains, ["www.example.com", "example.com"]);
    assert_eq!(www.common_name(), "www.example.com");
    assert_eq!(www.additional_domains(), ["example.com"]);
    assert_eq!(www.order.key_type, KeyType::EcdsaP256);
    assert_eq!(www.install.mode, Some(0o640));
    assert_eq!(www.order.country, "DE");
    assert_eq!(www.dcv.method.dcv_type(), DcvType::HttpCsrHash);
    assert_eq!(
        www.dcv.webroot.as_ref().unwrap().for_domain("example.com"),
        Some(Path::new("/var/www/html"))
    );
    assert_eq!(
        www.install.reload_command,
        Some(CommandLine::Shell("systemctl reload nginx".into()))
    );
    assert_eq!(www.order.ssl_server_software_id, 180);
    let wild = c.certificate("wild").unwrap();
    // [defaults] key_type applies where the certificate sets none.
    assert_eq!(wild.order.key_type, KeyType::Rsa2048);
    assert_eq!(wild.install.verify_address, None);
    assert_eq!(wild.order.days, 365);
    let multi = c.certificate("multi").unwrap();
    assert_eq!(
        multi
            .dcv
            .webroot
            .as_ref()
            .unwrap()
            .for_domain("b.example.net"),
        Some(Path::new("/srv/b"))
    );
    assert_eq!(
        multi.install.verify_address.as_deref(),
        Some("127.0.0.1:443")
    );
    let solo = c.certificate("solo").unwrap();
    assert!(solo.dcv.standalone);
    assert_eq!(solo.dcv.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(solo.install.mode, Some(0o600));
    assert_eq!(
        c.certificate("mail").unwrap().dcv.email.as_deref(),
        Some("admin@example.net")
    );
}

#[test]
fn render_applies_defaults_masks_secrets_and_parses_back() {
    let text = MINIMAL.replace(
        "password_file = \"/etc/cert-agent/password\"",
        "password = \"hunter2\"",
    );
    let c = parse(&text).unwrap();
    let out = c.render();
    assert!(!out.contains("hunter2"), "{out}");
    assert!(out.contains("password = \"********\""), "{out}");
    assert!(out.contains("renew_before_days = 30"), "{out}");

    let full = parse(FULL).unwrap().render();
    assert!(full.contains("[[certificate]]"), "{full}");
    assert!(full.contains("mode = \"0640\""), "{full}");
    // The rendering is itself a valid configuration with the same meaning.
    let again = parse(&full).unwrap();
    assert_eq!(again.certificates.len(), 5);
    assert_eq!(
        again.certificate("wild").unwrap().order.key_type,
        KeyType::Rsa2048
    );
    assert_eq!(again.render(), full);
}

#[test]
fn inline_password_is_accepted_with_a_warning() {
    let text = MINIMAL.replace(
        "password_file = \"/etc/cert-agent/password\"",
        "password = \"hunter2\"",
    );
    let c = parse(&text).unwrap();
    assert_eq!(c.api.password.as_ref().unwrap().expose(), "hunter2");
    assert_eq!(c.warnings.len(), 1);
    assert!(c.warnings[0].starts_with("/etc/cert-agent/config.toml line 5: [api]: "));
    assert!(!format!("{c:?}").contains("hunter2"));
    let both = format!("{MINIMAL}password = \"x\"\n");
    assert_one(&both, 6, &["[api]", "`password`", "not both"]);
}

#[test]
fn syntax_error_names_the_line() {
    assert_one("[api]\nbase_url = \n", 2, &["syntax", "invalid TOML"]);
}

#[test]
fn unknown_keys_get_a_suggestion() {
    assert_one(
        &with_cert("webrot = \"/x\"\n"),
        CERT_LINE,
        &[
            "certificate 'www'",
            "unknown key `webrot` (did you mean `webroot`?)",
        ],
    );
    assert_one(
        &format!("{MINIMAL}base_ulr = \"x\"\n"),
        6,
        &["[api]", "`base_ulr`", "did you mean `base_url`"],
    );
    assert_one(
        &format!("{MINIMAL}state_dir = \"/x\"\n"),
        6,
        &["[api]", "unknown key `state_dir` (it belongs in [agent])"],
    );
    assert_one(
        &format!("{MINIMAL}[agnet]\nx = 1\n"),
        6,
        &["top level", "did you mean `agent`"],
    );
    assert_one(
        &format!("{MINIMAL}[agent]\nconcurency = 2\n"),
        7,
        &["[agent]", "did you mean `concurrency`"],
    );
    assert_one(
        &format!("{MINIMAL}[defaults]\nname = \"x\"\n"),
        7,
        &["[defaults]", "`name` cannot be set in [defaults]"],
    );
    assert_one(
        &format!("{MINIMAL}[defaults]\ncontry = \"DE\"\n"),
        7,
        &["[defaults]", "did you mean `country`"],
    );
    assert_one(
        &format!("{MINIMAL}[defaults]\ncountry = \"DE\"\nfoo = 1\n"),
        8,
        &["[defaults]", "unknown key `foo`"],
    );
}

#[test]
fn api_rules() {
    assert_one(
        &MINIMAL.replace("https://", "http://"),
        3,
        &["[api]", "`base_url`", "https://"],
    );
    assert_one(
        &MINIMAL.replace("https://partner.example.net", "not a url"),
        3,
        &["`base_url`", "not a valid URL"],
    );
    assert_one(
        &MINIMAL.replace("login = \"ops@example.com\"\n", ""),
        2,
        &["[api]", "missing required key `login`"],
    );
    assert_one(
        &MINIMAL.replace("\"/etc/cert-agent/password\"", "\"password\""),
        5,
        &["`password_file`", "absolute path"],
    );
    assert_one(
        &format!("{MINIMAL}ca_file = \"ca.pem\"\n"),
        6,
        &["`ca_file`", "absolute path"],
    );
    assert_one(
        &format!("{MINIMAL}timeout_secs = 0\n"),
        6,
        &["`timeout_secs`", "between 1 and 3600 (got 0)"],
    );
    assert_one(
        &format!("{MINIMAL}retries = \"3\"\n"),
        6,
        &["`retries`", "expected an integer, found a string"],
    );
    assert_one("[agent]\n", 1, &["missing required section [api]"]);
    assert_one("api = 1\n", 1, &["`api` must be a table"]);
}

#[test]
fn agent_rules() {
    let a = |body: &str| format!("{MINIMAL}[agent]\n{body}\n");
    assert_one(
        &a("state_dir = \"var/lib\""),
        7,
        &["[agent]", "`state_dir`", "absolute path"],
    );
    assert_one(
        &a("max_order_price = \"cheap\""),
        7,
        &["`max_order_price`", "decimal"],
    );
    assert_one(
        &a("max_order_price = \"-1\""),
        7,
        &["`max_order_price`", "negative"],
    );
    assert_one(
        &a("allow_orders = \"yes\""),
        7,
        &["`allow_orders`", "true or false"],
    );
    assert_one(
        &a("concurrency = 0"),
        7,
        &["`concurrency`", "between 1 and 64"],
    );
    assert_one(
        &a("renew_before_days = 365"),
        7,
        &["`renew_before_days`", "between 1 and 180"],
    );
    assert_one(
        &a("notify_command = []"),
        7,
        &["`notify_command`", "non-empty array"],
    );
    assert_one(
        &a("serve_user = \"no body\""),
        7,
        &["`serve_user`", "user name"],
    );
    assert_one(&a("serve_user = \"\""), 7, &["`serve_user`", "empty"]);
    let c = parse(&a("serve_user = \"_cert-agent\"")).unwrap();
    assert_eq!(c.agent.serve_user, "_cert-agent");
    let c = parse(&a("max_order_price = 100")).unwrap();
    assert_eq!(c.agent.max_order_price.unwrap().as_str(), "100");
    assert_eq!(c.agent.serve_user, DEFAULT_SERVE_USER);
    let c = parse(&a("poll_interval_secs = 10")).unwrap();
    assert!(
        c.warnings[0].contains("line 7: [agent]: `poll_interval_secs`"),
        "{:?}",
        c.warnings
    );
}

#[test]
fn many_problems_are_reported_in_file_order() {
    let text = format!("{MINIMAL}timeout_secs = 0\n[agent]\nconcurrency = 0\nbogus = 1\n");
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(errs[0].contains("line 6"));
    assert!(errs[1].contains("line 8"));
    assert!(errs[2].contains("line 9"));
}

#[test]
fn config_path_resolution() {
    let cli = Path::new("/cli.toml");
    assert_eq!(
        resolve_config_path_from(Some(cli), Some("/env.toml".into())),
        cli
    );
    assert_eq!(
        resolve_config_path_from(None, Some("/env.toml".into())),
        Path::new("/env.toml")
    );
    assert_eq!(
        resolve_config_path_from(None, Some("".into())),
        Path::new(DEFAULT_CONFIG_PATH)
    );
    assert_eq!(
        resolve_config_path_from(None, None),
        Path::new(DEFAULT_CONFIG_PATH)
    );
}

#[test]
fn suggestions_use_edit_distance() {
    assert_eq!(distance("webrot", "webroot"), 1);
    assert_eq!(distance("kitten", "sitting"), 3);
    assert_eq!(
        suggest("webrot", &defs::certificate_names()),
        Some("webroot")
    );
    assert_eq!(suggest("zzzzzz", &defs::certificate_names()), None);
    assert_eq!(distance("agnet", "agent"), 1);
    assert_eq!(suggest("dns", &["http", "dns-txt"]), Some("dns-txt"));
}

#[test]
fn fleet_rules() {
    let f = |body: &str| format!("{MINIMAL}[fleet]\n{body}\n");
    let ok = parse(&f(
        "endpoints = [\"https://10.0.0.1:2379/\", \"https://10.0.0.2:2379\"]\nhost = \"web1\"\n\
         ca_file = \"/etc/cert-agent/etcd-ca.pem\"\nsecret_file = \"/etc/cert-agent/fleet.key\"",
    ))
    .unwrap();
    let fleet = ok.fleet.expect("[fleet]");
    assert_eq!(
        fleet.endpoints,
        ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
    );
    assert_eq!(fleet.prefix, "/cert-agent/");
    assert_eq!(fleet.host, "web1");
    assert_eq!(fleet.lease_ttl_secs, 15);
    assert_eq!(fleet.proof_interval_secs, 1800);
    let every = parse(&f(
        "endpoints = [\"https://a:1\"]\nhost = \"w\"\nproof_interval_secs = 0",
    ))
    .unwrap();
    assert_eq!(every.fleet.expect("[fleet]").proof_interval_secs, 0);
    for bad in ["-1", "604801", "\"1800\"", "1.5"] {
        assert_one(
            &f(&format!(
                "endpoints = [\"https://a:1\"]\nhost = \"w\"\nproof_interval_secs = {bad}"
            )),
            9,
            &["`proof_interval_secs`"],
        );
    }
    assert!(parse(MINIMAL).unwrap().fleet.is_none());
    assert_one(&f("host = \"web1\""), 6, &["[fleet]", "`endpoints`"]);
    assert_one(
        &f("endpoints = []\nhost = \"web1\""),
        7,
        &["`endpoints`", "at least one"],
    );
    assert_one(
        &f("endpoints = [\"10.0.0.1:2379\"]\nhost = \"web1\""),
        7,
        &["`endpoints`", "not an http:// or https:// URL"],
    );
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nhost = \"web 1\""),
        8,
        &["`host`", "host name"],
    );
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nhost = \"w\"\nprefix = \"ca\""),
        9,
        &["`prefix`", "start and end with `/`"],
    );
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nhost = \"w\"\ncert_file = \"/c.pem\""),
        9,
        &["`cert_file`", "`key_file` too"],
    );
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nhost = \"w\"\nuser = \"agent\""),
        9,
        &["`user`", "`password_file` too"],
    );
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nhost = \"w\"\nlease_ttl_secs = 1"),
        9,
        &["`lease_ttl_secs`"],
    );
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nhost = \"w\"\nendpoint = 1"),
        9,
        &["`endpoint`", "endpoints"],
    );
}

#[test]
fn a_rollout_in_waves_is_read_shown_and_refused_with_its_line() {
    use crate::config::{Canaries, WaveSize};
    let f = |body: &str| {
        format!("{MINIMAL}[fleet]\nhost = \"w\"\nendpoints = [\"https://a:1\"]\n{body}\n")
    };
    // None by default: every host installs at once.
    assert!(parse(&f("")).unwrap().fleet.unwrap().rollout.is_none());
    for (body, canaries, wave, pause) in [
        (
            "rollout_canaries = [\"web1\", \"web2\"]\nrollout_wave = 0.25\nrollout_pause_secs = 600\n\
             rollout_deadline_fraction = 0.05",
            Canaries::Named(vec!["web1".into(), "web2".into()]),
            WaveSize::Fraction(0.25),
            600,
        ),
        (
            "rollout_canaries = 2\nrollout_wave = 5",
            Canaries::Count(2),
            WaveSize::Count(5),
            0,
        ),
        (
            "rollout_canaries = 1",
            Canaries::Count(1),
            WaveSize::Fraction(1.0),
            0,
        ),
    ] {
        let config = parse(&f(body)).unwrap();
        let r = config
            .fleet
            .as_ref()
            .unwrap()
            .rollout
            .clone()
            .expect("a rollout");
        assert_eq!(
            (r.canaries, r.wave, r.pause_secs),
            (canaries, wave, pause),
            "{body}"
        );
        let fraction = if body.contains("deadline") { 0.05 } else { 0.1 };
        assert!((r.deadline_fraction - fraction).abs() < 1e-9, "{body}");
        // Shown as it is read, and read back the same.
        let shown = config.render();
        assert!(shown.contains("rollout_canaries = "), "{shown}");
        let again = parse(&shown).unwrap();
        assert_eq!(again.fleet.unwrap().rollout, config.fleet.unwrap().rollout);
    }
    for (body, line, words) in [
        ("rollout_canaries = []", 9, "expected host names"),
        ("rollout_canaries = [\"web 1\"]", 9, "expected host names"),
        ("rollout_canaries = 0", 9, "or a count of hosts from 1"),
        ("rollout_canaries = \"web1\"", 9, "expected host names"),
        (
            "rollout_canaries = 1\nrollout_wave = 1.5",
            10,
            "at most 1 (such as 0.25)",
        ),
        (
            "rollout_canaries = 1\nrollout_wave = 0",
            10,
            "a count of hosts from 1",
        ),
        (
            "rollout_canaries = 1\nrollout_pause_secs = -1",
            10,
            "must be between 0 and 604800",
        ),
        ("rollout_wave = 2", 9, "needs `rollout_canaries`"),
        (
            "rollout_canaries = 1\nrollout_deadline_fraction = 1.0",
            10,
            "above 0 and below 1",
        ),
        (
            "rollout_canaries = 1\nrollout_deadline_fraction = 0",
            10,
            "above 0 and below 1",
        ),
        (
            "rollout_deadline_fraction = 0.2",
            9,
            "needs `rollout_canaries`",
        ),
    ] {
        assert_one(&f(body), line, &["[fleet]", words]);
    }
}

#[test]
fn fleet_transport_is_tls_unless_plaintext_is_asked_for_and_never_with_a_password() {
    let f = |body: &str| format!("{MINIMAL}[fleet]\nhost = \"w\"\n{body}\n");
    // Plain http is refused by default, naming the file, the line, the key and the way out.
    assert_one(
        &f("endpoints = [\"https://a:1\", \"http://b:2\"]"),
        8,
        &[
            "[fleet]",
            "`endpoints`",
            "\"http://b:2\" is plain http",
            "`insecure_plaintext = true`",
        ],
    );
    // Asked for, it is accepted (and shown by `config show`).
    let ok = parse(&f(
        "endpoints = [\"http://a:1\"]\ninsecure_plaintext = true",
    ))
    .unwrap();
    assert!(ok.render().contains("insecure_plaintext = true"));
    let fleet = ok.fleet.expect("[fleet]");
    assert!(fleet.insecure_plaintext);
    assert_eq!(fleet.endpoints, ["http://a:1"]);
    let tls = parse(&f("endpoints = [\"https://a:1\"]")).unwrap();
    assert!(!tls.fleet.expect("[fleet]").insecure_plaintext);
    // Never together with etcd authentication: the password would travel in clear.
    for (auth, keys) in [
        (
            "user = \"agent\"\npassword_file = \"/etc/cert-agent/etcd.password\"",
            "`user` and `password_file`",
        ),
        (
            "password_file = \"/etc/cert-agent/etcd.password\"",
            "`password_file`",
        ),
        ("user = \"agent\"", "`user`"),
    ] {
        let errs = errors(&f(&format!(
            "endpoints = [\"http://a:1\"]\ninsecure_plaintext = true\n{auth}"
        )));
        let refusal = format!(
            "/etc/cert-agent/config.toml line 9: [fleet]: `insecure_plaintext`: cannot go with \
             {keys}: the etcd password would travel in clear"
        );
        assert!(errs.iter().any(|e| e.starts_with(&refusal)), "{errs:#?}");
    }
    // Also with https endpoints: the switch and a password do not go together.
    assert_one(
        &f("endpoints = [\"https://a:1\"]\nuser = \"agent\"\n\
            password_file = \"/etc/cert-agent/etcd.password\"\ninsecure_plaintext = \"yes\""),
        11,
        &["`insecure_plaintext`", "expected true or false"],
    );
}

mod certificates;
mod include;
mod schema;

#[test]
fn validation_rules() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.validation.reuse_days, None);
    assert_eq!(c.validation.warning_days, 21);
    let c = parse(&format!(
        "{MINIMAL}\n[validation]\nreuse_days = 30\nwarning_days = 28\n"
    ))
    .unwrap();
    assert_eq!(
        (c.validation.reuse_days, c.validation.warning_days),
        (Some(30), 28)
    );
    let line = MINIMAL.lines().count() + 3;
    for (value, part) in [
        ("reuse_days = 0", "reuse_days"),
        ("reuse_days = 399", "reuse_days"),
        ("reuse_days = \"ten\"", "reuse_days"),
        ("warning_days = -1", "warning_days"),
        ("reuse_day = 10", "did you mean `reuse_days`"),
    ] {
        assert_one(
            &format!("{MINIMAL}\n[validation]\n{value}\n"),
            line,
            &[part],
        );
    }
    let errs = errors(&format!("validation = 5\n{MINIMAL}"));
    assert!(errs[0].contains("`validation` must be a table"), "{errs:?}");
}

#[test]
fn revocation_section() {
    let r = |body: &str| format!("{MINIMAL}[revocation]\n{body}\n");
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.revocation.refresh_secs, 6 * 3600);
    assert!(c.revocation.check);
    let c = parse(&r("refresh_secs = 3600\ncheck = false")).unwrap();
    assert_eq!(c.revocation.refresh_secs, 3600);
    assert!(!c.revocation.check);
    let line = MINIMAL.lines().count() + 2;
    assert_one(
        &r("refresh_secs = 10"),
        line,
        &["`refresh_secs`", "between 60 and 604800 (got 10)"],
    );
    assert_one(
        &r("max_crl_bytes = 10"),
        line,
        &["`max_crl_bytes`", "between 1024 and 1073741824 (got 10)"],
    );
}

#[test]
fn preflight_section() {
    let r = |body: &str| format!("{MINIMAL}[preflight]\n{body}\n");
    let c = parse(MINIMAL).unwrap();
    assert!(c.preflight.caa && c.preflight.dnssec);
    assert_eq!(c.preflight.resolver, None);
    assert_eq!(c.preflight.timeout_secs, 3);
    let c = parse(&r(
        "caa = false\ndnssec = false\nresolver = \"127.0.0.1:5353\"\ntimeout_secs = 10\n\
         caa_identities = { \"S-One\" = [\"Sectigo.com\", \"comodoca.com\"] }",
    ))
    .unwrap();
    assert!(!c.preflight.caa && !c.preflight.dnssec);
    assert_eq!(
        c.preflight.resolver,
        Some("127.0.0.1:5353".parse().unwrap())
    );
    assert_eq!(c.preflight.timeout_secs, 10);
    assert_eq!(
        c.preflight.caa_identities.get("s-one"),
        Some(&vec!["sectigo.com".to_owned(), "comodoca.com".to_owned()])
    );
    let line = MINIMAL.lines().count() + 2;
    assert_one(
        &r("resolver = \"dns.example\""),
        line,
        &["`resolver`", "not an IP address and port"],
    );
    assert_one(
        &r("timeout_secs = 0"),
        line,
        &["`timeout_secs`", "between 1 and 60"],
    );
    assert_one(
        &r("caa_identities = { \"s-one\" = [] }"),
        line,
        &["`caa_identities`", "\"s-one\"", "non-empty array"],
    );
    assert_one(
        &r("caa_identities = { \"s-one\" = [\"not a domain\"] }"),
        line,
        &["`caa_identities`", "CAA issuer domain names"],
    );
    assert_one(
        &r("caa_identities = 3"),
        line,
        &["`caa_identities`", "expected a table"],
    );
    assert_one(&r("cca = true"), line, &["unknown key `cca`", "`caa`"]);
}
