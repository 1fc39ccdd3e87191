//! `discover` on a Debian-style Apache tree whose sites are made by mod_macro templates
//! (`conf-enabled` macros, `sites-enabled` `Use` lines, `mods-enabled/macro.load`), read
//! through the real `apache2 -S`: every name apache lists is proposed or left out.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use super::{agent_discover, apache_base, certificate, proposal};
use crate::support::env::TestEnv;
use crate::support::webserver::{Apache, Server, require};

/// The names `apache2 -S` lists (`namevhost`, `alias`, `wild alias`, the single-host form).
fn listed_names(listing: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in listing.lines() {
        let t = line.trim();
        if let Some(n) = t
            .strip_prefix("wild alias ")
            .or_else(|| t.strip_prefix("alias "))
        {
            out.insert(n.trim().to_ascii_lowercase());
        } else if let Some((head, _)) = t.split_once(" (")
            && t.ends_with(')')
            && let Some(n) = head.split_whitespace().last()
        {
            out.insert(n.to_ascii_lowercase());
        }
    }
    out
}

/// Writes `text` to `available/NAME` and links it from `enabled/NAME`, as `a2ensite`,
/// `a2enconf` and `a2enmod` do.
fn enable(root: &Path, kind: &str, name: &str, text: &str) {
    let available = root.join(format!("{kind}-available"));
    let enabled = root.join(format!("{kind}-enabled"));
    fs::create_dir_all(&available).unwrap();
    fs::create_dir_all(&enabled).unwrap();
    fs::write(available.join(name), text).unwrap();
    symlink(available.join(name), enabled.join(name)).unwrap();
}

