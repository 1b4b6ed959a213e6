//! Damaged archives: bytes flipped, blocks truncated, removed or rewritten,
//! records and index entries broken. The damage is done through sled itself
//! (the archive is closed first), then the archive is opened again and must
//! report the damage where it is, read everything around it, and never panic.
//!
//! Every case is one row of [`CASES`], checked by [`check`].

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;
use sha2::{Digest as _, Sha256};

use reel::codec::{FactView, ViewSink};
use reel::fact::{
    CallMode, CallStarted, Fact, FactKind, Identity, Log, NewFact, Producer, Progress, RunEnded,
    RunStarted, RunStatus,
};
use reel::gap::Gap;
use reel::run::RunState;
use reel_archive::{Archive, ArchiveConfig, ArchiveError, Problem, RunFilter};
use reel_viewer::timeline::TimelineBuilder;

/// Length of a block header (see `src/archive/block.rs`).
const HEADER_LEN: usize = 69;
/// Block format version of a block stored plain.
const BLOCK_PLAIN: u8 = 1;
/// Block format version of a block stored lz4-compressed (archive format 2;
/// still read: the damage cases below reseal blocks as version 2).
const BLOCK_LZ4: u8 = 2;
/// Block format version of a block stored as a zstd frame (what the
/// recorded blocks of this file are: [`the_recorded_blocks_are_compressed`]).
const BLOCK_ZSTD: u8 = 3;

// ---------------------------------------------------------------------------
// The recorded archive
// ---------------------------------------------------------------------------

/// A run as recorded: its id, its batches (one block each), and whether it
/// ends (a run that does not is left running, so it reopens incomplete).
struct Script {
    id: &'static str,
    tenant: Option<&'static str>,
    /// Sizes of the batches after the first (which holds run.started and
    /// `first` more facts).
    first: usize,
    batches: &'static [usize],
    end: Option<RunStatus>,
}

/// alpha: blocks 0..=2, 3..=5, 6..=9, 10..=12 (the last ends the run).
/// beta: blocks 0..=1, 2..=4 (failed).
/// gamma: one block 0..=3.
/// delta: blocks 0..=2, 3..=4, 5..=7, left running.
const SCRIPTS: &[Script] = &[
    Script {
        id: "alpha",
        tenant: Some("acme"),
        first: 2,
        batches: &[3, 4, 2],
        end: Some(RunStatus::Completed),
    },
    Script {
        id: "beta",
        tenant: None,
        first: 1,
        batches: &[2],
        end: Some(RunStatus::Failed),
    },
    Script {
        id: "gamma",
        tenant: Some("other"),
        first: 2,
        batches: &[],
        end: Some(RunStatus::Completed),
    },
    Script {
        id: "delta",
        tenant: Some("acme"),
        first: 2,
        batches: &[2, 3],
        end: None,
    },
];

/// The `n`th fact of a run after run.started: a deterministic mix of kinds.
/// `salt` changes the content of progress and log facts (not call facts, so
/// a rewritten history still agrees with the run record).
fn fact(run: &str, n: usize, salt: u64) -> NewFact {
    let at = 1_700_000_000_000_000_000 + n as i64 * 1_000;
    let call = Some(format!("{run}-call-{}", n / 3));
    let kind = match n % 3 {
        0 => FactKind::CallStarted(CallStarted {
            call_id: format!("{run}-call-{}", n / 3),
            tool_name: if n.is_multiple_of(2) {
                "search"
            } else {
                "fetch"
            }
            .into(),
            tool_id: None,
            parent_call: None,
            iteration: 0,
            invocation_id: None,
            mode: CallMode::Sync,
            protocol: None,
            platform: None,
            client_info: None,
            args: json!({"q": format!("{run} {n}")}),
            wanted: None,
            attached: None,
            spec: None,
            dispatch_tools: None,
            outside_run: None,
        }),
        1 => FactKind::Progress(Progress {
            payload: json!({"message": format!("{run} step {n}"), "salt": salt}),
            count: n as u64 + salt + 1,
            delivered: false,
        }),
        _ => FactKind::Log(Log {
            level: reel::fact::Level::Info,
            logger: None,
            subflow: None,
            data: json!(format!("{run} log {n} {salt}")),
            delivered: true,
            in_flight: Vec::new(),
        }),
    };
    NewFact {
        at,
        offset: n as u64 * 1_000,
        call,
        kind,
    }
}

fn started(s: &Script) -> NewFact {
    NewFact {
        at: 1_700_000_000_000_000_000,
        offset: 0,
        call: None,
        kind: FactKind::RunStarted(RunStarted {
            run_id: s.id.into(),
            session_id: None,
            identity: s.tenant.map(|t| Identity {
                tenant: Some(t.into()),
                principal: None,
                conversation: None,
            }),
            producer: Producer {
                name: "corruption-test".into(),
                version: "0".into(),
            },
            labels: BTreeMap::new(),
            teardown_scopes: Vec::new(),
        }),
    }
}

