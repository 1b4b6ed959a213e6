//! Retention: `reel prune` deletes old runs, with their blocks, records,
//! index entries, and the artifacts no remaining run refers to.
//!
//! *Invariant:* a prune is crash-safe. Each run is deleted in this order:
//! its tombstone (the `pruned` tree, flushed), its index entries, its run
//! id entry, its blocks, its record, then the tombstone is marked done. A
//! crash anywhere leaves a pending tombstone, and [`Archive::open`]
//! finishes that run's deletion before anything reads the archive (every
//! step is idempotent). *Why this order:* listings read the indexes first,
//! so a run leaves them before anything they point at goes, and the record
//! goes last because it is what the index entries are derived from.
//! `verify` counts the tombstones as pruned runs, never as damage.
//! Artifacts are swept after the runs: only those no remaining run's facts
//! refer to, and not at all while a remaining run has facts that cannot be
//! read (they might refer to one).

use std::collections::BTreeSet;

use serde::Serialize;

use reel_core::run::{RunRecord, RunState};

use crate::{keys, Archive, Result, RunFilter};
use reel_core::codec::parse_digest;

/// Which runs [`Archive::prune`] deletes: closed runs started before
/// `started_before`, and (when given) of one tenant, in one state.
#[derive(Debug, Clone, Default)]
pub struct PruneFilter {
    /// Only runs started before this time (unix nanos).
    pub started_before: i64,
    /// Only runs of this tenant.
    pub tenant: Option<String>,
    /// Only runs in this state (a running run is never pruned).
    pub status: Option<RunState>,
}

/// What a prune deleted (or, on a dry run, would delete).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// True when nothing was deleted.
    pub dry_run: bool,
    /// The runs, by id.
    pub runs: Vec<String>,
    /// Their blocks.
    pub blocks: u64,
    /// Their facts.
    pub facts: u64,
    /// Artifacts no remaining run refers to (deleted; counted on a dry run).
    pub artifacts: u64,
    /// Why artifacts were left alone, when they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts_kept: Option<String>,
}

/// A pruned run's tombstone (stored by `keys::tombstone_value`).
struct Tombstone {
    pending: bool,
    pruned_at: i64,
    started_at: i64,
    run_id: String,
}

impl Tombstone {
    fn encode(&self) -> Vec<u8> {
        keys::tombstone_value(self.pending, self.pruned_at, self.started_at, &self.run_id)
    }

    fn decode(bytes: &[u8]) -> Option<Tombstone> {
        let (pending, pruned_at, started_at, run_id) = keys::tombstone_from(bytes)?;
        Some(Tombstone {
            pending,
            pruned_at,
            started_at,
            run_id,
        })
    }
}

