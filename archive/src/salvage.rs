//! `reel salvage`: every intact block and artifact of a damaged archive,
//! into a fresh one, even when sled cannot open the store.
//!
//! Blocks are self-describing (see `block`: version, count, previous
//! digest, sha-256 digest), and sled stores a value as its length (sled's
//! varint) followed by its bytes, uncompressed, in the `db` file, in
//! `blobs/` and wherever else a copy of a page lies. So salvage reads two
//! sources and merges them:
//!
//! 1. sled itself, on a copy of the store (the damaged archive is never
//!    written to): whatever sled can still iterate, with each block's run
//!    taken from its key (`keys::split_event_key`) and each artifact checked
//!    against its digest;
//! 2. every file of the directory, scanned byte by byte for a sled length
//!    followed by a block whose digest matches its bytes (a match of a
//!    sha-256 is no accident), and for the artifacts the recovered facts
//!    refer to (a value whose sha-256 is the digest asked for).
//!
//! Runs are then reassembled by their hash chain: a run starts at a block
//! whose previous digest is zero and whose first fact opens a stream
//! (`run.started`, or a call outside any run), and goes on through the
//! block whose previous digest is the last one's digest and whose first seq
//! follows. Where the chain is broken, the run goes on only when the next
//! part is known to be its own: sled's key names the same run, or the
//! damaged block in between is found with its header intact (its previous
//! digest is the last recovered block's digest, its own digest the next
//! part's previous digest). The seqs in between are lost, and recorded as
//! such (the `salvaged` tree): `reel verify` lists them as known losses,
//! not as damage, and reading the run shows them as a gap naming salvage.
//! *Why a record beside the run, not a fact in it:* a fact salvage wrote
//! would be one nobody recorded, and the blocks are kept byte for byte (the
//! chain still proves every recovered fact is the one recorded).
//! Intact blocks that no recovered run start leads to are reported as
//! lost: no run can be named for them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

use reel_core::fact::Fact;
use reel_core::run::{RunRecord, RunState};

use crate::record::encode_record;
use crate::{block, keys, Archive, ArchiveConfig, ArchiveError, Result};
use reel_core::codec::Digest;

mod chain;
mod raw;
mod sled_copy;

use chain::{lost_pairs, reassemble, Reassembled};
use raw::{collect_artifacts, files_of, find_artifacts, scan_blocks};
use sled_copy::read_with_sled;
/// Seqs of a run that salvage could not recover: `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LostSeqs {
    /// The first lost seq.
    pub first: u64,
    /// The last lost seq.
    pub last: u64,
}

/// One run salvage recovered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SalvagedRun {
    /// The run's id (or the key of a call outside any run).
    pub run_id: String,
    /// Blocks recovered.
    pub blocks: u64,
    /// Facts recovered.
    pub facts: u64,
    /// Its state in the fresh archive (incomplete when its end was lost).
    pub state: RunState,
    /// Seqs lost between recovered parts: where its chain is broken.
    pub lost: Vec<LostSeqs>,
}

/// What `reel salvage` recovered and what it lost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SalvageReport {
    /// What sled said when the store was opened: `None` when it opened.
    pub sled_refused: Option<String>,
    /// Runs recovered (each with at least its first block).
    pub runs_recovered: u64,
    /// Recovered runs whose chain is broken (facts lost inside them).
    pub runs_broken: u64,
    /// Runs lost: those sled's records name of which no first block was
    /// recovered, and those the control record counts that neither sled's
    /// records nor the blocks name.
    pub runs_lost: u64,
    /// Durable flushes sled's own recovery lost (the control record's
    /// epoch against sled's): what reading the store would have missed;
    /// what salvage recovered of them is in the counts above.
    #[serde(default)]
    pub flushes_lost_by_sled: u64,
    /// Blocks recovered into the fresh archive.
    pub blocks_recovered: u64,
    /// Intact blocks found that no recovered run start leads to.
    pub blocks_unplaced: u64,
    /// Facts recovered.
    pub facts_recovered: u64,
    /// Facts known lost: inside broken chains, and in unplaced blocks.
    pub facts_lost: u64,
    /// Artifacts the recovered facts refer to that were recovered.
    pub artifacts_recovered: u64,
    /// Artifacts the recovered facts refer to that no intact copy holds.
    pub artifacts_lost: u64,
    /// The recovered runs.
    pub runs: Vec<SalvagedRun>,
    /// What is damaged in the write-ahead journal's acknowledged part (see
    /// `wal`): acknowledged batches that were only there may be lost
    /// beyond what the counts above can tell; every intact frame, past
    /// the damage too, was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_damaged: Option<String>,
}

