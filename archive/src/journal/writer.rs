//! The writer: appends with group commit, rotation, the unapplied bound,
//! checkpoints, the syncing thread (see the module docs of
//! [`crate::journal`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use reel_core::lock::{lock, wait as wait_on};

use super::frame::{Header, Unplaced, HEADER_LEN};
use super::{scan, JournalConfig, JournalError, JournalStats, Position, Recovered, Wait};

/// A writer's journal: appends batches with group commit (see the module).
pub struct Journal {
    pub(super) shared: Arc<Shared>,
    syncer: Option<JoinHandle<()>>,
}

pub(super) struct Shared {
    dir: PathBuf,
    config: JournalConfig,
    pub(super) state: Mutex<State>,
    /// A leader finished, a checkpoint lowered the unapplied size, or the
    /// journal failed or closed.
    changed: Condvar,
    /// The active segment file: only the leader locks it.
    pub(super) active: Mutex<Active>,
    /// Held (flocked) while this process writes the journal.
    _lock: File,
}

pub(super) struct State {
    /// Placed frames not yet written, in position order.
    pub(super) pending: Vec<Vec<u8>>,
    /// The end of the last queued frame.
    queued: Position,
    /// The end of the last frame in the file.
    written: Position,
    /// The end of the last synced frame.
    synced: Position,
    /// The furthest position a waiting writer wants synced.
    sync_wanted: Position,
    /// A leader is writing.
    pub(super) leading: bool,
    /// The last checkpoint.
    checkpoint: Position,
    /// Segment files by sequence number, with their first position when
    /// their header reads (the last is the active one).
    segments: Vec<(u64, Option<Position>)>,
    failed: Option<String>,
    closed: bool,
    stats: JournalStats,
}

pub(super) struct Active {
    pub(super) file: File,
    seq: u64,
    /// Bytes in the file.
    len: u64,
    /// Bytes written since its last sync.
    unsynced: bool,
}

/// Creates `dir` and the directories above it that are missing, each
/// synced into its parent.
fn create_dirs(dir: &Path) -> Result<(), JournalError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(JournalError::io(dir, e)),
    }
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| JournalError::io(dir, e))
}

/// Creates segment `seq` starting at `base`: header written and synced,
/// then the directory synced.
fn create_segment(dir: &Path, seq: u64, base: Position) -> Result<Active, JournalError> {
    let path = dir.join(scan::file_name(seq));
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(|e| JournalError::io(&path, e))?;
    file.write_all(&Header { seq, base }.encode())
        .and_then(|()| file.sync_all())
        .map_err(|e| JournalError::io(&path, e))?;
    sync_dir(dir)?;
    Ok(Active {
        file,
        seq,
        len: HEADER_LEN as u64,
        unsynced: false,
    })
}

