//! The reading of `nginx -T` dumps as a whole: tokens, blocks, includes, `server` blocks and
//! the validation path of each.

use std::path::Path;

use super::vhosts;
use crate::discover::Validation;

const DUMP: &str = "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n\
# configuration file /etc/nginx/nginx.conf:\n\
events {}\n\
http {\n\
root /var/www/default;\n\
include /etc/nginx/sites-enabled/*;\n\
}\n\
stream { server { listen 12345; proxy_pass 127.0.0.1:1; } }\n\
\n\
# configuration file /etc/nginx/sites-enabled/shop:\n\
server {\n\
listen 80;\n\
server_name shop.example.com \"www.shop.example.com\";\n\
location ^~ /.well-known/pki-validation/ { root /srv/acme; }\n\
location / { return 301 https://$host$request_uri; }\n\
}\n\
server {\n\
listen 443 ssl default_server; http2 on;\n\
server_name shop.example.com www.shop.example.com;\n\
ssl_certificate /etc/ssl/shop.pem; # the chain\n\
ssl_certificate_key /etc/ssl/shop.key;\n\
}\n\
\n";

/// The validation of the one server of `/s.conf`, `body` starting on line 3.
fn probe(body: &str) -> Validation {
    let dump = format!("# configuration file /s.conf:\nhttp {{\nserver {{\n{body}\n}}\n}}\n");
    let v = vhosts(&dump).unwrap();
    assert_eq!(v.len(), 1);
    v[0].validation.clone()
}

fn blocked(v: &Validation, parts: &[&str]) {
    match v {
        Validation::Blocked(why) => {
            for p in parts {
                assert!(why.contains(p), "{p:?} not in {why:?}");
            }
        }
        other => panic!("not blocked: {other:?}"),
    }
}

fn served_from(path: &str) -> Validation {
    Validation::Served(path.into())
}

#[test]
fn a_regex_location_denying_dotfiles_blocks_the_validation_path() {
    let v = probe(
        "root /var/www/a;\nlocation / { try_files $uri $uri/ =404; }\nlocation ~ /\\. { deny all; }",
    );
    blocked(&v, &["`location ~ /\\.` at /s.conf:5", "deny all"]);
    // Harmless ones: they do not match the validation file.
    let v = probe(
        "root /var/www/a;\nlocation ~ /\\.ht { deny all; }\n\
         location ~ \\.php$ { fastcgi_pass unix:/run/php.sock; }\nlocation / { }",
    );
    assert_eq!(v, served_from("/var/www/a"));
}

#[test]
fn a_noregex_prefix_beats_regex_locations() {
    for wk in ["/.well-known/", "/.well-known/pki-validation/"] {
        let v = probe(&format!(
            "root /var/www/a;\nlocation ~ /\\. {{ deny all; }}\n\
             location ^~ {wk} {{ root /srv/acme; }}"
        ));
        assert_eq!(v, served_from("/srv/acme"), "{wk}");
    }
    // A plain prefix does not stop them.
    let v = probe(
        "root /var/www/a;\nlocation /.well-known/ { root /srv/acme; }\nlocation ~ /\\. { deny all; }",
    );
    blocked(&v, &["deny all"]);
}

#[test]
fn the_first_matching_regex_wins() {
    let v = probe(
        "root /var/www/a;\nlocation ~ ^/\\.well-known/ { root /srv/wk; }\n\
         location ~ /\\. { deny all; }",
    );
    assert_eq!(v, served_from("/srv/wk"));
    let v = probe(
        "root /var/www/a;\nlocation ~ /\\. { deny all; }\n\
         location ~ ^/\\.well-known/ { root /srv/wk; }",
    );
    blocked(&v, &["/s.conf:4"]);
}

#[test]
fn caseless_regexes_ignore_case() {
    let v = probe("root /a;\nlocation ~* \\.(TXT|log)$ { deny all; }");
    blocked(&v, &["`location ~* \\.(TXT|log)$`"]);
    assert_eq!(
        probe("root /a;\nlocation ~ \\.(TXT|log)$ { deny all; }"),
        served_from("/a")
    );
    // The modifier joined to the pattern, and a quoted pattern.
    blocked(
        &probe("root /a;\nlocation ~*\\.TXT$ { deny all; }"),
        &["deny"],
    );
    blocked(
        &probe("root /a;\nlocation ~ \"\\.txt$\" { deny all; }"),
        &["deny"],
    );
    assert_eq!(
        probe("root /a;\nlocation ~ \"x\\.txt$\" { deny all; }"),
        served_from("/a"),
        "`\\.` keeps its backslash in quotes"
    );
}

