//! `[[certificate]]` rules: required keys, names, domains, choices, numbers, validation,
//! install paths and commands, order-item data.

use super::*;

#[test]
fn certificate_required_keys() {
    let text = format!("{MINIMAL}\n[[certificate]]\nname = \"www\"\n");
    let errs = errors(&text);
    for key in ["domains", "product_id", "country", "region", "city"] {
        assert!(
            errs.iter().any(
                |e| e.contains("line 7: certificate 'www': missing required key")
                    && e.contains(&format!("`{key}`"))
            ),
            "{key}: {errs:#?}"
        );
    }
    let errs = errors(&format!(
        "{MINIMAL}\n[[certificate]]\ndomains = [\"a.example.com\"]\n"
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("line 7: certificate #1: missing required key `name`")),
        "{errs:#?}"
    );
    assert_one(
        &format!("{MINIMAL}\n[certificate]\nname = \"x\"\n"),
        7,
        &["[[certificate]]"],
    );
}

#[test]
fn domain_rules() {
    let d = |list: &str| {
        with_cert(&format!("domains = {list}\n")).replace("domains = [\"www.example.com\"]\n", "")
    };
    assert_one(&d("[\"*.example.com\"]"), 12, &["`dcv`", "wildcard"]);
    assert_one(
        &d("[\"www.*.example.com\"]"),
        CERT_LINE - 1,
        &["`domains`", "only as the whole first label"],
    );
    assert_one(
        &d("[\"server\"]"),
        CERT_LINE - 1,
        &["`domains`", "not a fully qualified name"],
    );
    assert_one(&d("[\"10.0.0.1\"]"), CERT_LINE - 1, &["IP addresses"]);
    assert_one(
        &d("[\"bad_name.example.com\"]"),
        CERT_LINE - 1,
        &["only lower-case letters"],
    );
    assert_one(
        &d("[\"-a.example.com\"]"),
        CERT_LINE - 1,
        &["start or end with '-'"],
    );
    assert_one(&d("[\"example.com.\"]"), CERT_LINE - 1, &["trailing dot"]);
    assert_one(
        &d("[\"a.example.com\", \"A.example.com\"]"),
        CERT_LINE - 1,
        &["listed twice"],
    );
    assert_one(&d("[]"), CERT_LINE - 1, &["at least one domain"]);
    assert_one(
        &d("\"a.example.com\""),
        CERT_LINE - 1,
        &["expected an array"],
    );
    // A problem in a multi-line array is reported at the element's line.
    assert_one(
        &d("[\n  \"a.example.com\",\n  \"b..example.com\",\n]"),
        CERT_LINE + 1,
        &["1 to 63"],
    );
    assert!(validate_domain(&format!("{}.com", "a".repeat(64))).is_err());
    assert!(validate_domain("xn--bcher-kva.example").is_ok());
}

#[test]
fn certificate_name_rules() {
    let renamed = |n: &str| with_cert("").replace("name = \"www\"", &format!("name = {n}"));
    assert_one(
        &renamed("\"../etc\""),
        13,
        &["certificate #1", "`name`", "not a valid name"],
    );
    assert_one(&renamed("\"a b\""), 13, &["not a valid name"]);
    let twice = format!(
        "{}\n[[certificate]]\nname = \"www\"\ndomains = [\"b.example.com\"]\nproduct_id = 1\nwebroot = \"/w\"\n",
        with_cert("")
    );
    assert_one(&twice, 19, &["certificate 'www'", "is also defined at"]);
}

#[test]
fn enum_rules() {
    assert_one(
        &with_cert("key_type = \"rsa-1024\"\n"),
        CERT_LINE,
        &["`key_type`", "\"rsa-1024\" is not one of ecdsa-p256"],
    );
    assert_one(
        &with_cert("dcv = \"dns\"\n"),
        CERT_LINE,
        &["`dcv`", "not one of", "(did you mean \"dns-txt\"?)"],
    );
    assert_one(
        &with_cert("server = \"nginx2\"\n"),
        CERT_LINE,
        &["`server`", "(did you mean \"nginx\"?)"],
    );
    assert_one(
        &with_cert("server = \"none\"\n"),
        CERT_LINE,
        &["`server`", "set `key_path`"],
    );
    assert!(
        parse(&with_cert(
            "server = \"none\"\nkey_path = \"/k.pem\"\nfullchain_path = \"/f.pem\"\n"
        ))
        .is_ok()
    );
}