impl Journal {
    /// Opens the journal in `dir` to write (created when missing): takes
    /// the writer's lock, [`scan()`]s it from the checkpoint `from` with
    /// acknowledged data reaching `acknowledged` (damage is an error, and
    /// no journal file is touched then), syncs its last file, and starts a new
    /// segment file at the end of its valid part. The [`Recovered`]
    /// batches are for the caller to apply; they count as unapplied until
    /// [`Journal::checkpointed`].
    pub fn open(
        dir: &Path,
        config: JournalConfig,
        from: Position,
        acknowledged: Position,
    ) -> Result<(Journal, Recovered), JournalError> {
        create_dirs(dir)?;
        let lock_path = dir.join("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| JournalError::io(&lock_path, e))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(JournalError::Locked {
                    dir: dir.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(JournalError::io(&lock_path, e)),
        }
        let recovered = scan(dir, from, acknowledged)?;
        let mut segments = Vec::new();
        let files = scan::list(dir)?;
        for (seq, path) in &files {
            let mut head = Vec::new();
            {
                use std::io::Read as _;
                File::open(path)
                    .and_then(|f| f.take(HEADER_LEN as u64).read_to_end(&mut head))
                    .map_err(|e| JournalError::io(path, e))?;
            }
            segments.push((*seq, Header::decode(&head).ok().map(|h| h.base)));
        }
        // The tail recovered from the last file (written, maybe not synced)
        // becomes durable before anything is acknowledged after it.
        if let Some((_, path)) = files.last() {
            File::open(path)
                .and_then(|f| f.sync_data())
                .map_err(|e| JournalError::io(path, e))?;
        }
        let seq = recovered.last_seq + 1;
        let active = create_segment(dir, seq, recovered.end)?;
        segments.push((seq, Some(recovered.end)));
        let end = recovered.end;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            config,
            state: Mutex::new(State {
                pending: Vec::new(),
                queued: end,
                written: end,
                synced: end,
                sync_wanted: end,
                leading: false,
                checkpoint: from.min(end),
                segments,
                failed: None,
                closed: false,
                stats: JournalStats {
                    segments: 1,
                    ..JournalStats::default()
                },
            }),
            changed: Condvar::new(),
            active: Mutex::new(active),
            _lock: lock_file,
        });
        let syncer = match shared.config.sync_within {
            Some(every) => {
                let shared = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("reel-journal-sync".into())
                    .spawn(move || shared.sync_every(every));
                Some(spawned.map_err(|e| JournalError::io(dir, e))?)
            }
            None => None,
        };
        Ok((Journal { shared, syncer }, recovered))
    }

    /// Appends one batch of records, as one frame, and returns the
    /// position at its end once `wait` holds. Past the unapplied bound, it
    /// first waits for a checkpoint.
    pub fn append(&self, records: &[&[u8]], wait: Wait) -> Result<Position, JournalError> {
        self.append_with(records, wait, Bound::Wait)
    }

    /// Waits, as [`Journal::append`] would, until a batch of `records`
    /// fits under the unapplied bound (the wait counted), and returns
    /// without appending: for a caller that appends with
    /// [`Journal::append_past_bound`] under a lock its checkpointer takes
    /// (a wait for a checkpoint there would never end).
    pub fn wait_for_room(&self, records: &[&[u8]]) {
        let len = frame_len(records);
        let st = lock(&self.shared.state);
        drop(self.shared.room(st, len));
    }

    /// [`Journal::append`] without the wait for the unapplied bound (see
    /// [`Journal::wait_for_room`]): concurrent appenders may pass the
    /// bound by their frames.
    pub fn append_past_bound(
        &self,
        records: &[&[u8]],
        wait: Wait,
    ) -> Result<Position, JournalError> {
        self.append_with(records, wait, Bound::Ignore)
    }

    fn append_with(
        &self,
        records: &[&[u8]],
        wait: Wait,
        bound: Bound,
    ) -> Result<Position, JournalError> {
        let frame = Unplaced::new(records).ok_or(JournalError::TooLarge)?;
        let len = frame.len();
        let s = &self.shared;
        let mut st = lock(&s.state);
        if bound == Bound::Wait {
            st = s.room(st, len);
        }
        s.usable(&st)?;
        let bytes = frame.place(st.queued, st.synced);
        st.pending.push(bytes);
        st.queued += len;
        st.stats.batches += 1;
        st.stats.bytes += len;
        let end = st.queued;
        let synced = match wait {
            Wait::Written => 0,
            Wait::Synced => end,
        };
        s.drive(st, end, synced)?;
        Ok(end)
    }

    /// Returns once every batch up to `position` (clamped to what was
    /// appended) is synced: the call-boundary wait. Concurrent callers
    /// share one `fdatasync`.
    pub fn sync_to(&self, position: Position) -> Result<(), JournalError> {
        let st = lock(&self.shared.state);
        let to = position.min(st.queued);
        self.shared.drive(st, to, to)
    }

    /// Records that everything before `position` is in sled and that the
    /// checkpoint is durable (in the synced control record): writers
    /// waiting on the unapplied bound go on, and the segment files wholly
    /// before `position` are deleted. Returns how many were.
    pub fn checkpointed(&self, position: Position) -> Result<usize, JournalError> {
        let s = &self.shared;
        let drop: Vec<u64> = {
            let mut st = lock(&s.state);
            st.checkpoint = st.checkpoint.max(position.min(st.queued));
            s.changed.notify_all();
            // A file can go when a later one starts at or before the
            // checkpoint; never the active (last) one.
            let mut next_base = None;
            let mut drop = Vec::new();
            for &(seq, base) in st.segments.iter().rev() {
                if next_base.is_some_and(|b| b <= st.checkpoint) {
                    drop.push(seq);
                }
                if base.is_some() {
                    next_base = base;
                }
            }
            st.segments.retain(|(seq, _)| !drop.contains(seq));
            drop
        };
        for seq in &drop {
            let path = s.dir.join(scan::file_name(*seq));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(JournalError::io(&path, e)),
            }
        }
        Ok(drop.len())
    }

    /// Syncs everything appended, stops the syncing thread, and returns the
    /// position the journal ends at (all of it durable).
    pub fn close(mut self) -> Result<Position, JournalError> {
        let end = self.finish();
        end.and_then(|end| {
            let st = lock(&self.shared.state);
            match &st.failed {
                Some(detail) => Err(JournalError::Failed {
                    dir: self.shared.dir.clone(),
                    detail: detail.clone(),
                }),
                None => Ok(end),
            }
        })
    }

    /// Syncs what is appended and stops the syncing thread; the journal
    /// takes no more batches.
    fn finish(&mut self) -> Result<Position, JournalError> {
        let s = &self.shared;
        let st = lock(&s.state);
        let end = st.queued;
        let synced = if st.closed {
            drop(st);
            Ok(())
        } else {
            s.drive(st, end, end)
        };
        lock(&s.state).closed = true;
        s.changed.notify_all();
        if let Some(syncer) = self.syncer.take() {
            // Set before the unpark: the thread sees it on waking (an
            // unpark before its park makes the park return at once).
            syncer.thread().unpark();
            let _ = syncer.join();
        }
        synced.map(|()| end)
    }

    /// The journal's counters.
    pub fn stats(&self) -> JournalStats {
        lock(&self.shared.state).stats
    }

    /// How far the journal is synced: the acknowledged position the caller
    /// keeps in its control record.
    pub fn synced(&self) -> Position {
        lock(&self.shared.state).synced
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The position at the end of the last batch appended (written or
    /// still queued): what a checkpoint read now covers once sled holds
    /// every batch placed before it.
    pub fn end(&self) -> Position {
        lock(&self.shared.state).queued
    }

    /// How the journal writes.
    pub fn config(&self) -> &JournalConfig {
        &self.shared.config
    }
}

impl Drop for Journal {
    /// Syncs what was appended (as [`Journal::close`], its error logged).
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("closing the journal: {e}");
        }
    }
}

