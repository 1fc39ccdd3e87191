//! The keys of a `[[certificate]]`, which `[defaults]` may also set unless declared
//! `per_certificate`.

use super::{Key, Kind, Part, Section};

keys! { Section::Certificate(Part::Order) => CERTIFICATE_ORDER {
    CERT_NAME {
        name: "name",
        kind: Kind::String,
        default: "— (required)",
        per_certificate: true,
        doc: "1 to 64 letters, digits, `.`, `_`, `-`, starting with a letter or digit; \
            unique. Names the state file, the key directory, the default install \
            directory and `--name`",
    }
    CERT_DOMAINS {
        name: "domains",
        kind: Kind::Other("array of strings"),
        default: "— (required)",
        per_certificate: true,
        doc: "at least one; the **first is the common name**; lower-cased; no duplicates. \
            Each: labels of 1–63 letters, digits and `-` (not at either end), at least \
            two labels, at most 253 characters, no trailing dot, no IP address, a \
            wildcard only as the whole first label (`*.example.com`); international \
            names in `xn--` form",
    }
    CERT_ISSUER {
        name: "issuer",
        kind: Kind::String,
        default: "`\"partner\"`",
        doc: "where the certificate comes from: `partner` (the Partner API of `[api]`) or \
            the `NAME` of an `[acme.NAME]` table (`acme:NAME` is read the same). A \
            certificate of an ACME CA needs no `product_id`, `country`, `region` or \
            `city`, is validated by `dcv = \"http\"` (`http-01`) or `\"dns-txt\"` \
            (`dns-01` through `dns_hook`, the only way for a wildcard), and refuses the \
            Partner-only keys `certificate_id`, `family`, `unique_value` and \
            `cname_target_domain`",
    }
    CERT_PROFILE {
        name: "profile",
        kind: Kind::String,
        default: "the CA's `profile`",
        doc: "the ACME profile this certificate asks for (certificates of an ACME CA only)",
    }
    CERT_PRODUCT_ID {
        name: "product_id",
        kind: Kind::Int { min: 1, max: i64::MAX as u64, default: None },
        default: "— (required for the Partner API)",
        doc: "the `ID` column of `cert-agent products` (the API's `nomenclature_id`)",
    }
    CERT_CERTIFICATE_ID {
        name: "certificate_id",
        kind: Kind::Int { min: 1, max: i64::MAX as u64, default: None },
        default: "none",
        per_certificate: true,
        doc: "an order the account already has (placed on the web site or by another tool; \
            `cert-agent discover --account` finds them): while the certificate has no \
            order of its own, `renew` adopts this one (as [`cert-agent \
            adopt`](commands.md#cert-agent-adopt) does) instead of placing a new, billed \
            order. Ignored once the certificate has an order",
    }
    CERT_DAYS {
        name: "days",
        kind: Kind::Int { min: 60, max: 2200, default: Some(365) },
        doc: "The subscription length ordered (365 one year, 730 two years). Each \
            certificate lives at most about 200 days; free reissues cover the rest",
    }
    CERT_FAMILY {
        name: "family",
        kind: Kind::Choice {
            options: &["S", "D", "C"],
            default: None,
        },
        default: "none",
        doc: "`S`, `D` or `C`: the CA family of the product's issuer (the `ISSUER` column of `products`; \
            which issuer belongs to which family is the reseller's information — in the \
            sandbox `s-one`/`s-two` are S, `d-one` D, `c-one` C). Enables the family's \
            rules: C always gets a new key (`reuse_key = true` is an error); S \
            cross-checks the CSR hashes of the DCV status and refuses to reissue a \
            DNS-TXT-validated certificate with the same method. See \
            [renewal](renewal.md#ca-families)",
    }
    CERT_SSL_SERVER_SOFTWARE_ID {
        name: "ssl_server_software_id",
        kind: Kind::Int { min: 0, max: i64::MAX as u64, default: Some(0) },
        doc: "0 lets the service choose; other values from `cert-agent software \
            PRODUCT_ID`",
    }
    CERT_COUNTRY {
        name: "country",
        kind: Kind::String,
        default: "— (required here or in `[defaults]` for the Partner API)",
        doc: "ISO 3166-1 alpha-2, upper case (`\"DE\"`)",
    }
    CERT_REGION {
        name: "region",
        kind: Kind::String,
        default: "— (required here or in `[defaults]`)",
        doc: "not empty",
    }
    CERT_CITY {
        name: "city",
        kind: Kind::String,
        default: "— (required here or in `[defaults]`)",
        doc: "not empty",
    }
    CERT_ORGANIZATION_NAME {
        name: "organization_name",
        kind: Kind::String,
        default: "none",
        doc: "not empty when set; organisation data for OV/EV products",
    }
    CERT_ORGANIZATIONAL_UNIT {
        name: "organizational_unit",
        kind: Kind::String,
        default: "none",
        doc: "not empty when set; organisation data for OV/EV products",
    }
    CERT_ADDRESS_1 {
        name: "address_1",
        kind: Kind::String,
        default: "none",
        doc: "not empty when set; organisation data for OV/EV products",
    }
    CERT_ADDRESS_2 {
        name: "address_2",
        kind: Kind::String,
        default: "none",
        doc: "not empty when set; organisation data for OV/EV products",
    }
    CERT_ZIP_CODE {
        name: "zip_code",
        kind: Kind::String,
        default: "none",
        doc: "not empty when set; organisation data for OV/EV products",
    }
    CERT_UNIQUE_VALUE {
        name: "unique_value",
        kind: Kind::String,
        default: "none",
        doc: "at most 20 letters and digits; family S request-token value (generated by \
            the service when absent)",
    }
}}

