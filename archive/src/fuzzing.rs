//! Entry points for the fuzz targets (`fuzz/`) and their seed corpus: the
//! decoders of bytes read from disk, reachable without a sled store. Not
//! part of the API; hidden from the docs.

use reel_core::fact::Fact;
use reel_core::run::RunRecord;

/// Checks a stored block (header, checksum, version, decompression) and
/// decodes its facts, numbered from 0: what a read does with a block
/// value. Never panics, whatever the bytes.
pub fn decode_block(value: &[u8]) -> Result<Vec<Fact>, String> {
    let block = crate::block::open(value)?;
    crate::block::decode_facts(&block, 0)
}

/// Seals `facts` into a block as the archive stores it (the first of its
/// stream: the previous digest is zeros).
pub fn seal_block(facts: &[Fact]) -> Vec<u8> {
    let mut payload = Vec::new();
    for fact in facts {
        // Facts are plain data: encoding cannot fail.
        crate::block::push_fact(&mut payload, fact).expect("a fact encodes");
    }
    crate::block::seal(facts.len() as u32, &[0; 32], &payload).0
}

/// Decodes a stored run record.
pub fn decode_record(bytes: &[u8]) -> Result<RunRecord, String> {
    crate::record::decode_record(bytes)
}

/// Encodes a run record as the archive stores it.
pub fn encode_record(record: &RunRecord) -> Vec<u8> {
    crate::record::encode_record(record)
}
