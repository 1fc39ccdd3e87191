//! Configuration files on disk: reading, errors naming the file, warnings about secrets, and a
//! configuration driving a real API client against the sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cert_agent::testing::api::Client;
use cert_agent::testing::config::{Config, ConfigError};
use partner_sandbox::{Sandbox, SandboxConfig};

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_missing_file_is_named() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("nope.toml");
    let e = Config::load(&path).expect_err("missing");
    assert!(matches!(e, ConfigError::Read { .. }));
    assert_eq!(
        e.to_string(),
        format!(
            "could not read configuration file {}: no such file or directory",
            path.display()
        )
    );
}

#[test]
fn problems_name_the_real_file_line_and_key() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("config.toml");
    write(
        &path,
        "[api]\nbase_url = \"https://p.example.net\"\nlogin = \"a@b.c\"\n\n[[certificate]]\n\
         name = \"www\"\ndomains = [\"www.example.com\"]\nproduct_id = 1\ncountry = \"DE\"\n\
         region = \"B\"\ncity = \"B\"\nwebrot = \"/var/www\"\n",
        0o644,
    );
    let e = Config::load(&path).expect_err("invalid");
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "{} line 12: certificate 'www': unknown key `webrot` (did you mean `webroot`?)",
            path.display()
        )),
        "{text}"
    );
}

#[test]
fn an_inline_password_in_a_readable_file_is_warned_about_twice() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("config.toml");
    let text =
        "[api]\nbase_url = \"https://p.example.net\"\nlogin = \"a@b.c\"\npassword = \"pw\"\n";
    write(&path, text, 0o644);
    let c = Config::load(&path).expect("valid");
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("line 4: [api]: `password`"));
    assert!(c.warnings[1].contains("mode 0644"));
    assert!(!c.warnings.iter().any(|w| w.contains("\"pw\"")));
    write(&path, text, 0o600);
    assert_eq!(Config::load(&path).expect("valid").warnings.len(), 1);
}

#[tokio::test]
async fn a_configuration_drives_the_client_against_the_sandbox() {
    let sandbox = Sandbox::start(SandboxConfig::default().instant(true)).expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let password = dir.path().join("password");
    write(&password, "sandbox\n", 0o600);
    let state = dir.path().join("state");
    let path = dir.path().join("config.toml");
    write(
        &path,
        &format!(
            "[api]\nbase_url = \"{}\"\nlogin = \"partner@sandbox.test\"\n\
             password_file = \"{}\"\nca_file = \"{}\"\ntimeout_secs = 20\n\n\
             [agent]\nstate_dir = \"{}\"\n",
            sandbox.base_url(),
            password.display(),
            sandbox.api_ca_path().display(),
            state.display()
        ),
        0o644,
    );
    let config = Config::load(&path).expect("valid");
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let client = Client::new(cert_agent::testing::engine::client_options(&config)).expect("client");
    let balance = client.balance().await.expect("balance");
    assert!(!balance.balance.currency.is_empty());
    assert!(state.join("token").exists());
    let rendered = config.render();
    assert!(rendered.contains(&format!("base_url = \"{}\"", sandbox.base_url())));
}