impl SalvageReport {
    /// Whether salvage knows it lost something (the CLI's exit 2).
    pub fn lost_anything(&self) -> bool {
        self.facts_lost + self.artifacts_lost + self.blocks_unplaced + self.runs_lost > 0
            || self.journal_damaged.is_some()
    }
}

/// An intact block found somewhere.
struct Found {
    value: Vec<u8>,
    prev: Digest,
    first: u64,
    facts: Vec<Fact>,
    /// The run ordinal sled's key gave it, when sled read it.
    ordinal: Option<u64>,
}

impl Found {
    fn end(&self) -> u64 {
        self.first + self.facts.len() as u64
    }
}

/// What salvage gathered before reassembling.
#[derive(Default)]
struct Pool {
    blocks: HashMap<Digest, Found>,
    artifacts: HashMap<Digest, Vec<u8>>,
    /// Run ids of sled's readable records, by ordinal.
    records: BTreeMap<u64, String>,
    /// The facts each readable record counts, by run id.
    record_facts: HashMap<String, u64>,
    /// The control record sled's store holds (see `control`).
    stored_control: Option<crate::control::Control>,
    /// The archive's format stamp, when sled read it.
    format: Option<u32>,
    /// Runs pruned from the archive (sled's tombstones): copies of their
    /// blocks may still lie in sled's files, and are not brought back.
    pruned: HashSet<String>,
    /// The raw bytes of every file of the damaged archive.
    files: Vec<Vec<u8>>,
}

impl Pool {
    /// Checks a stored block and keeps it when it is intact.
    fn offer(&mut self, value: &[u8], ordinal: Option<u64>) -> bool {
        let Some(found) = check_block(value, ordinal) else {
            return false;
        };
        let digest = block::digest_of(value);
        match self.blocks.get_mut(&digest) {
            Some(known) => {
                known.ordinal = known.ordinal.or(ordinal);
            }
            None => {
                self.blocks.insert(digest, found);
            }
        }
        true
    }
}

/// An intact block: header, checksum, facts decoded with gapless seqs.
fn check_block(value: &[u8], ordinal: Option<u64>) -> Option<Found> {
    let opened = block::open(value).ok()?;
    let (first, _) = block::fact_at(&opened.payload, 0, block::Decode::Whole).ok()?;
    let facts = block::decode_facts(&opened, first.seq()).ok()?;
    let (prev, _) = block::header_digests(value);
    Some(Found {
        value: value.to_vec(),
        prev: prev?,
        first: first.seq(),
        facts,
        ordinal,
    })
}

/// Offers the journal's intact frames to `pool` (see `wal`: what was
/// acknowledged since the last checkpoint may be in no file of sled's),
/// and says what is damaged in its acknowledged part.
fn read_journal(from: &Path, pool: &mut Pool) -> Option<String> {
    for (ordinal, value) in crate::wal::journal_blocks(from) {
        pool.offer(&value, Some(ordinal));
    }
    match crate::control::read(from) {
        Ok(crate::control::Found::Record(_, control)) => match crate::wal::scan(from, &control) {
            Err(ArchiveError::Damaged { detail, .. }) => Some(detail),
            _ => None,
        },
        _ => None,
    }
}

/// The largest file salvage reads whole (larger ones are not sled's).
const MAX_FILE: u64 = 1 << 32;

