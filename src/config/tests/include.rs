//! `[agent] include`: certificates from fragment files, errors naming the fragment and line.

use std::fs;
use std::path::{Path, PathBuf};

use super::super::*;

const MAIN: &str = r#"[api]
base_url = "https://partner.example.net"
login = "ops@example.com"
password = "x"

[agent]
state_dir = "/var/lib/cert-agent"
include = ["conf.d/*.toml"]

[defaults]
country = "DE"
region = "Berlin"
city = "Berlin"
product_id = 101
server = "nginx"
webroot = "/var/www/html"
"#;

fn site(name: &str, domain: &str) -> String {
    format!(
        "[[certificate]]\nname = \"{name}\"\ndomains = [\"{domain}\"]\n\
         fullchain_path = \"/etc/ssl/{name}/fullchain.pem\"\n\
         key_path = \"/etc/ssl/{name}/privkey.pem\"\n"
    )
}

/// A main file with `extra` appended and the fragments `(file name, text)` in `conf.d/`.
fn layout(extra: &str, fragments: &[(&str, String)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("config.toml");
    fs::write(&main, format!("{MAIN}{extra}")).unwrap();
    fs::create_dir(dir.path().join("conf.d")).unwrap();
    for (name, text) in fragments {
        fs::write(dir.path().join("conf.d").join(name), text).unwrap();
    }
    (dir, main)
}

fn error_of(main: &Path) -> String {
    match Config::load(main) {
        Ok(_) => panic!("{} was accepted", main.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn certificates_come_from_every_fragment_in_name_order_with_defaults() {
    let (dir, main) = layout(
        &site("main", "main.example.com"),
        &[
            ("b.toml", site("b", "b.example.com")),
            (
                "a.toml",
                format!(
                    "{}\n{}",
                    site("a1", "a1.example.com"),
                    site("a2", "a2.example.com")
                ),
            ),
            ("c.toml.dpkg-old", site("old", "old.example.com")),
        ],
    );
    let c = Config::load(&main).unwrap();
    let names: Vec<&str> = c.certificates.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["main", "a1", "a2", "b"]);
    assert_eq!(c.certificates[1].order.product_id, 101, "[defaults] apply");
    let conf = dir.path().join("conf.d");
    assert_eq!(c.fragments, vec![conf.join("a.toml"), conf.join("b.toml")]);
    assert!(c.render().contains("include = [\"conf.d/*.toml\"]"));
}

#[test]
fn a_problem_in_a_fragment_names_the_fragment_and_its_line() {
    let bad = "[[certificate]]\nname = \"shop\"\ndomains = [\"shop.example.com\"]\nwebrot = \"/x\"\n\
               fullchain_path = \"/etc/ssl/shop/f.pem\"\nkey_path = \"/etc/ssl/shop/k.pem\"\n";
    let (dir, main) = layout("", &[("shop.toml", bad.to_owned())]);
    let e = error_of(&main);
    let file = dir.path().join("conf.d/shop.toml");
    assert!(
        e.contains(&format!(
            "{} line 4: certificate 'shop': unknown key `webrot`",
            file.display()
        )),
        "{e}"
    );
    let (_dir, main) = layout(
        "",
        &[("broken.toml", "[[certificate]\nname = 1\n".to_owned())],
    );
    let e = error_of(&main);
    assert!(
        e.contains("broken.toml line 1: syntax: invalid TOML"),
        "{e}"
    );
    let (_dir, main) = layout("", &[("api.toml", "[api]\nlogin = \"x\"\n".to_owned())]);
    let e = error_of(&main);
    assert!(
        e.contains(
            "api.toml line 1: top level: `api`: an included file holds only [[certificate]]"
        ),
        "{e}"
    );
}

#[test]
fn a_name_or_a_path_defined_twice_names_both_files() {
    let (dir, main) = layout(
        &site("www", "www.example.com"),
        &[("www.toml", site("www", "other.example.com"))],
    );
    let e = error_of(&main);
    let fragment = dir.path().join("conf.d/www.toml");
    assert!(
        e.contains(&format!(
            "{} line 2: certificate 'www': `name`: \"www\" is also defined at {} line 18",
            fragment.display(),
            main.display()
        )),
        "{e}"
    );
    let same_key = "[[certificate]]\nname = \"two\"\ndomains = [\"two.example.com\"]\n\
                    fullchain_path = \"/etc/ssl/one/fullchain.pem\"\nkey_path = \"/etc/ssl/two/k.pem\"\n";
    let (_dir, main) = layout(
        "",
        &[
            ("1.toml", site("one", "one.example.com")),
            ("2.toml", same_key.to_owned()),
        ],
    );
    let e = error_of(&main);
    assert!(
        e.contains("2.toml line 2: certificate 'two': install path /etc/ssl/one/fullchain.pem is also used by certificate 'one'")
            && e.contains("1.toml line 2)"),
        "{e}"
    );
}

#[test]
fn a_bad_default_is_reported_in_the_main_file() {
    let (_dir, main) = layout("", &[("a.toml", site("a", "a.example.com"))]);
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("product_id = 101", "product_id = \"x\"");
    fs::write(&main, text).unwrap();
    let e = error_of(&main);
    assert!(
        e.contains(&format!(
            "{} line 14: certificate 'a': `product_id` (from [defaults])",
            main.display()
        )),
        "{e}"
    );
}

#[test]
fn include_patterns_that_cannot_be_read_are_errors_at_the_include_line() {
    let (dir, main) = layout("", &[]);
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("conf.d/*.toml", "missing.d/*.toml");
    fs::write(&main, text).unwrap();
    let e = error_of(&main);
    assert!(
        e.contains("line 8: [agent]: `include`: directory") && e.contains("missing.d"),
        "{e}"
    );
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("[\"missing.d/*.toml\"]", "7");
    fs::write(&main, text).unwrap();
    assert!(error_of(&main).contains("`include`: expected an array of file patterns"));
    // An empty conf.d is normal.
    let (_dir, main) = layout("", &[]);
    assert!(Config::load(&main).unwrap().certificates.is_empty());
    drop(dir);
}

#[test]
fn a_fragment_others_may_write_is_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, main) = layout("", &[("a.toml", site("a", "a.example.com"))]);
    let file = dir.path().join("conf.d/a.toml");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
    let c = Config::load(&main).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("a.toml line 1: include: writable by others")),
        "{:?}",
        c.warnings
    );
}