#[test]
fn chain_trust_is_read_with_its_default_and_api_ca_file() {
    use crate::config::ChainTrust;
    let c = parse(&with_cert("")).unwrap();
    assert_eq!(c.certificates[0].install.chain_trust, ChainTrust::System);
    assert_eq!(c.certificates[0].install.ca_file, c.api.ca_file);
    for (text, want) in [("ca_file", ChainTrust::CaFile), ("none", ChainTrust::None)] {
        let c = parse(&with_cert(&format!("chain_trust = \"{text}\"\n"))).unwrap();
        assert_eq!(c.certificates[0].install.chain_trust, want);
    }
    assert_one(
        &with_cert("chain_trust = \"sytem\"\n"),
        CERT_LINE,
        &["`chain_trust`", "(did you mean \"system\"?)"],
    );
}

#[test]
fn days_and_numbers() {
    // Section "OrderItem": days 60 to 2200.
    assert_one(
        &with_cert("days = 59\n"),
        CERT_LINE,
        &["`days`", "between 60 and 2200 (got 59)"],
    );
    assert_one(
        &with_cert("days = 2201\n"),
        CERT_LINE,
        &["`days`", "(got 2201)"],
    );
    assert!(parse(&with_cert("days = 2200\n")).is_ok());
    assert_one(
        &with_cert("days = 365.0\n"),
        CERT_LINE,
        &["`days`", "found a float"],
    );
    assert_one(
        &with_cert("product_id = 0\n").replace("product_id = 101\n", ""),
        CERT_LINE - 1,
        &["`product_id`"],
    );
}

#[test]
fn dcv_rules() {
    let no_webroot = |extra: &str| with_cert(extra).replace("webroot = \"/var/www/html\"\n", "");
    assert_one(
        &no_webroot(""),
        12,
        &[
            "certificate 'www'",
            "needs `webroot` or `standalone = true`",
        ],
    );
    assert_one(
        &with_cert("standalone = true\n"),
        CERT_LINE,
        &["`standalone`", "not both"],
    );
    assert_one(
        &no_webroot("standalone = true\nlisten = \"80\"\n"),
        CERT_LINE,
        &["`listen`", "address:port"],
    );
    assert_one(
        &no_webroot("dcv = \"cname\"\n"),
        CERT_LINE - 1,
        &["`dcv`", "needs `dns_hook`"],
    );
    assert!(parse(&no_webroot("dcv = \"cname\"\ndns_hook = [\"/bin/hook\"]\n")).is_ok());
    assert_one(
        &no_webroot("dcv = \"email\"\n"),
        CERT_LINE - 1,
        &["needs `dcv_email`"],
    );
    assert_one(
        &no_webroot("dcv = \"email\"\ndcv_email = \"nobody\"\n"),
        CERT_LINE,
        &["`dcv_email`", "not an email address"],
    );
    assert_one(
        &no_webroot("webroot = \"www\"\n"),
        CERT_LINE - 1,
        &["`webroot`", "absolute path"],
    );
    assert_one(
        &no_webroot("webroot = 5\n"),
        CERT_LINE - 1,
        &["`webroot`", "a path or a table"],
    );
    let errs = errors(&no_webroot(
        "webroot = { \"other.example.com\" = \"/w\" }\n",
    ));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].contains("has no entry for the domain \"www.example.com\""),
        "{errs:#?}"
    );
    assert!(
        errs[1].contains("\"other.example.com\" is not one of the certificate's domains"),
        "{errs:#?}"
    );
}

#[test]
fn dcv_rules_from_defaults_name_defaults() {
    let text = with_cert("").replace("[defaults]\n", "[defaults]\ndays = 10\n");
    assert_one(
        &text,
        8,
        &["certificate 'www'", "`days` (from [defaults])", "(got 10)"],
    );
}

#[test]
fn install_rules() {
    assert_one(
        &with_cert("cert_path = \"cert.pem\"\n"),
        CERT_LINE,
        &["`cert_path`", "absolute path"],
    );
    assert_one(
        &with_cert("cert_path = \"/etc/ssl/a.pem\"\nkey_path = \"/etc/ssl/a.pem\"\n"),
        CERT_LINE + 1,
        &["`key_path`", "must differ from `cert_path`"],
    );
    assert_one(
        &with_cert("mode = \"0644\"\n"),
        CERT_LINE,
        &["`mode`", "0644 gives others access"],
    );
    assert_one(&with_cert("mode = 640\n"), CERT_LINE, &["`mode`", "octal"]);
    assert_one(
        &with_cert("mode = \"rw\"\n"),
        CERT_LINE,
        &["`mode`", "octal file mode"],
    );
    assert_one(
        &with_cert("verify_address = \"localhost\"\n"),
        CERT_LINE,
        &["`verify_address`", "host:port"],
    );
    assert!(parse(&with_cert("verify_address = \"[::1]:8443\"\n")).is_ok());
    assert!(parse(&with_cert("verify_address = \"localhost:443\"\n")).is_ok());
    assert_one(
        &with_cert("reload_command = \"\"\n"),
        CERT_LINE,
        &["`reload_command`", "an empty string"],
    );
    assert_one(
        &with_cert("deploy_hook = [1]\n"),
        CERT_LINE,
        &["`deploy_hook`", "array of strings"],
    );
    let shared = format!(
        "{}\n[[certificate]]\nname = \"two\"\ndomains = [\"b.example.com\"]\nproduct_id = 1\nwebroot = \"/w\"\nkey_path = \"/k.pem\"\n",
        with_cert("key_path = \"/k.pem\"\n")
    );
    assert_one(
        &shared,
        20,
        &[
            "certificate 'two'",
            "/k.pem is also used by certificate 'www'",
        ],
    );
}

