//! Reading the per-server bundle: safe in-memory ZIP unpacking and validation of what the CA sent.
