//! The stored form of a block of facts.
//!
//! ```text
//! offset  size  field
//! 0       1     block format version (1, 2 or 3)
//! 1       4     fact count, big-endian u32
//! 5       32    digest of the run's previous block (zeros for the first)
//! 37      32    digest = sha256(bytes 0..37 ++ stored payload)
//! 69      ...   stored payload
//! ```
//!
//! The plain payload is, per fact, a u32 little-endian length followed by
//! the fact's encoding. How it is stored depends on the version:
//!
//! ```text
//! version 1: the plain payload
//! version 2: u32 little-endian length of the plain payload
//!            ++ lz4 block compression of the plain payload
//! version 3: u32 little-endian length of the plain payload
//!            ++ one zstd frame (level 1) of the plain payload
//! ```
//!
//! [`seal`] writes version 3 when compressing makes the stored payload
//! smaller, and version 1 otherwise (a block of one small fact stays plain).
//! Version 2 is read, never written any more. Measured by `reel-bench
//! --row bytes` on the blocks of its record and agent workloads: zstd -1
//! stores 0.111 and 0.306 of the plain payload where lz4 stored 0.230 and
//! 0.491, compressing at 643 and 132 MB/s (lz4: 1540 and 221) and
//! decompressing at 3.3 and 0.6 GB/s (lz4: 5.8 and 1.7): the writer pays a
//! few percent of its time for half the bytes.
//! The digest covers the stored bytes, as they are on disk, so the checksum
//! and the hash chain are checked before anything is decompressed.
//!
//! A fact's encoding is one version byte followed by
//! `rmp_serde::to_vec_named` of the fact (named fields, so reordering a
//! struct never breaks an old archive). The digest is both the block's
//! checksum and the link of the run's hash chain.

use std::borrow::Cow;

use sha2::{Digest as _, Sha256};

use reel_core::codec::{decode_fact, decode_fact_view, encode_fact, Digest, FactView};
use reel_core::fact::Fact;

/// Block format version of a block whose payload is stored plain.
pub(crate) const BLOCK_PLAIN: u8 = 1;
/// Block format version of a block whose payload is stored lz4-compressed
/// (written by format 2; read, never written).
pub(crate) const BLOCK_LZ4: u8 = 2;
/// Block format version of a block whose payload is stored as a zstd frame.
pub(crate) const BLOCK_ZSTD: u8 = 3;
/// Whether `version` is a block format version this reel reads.
pub(crate) fn known_version(version: u8) -> bool {
    matches!(version, BLOCK_PLAIN | BLOCK_LZ4 | BLOCK_ZSTD)
}
/// Length of a block's header: version, count, previous digest, digest.
pub(crate) const HEADER_LEN: usize = 69;
/// Length of the plain payload's size that begins a compressed payload.
const PLAIN_LEN_PREFIX: usize = 4;
/// The largest plain payload a compressed block may declare. `seal` stores
/// larger payloads plain, so a larger declared size is damage (and is never
/// allocated).
const MAX_PLAIN_PAYLOAD: usize = 1 << 30;
/// The most bytes lz4 can produce from one stored byte (a match-length
/// extension byte adds at most 255), so a declared size beyond
/// `stored * LZ4_MAX_RATIO + LZ4_SLACK` cannot be what the bytes hold.
const LZ4_MAX_RATIO: u64 = 255;
/// See [`LZ4_MAX_RATIO`]: the few bytes a block's last sequence may add.
const LZ4_SLACK: u64 = 64;
/// The most bytes a zstd frame can produce from one stored byte: a zstd
/// block yields at most 128 KiB, and the smallest block (an RLE block:
/// a 3-byte header and the byte to repeat) takes 4 stored bytes, so a
/// declared size beyond `stored * ZSTD_MAX_RATIO` cannot be what the bytes
/// hold (the frame's own header only lowers the ratio).
const ZSTD_MAX_RATIO: u64 = (128 * 1024) / 4;
/// The zstd level of version 3 blocks: the fastest of the regular levels
/// (level 3, measured on the same blocks, stored 0.119 and 0.292 of them,
/// compressing a third slower on the record workload).
const ZSTD_LEVEL: i32 = 1;

