//! Every file an `nginx -T` dump names for TLS, wherever it is: `http`, `stream` and `mail`
//! servers and their parents, each of several `ssl_certificate` pairs (RSA and ECDSA side by
//! side), `ssl_trusted_certificate`, client and proxy certificates, CRLs — in every file of
//! the dump. A relative path is nginx's: from the directory of the main configuration file
//! (its `-c`, the dump's first file); a variable in a path matches any name there.

use super::tree::{Directive, parse_dump};
use crate::discover::{DiscoverError, NamedFile};

/// How the TLS file directives of nginx's modules end (`ssl_certificate`,
/// `proxy_ssl_trusted_certificate`, `grpc_ssl_certificate_key`, `ssl_crl`, ...).
const FILE_DIRECTIVES: [&str; 7] = [
    "certificate",
    "certificate_key",
    "trusted_certificate",
    "client_certificate",
    "crl",
    "stapling_file",
    "password_file",
];

/// The files the dump names for TLS, each with where.
pub(crate) fn loaded_files(dump: &str) -> Result<Vec<NamedFile>, DiscoverError> {
    let parsed = parse_dump(dump)?;
    let prefix = std::path::Path::new(&parsed.main)
        .parent()
        .unwrap_or(std::path::Path::new("/"))
        .to_path_buf();
    let mut out = Vec::new();
    for path in &parsed.paths {
        if let Some(list) = parsed.files.get(path) {
            collect(list, &prefix, &mut out, 0);
        }
    }
    Ok(out)
}

fn collect(list: &[Directive], prefix: &std::path::Path, out: &mut Vec<NamedFile>, depth: usize) {
    if depth > 64 {
        return;
    }
    for d in list {
        if let Some(children) = &d.block {
            collect(children, prefix, out, depth + 1);
            continue;
        }
        let names_file =
            d.name.contains("ssl") && FILE_DIRECTIVES.iter().any(|end| d.name.ends_with(end));
        if !names_file {
            continue;
        }
        for arg in &d.args {
            if arg.starts_with("data:") || arg.starts_with("engine:") || arg.is_empty() {
                continue;
            }
            out.push(NamedFile::new(prefix, arg, d.at.clone()));
        }
    }
}
