//! [`Access`]: the one way a handler reads runs. Every request the
//! security guard lets through carries a [`Grant`] (every run, or one
//! tenant's); `Access` is built from it and is the only holder of the
//! reader outside this module. [`Access::run`] is the one gate for a run:
//! another tenant's run is answered exactly as a missing one (same
//! status, same words), and what reads inside a run (its facts, its tape,
//! its kept timeline) takes the [`Admitted`] record only `Access::run`
//! hands out. Listings and counts name the grant's tenant to the archive
//! and drop any run of another.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use reel_archive::live::{Item, Source};
use reel_archive::{RunFilter, RunPage};
use reel_core::tape::Tape;
use reel_core::{RunRecord, RunState};
use reel_viewer::timeline::Timeline;
use tokio::sync::watch;

use super::{each_fact, Console, ReadError};
use crate::security::Grant;

/// A run record [`Access::run`] let through (the only way to get one):
/// reads inside a run take it, so none reaches a run the grant does not.
#[derive(Debug, Clone)]
pub(crate) struct Admitted(RunRecord);

impl std::ops::Deref for Admitted {
    type Target = RunRecord;
    fn deref(&self) -> &RunRecord {
        &self.0
    }
}

/// What one request may read, and the reader it reads through.
#[derive(Clone)]
pub(crate) struct Access {
    pub(crate) console: Arc<Console>,
    /// Read only inside `source` (the runs search reads facts of runs
    /// `list_runs` let through).
    pub(super) reader: Source,
    tenant: Option<String>,
}

impl FromRequestParts<Arc<Console>> for Access {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Access, Response> {
        // Set by the guard on every request it lets through; a route
        // outside it reads nothing.
        match parts.extensions.get::<Grant>() {
            Some(grant) => Ok(Access::new(console.clone(), grant)),
            None => Err((
                StatusCode::UNAUTHORIZED,
                "this request carries no grant: it reads nothing",
            )
                .into_response()),
        }
    }
}

/// What a missing run (and a run of another tenant) is answered with.
fn unknown(run_id: &str) -> ReadError {
    ReadError::UnknownRun(format!(
        "no run {run_id:?} in this archive: list runs on the console's first page"
    ))
}

impl Access {
    pub(crate) fn new(console: Arc<Console>, grant: &Grant) -> Access {
        Access {
            reader: console.reader(),
            tenant: grant.tenant.clone(),
            console,
        }
    }

    /// The same grant over the archive as it is now (the copy may have
    /// been opened again since this request began).
    pub(crate) fn fresh(&self) -> Access {
        Access {
            reader: self.console.reader(),
            ..self.clone()
        }
    }

    /// The tenant the grant is limited to, if any.
    pub(crate) fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether the grant reaches `record`'s run.
    fn admits(&self, record: &RunRecord) -> bool {
        self.tenant
            .as_deref()
            .is_none_or(|t| record.tenant() == Some(t))
    }

    /// The one gate of a run: its record when the grant reaches it; a
    /// missing run and another tenant's get the same answer.
    pub(crate) fn run(&self, run_id: &str) -> Result<Admitted, ReadError> {
        match self.reader.run(run_id) {
            Ok(r) if self.admits(&r) => Ok(Admitted(r)),
            Ok(_) => Err(unknown(run_id)),
            Err(e) if e.is_unknown_run() => Err(unknown(run_id)),
            Err(e) => Err(e.into()),
        }
    }

    /// A page of runs: with a tenant-limited grant, the filter names that
    /// tenant (a filter naming another matches nothing), and no run of
    /// another is in the answer.
    pub(crate) fn list_runs(&self, filter: &RunFilter) -> Result<RunPage, ReadError> {
        let mut filter = filter.clone();
        if let Some(mine) = &self.tenant {
            if filter.tenant.as_ref().is_some_and(|t| t != mine) {
                return Ok(RunPage {
                    runs: Vec::new(),
                    next: None,
                    damaged: Vec::new(),
                });
            }
            filter.tenant = Some(mine.clone());
        }
        let mut page = self.reader.list_runs(&filter)?;
        page.runs.retain(|r| self.admits(r));
        if self.tenant.is_some() {
            // A damaged record's tenant is unknown: not this grant's to see.
            page.damaged.clear();
        }
        Ok(page)
    }