/// The batches of a run; batch `rewrite` (if any) gets different content.
fn batches(s: &Script, rewrite: Option<usize>) -> Vec<Vec<NewFact>> {
    let mut n = 0;
    let mut next = |salt: u64| {
        let f = fact(s.id, n, salt);
        n += 1;
        f
    };
    let salt = |b: usize| if rewrite == Some(b) { 7 } else { 0 };
    let mut out = Vec::new();
    let mut first = vec![started(s)];
    first.extend((0..s.first).map(|_| next(salt(0))));
    out.push(first);
    for (i, &size) in s.batches.iter().enumerate() {
        out.push((0..size).map(|_| next(salt(i + 1))).collect());
    }
    if let Some(status) = s.end {
        let last = out.last_mut().expect("a batch");
        last.push(NewFact {
            at: 1_700_000_000_000_000_000 + 999_000,
            offset: 999_000,
            call: None,
            kind: FactKind::RunEnded(RunEnded { status }),
        });
    }
    out
}

/// Records the scripted runs into `dir` and returns every run's facts.
fn record(dir: &Path) -> BTreeMap<&'static str, Vec<Fact>> {
    let archive = Archive::open(dir, ArchiveConfig::default()).expect("archive opens");
    let mut all = BTreeMap::new();
    for s in SCRIPTS {
        let mut facts = Vec::new();
        for batch in batches(s, None) {
            let seqs = archive.append(s.id, batch.clone()).expect("append");
            facts.extend(batch.into_iter().zip(seqs).map(|(f, seq)| f.with_seq(seq)));
        }
        all.insert(s.id, facts);
    }
    archive.flush().expect("flush");
    all
}

// ---------------------------------------------------------------------------
// Damage, done through sled
// ---------------------------------------------------------------------------

fn ordinal(db: &sled::Db, run: &str) -> u64 {
    let ids = db.open_tree("run_ids").expect("run_ids tree");
    let v = ids.get(run).expect("get").expect("run id is stored");
    u64::from_be_bytes(v.as_ref().try_into().expect("8 bytes"))
}

fn event_key(ordinal: u64, first_seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&ordinal.to_be_bytes());
    k[8..].copy_from_slice(&first_seq.to_be_bytes());
    k
}

/// Rewrites the stored block of `run` that starts at `first_seq`.
fn edit_block(db: &sled::Db, run: &str, first_seq: u64, edit: impl FnOnce(&mut Vec<u8>)) {
    let events = db.open_tree("events").expect("events tree");
    let key = event_key(ordinal(db, run), first_seq);
    let mut value = events
        .get(key)
        .expect("get")
        .expect("block exists")
        .to_vec();
    edit(&mut value);
    events.insert(key, value).expect("insert");
}

fn flip_payload_alpha_3(db: &sled::Db) {
    edit_block(db, "alpha", 3, |v| v[HEADER_LEN + 10] ^= 0x01);
}

fn flip_payload_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let last = v.len() - 1;
        v[last] ^= 0xff;
    });
}

fn flip_count_alpha_6(db: &sled::Db) {
    edit_block(db, "alpha", 6, |v| v[4] ^= 0x01);
}

fn flip_version_alpha_6(db: &sled::Db) {
    edit_block(db, "alpha", 6, |v| v[0] = 9);
}

fn flip_prev_alpha_6(db: &sled::Db) {
    edit_block(db, "alpha", 6, |v| v[20] ^= 0x80);
}

fn flip_digest_alpha_3(db: &sled::Db) {
    edit_block(db, "alpha", 3, |v| v[50] ^= 0x80);
}

fn truncate_alpha_3(db: &sled::Db) {
    edit_block(db, "alpha", 3, |v| v.truncate(40));
}

fn empty_alpha_3(db: &sled::Db) {
    edit_block(db, "alpha", 3, |v| v.clear());
}

fn cut_payload_alpha_3(db: &sled::Db) {
    edit_block(db, "alpha", 3, |v| v.truncate(v.len() - 5));
}

fn flip_payload_delta_3(db: &sled::Db) {
    edit_block(db, "delta", 3, |v| v[HEADER_LEN + 4] ^= 0x01);
}

fn flip_payload_delta_last(db: &sled::Db) {
    edit_block(db, "delta", 5, |v| v[HEADER_LEN + 4] ^= 0x01);
}

/// The plain payload of a stored block (either version): per fact, a u32
/// little-endian length and the fact's encoding.
fn plain_payload(value: &[u8]) -> Vec<u8> {
    let stored = &value[HEADER_LEN..];
    match value[0] {
        BLOCK_PLAIN => stored.to_vec(),
        BLOCK_LZ4 => lz4_flex::block::decompress_size_prepended(stored)
            .expect("a recorded compressed block decompresses"),
        BLOCK_ZSTD => {
            let size = u32::from_le_bytes(stored[..4].try_into().expect("a size")) as usize;
            zstd::bulk::decompress(&stored[4..], size).expect("a recorded zstd block decompresses")
        }
        v => panic!("a recorded block has format version {v}"),
    }
}

/// The stored payload of a compressed block holding `plain`.
fn compressed(plain: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(plain)
}