#[test]
fn combined_path_rules() {
    // The only install path, even for server = "none".
    for server in ["nginx", "apache", "none"] {
        let c = parse(&with_cert(&format!(
            "server = \"{server}\"\ncombined_path = \"/etc/ssl/www/combined.pem\"\n"
        )))
        .unwrap();
        let cert = &c.certificates[0];
        assert_eq!(
            cert.install.combined_path.as_deref(),
            Some(Path::new("/etc/ssl/www/combined.pem"))
        );
        assert_eq!(
            (&cert.install.key_path, &cert.install.fullchain_path),
            (&None, &None)
        );
    }
    // In addition to separate files.
    assert!(
        parse(&with_cert(
            "combined_path = \"/c.pem\"\nkey_path = \"/k.pem\"\nfullchain_path = \"/f.pem\"\n"
        ))
        .is_ok()
    );
    assert_one(
        &with_cert("combined_path = \"combined.pem\"\n"),
        CERT_LINE,
        &["certificate 'www'", "`combined_path`", "absolute path"],
    );
    for other in ["cert_path", "chain_path", "fullchain_path", "key_path"] {
        assert_one(
            &with_cert(&format!(
                "{other} = \"/etc/ssl/a.pem\"\ncombined_path = \"/etc/ssl/a.pem\"\n"
            )),
            CERT_LINE + 1,
            &["`combined_path`", &format!("must differ from `{other}`")],
        );
    }
    assert_one(
        &with_cert("combined_path = 5\n"),
        CERT_LINE,
        &["`combined_path`"],
    );
    let in_defaults =
        with_cert("").replace("[defaults]\n", "[defaults]\ncombined_path = \"/c.pem\"\n");
    assert_one(
        &in_defaults,
        8,
        &["[defaults]", "`combined_path` cannot be set in [defaults]"],
    );
    let shared = format!(
        "{}\n[[certificate]]\nname = \"two\"\ndomains = [\"b.example.com\"]\nproduct_id = 1\nwebroot = \"/w\"\nkey_path = \"/c.pem\"\n",
        with_cert("combined_path = \"/c.pem\"\n")
    );
    assert_one(
        &shared,
        20,
        &[
            "certificate 'two'",
            "/c.pem is also used by certificate 'www'",
        ],
    );
}

#[test]
fn order_data_rules() {
    assert_one(
        &with_cert("country = \"Germany\"\n"),
        CERT_LINE,
        &["`country`", "ISO 3166-1"],
    );
    assert_one(
        &with_cert("unique_value = \"has space\"\n"),
        CERT_LINE,
        &["`unique_value`", "20 letters and digits"],
    );
    assert_one(
        &with_cert(&format!("unique_value = \"{}\"\n", "a".repeat(21))),
        CERT_LINE,
        &["`unique_value`"],
    );
    assert_one(
        &with_cert("organization_name = \"\"\n"),
        CERT_LINE,
        &["`organization_name`", "must not be empty"],
    );
    assert_one(
        &with_cert("ssl_server_software_id = -1\n"),
        CERT_LINE,
        &["`ssl_server_software_id`"],
    );
}

#[test]
fn an_acme_cas_preferred_chain_is_a_common_name() {
    let ca = |chain: &str| {
        format!(
            "{}\n[acme.le]\ndirectory = \"https://acme.example/dir\"\npreferred_chain = {chain}\n",
            with_cert("")
        )
    };
    let c = parse(&ca("\" ISRG Root X1 \"")).unwrap();
    assert_eq!(
        c.acme["le"].preferred_chain.as_deref(),
        Some("ISRG Root X1")
    );
    assert!(parse(&with_cert("")).unwrap().acme.is_empty());
    for bad in [
        "\"  \"",
        "\"a\\u0007b\"",
        &format!("\"{}\"", "x".repeat(65)),
    ] {
        let errs = errors(&ca(bad));
        assert!(
            errs.iter()
                .any(|e| e.contains("`preferred_chain`: ") && e.contains("line 20")),
            "{bad}: {errs:#?}"
        );
    }
    let errs = errors(&ca("7"));
    assert!(
        errs.iter().any(|e| e.contains("preferred_chain")),
        "{errs:#?}"
    );
}