thread_local! {
    /// The zstd contexts of this thread, made once (a context is a few
    /// hundred KiB of tables: making one per block cost more than
    /// compressing it). `None` when zstd could not make one (out of
    /// memory): the block is then stored plain, or reported unreadable.
    static ZSTD_COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        std::cell::RefCell::new(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok());
    static ZSTD_DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        std::cell::RefCell::new(zstd::bulk::Decompressor::new().ok());
}

/// Builds a block from facts already encoded into `payload` (see the module
/// docs for the choice between the plain and the compressed version).
pub(crate) fn seal(count: u32, prev: &Digest, payload: &[u8]) -> (Vec<u8>, Digest) {
    let mut value = Vec::with_capacity(
        HEADER_LEN + PLAIN_LEN_PREFIX + zstd::zstd_safe::compress_bound(payload.len()),
    );
    value.push(BLOCK_ZSTD);
    value.extend_from_slice(&count.to_be_bytes());
    value.extend_from_slice(prev);
    value.resize(HEADER_LEN, 0);
    if !compress_into(payload, &mut value) {
        value.truncate(HEADER_LEN);
        value[0] = BLOCK_PLAIN;
        value.extend_from_slice(payload);
    }
    let digest = digest_of(&value);
    value[37..HEADER_LEN].copy_from_slice(&digest);
    (value, digest)
}

/// Appends `payload`'s size and its zstd frame to `value`, if that is
/// shorter than `payload` and readable back (not above
/// [`MAX_PLAIN_PAYLOAD`]); returns whether it did (else `value` holds
/// bytes to drop).
fn compress_into(payload: &[u8], value: &mut Vec<u8>) -> bool {
    if payload.len() > MAX_PLAIN_PAYLOAD {
        return false;
    }
    let Ok(plain_len) = u32::try_from(payload.len()) else {
        return false;
    };
    value.extend_from_slice(&plain_len.to_le_bytes());
    let at = value.len();
    value.resize(at + zstd::zstd_safe::compress_bound(payload.len()), 0);
    let written = ZSTD_COMPRESSOR.with(|c| match c.borrow_mut().as_mut() {
        Some(c) => c.compress_to_buffer(payload, &mut value[at..]).ok(),
        None => None,
    });
    match written {
        Some(n) if PLAIN_LEN_PREFIX + n < payload.len() => {
            value.truncate(at + n);
            true
        }
        // Does not shrink, or (never, given the buffer's size) does not fit.
        _ => false,
    }
}

/// The previous digest and the digest a block's header holds, each when
/// the header is long enough to hold it (read even from a damaged block).
pub(crate) fn header_digests(value: &[u8]) -> (Option<Digest>, Option<Digest>) {
    (
        value.get(5..37).and_then(|d| d.try_into().ok()),
        value.get(37..HEADER_LEN).and_then(|d| d.try_into().ok()),
    )
}

/// The digest of a block: sha256 of its header up to the digest and of its
/// stored payload. `value` is at least 37 bytes long.
pub(crate) fn digest_of(value: &[u8]) -> Digest {
    let mut hasher = Sha256::new();
    hasher.update(&value[..37]);
    hasher.update(value.get(HEADER_LEN..).unwrap_or_default());
    hasher.finalize().into()
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
    /// The plain payload: borrowed from the stored block (version 1), or
    /// decompressed from it (versions 2 and 3).
    pub payload: Cow<'a, [u8]>,
}

/// Checks a stored block's header and checksum, and decompresses its
/// payload if it is stored compressed.
pub(crate) fn open(value: &[u8]) -> Result<OpenedBlock<'_>, String> {
    let mut plain = Vec::new();
    let (count, compressed) = open_into(value, &mut plain)?;
    Ok(OpenedBlock {
        count,
        payload: if compressed {
            Cow::Owned(plain)
        } else {
            Cow::Borrowed(&value[HEADER_LEN..])
        },
    })
}