/// Replaces a block's stored payload with `stored` under format `version`,
/// keeping its count and previous digest, and seals it again with a correct
/// checksum: damage the checksum cannot see, as a writer with a bug would
/// leave. The block's digest changes, so only a run's last block is resealed
/// (no later block links to it).
fn reseal(value: &mut Vec<u8>, version: u8, stored: &[u8]) {
    value.truncate(HEADER_LEN);
    value[0] = version;
    value.extend_from_slice(stored);
    let mut hasher = Sha256::new();
    hasher.update(&value[..37]);
    hasher.update(&value[HEADER_LEN..]);
    let digest: [u8; 32] = hasher.finalize().into();
    value[37..HEADER_LEN].copy_from_slice(&digest);
}

/// `plain` with its first fact's length prefix claiming more bytes than
/// the payload holds.
fn overlong_first_fact(plain: &[u8]) -> Vec<u8> {
    let mut plain = plain.to_vec();
    plain[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    plain
}

/// Alpha's last block stored plain (resealed), then a payload byte flipped.
fn flip_plain_payload_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let plain = plain_payload(v);
        reseal(v, BLOCK_PLAIN, &plain);
        let last = v.len() - 1;
        v[last] ^= 0xff;
    });
}

/// Alpha's last block stored plain (resealed), its first fact running past
/// the payload's end.
fn plain_payload_ends_inside_a_fact_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let plain = overlong_first_fact(&plain_payload(v));
        reseal(v, BLOCK_PLAIN, &plain);
    });
}

/// Alpha's last block compressed (resealed), its first fact running past
/// the decompressed payload's end.
fn compressed_payload_ends_inside_a_fact_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let plain = overlong_first_fact(&plain_payload(v));
        reseal(v, BLOCK_LZ4, &compressed(&plain));
    });
}

/// Alpha's last block resealed with bytes that are no lz4 stream.
fn garbage_compressed_payload_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let mut stored = (plain_payload(v).len() as u32).to_le_bytes().to_vec();
        stored.extend_from_slice(&[0xff; 40]);
        reseal(v, BLOCK_LZ4, &stored);
    });
}

/// Alpha's last block resealed as a zstd block whose bytes are no zstd
/// frame.
fn garbage_zstd_payload_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let mut stored = (plain_payload(v).len() as u32).to_le_bytes().to_vec();
        stored.extend_from_slice(&[0xff; 40]);
        reseal(v, BLOCK_ZSTD, &stored);
    });
}

/// Alpha's last block resealed as a zstd frame declaring one byte more
/// than it holds.
fn short_zstd_payload_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let plain = plain_payload(v);
        let mut stored = (plain.len() as u32 + 1).to_le_bytes().to_vec();
        stored.extend_from_slice(&zstd::bulk::compress(&plain, 1).expect("zstd"));
        reseal(v, BLOCK_ZSTD, &stored);
    });
}

/// Alpha's last block resealed declaring a 4 GiB payload.
fn huge_declared_size_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let mut stored = compressed(&plain_payload(v));
        stored[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        reseal(v, BLOCK_LZ4, &stored);
    });
}

/// Alpha's last block resealed declaring one byte more than it holds.
fn short_compressed_payload_alpha_last(db: &sled::Db) {
    edit_block(db, "alpha", 10, |v| {
        let plain = plain_payload(v);
        let mut stored = compressed(&plain);
        stored[..4].copy_from_slice(&(plain.len() as u32 + 1).to_le_bytes());
        reseal(v, BLOCK_LZ4, &stored);
    });
}

fn remove_alpha_3(db: &sled::Db) {
    let events = db.open_tree("events").expect("events tree");
    let key = event_key(ordinal(db, "alpha"), 3);
    assert!(events.remove(key).expect("remove").is_some());
}

fn remove_alpha_10(db: &sled::Db) {
    let events = db.open_tree("events").expect("events tree");
    let key = event_key(ordinal(db, "alpha"), 10);
    assert!(events.remove(key).expect("remove").is_some());
}

fn remove_alpha_0(db: &sled::Db) {
    let events = db.open_tree("events").expect("events tree");
    let key = event_key(ordinal(db, "alpha"), 0);
    assert!(events.remove(key).expect("remove").is_some());
}

/// Replaces alpha's block 3..=5 with a validly sealed block holding other
/// facts: recorded in a second archive whose alpha has the same first block
/// (so the same digest) and a different second batch. The forged block
/// passes its checksum and links to block 0; only the link from block 6
/// tells that history was rewritten.
fn rewrite_alpha_3(db: &sled::Db) {
    let forged = forge_alpha_block(1);
    let events = db.open_tree("events").expect("events tree");
    events
        .insert(event_key(ordinal(db, "alpha"), 3), forged)
        .expect("insert");
}