keys! { Section::Certificate(Part::Key) => CERTIFICATE_KEY {
    CERT_KEY_TYPE {
        name: "key_type",
        kind: Kind::Choice {
            options: &["ecdsa-p256", "ecdsa-p384", "rsa-2048", "rsa-3072", "rsa-4096"],
            default: Some("ecdsa-p256"),
        },
    }
    CERT_REUSE_KEY {
        name: "reuse_key",
        kind: Kind::Bool { default: false },
        doc: "reissue with the installed key instead of a new one. Rejected together with \
            `family = \"C\"`",
    }
}}

keys! { Section::Certificate(Part::Dcv) => CERTIFICATE_DCV {
    CERT_DCV {
        name: "dcv",
        kind: Kind::Choice {
            options: &["http", "https", "cname", "dns-txt", "email"],
            default: Some("http"),
        },
        doc: "`http` (HTTP_CSR_HASH), `https` (HTTPS_CSR_HASH; family S, others treat it \
            as http), `cname` (CNAME_CSR_HASH), `dns-txt` (DNS_TXT_TOKEN), `email` \
            (EMAIL)",
    }
    CERT_WEBROOT {
        name: "webroot",
        kind: Kind::Other("path, or table of domain = path"),
        default: "none",
        doc: "for `http`/`https`: the document root serving the domains. A table must name \
            every domain of the certificate and no other",
    }
    CERT_STANDALONE {
        name: "standalone",
        kind: Kind::Bool { default: false },
        doc: "for `http`/`https`: serve the file from cert-agent's built-in server instead \
            of a webroot",
    }
    CERT_LISTEN {
        name: "listen",
        kind: Kind::String,
        default: "`\"0.0.0.0:80\"`",
        doc: "`address:port` of the built-in server",
    }
    CERT_DNS_HOOK {
        name: "dns_hook",
        kind: Kind::Command,
        default: "none",
        doc: "for `dns-txt` and `cname`: the program that adds and removes DNS records, \
            see [DNS hooks](dns-hooks.md)",
    }
    CERT_CNAME_TARGET_DOMAIN {
        name: "cname_target_domain",
        kind: Kind::String,
        default: "none",
        doc: "for `cname`: the CA's validation domain that the CNAME targets end in \
            (published by the CA; the API does not report it). A domain name. Without it \
            the run prints the records to create",
    }
    CERT_DCV_EMAIL {
        name: "dcv_email",
        kind: Kind::String,
        default: "none",
        doc: "for `email`: an address from `cert-agent dcv emails DOMAIN`",
    }
}}

