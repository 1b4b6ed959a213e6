//! The redo log: what makes [`Archive::flush`](crate::Archive::flush) durable
//! without sled's flush.
//!
//! sled's flush costs two device round trips and more (its log written with
//! `sync_file_range`, which makes nothing durable, then `fdatasync` of the
//! log and the syncs of its blob files, see `durable.rs`), and a call waits
//! for it at its end. So every write the recording path makes (a run's
//! record and index entries, its blocks, artifacts) is first appended to a
//! segment file under `redo/`, as one record per append, and then applied to
//! sled; a flush is one `fdatasync` of the segment. sled writes its own log
//! in the background (`flush_every_ms`) and is made durable, off the call
//! path, by a *checkpoint*: the segment is closed, sled is flushed and
//! synced, and the closed segments are deleted.
//!
//! Invariants, each with its reason:
//! - A record is appended before its writes reach sled, and a checkpoint
//!   closes its segment only while no append is between the two (`gate`):
//!   so every write in a closed segment is in sled before the checkpoint's
//!   flush, which then covers it, and a process killed at any point leaves
//!   in sled (whose unsynced log survives a kill, in the page cache) only
//!   writes whose records the log holds too. Replaying the log on open,
//!   in order, then ends exactly where the writes had reached.
//! - Records are applied per key in the order they were logged: the writes
//!   of one run are made under its lock, an artifact's under its digest
//!   (content-addressed, the same bytes either way), and index entries are
//!   idempotent.
//! - A record is whole or absent: each carries its length and a CRC-32 of
//!   its body, and replay stops at the first that does not check (a torn
//!   tail: the append a crash cut, never flushed).
//! - A write that bypasses the log (import's transaction, prune, recovery,
//!   salvage) marks it (`direct`), and the next flush is a checkpoint, so
//!   it is as durable after a flush as before. Such a write never touches a
//!   key a record logged before it may hold (prune checkpoints after its
//!   tombstone and before deleting anything, so a replay never brings back
//!   what it deleted; the others write runs no record names).
//! - A checkpoint deletes closed segments only after sled's flush and
//!   syncs, and syncs the directory after deleting, so that a deleted
//!   segment stays deleted (a replay of it after a later direct write
//!   could undo that write).
//! - Replay never panics on the bytes it reads: lengths are checked
//!   against what is left, tree numbers against the trees there are.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::lock;

/// The directory of segment files, inside the archive directory.
pub(crate) const DIR: &str = "redo";
/// What every segment file begins with.
const MAGIC: &[u8; 8] = b"reelredo";
/// A segment above this size is closed by the next flush (a checkpoint).
pub(crate) const CHECKPOINT_BYTES: u64 = 64 << 20;
/// The largest record replay accepts: an append's writes, a spilled
/// payload's artifact among them (the recorder bounds those far below).
const MAX_RECORD: usize = 1 << 30;

/// A tree of the archive, by the number its writes carry in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum TreeId {
    Meta = 0,
    RunIds = 1,
    Runs = 2,
    Events = 3,
    Artifacts = 4,
    ByTime = 5,
    ByTenant = 6,
    ByTool = 7,
    ByStatus = 8,
    Salvaged = 9,
    Pruned = 10,
}

impl TreeId {
    fn from_u8(n: u8) -> Option<TreeId> {
        use TreeId::*;
        Some(match n {
            0 => Meta,
            1 => RunIds,
            2 => Runs,
            3 => Events,
            4 => Artifacts,
            5 => ByTime,
            6 => ByTenant,
            7 => ByTool,
            8 => ByStatus,
            9 => Salvaged,
            10 => Pruned,
            _ => return None,
        })
    }
}

impl crate::Trees {
    pub(crate) fn by_id(&self, id: TreeId) -> &sled::Tree {
        match id {
            TreeId::Meta => &self.meta,
            TreeId::RunIds => &self.run_ids,
            TreeId::Runs => &self.runs,
            TreeId::Events => &self.events,
            TreeId::Artifacts => &self.artifacts,
            TreeId::ByTime => &self.by_time,
            TreeId::ByTenant => &self.by_tenant,
            TreeId::ByTool => &self.by_tool,
            TreeId::ByStatus => &self.by_status,
            TreeId::Salvaged => &self.salvaged,
            TreeId::Pruned => &self.pruned,
        }
    }
}