#[test]
fn discover_reads_sites_made_by_mod_macro_through_the_real_apache2() {
    if !require(Server::Apache) {
        return;
    }
    let Some(modules) = Apache::modules_dir() else {
        return;
    };
    if !modules.join("mod_macro.so").is_file() {
        eprintln!("skipped: mod_macro.so is not installed");
        return;
    }
    let env = TestEnv::new();
    let root = env.path("etc/apache2");
    let ssl = env.path("etc/ssl/sites");
    fs::create_dir_all(&ssl).unwrap();
    fs::create_dir_all(&root).unwrap();
    let p = |x: &Path| x.display().to_string();
    for site in ["shop", "blog"] {
        let domain = format!("{site}.example.net");
        let www = format!("www.{domain}");
        certificate(&ssl, site, &[&domain, &www], None);
    }
    let (default_cert, default_key) = certificate(&ssl, "default", &["default.invalid"], None);
    // No global ServerName: apache names a block without one after the host.
    let base = apache_base(&root).replace("ServerName localhost\n", "");
    fs::write(
        root.join("apache2.conf"),
        format!(
            "{base}IncludeOptional mods-enabled/*.load\nInclude ports.conf\n\
             IncludeOptional conf-enabled/*.conf\nIncludeOptional sites-enabled/*.conf\n"
        ),
    )
    .unwrap();
    fs::write(
        root.join("ports.conf"),
        "Listen 80\n<IfModule ssl_module>\n  Listen 443\n</IfModule>\n",
    )
    .unwrap();
    enable(
        &root,
        "mods",
        "macro.load",
        &format!(
            "LoadModule macro_module {}\n",
            p(&modules.join("mod_macro.so"))
        ),
    );
    enable(
        &root,
        "conf",
        "macros.conf",
        &format!(
            "# Hosting templates.\n\
             <Macro VHost $name $domain>\n\
             \x20 <VirtualHost *:80>\n\
             \x20   ServerName $domain\n\
             \x20   ServerAlias www.$domain\n\
             \x20   DocumentRoot /srv/www/$name\n\
             \x20 </VirtualHost>\n\
             </Macro>\n\
             <Macro SSLHost $name $domain @root>\n\
             \x20 # The TLS site.\n\
             \x20 <VirtualHost *:443>\n\
             \x20   ServerName $domain\n\
             \x20   ServerAlias www.$domain\n\
             \x20   DocumentRoot @root\n\
             \x20   SSLEngine on\n\
             \x20   SSLCertificateFile {s}/$name.pem\n\
             \x20   SSLCertificateKeyFile {s}/$name.key\n\
             \x20 </VirtualHost>\n\
             </Macro>\n\
             <Macro Site $name $domain>\n\
             \x20 Use VHost $name $domain\n\
             \x20 Use SSLHost $name $domain /srv/www/$name\n\
             </Macro>\n",
            s = p(&ssl)
        ),
    );
    enable(
        &root,
        "sites",
        "hosting.conf",
        "Use VHost plain plain.example.net\n\
         use vhost \"other\" \\\n    other.example.net\n\
         Use Site shop shop.example.net\n\
         USE Site blog blog.example.net\n\
         UndefMacro VHost\n",
    );
    enable(
        &root,
        "sites",
        "default-ssl.conf",
        &format!(
            "<IfModule mod_ssl.c>\n<VirtualHost _default_:443>\n  DocumentRoot /var/www/html\n  \
             SSLEngine on\n  SSLCertificateFile {}\n  SSLCertificateKeyFile {}\n\
             </VirtualHost>\n</IfModule>\n",
            p(&default_cert),
            p(&default_key)
        ),
    );
    let out = std::process::Command::new(Apache::binary().unwrap())
        .arg("-d")
        .arg(&root)
        .arg("-f")
        .arg(root.join("apache2.conf"))
        .arg("-S")
        .output()
        .unwrap();
    let mut listing = String::from_utf8_lossy(&out.stdout).into_owned();
    listing.push_str(&String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{listing}");
    assert!(listing.contains("(macro 'sslhost'"), "{listing}");
    let file = env.path("apache-S.txt");
    fs::write(&file, &listing).unwrap();
    let d = agent_discover(&env, &["--server", "apache", "--from", &p(&file)]);

    // Every name of the listing: proposed or left out with a reason.
    let listed = listed_names(&listing);
    let proposed: BTreeSet<String> = d["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["domains"].as_array().unwrap().iter())
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    let left: BTreeSet<String> = d["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    let both: BTreeSet<String> = proposed.union(&left).cloned().collect();
    assert_eq!(both, listed, "{listing}\n{d:#}");
    assert_eq!(listed.len(), proposed.len() + left.len());
    for n in ["plain", "other", "shop", "blog"] {
        assert!(proposed.contains(&format!("www.{n}.example.net")), "{d:#}");
    }
    assert!(!left.is_empty(), "the _default_ block's name: {d:#}");
    let default_reason = d["skipped"].to_string();
    assert!(default_reason.contains("no ServerName"), "{default_reason}");

    // A TLS site made by a macro used from another macro: the substituted paths, the Use
    // line as its source.
    let hosting = root.join("sites-enabled/hosting.conf");
    let shop = proposal(&d, "shop.example.net");
    assert_eq!(shop["cert_file"], p(&ssl.join("shop.pem")), "{shop:#}");
    assert_eq!(shop["key_file"], p(&ssl.join("shop.key")));
    assert_eq!(shop["existing"]["key_on_host"], true, "{shop:#}");
    assert_eq!(
        shop["vhosts"][0],
        serde_json::json!({"file": p(&hosting), "line": 4}),
        "{shop:#}"
    );
    assert_eq!(shop["webroot"]["shop.example.net"], "/srv/www/shop");
    let said = shop["from_macro"].to_string();
    assert!(
        said.contains("macro 'sslhost'") && said.contains("in the macro"),
        "{said}"
    );
    // The continued, lower-case `Use` line.
    let other = proposal(&d, "other.example.net");
    assert_eq!(
        other["vhosts"][0],
        serde_json::json!({"file": p(&hosting), "line": 3}),
        "{other:#}"
    );
    assert_eq!(other["webroot"]["other.example.net"], "/srv/www/other");

    // The fragment names the substituted files and says which macro made the site.
    let fragments = env.path("frag");
    agent_discover(
        &env,
        &[
            "--server",
            "apache",
            "--from",
            &p(&file),
            "--write",
            &p(&fragments),
        ],
    );
    let text = fs::read_to_string(fragments.join("shop.example.net.toml")).unwrap();
    assert!(
        text.contains(&format!(
            "fullchain_path = \"{}\"",
            p(&ssl.join("shop.pem"))
        )) && text.contains("# Virtual host made by macro 'sslhost'"),
        "{text}"
    );
}
