//! Bringing existing sites under the agent: an order placed elsewhere adopted without a new
//! billed order (its validation method switched by the reissue itself), certificates split
//! over `include` fragments, `discover` against real `nginx -T` and `apachectl -S` output,
//! placeholders and snippets.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cert_agent::testing::api::{Client, ClientOptions, PasswordSource, RetryPolicy};
use support::env::{LOGIN, TestEnv};
use support::webserver::{Server, require};

mod macros;

/// A client of the sandbox account the agent uses, for placing orders "on the web site".
fn account_client(env: &TestEnv) -> Client {
    let mut o = ClientOptions::new(
        env.sandbox.base_url(),
        LOGIN,
        PasswordSource::file(env.path("password")),
    );
    o.ca_file = Some(env.sandbox.api_ca_path());
    o.state_dir = Some(env.path("web-site-state"));
    o.retry = RetryPolicy::fast(4);
    o.timeout = Duration::from_secs(20);
    Client::new(o).expect("client builds")
}

/// An order placed on the web site with EMAIL validation and issued there; returns its ID.
fn issued_elsewhere_by_email(env: &TestEnv, domain: &str) -> u64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = account_client(env);
    let id = rt.block_on(support::api::place_order(&client, domain));
    env.sandbox.approve_email(id, None).expect("approve");
    env.sandbox.validate_now();
    support::wait::until(
        Duration::from_secs(5),
        &format!("certificate {id} to be issued"),
        || {
            let s = rt.block_on(client.status(id)).expect("status");
            s.certificate.as_ref().map(|c| c.as_str()) == Some("issued")
        },
    );
    id
}

/// `adopt --reissue` of an EMAIL-validated order with `dcv = "http"`: the reissue names
/// HTTP_CSR_HASH, so the method switches in the same step, the file is validated, the
/// certificate installed, and nothing is ordered.
#[test]
fn adopting_an_email_order_switches_it_to_http_in_the_reissue() {
    let mut env = TestEnv::new();
    let id = issued_elsewhere_by_email(&env, "shop.adopt.test");
    let billed = env.billed();
    let spec = env.standalone_spec("shop", &["shop.adopt.test"]);
    env.certs.push(spec);
    let out = env
        .agent([
            "adopt",
            "shop",
            "--certificate-id",
            &id.to_string(),
            "--reissue",
        ])
        .run();
    out.expect_code(0);
    let text = out.text();
    assert!(
        text.contains("validates by EMAIL") && text.contains("HTTP_CSR_HASH"),
        "the adoption says that the method switches: {text}"
    );
    assert!(!text.contains("dcv change"), "{text}");
    let rec = env.record("shop").expect("record");
    assert_eq!(rec["order"]["certificate_id"], id, "{rec:#}");
    assert!(rec["installed"]["installed_at"].is_string(), "{rec:#}");
    let reissues: Vec<_> = env
        .calls()
        .into_iter()
        .filter(|c| c.path.ends_with("/reissue"))
        .collect();
    assert_eq!(reissues.len(), 1, "one reissue call");
    assert_eq!(env.billed(), billed, "no new billed order");
    assert_eq!(
        env.sandbox.inspect(id).unwrap()["domains"][0]["method"],
        "Http",
        "the order validates by HTTP now"
    );
}

/// A key and a certificate for `names` written to `DIR/NAME.pem` and `DIR/NAME.key`: signed by
/// `issuer` (a CA) or self-signed.
fn certificate(
    dir: &Path,
    name: &str,
    names: &[&str],
    issuer: Option<(&rcgen::Issuer<'_, rcgen::KeyPair>, &str)>,
) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0]);
    let pem = match issuer {
        Some((ca, ca_pem)) => format!("{}{ca_pem}", params.signed_by(&key, ca).unwrap().pem()),
        None => params.self_signed(&key).unwrap().pem(),
    };
    let cert = dir.join(format!("{name}.pem"));
    let keyfile = dir.join(format!("{name}.key"));
    fs::write(&cert, pem).unwrap();
    fs::write(&keyfile, key.serialize_pem()).unwrap();
    fs::set_permissions(&keyfile, fs::Permissions::from_mode(0o600)).unwrap();
    (cert, keyfile)
}