/// Recovers every intact block and artifact of the archive in `from` into a
/// fresh archive in `into` (which must not hold an archive yet). `from` is
/// only read. See the module docs for how.
pub fn salvage(from: &Path, into: &Path, config: ArchiveConfig) -> Result<SalvageReport> {
    if !from.is_dir() {
        return Err(ArchiveError::Format {
            dir: from.to_path_buf(),
            detail: "it is not a directory; pass the damaged archive's directory".into(),
        });
    }
    // Nothing of an archive in it (sled's `db`, `conf`, `snap.*`, `blobs`,
    // reel's `reel.*` files): a wrong directory, not a damaged archive. A
    // salvage of it would "recover" nothing and say so as if it had looked.
    let archive_like = std::fs::read_dir(from)
        .map(|entries| {
            entries.filter_map(|e| e.ok()).any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                matches!(name.as_str(), "db" | "conf" | "blobs")
                    || name.starts_with("snap.")
                    || name.starts_with("reel.")
            })
        })
        .unwrap_or(false);
    if !archive_like {
        return Err(ArchiveError::NotAnArchive {
            dir: from.to_path_buf(),
            detail: "it holds nothing of one (no sled store `db`, `conf` or `snap.*`, no \
                     `reel.*` file): pass the damaged archive's directory"
                .into(),
        });
    }
    if into.exists()
        && std::fs::read_dir(into)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(ArchiveError::Format {
            dir: into.to_path_buf(),
            detail: "salvage writes a fresh archive: pass a new or empty directory with --into"
                .into(),
        });
    }
    let mut pool = Pool::default();
    let mut report = SalvageReport {
        sled_refused: read_with_sled(from, &mut pool),
        ..SalvageReport::default()
    };
    // A newer reel's archive is not damaged: its blocks are of a version
    // this reel does not know, and would all be reported lost.
    if let Some(found) = pool.format.filter(|&f| f > crate::FORMAT_VERSION) {
        return Err(ArchiveError::NewerFormat {
            dir: from.to_path_buf(),
            found,
            supported: crate::FORMAT_VERSION,
        });
    }
    for path in files_of(from) {
        if let Ok(bytes) = std::fs::read(&path) {
            scan_blocks(&bytes, &mut pool);
            pool.files.push(bytes);
        }
    }
    report.journal_damaged = read_journal(from, &mut pool);
    let runs = reassemble(&pool, &mut report);
    let fresh = Archive::open(into, config)?;
    fresh.stamp_format()?;
    // The artifacts the recovered facts refer to, with their sizes when a
    // fact names them.
    let mut wanted: HashMap<Digest, Option<u64>> = HashMap::new();
    for run in &runs {
        for found in &run.blocks {
            for fact in &found.facts {
                collect_artifacts(&serde_json::to_value(fact).unwrap_or_default(), &mut wanted);
            }
        }
    }
    let scanned = find_artifacts(&pool, &wanted);
    // Artifact files (see `files`): each taken only when its bytes hash to
    // its name.
    let files = crate::files::Files::new(from);
    for digest in wanted.keys() {
        let from_file = || files.read(digest).ok()?.ok()?;
        match pool
            .artifacts
            .get(digest)
            .or_else(|| scanned.get(digest))
            .cloned()
            .or_else(from_file)
        {
            Some(bytes) => {
                fresh.put_artifact(&bytes)?;
                report.artifacts_recovered += 1;
            }
            None => report.artifacts_lost += 1,
        }
    }
    for run in runs {
        report.runs.push(fresh.write_salvaged(run)?);
    }
    fresh.flush()?;
    report.runs_recovered = report.runs.len() as u64;
    report.runs_broken = report.runs.iter().filter(|r| !r.lost.is_empty()).count() as u64;
    report.blocks_recovered = report.runs.iter().map(|r| r.blocks).sum();
    report.facts_recovered = report.runs.iter().map(|r| r.facts).sum();
    report.facts_lost += report
        .runs
        .iter()
        .flat_map(|r| &r.lost)
        .map(|l| l.last - l.first + 1)
        .sum::<u64>();
    // A run whose record counts more facts than its recovered chain
    // reaches lost its tail.
    for run in &report.runs {
        let reached = run.facts + run.lost.iter().map(|l| l.last - l.first + 1).sum::<u64>();
        if let Some(&counted) = pool.record_facts.get(&run.run_id) {
            report.facts_lost += counted.saturating_sub(reached);
        }
    }
    let recovered: HashSet<&str> = report.runs.iter().map(|r| r.run_id.as_str()).collect();
    report.runs_lost = pool
        .records
        .values()
        .filter(|id| !recovered.contains(id.as_str()))
        .count() as u64;
    // What the control record says was durable (see `control`): runs
    // created that no recovered run, sled record or tombstone accounts
    // for are lost, even when sled's recovery dropped their records.
    if let Ok(crate::control::Found::Record(_, control)) = crate::control::read(from) {
        let named: HashSet<&str> = recovered
            .iter()
            .copied()
            .chain(pool.records.values().map(String::as_str))
            .chain(pool.pruned.iter().map(String::as_str))
            .collect();
        report.runs_lost += control.runs.saturating_sub(named.len() as u64);
        // Facts the control record counts that nothing above accounts for
        // (a run's lost tail whose record was lost too).
        let accounted = report.facts_recovered + report.facts_lost;
        report.facts_lost += control.facts.saturating_sub(accounted);
        // Only where sled recovered the store at all (else it lost
        // everything, and said so).
        if report.sled_refused.is_none() {
            let held = pool.stored_control.map_or(0, |c| c.epoch);
            report.flushes_lost_by_sled = control.epoch.saturating_sub(held);
        }
    }
    Ok(report)
}