/// Whether an append waits for the unapplied bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Wait,
    Ignore,
}

/// The length of the frame around `records` (as `Unplaced::len`).
fn frame_len(records: &[&[u8]]) -> u64 {
    (super::frame::FRAME_HEAD + 4 + records.iter().map(|r| 4 + r.len()).sum::<usize>()) as u64
}

impl Shared {
    /// Waits until a frame of `len` bytes fits under the unapplied bound
    /// (one frame always goes through when nothing is unapplied); counts
    /// the wait.
    fn room<'a>(&'a self, mut st: MutexGuard<'a, State>, len: u64) -> MutexGuard<'a, State> {
        let over = |st: &State| {
            st.queued > st.checkpoint
                && st.queued - st.checkpoint + len > self.config.unapplied_bytes
                && st.failed.is_none()
                && !st.closed
        };
        if over(&st) {
            st.stats.bound_waits += 1;
            let began = Instant::now();
            while over(&st) {
                st = wait_on(&self.changed, st);
            }
            st.stats.bound_waited_us += began.elapsed().as_micros() as u64;
        }
        st
    }

    fn usable(&self, st: &State) -> Result<(), JournalError> {
        if let Some(detail) = &st.failed {
            return Err(JournalError::Failed {
                dir: self.dir.clone(),
                detail: detail.clone(),
            });
        }
        if st.closed {
            return Err(JournalError::Closed {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Returns once the file holds everything up to `written` and is
    /// synced up to `synced`, leading a group when nobody is.
    fn drive<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        written: Position,
        synced: Position,
    ) -> Result<(), JournalError> {
        loop {
            if st.written >= written && st.synced >= synced {
                return Ok(());
            }
            if let Some(detail) = &st.failed {
                return Err(JournalError::Failed {
                    dir: self.dir.clone(),
                    detail: detail.clone(),
                });
            }
            st.sync_wanted = st.sync_wanted.max(synced);
            if st.leading {
                st = wait_on(&self.changed, st);
                continue;
            }
            // Lead: take every queued batch.
            st.leading = true;
            let group = std::mem::take(&mut st.pending);
            let start = st.written;
            let target = st.queued;
            let sync = st.sync_wanted > st.synced;
            drop(st);
            let result = self.write_group(start, &group, sync);
            st = lock(&self.state);
            st.leading = false;
            match result {
                Ok(done) => {
                    st.written = target;
                    st.stats.writes += u64::from(!group.is_empty());
                    st.stats.syncs += done.syncs;
                    if sync {
                        st.synced = target;
                    }
                    if let Some(seq) = done.rotated {
                        // The files before the new one are synced whole.
                        st.synced = st.synced.max(start);
                        st.segments.push((seq, Some(start)));
                        st.stats.segments += 1;
                    }
                }
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.changed.notify_all();
        }
    }

    /// The leader's work: rotate when due, write the group, sync.
    fn write_group(
        &self,
        start: Position,
        group: &[Vec<u8>],
        sync: bool,
    ) -> Result<Written, JournalError> {
        let mut active = lock(&self.active);
        let mut done = Written {
            rotated: None,
            syncs: 0,
        };
        let path = |seq| self.dir.join(scan::file_name(seq));
        if !group.is_empty()
            && active.len >= self.config.segment_bytes
            && active.len > HEADER_LEN as u64
        {
            if active.unsynced {
                active
                    .file
                    .sync_data()
                    .map_err(|e| JournalError::io(&path(active.seq), e))?;
                done.syncs += 1;
            }
            let seq = active.seq + 1;
            *active = create_segment(&self.dir, seq, start)?;
            done.rotated = Some(seq);
        }
        let bytes = match group {
            [one] => std::borrow::Cow::Borrowed(one),
            many => std::borrow::Cow::Owned(many.concat()),
        };
        if !bytes.is_empty() {
            active
                .file
                .write_all(&bytes)
                .map_err(|e| JournalError::io(&path(active.seq), e))?;
            active.len += bytes.len() as u64;
            active.unsynced = true;
        }
        if sync && active.unsynced {
            active
                .file
                .sync_data()
                .map_err(|e| JournalError::io(&path(active.seq), e))?;
            active.unsynced = false;
            done.syncs += 1;
        }
        Ok(done)
    }

    /// The syncing thread: every `every`, syncs what is written. A close
    /// unparks it.
    fn sync_every(&self, every: Duration) {
        loop {
            std::thread::park_timeout(every);
            let st = lock(&self.state);
            if st.closed || st.failed.is_some() {
                return;
            }
            if st.queued > st.synced {
                let to = st.queued;
                // A failure is kept in the state: the next append reports it.
                let _ = self.drive(st, to, to);
            }
        }
    }
}

/// What a leader's write did besides writing.
struct Written {
    /// The new segment's sequence number, when it rotated.
    rotated: Option<u64>,
    /// `fdatasync`s paid.
    syncs: u64,
}
