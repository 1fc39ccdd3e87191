//! The DNS messages of the pre-flight: a query (EDNS0, DO and CD as asked) and the parts of
//! an answer the checks read (header flags, RCODE, the answer section's CNAME, CAA and RRSIG
//! records). Answers come from the network, so every length and compression pointer is
//! checked; a message that does not parse is an error naming where it broke.

/// RR type CNAME.
pub(crate) const TYPE_CNAME: u16 = 5;
/// RR type CAA (RFC 8659).
pub const TYPE_CAA: u16 = 257;
/// RR type RRSIG.
pub(crate) const TYPE_RRSIG: u16 = 46;
/// RR type A.
pub(crate) const TYPE_A: u16 = 1;
/// RR type AAAA.
pub(crate) const TYPE_AAAA: u16 = 28;
/// RR type TXT.
pub(crate) const TYPE_TXT: u16 = 16;
const TYPE_OPT: u16 = 41;
const CLASS_IN: u16 = 1;
/// RCODE SERVFAIL.
pub(crate) const RCODE_SERVFAIL: u8 = 2;
/// RCODE NXDOMAIN.
pub(crate) const RCODE_NXDOMAIN: u8 = 3;
/// Most compression pointers followed in one name (a loop ends here).
const MAX_POINTERS: usize = 32;
/// Most records read from one section.
const MAX_RECORDS: usize = 512;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the DNS answer is truncated at byte {0}")]
    Short(usize),
    #[error("the DNS answer has a name with a compression loop or a forward pointer at byte {0}")]
    BadPointer(usize),
    #[error("the DNS answer has a name longer than 255 bytes at byte {0}")]
    LongName(usize),
    #[error("the DNS answer has a label type it does not know at byte {0}")]
    BadLabel(usize),
    #[error("the DNS answer has more than {MAX_RECORDS} records in a section")]
    TooMany,
    #[error("the name '{0}' cannot be asked (empty label, label over 63 bytes or over 255 in all)")]
    BadQueryName(String),
}

/// One record of the answer section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Owner name, lower case, without the final dot.
    pub name: String,
    pub rtype: u16,
    /// The RDATA as sent, except for CNAME (the target name, decompressed, in `target`).
    pub data: Vec<u8>,
    /// A CNAME's target, or an RRSIG's signer name.
    pub target: Option<String>,
}

/// The parts of an answer the pre-flight reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub id: u16,
    pub rcode: u8,
    /// Authenticated Data: the resolver validated every record of the answer.
    pub authenticated: bool,
    /// The answer did not fit (UDP): ask again over TCP.
    pub truncated: bool,
    /// The question's name and type as echoed.
    pub question: Option<(String, u16)>,
    pub records: Vec<Record>,
    /// The authority section (SOA, NSEC and their RRSIGs of a negative answer).
    pub authority: Vec<Record>,
}

/// A query for `name`/`rtype` with recursion desired, EDNS0 (4096 bytes) with DO when
/// `dnssec_ok`, and CD when `checking_disabled`.
pub(crate) fn query(
    id: u16,
    name: &str,
    rtype: u16,
    dnssec_ok: bool,
    checking_disabled: bool,
) -> Result<Vec<u8>, WireError> {
    let mut m = Vec::with_capacity(64 + name.len());
    m.extend_from_slice(&id.to_be_bytes());
    let flags: u16 = 0x0100 | if checking_disabled { 0x0010 } else { 0 };
    m.extend_from_slice(&flags.to_be_bytes());
    for count in [1u16, 0, 0, 1] {
        m.extend_from_slice(&count.to_be_bytes());
    }
    encode_name(&mut m, name)?;
    m.extend_from_slice(&rtype.to_be_bytes());
    m.extend_from_slice(&CLASS_IN.to_be_bytes());
    // OPT: root owner, type 41, UDP size 4096, extended RCODE 0, version 0, DO flag.
    m.push(0);
    m.extend_from_slice(&TYPE_OPT.to_be_bytes());
    m.extend_from_slice(&4096u16.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    let ext: u16 = if dnssec_ok { 0x8000 } else { 0 };
    m.extend_from_slice(&ext.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    Ok(m)
}

fn encode_name(m: &mut Vec<u8>, name: &str) -> Result<(), WireError> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let bad = || WireError::BadQueryName(crate::values::text::printable(name));
    if trimmed.len() > 253 {
        return Err(bad());
    }
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(bad());
            }
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
    }
    m.push(0);
    Ok(())
}

