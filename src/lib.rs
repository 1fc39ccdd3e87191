//! cert-agent library.
