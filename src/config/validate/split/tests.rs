use std::path::Path;

use super::*;
use crate::config::Config;
use crate::config::testing::MINIMAL;

#[test]
fn headers_are_told_apart() {
    assert_eq!(classify("[[certificate]]\n"), Line::Certificate);
    assert_eq!(
        classify("  [[ certificate ]]  # www\r\n"),
        Line::Certificate
    );
    assert_eq!(classify("[certificate.hooks]\n"), Line::Sub);
    assert_eq!(classify("[[certificate.webroot]]"), Line::Sub);
    assert_eq!(classify("[certificate]\n"), Line::OtherHeader);
    assert_eq!(classify("[defaults]\n"), Line::OtherHeader);
    assert_eq!(classify("[\"certificate\"]\n"), Line::OtherHeader);
    assert_eq!(classify("[[certificate]] x = 1\n"), Line::OtherHeader);
    assert_eq!(classify("  [\"a\", \"b\"],\n"), Line::OtherHeader);
    assert_eq!(classify("name = \"[[certificate]]\"\n"), Line::Other);
    assert_eq!(classify("# [[certificate]]\n"), Line::Other);
}

#[test]
fn regions_are_blanked_and_cut_into_parts() {
    let mut text = String::from("[api]\nbase_url = \"x\"\n");
    for i in 0..(PER_PART + 3) {
        text.push_str(&format!(
            "[[certificate]]\nname = \"c{i}\"\n[certificate.sub]\n"
        ));
    }
    text.push_str("[defaults]\nkey_type = \"rsa-2048\"\n");
    let p = parts(&text).expect("parts");
    assert_eq!(p.tables.len(), 2);
    assert_eq!(p.head.lines().count(), text.lines().count());
    // Three lines a certificate, each left as its line break.
    let lines = "\n".repeat(3 * (PER_PART + 3));
    let expected = format!("[api]\nbase_url = \"x\"\n{lines}[defaults]\nkey_type = \"rsa-2048\"\n");
    assert_eq!(p.head, expected);
    assert!(p.head.contains("[api]") && p.head.contains("[defaults]"));
    assert!(!p.head.contains("certificate"));
    let first = &text[p.tables[0].clone()];
    assert_eq!(first.matches("[[certificate]]").count(), PER_PART);
    assert!(first.starts_with("[[certificate]]"));
    let second = &text[p.tables[1].clone()];
    assert_eq!(second.matches("[[certificate]]").count(), 3);
    assert!(!second.contains("[defaults]"));
    assert_eq!(p.tables[0].end, p.tables[1].start);
}

#[test]
fn no_certificate_header_no_parts() {
    assert!(parts("[api]\nbase_url = \"x\"\n").is_none());
    assert!(parts("certificate = [{ name = \"a\" }]\n").is_none());
}

/// `n` certificates after `[api]`, `[defaults]` after them, `extra` added to certificate
/// number `odd` (0-based).
fn many(n: usize, odd: usize, extra: &str) -> String {
    let mut text = String::from(MINIMAL);
    text.push_str("\n[agent]\nconcurrency = 4\n");
    for i in 0..n {
        text.push_str(&format!(
            "\n[[certificate]]   # site {i}\nname = \"c{i}\"\ndomains = [\"c{i}.example.com\", \
             \"www.c{i}.example.com\"]\nproduct_id = {}\ncert_path = \"/etc/ssl/c{i}.pem\"\n\
             key_path = \"/etc/ssl/c{i}.key\"\n",
            if i % 2 == 0 { 1101 } else { 1102 },
        ));
        if i == odd {
            text.push_str(extra);
            text.push('\n');
        }
    }
    text.push_str(
        "\n[defaults]\nwebroot = \"/var/www\"\ncountry = \"DE\"\nregion = \"Berlin\"\n\
         city = \"Berlin\"\nserver = \"nginx\"\n",
    );
    text
}