/// Records alpha with batch `batch` rewritten into a scratch archive and
/// returns that block's stored bytes.
fn forge_alpha_block(batch: usize) -> Vec<u8> {
    let scratch = tempfile::tempdir().expect("tempdir");
    let script = &SCRIPTS[0];
    let mut first_seq = None;
    {
        let archive = Archive::open(scratch.path(), ArchiveConfig::default()).expect("open");
        for (i, b) in batches(script, Some(batch)).into_iter().enumerate() {
            let seqs = archive.append(script.id, b).expect("append");
            if i == batch {
                first_seq = Some(seqs.start);
            }
        }
    }
    let first_seq = first_seq.expect("alpha has that batch");
    let db = open_sled(scratch.path());
    let events = db.open_tree("events").expect("events tree");
    let v = events
        .get(event_key(ordinal(&db, script.id), first_seq))
        .expect("get")
        .expect("forged block");
    v.to_vec()
}

/// Copies beta's second block (2..=4, 3 facts, another run's chain) over
/// alpha's 3..=5 block: it passes its checksum but holds the wrong seqs.
fn transplant_beta_into_alpha(db: &sled::Db) {
    let events = db.open_tree("events").expect("events tree");
    let v = events
        .get(event_key(ordinal(db, "beta"), 2))
        .expect("get")
        .expect("beta block");
    events
        .insert(event_key(ordinal(db, "alpha"), 3), v)
        .expect("insert");
}

fn garbage_record_beta(db: &sled::Db) {
    let runs = db.open_tree("runs").expect("runs tree");
    runs.insert(ordinal(db, "beta").to_be_bytes(), &b"\x01\xc1garbage"[..])
        .expect("insert");
}

fn empty_record_beta(db: &sled::Db) {
    let runs = db.open_tree("runs").expect("runs tree");
    runs.insert(ordinal(db, "beta").to_be_bytes(), &b""[..])
        .expect("insert");
}

fn index_suffix(db: &sled::Db, tree: &str, run: &str) -> Vec<sled::IVec> {
    let ord = ordinal(db, run).to_be_bytes();
    db.open_tree(tree)
        .expect("index tree")
        .iter()
        .keys()
        .map(|k| k.expect("key"))
        .filter(|k| k.ends_with(&ord))
        .collect()
}

fn remove_tool_index_beta(db: &sled::Db) {
    let keys = index_suffix(db, "by_tool", "beta");
    assert!(!keys.is_empty());
    let tree = db.open_tree("by_tool").expect("by_tool");
    tree.remove(&keys[0]).expect("remove");
}

fn remove_time_index_gamma(db: &sled::Db) {
    let keys = index_suffix(db, "by_time", "gamma");
    assert_eq!(keys.len(), 1);
    let tree = db.open_tree("by_time").expect("by_time");
    tree.remove(&keys[0]).expect("remove");
}

/// A status index entry saying gamma is still running.
fn stale_status_index_gamma(db: &sled::Db) {
    let keys = index_suffix(db, "by_status", "gamma");
    assert_eq!(keys.len(), 1);
    let mut stale = keys[0].to_vec();
    stale[0] = 0; // RunState::Running
    let tree = db.open_tree("by_status").expect("by_status");
    tree.insert(stale, &[]).expect("insert");
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

/// What reading the damaged run must give.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Every fact, as recorded.
    Intact,
    /// Every fact but those in `first..=last`, which come as one
    /// [`ArchiveError::Corrupt`] item in their place.
    Corrupt(u64, Option<u64>),
    /// Every fact, but `first..=last` differ from what was recorded (a
    /// rewritten block: only `verify` can tell).
    Rewritten(u64, u64),
    /// `archive.run(id)` reports the damaged record; the facts still read.
    RecordDamaged,
}

struct Case {
    name: &'static str,
    corrupt: fn(&sled::Db),
    /// The run the problem names; `#run` means "the ordinal of run", as
    /// verify names a run whose record it cannot read.
    run: &'static str,
    /// A substring of the problem's description.
    problem: &'static str,
    /// The seq range the problem names.
    seqs: Option<(u64, Option<u64>)>,
    /// Other problems verify may report (description substrings), all about
    /// the same run.
    also: &'static [&'static str],
    read: Read,
}

