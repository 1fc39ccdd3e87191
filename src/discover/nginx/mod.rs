//! `nginx -T`: the dump of every configuration file nginx read ("# configuration file PATH:"
//! before each), parsed into directives, with `include` followed through the dump from the
//! first file, and every `server` of the `http` block turned into a [`Vhost`](super::Vhost).
//!
//! - `lexer.rs`: the tokens of one file;
//! - `tree.rs`: the directives and their blocks, `include` followed through the dump;
//! - `server.rs`: the `server` blocks of `http` as virtual hosts;
//! - `loaded.rs`: every file the dump names for TLS, in any block;
//! - the validation path: `validation.rs` (what a server does with the CA's request),
//!   `location.rs` (which `location` nginx chooses), `rewrite.rs` (`return`, `rewrite`, `if`),
//!   `access.rs` (`allow`, `deny`, `auth_basic`), `regexes.rs` (nginx's regular expressions).

mod access;
mod lexer;
mod loaded;
mod location;
mod regexes;
mod rewrite;
mod server;
mod tree;
mod validation;

#[cfg(test)]
mod tests;

pub(super) use loaded::loaded_files;
pub(super) use server::vhosts;
pub(super) use tree::main_file;

/// The request nginx chooses a `location` for: a validation file, named by the MD5 of a CSR in
/// upper-case hexadecimal.
const PROBE: &str = concat!(
    "/.well-known/",
    crate::dcv::pki_validation!(),
    "/0123456789ABCDEF0123456789ABCDEF.txt"
);