/// Both readings of `text`: what each gives, as text (the rendered configuration or every
/// problem with its line).
fn both(text: &str) -> (String, String) {
    let path = Path::new("/etc/cert-agent/config.toml");
    let show = |r: Result<Config, crate::config::ConfigError>| match r {
        Ok(c) => c.render(),
        Err(e) => format!("{e:#}"),
    };
    (
        show(Config::parse_in_parts(text, path, true)),
        show(Config::parse_in_parts(text, path, false)),
    )
}

#[test]
fn a_large_document_reads_in_parts_as_it_reads_whole() {
    let text = many(700, 0, "");
    let p = parts(&text).expect("parts");
    assert_eq!(p.tables.len(), 3, "700 certificates: three parts");
    // Read in parts (not read whole after all): the parts read as the whole would.
    let mut c = super::super::Checker::new(&text, false);
    let config = c
        .document_of(Path::new("/etc/cert-agent/config.toml"), Some(&p))
        .unwrap_or_else(|_| panic!("the parts do not read"))
        .expect("valid");
    assert_eq!(config.certificates.len(), 700);
    assert_eq!(config.certificates[699].name, "c699");
    assert_eq!(config.certificates[699].install.server.to_string(), "nginx");
    let (in_parts, whole) = both(&text);
    assert_eq!(in_parts, whole);
    assert!(in_parts.contains("c699.example.com"), "{in_parts}");
}

#[test]
fn problems_in_a_later_part_name_the_same_lines() {
    // In the third part: an unknown key and a bad value; from [defaults], after every part:
    // validation by DNS without its hook, reported for every certificate at its line there.
    let text = many(600, 555, "key_typ = \"rsa-2048\"\nkey_type = \"nope\"");
    let (in_parts, whole) = both(&text);
    assert_eq!(in_parts, whole);
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).map(|i| i + 1);
    let key_line = line_of("key_typ").expect("line");
    assert!(in_parts.contains(&format!("line {key_line}")), "{in_parts}");
    let dns = text.replace("webroot = \"/var/www\"", "dcv = \"dns-txt\"");
    let (in_parts, whole) = both(&dns);
    assert_eq!(in_parts, whole);
    let dcv_line = dns
        .lines()
        .position(|l| l.starts_with("dcv = "))
        .map(|i| i + 1)
        .expect("line");
    assert!(in_parts.contains(&format!("line {dcv_line}")), "{in_parts}");
    assert!(in_parts.contains("certificate 'c599'"), "{in_parts}");
}

#[test]
fn what_only_looks_like_a_header_is_read_whole() {
    let cases = [
        // A header inside a multi-line string.
        many(
            300,
            150,
            "organization_name = \"\"\"\n[[certificate]]\n[defaults]\nx\"\"\"",
        ),
        many(300, 150, "organization_name = '''\n[api]\n'''"),
        // Lines of a multi-line array that begin with `[`.
        many(300, 150, "domains = [\n[\"a.example.com\"],\n]"),
        many(
            300,
            150,
            "domains = [\n\"a.example.com\",\n]\n[certificate.x]\ny = 1",
        ),
        // `[certificate]` as a table, a quoted header, a key at the top level.
        format!("{}\n[certificate]\nname = \"x\"\n", many(200, 0, "")),
        format!("{}\n[[\"certificate\"]]\nname = \"x\"\n", many(200, 0, "")),
        format!("certificate = 1\n{}", many(200, 0, "")),
        // Duplicate keys across the parts and the rest.
        format!("{}\n[api]\nlogin = \"x\"\n", many(300, 0, "")),
        many(300, 299, "name = \"again\""),
        // Not TOML at all past a part's end.
        format!("{}\n[defaults\n", many(300, 0, "")),
    ];
    for (i, text) in cases.iter().enumerate() {
        let (in_parts, whole) = both(text);
        assert_eq!(in_parts, whole, "case {i}");
    }
}