const CASES: &[Case] = &[
    Case {
        name: "flipped payload byte",
        corrupt: flip_payload_alpha_3,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((3, Some(5))),
        also: &[],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "flipped payload byte in the last block",
        corrupt: flip_payload_alpha_last,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "flipped payload byte in a block stored plain",
        corrupt: flip_plain_payload_alpha_last,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "plain payload ending inside a fact (checksum resealed)",
        corrupt: plain_payload_ends_inside_a_fact_alpha_last,
        run: "alpha",
        problem: "block payload ends inside a fact",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "compressed payload ending inside a fact (checksum resealed)",
        corrupt: compressed_payload_ends_inside_a_fact_alpha_last,
        run: "alpha",
        problem: "block payload ends inside a fact",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "compressed payload that is no lz4 stream (checksum resealed)",
        corrupt: garbage_compressed_payload_alpha_last,
        run: "alpha",
        problem: "block payload does not decompress",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "zstd payload that is no zstd frame (checksum resealed)",
        corrupt: garbage_zstd_payload_alpha_last,
        run: "alpha",
        problem: "block payload does not decompress",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "zstd payload declaring more than it holds (checksum resealed)",
        corrupt: short_zstd_payload_alpha_last,
        run: "alpha",
        problem: "block payload does not decompress: it declares",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "compressed payload declaring 4 GiB (checksum resealed)",
        corrupt: huge_declared_size_alpha_last,
        run: "alpha",
        problem: "block payload does not decompress: it declares 4294967295 bytes",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "compressed payload declaring more than it holds (checksum resealed)",
        corrupt: short_compressed_payload_alpha_last,
        run: "alpha",
        problem: "block payload does not decompress",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "flipped byte in the header's count",
        corrupt: flip_count_alpha_6,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((6, Some(9))),
        also: &[],
        read: Read::Corrupt(6, Some(9)),
    },
    Case {
        name: "unknown block version",
        corrupt: flip_version_alpha_6,
        run: "alpha",
        problem: "block format version 9",
        seqs: Some((6, Some(9))),
        also: &[],
        read: Read::Corrupt(6, Some(9)),
    },
    Case {
        name: "flipped byte in the header's previous digest",
        corrupt: flip_prev_alpha_6,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((6, Some(9))),
        also: &["hash chain is broken"],
        read: Read::Corrupt(6, Some(9)),
    },
    Case {
        name: "flipped byte in the header's digest",
        corrupt: flip_digest_alpha_3,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((3, Some(5))),
        also: &[],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "block shorter than its header",
        corrupt: truncate_alpha_3,
        run: "alpha",
        problem: "shorter than its 69-byte header",
        seqs: Some((3, Some(5))),
        also: &[],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "empty block",
        corrupt: empty_alpha_3,
        run: "alpha",
        problem: "shorter than its 69-byte header",
        seqs: Some((3, Some(5))),
        also: &[],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "block cut inside its payload",
        corrupt: cut_payload_alpha_3,
        run: "alpha",
        problem: "checksum does not match",
        seqs: Some((3, Some(5))),
        also: &[],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "flipped payload byte in a run left running",
        corrupt: flip_payload_delta_3,
        run: "delta",
        problem: "checksum does not match",
        seqs: Some((3, Some(4))),
        also: &[],
        read: Read::Corrupt(3, Some(4)),
    },
    Case {
        // The writer's close marks the run it left running incomplete,
        // with its record rebuilt from its facts, so the damaged block's
        // seqs are known to the end.
        name: "flipped payload byte in the last block of a run left running",
        corrupt: flip_payload_delta_last,
        run: "delta",
        problem: "checksum does not match",
        seqs: Some((5, Some(7))),
        also: &["the run record counts"],
        read: Read::Corrupt(5, Some(7)),
    },
    Case {
        name: "removed block",
        corrupt: remove_alpha_3,
        run: "alpha",
        problem: "seqs are not gapless",
        seqs: Some((3, Some(5))),
        also: &["hash chain is broken"],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "removed last block",
        corrupt: remove_alpha_10,
        run: "alpha",
        problem: "the run record counts 13 facts but the blocks hold 10",
        seqs: Some((10, Some(12))),
        also: &[],
        read: Read::Corrupt(10, Some(12)),
    },
    Case {
        name: "removed first block",
        corrupt: remove_alpha_0,
        run: "alpha",
        problem: "seqs are not gapless",
        seqs: Some((0, Some(2))),
        also: &[
            "hash chain is broken",
            "instead of run.started",
            "calls or tools disagree",
        ],
        read: Read::Corrupt(0, Some(2)),
    },
    Case {
        name: "rewritten block (validly sealed, other facts)",
        corrupt: rewrite_alpha_3,
        run: "alpha",
        problem: "hash chain is broken",
        seqs: Some((6, Some(9))),
        also: &[],
        read: Read::Rewritten(3, 5),
    },
    Case {
        name: "block of another run transplanted",
        corrupt: transplant_beta_into_alpha,
        run: "alpha",
        problem: "fact has seq 2 where 3 was expected",
        seqs: Some((3, Some(5))),
        also: &["hash chain is broken", "calls or tools disagree"],
        read: Read::Corrupt(3, Some(5)),
    },
    Case {
        name: "garbage run record",
        corrupt: garbage_record_beta,
        run: "#beta",
        problem: "run record does not decode",
        seqs: None,
        also: &[
            "the run id index points at no run record",
            "blocks of facts belong to no run record",
            "index has an entry that no run record agrees with",
        ],
        read: Read::RecordDamaged,
    },
    Case {
        name: "empty run record",
        corrupt: empty_record_beta,
        run: "#beta",
        problem: "empty run record",
        seqs: None,
        also: &[
            "the run id index points at no run record",
            "blocks of facts belong to no run record",
            "index has an entry that no run record agrees with",
        ],
        read: Read::RecordDamaged,
    },
    Case {
        name: "removed tool index entry",
        corrupt: remove_tool_index_beta,
        run: "beta",
        problem: "the tool index lacks an entry for this run",
        seqs: None,
        also: &[],
        read: Read::Intact,
    },
    Case {
        name: "removed start-time index entry",
        corrupt: remove_time_index_gamma,
        run: "gamma",
        problem: "the start-time index lacks an entry for this run",
        seqs: None,
        also: &[],
        read: Read::Intact,
    },
    Case {
        name: "stale status index entry",
        corrupt: stale_status_index_gamma,
        run: "gamma",
        problem: "the status index has an entry that no run record agrees with",
        seqs: None,
        also: &[],
        read: Read::Intact,
    },
];

