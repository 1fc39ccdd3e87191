//! Value rules shared with the command line, which checks its arguments with them: domain
//! names, certificate names, email addresses; and which program of a configured command is
//! checked, and how.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::types::CommandLine;

/// Checks a domain name: lower-case letters, digits and hyphens in labels of 1..=63
/// characters, at least two labels, 253 characters at most, a wildcard only as the whole first
/// label (`*.example.com`), no IP address, no trailing dot.
pub(crate) fn validate_domain(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty domain name".into());
    }
    if name.len() > 253 {
        return Err(format!("{name:?} is longer than 253 characters"));
    }
    if name.ends_with('.') {
        return Err(format!("{name:?}: remove the trailing dot"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    let rest = match labels.split_first() {
        Some((&"*", rest)) => rest,
        _ => &labels[..],
    };
    if rest.len() < 2 {
        return Err(format!(
            "{name:?} is not a fully qualified name (internal names are rejected by the API)"
        ));
    }
    for label in rest {
        if label.contains('*') {
            return Err(format!(
                "{name:?}: a wildcard is allowed only as the whole first label (*.example.com)"
            ));
        }
        if label.is_empty() || label.len() > 63 {
            return Err(format!("{name:?}: each label must have 1 to 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(format!(
                "{name:?}: only lower-case letters, digits and '-' are allowed \
                 (use the xn-- form for international names)"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("{name:?}: a label cannot start or end with '-'"));
        }
    }
    if rest
        .last()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("{name:?}: IP addresses are not accepted"));
    }
    Ok(())
}

/// Checks a certificate name: 1..=64 of letters, digits, `.`, `_`, `-`, starting with a letter
/// or digit (it becomes a file name).
pub(crate) fn validate_certificate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-', \
             starting with a letter or digit"
        ))
    }
}

/// Checks an email address (local part, `@`, a valid domain).
pub(crate) fn validate_email(email: &str) -> Result<(), String> {
    match email.rsplit_once('@') {
        Some((local, domain))
            if !local.is_empty()
                && !local.chars().any(|c| c.is_whitespace() || c.is_control())
                && validate_domain(domain).is_ok()
                && !domain.starts_with("*.") =>
        {
            Ok(())
        }
        _ => Err(format!("{email:?} is not an email address")),
    }
}

/// The program of `command` that is checked: an argv's first word; for a string run by
/// `/bin/sh -c`, only a leading absolute path.
pub(super) fn program_to_check(command: &CommandLine) -> Option<&str> {
    match command {
        CommandLine::Shell(v) => v.split_whitespace().next().filter(|p| p.starts_with('/')),
        CommandLine::Argv(a) => a.first().map(String::as_str),
    }
}

/// A program path exists and is executable, or a bare name is found in `PATH` or the sbin
/// directories; otherwise why not.
pub(super) fn check_program(program: &str) -> Result<(), &'static str> {
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
    if program.contains('/') {
        let p = Path::new(program);
        if !p.is_absolute() {
            return Err("must be an absolute path or a bare program name");
        }
        return match std::fs::metadata(p) {
            Err(_) => Err("does not exist"),
            Ok(_) if executable(p) => Ok(()),
            Ok(_) => Err("is not an executable file"),
        };
    }
    crate::process::find_program(program)
        .map(|_| ())
        .ok_or("was not found in PATH or the sbin directories")
}

/// A host name as `[fleet] host` takes it: usable as an etcd key segment.
pub(crate) fn valid_host_name(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}
