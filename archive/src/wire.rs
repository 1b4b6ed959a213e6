//! The block format for other stores: the same sealed blocks, hash chain
//! and checks as the archive's own (see the `block` module), for a store
//! that keeps blocks elsewhere (the JetStream backend, `reel-nats`), and
//! for the projection of such a store back into an archive.

use reel_core::fact::Fact;

use crate::block;
use reel_core::codec::Digest;

/// A block checked and decoded.
#[derive(Debug, Clone)]
pub struct WireBlock {
    /// The digest of the stream's previous block (zeros for the first).
    pub prev: Digest,
    /// This block's digest: its checksum and the next block's `prev`.
    pub digest: Digest,
    /// Its facts, seqs gapless from the first fact's.
    pub facts: Vec<Fact>,
}

/// Seals `facts` (numbered, non-empty) into one block chained to `prev`;
/// returns the block's bytes and its digest. Exactly what the archive
/// stores for the same facts and the same `prev`.
pub fn seal_block(facts: &[Fact], prev: &Digest) -> Result<(Vec<u8>, Digest), String> {
    let mut payload = Vec::with_capacity(facts.len() * 128);
    for fact in facts {
        block::push_fact(&mut payload, fact).map_err(|e| format!("seq {}: {e}", fact.seq))?;
    }
    Ok(block::seal(facts.len() as u32, prev, &payload))
}

/// Checks a block's header and checksum and decodes its facts (seqs
/// gapless). Never panics on any bytes: damage is an error saying what.
pub fn open_block(value: &[u8]) -> Result<WireBlock, String> {
    let (prev, digest) = block::header_digests(value);
    let opened = block::open(value)?;
    let first = if opened.payload.is_empty() {
        0
    } else {
        block::fact_at(&opened.payload, 0, block::Decode::Whole)?
            .0
            .seq()
    };
    let facts = block::decode_facts(&opened, first)?;
    match (prev, digest) {
        (Some(prev), Some(digest)) => Ok(WireBlock {
            prev,
            digest,
            facts,
        }),
        _ => Err("block is shorter than its header".into()),
    }
}