/// The writes of one append, in order: one record of the log.
#[derive(Default)]
pub(crate) struct Writes {
    /// The record as it is logged: 8 bytes of header (filled in by
    /// [`Redo::append`]), then each write as `[tree][1 insert | 0
    /// remove][key len u32][key][value len u32][value]` (little-endian;
    /// a remove has no value).
    buf: Vec<u8>,
    count: usize,
}

impl Writes {
    pub(crate) fn with_capacity(bytes: usize) -> Writes {
        let mut buf = Vec::with_capacity(8 + bytes);
        buf.extend_from_slice(&[0; 8]);
        Writes { buf, count: 0 }
    }

    pub(crate) fn insert(&mut self, tree: TreeId, key: &[u8], value: &[u8]) {
        self.head(tree, 1, key);
        self.buf
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(value);
    }

    pub(crate) fn remove(&mut self, tree: TreeId, key: &[u8]) {
        self.head(tree, 0, key);
    }

    fn head(&mut self, tree: TreeId, op: u8, key: &[u8]) {
        if self.buf.is_empty() {
            self.buf.extend_from_slice(&[0; 8]);
        }
        self.buf.push(tree as u8);
        self.buf.push(op);
        self.buf
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(key);
        self.count += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The writes, in order.
    pub(crate) fn ops(&self) -> Ops<'_> {
        Ops {
            rest: self.buf.get(8..).unwrap_or_default(),
        }
    }
}

/// One write of a record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Op<'a> {
    pub tree: TreeId,
    pub key: &'a [u8],
    /// `None`: remove the key.
    pub value: Option<&'a [u8]>,
}

/// The writes of a record's body; `Err` at the first that does not parse.
pub(crate) struct Ops<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Ops<'a> {
    type Item = Result<Op<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let parsed = parse_op(self.rest);
        match parsed {
            Ok((op, rest)) => {
                self.rest = rest;
                Some(Ok(op))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn parse_op(b: &[u8]) -> Result<(Op<'_>, &[u8]), String> {
    let (&tree, b) = b.split_first().ok_or("a write without its tree")?;
    let tree = TreeId::from_u8(tree).ok_or_else(|| format!("tree number {tree} is unknown"))?;
    let (&op, b) = b.split_first().ok_or("a write without its kind")?;
    let (key, b) = take_sized(b).ok_or("a key longer than the record")?;
    let (value, b) = match op {
        0 => (None, b),
        1 => {
            let (value, b) = take_sized(b).ok_or("a value longer than the record")?;
            (Some(value), b)
        }
        other => return Err(format!("write kind {other} is unknown")),
    };
    Ok((Op { tree, key, value }, b))
}

fn take_sized(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let rest = &b[4..];
    (len <= rest.len()).then(|| rest.split_at(len))
}

/// The segment being appended to.
struct Segment {
    number: u64,
    file: Arc<File>,
    len: u64,
}

/// The log of an open archive.
pub(crate) struct Redo {
    dir: PathBuf,
    /// Held shared by an append from its log write to its last sled write,
    /// and exclusively by a checkpoint closing the segment (see the module).
    gate: RwLock<()>,
    segment: Mutex<Segment>,
    /// Set by a write that bypassed the log (see the module).
    direct: AtomicBool,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
}

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}.log"))
}

/// The segment files in `dir`, oldest first.
fn segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(number) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        found.push((number, entry.path()));
    }
    found.sort();
    Ok(found)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A new, empty segment, durable with its name.
fn create_segment(dir: &Path, number: u64) -> io::Result<Segment> {
    let path = segment_path(dir, number);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)?;
    file.write_all(MAGIC)?;
    file.sync_all()?;
    sync_dir(dir)?;
    Ok(Segment {
        number,
        file: Arc::new(file),
        len: MAGIC.len() as u64,
    })
}

/// What [`replay`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub segments: usize,
    pub records: usize,
    pub writes: usize,
    /// Records that did not check and were not applied, each named by
    /// segment file and offset with why (a torn tail of the newest segment
    /// is a crash's cut append, not listed).
    pub damaged: Vec<String>,
    /// The segment files those records are in.
    pub damaged_segments: Vec<PathBuf>,
}