// ---------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------

fn fmt_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("\n  {p}"))
        .collect::<String>()
}

/// Records the runs, damages the archive with `case.corrupt`, reopens it and
/// checks what verify and the readers say. Returns what went wrong.
fn check(case: &Case) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorded = record(dir.path());
    let damaged = case.run.trim_start_matches('#');

    let damaged_ord = {
        let db = open_sled(dir.path());
        let ord = ordinal(&db, damaged);
        (case.corrupt)(&db);
        db.flush().expect("sled flush");
        ord
    };
    let named = if case.run.starts_with('#') {
        format!("#{damaged_ord}")
    } else {
        damaged.to_owned()
    };

    let archive = Archive::open(dir.path(), ArchiveConfig::default())
        .map_err(|e| format!("the damaged archive does not open: {e}"))?;

    // verify names the run and the range.
    let report = archive
        .verify()
        .map_err(|e| format!("verify failed: {e}"))?;
    let all = fmt_problems(&report.problems);
    if !report.problems.iter().any(|p| {
        p.run_id.as_deref() == Some(named.as_str())
            && p.seqs == case.seqs
            && p.what.contains(case.problem)
    }) {
        return Err(format!(
            "verify does not report {:?} for run {named} at {:?}; it reports:{all}",
            case.problem, case.seqs
        ));
    }
    for p in &report.problems {
        let about_damaged = p
            .run_id
            .as_deref()
            .is_some_and(|r| r == damaged || r == format!("#{damaged_ord}"));
        if !about_damaged {
            return Err(format!(
                "verify reports a problem elsewhere: {p}; all:{all}"
            ));
        }
        let expected = (p.what.contains(case.problem) && p.seqs == case.seqs)
            || case.also.iter().any(|a| p.what.contains(a));
        if !expected {
            return Err(format!(
                "verify reports an unexpected problem: {p}; all:{all}"
            ));
        }
    }

    // Other runs read completely and correctly.
    for (id, facts) in &recorded {
        if *id == damaged {
            continue;
        }
        let got: Vec<Fact> = archive
            .facts(id, ..)
            .map_err(|e| format!("facts({id}): {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("reading healthy run {id}: {e}"))?;
        if &got != facts {
            return Err(format!("healthy run {id} reads differently"));
        }
        let record = archive.run(id).map_err(|e| format!("run({id}): {e}"))?;
        if record.facts != facts.len() as u64 {
            return Err(format!("healthy run {id}: record counts {}", record.facts));
        }
    }

    // The damaged run.
    let want = &recorded[damaged];
    let got: Vec<Result<Fact, ArchiveError>> = archive
        .facts(damaged, ..)
        .map_err(|e| format!("facts({damaged}): {e}"))?
        .collect();
    check_read(damaged, case.read, want, &got)?;
    check_views(&archive, damaged, &got)?;
    // A range starting inside the damaged block, and one after it.
    if let Read::Corrupt(first, last) = case.read {
        let sub: Vec<Result<Fact, ArchiveError>> = archive
            .facts(damaged, first + 1..)
            .map_err(|e| format!("facts({damaged}, {}..): {e}", first + 1))?
            .collect();
        // Every damaged block of the table holds more than one fact.
        let head_ok = matches!(sub.first(), Some(Err(ArchiveError::Corrupt {
                gap,
                ..
            })) if gap.first == first && gap.last == last);
        if !head_ok {
            return Err(format!(
                "reading {damaged} from {} does not begin with the damaged block: {:?}",
                first + 1,
                sub.first()
            ));
        }
        if let Some(l) = last {
            let after: Vec<Fact> = archive
                .facts(damaged, l + 1..)
                .map_err(|e| format!("facts({damaged}, {}..): {e}", l + 1))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("reading after the damage: {e}"))?;
            let want_after: Vec<Fact> = want.iter().filter(|f| f.seq > l).cloned().collect();
            if after != want_after {
                return Err(format!("reading {damaged} after seq {l} differs"));
            }
        }
    }

    // Following the damaged run gives what reading it gives, and ends (the
    // run is closed or incomplete): a damaged block is reported once.
    let followed: Vec<Result<Fact, ArchiveError>> = futures::executor::block_on(
        futures::StreamExt::collect(futures::StreamExt::take(archive.follow(damaged, 0), 1_000)),
    );
    if followed.len() == 1_000 {
        return Err(format!("following {damaged} does not end"));
    }
    if !matches!(case.read, Read::RecordDamaged) {
        let show = |items: &[Result<Fact, ArchiveError>]| {
            items
                .iter()
                .map(|r| match r {
                    Ok(f) => f.seq.to_string(),
                    Err(e) => format!("<{e}>"),
                })
                .collect::<Vec<_>>()
        };
        if show(&followed) != show(&got) {
            return Err(format!(
                "following {damaged} gives {:?}, reading it gives {:?}",
                show(&followed),
                show(&got)
            ));
        }
    }

    // Nothing else panics or fails on the damaged archive.
    match archive.run(damaged) {
        Ok(r) if matches!(case.read, Read::RecordDamaged) => {
            return Err(format!("run({damaged}) reads a damaged record: {r:?}"))
        }
        Ok(r) => {
            let want_state = if damaged == "delta" {
                RunState::Incomplete
            } else {
                r.state
            };
            if r.state != want_state {
                return Err(format!("{damaged} is {}, not incomplete", r.state));
            }
        }
        // A damaged record is its own error, naming the run.
        Err(ArchiveError::DamagedRecord { run, .. })
            if matches!(case.read, Read::RecordDamaged) && run == damaged => {}
        Err(e) => return Err(format!("run({damaged}): {e}")),
    }
    let page = archive
        .list_runs(&RunFilter::default())
        .map_err(|e| format!("list_runs: {e}"))?;
    let stats = archive.stats().map_err(|e| format!("stats: {e}"))?;
    // A damaged record is named, not dropped silently, by the listing and
    // by the figures; an intact archive names none.
    let named = |damaged: &[reel_archive::DamagedRun]| {
        damaged.len() == 1 && damaged[0].ordinal.is_some() && !damaged[0].detail.is_empty()
    };
    match case.read {
        Read::RecordDamaged if !named(&page.damaged) || !named(&stats.damaged) => {
            return Err(format!(
                "the damaged record of {damaged} is not named: list_runs {:?}, stats {:?}",
                page.damaged, stats.damaged
            ))
        }
        Read::RecordDamaged => {}
        _ if !page.damaged.is_empty() || !stats.damaged.is_empty() => {
            return Err(format!(
                "{damaged}: an intact record is named damaged: {:?} {:?}",
                page.damaged, stats.damaged
            ))
        }
        _ => {}
    }
    archive
        .list_runs(&RunFilter {
            tenant: Some("acme".into()),
            tool: Some("search".into()),
            ..RunFilter::default()
        })
        .map_err(|e| format!("list_runs: {e}"))?;
    let _ = archive.run_ids().collect::<Vec<_>>();
    archive.stats().map_err(|e| format!("stats: {e}"))?;
    // The damaged run takes no more facts (it was closed or is incomplete).
    match archive.append(damaged, vec![fact(damaged, 99, 0)]) {
        Err(ArchiveError::RunClosed { .. }) => {}
        other => return Err(format!("append to damaged {damaged}: {other:?}")),
    }
    Ok(())
}

