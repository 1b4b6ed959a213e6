//! The runs table's search, behind [`Access`]: the archive's indexed
//! filters (tenant, tool, status, start time) narrow the scan, then
//! principal, session, has-anomaly and a text search are checked on each
//! run; paged by the archive's cursor, each request within a time budget
//! (past it, the page says how far it looked and continues from there).
//! Counts per status under the same filters. A run's anomalies are
//! counted as `reel runs` counts them (the viewer's timeline over its
//! facts: one definition) and kept per run while its record is unchanged.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reel_archive::live::Item;
use reel_archive::{Cursor, RunFilter};
use reel_core::fact::{CallOutcome, FactKind, TeardownOutcome};
use reel_core::{Fact, RunRecord, RunState};
use reel_viewer::timeline::TimelineBuilder;
use serde_json::Value;

use super::{each_fact, Access, ReadError};

/// How long one request may search (listing, then counting).
pub(crate) const SEARCH_BUDGET: Duration = Duration::from_millis(1500);

/// Runs read per step of a counting scan.
const COUNT_STEP: usize = 500;

/// The most runs whose anomalies are kept (all forgotten at once past it).
const ANOMALIES_KEPT: usize = 500_000;

/// The most counts kept (all forgotten at once past it; a new copy of the
/// archive forgets them too).
const COUNTS_KEPT: usize = 256;

/// A runs-table query: what the archive's indexes answer, and what is
/// checked on each run.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunQuery {
    /// Tenant, tool, status, since, until, limit and cursor.
    pub(crate) filter: RunFilter,
    /// Only runs of this principal.
    pub(crate) principal: Option<String>,
    /// Only runs of this session.
    pub(crate) session: Option<String>,
    /// Only runs with an anomaly (or whose facts could not be read).
    pub(crate) anomalous: bool,
    /// Only runs whose tool names, labels, messages or errors hold this
    /// text (any case).
    pub(crate) text: Option<String>,
}

impl RunQuery {
    /// Whether a run must be checked beyond the archive's indexes.
    fn checks_runs(&self) -> bool {
        self.principal.is_some() || self.session.is_some() || self.anomalous || self.text.is_some()
    }
}

/// A run of a listing and its anomalies (`None`: its facts could not be
/// read at all).
pub(crate) struct Row {
    pub(crate) record: RunRecord,
    pub(crate) anomalies: Option<usize>,
}

/// One page of the runs table.
pub(crate) struct Listed {
    pub(crate) rows: Vec<Row>,
    /// Where the next page starts.
    pub(crate) next: Option<Cursor>,
    /// Run records the archive could not read.
    pub(crate) damaged: usize,
    /// Set when the budget ran out before the page filled: how many runs
    /// were looked at (the next page continues the search).
    pub(crate) cut_short: Option<u64>,
}

/// Runs per state under a query's filters.
#[derive(Debug, Clone)]
pub(crate) struct Counts {
    pub(crate) by_state: Vec<(RunState, u64)>,
    /// Set when the budget ran out: the figures are lower bounds.
    pub(crate) partial: bool,
}

/// What the console keeps between requests for the runs table.
#[derive(Default)]
pub(crate) struct Kept {
    /// Anomalies per run id, with the fact count and state they were
    /// counted at.
    anomalies: HashMap<String, (u64, RunState, usize)>,
    /// Counts per query (the generation of the copy is in the key).
    counts: HashMap<String, Counts>,
}

