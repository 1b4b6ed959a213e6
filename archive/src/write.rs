//! Writing: appends (one block per batch), run records and their index
//! entries, artifacts, flushes.

use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

use reel_core::fact::{Fact, FactKind, NewFact};
use reel_core::rules::Undo;
use reel_core::run::{RunRecord, RunState};
use reel_core::sequence::Sequencer;

use crate::record::{decode_record, encode_record, encode_summary};
use crate::wal::{Ops, Tree};
use crate::{block, keys, lock, Archive, ArchiveError, LiveRun, Result};
use reel_core::codec::Digest;
use reel_core::rules::StreamRules;
use reel_core::summary::SummaryBuilder;

impl Archive {
    /// Appends facts to a run and returns the seqs they were given. The first
    /// batch of a run must begin with `run.started` naming `run_id`; the
    /// whole batch becomes one block. The batch is numbered by the run's
    /// [`Sequencer`](reel_core::sequence::Sequencer) (seqs, and the count of a
    /// progress report filed unnumbered) and checked against the stream
    /// rules ([`reel_core::rules`]) from where the run stands before any of it is
    /// stored: a batch that breaks one is refused whole.
    pub fn append(&self, run_id: &str, facts: Vec<NewFact>) -> Result<std::ops::Range<u64>> {
        self.append_with(run_id, facts.is_empty(), |seq| seq.number_all(facts))
    }

    /// Appends facts a [`Sequencer`](reel_core::sequence::Sequencer) of the
    /// caller numbered (the recorder's writer numbers its streams itself,
    /// so that every [`Store`](reel_core::store::Store) gets the same numbers): they
    /// are held to the same rules as [`Archive::append`]'s, seqs included,
    /// and stored as one block.
    pub fn append_numbered(&self, run_id: &str, facts: Vec<Fact>) -> Result<std::ops::Range<u64>> {
        self.append_with(run_id, facts.is_empty(), |seq| {
            for fact in &facts {
                seq.observe(fact);
            }
            facts
        })
    }

    /// Appends facts of a stream projected from another store (`reel
    /// sync`): as [`Archive::append_numbered`], except that a stored run
    /// left [`RunState::Incomplete`] (an earlier projection stopped while
    /// the run was still being recorded elsewhere, or its recorder died) is
    /// taken up again where it stands: its next seq, and its hash chain from
    /// its last stored block.
    pub fn append_projected(&self, run_id: &str, facts: Vec<Fact>) -> Result<std::ops::Range<u64>> {
        self.reopen_incomplete(run_id)?;
        self.append_numbered(run_id, facts)
    }

    /// Makes a stored incomplete run live again (see
    /// [`Archive::append_projected`]); anything else is left as it is.
    fn reopen_incomplete(&self, run_id: &str) -> Result<()> {
        let s = |e| self.storage(e);
        let mut live = lock(&self.inner.live);
        if live.contains_key(run_id) {
            return Ok(());
        }
        let t = self.trees();
        // Damage is left for `append`'s own refusal (and `verify`) to report.
        let Some(ordinal) = t
            .run_ids
            .get(run_id)
            .map_err(s)?
            .and_then(|o| keys::ordinal_from(&o))
        else {
            return Ok(());
        };
        let Some(before) = t
            .runs
            .get(keys::run_key(ordinal))
            .map_err(s)?
            .and_then(|bytes| decode_record(&bytes).ok())
        else {
            return Ok(());
        };
        if before.state != RunState::Incomplete {
            return Ok(());
        }
        let head = match t
            .events
            .scan_prefix(keys::events_prefix(ordinal))
            .next_back()
        {
            None => [0; 32],
            Some(Err(e)) => return Err(s(e)),
            Some(Ok((_, value))) => match block::header_digests(&value).1 {
                Some(d) => d,
                None => return Ok(()),
            },
        };
        // The call ids the run started already (rule 5 of the stream
        // rules): from its stored facts; a damaged block is left for
        // `verify` to report.
        let mut rules = StreamRules::resume(&before, before.facts);
        let mut summary = SummaryBuilder::default();
        for fact in self.facts(run_id, ..)?.flatten() {
            if let FactKind::CallStarted(c) = &fact.kind {
                rules.knows_call(&c.call_id, fact.seq);
            }
            summary.observe(&fact);
        }
        let mut record = before.clone();
        record.state = RunState::Running;
        let mut ops = Ops::default();
        store_record(&mut ops, ordinal, &before, &record);
        self.commit(ops)?;
        live.insert(
            run_id.to_owned(),
            Arc::new(Mutex::new(LiveRun {
                ordinal,
                seq: Sequencer::resume(record.facts),
                rules,
                record,
                head,
                summary,
            })),
        );
        Ok(())
    }

