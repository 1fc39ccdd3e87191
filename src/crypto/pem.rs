//! PEM encoding (RFC 7468: base64 in 64-character lines). Decoding is rustls-pki-types'
//! `PemObject`; it has no encoder.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `der` as a PEM block with `label` (e.g. `CERTIFICATE`), lines of 64 characters, `\n` line
/// endings, ending with a newline.
pub(crate) fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = base64(der);
    let mut out = String::with_capacity(b64.len() + b64.len() / 64 + 2 * label.len() + 40);
    out.push_str("-----BEGIN ");
    out.push_str(label);
    out.push_str("-----\n");
    // `b64` is ASCII, so splitting at any byte index is a character boundary.
    for line in b64.as_bytes().chunks(64) {
        out.extend(line.iter().map(|&b| char::from(b)));
        out.push('\n');
    }
    out.push_str("-----END ");
    out.push_str(label);
    out.push_str("-----\n");
    out
}

fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextet = |shift: u32| char::from(ALPHABET[((n >> shift) & 0x3f) as usize]);
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    #[test]
    fn base64_rfc4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected, "input {input:?}");
        }
    }

    #[test]
    fn pem_round_trips_through_pki_types() {
        let der: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let pem = pem_encode("CERTIFICATE", &der);
        assert!(pem.lines().all(|l| l.len() <= 64));
        let back = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert_eq!(back.as_ref(), der.as_slice());
    }
}