/// Reads an answer.
pub fn parse(msg: &[u8]) -> Result<Answer, WireError> {
    let u16_at = |at: usize| -> Result<u16, WireError> {
        msg.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(WireError::Short(at))
    };
    let id = u16_at(0)?;
    let flags = u16_at(2)?;
    let qd = u16_at(4)? as usize;
    let an = u16_at(6)? as usize;
    let ns = u16_at(8)? as usize;
    if an > MAX_RECORDS || qd > MAX_RECORDS || ns > MAX_RECORDS {
        return Err(WireError::TooMany);
    }
    let mut at = 12;
    let mut question = None;
    for _ in 0..qd {
        let (name, next) = read_name(msg, at)?;
        let rtype = u16_at(next)?;
        u16_at(next + 2)?;
        question.get_or_insert((name, rtype));
        at = next + 4;
    }
    let (records, at) = read_records(msg, at, an)?;
    // The authority section is read for its signatures; a message cut after the answer
    // section still gives the answer.
    let authority = read_records(msg, at, ns)
        .map(|(r, _)| r)
        .unwrap_or_default();
    Ok(Answer {
        id,
        rcode: (flags & 0x000f) as u8,
        authenticated: flags & 0x0020 != 0,
        truncated: flags & 0x0200 != 0,
        question,
        records,
        authority,
    })
}

/// Reads `count` records from `at`; returns them and the offset after them.
fn read_records(
    msg: &[u8],
    mut at: usize,
    count: usize,
) -> Result<(Vec<Record>, usize), WireError> {
    let u16_at = |at: usize| -> Result<u16, WireError> {
        msg.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(WireError::Short(at))
    };
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        let (name, next) = read_name(msg, at)?;
        let rtype = u16_at(next)?;
        let len = u16_at(next + 8)? as usize;
        let start = next + 10;
        let data = msg.get(start..start + len).ok_or(WireError::Short(start))?;
        let target = match rtype {
            TYPE_CNAME => Some(read_name(msg, start)?.0),
            // Type covered (2), algorithm, labels, original TTL (4), expiration (4),
            // inception (4), key tag (2): the signer's name follows at 18.
            TYPE_RRSIG if len > 18 => Some(read_name(data, 18)?.0),
            _ => None,
        };
        records.push(Record {
            name,
            rtype,
            data: data.to_vec(),
            target,
        });
        at = start + len;
    }
    Ok((records, at))
}

/// Reads the name at `at`; returns it (lower case, no final dot, "" for the root) and the
/// offset after it where it sits (not where a pointer led).
fn read_name(msg: &[u8], at: usize) -> Result<(String, usize), WireError> {
    let mut name = String::new();
    let mut pos = at;
    let mut after = None;
    let mut pointers = 0;
    let mut wire_len = 1usize;
    loop {
        let len = *msg.get(pos).ok_or(WireError::Short(pos))?;
        match len & 0xc0 {
            0x00 if len == 0 => {
                return Ok((name, after.unwrap_or(pos + 1)));
            }
            0x00 => {
                let label = msg
                    .get(pos + 1..pos + 1 + len as usize)
                    .ok_or(WireError::Short(pos + 1))?;
                wire_len += 1 + len as usize;
                if wire_len > 255 {
                    return Err(WireError::LongName(at));
                }
                if !name.is_empty() {
                    name.push('.');
                }
                for &b in label {
                    match b {
                        b'.' | b'\\' => {
                            name.push('\\');
                            name.push(b as char);
                        }
                        0x21..=0x7e => name.push(b.to_ascii_lowercase() as char),
                        _ => name.push_str(&format!("\\{b:03}")),
                    }
                }
                pos += 1 + len as usize;
            }
            0xc0 => {
                let low = *msg.get(pos + 1).ok_or(WireError::Short(pos + 1))?;
                let target = (((len & 0x3f) as usize) << 8) | low as usize;
                pointers += 1;
                // Only backwards: a pointer to itself or later is a loop in the making.
                if pointers > MAX_POINTERS || target >= pos {
                    return Err(WireError::BadPointer(pos));
                }
                after.get_or_insert(pos + 2);
                pos = target;
            }
            _ => return Err(WireError::BadLabel(pos)),
        }
    }
}

#[cfg(test)]
mod tests;
