//! Configuration: the TOML contract, defaults, and validation with precise errors.