/// A sink keeping every view as the fact it stands for.
struct Collect(Vec<Result<Fact, Gap>>);

impl ViewSink for Collect {
    fn view(&mut self, fact: &FactView<'_>) {
        let seq = fact.seq();
        self.0.push(fact.clone().into_fact().map_err(|detail| Gap {
            first: seq,
            last: Some(seq),
            detail: format!("a view does not make its fact: {detail}"),
        }));
    }

    fn gap(&mut self, gap: &Gap) {
        self.0.push(Err(gap.clone()));
    }
}

/// Read as views (a timeline's reading, `Facts::views`), the run gives
/// what reading it whole gave (`got`): the same facts, the same damage at
/// the same place with the same detail, the same error that stops it; and
/// the timelines built both ways are equal.
fn check_views(
    archive: &Archive,
    run: &str,
    got: &[Result<Fact, ArchiveError>],
) -> Result<(), String> {
    let mut want = Vec::new();
    let mut stop = None;
    for item in got {
        match item {
            Ok(f) => want.push(Ok(f.clone())),
            Err(ArchiveError::Corrupt { gap, .. }) => want.push(Err(gap.clone())),
            Err(e) => {
                stop = Some(e.to_string());
                break;
            }
        }
    }
    let mut sink = Collect(Vec::new());
    let read = archive
        .facts(run, ..)
        .and_then(|f| f.views(&mut sink))
        .map_err(|e| e.to_string());
    if read.err() != stop {
        return Err(format!(
            "reading {run} as views does not stop as reading it whole does"
        ));
    }
    if sink.0 != want {
        return Err(format!(
            "{run} reads differently as views:\n{:?}\nwhole:\n{want:?}",
            sink.0
        ));
    }
    let mut owned = TimelineBuilder::default();
    for item in &want {
        match item {
            Ok(f) => owned.push(f),
            Err(gap) => owned.push_gap(gap),
        }
    }
    let mut views = TimelineBuilder::default();
    let _ = archive.facts(run, ..).and_then(|f| f.views(&mut views));
    if owned.finish() != views.finish() {
        return Err(format!("{run}: the timeline from views differs"));
    }
    Ok(())
}

