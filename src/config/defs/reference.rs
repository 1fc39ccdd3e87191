//! The key tables of `docs/configuration.md`, rendered from the declarations. Each table sits
//! between `<!-- keys: ID -->` and `<!-- end keys -->`; [`regenerate`] rewrites what is
//! between them, and a test fails while the committed page differs from its output.

use super::{Key, Kind, Part, SECTIONS, Section, certificate_keys};

/// The marks around a generated table.
const BEGIN: &str = "<!-- keys: ";
const END: &str = "<!-- end keys -->";

/// The region of the page a section's table fills.
fn region_id(section: Section) -> &'static str {
    match section {
        Section::Api => "api",
        Section::Agent => "agent",
        Section::Fleet => "fleet",
        Section::Validation => "validation",
        Section::Revocation => "revocation",
        Section::Preflight => "preflight",
        Section::Acme => "acme",
        Section::Certificate(Part::Order) => "certificate-order",
        Section::Certificate(Part::Key) => "certificate-key",
        Section::Certificate(Part::Dcv) => "certificate-dcv",
        Section::Certificate(Part::Install) => "certificate-install",
    }
}

/// The region naming the keys `[defaults]` cannot set.
const DEFAULTS_REGION: &str = "defaults";

/// `a` followed by `b` as one cell: "1 to 600. Total time…".
fn joined(a: String, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (_, true) => a,
        (true, false) => b.to_owned(),
        (false, false) => format!("{a}. {b}"),
    }
}

/// One row of a table.
fn row(k: &Key) -> String {
    let default = match k.kind {
        Kind::Bool { default } => format!("`{default}`"),
        Kind::Fraction { default, .. } => format!("`{default}`"),
        Kind::Choice {
            default: Some(d), ..
        } => format!("`{d:?}`"),
        Kind::Int {
            default: Some(d), ..
        }
        | Kind::Seconds {
            default: Some(d), ..
        } if k.default.is_empty() => format!("`{d}`"),
        Kind::Int {
            default: Some(d), ..
        }
        | Kind::Seconds {
            default: Some(d), ..
        } => format!("`{d}` {}", k.default),
        _ => k.default.to_owned(),
    };
    let rule = match k.kind {
        // A key whose range is the whole of a TOML integer has none worth printing.
        Kind::Int { min, max, .. } | Kind::Seconds { min, max, .. } if max < i64::MAX as u64 => {
            joined(format!("{min} to {max}"), k.doc)
        }
        Kind::Fraction { .. } => joined("above 0, below 1".to_owned(), k.doc),
        // Options explained by the sentence are not listed again.
        Kind::Choice { options, .. } if k.doc.is_empty() => options
            .iter()
            .map(|o| format!("`{o}`"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => k.doc.to_owned(),
    };
    format!("| `{}` | {} | {default} | {rule} |", k.name, k.kind.label())
}

/// The table of one section.
fn table(keys: &[Key]) -> String {
    let mut out = String::from("| key | type | default | rule |\n|---|---|---|---|\n");
    for k in keys {
        out.push_str(&row(k));
        out.push('\n');
    }
    out
}

/// The sentence naming the keys only a certificate sets.
fn defaults_sentence() -> String {
    let own: Vec<String> = certificate_keys()
        .filter(|k| k.per_certificate)
        .map(|k| format!("`{}`", k.name))
        .collect();
    let list = match own.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    };
    format!("Any key of a `[[certificate]]` except {list} may be set in `[defaults]`.\n")
}

/// What the region `id` holds.
fn render(id: &str) -> Option<String> {
    if id == DEFAULTS_REGION {
        return Some(defaults_sentence());
    }
    SECTIONS
        .iter()
        .find(|keys| keys.first().is_some_and(|k| region_id(k.section) == id))
        .map(|keys| table(keys))
}

/// `page` with every region rendered again; an error names a region that is unknown, not
/// closed, missing or repeated.
pub(in crate::config) fn regenerate(page: &str) -> Result<String, String> {
    let mut out = String::with_capacity(page.len());
    let mut seen: Vec<String> = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find(BEGIN) {
        let line_end = rest[at..]
            .find('\n')
            .map(|i| at + i + 1)
            .ok_or("a `<!-- keys: ID -->` mark at the end of the page")?;
        let id = rest[at + BEGIN.len()..line_end]
            .trim()
            .trim_end_matches("-->")
            .trim()
            .to_owned();
        let body = render(&id).ok_or_else(|| format!("unknown region `{id}`"))?;
        let close = rest[line_end..]
            .find(END)
            .map(|i| line_end + i)
            .ok_or_else(|| format!("region `{id}` is not closed by `{END}`"))?;
        out.push_str(&rest[..line_end]);
        out.push_str(&body);
        rest = &rest[close..];
        if seen.contains(&id) {
            return Err(format!("region `{id}` appears twice"));
        }
        seen.push(id);
    }
    out.push_str(rest);
    let expected = SECTIONS
        .iter()
        .filter_map(|keys| keys.first().map(|k| region_id(k.section)))
        .chain([DEFAULTS_REGION]);
    for id in expected {
        if !seen.iter().any(|s| s == id) {
            return Err(format!("no region `{id}` (`{BEGIN}{id} -->` … `{END}`)"));
        }
    }
    Ok(out)
}
