//! Importing a whole run (a tape): checked whole, then written in one sled
//! transaction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};
use sled::Transactional as _;

use reel_core::fact::{Fact, FactKind};
use reel_core::run::{RunRecord, RunState};

use crate::record::encode_record;
use crate::{block, keys, lock, Archive, ArchiveError, LiveRun, Result};
use reel_core::codec::{parse_digest, Digest};
use reel_core::rules::StreamRules;

impl Archive {
    /// Imports a whole run (e.g. from a tape): its facts keep their seqs. See
    /// [`Archive::import_run_with_artifacts`], which this is without
    /// artifacts.
    pub fn import_run(&self, facts: impl IntoIterator<Item = Fact>) -> Result<RunRecord> {
        let facts: Vec<Fact> = facts.into_iter().collect();
        self.import_run_with_artifacts(&facts, &[])
    }

    /// Imports a whole run with the artifacts its facts refer to, all or
    /// nothing: its facts keep their seqs, and an imported run that never
    /// ended is marked incomplete.
    ///
    /// Everything is checked before anything is written: every fact against
    /// the stream rules ([`reel_core::rules`], the checks `append` applies;
    /// [`ArchiveError::ImportBreaksRule`] names the first fact that breaks
    /// one), every artifact's bytes against its `sha256:<hex>` digest
    /// ([`ArchiveError::ImportArtifactMismatch`]), the encoding of every
    /// block, and the run id's absence ([`ArchiveError::RunExists`]). A
    /// refused import stores nothing.
    pub fn import_run_with_artifacts(
        &self,
        facts: &[Fact],
        artifacts: &[(String, Vec<u8>)],
    ) -> Result<RunRecord> {
        self.writable()?;
        let Some(first) = facts.first() else {
            return Err(ArchiveError::InvalidFacts {
                run_id: String::new(),
                detail: "there are no facts to import: a run holds at least its run.started".into(),
            });
        };
        // The stream is the one the first fact starts (a run, or a call
        // outside any run); if it starts none, the rules refuse that fact.
        let run_id = match &first.kind {
            FactKind::RunStarted(s) => s.run_id.clone(),
            FactKind::CallStarted(c) => c
                .outside_run
                .as_ref()
                .map(|o| o.key.clone())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let mut rules = StreamRules::new(run_id.as_str());
        let mut record = RunRecord::from_first(first);
        for (index, fact) in facts.iter().enumerate() {
            if let Err(violation) = rules.check(fact) {
                return Err(ArchiveError::ImportBreaksRule {
                    run_id,
                    index,
                    violation: Box::new(violation),
                });
            }
            if let Some(r) = &mut record {
                r.observe(fact);
            }
        }
        // The rules hold, so the first fact is a stream's head.
        let Some(mut record) = record else {
            return Err(ArchiveError::InvalidFacts {
                run_id,
                detail: "the first fact is neither run.started nor the call.started of a call outside any run".into(),
            });
        };
        if !record.state.is_closed() {
            record.state = RunState::Incomplete;
        }
        let digests = check_artifacts(artifacts)?;
        let refuse_existing = |live: &HashMap<String, Arc<Mutex<LiveRun>>>| -> Result<()> {
            let stored = self
                .trees()
                .run_ids
                .contains_key(&run_id)
                .map_err(|e| self.storage(e))?;
            if stored || live.contains_key(&run_id) {
                return Err(ArchiveError::RunExists {
                    run_id: run_id.clone(),
                });
            }
            Ok(())
        };
        refuse_existing(&lock(&self.inner.live))?;
        self.stamp_format()?;
        let ordinal = self.new_ordinal()?;
        let blocks = seal_blocks(&run_id, ordinal, facts)?;
        let entries = keys::index_entries(ordinal, &record);
        let stored_record = encode_record(&record);
        // Its summary, when the run is closed (an import is, or is marked
        // incomplete), with the rest.
        let mut summary = reel_core::summary::SummaryBuilder::default();
        facts.iter().for_each(|f| summary.observe(f));
        let stored_summary = crate::record::encode_summary(&summary.finish(&record));

        // All of it goes in as one sled transaction over every tree it
        // touches. sled seals a transaction's writes as one batch in its log
        // and recovers such a batch whole or not at all, so a crash or an
        // error part way leaves no trace of the import: no artifact, block,
        // record, index or run id entry that a reader, `verify` or recovery
        // would see. (Writing in an order recovery understands instead would
        // leave orphan artifacts, which nothing could tell from wanted ones.)
        // The run id's absence is checked inside the transaction, which sled
        // serialises with every other transaction, and the map of live runs
        // stays locked throughout, so neither a concurrent import nor an
        // `append` creating the same run can slip in: exactly one wins.
        let t = self.trees();
        let to_index = self.write_artifact_files(&digests, artifacts)?;
        let live = lock(&self.inner.live);
        refuse_existing(&live)?;
        let committed = (
            &t.run_ids,
            &t.runs,
            &t.events,
            &t.artifact_files,
            &t.by_time,
            &t.by_tenant,
            &t.by_tool,
            &t.by_status,
            &t.summaries,
        )
            .transaction(
                |(
                    run_ids,
                    runs,
                    events,
                    stored_artifacts,
                    time,
                    tenant,
                    tool,
                    by_status,
                    summaries,
                )| {
                    if run_ids.get(run_id.as_bytes())?.is_some() {
                        return Err(sled::transaction::ConflictableTransactionError::Abort(()));
                    }
                    for (digest, size) in &to_index {
                        // Content-addressed: an entry already there stays.
                        if stored_artifacts.get(digest)?.is_none() {
                            stored_artifacts.insert(&digest[..], &size[..])?;
                        }
                    }
                    for (key, value) in &blocks {
                        events.insert(&key[..], &value[..])?;
                    }
                    time.insert(&entries.time[..], &[][..])?;
                    if let Some(key) = &entries.tenant {
                        tenant.insert(&key[..], &[][..])?;
                    }
                    for key in &entries.tools {
                        tool.insert(&key[..], &[][..])?;
                    }
                    by_status.insert(&entries.status[..], &[][..])?;
                    runs.insert(&keys::run_key(ordinal)[..], &stored_record[..])?;
                    summaries.insert(&keys::run_key(ordinal)[..], &stored_summary[..])?;
                    run_ids.insert(run_id.as_bytes(), &keys::run_key(ordinal)[..])?;
                    Ok(())
                },
            );
        drop(live);
        match committed {
            Ok(()) => {}
            Err(sled::transaction::TransactionError::Abort(())) => {
                return Err(ArchiveError::RunExists { run_id })
            }
            Err(sled::transaction::TransactionError::Storage(e)) => return Err(self.storage(e)),
        }
        self.count_run();
        self.count_facts(facts.len() as u64, 0);
        self.inner.appended.send_modify(|n| *n += 1);
        Ok(record)
    }
}

impl Archive {
    /// Writes the files of the artifacts an import brings that the archive
    /// does not hold yet, and returns their index entries (digest, value)
    /// for the import's transaction. Written first: content-addressed, a
    /// file an aborted import leaves is named by nothing, and the next put
    /// of the same bytes writes it again. Bytes an older reel kept in sled
    /// stay there.
    fn write_artifact_files(
        &self,
        digests: &[Digest],
        artifacts: &[(String, Vec<u8>)],
    ) -> Result<Vec<(Digest, [u8; 8])>> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let mut to_index = Vec::new();
        for (digest, (_, bytes)) in digests.iter().zip(artifacts) {
            if t.artifacts.contains_key(digest).map_err(s)?
                || t.artifact_files.contains_key(digest).map_err(s)?
            {
                continue;
            }
            self.inner
                .files
                .write(digest, bytes)
                .map_err(|e| self.artifact_io("writing", digest, e))?;
            to_index.push((
                *digest,
                crate::keys::artifact_file_value(bytes.len() as u64),
            ));
        }
        Ok(to_index)
    }
}

