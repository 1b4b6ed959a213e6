//! The stored encoding of one fact, shared by the archive's blocks and the
//! tape's `facts_sha256`: one version byte, then MessagePack with field
//! names (`rmp_serde` `write_named`), so reordering a struct never breaks
//! an old archive or tape digest.

use crate::fact::Fact;

/// Fact encoding version.
pub const FACT_VERSION: u8 = 1;

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

/// Parses `sha256:<64 hex>` into raw bytes.
pub fn parse_digest(digest: &str) -> Option<Digest> {
    let hex_part = digest.strip_prefix("sha256:")?;
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_part, &mut out).ok()?;
    Some(out)
}
