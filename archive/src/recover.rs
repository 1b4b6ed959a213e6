//! Recovery on open: runs a stopped writer left running are rebuilt from
//! their facts and marked incomplete.

use std::collections::BTreeSet;

use reel_core::run::{RunRecord, RunState};

use crate::record::{encode_record, encode_summary};
use crate::wal::{Ops, Tree};
use crate::{block, keys, Archive, Result};
use reel_core::summary::SummaryBuilder;

impl Archive {
    /// Marks runs left running by a stopped writer as incomplete, with their
    /// records rebuilt from the facts that made it to disk. Journaled, one
    /// frame a run (see `wal`): a crash before the next checkpoint replays
    /// the journal and these frames with it, so the store never holds a
    /// record the journal set back beside a status entry it moved.
    pub(crate) fn recover(&self) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let running: Vec<(sled::IVec, u64)> = t
            .by_status
            .scan_prefix(keys::status_prefix(RunState::Running))
            .keys()
            .filter_map(|k| {
                let k = k.ok()?;
                let (_, o) = keys::split_index_tail(&k)?;
                Some((k, o))
            })
            .collect();
        for (status_key, ordinal) in running {
            let before = match self.record_by_ordinal(ordinal) {
                Ok(Some(record)) => record,
                // The crash came right after the run's first insert, its
                // status entry: nothing else of it was kept.
                Ok(None) => {
                    let mut ops = Ops::default();
                    ops.remove(Tree::ByStatus, &status_key);
                    self.commit(ops)?;
                    continue;
                }
                Err(_) => continue,
            };
            // A closed run under its own entry and a "running" one: a
            // status move (insert the new entry, then remove the old; see
            // `write::store_record`) that a crash cut between the two.
            // The record says where the run stands: the "running" entry
            // goes.
            let own = keys::index_entries(ordinal, &before).status;
            if before.state.is_closed() && t.by_status.contains_key(own).map_err(s)? {
                tracing::warn!(
                    archive = %self.inner.dir.display(),
                    run = %before.run_id,
                    "reel: run {:?} is {} and was still listed as running (a status change a crash cut in two); the running entry was removed",
                    before.run_id,
                    before.state
                );
                let mut ops = Ops::default();
                ops.remove(Tree::ByStatus, &status_key);
                self.commit(ops)?;
                continue;
            }
            let mut after = RunRecord {
                state: RunState::Running,
                facts: 0,
                calls: 0,
                ended_calls: 0,
                failed_credentials: 0,
                tools: BTreeSet::new(),
                ended_at: None,
                ..before.clone()
            };
            let mut summary = SummaryBuilder::default();
            for item in t.events.scan_prefix(keys::events_prefix(ordinal)) {
                let (key, value) = item.map_err(|e| self.storage(e))?;
                let Some((_, first)) = keys::split_event_key(&key) else {
                    continue;
                };
                let Ok(opened) = block::open(&value) else {
                    continue;
                };
                after.facts = after.facts.max(first + opened.count as u64);
                if let Ok(facts) = block::decode_facts(&opened, first) {
                    for fact in &facts {
                        after.observe(fact);
                        summary.observe(fact);
                    }
                }
            }
            // The calls and tools of a damaged block stay known from the
            // stored record (which the tool index agrees with).
            after.calls = after.calls.max(before.calls);
            after.tools.extend(before.tools.iter().cloned());
            if after.state == RunState::Running {
                after.state = RunState::Incomplete;
            }
            // The crash may have cut the inserts that make or change a run
            // (record, indexes, run id) anywhere: store the record and assert
            // every index entry it implies (each insert is idempotent), and
            // move the status entry last, so that a crash during recovery
            // leaves the run to the next one.
            let mut ops = Ops::default();
            ops.insert(Tree::Runs, keys::run_key(ordinal), encode_record(&after));
            // Its summary too, once the archive is of the format that has
            // them (an older one is summarized from its facts when needed).
            if self.format_version() >= crate::FORMAT_VERSION {
                let summary = summary.finish(&after);
                ops.insert(
                    Tree::Summaries,
                    keys::run_key(ordinal),
                    encode_summary(&summary),
                );
            }
            let entries = keys::index_entries(ordinal, &after);
            crate::write::index_but_status(&mut ops, &entries);
            if !t.run_ids.contains_key(after.run_id.as_bytes()).map_err(s)? {
                ops.insert(
                    Tree::RunIds,
                    after.run_id.as_bytes(),
                    keys::run_key(ordinal),
                );
            }
            ops.insert(Tree::ByStatus, &entries.status, b"");
            ops.remove(Tree::ByStatus, &status_key);
            self.commit(ops)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use reel_core::fact::{FactKind, NewFact, Producer, RunEnded, RunStarted, RunStatus};
    use reel_core::run::RunState;

    use crate::{keys, Archive, ArchiveConfig};

    fn new(kind: FactKind) -> NewFact {
        NewFact {
            at: 1,
            offset: 1,
            call: None,
            kind,
        }
    }

    /// A crash that kept a prefix of a status move (the new entry
    /// inserted, the old "running" one not yet removed; see
    /// `write::store_record`) leaves a closed run under both entries:
    /// recovery (on the next open, or the last handle's close) removes the
    /// "running" one, and verify finds the archive sound.
    #[test]
    fn a_status_move_a_crash_cut_in_two_is_finished_by_recovery() {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("open");
        archive
            .append(
                "r",
                vec![
                    new(FactKind::RunStarted(RunStarted {
                        run_id: "r".into(),
                        session_id: None,
                        identity: None,
                        producer: Producer {
                            name: "recover".into(),
                            version: "0".into(),
                        },
                        labels: Default::default(),
                        teardown_scopes: vec![],
                    })),
                    new(FactKind::RunEnded(RunEnded {
                        status: RunStatus::Completed,
                    })),
                ],
            )
            .expect("append");
        let ordinal = archive.ordinal("r").expect("ordinal");
        let mut record = archive.run("r").expect("record");
        assert_eq!(record.state, RunState::Completed);
        // The "running" entry the move had not removed yet.
        record.state = RunState::Running;
        let running = keys::index_entries(ordinal, &record).status;
        archive
            .trees()
            .by_status
            .insert(&running, b"")
            .expect("insert");
        let found = archive.verify().expect("verify").problems;
        assert!(!found.is_empty(), "both entries, unrecovered, are damage");
        archive.checkpoint().expect("checkpoint");
        drop(archive);

        let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("reopen");
        let t = archive.trees();
        assert!(!t.by_status.contains_key(&running).expect("read"));
        assert_eq!(archive.run("r").expect("record").state, RunState::Completed);
        let report = archive.verify().expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