impl Archive {
    /// The runs `filter` selects, oldest first (closed runs only).
    pub fn prune_candidates(&self, filter: &PruneFilter) -> Result<Vec<RunRecord>> {
        let mut out = Vec::new();
        let mut page_filter = RunFilter {
            tenant: filter.tenant.clone(),
            status: filter.status,
            until: Some(filter.started_before),
            limit: Some(1000),
            ..RunFilter::default()
        };
        loop {
            let page = self.list_runs(&page_filter)?;
            out.extend(page.runs.into_iter().filter(|r| r.state.is_closed()));
            match page.next {
                Some(next) => page_filter.cursor = Some(next),
                None => break,
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Deletes the runs `filter` selects (or only counts them, when
    /// `dry_run`), then the artifacts no remaining run refers to. `step`
    /// is called before each deletion with (runs done, runs in all), so a
    /// caller can show progress (or, in tests, pause). See the module docs
    /// for why a crash leaves the archive consistent.
    pub fn prune(
        &self,
        filter: &PruneFilter,
        dry_run: bool,
        step: &mut dyn FnMut(u64, u64),
    ) -> Result<PruneReport> {
        if !dry_run {
            self.writable()?;
        }
        let candidates = self.prune_candidates(filter)?;
        let total = candidates.len() as u64;
        let mut report = PruneReport {
            dry_run,
            ..PruneReport::default()
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or_default();
        for (done, record) in candidates.iter().enumerate() {
            step(done as u64, total);
            let ordinal = self.ordinal(&record.run_id)?;
            let blocks = self
                .trees()
                .events
                .scan_prefix(keys::events_prefix(ordinal))
                .keys()
                .count() as u64;
            report.blocks += blocks;
            report.facts += record.facts;
            report.runs.push(record.run_id.clone());
            if dry_run {
                continue;
            }
            let tombstone = Tombstone {
                pending: true,
                pruned_at: now,
                started_at: record.started_at,
                run_id: record.run_id.clone(),
            };
            let t = self.trees();
            t.pruned
                .insert(keys::run_key(ordinal), tombstone.encode())
                .map_err(|e| self.storage(e))?;
            // The control record counts the run's facts out before any of
            // them goes (a count below the store's is never damage).
            self.count_facts(0, record.facts);
            self.flush()?;
            self.delete_run(ordinal, &tombstone, &mut || step(done as u64, total))?;
        }
        step(total, total);
        self.sweep_artifacts(&mut report)?;
        self.flush()?;
        Ok(report)
    }

    /// Deletes what is left of the run `ordinal` in the order of the module
    /// docs, then marks its tombstone done. Idempotent.
    fn delete_run(
        &self,
        ordinal: u64,
        tombstone: &Tombstone,
        pause: &mut dyn FnMut(),
    ) -> Result<()> {
        self.dirty();
        let t = self.trees();
        let s = |e| self.storage(e);
        if let Some(record) = self.record_by_ordinal(ordinal).ok().flatten() {
            let entries = keys::index_entries(ordinal, &record);
            pause();
            t.by_status.remove(&entries.status).map_err(s)?;
            t.by_time.remove(&entries.time).map_err(s)?;
            if let Some(tenant) = &entries.tenant {
                t.by_tenant.remove(tenant).map_err(s)?;
            }
            for tool in &entries.tools {
                t.by_tool.remove(tool).map_err(s)?;
            }
        }
        t.summaries.remove(keys::run_key(ordinal)).map_err(s)?;
        pause();
        let _ = t
            .run_ids
            .compare_and_swap(
                tombstone.run_id.as_bytes(),
                Some(&keys::run_key(ordinal)[..]),
                None::<&[u8]>,
            )
            .map_err(s)?;
        let blocks: Vec<sled::IVec> = t
            .events
            .scan_prefix(keys::events_prefix(ordinal))
            .keys()
            .collect::<std::result::Result<_, _>>()
            .map_err(s)?;
        for key in blocks {
            pause();
            t.events.remove(key).map_err(s)?;
        }
        pause();
        t.salvaged.remove(keys::run_key(ordinal)).map_err(s)?;
        t.runs.remove(keys::run_key(ordinal)).map_err(s)?;
        let done = Tombstone {
            pending: false,
            pruned_at: tombstone.pruned_at,
            started_at: tombstone.started_at,
            run_id: tombstone.run_id.clone(),
        };
        t.pruned
            .insert(keys::run_key(ordinal), done.encode())
            .map_err(s)?;
        Ok(())
    }

    /// Deletes artifacts no remaining run refers to (counts them on a dry
    /// run, as if the selected runs were gone).
    fn sweep_artifacts(&self, report: &mut PruneReport) -> Result<()> {
        let pruned: BTreeSet<&str> = report.runs.iter().map(String::as_str).collect();
        let mut referenced = BTreeSet::new();
        for run_id in self.run_ids() {
            let run_id = run_id?;
            if pruned.contains(run_id.as_str()) {
                continue;
            }
            let mut facts = Vec::new();
            for fact in self.facts(&run_id, ..)? {
                match fact {
                    Ok(f) => facts.push(f),
                    Err(e) if e.is_damage() => {
                        report.artifacts_kept = Some(format!(
                            "run {run_id:?} has facts that cannot be read ({e}), so no artifact was deleted: run `reel verify`, then `reel salvage`"
                        ));
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
            }
            for digest in reel_core::tape::referenced_digests(&facts) {
                if let Some(raw) = parse_digest(&digest) {
                    referenced.insert(raw);
                }
            }
        }
        let t = self.trees();
        let unreferenced = |tree: &sled::Tree| -> Vec<sled::IVec> {
            tree.iter()
                .keys()
                .filter_map(|k| k.ok())
                .filter(|k| !<[u8; 32]>::try_from(&k[..]).is_ok_and(|d| referenced.contains(&d)))
                .collect()
        };
        let (in_sled, files) = (unreferenced(&t.artifacts), unreferenced(&t.artifact_files));
        report.artifacts = (in_sled.len() + files.len()) as u64;
        if !report.dry_run {
            for key in in_sled {
                t.artifacts.remove(key).map_err(|e| self.storage(e))?;
            }
            // The index entries go first, durably; then the files: a crash
            // between leaves files nothing names, never an entry whose file
            // is gone.
            for key in &files {
                t.artifact_files.remove(key).map_err(|e| self.storage(e))?;
            }
            if !files.is_empty() {
                self.flush()?;
            }
            for key in files {
                if let Ok(digest) = <[u8; 32]>::try_from(&key[..]) {
                    self.inner
                        .files
                        .remove(&digest)
                        .map_err(|e| self.artifact_io("removing", &digest, e))?;
                }
            }
        }
        Ok(())
    }

    /// Finishes every prune a crash interrupted (on open).
    pub(crate) fn finish_prunes(&self) -> Result<()> {
        let pending: Vec<(u64, Tombstone)> = self
            .trees()
            .pruned
            .iter()
            .filter_map(|item| {
                let (k, v) = item.ok()?;
                let t = Tombstone::decode(&v)?;
                Some((keys::ordinal_from(&k)?, t)).filter(|(_, t)| t.pending)
            })
            .collect();
        let any = !pending.is_empty();
        for (ordinal, tombstone) in pending {
            self.delete_run(ordinal, &tombstone, &mut || {})?;
        }
        if any {
            self.flush()?;
        }
        Ok(())
    }

    /// How many runs were pruned from this archive (their tombstones).
    pub fn pruned_runs(&self) -> Result<u64> {
        Ok(self.trees().pruned.len() as u64)
    }
}
