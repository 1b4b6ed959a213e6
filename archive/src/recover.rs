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
            // Status changes are atomic (one sled batch, see `wal`), so a crash never
            // leaves a closed run both its own entry and a "running" one:
            // that is damage, left for `verify` to report.
            let own = keys::index_entries(ordinal, &before).status;
            if before.state.is_closed() && t.by_status.contains_key(own).map_err(s)? {
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
            ops.remove(Tree::ByStatus, &status_key);
            ops.insert(Tree::ByStatus, &entries.status, b"");
            self.commit(ops)?;
        }
        Ok(())
    }
}