impl Access {
    /// One page of the runs table, newest first.
    pub(crate) fn find_runs(&self, query: &RunQuery) -> Result<Listed, super::ReadError> {
        let limit = query.filter.limit.filter(|n| *n > 0).unwrap_or(50);
        let started = Instant::now();
        let mut listed = Listed {
            rows: Vec::new(),
            next: None,
            damaged: 0,
            cut_short: None,
        };
        let mut cursor = query.filter.cursor.clone();
        let mut looked = 0u64;
        let mut damaged = std::collections::BTreeSet::new();
        loop {
            // Never more than the page still needs: the archive's cursor
            // after a step is then exactly after the last run shown.
            let step = RunFilter {
                limit: Some(limit - listed.rows.len()),
                cursor: cursor.clone(),
                ..query.filter.clone()
            };
            let page = self.list_runs(&step)?;
            // A step may pass the same damaged record as the one before.
            damaged.extend(page.damaged.into_iter().map(|d| (d.ordinal, d.detail)));
            for record in page.runs {
                looked += 1;
                let (keep, anomalies) = self.check(query, &record);
                if keep {
                    listed.rows.push(Row {
                        anomalies: anomalies.or_else(|| self.anomalies(&record)),
                        record,
                    });
                }
            }
            cursor = page.next;
            if cursor.is_none() || listed.rows.len() == limit {
                break;
            }
            if started.elapsed() > SEARCH_BUDGET {
                listed.cut_short = Some(looked);
                break;
            }
        }
        listed.next = cursor;
        listed.damaged = damaged.len();
        Ok(listed)
    }

    /// Whether `record` passes the checks beyond the indexes, and its
    /// anomalies when they are known on the way.
    fn check(&self, query: &RunQuery, record: &RunRecord) -> (bool, Option<usize>) {
        let principal = record.identity.as_ref().and_then(|i| i.principal.as_ref());
        if query
            .principal
            .as_ref()
            .is_some_and(|p| principal != Some(p))
            || query
                .session
                .as_ref()
                .is_some_and(|s| record.session_id.as_ref() != Some(s))
        {
            return (false, None);
        }
        let needle = query.text.as_ref().map(|t| t.to_lowercase());
        let in_record = needle.as_deref().is_none_or(|n| record_holds(record, n));
        let kept = self.kept_anomalies(record);
        let anomalies_needed = query.anomalous && kept.is_none();
        let (anomalies, in_facts) = if anomalies_needed || !in_record {
            let needle = if in_record { None } else { needle.as_deref() };
            self.read_run(record, needle)
        } else {
            (kept, false)
        };
        let text_ok = in_record || in_facts;
        let anomaly_ok = !query.anomalous || anomalies.is_none_or(|n| n > 0);
        (text_ok && anomaly_ok, anomalies)
    }

    /// `record`'s anomalies, kept or counted now.
    fn anomalies(&self, record: &RunRecord) -> Option<usize> {
        self.kept_anomalies(record)
            .or_else(|| self.read_run(record, None).0)
    }

    fn kept_anomalies(&self, record: &RunRecord) -> Option<usize> {
        let kept = reel_core::lock::lock(&self.console.kept);
        kept.anomalies
            .get(&record.run_id)
            .filter(|(facts, state, _)| *facts == record.facts && *state == record.state)
            .map(|(_, _, n)| *n)
    }

    /// Reads the run's facts once: its anomalies (the viewer's timeline,
    /// kept), and whether a message or error holds `needle`.
    fn read_run(&self, record: &RunRecord, needle: Option<&str>) -> (Option<usize>, bool) {
        let mut builder = TimelineBuilder::for_record(record);
        let mut found = false;
        let read = match needle {
            // The timeline alone: read as views (`Facts::views`).
            None => self
                .reader
                .views(&record.run_id, &mut builder)
                .map_err(ReadError::from),
            Some(n) => each_fact(
                &self.reader,
                &record.run_id,
                0..u64::MAX,
                |item| match item {
                    Item::Fact(fact) => {
                        builder.push(&fact);
                        if !found {
                            fact_texts(&fact, &mut |s| found |= s.to_lowercase().contains(n));
                        }
                    }
                    Item::Gap(gap) => builder.push_gap(&gap),
                },
            ),
        };
        if read.is_err() {
            return (None, found);
        }
        let n = builder.finish().anomalies.len();
        let mut kept = reel_core::lock::lock(&self.console.kept);
        if kept.anomalies.len() >= ANOMALIES_KEPT {
            kept.anomalies.clear();
        }
        kept.anomalies
            .insert(record.run_id.clone(), (record.facts, record.state, n));
        (Some(n), found)
    }