#[test]
fn a_regex_the_regex_crate_cannot_evaluate_makes_it_unknown() {
    let v = probe(
        "root /a;\nlocation ~ ^/(?!\\.well-known/) { return 301 https://$host$request_uri; }",
    );
    match v {
        Validation::Unknown(why) => {
            assert!(
                why.contains("`location ~ ^/(?!\\.well-known/)` at /s.conf:4"),
                "{why}"
            );
            assert!(why.contains("look-around"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // Not tried: an earlier one matches, or a `^~` prefix comes first.
    let v = probe("root /a;\nlocation ~ \\.txt$ { }\nlocation ~ (a)\\1 { deny all; }");
    assert_eq!(v, served_from("/a"));
    let v = probe("root /a;\nlocation ^~ /.well-known/ { }\nlocation ~ (a)\\1 { deny all; }");
    assert_eq!(v, served_from("/a"));
}

#[test]
fn nested_locations_are_chosen_as_nginx_does() {
    let v = probe("root /a;\nlocation / {\n  location ~ /\\. { deny all; }\n}");
    blocked(&v, &["`location ~ /\\.` at /s.conf:5"]);
    let v = probe("location /.well-known/ {\n  root /srv/wk;\n  location ~ \\.txt$ { }\n}");
    assert_eq!(
        v,
        served_from("/srv/wk"),
        "root inherited by the nested location"
    );
    let v = probe("root /a;\nlocation ~ well-known {\n  location ~ \\.txt$ { root /srv/txt; }\n}");
    assert_eq!(v, served_from("/srv/txt"));
    // A nested prefix does not stop the regular expressions around it.
    let v = probe(
        "root /a;\nlocation / {\n  location ^~ /.well-known/ { root /srv/acme; }\n}\n\
         location ~ /\\. { deny all; }",
    );
    blocked(&v, &["/s.conf:7"]);
}

#[test]
fn access_rules_and_passwords() {
    let v = probe("root /a;\ndeny all;\nlocation ^~ /.well-known/ { allow all; }");
    assert_eq!(v, served_from("/a"));
    blocked(
        &probe("root /a;\nallow 10.0.0.0/8;\ndeny all;\nlocation / { }"),
        &["`deny all;` at /s.conf:5"],
    );
    blocked(&probe("root /a;\nauth_basic \"staff\";"), &["auth_basic"]);
    let v = probe("root /a;\nauth_basic \"staff\";\nlocation /.well-known/ { auth_basic off; }");
    assert_eq!(v, served_from("/a"));
    blocked(
        &probe("root /a;\nlocation /.well-known/ { internal; }"),
        &["internal"],
    );
}

#[test]
fn rewrites_and_returns() {
    let v = probe("root /a;\nrewrite ^/old/(.*)$ /new/$1 permanent;");
    assert_eq!(v, served_from("/a"), "does not match the validation path");
    blocked(
        &probe("root /a;\nrewrite ^ https://$host$request_uri? permanent;"),
        &["redirects", "/s.conf:4", "before any location"],
    );
    blocked(
        &probe("root /a;\nlocation / { return 301 https://$host$request_uri; }"),
        &["redirects", "in `location /` at /s.conf:4"],
    );
    assert!(matches!(
        probe("root /a;\nrewrite ^/(.*)$ /index.php?q=$1 last;"),
        Validation::Unknown(_)
    ));
}

#[test]
fn if_conditions_are_evaluated_for_the_cas_request() {
    for (cond, then) in [
        ("($request_method !~ ^(GET|HEAD|POST)$ )", "return 444;"),
        ("(!-e $request_filename)", "rewrite ^ /index.php last;"),
        ("(-d $request_filename)", "return 403;"),
        ("($request_uri ~ ^/admin)", "return 403;"),
        ("($scheme = https)", "return 400;"),
    ] {
        let v = probe(&format!("root /a;\nif {cond} {{ {then} }}"));
        assert_eq!(v, served_from("/a"), "{cond}");
    }
    for cond in [
        "($scheme = http)",
        "($scheme != \"https\")",
        "($host = a.example.com)",
    ] {
        let v = probe(&format!(
            "root /a;\nif {cond} {{ return 301 https://$host$request_uri; }}"
        ));
        blocked(&v, &["under `if ($", "at /s.conf:4", "redirects"]);
    }
    match probe("root /a;\nif ($http_user_agent ~* bot) { return 403; }") {
        Validation::Unknown(why) => assert!(
            why.contains("`if ($http_user_agent ~* bot)` at /s.conf:4")
                && why.contains("answers (`return 403`)"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn includes_inside_locations_and_rules_of_http_count() {
    let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n  deny all;\n\
        \x20 server { root /a; location ^~ /.well-known/ { include snippets/acme.conf; } }\n\
        \x20 server { root /b; }\n}\n\
        # configuration file /etc/nginx/snippets/acme.conf:\nroot /srv/acme;\nallow all;\n";
    let v = vhosts(dump).unwrap();
    assert_eq!(v[0].validation, served_from("/srv/acme"));
    blocked(
        &v[1].validation,
        &["`deny all;` at /etc/nginx/nginx.conf:2"],
    );
}

#[test]
fn an_alias_that_ends_in_the_location_is_a_root() {
    let v = probe("location ^~ /.well-known/ { alias /srv/acme/.well-known/; }");
    assert_eq!(v, served_from("/srv/acme"));
    let v = probe("location /.well-known/pki-validation/ { alias /srv/acme/; }");
    blocked(&v, &["alias /srv/acme/"]);
}

#[test]
fn servers_of_the_http_block_through_includes() {
    let v = vhosts(DUMP).unwrap();
    assert_eq!(v.len(), 2, "{v:#?}");
    assert_eq!(v[0].names, ["shop.example.com", "www.shop.example.com"]);
    assert_eq!(v[0].at.to_string(), "/etc/nginx/sites-enabled/shop:1");
    assert_eq!(v[0].validation, Validation::Served("/srv/acme".into()));
    assert!(!v[0].tls);
    assert!(v[1].tls && v[1].listens[0].default);
    assert_eq!(
        v[1].cert_file.as_deref(),
        Some(Path::new("/etc/ssl/shop.pem"))
    );
    assert_eq!(
        v[1].validation,
        Validation::Served("/var/www/default".into()),
        "inherited root"
    );
}

#[test]
fn malformed_dumps_name_the_file_and_line() {
    for (text, expect) in [
        (
            "# configuration file /a.conf:\nhttp {\n server {\n",
            "/a.conf line 2",
        ),
        (
            "# configuration file /a.conf:\nhttp { }\n}\n",
            "/a.conf line 2",
        ),
        (
            "# configuration file /a.conf:\n\nhttp { listen \"80 }\n",
            "/a.conf line 2",
        ),
        (
            "# configuration file /a.conf:\nx;\n# configuration file /b.conf:\n\n{\n",
            "/b.conf line 2",
        ),
        ("no marker", "not the output of `nginx -T`"),
    ] {
        let e = vhosts(text).unwrap_err().to_string();
        assert!(e.contains(expect), "{text:?}: {e}");
    }
}

#[test]
fn includes_that_include_each_other_end() {
    let mut dump = String::from(
        "# configuration file /etc/nginx/nginx.conf:\nhttp { include /etc/nginx/*.conf; }\n",
    );
    for i in 0..20 {
        dump.push_str(&format!(
            "# configuration file /etc/nginx/f{i}.conf:\ninclude /etc/nginx/*.conf;\n\
             server {{ server_name s{i}.example.com; }}\n"
        ));
    }
    let started = std::time::Instant::now();
    let v = vhosts(&dump).unwrap();
    assert!(v.len() >= 20, "{}", v.len());
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn every_whitespace_byte_separates_words() {
    let v = vhosts(
        "# configuration file /a.conf:\nhttp {\x0cserver {\x0bserver_name\x0ca.example.com; }\n}\n",
    )
    .unwrap();
    assert_eq!(v[0].names, ["a.example.com"]);
}

#[test]
fn lua_blocks_are_skipped_whole() {
    let v = vhosts(
        "# configuration file /a.conf:\nhttp {\n server {\n  server_name a.example.com;\n  \
         content_by_lua_block {\n   -- don't { count\n   ngx.say(\"}\")\n   local q = [==[ } ]] ]==]\n   \
         --[[\n   { ]]\n   if x then y() end\n  }\n  \
         listen 443 ssl;\n }\n}\n",
    )
    .unwrap();
    assert_eq!(v[0].names, ["a.example.com"]);
    assert!(v[0].tls, "directives after the Lua block are read");
    let e = vhosts("# configuration file /a.conf:\nhttp { server { access_by_lua_block { a(\n")
        .unwrap_err();
    assert!(e.to_string().contains("Lua block is not closed"), "{e}");
}