fn ca() -> (rcgen::Issuer<'static, rcgen::KeyPair>, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Discover Test CA");
    let pem = params.self_signed(&key).unwrap().pem();
    (rcgen::Issuer::new(params, key), pem)
}

fn agent_discover(env: &TestEnv, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json", "discover"];
    all.extend_from_slice(args);
    let out = env.agent(all).run();
    out.expect_code(0);
    out.json()
}

fn proposal<'v>(d: &'v serde_json::Value, name: &str) -> &'v serde_json::Value {
    d["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no proposal {name}: {d:#}"))
}

/// Files of the Debian-style nginx layout of [`nginx_layout`].
struct Layout {
    dump: PathBuf,
    etc: PathBuf,
    shop_cert: PathBuf,
}

/// A Debian-style nginx layout under `env` (nginx.conf, conf.d, sites-enabled, a default
/// server, several listens, http2, a certificate shared by two sites, a site without TLS, a
/// proxied site, a regular-expression name, dot files denied by a regular-expression location
/// with and without a `^~` prefix before it, a PCRE lookahead), dumped by the real `nginx -T`.
fn nginx_layout(env: &TestEnv) -> Layout {
    let etc = env.path("etc/nginx");
    let ssl = env.path("etc/ssl");
    for d in [etc.join("conf.d"), etc.join("sites-enabled"), ssl.clone()] {
        fs::create_dir_all(d).unwrap();
    }
    let (issuer, ca_pem) = ca();
    let (shop_cert, shop_key) = certificate(
        &ssl,
        "shop",
        &["shop.example.com", "www.shop.example.com"],
        None,
    );
    let (multi_cert, multi_key) = certificate(
        &ssl,
        "multi",
        &["blog.example.com", "news.example.com"],
        Some((&issuer, &ca_pem)),
    );
    let p = |x: &Path| x.display().to_string();
    fs::write(
        etc.join("nginx.conf"),
        format!(
            "worker_processes 1;\nerror_log {log};\nevents {{ worker_connections 64; }}\n\
             http {{\n  access_log {access};\n  include {etc}/conf.d/*.conf;\n  include {etc}/sites-enabled/*;\n}}\n",
            log = p(&env.path("error.log")),
            access = p(&env.path("access.log")),
            etc = p(&etc)
        ),
    )
    .unwrap();
    fs::write(
        etc.join("sites-enabled/default"),
        "server {\n  listen 80 default_server;\n  listen [::]:80 default_server;\n  server_name _;\n  root /var/www/html;\n}\n",
    )
    .unwrap();
    fs::write(
        etc.join("sites-enabled/shop.example.com"),
        format!(
            "server {{\n  listen 80;\n  server_name shop.example.com www.shop.example.com;\n\
             \x20 location ^~ /.well-known/pki-validation/ {{ root /srv/acme; default_type text/plain; }}\n\
             \x20 location / {{ return 301 https://$host$request_uri; }}\n}}\n\
             server {{\n  listen 443 ssl http2;\n  listen [::]:443 ssl http2;\n  server_name shop.example.com www.shop.example.com;\n\
             \x20 ssl_certificate {};\n  ssl_certificate_key {};\n  root /srv/shop;\n}}\n",
            p(&shop_cert),
            p(&shop_key)
        ),
    )
    .unwrap();
    for (site, listen) in [("blog", "127.0.0.1:8443"), ("news", "443")] {
        fs::write(
            etc.join(format!("sites-enabled/{site}.example.com")),
            format!(
                "server {{\n  listen {listen} ssl;\n  server_name {site}.example.com;\n\
                 \x20 ssl_certificate \"{}\";\n  ssl_certificate_key {};\n  root /srv/{site};\n}}\n",
                p(&multi_cert),
                p(&multi_key)
            ),
        )
        .unwrap();
    }
    fs::write(
        etc.join("conf.d/app.conf"),
        "server {\n  listen 80;\n  server_name app.example.com;\n  location / { proxy_pass http://127.0.0.1:9; }\n}\n\
         server {\n  listen 80;\n  server_name ~^(?<user>.+)\\.users\\.example\\.com$ plain.example.com;\n  root /srv/plain;\n}\n",
    )
    .unwrap();
    // Dot files denied by a regular expression: in the way unless a `^~` prefix comes first;
    // a PCRE lookahead cannot be evaluated by discover.
    fs::write(
        etc.join("sites-enabled/dotfiles"),
        "server {\n  listen 80;\n  server_name static.example.com;\n  root /srv/static;\n\
         \x20 location / { try_files $uri $uri/ =404; }\n  location ~ /\\.ht { deny all; }\n\
         \x20 location ~ \\.php$ { fastcgi_pass unix:/run/php/php-fpm.sock; }\n\
         \x20 location ~ /\\. { deny all; }\n}\n\
         server {\n  listen 80;\n  server_name docs.example.com;\n  root /srv/docs;\n\
         \x20 location ^~ /.well-known/ { root /srv/docs-acme; }\n  location ~ /\\. { deny all; }\n}\n\
         server {\n  listen 80;\n  server_name legacy.example.com;\n  root /srv/legacy;\n\
         \x20 location ~ ^/(?!\\.well-known/) { return 301 https://$host$request_uri; }\n}\n",
    )
    .unwrap();
    let nginx = support::webserver::Nginx::binary().unwrap();
    let out = std::process::Command::new(nginx)
        .arg("-p")
        .arg(&etc)
        .arg("-c")
        .arg(etc.join("nginx.conf"))
        .arg("-e")
        .arg(env.path("error.log"))
        .arg("-T")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dump = env.path("nginx-T.txt");
    fs::write(&dump, &out.stdout).unwrap();

    Layout {
        dump,
        etc,
        shop_cert,
    }
}

