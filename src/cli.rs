//! Command-line interface: clap definitions, command handlers and output formatting.