/// The records of one segment's bytes, applied by `apply` in order.
/// Returns (records, writes, damage): the damage is where the first record
/// that does not check begins, with why, unless it is the segment's end
/// cut short (`torn_ok`).
fn replay_segment(
    bytes: &[u8],
    torn_ok: bool,
    apply: &mut dyn FnMut(Op<'_>) -> io::Result<()>,
) -> io::Result<(usize, usize, Option<(usize, String)>)> {
    if bytes.len() < MAGIC.len() {
        // Cut before its header was written: nothing in it.
        return Ok((
            0,
            0,
            (!torn_ok).then(|| (0, "it is shorter than its header".into())),
        ));
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Ok((0, 0, Some((0, "it is not a reel redo segment".into()))));
    }
    let (mut records, mut writes) = (0, 0);
    let mut at = MAGIC.len();
    while at < bytes.len() {
        let rest = &bytes[at..];
        let Some(header) = rest.get(..8) else {
            return Ok((
                records,
                writes,
                torn(torn_ok, at, "a record's header is cut"),
            ));
        };
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if len > MAX_RECORD {
            return Ok((
                records,
                writes,
                Some((at, format!("a record claims {len} bytes"))),
            ));
        }
        let Some(body) = rest.get(8..8 + len) else {
            return Ok((records, writes, torn(torn_ok, at, "a record is cut")));
        };
        if crc32fast::hash(body) != crc {
            // A zeroed or partly written tail reads as a bad checksum too.
            let tail = at + 8 + len >= bytes.len();
            return Ok((
                records,
                writes,
                torn(
                    torn_ok && tail,
                    at,
                    "a record's checksum does not match its bytes",
                ),
            ));
        }
        // Parsed whole before any of it is applied: a record is applied
        // whole or not at all.
        let ops: Vec<Op<'_>> = match (Ops { rest: body }).collect::<Result<_, _>>() {
            Ok(ops) => ops,
            Err(why) => return Ok((records, writes, Some((at, why)))),
        };
        writes += ops.len();
        for op in ops {
            apply(op)?;
        }
        records += 1;
        at += 8 + len;
    }
    Ok((records, writes, None))
}

fn torn(torn_ok: bool, at: usize, why: &str) -> Option<(usize, String)> {
    (!torn_ok).then(|| (at, why.to_owned()))
}

/// Applies every record of the log in `dir` to `trees`, oldest first.
/// A record that does not check ends its segment's replay (a torn tail of
/// the newest segment is what a crash leaves; anything else is reported).
pub(crate) fn replay(dir: &Path, trees: &crate::Trees) -> io::Result<Replayed> {
    let mut report = Replayed::default();
    let found = segments(dir)?;
    let newest = found.last().map(|(n, _)| *n);
    for (number, path) in &found {
        let bytes = std::fs::read(path)?;
        let mut apply = |op: Op<'_>| -> io::Result<()> {
            let tree = trees.by_id(op.tree);
            match op.value {
                Some(v) => tree.insert(op.key, v).map(drop),
                None => tree.remove(op.key).map(drop),
            }
            .map_err(io::Error::other)
        };
        let (records, writes, damage) =
            replay_segment(&bytes, Some(*number) == newest, &mut apply)?;
        report.segments += 1;
        report.records += records;
        report.writes += writes;
        if let Some((at, why)) = damage {
            report
                .damaged
                .push(format!("{} at byte {at}: {why}", path.display()));
            report.damaged_segments.push(path.clone());
        }
    }
    Ok(report)
}

/// Moves the segments with damaged records aside (`<n>.damaged`), so that
/// [`Redo::start`] does not delete what they hold past the damage.
pub(crate) fn keep_damaged(dir: &Path, replayed: &Replayed) -> io::Result<()> {
    for path in &replayed.damaged_segments {
        std::fs::rename(path, path.with_extension("damaged"))?;
    }
    if !replayed.damaged_segments.is_empty() {
        sync_dir(dir)?;
    }
    Ok(())
}

