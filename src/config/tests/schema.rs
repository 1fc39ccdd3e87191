//! The declarations of `defs/` against what they drive and what they describe: the key tables
//! of `docs/configuration.md` are their rendering; every declared key is accepted where it is
//! declared and read by a reader; every field of the configuration's structs is declared and
//! every declared key is a field; the declared defaults, ranges and types are the ones the
//! checker applies. A key added in one place and forgotten in another fails here.

use std::path::Path;

use crate::config::defs::{self, Key, Kind, Section};
use crate::config::{Config, ConfigError};

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
/// Set to rewrite the page's generated tables instead of failing.
const WRITE: &str = "CERT_AGENT_WRITE_REFERENCE";

const READERS: [&str; 11] = [
    include_str!("../validate/preflight.rs"),
    include_str!("../validate/acme.rs"),
    include_str!("../validate/dcv.rs"),
    include_str!("../validate/revocation.rs"),
    include_str!("../validate/mod.rs"),
    include_str!("../validate/document.rs"),
    include_str!("../validate/api.rs"),
    include_str!("../validate/agent.rs"),
    include_str!("../validate/fleet.rs"),
    include_str!("../validate/certificate.rs"),
    include_str!("../validate/validation.rs"),
];

#[test]
fn the_reference_tables_are_rendered_from_the_declarations() {
    let page = std::fs::read_to_string(PAGE).expect("docs/configuration.md is readable");
    let generated =
        defs::reference::regenerate(&page).unwrap_or_else(|e| panic!("docs/configuration.md: {e}"));
    if generated == page {
        return;
    }
    if std::env::var_os(WRITE).is_some() {
        std::fs::write(PAGE, &generated).expect("docs/configuration.md is writable");
        return;
    }
    let (line, (old, new)) = page
        .lines()
        .zip(generated.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map_or((0, ("", "")), |(i, pair)| (i + 1, pair));
    panic!(
        "docs/configuration.md's key tables differ from src/config/defs/ (first at line \
         {line}):\n  page:      {old}\n  generated: {new}\nregenerate them with \
         `{WRITE}=1 cargo test --lib config::tests::schema` and commit the page"
    );
}

/// The certificate's part keys share one table in the file.
fn header(section: Section) -> &'static str {
    match section {
        Section::Api => "[api]",
        Section::Agent => "[agent]",
        Section::Fleet => "[fleet]",
        Section::Validation => "[validation]",
        Section::Revocation => "[revocation]",
        Section::Preflight => "[preflight]",
        Section::Acme => "[acme.x]",
        Section::Certificate(_) => "[[certificate]]",
    }
}

/// What a valid document needs in each section besides the keys under test.
fn required(header: &str) -> &'static [(&'static str, &'static str)] {
    match header {
        "[api]" => &[
            ("base_url", "\"https://partner.example.net\""),
            ("login", "\"ops@example.com\""),
        ],
        "[fleet]" => &[
            ("endpoints", "[\"https://127.0.0.1:2379\"]"),
            ("host", "\"web1\""),
            ("rollout_canaries", "1"),
        ],
        "[acme.x]" => &[("directory", "\"https://acme.example.net/directory\"")],
        "[[certificate]]" => &[
            ("name", "\"www\""),
            ("domains", "[\"www.example.com\"]"),
            ("product_id", "1"),
            ("country", "\"DE\""),
            ("region", "\"Berlin\""),
            ("city", "\"Berlin\""),
            ("webroot", "\"/var/www\""),
            // What the other validations and `server = "none"` need.
            ("dns_hook", "[\"/bin/true\"]"),
            ("dcv_email", "\"hostmaster@example.com\""),
            ("key_path", "\"/etc/ssl/www.key\""),
        ],
        _ => &[],
    }
}

/// A document with every section, each key `value` gives set to it, and the keys a section
/// requires that `value` leaves unset.
fn document(value: impl Fn(&Key) -> Option<String>) -> String {
    let mut out = String::new();
    let mut headers: Vec<&str> = defs::all().map(|k| header(k.section)).collect();
    headers.dedup();
    for h in headers {
        out.push_str(&format!("\n{h}\n"));
        let keys: Vec<&Key> = defs::all().filter(|k| header(k.section) == h).collect();
        for (name, v) in required(h) {
            let overridden = keys.iter().any(|k| k.name == *name && value(k).is_some());
            if !overridden {
                out.push_str(&format!("{name} = {v}\n"));
            }
        }
        for k in keys {
            if let Some(v) = value(k) {
                out.push_str(&format!("{} = {v}\n", k.name));
            }
        }
    }
    out
}

/// Every problem of `text` (none: it is valid).
fn problems(text: &str) -> Vec<String> {
    match Config::parse(text, Path::new("/etc/cert-agent/config.toml")) {
        Ok(_) => Vec::new(),
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.into_iter().map(|p| p.message).collect()
        }
        Err(e) => vec![e.to_string()],
    }
}