    fn append_with(
        &self,
        run_id: &str,
        empty: bool,
        number: impl FnOnce(&mut Sequencer) -> Vec<Fact>,
    ) -> Result<std::ops::Range<u64>> {
        self.writable()?;
        let mut live = lock(&self.inner.live);
        let run = match live.get(run_id) {
            Some(run) => run.clone(),
            None => {
                // Not being written: a stored run is closed, any other is new.
                self.refuse_stored(run_id)?;
                if empty {
                    return Err(ArchiveError::UnknownRun {
                        run_id: run_id.into(),
                    });
                }
                let mut seq = Sequencer::new();
                let facts = number(&mut seq);
                let mut rules = StreamRules::new(run_id);
                let _accepted = check_batch(run_id, &mut rules, &facts)?;
                // The map lock is held from the look-up to here, so no other
                // append creates the run meanwhile; the run is locked before
                // the map shows it, so no other append's block goes first.
                let mut ops = Ops::default();
                let run = self.create_run(run_id, &facts[0], seq, rules, &mut ops)?;
                let mut guard = lock(&run);
                live.insert(run_id.to_owned(), run.clone());
                drop(live);
                let appended = self.append_checked(&mut guard, &facts, ops);
                if appended.is_ok() {
                    self.count_run_journaled();
                }
                drop(guard);
                return self.appended(run_id, appended);
            }
        };
        drop(live);
        let mut guard = lock(&run);
        if guard.record.state.is_closed() {
            return Err(ArchiveError::RunClosed {
                run_id: run_id.into(),
                state: guard.record.state,
            });
        }
        let first = guard.seq.next_seq();
        // Numbered on a copy: a refused batch numbers nothing.
        let mut seq = guard.seq.clone();
        let facts = number(&mut seq);
        debug_assert_eq!(guard.rules.next_seq(), first);
        let undo = match check_batch(run_id, &mut guard.rules, &facts) {
            // A batch that starts the stream again: it exists already.
            Err(_)
                if facts
                    .first()
                    .is_some_and(|f| RunRecord::from_first(f).is_some()) =>
            {
                return Err(ArchiveError::RunExists {
                    run_id: run_id.into(),
                })
            }
            other => other?,
        };
        let appended = self.append_checked(&mut guard, &facts, Ops::default());
        match &appended {
            Ok(_) => guard.seq = seq,
            // Not stored: the rules stand where the run does.
            Err(_) => guard.rules.undo(undo),
        }
        drop(guard);
        self.appended(run_id, appended)
    }

    /// Stores a checked batch of a run as one block, with `ops` (a new
    /// run's record and index entries) before it, all in one journal frame
    /// (see `wal`): its seqs, and whether the run is closed now.
    fn append_checked(
        &self,
        run: &mut LiveRun,
        facts: &[Fact],
        mut ops: Ops,
    ) -> Result<(std::ops::Range<u64>, bool)> {
        let first = facts.first().map_or(run.seq.next_seq(), |f| f.seq);
        let (record, head) = (run.record.clone(), run.head);
        self.write_block(run, facts, &mut ops)?;
        if let Err(e) = self.commit(ops) {
            // Not stored: the run stands where it stood.
            run.record = record;
            run.head = head;
            return Err(e);
        }
        // Stored: the summary so far takes the batch in.
        facts.iter().for_each(|f| run.summary.observe(f));
        if !facts.is_empty() {
            self.count_facts_journaled(facts.len() as u64);
            self.inner.appended.send_modify(|n| *n += 1);
        }
        Ok((
            first..first + facts.len() as u64,
            run.record.state.is_closed(),
        ))
    }