impl Redo {
    /// The log of the archive in `archive_dir`, after [`replay`] and the
    /// checkpoint that follows it: closed segments are deleted and a new
    /// one is begun.
    pub(crate) fn start(archive_dir: &Path) -> io::Result<Redo> {
        let dir = archive_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        let found = segments(&dir)?;
        let next = found.last().map_or(0, |(n, _)| n + 1);
        let segment = create_segment(&dir, next)?;
        let redo = Redo {
            dir,
            gate: RwLock::new(()),
            segment: Mutex::new(segment),
            direct: AtomicBool::new(false),
            checkpointing: Mutex::new(()),
        };
        redo.delete_before(next)?;
        Ok(redo)
    }

    /// Logs `writes` as one record, then runs `apply` (their sled writes)
    /// while no checkpoint can close the segment between the two.
    pub(crate) fn append<T>(
        &self,
        writes: &mut Writes,
        apply: impl FnOnce(&Writes) -> T,
    ) -> io::Result<T> {
        let body = writes.buf.len() - 8;
        let crc = crc32fast::hash(&writes.buf[8..]);
        writes.buf[..4].copy_from_slice(&(body as u32).to_le_bytes());
        writes.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        {
            let mut segment = lock(&self.segment);
            (&*segment.file).write_all(&writes.buf)?;
            segment.len += writes.buf.len() as u64;
        }
        Ok(apply(writes))
    }

    /// Marks a write made to sled without the log (see the module).
    pub(crate) fn wrote_directly(&self) {
        self.direct.store(true, Ordering::Release);
    }

    /// Whether the next flush must be a checkpoint: a write bypassed the
    /// log, or the segment has grown past [`CHECKPOINT_BYTES`].
    pub(crate) fn wants_checkpoint(&self) -> bool {
        self.direct.load(Ordering::Acquire) || lock(&self.segment).len > CHECKPOINT_BYTES
    }

    /// Makes every record appended so far durable: one `fdatasync` of the
    /// segment (a segment closed meanwhile was synced when it was closed).
    /// Returns the segment's length.
    pub(crate) fn sync(&self) -> io::Result<u64> {
        let (file, len) = {
            let segment = lock(&self.segment);
            (segment.file.clone(), segment.len)
        };
        file.sync_data()?;
        Ok(len)
    }

    /// A checkpoint's first half: closes the segment (synced) and begins a
    /// new one, while no append is between its log write and its sled
    /// writes. The caller then flushes sled and syncs it, and calls
    /// [`Redo::finish_checkpoint`] with the number returned. Hold the guard
    /// returned (one checkpoint at a time) until then.
    pub(crate) fn close_segment(&self) -> io::Result<(std::sync::MutexGuard<'_, ()>, u64)> {
        let one = lock(&self.checkpointing);
        let next = {
            let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
            let mut segment = lock(&self.segment);
            segment.file.sync_data()?;
            let next = create_segment(&self.dir, segment.number + 1)?;
            let number = next.number;
            *segment = next;
            number
        };
        // Writes made without the log from here on are not covered by the
        // flush that follows: they mark it again.
        self.direct.store(false, Ordering::Release);
        Ok((one, next))
    }

    /// A checkpoint's second half, once sled is flushed and synced: the
    /// closed segments are deleted.
    pub(crate) fn finish_checkpoint(&self, next: u64) -> io::Result<()> {
        self.delete_before(next)
    }

    /// Whether the segment holds any record (a checkpoint would do
    /// something).
    pub(crate) fn holds_records(&self) -> bool {
        lock(&self.segment).len > MAGIC.len() as u64
    }