/// Real `nginx -T` of a Debian-style layout (nginx.conf, conf.d, sites-enabled, a default
/// server, several listens, http2, shared certificate files, a site without TLS, a proxied
/// site, a regular-expression name, regular-expression locations) read by `discover`, written as fragments that the
/// configuration accepts through `include`.
#[test]
fn discover_reads_a_real_nginx_dump_and_writes_fragments_the_config_includes() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let Layout {
        dump,
        etc,
        shop_cert,
    } = nginx_layout(&env);
    let p = |x: &Path| x.display().to_string();
    let d = agent_discover(&env, &["--from", &p(&dump)]);
    let shop = proposal(&d, "shop.example.com");
    assert_eq!(
        shop["domains"],
        serde_json::json!(["shop.example.com", "www.shop.example.com"])
    );
    assert_eq!(shop["webroot"]["shop.example.com"], "/srv/acme", "{shop:#}");
    assert_eq!(shop["cert_file"], p(&shop_cert));
    assert_eq!(shop["existing"]["self_signed"], true);
    assert_eq!(shop["existing"]["key_on_host"], true);
    let blog = proposal(&d, "blog.example.com");
    assert_eq!(
        blog["domains"],
        serde_json::json!(["blog.example.com", "news.example.com"]),
        "one shared file, one certificate"
    );
    assert_eq!(blog["vhosts"].as_array().unwrap().len(), 2);
    // The dump's own nginx (its main file is not the system's) and where its TLS server
    // answers: what `renew` tests, reloads and shakes hands with.
    let main = p(&etc.join("nginx.conf"));
    assert_eq!(
        shop["configtest_command"],
        serde_json::json!(["nginx", "-t", "-c", main]),
        "{shop:#}"
    );
    assert_eq!(
        shop["reload_command"],
        serde_json::json!(["nginx", "-s", "reload", "-c", main])
    );
    assert!(shop.get("verify_address").is_none(), "443: the default");
    assert_eq!(blog["verify_address"], "127.0.0.1:8443", "{blog:#}");
    assert_eq!(blog["existing"]["self_signed"], false);
    assert!(
        blog["existing"]["issuer"]
            .as_str()
            .unwrap()
            .contains("Discover Test CA")
    );
    assert_eq!(
        blog["webroot"]["blog.example.com"], "/var/www/html",
        "port 80 default server"
    );
    let app = proposal(&d, "app.example.com");
    assert!(
        app["notes"].to_string().contains("passed on (proxy_pass)"),
        "{app:#}"
    );
    let plain = proposal(&d, "plain.example.com");
    assert_eq!(plain["webroot"]["plain.example.com"], "/srv/plain");
    let dotfiles = etc.join("sites-enabled/dotfiles");
    let static_site = proposal(&d, "static.example.com");
    assert!(
        static_site["webroot"].get("static.example.com").is_none(),
        "{static_site:#}"
    );
    let notes = static_site["notes"].to_string();
    assert!(
        notes.contains(&format!("`location ~ /\\\\.` at {}:8", p(&dotfiles)))
            && notes.contains("deny all"),
        "the denying location is named: {notes}"
    );
    let docs = proposal(&d, "docs.example.com");
    assert_eq!(
        docs["webroot"]["docs.example.com"], "/srv/docs-acme",
        "`^~` wins over the regular expression: {docs:#}"
    );
    let legacy = proposal(&d, "legacy.example.com");
    let notes = legacy["notes"].to_string();
    assert!(
        notes.contains("unknown")
            && notes.contains(&format!("at {}:21", p(&dotfiles)))
            && notes.contains("(?!"),
        "a lookahead is not evaluated, and says so: {notes}"
    );
    let legacy_vhost = d["vhosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["names"][0] == "legacy.example.com")
        .unwrap();
    assert!(
        legacy_vhost["validation"]["unknown"].is_string(),
        "{legacy_vhost:#}"
    );
    let skipped = d["skipped"].to_string();
    assert!(
        skipped.contains("regular expression") && skipped.contains("catch-all"),
        "{skipped}"
    );

    // One file per certificate, accepted by the configuration through `include`.
    let conf_d = env.path("conf.d");
    agent_discover(
        &env,
        &[
            "--from",
            &p(&dump),
            "--write",
            &p(&conf_d),
            "--product-id",
            "1101",
        ],
    );
    let mut files: Vec<String> = fs::read_dir(&conf_d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "app.example.com.toml",
            "blog.example.com.toml",
            "docs.example.com.toml",
            "legacy.example.com.toml",
            "plain.example.com.toml",
            "shop.example.com.toml",
            "static.example.com.toml"
        ]
    );
    fs::write(
        conf_d.join("shop.example.com.toml"),
        "# edited by the operator\n",
    )
    .unwrap();
    agent_discover(
        &env,
        &[
            "--from",
            &p(&dump),
            "--write",
            &p(&conf_d),
            "--product-id",
            "1101",
        ],
    );
    assert_eq!(
        fs::read_to_string(conf_d.join("shop.example.com.toml")).unwrap(),
        "# edited by the operator\n",
        "an existing file is kept"
    );
    agent_discover(
        &env,
        &[
            "--from",
            &p(&dump),
            "--write",
            &p(&conf_d),
            "--product-id",
            "1101",
            "--force",
        ],
    );
    let blog_file = fs::read_to_string(conf_d.join("blog.example.com.toml")).unwrap();
    assert!(
        blog_file.contains("verify_address = \"127.0.0.1:8443\"")
            && blog_file.contains(&format!(
                "configtest_command = [\"nginx\", \"-t\", \"-c\", \"{main}\"]"
            )),
        "{blog_file}"
    );
    env.agent_extra = format!("include = [\"{}/*.toml\"]\n", p(&conf_d));
    let out = env.agent(["--json", "config", "check"]).run();
    out.expect_code(0);
    let text = out.text();
    for name in [
        "shop.example.com",
        "blog.example.com",
        "app.example.com",
        "plain.example.com",
    ] {
        assert!(text.contains(name), "{name} configured: {text}");
    }
    // Now configured: not written again.
    fs::remove_file(conf_d.join("app.example.com.toml")).unwrap();
    agent_discover(
        &env,
        &[
            "--from",
            &p(&dump),
            "--write",
            &p(&env.path("again")),
            "--product-id",
            "1101",
        ],
    );
    let again: Vec<_> = fs::read_dir(env.path("again"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(again, [std::ffi::OsString::from("app.example.com.toml")]);

    // A damaged dump is an error naming the file and line, not a panic.
    let broken = env.path("broken.txt");
    fs::write(
        &broken,
        format!(
            "# configuration file {}/nginx.conf:\nhttp {{\n  server {{\n",
            p(&etc)
        ),
    )
    .unwrap();
    let out = env.agent(["discover", "--from", &p(&broken)]).run();
    out.expect_failure();
    assert!(out.text().contains("nginx.conf line 2"), "{}", out.text());
}

/// The top of an Apache configuration under `root` with the modules the tests use (loaded
/// unless compiled in).
fn apache_base(root: &Path) -> String {
    let p = |x: &Path| x.display().to_string();
    let modules = support::webserver::Apache::modules_dir().unwrap();
    let binary = support::webserver::Apache::binary().unwrap();
    let compiled = String::from_utf8_lossy(
        &std::process::Command::new(&binary)
            .arg("-l")
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    let mut conf = format!(
        "ServerRoot {r}\nServerName localhost\nPidFile {r}/httpd.pid\nDefaultRuntimeDir {r}\n\
         ErrorLog {r}/error.log\n",
        r = p(root)
    );
    for (name, source) in [
        ("mpm_event", "event.c"),
        ("unixd", "mod_unixd.c"),
        ("authz_core", "mod_authz_core.c"),
        ("alias", "mod_alias.c"),
        ("rewrite", "mod_rewrite.c"),
        ("ssl", "mod_ssl.c"),
    ] {
        let file = modules.join(format!("mod_{name}.so"));
        if !compiled.contains(source) && file.is_file() {
            conf.push_str(&format!("LoadModule {name}_module {}\n", p(&file)));
        }
    }
    conf
}

/// Real `apache2 -S` of a Debian-style layout (sites-enabled, `IfModule`, a redirecting
/// port 80, SSLCertificateChainFile, a site inheriting the main server's DocumentRoot and
/// certificate) read by `discover`.
#[test]
fn discover_reads_a_real_apache_listing() {
    if !require(Server::Apache) {
        return;
    }
    let env = TestEnv::new();
    let root = env.path("etc/apache2");
    let ssl = env.path("etc/ssl");
    for d in [root.join("sites-enabled"), root.join("run"), ssl.clone()] {
        fs::create_dir_all(d).unwrap();
    }
    let (issuer, ca_pem) = ca();
    let (cert, key) = certificate(
        &ssl,
        "www",
        &["www.example.org", "example.org"],
        Some((&issuer, &ca_pem)),
    );
    fs::write(ssl.join("chain.pem"), &ca_pem).unwrap();
    let p = |x: &Path| x.display().to_string();
    let binary = support::webserver::Apache::binary().unwrap();
    let mut conf = apache_base(&root);
    // The main server's document root and certificate, inherited by virtual hosts that set
    // none (RHEL's ssl.conf sets the certificate outside any block too).
    let htdocs = root.join("htdocs");
    fs::create_dir_all(&htdocs).unwrap();
    conf.push_str(&format!(
        "DocumentRoot {}\nListen 80\n<IfModule ssl_module>\n  Listen 443\n  \
         SSLCertificateFile {}\n  SSLCertificateKeyFile {}\n</IfModule>\n\
         IncludeOptional sites-enabled/*.conf\n",
        p(&htdocs),
        p(&cert),
        p(&key)
    ));
    fs::write(root.join("apache2.conf"), conf).unwrap();
    fs::write(
        root.join("sites-enabled/inherit.conf"),
        "<VirtualHost *:80>\n  ServerName inherit.example.org\n</VirtualHost>\n\
         <VirtualHost *:443>\n  ServerName inherit.example.org\n  SSLEngine on\n</VirtualHost>\n",
    )
    .unwrap();
    fs::write(
        root.join("sites-enabled/000-default.conf"),
        "<VirtualHost *:80>\n  ServerName www.example.org\n  ServerAlias example.org\n  DocumentRoot /var/www/html\n  Redirect permanent / https://www.example.org/\n</VirtualHost>\n",
    )
    .unwrap();
    fs::write(
        root.join("sites-enabled/default-ssl.conf"),
        format!(
            "<IfModule mod_ssl.c>\n\t<VirtualHost *:443 [::]:443>\n\t\tServerName www.example.org\n\t\tServerAlias example.org\n\
             \t\tDocumentRoot /var/www/html\n\t\tSSLEngine on\n\t\tSSLCertificateFile {}\n\t\tSSLCertificateKeyFile {}\n\
             \t\tSSLCertificateChainFile {}\n\t</VirtualHost>\n</IfModule>\n",
            p(&cert),
            p(&key),
            p(&ssl.join("chain.pem"))
        ),
    )
    .unwrap();
    let out = std::process::Command::new(&binary)
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
    let file = env.path("apache-S.txt");
    fs::write(&file, &listing).unwrap();
    let d = agent_discover(&env, &["--server", "apache", "--from", &p(&file)]);
    assert_eq!(d["vhosts"].as_array().unwrap().len(), 4, "{d:#}");
    let inherit = proposal(&d, "inherit.example.org");
    assert_eq!(
        inherit["webroot"]["inherit.example.org"],
        p(&htdocs),
        "`Main DocumentRoot` of apache2 -S: {inherit:#}"
    );
    assert!(inherit["cert_file"].is_null(), "{inherit:#}");
    let notes = inherit["notes"].to_string();
    assert!(
        notes.contains("no SSLCertificateFile")
            && notes.contains(&format!(
                "{}:6",
                p(&root.join("sites-enabled/inherit.conf"))
            )),
        "the inherited certificate is to be checked by hand: {notes}"
    );
    let www = proposal(&d, "www.example.org");
    assert_eq!(
        www["domains"],
        serde_json::json!(["www.example.org", "example.org"])
    );
    assert_eq!(www["chain_file"], p(&ssl.join("chain.pem")));
    assert_eq!(www["existing"]["key_on_host"], true);
    assert!(www["notes"].to_string().contains("Redirect at"), "{www:#}");
    let fragment = env.path("frag");
    agent_discover(
        &env,
        &[
            "--server",
            "apache",
            "--from",
            &p(&file),
            "--write",
            &p(&fragment),
        ],
    );
    let text = fs::read_to_string(fragment.join("www.example.org.toml")).unwrap();
    assert!(
        text.contains(&format!("cert_path = \"{}\"", p(&cert))) && text.contains("chain_path"),
        "{text}"
    );
    assert!(text.contains("# To do: www.example.org: port 80"), "{text}");
}

/// `discover --account` against an account holding a covering order (adopted, so `renew`
/// orders nothing for that site), an expired one, a cancelled one and a partially covering
/// one (each passed over with the reason, and a product with its price proposed instead).
#[test]
fn discover_with_the_account_adopts_covering_orders_and_renew_pays_nothing_for_them() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    env.allow_orders = false;
    let layout = nginx_layout(&env);
    let p = |x: &Path| x.display().to_string();
    let covering = issued_elsewhere_by_email(&env, "plain.example.com");
    let expired = issued_elsewhere_by_email(&env, "app.example.com");
    env.sandbox.age_certificate(expired, -3).unwrap();
    let partial = issued_elsewhere_by_email(&env, "blog.example.com");
    let cancelled = issued_elsewhere_by_email(&env, "www.shop.example.com");
    env.sandbox.force_status(cancelled, "annulled").unwrap();
    let billed = env.billed();
    let posts = env.order_posts();

    let d = agent_discover(&env, &["--from", &p(&layout.dump), "--account"]);
    let account = &d["account"];
    assert_eq!(
        account["plain.example.com"]["action"], "adopt",
        "{account:#}"
    );
    assert_eq!(account["plain.example.com"]["certificate_id"], covering);
    assert_eq!(account["app.example.com"]["action"], "order");
    let app = account["app.example.com"]["passed_over"].to_string();
    assert!(
        app.contains(&format!("{expired} is expired"))
            || app.contains(&format!("{expired} has ended")),
        "{account:#}"
    );
    let blog = account["blog.example.com"]["passed_over"].to_string();
    assert!(
        blog.contains(&format!(
            "{partial} (issued) does not cover news.example.com"
        )),
        "{blog}"
    );
    assert!(
        account["blog.example.com"]["price"].is_string(),
        "a product and its price: {account:#}"
    );
    let shop = account["shop.example.com"]["passed_over"].to_string();
    assert!(shop.contains(&cancelled.to_string()), "{shop}");

    let conf_d = env.path("conf.d");
    agent_discover(
        &env,
        &[
            "--from",
            &p(&layout.dump),
            "--account",
            "--write",
            &p(&conf_d),
        ],
    );
    let plain = fs::read_to_string(conf_d.join("plain.example.com.toml")).unwrap();
    assert!(
        plain.contains(&format!("certificate_id = {covering}")),
        "{plain}"
    );
    env.agent_extra = format!("include = [\"{}/*.toml\"]\n", p(&conf_d));
    env.write_config();
    let out = env
        .agent([
            "--json",
            "renew",
            "--name",
            "plain.example.com",
            "--wait",
            "5",
        ])
        .run();
    let rec = env.record("plain.example.com").expect("a record");
    assert_eq!(
        rec["order"]["certificate_id"],
        covering,
        "{}\n{rec:#}",
        out.describe()
    );
    assert_eq!(rec["order"]["adopted"], true);
    assert_eq!(env.order_posts(), posts, "no order placed");
    assert_eq!(env.billed(), billed, "nothing billed");
}

/// `placeholder NAME` writes a self-signed certificate and key where none of NAME's files
/// exist (never over a real file), `status` shows it, and `snippet NAME` prints nginx lines
/// that the real `nginx -t` accepts with those files.
#[test]
fn placeholder_and_snippet_make_a_site_nginx_accepts() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let mut spec = env.cert_spec(
        "shop",
        &["shop.example.com", "www.shop.example.com"],
        "nginx",
    );
    spec.publish = support::env::Publish::Webroot(env.path("www"));
    let files = spec.files.clone();
    env.certs.push(spec);
    let out = env.agent(["placeholder", "shop"]).run();
    out.expect_code(0);
    let key = files.key.clone();
    let fullchain = files.fullchain.clone().unwrap();
    let leaf = support::env::Leaf::from_pem_file(&fullchain);
    assert_eq!(
        support::env::key_spki(&key),
        leaf.spki,
        "the placeholder's key belongs to its certificate"
    );
    assert_eq!(
        fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let status = env.agent(["status"]).run();
    assert!(status.text().contains("placeholder"), "{}", status.text());
    let again = env.agent(["placeholder", "shop"]).run();
    again.expect_code(0);
    assert!(again.text().contains("exist already"), "{}", again.text());
    assert_eq!(
        support::env::Leaf::from_pem_file(&fullchain).serial,
        leaf.serial,
        "never replaced"
    );
    // Partly there: nothing is touched.
    fs::remove_file(&key).unwrap();
    let partial = env.agent(["placeholder", "shop"]).run();
    partial.expect_failure();
    assert!(
        partial.text().contains("nothing was changed"),
        "{}",
        partial.text()
    );
    assert!(!key.exists());
    env.agent(["placeholder", "shop"]).run();
    fs::remove_file(&fullchain).unwrap();
    fs::remove_file(&key).ok();
    env.agent(["placeholder", "shop"]).run().expect_code(0);

    let snippet = env.agent(["snippet", "shop"]).run();
    snippet.expect_code(0);
    let text = snippet.stdout.clone();
    assert!(
        text.contains("location ^~ /.well-known/pki-validation/"),
        "{text}"
    );
    assert!(
        text.contains(&format!("ssl_certificate     {}", fullchain.display())),
        "{text}"
    );
    let prefix = env.path("nginx-t");
    fs::create_dir_all(&prefix).unwrap();
    let conf = prefix.join("nginx.conf");
    fs::write(
        &conf,
        format!(
            "pid {p}/nginx.pid;\nevents {{}}\nhttp {{\n  access_log {p}/access.log;\n{text}\n}}\n",
            p = prefix.display()
        ),
    )
    .unwrap();
    let t = std::process::Command::new(support::webserver::Nginx::binary().unwrap())
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(prefix.join("error.log"))
        .arg("-t")
        .output()
        .unwrap();
    assert!(
        t.status.success(),
        "nginx -t: {}\n{text}",
        String::from_utf8_lossy(&t.stderr)
    );
}

/// `issue` writes a placeholder for every other configured web server certificate whose files
/// are all missing (the web server's configuration test reads every site's files).
#[test]
fn issue_writes_placeholders_for_sites_without_files() {
    let mut env = TestEnv::new();
    let a = env.standalone_spec("a", &["a.example.com"]);
    env.certs.push(a);
    let mut b = env.cert_spec("b", &["b.example.com"], "nginx");
    b.publish = support::env::Publish::Webroot(env.path("www"));
    let b_key = b.files.key.clone();
    env.certs.push(b);
    env.allow_orders = false;
    env.agent(["issue", "a", "--yes", "--wait", "30"])
        .run()
        .expect_code(0);
    assert!(b_key.exists(), "b got a placeholder");
    let rec = env.record("b").expect("b's record");
    assert!(rec["placeholder"]["serial"].is_string(), "{rec:#}");
    assert!(env.record("a").unwrap()["installed"]["serial"].is_string());
}

/// `snippet` for an Apache certificate (separate chain file) with its placeholder: the real
/// `apache2 -t` accepts the lines.
#[test]
fn an_apache_snippet_with_its_placeholder_passes_the_config_test() {
    if !require(Server::Apache) {
        return;
    }
    let mut env = TestEnv::new();
    let mut spec = env.cert_spec("www", &["www.example.org", "example.org"], "apache");
    spec.publish = support::env::Publish::Webroot(env.path("www"));
    env.certs.push(spec);
    env.agent(["placeholder", "www"]).run().expect_code(0);
    let snippet = env.agent(["snippet", "www"]).run();
    snippet.expect_code(0);
    let text = snippet.stdout.clone();
    assert!(text.contains("SSLCertificateChainFile"), "{text}");
    let root = env.path("apache-t");
    fs::create_dir_all(&root).unwrap();
    let conf = root.join("apache2.conf");
    fs::write(
        &conf,
        format!("{}Listen 80\nListen 443\n{text}", apache_base(&root)),
    )
    .unwrap();
    let t = std::process::Command::new(support::webserver::Apache::binary().unwrap())
        .arg("-d")
        .arg(&root)
        .arg("-f")
        .arg(&conf)
        .arg("-t")
        .output()
        .unwrap();
    assert!(
        t.status.success(),
        "apache2 -t: {}{}\n{text}",
        String::from_utf8_lossy(&t.stdout),
        String::from_utf8_lossy(&t.stderr)
    );
}