    /// The end of an append: a closed run stops being live.
    fn appended(
        &self,
        run_id: &str,
        appended: Result<(std::ops::Range<u64>, bool)>,
    ) -> Result<std::ops::Range<u64>> {
        let (range, closed) = appended?;
        if closed {
            lock(&self.inner.live).remove(run_id);
        }
        Ok(range)
    }

    /// Refuses facts for a run that is stored and not being written: such a
    /// run is closed (ended, or marked incomplete on open).
    fn refuse_stored(&self, run_id: &str) -> Result<()> {
        let t = self.trees();
        if let Some(ord) = t.run_ids.get(run_id).map_err(|e| self.storage(e))? {
            // Not live, so the stored record is current.
            let state = keys::ordinal_from(&ord)
                .and_then(|o| t.runs.get(keys::run_key(o)).ok().flatten())
                .and_then(|bytes| decode_record(&bytes).ok())
                .map(|r| r.state)
                .unwrap_or(RunState::Incomplete);
            return Err(ArchiveError::RunClosed {
                run_id: run_id.into(),
                state,
            });
        }
        Ok(())
    }

    /// Puts a new run's record and index entries from its first fact (a
    /// checked `run.started`) into `ops`, before its first block.
    fn create_run(
        &self,
        run_id: &str,
        first: &Fact,
        seq: Sequencer,
        rules: StreamRules,
        ops: &mut Ops,
    ) -> Result<Arc<Mutex<LiveRun>>> {
        let Some(record) = RunRecord::from_first(first) else {
            return Err(ArchiveError::InvalidFacts {
                run_id: run_id.into(),
                detail: format!(
                    "a new stream must begin with run.started, or with the call.started of a call outside any run, not {}",
                    first.kind.name()
                ),
            });
        };
        self.stamp_format()?;
        let ordinal = self.new_ordinal()?;
        // The record and its indexes go in before the first block (in the
        // same journal frame), so that a crash after the block always
        // leaves a run to recover. The "running" status entry goes first of
        // all: it is what recovery looks for, so a crash that keeps only
        // some of these inserts (sled recovers a prefix of them, before the
        // journal is applied again) still leaves a run that recovery finds.
        let entries = keys::index_entries(ordinal, &record);
        ops.insert(Tree::ByStatus, &entries.status, b"");
        ops.insert(Tree::Runs, keys::run_key(ordinal), encode_record(&record));
        index_but_status(ops, &entries);
        ops.insert(Tree::RunIds, run_id, keys::run_key(ordinal));
        Ok(Arc::new(Mutex::new(LiveRun {
            ordinal,
            record,
            seq,
            rules,
            head: [0; 32],
            summary: SummaryBuilder::default(),
        })))
    }