/// A value of the key's kind (not necessarily one its reader accepts).
fn sample(k: &Key) -> String {
    match k.kind {
        Kind::Bool { .. } => "true".into(),
        Kind::Int { min, .. } | Kind::Seconds { min, .. } => min.to_string(),
        Kind::Fraction { default, .. } => format!("{default:?}"),
        Kind::Choice { options, .. } => format!("{:?}", options.first().unwrap_or(&"")),
        Kind::Path => "\"/etc/cert-agent/x\"".into(),
        Kind::Command => "[\"/bin/true\"]".into(),
        Kind::String | Kind::Other(_) => "\"x\"".into(),
    }
}

#[test]
fn every_declared_key_is_accepted_where_it_is_declared() {
    let mut text = document(|k| Some(sample(k)));
    text.push_str("\n[defaults]\n");
    for k in defs::certificate_keys().filter(|k| !k.per_certificate) {
        text.push_str(&format!("{} = {}\n", k.name, sample(k)));
    }
    let refused: Vec<String> = problems(&text)
        .into_iter()
        .filter(|m| m.contains("unknown key") || m.contains("cannot be set in [defaults]"))
        .collect();
    assert!(
        refused.is_empty(),
        "declared but refused: {refused:?}\n{text}"
    );
}

#[test]
fn every_declared_key_is_read() {
    let unread: Vec<&str> = defs::all()
        .filter(|k| {
            let quoted = format!("\"{}\"", k.name);
            !READERS
                .iter()
                .any(|r| r.contains(&quoted) || r.contains(k.ident))
        })
        .map(|k| k.name)
        .collect();
    assert!(unread.is_empty(), "declared but never read: {unread:?}");
}

#[test]
fn every_number_boolean_and_choice_is_checked_as_declared() {
    for k in defs::all() {
        let wrong: Vec<(String, String)> = match k.kind {
            Kind::Int { min, max, .. } | Kind::Seconds { min, max, .. } => {
                let range = format!("must be between {min} and {max}");
                let mut v = vec![("\"1\"".to_owned(), "expected an integer".to_owned())];
                if max < i64::MAX as u64 {
                    v.push(((max + 1).to_string(), range.clone()));
                }
                if min > 0 {
                    v.push(((min - 1).to_string(), range));
                }
                v
            }
            Kind::Bool { .. } => vec![("1".into(), "expected true or false".into())],
            Kind::Fraction { .. } => vec![
                ("1.0".into(), "above 0 and below 1".into()),
                ("0".into(), "above 0 and below 1".into()),
            ],
            Kind::Choice { .. } => vec![
                ("\"nope\"".into(), "\"nope\" is not one of".into()),
                ("1".into(), "expected a string".into()),
            ],
            _ => continue,
        };
        let named = format!("`{}`", k.name);
        for (value, words) in wrong {
            let found = problems(&document(|o| (o.ident == k.ident).then(|| value.clone())));
            assert!(
                found
                    .iter()
                    .any(|m| m.contains(&named) && m.contains(&words)),
                "{} = {value}: expected a problem with {words:?}, got {found:?}",
                k.ident
            );
        }
        if let Some((min, max, _)) = k.kind.range() {
            for v in [min, max.min(i64::MAX as u64)] {
                let found = problems(&document(|o| (o.ident == k.ident).then(|| v.to_string())));
                assert!(
                    !found.iter().any(|m| m.contains(&named)),
                    "{} = {v} is in its declared range, yet: {found:?}",
                    k.ident
                );
            }
        }
    }
}

#[test]
fn the_declared_defaults_are_the_effective_ones() {
    let text = document(|_| None);
    let config = Config::parse(&text, Path::new("/etc/cert-agent/config.toml"))
        .unwrap_or_else(|e| panic!("{e:#}\n{text}"));
    let rendered = toml::Value::try_from(&config).expect("the configuration renders");
    for k in defs::all() {
        let table = match k.section {
            Section::Certificate(_) => rendered.get("certificate").and_then(|c| c.get(0)),
            Section::Acme => continue,
            s => rendered.get(header(s).trim_matches(['[', ']'])),
        };
        let value = table.and_then(|t| t.get(k.name));
        let expected = match k.kind {
            Kind::Bool { default } => toml::Value::Boolean(default),
            Kind::Int {
                default: Some(d), ..
            }
            | Kind::Seconds {
                default: Some(d), ..
            } => toml::Value::Integer(i64::try_from(d).expect("a default fits TOML")),
            Kind::Fraction { default, .. } => toml::Value::Float(default),
            Kind::Choice {
                default: Some(d), ..
            } => toml::Value::String(d.to_owned()),
            _ => continue,
        };
        assert_eq!(
            value,
            Some(&expected),
            "the effective default of {}",
            k.ident
        );
    }
    // The defaults the reference prints as text.
    for (k, effective) in [
        (&defs::AGENT_STATE_DIR, crate::config::DEFAULT_STATE_DIR),
        (&defs::AGENT_SERVE_USER, crate::config::DEFAULT_SERVE_USER),
        (&defs::FLEET_PREFIX, crate::config::DEFAULT_FLEET_PREFIX),
        (&defs::CERT_LISTEN, crate::config::DEFAULT_LISTEN),
        (
            &defs::CERT_VERIFY_ADDRESS,
            crate::config::DEFAULT_VERIFY_ADDRESS,
        ),
    ] {
        assert!(
            k.default.contains(effective),
            "{}: the reference's default {:?} does not name {effective:?}",
            k.ident,
            k.default
        );
    }
}

