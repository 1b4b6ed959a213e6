//! The stored form of a block of facts.
//!
//! ```text
//! offset  size  field
//! 0       1     block format version (1)
//! 1       4     fact count, big-endian u32
//! 5       32    digest of the run's previous block (zeros for the first)
//! 37      32    digest = sha256(bytes 0..37 ++ payload)
//! 69      ...   payload: per fact, u32 little-endian length ++ fact encoding
//! ```
//!
//! A fact's encoding is one version byte followed by
//! `rmp_serde::to_vec_named` of the fact (named fields, so reordering a
//! struct never breaks an old archive). The digest is both the block's
//! checksum and the link of the run's hash chain.

use sha2::{Digest as _, Sha256};

use crate::fact::Fact;

/// Block format version.
pub(crate) const BLOCK_VERSION: u8 = 1;
/// Fact encoding version.
pub(crate) const FACT_VERSION: u8 = 1;
pub(crate) const HEADER_LEN: usize = 69;
/// The deepest nesting a stored fact may have (the fact's own structure
/// plus its JSON payloads, which the recorder caps at
/// [`crate::redact::MAX_JSON_DEPTH`]).
pub const MAX_DECODE_DEPTH: usize = 160;

/// A sha-256 digest.
pub type Digest = [u8; 32];

/// Encodes one fact: version byte + MessagePack with field names.
pub fn encode_fact(fact: &Fact, out: &mut Vec<u8>) -> Result<(), rmp_serde::encode::Error> {
    out.push(FACT_VERSION);
    rmp_serde::encode::write_named(out, fact)
}

/// Decodes one fact written by [`encode_fact`].
pub fn decode_fact(bytes: &[u8]) -> Result<Fact, String> {
    match bytes.split_first() {
        Some((&FACT_VERSION, rest)) => {
            let mut de = rmp_serde::Deserializer::from_read_ref(rest);
            // Bounded, so that damaged or hostile bytes cannot overflow the
            // stack; the recorder caps payload nesting well below this.
            de.set_max_depth(MAX_DECODE_DEPTH);
            serde::Deserialize::deserialize(&mut de).map_err(|e| format!("fact does not decode: {e}"))
        }
        Some((v, _)) => Err(format!(
            "fact encoding version {v} is not supported by this reel (supports {FACT_VERSION}): upgrade reel"
        )),
        None => Err("empty fact encoding".into()),
    }
}

/// Builds a block from facts already encoded into `payload`.
pub(crate) fn seal(count: u32, prev: &Digest, payload: &[u8]) -> (Vec<u8>, Digest) {
    let mut value = Vec::with_capacity(HEADER_LEN + payload.len());
    value.push(BLOCK_VERSION);
    value.extend_from_slice(&count.to_be_bytes());
    value.extend_from_slice(prev);
    let mut hasher = Sha256::new();
    hasher.update(&value);
    hasher.update(payload);
    let digest: Digest = hasher.finalize().into();
    value.extend_from_slice(&digest);
    value.extend_from_slice(payload);
    (value, digest)
}

/// Appends one length-prefixed encoded fact to a block payload.
pub(crate) fn push_fact(
    payload: &mut Vec<u8>,
    fact: &Fact,
) -> Result<(), rmp_serde::encode::Error> {
    let at = payload.len();
    payload.extend_from_slice(&[0; 4]);
    encode_fact(fact, payload)?;
    let len = (payload.len() - at - 4) as u32;
    payload[at..at + 4].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

/// A block whose header and checksum were checked.
#[derive(Debug)]
pub(crate) struct OpenedBlock<'a> {
    pub count: u32,
    pub payload: &'a [u8],
}

/// Checks a stored block's header and checksum.
pub(crate) fn open(value: &[u8]) -> Result<OpenedBlock<'_>, String> {
    if value.len() < HEADER_LEN {
        return Err(format!(
            "block is {} bytes, shorter than its {HEADER_LEN}-byte header",
            value.len()
        ));
    }
    if value[0] != BLOCK_VERSION {
        return Err(format!(
            "block format version {} is not supported by this reel (supports {BLOCK_VERSION})",
            value[0]
        ));
    }
    let count = u32::from_be_bytes([value[1], value[2], value[3], value[4]]);
    let payload = &value[HEADER_LEN..];
    let mut hasher = Sha256::new();
    hasher.update(&value[..37]);
    hasher.update(payload);
    let actual: Digest = hasher.finalize().into();
    if actual[..] != value[37..69] {
        return Err("block checksum does not match its bytes".into());
    }
    Ok(OpenedBlock { count, payload })
}

/// Decodes the fact at byte `pos` of a block's payload; returns it and the
/// position of the next one.
pub(crate) fn fact_at(payload: &[u8], pos: usize) -> Result<(Fact, usize), String> {
    let rest = payload.get(pos..).unwrap_or_default();
    if rest.len() < 4 {
        return Err("block payload ends inside a length prefix".into());
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let body = rest
        .get(4..4 + len)
        .ok_or("block payload ends inside a fact")?;
    Ok((decode_fact(body)?, pos + 4 + len))
}

/// Decodes the facts of a checked block and checks their seqs run from
/// `first_seq` without a gap.
pub(crate) fn decode_facts(block: &OpenedBlock<'_>, first_seq: u64) -> Result<Vec<Fact>, String> {
    let mut facts = Vec::with_capacity(block.count as usize);
    let mut rest = block.payload;
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err("block payload ends inside a length prefix".into());
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        rest = &rest[4..];
        if rest.len() < len {
            return Err("block payload ends inside a fact".into());
        }
        let fact = decode_fact(&rest[..len])?;
        let want = first_seq + facts.len() as u64;
        if fact.seq != want {
            return Err(format!(
                "fact has seq {} where {want} was expected",
                fact.seq
            ));
        }
        facts.push(fact);
        rest = &rest[len..];
    }
    if facts.len() != block.count as usize {
        return Err(format!(
            "block header counts {} facts but holds {}",
            block.count,
            facts.len()
        ));
    }
    Ok(facts)
}