    /// Seals `facts` (numbered and checked) into one block, put into `ops`
    /// with the run record's changes; the run's record and head move on
    /// (the caller puts them back if `ops` is not stored).
    fn write_block(&self, run: &mut LiveRun, facts: &[Fact], ops: &mut Ops) -> Result<()> {
        if facts.is_empty() {
            return Ok(());
        }
        let run_id = run.record.run_id.clone();
        let mut payload = Vec::with_capacity(facts.len() * 128);
        let before = run.record.clone();
        let mut changed = false;
        for fact in facts {
            block::push_fact(&mut payload, fact).map_err(|e| ArchiveError::Encode {
                run_id: run_id.clone(),
                detail: e.to_string(),
            })?;
            changed |= run.record.observe(fact);
        }
        let first = facts[0].seq;
        let (value, digest) = block::seal(facts.len() as u32, &run.head, &payload);
        ops.insert(Tree::Events, keys::event_key(run.ordinal, first), value);
        run.head = digest;
        if changed {
            store_record(ops, run.ordinal, &before, &run.record);
        }
        // The run ends in this block: its summary goes in the same frame.
        if run.record.state.is_closed() && !before.state.is_closed() {
            self.stamp_format()?;
            let mut ending = run.summary.clone();
            facts.iter().for_each(|f| ending.observe(f));
            let summary = ending.finish(&run.record);
            ops.insert(
                Tree::Summaries,
                keys::run_key(run.ordinal),
                encode_summary(&summary),
            );
        }
        Ok(())
    }

    /// Inserts the start-time, tenant and tool index entries of a run (each
    /// insert is idempotent).
    pub(crate) fn index_but_status(&self, entries: &keys::IndexEntries) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        t.by_time.insert(&entries.time, &[]).map_err(s)?;
        if let Some(tenant) = &entries.tenant {
            t.by_tenant.insert(tenant, &[]).map_err(s)?;
        }
        for tool in &entries.tools {
            t.by_tool.insert(tool, &[]).map_err(s)?;
        }
        Ok(())
    }

    /// Stores artifact bytes once per sha-256 digest, as a file named by
    /// it (see `files`; durable with the next flush), and returns the
    /// digest as `sha256:<hex>`.
    pub fn put_artifact(&self, bytes: &[u8]) -> Result<String> {
        self.writable()?;
        let digest: Digest = Sha256::digest(bytes).into();
        let shown = format!("sha256:{}", hex::encode(digest));
        let t = self.trees();
        let s = |e| self.storage(e);
        // Stored already (as a file, or in sled by an older reel).
        if t.artifact_files.contains_key(digest).map_err(s)?
            || t.artifacts.contains_key(digest).map_err(s)?
        {
            return Ok(shown);
        }
        // An older reel must not read an archive whose artifacts it cannot
        // find: the stamp says "upgrade" to it.
        self.stamp_format()?;
        self.inner
            .files
            .write(&digest, bytes)
            .map_err(|e| self.artifact_io("writing", &digest, e))?;
        // Journaled: acknowledged by the next flush, which syncs the file
        // before the journal (see `wal`).
        let mut ops = Ops::default();
        ops.insert(
            Tree::ArtifactFiles,
            digest,
            crate::keys::artifact_file_value(bytes.len() as u64),
        );
        self.commit(ops)?;
        Ok(shown)
    }

    /// An I/O failure on an artifact file, in the archive's words.
    pub(crate) fn artifact_io(
        &self,
        doing: &str,
        digest: &Digest,
        e: std::io::Error,
    ) -> ArchiveError {
        self.storage(sled::Error::Io(std::io::Error::new(
            e.kind(),
            format!("{doing} {}: {e}", self.inner.files.path(digest).display()),
        )))
    }

    /// Makes everything appended so far durable: the artifact files
    /// written since the last flush, then one `fdatasync` of the journal
    /// shared with every concurrent caller (group commit; see `wal`), and
    /// the synced position into the control record. After writes that
    /// bypass the journal (import, prune), a checkpoint instead: sled's
    /// flush, then what it leaves unsynced (see `durable.rs`), numbered in
    /// the control record after it is durable, so that an open that finds
    /// sled's store behind that record reports damage (see `control`).
    /// Returns the bytes sled flushed (0 when only the journal synced).
    pub fn flush(&self) -> Result<usize> {
        if self.inner.read_only {
            return Ok(0);
        }
        self.inner.flush()
    }

    /// Refuses writes to an archive opened only to read.
    pub(crate) fn writable(&self) -> Result<()> {
        if self.inner.read_only {
            return Err(ArchiveError::ReadOnly {
                dir: self.inner.dir.clone(),
            });
        }
        Ok(())
    }

    /// Marks the archive written since its last flush.
    pub(crate) fn dirty(&self) {
        self.inner
            .dirty
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Counts facts stored and deleted, for the control record.
    pub(crate) fn count_facts(&self, added: u64, removed: u64) {
        use std::sync::atomic::Ordering;
        self.inner.facts.fetch_add(added, Ordering::SeqCst);
        // Only prune removes (off the append path).
        if removed > 0 {
            let _ = self
                .inner
                .facts
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    Some(n.saturating_sub(removed))
                });
        }
        self.dirty();
    }

    /// A fresh run ordinal: sled's generator's next id, but never one at
    /// or below an ordinal the store holds or this process gave. sled
    /// persists its generator only now and then, and recovers it as the
    /// last persisted value plus a margin; the journal puts back runs
    /// sled never wrote. After a crash sled's generator may therefore
    /// stand below ordinals the journal's replay restored, and a new run
    /// would take one of them and overwrite that run's record and blocks
    /// (seen in `archive/tests/crash.rs` as runs of an earlier round
    /// "gone", seed 1796528885505809801, while the journal's batches were
    /// applied to sled an operation at a time).
    pub(crate) fn new_ordinal(&self) -> Result<u64> {
        use std::sync::atomic::Ordering;
        let id = self.db().generate_id().map_err(|e| self.storage(e))?;
        let least = self
            .inner
            .next_ordinal
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |least| {
                Some(least.max(id).saturating_add(1))
            })
            .unwrap_or_else(|least| least);
        Ok(least.max(id))
    }

    /// Counts journaled facts (no flush needs a checkpoint for them).
    fn count_facts_journaled(&self, added: u64) {
        self.inner
            .facts
            .fetch_add(added, std::sync::atomic::Ordering::SeqCst);
    }

    /// Counts a journaled run.
    fn count_run_journaled(&self) {
        self.inner
            .runs
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Counts a run created, for the control record.
    pub(crate) fn count_run(&self) {
        self.inner
            .runs
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.dirty();
    }
}

