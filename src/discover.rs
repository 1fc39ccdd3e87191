//! `cert-agent discover`: the sites a web server already serves, read from what the server
//! itself reports (`nginx -T`; `apachectl -S` and the files it names), turned into proposed
//! `[[certificate]]` entries that keep the site's existing paths, so that no web server
//! configuration has to change.
//!
//! - `model.rs`: what is read and proposed (virtual hosts, proposals, names left out);
//! - `nginx/`: the `nginx -T` dump, its directives and `server` blocks;
//! - `apache_listing.rs`: the `apachectl -S` listing (names and where each virtual host is);
//!   `apache.rs`: each `<VirtualHost>` block; `apache_macro.rs`: blocks a mod_macro `Use`
//!   makes; `apache_account.rs`: every listed name proposed or left out with the reason;
//! - `propose.rs`: virtual hosts into proposals; `existing.rs`: the certificate served today;
//! - `fragment.rs`: a proposal as a configuration file;
//! - the command's steps: `dump.rs` (the server's report, run or read), `account.rs`
//!   (`--account`: proposals matched against the account's orders), `write.rs` (`--write`),
//!   `render.rs` (the text and JSON reports), `orphans.rs` (configured certificates no virtual
//!   host serves any more), `loaded.rs` (every file the server names for TLS, for `retire`).
//!
//! Virtual hosts that share one certificate file become one proposal; names that cannot be
//! managed (regular expressions, wildcards, `_`, IP addresses, variables) are listed with the
//! reason. Reading a dump never panics: a malformed one is an error naming file and line.

mod account;
mod apache;
mod apache_account;
mod apache_listing;
mod apache_macro;
mod dump;
mod existing;
mod fragment;
mod loaded;
mod model;
mod nginx;
mod orphans;
mod propose;
mod render;
mod write;

pub(crate) use account::{Match, match_account};
pub use dump::Server;
pub(crate) use dump::{DumpError, ask_with, read_dump, report_argv};
pub use fragment::fragment_unchanged;
pub use loaded::loaded_files;
pub(crate) use loaded::loaded_files_with;
pub(crate) use model::{
    At, DiscoverError, Discovery, Existing, Listen, NamedFile, Proposal, Skipped, VALIDATION_ROOT,
    Validation, Vhost,
};
pub(crate) use orphans::{Orphan, orphans};
use propose::propose;
pub(crate) use render::{Report, log_validation_counts, orphans_text, report_text};
pub(crate) use write::{WriteOptions, configured_as, write_fragments};

/// The plain-HTTP port the CA fetches validation files from (HTTP_CSR_HASH).
pub(crate) const HTTP_PORT: u16 = 80;

/// Reads the report of `server` (an `nginx -T` dump or an `apachectl -S` listing), the
/// validation reaching this web server on `http_port` ([`HTTP_PORT`], or another port for a
/// trial behind a port mapping, or the sandbox's validation port): the plain-HTTP servers
/// listening there give each name's document root, and the notes name that port.
pub(crate) fn read(server: Server, text: &str, http_port: u16) -> Result<Discovery, DiscoverError> {
    match server {
        Server::Nginx => nginx_on(text, http_port),
        Server::Apache => apache_from(text, http_port, |path| {
            std::fs::read_to_string(path).map_err(|e| crate::fsutil::io_text(&e))
        }),
    }
}

/// nginx's main configuration file where the system's nginx reads it.
pub(crate) const NGINX_SYSTEM_MAIN: &str = "/etc/nginx/nginx.conf";

/// Reads an `nginx -T` dump. A dump of an nginx started with another main file (`-c`) gives
/// proposals whose configuration test and reload name that file, so that `renew` tests and
/// reloads that nginx, not the system's.
pub fn nginx(dump: &str) -> Result<Discovery, DiscoverError> {
    nginx_on(dump, HTTP_PORT)
}

fn nginx_on(dump: &str, http_port: u16) -> Result<Discovery, DiscoverError> {
    let mut found = propose(nginx::vhosts(dump)?, http_port);
    if let Some(main) = nginx::main_file(dump)
        && main != NGINX_SYSTEM_MAIN
        && main.starts_with('/')
        && !main.chars().any(char::is_control)
    {
        for p in &mut found.proposals {
            p.configtest_command = Some(["nginx", "-t", "-c", &main].map(str::to_owned).to_vec());
            p.reload_command = Some(
                ["nginx", "-s", "reload", "-c", &main]
                    .map(str::to_owned)
                    .to_vec(),
            );
        }
    }
    Ok(found)
}

/// Reads an `apachectl -S` listing and the `<VirtualHost>` blocks of the files it names, read
/// by `read` (path to content, or why not), the validation reaching the server on `http_port`.
pub fn apache_from(
    listing: &str,
    http_port: u16,
    read: impl FnMut(&str) -> Result<String, String>,
) -> Result<Discovery, DiscoverError> {
    let mut files = apache_macro::Files::new(read);
    let main_root = apache::main_document_root(listing);
    let listed = apache_listing::listed(listing)?;
    let mut vhosts = Vec::new();
    let mut unread = Vec::new();
    let mut made = Vec::new();
    for (i, l) in listed.iter().enumerate() {
        match &l.origin {
            apache_listing::Origin::File(at) => {
                let text = files.text(&at.file)?;
                vhosts.push(apache::vhost(&text, at, main_root.as_deref())?);
                made.push(i);
            }
            apache_listing::Origin::Macro(m) => {
                let read = apache_macro::expand(m, &mut files).and_then(|x| {
                    apache_macro::macro_vhost(m, &x, &l.names, main_root.as_deref())
                        .map_err(|e| e.to_string())
                });
                match read {
                    Ok(v) => {
                        vhosts.push(v);
                        made.push(i);
                    }
                    Err(why) => unread.push((i, why)),
                }
            }
        }
    }
    let mut found = propose(vhosts, http_port);
    apache_account::account(&mut found, &listed, &made, &unread);
    Ok(found)
}

/// The `<VirtualHost>` block starting at `line` of `text` (the content of `file`), as
/// [`apache`] reads each one `apachectl -S` names.
pub fn apache_vhost(text: &str, file: &str, line: usize) -> Result<Vhost, DiscoverError> {
    apache::vhost(
        text,
        &At {
            file: file.to_owned(),
            line,
        },
        None,
    )
}