fn check_read(
    run: &str,
    read: Read,
    want: &[Fact],
    got: &[Result<Fact, ArchiveError>],
) -> Result<(), String> {
    let show = || {
        got.iter()
            .map(|r| match r {
                Ok(f) => format!("{}", f.seq),
                Err(e) => format!("<{e}>"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    match read {
        Read::Intact | Read::RecordDamaged => {
            let ok: Result<Vec<Fact>, _> = got
                .iter()
                .map(|r| r.as_ref().cloned().map_err(|e| e.to_string()))
                .collect();
            if ok.as_deref() != Ok(want) {
                return Err(format!("{run} should read intact, reads: {}", show()));
            }
        }
        Read::Rewritten(first, last) => {
            let ok: Vec<Fact> = got
                .iter()
                .map(|r| r.as_ref().cloned().map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{run} should read without error: {e}"))?;
            if ok.len() != want.len() {
                return Err(format!("{run} reads {} facts", ok.len()));
            }
            let mut changed = 0;
            for (g, w) in ok.iter().zip(want) {
                if g.seq != w.seq {
                    return Err(format!(
                        "{run} reads seq {} where {} was recorded",
                        g.seq, w.seq
                    ));
                }
                if g != w {
                    if !(first..=last).contains(&g.seq) {
                        return Err(format!("{run} seq {} reads differently", g.seq));
                    }
                    changed += 1;
                }
            }
            if changed == 0 {
                return Err(format!("{run} reads the original history"));
            }
        }
        Read::Corrupt(first, last) => {
            let mut errors = 0;
            let mut facts = Vec::new();
            for item in got {
                match item {
                    Ok(f) => facts.push(f.clone()),
                    Err(ArchiveError::Corrupt { run_id, gap })
                        if run_id == run && gap.first == first && gap.last == last =>
                    {
                        errors += 1;
                        // In seq order: after the facts before the damage.
                        if facts.last().is_some_and(|f: &Fact| f.seq >= first) {
                            return Err(format!("{run}: the damage is out of order: {}", show()));
                        }
                    }
                    Err(e) => return Err(format!("{run}: unexpected error {e}: {}", show())),
                }
            }
            if errors != 1 {
                return Err(format!(
                    "{run}: want one Corrupt item for {first}..={last:?}, got: {}",
                    show()
                ));
            }
            let want: Vec<Fact> = want
                .iter()
                .filter(|f| f.seq < first || last.is_some_and(|l| f.seq > l))
                .cloned()
                .collect();
            if facts != want {
                return Err(format!(
                    "{run}: the facts around the damage differ: {}",
                    show()
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn damage_is_reported_where_it_is() {
    let mut failures = Vec::new();
    for case in CASES {
        let outcome = std::panic::catch_unwind(|| check(case));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{}: {e}", case.name)),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: PANICKED: {msg}", case.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
}

/// The recorded blocks are stored compressed, so the cases that flip or cut
/// recorded bytes damage compressed payloads (the plain format has cases of
/// its own).
#[test]
fn the_recorded_blocks_are_compressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    record(dir.path());
    let db = open_sled(dir.path());
    let events = db.open_tree("events").expect("events tree");
    let versions: Vec<u8> = events
        .iter()
        .values()
        .map(|v| v.expect("block")[0])
        .collect();
    assert_eq!(versions.len(), 10);
    assert!(versions.iter().all(|&v| v == BLOCK_ZSTD), "{versions:?}");
}

/// A run whose blocks mix the formats (the last one stored plain, as an
/// older reel or a tiny block leaves it) reads and verifies whole.
#[test]
fn plain_and_compressed_blocks_read_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorded = record(dir.path());
    {
        let db = open_sled(dir.path());
        edit_block(&db, "alpha", 10, |v| {
            let plain = plain_payload(v);
            reseal(v, BLOCK_PLAIN, &plain);
        });
        db.flush().expect("sled flush");
    }
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("open");
    let report = archive.verify().expect("verify");
    assert!(report.is_ok(), "{}", fmt_problems(&report.problems));
    let got: Vec<Fact> = archive
        .facts("alpha", ..)
        .expect("facts")
        .collect::<Result<_, _>>()
        .expect("alpha reads");
    assert_eq!(got, recorded["alpha"]);
    let tail: Vec<Fact> = archive
        .facts("alpha", 11..)
        .expect("facts")
        .collect::<Result<_, _>>()
        .expect("alpha's tail reads");
    assert_eq!(tail, recorded["alpha"][11..]);
}

/// The forged block really is validly sealed: on its own (in the scratch
/// archive it was recorded in) it verifies.
#[test]
fn a_forged_history_verifies_on_its_own() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(scratch.path(), ArchiveConfig::default()).expect("open");
    for b in batches(&SCRIPTS[0], Some(1)) {
        archive.append("alpha", b).expect("append");
    }
    let report = archive.verify().expect("verify");
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Opens an archive's sled database directly, waiting a moment for sled's
/// own background writes of the just-closed archive to let go of the lock.
fn open_sled(dir: &std::path::Path) -> sled::Db {
    let started = std::time::Instant::now();
    loop {
        match sled::open(dir) {
            Ok(db) => return db,
            Err(e) if started.elapsed() < std::time::Duration::from_secs(5) => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("sled does not open {}: {e}", dir.display()),
        }
    }
}
