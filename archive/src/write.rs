//! Writing: appends (one block per batch), run records and their index
//! entries, artifacts, flushes.

use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

use reel::fact::{Fact, NewFact};
use reel::run::{RunRecord, RunState};
use reel::sequence::Sequencer;

use crate::record::{decode_record, encode_record};
use crate::redo::{Op, TreeId, Writes};
use crate::{
    block, keys, lock, Archive, ArchiveError, Digest, LiveRun, Result, StreamRules, Trees,
};

impl Archive {
    /// Appends facts to a run and returns the seqs they were given. The first
    /// batch of a run must begin with `run.started` naming `run_id`; the
    /// whole batch becomes one block. The batch is numbered by the run's
    /// [`Sequencer`](reel::sequence::Sequencer) (seqs, and the count of a
    /// progress report filed unnumbered) and checked against the stream
    /// rules ([`reel::rules`]) from where the run stands before any of it is
    /// stored: a batch that breaks one is refused whole.
    pub fn append(&self, run_id: &str, facts: Vec<NewFact>) -> Result<std::ops::Range<u64>> {
        self.append_with(run_id, facts.is_empty(), |seq| seq.number_all(facts))
    }

    /// Appends facts a [`Sequencer`](reel::sequence::Sequencer) of the
    /// caller numbered (the recorder's writer numbers its streams itself,
    /// so that every [`Store`](crate::Store) gets the same numbers): they
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
        let mut record = before.clone();
        record.state = RunState::Running;
        let mut writes = Writes::default();
        record_writes(&mut writes, ordinal, &before, &record);
        self.commit(&mut writes)?;
        live.insert(
            run_id.to_owned(),
            Arc::new(Mutex::new(LiveRun {
                ordinal,
                seq: Sequencer::resume(record.facts),
                record,
                head,
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
                check_batch(run_id, StreamRules::new(run_id), &facts)?;
                // The map lock is held from the look-up to here, so no other
                // append creates the run meanwhile; the run is locked before
                // the map shows it, so no other append's block goes first.
                let run = self.create_run(run_id, &facts[0], seq)?;
                let mut guard = lock(&run);
                live.insert(run_id.to_owned(), run.clone());
                drop(live);
                let appended = self.append_checked(&mut guard, &facts);
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
        match check_batch(run_id, StreamRules::resume(&guard.record, first), &facts) {
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
        }
        let appended = self
            .append_checked(&mut guard, &facts)
            .inspect(|_| guard.seq = seq);
        drop(guard);
        self.appended(run_id, appended)
    }

    /// Stores a checked batch of a run as one block: its seqs, and whether
    /// the run is closed now.
    fn append_checked(
        &self,
        run: &mut LiveRun,
        facts: &[Fact],
    ) -> Result<(std::ops::Range<u64>, bool)> {
        let first = facts.first().map_or(run.seq.next_seq(), |f| f.seq);
        self.write_block(run, facts)?;
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

    /// Stores a new run's record and index entries from its first fact (a
    /// checked `run.started`), before its first block.
    fn create_run(
        &self,
        run_id: &str,
        first: &Fact,
        seq: Sequencer,
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
        let ordinal = self.inner.db.generate_id().map_err(|e| self.storage(e))?;
        // The record and its indexes go in before the first block, so that a
        // crash after the block always leaves a run to recover. The "running"
        // status entry goes first of all: it is what recovery looks for, so a
        // crash that keeps only some of these inserts (sled recovers a prefix
        // of them; the redo log's record is whole or absent) still leaves a
        // run that recovery finds and completes.
        let entries = keys::index_entries(ordinal, &record);
        let run_key = keys::run_key(ordinal);
        let mut writes = Writes::with_capacity(256);
        writes.insert(TreeId::ByStatus, &entries.status, &[]);
        writes.insert(TreeId::Runs, &run_key, &encode_record(&record));
        index_writes(&mut writes, &entries);
        writes.insert(TreeId::RunIds, run_id.as_bytes(), &run_key);
        self.commit(&mut writes)?;
        Ok(Arc::new(Mutex::new(LiveRun {
            ordinal,
            record,
            seq,
            head: [0; 32],
        })))
    }

    /// Seals `facts` (numbered and checked) into one block.
    fn write_block(&self, run: &mut LiveRun, facts: &[Fact]) -> Result<()> {
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
        let mut writes = Writes::with_capacity(value.len() + 256);
        writes.insert(TreeId::Events, &keys::event_key(run.ordinal, first), &value);
        drop(value);
        if changed {
            record_writes(&mut writes, run.ordinal, &before, &run.record);
        }
        if let Err(e) = self.commit(&mut writes) {
            run.record = before;
            return Err(e);
        }
        run.head = digest;
        self.inner.appended.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Logs `writes` to the redo log as one record, then applies them to
    /// sled (see `redo`): consecutive writes to one tree as one sled batch,
    /// which a crash never splits (a status move is never half made).
    pub(crate) fn commit(&self, writes: &mut Writes) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        // A log an older reel would not replay: the archive says so first.
        self.stamp_format()?;
        let t = self.trees();
        let applied = self
            .inner
            .redo
            .append(writes, |writes| apply(t, writes))
            .map_err(|e| self.storage(sled::Error::Io(e)))?;
        applied.map_err(|e| self.storage(e))
    }

    /// Marks a write made to sled without the redo log: the next flush is
    /// a checkpoint (see `redo`).
    pub(crate) fn wrote_directly(&self) {
        self.inner.redo.wrote_directly();
    }

    /// Moves a run's status index entry from `old_key` to `new_key` in one
    /// sled batch, which a crash never splits: the archive never holds
    /// neither entry, nor both.
    /// Written without the redo log (recovery's).
    pub(crate) fn swap_status(&self, old_key: &[u8], new_key: &[u8]) -> Result<()> {
        self.wrote_directly();
        let mut batch = sled::Batch::default();
        batch.remove(old_key);
        batch.insert(new_key, sled::IVec::default());
        self.trees()
            .by_status
            .apply_batch(batch)
            .map_err(|e| self.storage(e))
    }

    /// Inserts the start-time, tenant and tool index entries of a run (each
    /// insert is idempotent), without the redo log (recovery's, salvage's).
    pub(crate) fn index_but_status(&self, entries: &keys::IndexEntries) -> Result<()> {
        self.wrote_directly();
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

    /// Stores artifact bytes once per sha-256 digest and returns the digest
    /// as `sha256:<hex>`.
    pub fn put_artifact(&self, bytes: &[u8]) -> Result<String> {
        let digest: Digest = Sha256::digest(bytes).into();
        // Stored once. An artifact found in sled was logged before it got
        // there (see `commit`), so a flush after this makes it durable; two
        // first stores of the same bytes log them twice, and write the same.
        if !self
            .trees()
            .artifacts
            .contains_key(digest)
            .map_err(|e| self.storage(e))?
        {
            let mut writes = Writes::with_capacity(bytes.len() + 64);
            writes.insert(TreeId::Artifacts, &digest, bytes);
            self.commit(&mut writes)?;
        }
        Ok(format!("sha256:{}", hex::encode(digest)))
    }

    /// Makes everything appended so far durable: one `fdatasync` of the
    /// redo log (see `redo`). When a write bypassed the log since the last
    /// checkpoint (an import, a prune, recovery), or the log has grown past
    /// its bound, the flush is a checkpoint instead: sled's flush, what it
    /// leaves unsynced (its blob files, the log's size, the device's cache;
    /// see `durable.rs`), and the log it covers deleted. Returns the bytes
    /// made durable (the log's, or sled's).
    pub fn flush(&self) -> Result<usize> {
        if self.inner.redo.wants_checkpoint() {
            return self.checkpoint();
        }
        let n = self
            .inner
            .redo
            .sync()
            .map_err(|e| self.storage(sled::Error::Io(e)))?;
        Ok(n as usize)
    }

    /// Folds the redo log into sled: closes its segment, flushes and syncs
    /// sled, deletes the closed segments. Returns sled's bytes flushed.
    pub(crate) fn checkpoint(&self) -> Result<usize> {
        let io = |e| self.storage(sled::Error::Io(e));
        let (_one, next) = self.inner.redo.close_segment().map_err(io)?;
        let n = self.inner.flush_sled().map_err(|e| {
            // Not covered: the next flush tries again.
            self.wrote_directly();
            self.storage(e)
        })?;
        self.inner.redo.finish_checkpoint(next).map_err(io)?;
        Ok(n)
    }
}

/// The writes of a changed record, with the index entries it brings along.
fn record_writes(writes: &mut Writes, ordinal: u64, before: &RunRecord, after: &RunRecord) {
    writes.insert(TreeId::Runs, &keys::run_key(ordinal), &encode_record(after));
    let (was, now) = (
        keys::index_entries(ordinal, before),
        keys::index_entries(ordinal, after),
    );
    for tool in now.tools.iter().filter(|k| !was.tools.contains(k)) {
        writes.insert(TreeId::ByTool, tool, &[]);
    }
    if was.status != now.status {
        // Consecutive writes to one tree: one sled batch (see `apply`).
        writes.remove(TreeId::ByStatus, &was.status);
        writes.insert(TreeId::ByStatus, &now.status, &[]);
    }
}

/// The start-time, tenant and tool index entries of a run.
fn index_writes(writes: &mut Writes, entries: &keys::IndexEntries) {
    writes.insert(TreeId::ByTime, &entries.time, &[]);
    if let Some(tenant) = &entries.tenant {
        writes.insert(TreeId::ByTenant, tenant, &[]);
    }
    for tool in &entries.tools {
        writes.insert(TreeId::ByTool, tool, &[]);
    }
}

/// Applies a record's writes to sled, in order; consecutive writes to one
/// tree as one batch.
fn apply(t: &Trees, writes: &Writes) -> sled::Result<()> {
    // Built by this process: every write parses.
    let ops: Vec<Op<'_>> = writes.ops().filter_map(|op| op.ok()).collect();
    let mut i = 0;
    while i < ops.len() {
        let tree = ops[i].tree;
        let run = ops[i..].iter().take_while(|op| op.tree == tree).count();
        let target = t.by_id(tree);
        if run == 1 {
            match ops[i].value {
                Some(v) => drop(target.insert(ops[i].key, v)?),
                None => drop(target.remove(ops[i].key)?),
            }
        } else {
            let mut batch = sled::Batch::default();
            for op in &ops[i..i + run] {
                match op.value {
                    Some(v) => batch.insert(op.key, v),
                    None => batch.remove(op.key),
                }
            }
            target.apply_batch(batch)?;
        }
        i += run;
    }
    Ok(())
}

/// Checks a batch against the stream rules as they stand before it.
fn check_batch(run_id: &str, mut rules: StreamRules, facts: &[Fact]) -> Result<()> {
    for (i, fact) in facts.iter().enumerate() {
        rules
            .check(fact)
            .map_err(|violation| ArchiveError::InvalidFacts {
                run_id: run_id.into(),
                detail: format!(
                    "fact {i} of the batch breaks a stream rule: {violation}; nothing of the batch was stored"
                ),
            })?;
    }
    Ok(())
}
