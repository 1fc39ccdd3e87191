//! Domain control validation: the webroot writer, the standalone HTTP server, DNS hooks and the pre-flight self-check.
