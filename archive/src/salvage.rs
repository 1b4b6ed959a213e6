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
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use reel_core::fact::Fact;
use reel_core::run::{RunRecord, RunState};

use crate::record::{decode_record, encode_record};
use crate::{block, keys, Archive, ArchiveConfig, ArchiveError, Digest, Result};

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
    let (first, _) = block::fact_at(&opened.payload, 0).ok()?;
    let facts = block::decode_facts(&opened, first.seq).ok()?;
    let (prev, _) = block::header_digests(value);
    Some(Found {
        value: value.to_vec(),
        prev: prev?,
        first: first.seq,
        facts,
        ordinal,
    })
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
    for digest in wanted.keys() {
        match pool.artifacts.get(digest).or_else(|| scanned.get(digest)) {
            Some(bytes) => {
                fresh.put_artifact(bytes)?;
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

/// Reads what sled can of a copy of the store into `pool`; returns what
/// sled said when it refused (or panicked), `None` when it opened.
fn read_with_sled(from: &Path, pool: &mut Pool) -> Option<String> {
    let copy = std::env::temp_dir().join(format!(
        "reel-salvage-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    if let Err(e) = copy_dir(from, &copy) {
        let _ = std::fs::remove_dir_all(&copy);
        return Some(format!("the store could not be copied to be opened: {e}"));
    }
    // sled 0.34 may panic on some damage instead of returning an error:
    // that is a refusal like any other.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut found = Pool::default();
        let refused = sled_into(&copy, &mut found);
        (refused, found)
    }));
    let _ = std::fs::remove_dir_all(&copy);
    match read {
        Ok((refused, found)) => {
            for (digest, block) in found.blocks {
                pool.blocks.entry(digest).or_insert(block);
            }
            pool.artifacts.extend(found.artifacts);
            pool.records.extend(found.records);
            pool.record_facts.extend(found.record_facts);
            pool.stored_control = found.stored_control;
            pool.format = found.format;
            pool.pruned = found.pruned;
            refused
        }
        Err(_) => Some("sled panicked while reading the store".into()),
    }
}

fn sled_into(dir: &Path, pool: &mut Pool) -> Option<String> {
    let db = match sled::Config::new().path(dir).flush_every_ms(None).open() {
        Ok(db) => db,
        Err(e) => return Some(e.to_string()),
    };
    let mut refused = None;
    let mut note = |e: sled::Error| {
        refused.get_or_insert_with(|| format!("sled opened the store but failed reading it: {e}"));
    };
    if let Ok(Some(v)) = db
        .open_tree(keys::T_META)
        .and_then(|m| m.get(keys::META_FORMAT))
    {
        pool.format = keys::format_from(&v);
    }
    if let Ok(Some(v)) = db
        .open_tree(keys::T_META)
        .and_then(|m| m.get(keys::META_CONTROL))
    {
        pool.stored_control = crate::control::Control::from_meta(&v);
    }
    if let Ok(pruned) = db.open_tree(keys::T_PRUNED) {
        for (_, v) in pruned.iter().flatten() {
            if let Some((_, _, _, run_id)) = keys::tombstone_from(&v) {
                pool.pruned.insert(run_id);
            }
        }
    }
    match db.open_tree(keys::T_RUNS) {
        Ok(runs) => {
            for item in runs.iter() {
                match item {
                    Ok((k, v)) => {
                        if let (Some(o), Ok(r)) = (keys::ordinal_from(&k), decode_record(&v)) {
                            pool.record_facts.insert(r.run_id.clone(), r.facts);
                            pool.records.insert(o, r.run_id);
                        }
                    }
                    Err(e) => {
                        note(e);
                        break;
                    }
                }
            }
        }
        Err(e) => note(e),
    }
    match db.open_tree(keys::T_EVENTS) {
        Ok(events) => {
            for item in events.iter() {
                match item {
                    Ok((k, v)) => {
                        let ordinal = keys::split_event_key(&k).map(|(o, _)| o);
                        pool.offer(&v, ordinal);
                    }
                    Err(e) => {
                        note(e);
                        break;
                    }
                }
            }
        }
        Err(e) => note(e),
    }
    match db.open_tree(keys::T_ARTIFACTS) {
        Ok(artifacts) => {
            for item in artifacts.iter() {
                match item {
                    Ok((k, v)) => {
                        let digest: Digest = Sha256::digest(&v).into();
                        if digest[..] == k[..] {
                            pool.artifacts.insert(digest, v.to_vec());
                        }
                    }
                    Err(e) => {
                        note(e);
                        break;
                    }
                }
            }
        }
        Err(e) => note(e),
    }
    refused
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Every regular file under `dir` (sled's `db`, `blobs/`, snapshots).
fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file()
                && entry
                    .metadata()
                    .map(|m| m.len() <= MAX_FILE)
                    .unwrap_or(false)
            {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// The sled varint that ends right before `at`, as (value, its length):
/// each length sled's encoding would use for that value.
fn varints_before(bytes: &[u8], at: usize) -> impl Iterator<Item = u64> + '_ {
    (1..=5usize).filter_map(move |k| {
        let start = at.checked_sub(k)?;
        let b = &bytes[start..at];
        match (k, b[0]) {
            (1, 0..=240) => Some(u64::from(b[0])),
            (2, 241..=248) => Some(240 + 256 * (u64::from(b[0]) - 241) + u64::from(b[1])),
            (3, 249) => Some(2288 + 256 * u64::from(b[1]) + u64::from(b[2])),
            (4, 250) | (5, 251) => {
                let mut le = [0u8; 8];
                le[..k - 1].copy_from_slice(&b[1..]);
                Some(u64::from_le_bytes(le))
            }
            _ => None,
        }
    })
}

/// `n` as sled writes a length.
fn varint_bytes(n: u64) -> Vec<u8> {
    if n <= 240 {
        vec![n as u8]
    } else if n <= 2287 {
        vec![((n - 240) / 256 + 241) as u8, ((n - 240) % 256) as u8]
    } else if n <= 67823 {
        vec![249, ((n - 2288) / 256) as u8, ((n - 2288) % 256) as u8]
    } else {
        // 250 + k - 4: the value in k - 1 little-endian bytes.
        let le = n.to_le_bytes();
        let k = (1..=8)
            .find(|&k| k == 8 || n >> (8 * k) == 0)
            .unwrap_or(8)
            .max(3);
        let mut out = vec![(247 + k) as u8];
        out.extend_from_slice(&le[..k]);
        out
    }
}

/// The sled varint starting at `at`: (value, bytes it takes).
fn varint_at(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let b = bytes.get(at..)?;
    let first = *b.first()?;
    Some(match first {
        0..=240 => (u64::from(first), 1),
        241..=248 => (
            240 + 256 * (u64::from(first) - 241) + u64::from(*b.get(1)?),
            2,
        ),
        249 => (
            2288 + 256 * u64::from(*b.get(1)?) + u64::from(*b.get(2)?),
            3,
        ),
        other => {
            let sz = other as usize - 247;
            let mut le = [0u8; 8];
            le[..sz].copy_from_slice(b.get(1..=sz)?);
            (u64::from_le_bytes(le), sz + 1)
        }
    })
}

/// Finds every intact block in raw bytes: a block version byte right after
/// a sled length, a plausible fact count, and a digest that matches.
fn scan_blocks(bytes: &[u8], pool: &mut Pool) {
    for at in 1..bytes.len() {
        if !block::known_version(bytes[at]) {
            continue;
        }
        let Some(header) = bytes.get(at..at + block::HEADER_LEN) else {
            break;
        };
        let count = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        // Each fact takes at least 5 bytes of what is left of the file.
        if count == 0 || count as usize > (bytes.len() - at) / 5 {
            continue;
        }
        for len in varints_before(bytes, at) {
            let Ok(len) = usize::try_from(len) else {
                continue;
            };
            // Each fact takes at least its 4-byte length and a byte (a
            // compressed payload holds at least its 4-byte size).
            if len < block::HEADER_LEN + 4 || (count as usize) > len {
                continue;
            }
            let Some(value) = bytes.get(at..at + len) else {
                continue;
            };
            if block::digest_of(value)[..] == value[37..block::HEADER_LEN] {
                pool.offer(value, None);
            }
        }
    }
}

/// Collects the `sha256:<hex>` digests a fact refers to, with the size a
/// neighbouring `size` field gives (an artifact's ticket, a spilled
/// payload's marker).
fn collect_artifacts(value: &serde_json::Value, out: &mut HashMap<Digest, Option<u64>>) {
    match value {
        serde_json::Value::String(s) => {
            if let Some(d) = reel_core::codec::parse_digest(s) {
                out.entry(d).or_insert(None);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_artifacts(v, out)),
        serde_json::Value::Object(map) => {
            let size = map.get("size").and_then(serde_json::Value::as_u64);
            for v in map.values() {
                if let (Some(size), Some(d)) =
                    (size, v.as_str().and_then(reel_core::codec::parse_digest))
                {
                    out.insert(d, Some(size));
                } else {
                    collect_artifacts(v, out);
                }
            }
        }
        _ => {}
    }
}

/// Looks for each wanted artifact not yet found in the raw bytes: a sled
/// value of its size (its length as sled writes it, then the bytes), or the
/// value right after its key (sled writes an insert as key, then value);
/// each candidate is kept only when its sha-256 is the digest.
fn find_artifacts(pool: &Pool, wanted: &HashMap<Digest, Option<u64>>) -> HashMap<Digest, Vec<u8>> {
    let missing: Vec<(Digest, Option<u64>)> = wanted
        .iter()
        .filter(|(d, _)| !pool.artifacts.contains_key(*d))
        .map(|(d, s)| (*d, *s))
        .collect();
    let mut found = HashMap::new();
    for bytes in &pool.files {
        for (digest, size) in &missing {
            if found.contains_key(digest) {
                continue;
            }
            // After the key: its last 16 bytes (sled may drop a prefix
            // the key shares with its neighbours), then the value.
            let mut hit = None;
            for i in memchr::memmem::find_iter(bytes, &digest[16..]) {
                if let Some((len, k)) = varint_at(bytes, i + 16) {
                    let start = i + 16 + k;
                    if let Some(v) = usize::try_from(len)
                        .ok()
                        .and_then(|len| bytes.get(start..start.checked_add(len)?))
                    {
                        if Sha256::digest(v)[..] == digest[..] {
                            hit = Some(v.to_vec());
                            break;
                        }
                    }
                }
            }
            // A value of the size the facts give, after that size as sled
            // writes it.
            if hit.is_none() {
                if let Some(size) = *size {
                    let length = varint_bytes(size);
                    for i in memchr::memmem::find_iter(bytes, &length) {
                        let at = i + length.len();
                        let v = usize::try_from(size)
                            .ok()
                            .and_then(|n| bytes.get(at..at.checked_add(n)?));
                        if let Some(v) = v {
                            if Sha256::digest(v)[..] == digest[..] {
                                hit = Some(v.to_vec());
                                break;
                            }
                        }
                    }
                }
            }
            if let Some(v) = hit {
                found.insert(*digest, v);
            }
        }
    }
    found
}

/// A run as reassembled: its blocks in order, and the seqs lost between.
struct Reassembled<'a> {
    blocks: Vec<&'a Found>,
    lost: Vec<LostSeqs>,
}

/// Chains the pool's blocks into runs (see the module docs).
fn reassemble<'a>(pool: &'a Pool, report: &mut SalvageReport) -> Vec<Reassembled<'a>> {
    let mut by_prev: HashMap<Digest, Vec<(&Digest, &Found)>> = HashMap::new();
    for (digest, found) in &pool.blocks {
        by_prev.entry(found.prev).or_default().push((digest, found));
    }
    for list in by_prev.values_mut() {
        list.sort_by_key(|(d, f)| (f.first, **d));
    }
    // The block that follows `digest` ending at seq `end`.
    let next = |digest: &Digest, end: u64| {
        by_prev
            .get(digest)
            .and_then(|l| l.iter().find(|(_, f)| f.first == end))
    };
    // Segments: maximal chains, each from a block no found block leads to.
    let led_to: HashSet<&Digest> = pool
        .blocks
        .iter()
        .filter_map(|(d, f)| next(d, f.end()).map(|(d, _)| *d))
        .collect();
    let mut segments: Vec<Vec<(Digest, &Found)>> = Vec::new();
    let mut starts: Vec<(&Digest, &Found)> = pool
        .blocks
        .iter()
        .filter(|(d, _)| !led_to.contains(d))
        .collect();
    starts.sort_by_key(|(d, f)| (f.first, f.facts.first().map(|x| x.at), **d));
    for (digest, found) in starts {
        let mut seg = vec![(*digest, found)];
        let mut seen = HashSet::from([*digest]);
        while let Some((d, f)) = {
            let (d, f) = seg.last().expect("a segment has a block");
            next(d, f.end())
        } {
            if !seen.insert(**d) {
                break;
            }
            seg.push((**d, f));
        }
        segments.push(seg);
    }
    // Run starts, and the parts that follow a broken link.
    let zero: Digest = [0; 32];
    let mut runs: Vec<(String, Reassembled)> = Vec::new();
    let mut tails: Vec<Vec<(Digest, &Found)>> = Vec::new();
    for seg in segments {
        let head = seg[0].1;
        let record = (head.prev == zero && head.first == 0)
            .then(|| RunRecord::from_first(&head.facts[0]))
            .flatten();
        match record {
            // A pruned run's blocks, still in sled's files: gone on purpose.
            Some(r) if pool.pruned.contains(&r.run_id) => {}
            Some(r) if !runs.iter().any(|(id, _)| *id == r.run_id) => runs.push((
                r.run_id,
                Reassembled {
                    blocks: seg.iter().map(|(_, f)| *f).collect(),
                    lost: Vec::new(),
                },
            )),
            _ => tails.push(seg),
        }
    }
    // The ordinal sled gave each run, where it read one of its blocks.
    let ordinal_of = |run: &Reassembled| run.blocks.iter().find_map(|f| f.ordinal);
    loop {
        let mut attached = false;
        for (_, run) in runs.iter_mut() {
            let last = *run.blocks.last().expect("a run has a block");
            let end = last.end();
            let tail_digest = block::digest_of(&last.value);
            let ordinal = ordinal_of(run);
            let reached = bridges(&pool.files, &tail_digest);
            let pick = tails.iter().position(|seg| {
                let first = seg[0].1;
                first.first > end
                    && ((ordinal.is_some() && first.ordinal == ordinal)
                        || reached.contains(&first.prev))
            });
            if let Some(i) = pick {
                let seg = tails.remove(i);
                run.lost.push(LostSeqs {
                    first: end,
                    last: seg[0].1.first - 1,
                });
                run.blocks.extend(seg.iter().map(|(_, f)| *f));
                attached = true;
            }
        }
        if !attached {
            break;
        }
    }
    for seg in &tails {
        report.blocks_unplaced += seg.len() as u64;
        report.facts_lost += seg.iter().map(|(_, f)| f.facts.len() as u64).sum::<u64>();
    }
    runs.into_iter().map(|(_, r)| r).collect()
}

/// The digests damaged blocks found with their headers intact lead to
/// from the block with digest `from`: a header whose previous digest is
/// `from` (at offset 5) holds its own digest right after (at offset 37);
/// up to four damaged blocks in a row.
fn bridges(files: &[Vec<u8>], from: &Digest) -> HashSet<Digest> {
    let mut reached = HashSet::new();
    let mut at = vec![*from];
    for _ in 0..4 {
        let mut next = Vec::new();
        for digest in &at {
            let finder = memchr::memmem::Finder::new(&digest[..]);
            for bytes in files {
                for i in finder.find_iter(bytes) {
                    let version = match i.checked_sub(5) {
                        Some(v) => bytes[v],
                        None => continue,
                    };
                    if !block::known_version(version) {
                        continue;
                    }
                    if let Some(own) = bytes
                        .get(i + 32..i + 64)
                        .and_then(|o| Digest::try_from(o).ok())
                    {
                        if own != *from && reached.insert(own) {
                            next.push(own);
                        }
                    }
                }
            }
        }
        if next.is_empty() {
            break;
        }
        at = next;
    }
    reached
}

fn lost_pairs(lost: &[LostSeqs]) -> Vec<(u64, u64)> {
    lost.iter().map(|l| (l.first, l.last)).collect()
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
        let ordinal = self.db().generate_id().map_err(s)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_as_sled_writes_them() {
        // sled's encoding of 100, 1000 and 10_000, then a byte.
        let cases: [(&[u8], u64); 3] =
            [(&[100], 100), (&[243, 248], 1000), (&[249, 30, 32], 10_000)];
        for (enc, want) in cases {
            let mut bytes = enc.to_vec();
            bytes.push(7);
            assert!(
                varints_before(&bytes, enc.len()).any(|v| v == want),
                "{want}"
            );
            assert_eq!(varint_at(&bytes, 0), Some((want, enc.len())));
            assert_eq!(varint_bytes(want), enc);
        }
        let lost = [(3, 9), (12, 12)];
        assert_eq!(keys::lost_from(&keys::lost_value(&lost)), lost);
    }
}