/// [`open`], decompressing into `plain` (emptied first; its capacity is
/// reused, so a reader of many blocks allocates once): the header's count,
/// and whether the payload is in `plain` (true) or is the stored bytes after
/// the header (false: a plain block).
pub(crate) fn open_into(value: &[u8], plain: &mut Vec<u8>) -> Result<(u32, bool), String> {
    if value.len() < HEADER_LEN {
        return Err(format!(
            "block is {} bytes, shorter than its {HEADER_LEN}-byte header",
            value.len()
        ));
    }
    let version = value[0];
    if !known_version(version) {
        return Err(format!(
            "block format version {version} is not supported by this reel (supports {BLOCK_PLAIN} to {BLOCK_ZSTD})"
        ));
    }
    let count = u32::from_be_bytes([value[1], value[2], value[3], value[4]]);
    if digest_of(value)[..] != value[37..HEADER_LEN] {
        return Err("block checksum does not match its bytes".into());
    }
    let stored = &value[HEADER_LEN..];
    if version == BLOCK_PLAIN {
        return Ok((count, false));
    }
    decompress(version, stored, plain)
        .map_err(|e| format!("block payload does not decompress: {e}"))?;
    Ok((count, true))
}

/// The plain payload of a compressed block's stored payload (`version` 2:
/// lz4, 3: zstd), into `plain` (emptied first). Never allocates more than
/// the stored bytes can decompress to (nor more than [`MAX_PLAIN_PAYLOAD`]).
fn decompress(version: u8, stored: &[u8], plain: &mut Vec<u8>) -> Result<(), String> {
    plain.clear();
    let (size, compressed) = match stored.split_first_chunk::<PLAIN_LEN_PREFIX>() {
        Some((size, rest)) => (u32::from_le_bytes(*size) as usize, rest),
        None => return Err("it ends inside its size".into()),
    };
    if size > MAX_PLAIN_PAYLOAD {
        return Err(format!(
            "it declares {size} bytes, more than a block may hold ({MAX_PLAIN_PAYLOAD})"
        ));
    }
    let most = match version {
        BLOCK_LZ4 => compressed.len() as u64 * LZ4_MAX_RATIO + LZ4_SLACK,
        _ => compressed.len() as u64 * ZSTD_MAX_RATIO,
    };
    if size as u64 > most {
        return Err(format!(
            "it declares {size} bytes, more than its {} compressed bytes can hold",
            compressed.len()
        ));
    }
    if version == BLOCK_LZ4 {
        plain.resize(size, 0);
        return match lz4_flex::block::decompress_into(compressed, plain) {
            Ok(n) if n == size => Ok(()),
            Ok(n) => Err(format!("it declares {size} bytes but holds {n}")),
            Err(e) => Err(e.to_string()),
        };
    }
    // Capacity, not zeroed bytes: zstd writes into it, and only the pages
    // it writes are ever touched. One byte more than declared, so that a
    // frame holding more than it declares is told from one that fits.
    plain.reserve(size + 1);
    let written = ZSTD_DECOMPRESSOR.with(|d| match d.borrow_mut().as_mut() {
        Some(d) => d
            .decompress_to_buffer(compressed, &mut *plain)
            .map_err(|e| e.to_string()),
        None => Err("zstd could not make a decompression context (out of memory?)".into()),
    });
    match written {
        Ok(n) if n == size => Ok(()),
        Ok(n) if n > size => Err(format!("it declares {size} bytes but holds more")),
        Ok(n) => Err(format!("it declares {size} bytes but holds {n}")),
        Err(e) => Err(e),
    }
}

/// How [`fact_at`] decodes a fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decode {
    /// Decoded whole ([`decode_fact`]).
    Whole,
    /// As a view ([`decode_fact_view`]: a progress report read in place).
    View,
}

