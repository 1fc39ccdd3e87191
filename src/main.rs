//! `cert-agent` binary: parse the command line, run the command, map the outcome to the
//! documented exit codes.

fn main() {}