/// Puts a changed record into `ops`, with the index entries it brings
/// along (a status swap is one sled batch with the record's tree apart:
/// a crash never splits it).
fn store_record(ops: &mut Ops, ordinal: u64, before: &RunRecord, after: &RunRecord) {
    ops.insert(Tree::Runs, keys::run_key(ordinal), encode_record(after));
    let (was, now) = (
        keys::index_entries(ordinal, before),
        keys::index_entries(ordinal, after),
    );
    for tool in now.tools.iter().filter(|k| !was.tools.contains(k)) {
        ops.insert(Tree::ByTool, tool, b"");
    }
    if was.status != now.status {
        ops.remove(Tree::ByStatus, &was.status);
        ops.insert(Tree::ByStatus, &now.status, b"");
    }
}

/// Puts the start-time, tenant and tool index entries of a run into `ops`.
pub(crate) fn index_but_status(ops: &mut Ops, entries: &keys::IndexEntries) {
    ops.insert(Tree::ByTime, &entries.time, b"");
    if let Some(tenant) = &entries.tenant {
        ops.insert(Tree::ByTenant, tenant, b"");
    }
    for tool in &entries.tools {
        ops.insert(Tree::ByTool, tool, b"");
    }
}

/// Checks a batch against the stream rules as they stand before it, whole
/// or not at all: refused, `rules` stand where they stood.
fn check_batch(run_id: &str, rules: &mut StreamRules, facts: &[Fact]) -> Result<Undo> {
    rules
        .check_batch(facts)
        .map_err(|(i, violation)| ArchiveError::InvalidFacts {
            run_id: run_id.into(),
            detail: format!(
                "fact {i} of the batch breaks a stream rule: {violation}; nothing of the batch was stored"
            ),
        })
}

#[cfg(test)]
mod tests;