/// Reads the fact at byte `pos` of a block's payload, decoded as `decode`
/// says; returns it and the position of the next one.
pub(crate) fn fact_at(
    payload: &[u8],
    pos: usize,
    decode: Decode,
) -> Result<(FactView<'_>, usize), String> {
    let rest = payload.get(pos..).unwrap_or_default();
    if rest.len() < 4 {
        return Err("block payload ends inside a length prefix".into());
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let body = rest
        .get(4..4 + len)
        .ok_or("block payload ends inside a fact")?;
    let fact = match decode {
        Decode::View => decode_fact_view(body)?,
        Decode::Whole => FactView::Whole(decode_fact(body)?),
    };
    Ok((fact, pos + 4 + len))
}

/// Decodes the facts of a checked block and checks their seqs run from
/// `first_seq` without a gap.
pub(crate) fn decode_facts(block: &OpenedBlock<'_>, first_seq: u64) -> Result<Vec<Fact>, String> {
    // The header's count is not trusted with an allocation: each fact takes
    // at least its 4-byte length and 1 byte, so the payload bounds it
    // (fuzzing found a block declaring 4 billion facts).
    let mut facts = Vec::with_capacity((block.count as usize).min(block.payload.len() / 5));
    let mut rest = &block.payload[..];
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

#[cfg(test)]
mod tests {

    /// Found by `fuzz/run.sh` (target `block`): a sealed block whose header
    /// declares far more facts than its payload holds is damage, reported,
    /// never an allocation of the declared count.
    #[test]
    fn a_declared_count_is_not_trusted_with_an_allocation() {
        let mut payload = Vec::new();
        let fact = reel_core::fact::Fact {
            seq: 0,
            at: 0,
            offset: 0,
            call: None,
            kind: reel_core::fact::FactKind::RunEnded(reel_core::fact::RunEnded {
                status: reel_core::fact::RunStatus::Completed,
            }),
        };
        push_fact(&mut payload, &fact).unwrap();
        for count in [u32::MAX, 1 << 30, 2] {
            let (value, _) = seal(count, &[0; 32], &payload);
            let opened = open(&value).expect("the checksum holds");
            let err = decode_facts(&opened, 0).expect_err("the count does not match");
            assert!(err.contains("count") || err.contains("fact"), "{err}");
        }
    }
    use proptest::prelude::*;
    use proptest::test_runner::{FileFailurePersistence, RngAlgorithm};
    use serde_json::json;

    use super::*;
    use reel_core::fact::{FactKind, Progress};

    /// A progress fact of a long run: similar to its neighbours, as most
    /// facts of a block are.
    fn progress(seq: u64) -> Fact {
        Fact {
            seq,
            at: 1_700_000_000_000_000_000 + seq as i64 * 1_000,
            offset: seq * 1_000,
            call: Some("call-7".into()),
            kind: FactKind::Progress(Progress {
                payload: json!({"message": format!("step {seq} of 300"), "done": seq, "total": 300}),
                count: seq,
                delivered: false,
            }),
        }
    }

    /// The plain payload of `facts`.
    fn payload_of(facts: &[Fact]) -> Vec<u8> {
        let mut payload = Vec::new();
        for fact in facts {
            push_fact(&mut payload, fact).expect("a fact encodes");
        }
        payload
    }

    /// `facts` sealed into one block after `prev`.
    fn sealed(facts: &[Fact], prev: &Digest) -> (Vec<u8>, Digest) {
        seal(facts.len() as u32, prev, &payload_of(facts))
    }

    /// The blocks this reel writes, pinned with the archive format they
    /// belong to: a plain block (one fact) and a zstd block (forty), by the
    /// sha-256 of their stored bytes. A change to the block layout or to a
    /// fact's encoding that keeps [`crate::FORMAT_VERSION`] fails here: raise
    /// the version (an older reel must refuse the new blocks) and pin the
    /// new bytes under it. (Only the compressor's output changing, with
    /// old blocks still read, is the one change that needs no raise.)
    const PINNED_BLOCKS: &[(u32, &str, &str)] = &[
        (
            3,
            "ec6a132e60ef99f7ff6e18525dc27aac7d5eabf288c2a484bbb33d5390291a81",
            "b5abcb676f6b49e63e521297afea795f6d5bcc07f4b75ea84b602413cfafca26",
        ),
        // Format 4 moved artifact bytes into files; its blocks are format 3's.
        (
            4,
            "ec6a132e60ef99f7ff6e18525dc27aac7d5eabf288c2a484bbb33d5390291a81",
            "b5abcb676f6b49e63e521297afea795f6d5bcc07f4b75ea84b602413cfafca26",
        ),
        // Format 5 added the write-ahead journal and fact fields that are
        // absent when empty: its blocks are format 3's, byte for byte.
        (
            5,
            "ec6a132e60ef99f7ff6e18525dc27aac7d5eabf288c2a484bbb33d5390291a81",
            "b5abcb676f6b49e63e521297afea795f6d5bcc07f4b75ea84b602413cfafca26",
        ),
        // Format 6 added run summaries beside the records: its blocks are
        // format 3's, byte for byte.
        (
            6,
            "ec6a132e60ef99f7ff6e18525dc27aac7d5eabf288c2a484bbb33d5390291a81",
            "b5abcb676f6b49e63e521297afea795f6d5bcc07f4b75ea84b602413cfafca26",
        ),
    ];

    #[test]
    fn the_blocks_written_are_pinned_to_the_format_version() {
        let hex_of = |value: &[u8]| hex::encode(Sha256::digest(value));
        let (plain, _) = sealed(&[progress(0)], &[7; 32]);
        assert_eq!(plain[0], BLOCK_PLAIN);
        let facts: Vec<Fact> = (0..40).map(progress).collect();
        let (zstd, _) = sealed(&facts, &[7; 32]);
        assert_eq!(zstd[0], BLOCK_ZSTD);
        let found = (hex_of(&plain), hex_of(&zstd));
        let Some((_, want_plain, want_zstd)) = PINNED_BLOCKS
            .iter()
            .find(|(v, ..)| *v == crate::FORMAT_VERSION)
        else {
            panic!(
                "FORMAT_VERSION {} has no pinned blocks: pin {found:?} under it",
                crate::FORMAT_VERSION
            );
        };
        assert_eq!(
            (found.0.as_str(), found.1.as_str()),
            (*want_plain, *want_zstd),
            "the blocks this reel writes changed, but FORMAT_VERSION is still {}: raise it \
             (and pin the new bytes under the new version)",
            crate::FORMAT_VERSION
        );
    }

    /// A block built by hand: `version`, `count`, and `stored` as its stored
    /// payload, with a correct checksum over those bytes.
    fn forged(version: u8, count: u32, stored: &[u8]) -> Vec<u8> {
        let mut value = vec![version];
        value.extend_from_slice(&count.to_be_bytes());
        value.extend_from_slice(&[0; 64]);
        value.extend_from_slice(stored);
        let digest = digest_of(&value);
        value[37..HEADER_LEN].copy_from_slice(&digest);
        value
    }

    /// A compressed block's stored payload: `declared` as the plain size,
    /// then `compressed`.
    fn lz4_stored(declared: u32, compressed: &[u8]) -> Vec<u8> {
        let mut stored = declared.to_le_bytes().to_vec();
        stored.extend_from_slice(compressed);
        stored
    }

    /// `plain` as one zstd frame, as version 3 stores it.
    fn zstd_frame(plain: &[u8]) -> Vec<u8> {
        zstd::bulk::compress(plain, ZSTD_LEVEL).expect("zstd compresses")
    }

    /// Opens `value` and decodes its facts, numbered from `first_seq`.
    fn read(value: &[u8], first_seq: u64) -> Result<Vec<Fact>, String> {
        decode_facts(&open(value)?, first_seq)
    }

    /// Opening `value` fails with an error containing `want`.
    fn check_damage(value: &[u8], want: &str) {
        match read(value, 0) {
            Err(e) => assert!(e.contains(want), "{e:?} does not say {want:?}"),
            Ok(facts) => panic!("damaged block opens, with {} facts", facts.len()),
        }
    }

    #[test]
    fn one_small_fact_stays_plain() {
        let facts = [progress(0)];
        let (value, digest) = sealed(&facts, &[0; 32]);
        assert_eq!(value[0], BLOCK_PLAIN);
        assert_eq!(&value[HEADER_LEN..], &payload_of(&facts)[..]);
        assert_eq!(&value[37..HEADER_LEN], &digest[..]);
        let opened = open(&value).expect("opens");
        assert!(matches!(opened.payload, Cow::Borrowed(_)), "no copy");
        assert_eq!(decode_facts(&opened, 0).expect("decodes"), facts);
    }

    #[test]
    fn many_similar_facts_are_compressed() {
        let facts: Vec<Fact> = (40..340).map(progress).collect();
        let plain = payload_of(&facts);
        let prev = [7; 32];
        let (value, digest) = sealed(&facts, &prev);
        assert_eq!(value[0], BLOCK_ZSTD);
        assert_eq!(&value[5..37], &prev[..]);
        assert_eq!(&value[37..HEADER_LEN], &digest[..]);
        assert!(
            value.len() - HEADER_LEN < plain.len() / 2,
            "{} stored bytes for a {}-byte payload",
            value.len() - HEADER_LEN,
            plain.len()
        );
        let opened = open(&value).expect("opens");
        assert_eq!(opened.count, 300);
        assert_eq!(&opened.payload[..], &plain[..]);
        assert_eq!(decode_facts(&opened, 40).expect("decodes"), facts);
    }

    #[test]
    fn an_incompressible_payload_stays_plain() {
        // Bytes of a xorshift sequence: nothing for lz4 to find.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let payload: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let (value, _) = seal(1, &[0; 32], &payload);
        assert_eq!(value[0], BLOCK_PLAIN);
        assert_eq!(&value[HEADER_LEN..], &payload[..]);
    }

    #[test]
    fn a_hand_built_plain_block_reads() {
        let facts: Vec<Fact> = (0..5).map(progress).collect();
        let value = forged(BLOCK_PLAIN, 5, &payload_of(&facts));
        assert_eq!(read(&value, 0).expect("reads"), facts);
    }

    /// A block of format 2 (lz4), as an archive written before zstd holds
    /// them, still reads.
    #[test]
    fn a_hand_built_lz4_block_reads() {
        let facts: Vec<Fact> = (0..5).map(progress).collect();
        let plain = payload_of(&facts);
        let stored = lz4_stored(plain.len() as u32, &lz4_flex::block::compress(&plain));
        let value = forged(BLOCK_LZ4, 5, &stored);
        assert_eq!(read(&value, 0).expect("reads"), facts);
    }

    #[test]
    fn a_hand_built_zstd_block_reads() {
        let facts: Vec<Fact> = (0..5).map(progress).collect();
        let plain = payload_of(&facts);
        let stored = lz4_stored(plain.len() as u32, &zstd_frame(&plain));
        let value = forged(BLOCK_ZSTD, 5, &stored);
        assert_eq!(read(&value, 0).expect("reads"), facts);
    }

    /// The most compressible payload there is (zeros, which zstd stores as
    /// RLE blocks) stays within [`ZSTD_MAX_RATIO`]: the bound refuses no
    /// real frame.
    #[test]
    fn zstd_stays_within_its_ratio_bound() {
        for len in [1 << 10, 1 << 17, 1 << 20, 1 << 24] {
            let plain = vec![0u8; len];
            let frame = zstd_frame(&plain);
            assert!(
                (len as u64) <= frame.len() as u64 * ZSTD_MAX_RATIO,
                "{len} zeros in {} bytes",
                frame.len()
            );
            let value = forged(BLOCK_ZSTD, 0, &lz4_stored(len as u32, &frame));
            assert_eq!(open(&value).expect("opens").payload.len(), len);
        }
    }

    #[test]
    fn a_flipped_byte_in_a_compressed_payload_fails_the_checksum() {
        let facts: Vec<Fact> = (0..50).map(progress).collect();
        let (mut value, _) = sealed(&facts, &[0; 32]);
        assert_eq!(value[0], BLOCK_ZSTD);
        value[HEADER_LEN + 10] ^= 0x01;
        check_damage(&value, "checksum does not match");
    }

    #[test]
    fn an_unknown_version_is_not_supported() {
        let value = forged(4, 1, &payload_of(&[progress(0)]));
        check_damage(
            &value,
            "block format version 4 is not supported by this reel (supports 1 to 3)",
        );
    }

    /// Damaged compressed payloads with a correct checksum (as a writer with
    /// a bug, or a hostile one, would seal them) give an error: no panic and
    /// no allocation beyond what the stored bytes can decompress to.
    #[test]
    fn a_damaged_compressed_payload_is_an_error() {
        let facts: Vec<Fact> = (0..50).map(progress).collect();
        let plain = payload_of(&facts);
        let compressed = lz4_flex::block::compress(&plain);
        let len = plain.len() as u32;
        for (what, stored, want) in [
            ("no size", vec![1, 2], "ends inside its size"),
            ("nothing", vec![], "ends inside its size"),
            (
                "the largest size",
                lz4_stored(u32::MAX, &compressed),
                "more than a block may hold",
            ),
            (
                "a size just above the cap",
                lz4_stored(MAX_PLAIN_PAYLOAD as u32 + 1, &[0; 1 << 16]),
                "more than a block may hold",
            ),
            (
                "a size no 10 bytes decompress to",
                lz4_stored(10 * 255 + 65, &[0xff; 10]),
                "more than its 10 compressed bytes can hold",
            ),
            (
                "garbage",
                lz4_stored(1000, &[0xff; 40]),
                "block payload does not decompress",
            ),
            (
                "a size too large",
                lz4_stored(len + 1, &compressed),
                "but holds",
            ),
            (
                "a size too small",
                lz4_stored(len - 1, &compressed),
                "block payload does not decompress",
            ),
            (
                "a cut stream",
                lz4_stored(len, &compressed[..compressed.len() - 3]),
                "block payload does not decompress",
            ),
        ] {
            let value = forged(BLOCK_LZ4, 50, &stored);
            match read(&value, 0) {
                Err(e) => assert!(e.contains(want), "{what}: {e:?} does not say {want:?}"),
                Ok(_) => panic!("{what}: the damaged block opens"),
            }
        }
    }

    /// The same for version 3: damaged zstd payloads with a correct
    /// checksum give an error, with no allocation beyond the bound.
    #[test]
    fn a_damaged_zstd_payload_is_an_error() {
        let facts: Vec<Fact> = (0..50).map(progress).collect();
        let plain = payload_of(&facts);
        let frame = zstd_frame(&plain);
        let len = plain.len() as u32;
        for (what, stored, want) in [
            ("no size", vec![1, 2], "ends inside its size"),
            (
                "the largest size",
                lz4_stored(u32::MAX, &frame),
                "more than a block may hold",
            ),
            (
                "a size no 10 bytes decompress to",
                lz4_stored(10 * 32768 + 1, &[0xff; 10]),
                "more than its 10 compressed bytes can hold",
            ),
            (
                "garbage",
                lz4_stored(1000, &[0xff; 40]),
                "block payload does not decompress",
            ),
            ("a size too large", lz4_stored(len + 1, &frame), "but holds"),
            (
                "a size too small",
                lz4_stored(len - 1, &frame),
                "block payload does not decompress",
            ),
            (
                "a cut frame",
                lz4_stored(len, &frame[..frame.len() - 3]),
                "block payload does not decompress",
            ),
            (
                "an lz4 payload under a zstd header",
                lz4_stored(len, &lz4_flex::block::compress(&plain)),
                "block payload does not decompress",
            ),
        ] {
            let value = forged(BLOCK_ZSTD, 50, &stored);
            match read(&value, 0) {
                Err(e) => assert!(e.contains(want), "{what}: {e:?} does not say {want:?}"),
                Ok(_) => panic!("{what}: the damaged block opens"),
            }
        }
    }

    /// A payload that decompresses but whose facts are cut short is
    /// reported like a cut plain payload.
    #[test]
    fn a_compressed_payload_ending_inside_a_fact_is_an_error() {
        let facts: Vec<Fact> = (0..50).map(progress).collect();
        let plain = payload_of(&facts);
        let cut = &plain[..plain.len() - 3];
        let stored = lz4_stored(cut.len() as u32, &lz4_flex::block::compress(cut));
        check_damage(
            &forged(BLOCK_LZ4, 50, &stored),
            "block payload ends inside a fact",
        );
        let stored = lz4_stored(cut.len() as u32, &zstd_frame(cut));
        check_damage(
            &forged(BLOCK_ZSTD, 50, &stored),
            "block payload ends inside a fact",
        );
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
                "proptest-regressions",
            ))),
            rng_algorithm: RngAlgorithm::XorShift,
            ..ProptestConfig::with_cases(256)
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// Any facts sealed into a block read back unchanged, whichever
        /// version `seal` chose. The run's first `take` facts are repeated
        /// `copies` times (renumbered): few facts tend to stay plain, many
        /// to be compressed.
        #[test]
        fn sealed_facts_read_back(
            run in reel_core::strategy::facts_of_run("run-1"),
            take in 1usize..10,
            copies in 1usize..6,
            first_seq in 0u64..1_000_000,
            prev in any::<[u8; 32]>(),
        ) {
            let run = &run[..take.min(run.len())];
            let facts: Vec<Fact> = run
                .iter()
                .cycle()
                .take(run.len() * copies)
                .enumerate()
                .map(|(i, f)| Fact { seq: first_seq + i as u64, ..f.clone() })
                .collect();
            let plain = payload_of(&facts);
            let (value, digest) = sealed(&facts, &prev);
            prop_assert!(value[0] == BLOCK_PLAIN || value[0] == BLOCK_ZSTD);
            prop_assert!(value.len() <= HEADER_LEN + plain.len());
            prop_assert_eq!(&value[37..HEADER_LEN], &digest[..]);
            let opened = open(&value).map_err(TestCaseError::fail)?;
            prop_assert_eq!(&opened.payload[..], &plain[..]);
            let back = decode_facts(&opened, first_seq).map_err(TestCaseError::fail)?;
            prop_assert_eq!(back, facts);
        }

        /// Any stored bytes under a compressed block's header, with a
        /// correct checksum, open or give an error; what opens is no larger
        /// than the bytes can decompress to.
        #[test]
        fn any_compressed_payload_opens_or_errs(
            stored in prop::collection::vec(any::<u8>(), 0..256),
            zstd in any::<bool>(),
        ) {
            let (version, ratio, slack) = if zstd {
                (BLOCK_ZSTD, ZSTD_MAX_RATIO, 0)
            } else {
                (BLOCK_LZ4, 255, 64)
            };
            let value = forged(version, 3, &stored);
            if let Ok(opened) = open(&value) {
                prop_assert!(opened.payload.len() as u64 <= stored.len() as u64 * ratio + slack);
                let _ = decode_facts(&opened, 0);
            }
        }

        /// A valid zstd frame with its declared size changed, or its bytes
        /// cut, opens only when the size is right, and never panics.
        #[test]
        fn a_zstd_frame_with_a_wrong_size_or_cut_is_an_error(
            take in 1usize..60,
            declared_delta in -3i64..4,
            cut in 0usize..8,
        ) {
            let facts: Vec<Fact> = (0..take as u64).map(progress).collect();
            let plain = payload_of(&facts);
            let frame = zstd_frame(&plain);
            let declared = (plain.len() as i64 + declared_delta).max(0) as u32;
            let cut = cut.min(frame.len());
            let stored = lz4_stored(declared, &frame[..frame.len() - cut]);
            let value = forged(BLOCK_ZSTD, take as u32, &stored);
            match read(&value, 0) {
                Ok(back) => {
                    prop_assert_eq!(declared_delta, 0);
                    prop_assert_eq!(cut, 0);
                    prop_assert_eq!(back, facts);
                }
                Err(_) => prop_assert!(declared_delta != 0 || cut != 0),
            }
        }

        /// A real compressed payload with bytes changed (and the checksum
        /// recomputed) opens or gives an error, never panics.
        #[test]
        fn a_changed_compressed_payload_opens_or_errs(
            changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            let facts: Vec<Fact> = (0..40).map(progress).collect();
            let (value, _) = sealed(&facts, &[0; 32]);
            prop_assert_eq!(value[0], BLOCK_ZSTD);
            let mut stored = value[HEADER_LEN..].to_vec();
            for (at, byte) in changes {
                let i = at.index(stored.len());
                stored[i] = byte;
            }
            if let Ok(opened) = open(&forged(BLOCK_ZSTD, 40, &stored)) {
                let _ = decode_facts(&opened, 0);
            }
        }
    }
}
