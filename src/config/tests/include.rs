//! `[agent] include`: certificates from fragment files, errors naming the fragment and line.

use std::fs;
use std::path::{Path, PathBuf};

use super::super::*;

use crate::config::testing::{site, with_conf_d};

fn error_of(main: &Path) -> String {
    match Config::load(main) {
        Ok(_) => panic!("{} was accepted", main.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn certificates_come_from_every_fragment_in_name_order_with_defaults() {
    let (dir, main) = with_conf_d(
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
    let (dir, main) = with_conf_d("", &[("shop.toml", bad.to_owned())]);
    let e = error_of(&main);
    let file = dir.path().join("conf.d/shop.toml");
    assert!(
        e.contains(&format!(
            "{} line 4: certificate 'shop': unknown key `webrot`",
            file.display()
        )),
        "{e}"
    );
    let (_dir, main) = with_conf_d(
        "",
        &[("broken.toml", "[[certificate]\nname = 1\n".to_owned())],
    );
    let e = error_of(&main);
    assert!(
        e.contains("broken.toml line 1: syntax: invalid TOML"),
        "{e}"
    );
    let (_dir, main) = with_conf_d("", &[("api.toml", "[api]\nlogin = \"x\"\n".to_owned())]);
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
    let (dir, main) = with_conf_d(
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
    let (_dir, main) = with_conf_d(
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
    let (_dir, main) = with_conf_d("", &[("a.toml", site("a", "a.example.com"))]);
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
    let (dir, main) = with_conf_d("", &[]);
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("conf.d/*.toml", "missing.d/*.toml");
    fs::write(&main, text).unwrap();
    // A directory not made yet: nothing included, a warning at the include line.
    let config = Config::load(&main).unwrap();
    let warning = config
        .warnings
        .iter()
        .map(ToString::to_string)
        .find(|w| w.contains("missing.d"))
        .expect("a warning about missing.d");
    assert!(
        warning.contains("line 8: [agent]: `include`: the directory")
            && warning.contains("does not exist"),
        "{warning}"
    );
    // A directory that cannot be read is an error.
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("missing.d/*.toml", "config.toml/*.toml");
    fs::write(&main, text).unwrap();
    let e = error_of(&main);
    assert!(
        e.contains("line 8: [agent]: `include`: directory") && e.contains("config.toml"),
        "{e}"
    );
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("[\"config.toml/*.toml\"]", "7");
    fs::write(&main, text).unwrap();
    assert!(error_of(&main).contains("`include`: expected an array of file patterns"));
    // An empty conf.d is normal.
    let (_dir, main) = with_conf_d("", &[]);
    assert!(Config::load(&main).unwrap().certificates.is_empty());
    drop(dir);
}

#[test]
fn a_fragment_others_may_write_is_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, main) = with_conf_d("", &[("a.toml", site("a", "a.example.com"))]);
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

// ---- the kept certificates of unchanged included files (`state_dir/config-cache.json`) ----

/// Waits until files written now are old enough to be kept.
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(1100));
}

fn cache_of(dir: &Path) -> PathBuf {
    dir.join("state").join(cache::CACHE_FILE)
}

/// Every kind of value a certificate can hold, to be read back from the cache unchanged.
const RICH: &str = r#"[[certificate]]
name = "rich"
domains = ["rich.example.com", "www.rich.example.com"]
product_id = 202
days = 730
key_type = "rsa-3072"
reuse_key = true
family = "D"
organization_name = "Example GmbH"
organizational_unit = "Ops"
address_1 = "Street 1"
zip_code = "10115"
unique_value = "abc123"
ssl_server_software_id = 7
certificate_id = 9001
dcv = "http"
webroot = { "rich.example.com" = "/srv/rich", "www.rich.example.com" = "/srv/www" }
fullchain_path = "/etc/ssl/rich/fullchain.pem"
key_path = "/etc/ssl/rich/privkey.pem"
cert_path = "/etc/ssl/rich/cert.pem"
chain_path = "/etc/ssl/rich/chain.pem"
mode = "0640"
group = "ssl-cert"
reload_command = ["/bin/true", "reload"]
configtest_command = "/bin/true -t"
deploy_hook = "logger deployed"
verify_address = ""

[[certificate]]
name = "dns"
domains = ["dns.example.com"]
dcv = "dns-txt"
dns_hook = ["/bin/true"]
server = "apache"
verify_address = "10.0.0.1:8443"
fullchain_path = "/etc/ssl/dns/fullchain.pem"
key_path = "/etc/ssl/dns/privkey.pem"
"#;

#[test]
fn unchanged_fragments_are_read_back_from_the_cache_exactly() {
    let (dir, main) = with_conf_d(
        &site("main", "main.example.com"),
        &[
            ("a.toml", RICH.to_owned()),
            ("b.toml", site("b", "b.example.com")),
        ],
    );
    settle();
    let first = Config::load(&main).unwrap();
    let cache = cache_of(dir.path());
    assert!(cache.exists(), "a valid configuration is kept");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let second = Config::load(&main).unwrap();
    assert_eq!(
        format!("{:?}", first.certificates),
        format!("{:?}", second.certificates)
    );
    assert_eq!(first.fragments, second.fragments);
    // The kept certificates are what the second load used: a change made to the cache alone
    // shows (the files it came from are unchanged).
    let kept = fs::read_to_string(&cache).unwrap();
    assert!(kept.contains("b.example.com"), "{kept}");
    fs::write(&cache, kept.replace("b.example.com", "k.example.com")).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o600)).unwrap();
    let third = Config::load(&main).unwrap();
    assert_eq!(third.certificates[3].domains, ["k.example.com"]);
    // Damaged: read again from the files.
    fs::write(&cache, kept.replace("\"b.example.com\"", "")).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        Config::load(&main).unwrap().certificates[3].domains,
        ["b.example.com"]
    );
    fs::write(&cache, &kept[..kept.len() / 2]).unwrap();
    assert_eq!(
        Config::load(&main).unwrap().certificates[3].domains,
        ["b.example.com"]
    );
    fs::write(&cache, kept.replace("b.example.com", "k.example.com")).unwrap();
    // A cache others may write to is not trusted.
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o666)).unwrap();
    let fourth = Config::load(&main).unwrap();
    assert_eq!(fourth.certificates[3].domains, ["b.example.com"]);
}

