//! Keys, CSRs, PEM/DER helpers and CSR hashes for domain control validation.