    /// The run's facts from `from` up to `until` (all: `None`), in seq
    /// order.
    pub(crate) fn facts(
        &self,
        run: &Admitted,
        from: u64,
        until: Option<u64>,
        each: impl FnMut(Item),
    ) -> Result<(), ReadError> {
        let seqs = from..until.unwrap_or(u64::MAX);
        each_fact(&self.reader, &run.run_id, seqs, each)
    }

    /// The run as a tape (from the archive only).
    pub(crate) fn tape(&self, run: &Admitted) -> Result<Tape, ReadError> {
        Ok(self.reader.tape(&run.run_id)?)
    }

    /// Whether the pages read through a recorder's live socket.
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.reader, Source::Live { .. })
    }

    /// The kept timeline of a closed run read from this copy, if any.
    pub(crate) fn timeline(&self, run: &Admitted) -> Option<Arc<Timeline>> {
        self.console.timeline(&run.run_id)
    }

    /// Keeps the timeline of a closed run read from the archive.
    pub(crate) fn keep_timeline(&self, run: &Admitted, timeline: Arc<Timeline>) {
        if run.state.is_closed() && !self.is_live() {
            self.console.keep_timeline(&run.run_id, timeline);
        }
    }

    /// Runs `build` (which reads the whole of a closed run read from the
    /// archive and keeps what it built) on a thread of its own, once per
    /// run at a time: the next look at a big run shows all of it.
    pub(crate) fn build_later(
        &self,
        run: &Admitted,
        build: impl FnOnce(&Access, &Admitted) + Send + 'static,
    ) {
        if !run.state.is_closed() || self.is_live() || self.timeline(run).is_some() {
            return;
        }
        if !reel_core::lock::lock(&self.console.building).insert(run.run_id.clone()) {
            return;
        }
        let (access, run) = (self.clone(), run.clone());
        std::thread::spawn(move || {
            build(&access, &run);
            reel_core::lock::lock(&access.console.building).remove(&run.run_id);
        });
    }

    /// Runs per state the grant reaches, from the status index when it
    /// reaches every run (`None` when they could not be counted that way).
    pub(crate) fn index_counts(&self) -> Option<Vec<(RunState, u64)>> {
        let counts = self.console.counts();
        (self.tenant.is_none() && !counts.is_empty()).then_some(counts)
    }

    /// The generation of the archive copy (moves when it changes).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.console.subscribe()
    }

    /// What the newest runs the grant reaches look like: a change here is
    /// news for its event stream (another tenant's runs never are).
    pub(crate) fn signature(&self) -> Vec<(String, RunState, u64)> {
        let filter = RunFilter {
            limit: Some(50),
            ..RunFilter::default()
        };
        // A fresh reader: the copy may have changed since this request.
        self.fresh()
            .list_runs(&filter)
            .map(|p| {
                p.runs
                    .into_iter()
                    .map(|r| (r.run_id, r.state, r.facts))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The runs `filter` selects that the grant reaches, merged into an
    /// overview of `buckets` time buckets (a filter naming another
    /// tenant than the grant's selects nothing).
    pub(crate) fn overview(
        &self,
        filter: &RunFilter,
        buckets: u32,
    ) -> Result<reel_core::summary::Overview, ReadError> {
        let filter = self.granted(filter);
        Ok(self.reader.overview(&filter, buckets)?)
    }

    /// As [`Access::overview`], the runs per state only (the runs table's
    /// chart: from the status index when no tenant or tool narrows it).
    pub(crate) fn runs_over_time(
        &self,
        filter: &RunFilter,
        buckets: u32,
    ) -> Result<reel_core::summary::Overview, ReadError> {
        let filter = self.granted(filter);
        Ok(self.reader.runs_over_time(&filter, buckets)?)
    }

    /// `filter` limited to the grant's tenant (naming another selects
    /// nothing).
    fn granted(&self, filter: &RunFilter) -> RunFilter {
        let mut filter = filter.clone();
        if let Some(mine) = &self.tenant {
            if filter.tenant.as_ref().is_some_and(|t| t != mine) {
                // Nothing: an empty window.
                filter.since = Some(0);
                filter.until = Some(0);
            }
            filter.tenant = Some(mine.clone());
        }
        filter
    }

    /// What the pages say of where they read from, when it is not a
    /// closed archive's latest copy.
    pub(crate) fn stale(&self) -> Option<String> {
        self.console.stale()
    }
}
