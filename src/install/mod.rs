//! Installing certificates: atomic, reversible file installs into web-server paths, config test, reload, verification of the served certificate, rollback.