/// The digest of each artifact to import, checked against the digest it
/// is given under.
fn check_artifacts(artifacts: &[(String, Vec<u8>)]) -> Result<Vec<Digest>> {
    let mut digests = Vec::with_capacity(artifacts.len());
    for (index, (digest, bytes)) in artifacts.iter().enumerate() {
        let actual: Digest = Sha256::digest(bytes).into();
        let refuse = |detail: String| ArchiveError::ImportArtifactMismatch {
            index,
            digest: digest.clone(),
            detail,
        };
        match parse_digest(digest) {
            None => return Err(refuse("the digest is not sha256:<64 hex digits>".into())),
            Some(given) if given != actual => {
                return Err(refuse(format!(
                    "its bytes have the digest sha256:{}",
                    hex::encode(actual)
                )))
            }
            Some(_) => digests.push(actual),
        }
    }
    Ok(digests)
}

/// A run's facts sealed into blocks of at most 1,024, chained as `append`
/// chains them: their keys and values.
fn seal_blocks(run_id: &str, ordinal: u64, facts: &[Fact]) -> Result<Vec<([u8; 16], Vec<u8>)>> {
    const BATCH: usize = 1024;
    let mut blocks = Vec::with_capacity(facts.len().div_ceil(BATCH));
    let mut head: Digest = [0; 32];
    for chunk in facts.chunks(BATCH) {
        let mut payload = Vec::with_capacity(chunk.len() * 128);
        for fact in chunk {
            block::push_fact(&mut payload, fact).map_err(|e| ArchiveError::Encode {
                run_id: run_id.to_owned(),
                detail: format!("seq {}: {e}", fact.seq),
            })?;
        }
        let (value, digest) = block::seal(chunk.len() as u32, &head, &payload);
        head = digest;
        blocks.push((keys::event_key(ordinal, chunk[0].seq), value));
    }
    Ok(blocks)
}