#[test]
fn every_option_of_a_choice_is_read_as_itself_and_named_by_the_reference() {
    for k in defs::all() {
        let Kind::Choice { options, .. } = k.kind else {
            continue;
        };
        for option in options {
            let text = document(|o| (o.ident == k.ident).then(|| format!("{option:?}")));
            let config = Config::parse(&text, Path::new("/etc/cert-agent/config.toml"))
                .unwrap_or_else(|e| panic!("{} = {option:?}: {e:#}", k.ident));
            let rendered = toml::Value::try_from(&config).expect("the configuration renders");
            let read = rendered
                .get("certificate")
                .and_then(|c| c.get(0))
                .and_then(|c| c.get(k.name))
                .and_then(toml::Value::as_str);
            assert_eq!(read, Some(*option), "{} = {option:?} is read as", k.ident);
            assert!(
                k.doc.is_empty() || k.doc.contains(&format!("`{option}`")),
                "{}: the reference's sentence does not name `{option}`",
                k.ident
            );
        }
    }
}

#[test]
fn durations_are_declared_in_seconds() {
    for k in defs::all() {
        assert_eq!(
            k.name.ends_with("_secs"),
            matches!(k.kind, Kind::Seconds { .. }),
            "{}: a `_secs` key is declared as Seconds, and only such a key",
            k.ident
        );
    }
}

const TYPES: &str = include_str!("../types.rs");
const ROLLOUT: &str = include_str!("../rollout.rs");

/// The keys the fields of `pub struct NAME` in `source` stand for: a field's name, or its
/// serde `rename`; `#[serde(skip)]` and `#[serde(flatten)]` fields are not keys.
fn fields(source: &str, name: &str) -> Vec<String> {
    let start = format!("pub struct {name} {{");
    let body = source
        .split_once(&start)
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map_or_else(|| panic!("no `{start}`"), |(body, _)| body);
    let mut out = Vec::new();
    let mut attributes = String::new();
    for line in body.lines().map(str::trim) {
        if line.starts_with("///") {
            continue;
        }
        if let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split_once(':')) {
            let renamed = attributes
                .split_once("rename = \"")
                .and_then(|(_, r)| r.split_once('"'))
                .map(|(r, _)| r.to_owned());
            if !attributes.contains("skip)") && !attributes.contains("flatten") {
                out.push(renamed.unwrap_or_else(|| field.0.trim().to_owned()));
            }
            attributes.clear();
        } else {
            attributes.push_str(line);
        }
    }
    out
}

#[test]
fn every_field_is_declared_and_every_declared_key_is_a_field() {
    let sections: [(Vec<String>, Vec<&Key>); 8] = [
        (fields(TYPES, "ApiConfig"), defs::API.iter().collect()),
        (fields(TYPES, "AgentConfig"), defs::AGENT.iter().collect()),
        (
            [
                fields(TYPES, "FleetConfig"),
                fields(ROLLOUT, "RolloutConfig"),
            ]
            .concat(),
            defs::FLEET.iter().collect(),
        ),
        (
            fields(TYPES, "ValidationConfig"),
            defs::VALIDATION.iter().collect(),
        ),
        (
            fields(TYPES, "RevocationConfig"),
            defs::REVOCATION.iter().collect(),
        ),
        (
            fields(TYPES, "PreflightConfig"),
            defs::PREFLIGHT.iter().collect(),
        ),
        (
            // The NAME of `[acme.NAME]` is the table's, not a key.
            fields(TYPES, "AcmeCa")
                .into_iter()
                .filter(|f| f != "name")
                .collect(),
            defs::ACME.iter().collect(),
        ),
        (
            ["CertificateConfig", "OrderSpec", "DcvSpec", "InstallSpec"]
                .into_iter()
                .flat_map(|s| fields(TYPES, s))
                .collect(),
            defs::certificate_keys().collect(),
        ),
    ];
    for (fields, keys) in sections {
        let section = keys.first().map(|k| k.section);
        let undeclared: Vec<&String> = fields
            .iter()
            .filter(|f| !keys.iter().any(|k| k.name == f.as_str()))
            .collect();
        assert!(
            undeclared.is_empty(),
            "{section:?}: fields without a declaration in src/config/defs/: {undeclared:?}"
        );
        let fieldless: Vec<&str> = keys
            .iter()
            .map(|k| k.name)
            .filter(|k| !fields.iter().any(|f| f == k))
            .collect();
        assert!(
            fieldless.is_empty(),
            "{section:?}: declared keys without a field in src/config/types.rs: {fieldless:?}"
        );
    }
}