    /// Runs per state under `query`'s filters (its status and cursor
    /// aside).
    pub(crate) fn counts(&self, query: &RunQuery) -> Counts {
        let f = &query.filter;
        let narrowed =
            f.tenant.is_some() || f.tool.is_some() || f.since.is_some() || f.until.is_some();
        if !narrowed && !query.checks_runs() {
            if let Some(by_state) = self.index_counts() {
                return Counts {
                    by_state,
                    partial: false,
                };
            }
        }
        let key = format!(
            "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}",
            *self.console.generation.borrow(),
            self.tenant(),
            f.tenant,
            f.tool,
            f.since,
            f.until,
            query.principal,
            query.session,
            query.anomalous,
            query.text
        );
        if let Some(c) = reel_core::lock::lock(&self.console.kept).counts.get(&key) {
            return c.clone();
        }
        let counts = self.count(query);
        let mut kept = reel_core::lock::lock(&self.console.kept);
        if kept.counts.len() >= COUNTS_KEPT {
            kept.counts.clear();
        }
        if !counts.partial {
            kept.counts.insert(key, counts.clone());
        }
        counts
    }

    fn count(&self, query: &RunQuery) -> Counts {
        let started = Instant::now();
        let mut by_state: Vec<(RunState, u64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
        let mut cursor = None;
        loop {
            let step = RunFilter {
                status: None,
                limit: Some(COUNT_STEP),
                cursor,
                ..query.filter.clone()
            };
            let Ok(page) = self.list_runs(&step) else {
                return Counts {
                    by_state,
                    partial: true,
                };
            };
            for r in &page.runs {
                if self.check(query, r).0 {
                    if let Some(n) = by_state.iter_mut().find(|(s, _)| *s == r.state) {
                        n.1 += 1;
                    }
                }
            }
            cursor = page.next;
            if cursor.is_none() {
                return Counts {
                    by_state,
                    partial: false,
                };
            }
            if started.elapsed() > SEARCH_BUDGET {
                return Counts {
                    by_state,
                    partial: true,
                };
            }
        }
    }
}

/// Whether the run's id, tool names or labels hold `needle` (lowercase).
fn record_holds(r: &RunRecord, needle: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(needle);
    has(&r.run_id)
        || r.tools.iter().any(|t| has(t))
        || r.labels
            .iter()
            .any(|(k, v)| has(k) || has(v) || has(&format!("{k}={v}")))
}

/// The messages and errors a fact holds, each handed to `each`.
fn fact_texts(fact: &Fact, each: &mut impl FnMut(&str)) {
    match &fact.kind {
        FactKind::CallStarted(c) => each(&c.tool_name),
        FactKind::CallEnded(c) => match &c.outcome {
            CallOutcome::Error { error, .. } => each(error),
            CallOutcome::Aborted {
                reason: Some(reason),
            } => each(reason),
            _ => {}
        },
        FactKind::Progress(p) => strings(&p.payload, each, 0),
        FactKind::Log(l) => strings(&l.data, each, 0),
        FactKind::ElicitRequested(e) => each(&e.message),
        FactKind::ElicitRefused(e) => {
            each(&e.message);
            each(&e.reason);
        }
        FactKind::CredentialFailed(c) => each(&c.reason),
        FactKind::CredentialRefused(c) => each(&c.reason),
        FactKind::ArtifactRefused(a) => each(&a.reason),
        FactKind::TeardownRefused(t) => each(&t.reason),
        FactKind::TeardownRan(t) => {
            if let TeardownOutcome::Error { message } = &t.outcome {
                each(message)
            }
        }
        _ => {}
    }
}

/// The strings in a recorded value (to a bounded depth).
fn strings(v: &Value, each: &mut impl FnMut(&str), depth: usize) {
    if depth > 8 {
        return;
    }
    match v {
        Value::String(s) => each(s),
        Value::Array(items) => items.iter().for_each(|i| strings(i, each, depth + 1)),
        Value::Object(m) => m.values().for_each(|i| strings(i, each, depth + 1)),
        _ => {}
    }
}