    /// Deletes the segments older than `number`, durably.
    fn delete_before(&self, number: u64) -> io::Result<()> {
        let mut any = false;
        for (n, path) in segments(&self.dir)? {
            if n < number {
                match std::fs::remove_file(&path) {
                    Ok(()) => any = true,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if any {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(writes: &mut Writes) -> Vec<u8> {
        let body = writes.buf.len() - 8;
        let crc = crc32fast::hash(&writes.buf[8..]);
        writes.buf[..4].copy_from_slice(&(body as u32).to_le_bytes());
        writes.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        writes.buf.clone()
    }

    fn segment_of(records: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        for r in records {
            bytes.extend_from_slice(r);
        }
        bytes
    }

    fn collect(bytes: &[u8], torn_ok: bool) -> (Vec<String>, Option<(usize, String)>) {
        let mut seen = Vec::new();
        let (_, _, damage) = replay_segment(bytes, torn_ok, &mut |op| {
            seen.push(format!(
                "{:?} {} {:?}",
                op.tree,
                String::from_utf8_lossy(op.key),
                op.value.map(|v| String::from_utf8_lossy(v).into_owned())
            ));
            Ok(())
        })
        .expect("no io");
        (seen, damage)
    }

    fn two_records() -> Vec<Vec<u8>> {
        let mut a = Writes::with_capacity(0);
        a.insert(TreeId::Events, b"k1", b"block");
        a.remove(TreeId::ByStatus, b"old");
        a.insert(TreeId::ByStatus, b"new", b"");
        let mut b = Writes::with_capacity(0);
        b.insert(TreeId::Runs, b"r", b"record");
        vec![record(&mut a), record(&mut b)]
    }

    /// Records come back in order, each write as logged.
    #[test]
    fn records_replay_in_order() {
        let (seen, damage) = collect(&segment_of(&two_records()), true);
        assert_eq!(damage, None);
        assert_eq!(
            seen,
            [
                "Events k1 Some(\"block\")",
                "ByStatus old None",
                "ByStatus new Some(\"\")",
                "Runs r Some(\"record\")"
            ]
        );
    }

    /// A crash's cut append, at any byte of the last record, applies the
    /// records before it and nothing of the cut one; in an older segment
    /// the same cut is reported.
    #[test]
    fn a_torn_tail_applies_the_records_before_it_only() {
        let records = two_records();
        let whole = segment_of(&records);
        let second = MAGIC.len() + records[0].len();
        for cut in second + 1..whole.len() {
            let (seen, damage) = collect(&whole[..cut], true);
            assert_eq!(seen.len(), 3, "cut at {cut}");
            assert_eq!(damage, None, "cut at {cut}");
            let (_, damage) = collect(&whole[..cut], false);
            assert!(damage.is_some_and(|(at, _)| at == second), "cut at {cut}");
        }
        // A tail the file system zero-filled past the last write.
        let mut zeroed = whole.clone();
        zeroed.extend_from_slice(&[0; 64]);
        let (seen, damage) = collect(&zeroed, true);
        assert_eq!((seen.len(), damage), (4, None));
    }

    /// A flipped byte in a record before the last stops the replay there,
    /// reported even in the newest segment.
    #[test]
    fn a_damaged_record_stops_the_replay_and_is_reported() {
        let records = two_records();
        let mut bytes = segment_of(&records);
        bytes[MAGIC.len() + 12] ^= 0x40;
        let (seen, damage) = collect(&bytes, true);
        assert!(seen.is_empty());
        let (at, why) = damage.expect("reported");
        assert_eq!(at, MAGIC.len());
        assert!(why.contains("checksum"), "{why}");
    }

    proptest::proptest! {
        /// Replay never panics, whatever the segment holds.
        #[test]
        fn replay_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256), torn_ok: bool) {
            let mut framed = MAGIC.to_vec();
            framed.extend_from_slice(&bytes);
            let _ = collect(&framed, torn_ok);
            let _ = collect(&bytes, torn_ok);
        }

        /// Any record whose checksum matches but whose body is garbage is
        /// refused whole, never half applied.
        #[test]
        fn a_garbage_body_is_refused_whole(body in proptest::collection::vec(proptest::num::u8::ANY, 1..128)) {
            let mut w = Writes::with_capacity(0);
            w.buf.extend_from_slice(&body);
            let bytes = segment_of(&[record(&mut w)]);
            let (seen, damage) = collect(&bytes, true);
            let whole = Ops { rest: &body }.collect::<Result<Vec<_>, _>>();
            match whole {
                Ok(ops) => { proptest::prop_assert_eq!(seen.len(), ops.len()); proptest::prop_assert!(damage.is_none()); }
                Err(_) => { proptest::prop_assert!(seen.is_empty()); proptest::prop_assert!(damage.is_some()); }
            }
        }
    }
}