keys! { Section::Certificate(Part::Install) => CERTIFICATE_INSTALL {
    CERT_SERVER {
        name: "server",
        kind: Kind::Choice {
            options: &["nginx", "apache", "none"],
            default: Some("nginx"),
        },
        doc: "`nginx`, `apache` or `none`: the file layout, the default commands and \
            verification",
    }
    CERT_CERT_PATH {
        name: "cert_path",
        kind: Kind::Path,
        default: "per `server`",
        per_certificate: true,
        doc: "the leaf certificate alone",
    }
    CERT_CHAIN_PATH {
        name: "chain_path",
        kind: Kind::Path,
        default: "per `server`",
        per_certificate: true,
        doc: "the intermediate certificates alone",
    }
    CERT_FULLCHAIN_PATH {
        name: "fullchain_path",
        kind: Kind::Path,
        default: "per `server`",
        per_certificate: true,
        doc: "leaf followed by the intermediates",
    }
    CERT_KEY_PATH {
        name: "key_path",
        kind: Kind::Path,
        default: "per `server`",
        per_certificate: true,
        doc: "the private key; must differ from the three certificate paths",
    }
    CERT_COMBINED_PATH {
        name: "combined_path",
        kind: Kind::Path,
        default: "none",
        per_certificate: true,
        doc: "one file holding the private key followed by the full chain, with the key's \
            owner and mode; switched with a single rename, so a reader never sees a key \
            and a certificate that do not belong together \
            ([nginx](nginx.md#one-file-for-key-and-certificate), \
            [apache](apache.md#one-file-for-key-and-certificate)). When set, only the \
            configured paths are written (no default files for `server`), and `server = \
            \"none\"` needs no `key_path`. Must differ from the four other paths",
    }
    CERT_OWNER {
        name: "owner",
        kind: Kind::String,
        default: "kept from the replaced file, else the agent's user",
        doc: "user name or numeric uid of every installed file",
    }
    CERT_GROUP {
        name: "group",
        kind: Kind::String,
        default: "kept from the replaced file, else the agent's group",
        doc: "group name or numeric gid of every installed file",
    }
    CERT_MODE {
        name: "mode",
        kind: Kind::Other("string or octal integer"),
        default: "kept from the replaced key file, else `0600` (`0640` with `group`)",
        doc: "permission bits of the **key file**, `\"0640\"` or `0o640`; bits for others \
            are rejected (`0644 gives others access to the private key`); a decimal \
            integer is rejected (`write the mode in octal`)",
    }
    CERT_CONFIGTEST_COMMAND {
        name: "configtest_command",
        kind: Kind::Command,
        default: "per `server`",
        doc: "run once per web server after the files are switched, before the reload",
    }
    CERT_RELOAD_COMMAND {
        name: "reload_command",
        kind: Kind::Command,
        default: "per `server`",
        doc: "makes the server load the new files",
    }
    CERT_DEPLOY_HOOK {
        name: "deploy_hook",
        kind: Kind::Command,
        default: "none",
        doc: "run after a successful install, see [commands](commands.md#deploy-hook)",
    }
    CERT_VERIFY_ADDRESS {
        name: "verify_address",
        kind: Kind::String,
        default: "`\"127.0.0.1:443\"`, none for `server = \"none\"`",
        doc: "`host:port` for a TLS handshake after the reload (SNI = the common name) \
            that must show the new serial; `\"\"` disables the check",
    }
    CERT_CHAIN_TRUST {
        name: "chain_trust",
        kind: Kind::Choice {
            options: &["system", "ca_file", "none"],
            default: Some("system"),
        },
        doc: "what the chain of a Partner API certificate (downloaded, or the fleet's) \
            must end at before it is installed: `system` — a root of the system's store \
            (`SSL_CERT_FILE`, else the first of `/etc/ssl/certs/ca-certificates.crt`, \
            `/etc/pki/tls/certs/ca-bundle.crt`, `/etc/ssl/ca-bundle.pem`, \
            `/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem`, `/etc/ssl/cert.pem`) or \
            of `api.ca_file`; `ca_file` — of `api.ca_file` alone; `none` — any root \
            (links and signatures only). See [security](security.md#certificate-bundles)",
    }
}}