impl Archive {
    /// Writes one reassembled run into this (fresh) archive: its blocks as
    /// they were stored, its record derived from its facts, its index
    /// entries, and the seqs it lost.
    fn write_salvaged(&self, run: Reassembled<'_>) -> Result<SalvagedRun> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let first = &run.blocks[0].facts[0];
        let mut record = RunRecord::from_first(first).expect("a run starts with a stream head");
        for found in &run.blocks {
            for fact in &found.facts {
                record.observe(fact);
            }
        }
        if !record.state.is_closed() {
            record.state = RunState::Incomplete;
        }
        let ordinal = self.new_ordinal()?;
        for found in &run.blocks {
            t.events
                .insert(keys::event_key(ordinal, found.first), &found.value[..])
                .map_err(s)?;
        }
        if !run.lost.is_empty() {
            t.salvaged
                .insert(
                    keys::run_key(ordinal),
                    keys::lost_value(&lost_pairs(&run.lost)),
                )
                .map_err(s)?;
        }
        t.runs
            .insert(keys::run_key(ordinal), encode_record(&record))
            .map_err(s)?;
        t.run_ids
            .insert(record.run_id.as_bytes(), &keys::run_key(ordinal)[..])
            .map_err(s)?;
        let entries = keys::index_entries(ordinal, &record);
        self.index_but_status(&entries)?;
        t.by_status.insert(&entries.status, &[]).map_err(s)?;
        self.count_run();
        self.count_facts(run.blocks.iter().map(|f| f.facts.len() as u64).sum(), 0);
        Ok(SalvagedRun {
            run_id: record.run_id,
            blocks: run.blocks.len() as u64,
            facts: run.blocks.iter().map(|f| f.facts.len() as u64).sum(),
            state: record.state,
            lost: run.lost,
        })
    }

    /// The seqs salvage recorded as lost for the run `ordinal`.
    pub(crate) fn salvage_lost(&self, ordinal: u64) -> Result<Vec<LostSeqs>> {
        Ok(self
            .trees()
            .salvaged
            .get(keys::run_key(ordinal))
            .map_err(|e| self.storage(e))?
            .map(|v| {
                keys::lost_from(&v)
                    .into_iter()
                    .map(|(first, last)| LostSeqs { first, last })
                    .collect()
            })
            .unwrap_or_default())
    }
}