#[test]
fn any_change_to_what_the_certificates_came_from_is_read_again() {
    let (dir, main) = with_conf_d("", &[("a.toml", site("a", "a.example.com"))]);
    settle();
    Config::load(&main).unwrap();
    assert!(cache_of(dir.path()).exists());
    let file = dir.path().join("conf.d/a.toml");
    // Same size, changed within the clock tick of the read that filled the cache or not:
    // the change time differs.
    fs::write(&file, site("a", "z.example.com")).unwrap();
    let c = Config::load(&main).unwrap();
    assert_eq!(c.certificates[0].domains, ["z.example.com"]);
    // A file added, then removed.
    fs::write(dir.path().join("conf.d/b.toml"), site("b", "b.example.com")).unwrap();
    assert_eq!(Config::load(&main).unwrap().certificates.len(), 2);
    fs::remove_file(dir.path().join("conf.d/b.toml")).unwrap();
    assert_eq!(Config::load(&main).unwrap().certificates.len(), 1);
    // [defaults] of the main file apply to the included certificates.
    settle();
    Config::load(&main).unwrap();
    let text = fs::read_to_string(&main)
        .unwrap()
        .replace("product_id = 101", "product_id = 102");
    fs::write(&main, text).unwrap();
    assert_eq!(
        Config::load(&main).unwrap().certificates[0]
            .order
            .product_id,
        102
    );
    // Made writable by others: the warning comes with the kept certificates too.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
    settle();
    for _ in 0..2 {
        let c = Config::load(&main).unwrap();
        assert!(
            c.warnings.iter().any(|w| w.contains("writable by others")),
            "{:?}",
            c.warnings
        );
    }
}

#[test]
fn files_changed_just_now_are_not_kept_and_problems_are_never_kept() {
    let (dir, main) = with_conf_d("", &[("a.toml", site("a", "a.example.com"))]);
    Config::load(&main).unwrap();
    assert!(
        !cache_of(dir.path()).exists(),
        "changed within the last second"
    );
    settle();
    let bad = site("a", "a.example.com").replace("name = \"a\"", "name = \"a\"\nwebrot = 1");
    let file = dir.path().join("conf.d/b.toml");
    fs::write(&file, bad).unwrap();
    settle();
    assert!(error_of(&main).contains("unknown key `webrot`"));
    assert!(!cache_of(dir.path()).exists());
}

#[test]
fn a_program_gone_since_the_cache_was_written_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, main) = with_conf_d("", &[]);
    let program = dir.path().join("reload-web");
    fs::write(&program, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    let text = format!(
        "{}reload_command = [\"{}\"]\n",
        site("a", "a.example.com"),
        program.display()
    );
    fs::write(dir.path().join("conf.d/a.toml"), text).unwrap();
    settle();
    Config::load(&main).unwrap();
    assert!(cache_of(dir.path()).exists());
    fs::remove_file(&program).unwrap();
    let e = error_of(&main);
    assert!(
        e.contains("reload-web") && e.contains("does not exist"),
        "{e}"
    );
}

/// The digest the due summary is kept under: equal for an unchanged configuration (read from
/// the files or from the cache), different after any change of the main file or of an
/// included file, and none while an included file is changing.
#[test]
fn the_source_digest_follows_every_file_of_the_configuration() {
    let (dir, main) = with_conf_d("", &[("a.toml", site("a", "a.example.com"))]);
    settle();
    let first = Config::load(&main).unwrap().source_digest;
    assert!(first.is_some());
    // Read again, now from the cache: the same.
    assert_eq!(Config::load(&main).unwrap().source_digest, first);
    // The main file's bytes.
    let text = fs::read_to_string(&main).unwrap();
    fs::write(&main, format!("{text}\n# a comment\n")).unwrap();
    settle();
    let second = Config::load(&main).unwrap().source_digest;
    assert!(second.is_some() && second != first);
    // An included file rewritten with the same bytes: its stamp changed.
    let frag = dir.path().join("conf.d/a.toml");
    let same = fs::read(&frag).unwrap();
    fs::write(&frag, &same).unwrap();
    // Within the last second: no digest, no summary.
    assert_eq!(Config::load(&main).unwrap().source_digest, None);
    settle();
    let third = Config::load(&main).unwrap().source_digest;
    assert!(third.is_some() && third != second);
    // An included file added.
    fs::write(dir.path().join("conf.d/b.toml"), site("b", "b.example.com")).unwrap();
    settle();
    let fourth = Config::load(&main).unwrap().source_digest;
    assert!(fourth.is_some() && fourth != third);
    // Not read from files: none.
    assert_eq!(Config::parse(&text, &main).unwrap().source_digest, None);
}
