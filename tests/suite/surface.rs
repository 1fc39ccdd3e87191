//! The library's public surface stays curated (docs/architecture.md, "The surface"): the rooms
//! are private to the crate, so rustc reports what nothing uses; src/lib.rs makes public only
//! the binary's entry and the `#[doc(hidden)]` module `testing`, and `testing` defines
//! nothing, it only re-exports.

use std::path::Path;

/// What src/lib.rs may make public, each as its statement up to `;` with spaces collapsed
/// (`pub(crate)` and the like are not public and not listed).
const ALLOWED: [&str; 2] = ["pub mod testing", "pub use cli::main"];

/// `text` without its `//` comments (the sources checked have no `//` inside strings).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each statement of `code` that starts with the word `pub`, up to its `;` or `{`, with runs
/// of white space made one space.
fn public_statements(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("pub") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + 3..].chars().next();
        let word = !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let end = rest[at..].find([';', '{']).map_or(rest.len(), |e| at + e);
        if word {
            found.push(
                rest[at..end]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        rest = &rest[(at + 3).max(end.min(rest.len()))..];
    }
    found
}

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("could not read '{}': {e}", path.display()))
}

/// The judgement on a lib.rs: every public statement that is not allowed, and whether
/// `pub mod testing` is hidden from the documentation.
fn problems_of(lib: &str) -> Vec<String> {
    let code = code_of(lib);
    let mut problems: Vec<String> = public_statements(&code)
        .into_iter()
        .filter(|s| !s.starts_with("pub(") && !ALLOWED.contains(&s.as_str()))
        .map(|s| format!("`{s}` makes more of the crate public"))
        .collect();
    let hidden = code
        .split("pub mod testing")
        .next()
        .is_some_and(|before| before.trim_end().ends_with("#[doc(hidden)]"));
    if code.contains("pub mod testing") && !hidden {
        problems.push("`pub mod testing` is not preceded by #[doc(hidden)]".into());
    }
    problems
}

#[test]
fn lib_rs_makes_public_only_the_binarys_entry_and_testing() {
    let problems = problems_of(&read("src/lib.rs"));
    assert!(
        problems.is_empty(),
        "src/lib.rs: {}; a room stays `mod x;`, what tests/, fuzz/ and examples/ need is \
         re-exported in src/testing.rs, what the binary needs by one `pub use` in src/lib.rs",
        problems.join("; ")
    );
}

/// The judge itself: a room made public, a second re-export, a public function and an
/// unhidden `testing` are each caught; comments are not read.
#[test]
fn the_surface_check_catches_a_room_made_public() {
    let good = "//! pub mod words in a comment\nmod api;\n#[doc(hidden)]\npub mod testing;\n\
                mod values;\npub use cli::main;\n";
    assert_eq!(problems_of(good), Vec::<String>::new());
    for (bad, named) in [
        ("pub mod api;\n", "pub mod api"),
        (
            "pub(crate) mod x;\npub   use\n  engine::run;\n",
            "pub use engine::run",
        ),
        ("pub fn helper() {}\n", "pub fn helper()"),
    ] {
        let problems = problems_of(&format!("{good}{bad}"));
        assert!(
            problems.iter().any(|p| p.contains(named)),
            "{bad:?}: {problems:?}"
        );
    }
    let unhidden = good.replace("#[doc(hidden)]\n", "");
    assert_eq!(problems_of(&unhidden).len(), 1, "{unhidden}");
}

#[test]
fn testing_only_re_exports() {
    let code = code_of(&read("src/testing.rs"));
    for statement in code.split(';') {
        let words: Vec<&str> = statement.split_whitespace().collect();
        for kind in [
            "fn",
            "struct",
            "enum",
            "trait",
            "const",
            "static",
            "type",
            "impl",
            "macro_rules!",
        ] {
            assert!(
                !words.contains(&kind),
                "src/testing.rs defines something (`{kind}` in `{}`): it only re-exports",
                words.join(" ")
            );
        }
    }
}
