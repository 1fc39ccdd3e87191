//! `cert-agent discover`: the sites a web server already serves, read from what the server
//! itself reports (`nginx -T`; `apachectl -S` and the files it names), turned into proposed
//! `[[certificate]]` entries that keep the site's existing paths, so that no web server
//! configuration has to change.
//!
//! - `model.rs`: what is read and proposed (virtual hosts, proposals, names left out);
//! - `nginx/`: the `nginx -T` dump, its directives and `server` blocks;
//! - `apache.rs`: the `apachectl -S` listing and each `<VirtualHost>` block;
//! - `propose.rs`: virtual hosts into proposals; `existing.rs`: the certificate served today;
//! - `fragment.rs`: a proposal as a configuration file;
//! - the command's steps: `dump.rs` (the server's report, run or read), `account.rs`
//!   (`--account`: proposals matched against the account's orders), `write.rs` (`--write`),
//!   `render.rs` (the text and JSON reports).
//!
//! Virtual hosts that share one certificate file become one proposal; names that cannot be
//! managed (regular expressions, wildcards, `_`, IP addresses, variables) are listed with the
//! reason. Reading a dump never panics: a malformed one is an error naming file and line.

mod account;
mod apache;
mod dump;
mod existing;
mod fragment;
mod model;
mod nginx;
mod propose;
mod render;
mod write;

use std::collections::BTreeMap;

pub use account::{AccountError, Match, match_account};
pub use dump::{DumpError, Server, read_dump};
pub use model::{
    At, DiscoverError, Discovery, Existing, Listen, Proposal, Skipped, VALIDATION_ROOT, Validation,
    Vhost,
};
use propose::propose;
pub use render::{Report, log_validation_counts, report_text};
pub use write::{WriteError, WriteOptions, configured_as, write_fragments};

/// Reads the report of `server` (an `nginx -T` dump or an `apachectl -S` listing).
pub fn read(server: Server, text: &str) -> Result<Discovery, DiscoverError> {
    match server {
        Server::Nginx => nginx(text),
        Server::Apache => apache(text),
    }
}

/// Reads an `nginx -T` dump.
pub fn nginx(dump: &str) -> Result<Discovery, DiscoverError> {
    Ok(propose(nginx::vhosts(dump)?))
}

/// Reads an `apachectl -S` listing and the `<VirtualHost>` blocks of the files it names.
pub fn apache(listing: &str) -> Result<Discovery, DiscoverError> {
    let mut vhosts = Vec::new();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let main_root = apache::main_document_root(listing);
    for at in apache::listed(listing)? {
        if !texts.contains_key(&at.file) {
            let text = std::fs::read_to_string(&at.file).map_err(|e| {
                DiscoverError::Other(format!(
                    "{}: {} (named by apachectl -S)",
                    at.file,
                    crate::fsutil::io_text(&e)
                ))
            })?;
            texts.insert(at.file.clone(), text);
        }
        let text = texts.get(&at.file).map(String::as_str).unwrap_or_default();
        vhosts.push(apache::vhost(text, &at, main_root.as_deref())?);
    }
    Ok(propose(vhosts))
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
