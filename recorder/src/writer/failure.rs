//! The write pipeline's failures: the store's first failure as a whole,
//! each failed run's, and who is told which.

use std::collections::HashMap;

use reel::store::StoreError;

/// Why the write pipeline failed. The store's first failure as a whole is
/// kept and reported to every later flush and at shutdown; a run's failure
/// to the flushes of that run and to whole-recorder flushes and shutdown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The recorder was shut down: nothing more is written.
    #[error("the recorder has shut down")]
    ShutDown,
    /// The writer thread stopped before answering.
    #[error("the recorder's writer stopped")]
    WriterStopped,
    /// A fact was filed after the recorder shut down: it was not recorded.
    #[error("a fact was filed after the recorder shut down")]
    FiledAfterShutdown,
    /// The store refused or failed (`what` the writer was doing).
    #[error("{what}: {detail}")]
    Store {
        /// What the writer was doing, e.g. `run "r": appending facts`.
        what: String,
        /// The store's error.
        detail: String,
    },
    /// The store failed one run's stream (and said so, naming it): that
    /// run records nothing from the failed batch on; other runs go on.
    #[error("{0}")]
    Run(RunFailure),
    /// Several runs failed (a whole-recorder flush or shutdown): the
    /// first [`RUNS_SHOWN`] by run id, and how many in all.
    #[error("{total} runs were not recorded whole: {}{}", shown.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" | "), if *total > shown.len() { format!(" | and {} more", total - shown.len()) } else { String::new() })]
    Runs {
        /// The first failed runs, by run id.
        shown: Vec<RunFailure>,
        /// How many runs failed.
        total: usize,
    },
}

/// How many failed runs a [`WriteError::Runs`] names.
pub const RUNS_SHOWN: usize = 16;

/// One run whose stream the store failed (see [`WriteError::Run`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run {run:?}: {what}: {detail}; the run records nothing from there on ({dropped} of its facts not recorded so far); other runs go on")]
pub struct RunFailure {
    /// The run id (or the key of a call outside any run).
    pub run: String,
    /// What the writer was doing, e.g. `appending facts`.
    pub what: String,
    /// The store's error.
    pub detail: String,
    /// The run's facts the writer did not store since (a refused batch
    /// included; what a store took and lost is the store's to say), as of
    /// when this was reported.
    pub dropped: u64,
}

/// The failures of one writer, shared by its queue, writer and flusher.
#[derive(Default)]
pub(crate) struct Failures {
    /// The store failed as a whole (or a fact came after shutdown): every
    /// flush fails.
    pub(super) global: Option<WriteError>,
    /// The runs whose stream failed, with whether dropping their later
    /// facts was warned about. Kept for the recorder's life (an entry per
    /// failed run), so the run's later flushes keep failing: a flush of a
    /// run's end may be answered after the run is closed.
    runs: HashMap<String, (RunFailure, bool)>,
}

impl Failures {
    /// Keeps `e`: as the failure of each stream it names
    /// ([`StoreError::Streams`]), else as the store's (the first of each is
    /// kept), said as a `tracing` error. `run` is whose facts the writer
    /// was writing, if one's; `dropped`, how many facts of it went unstored.
    pub(super) fn record(&mut self, what: &str, run: Option<&str>, dropped: usize, e: &StoreError) {
        match e {
            StoreError::Streams(failed) if !failed.is_empty() => {
                for f in failed {
                    if self.runs.contains_key(&f.stream) {
                        continue;
                    }
                    let failure = RunFailure {
                        run: f.stream.clone(),
                        what: what.to_owned(),
                        detail: f.error.to_string(),
                        dropped: if run == Some(f.stream.as_str()) {
                            dropped as u64
                        } else {
                            0
                        },
                    };
                    tracing::error!(run = %f.stream, "reel-recorder: {failure}");
                    self.runs.insert(f.stream.clone(), (failure, false));
                }
            }
            e => {
                let failure = WriteError::Store {
                    what: match run {
                        Some(run) => format!("run {run}: {what}"),
                        None => what.to_owned(),
                    },
                    detail: e.to_string(),
                };
                tracing::error!("reel-recorder: {failure}");
                self.global.get_or_insert(failure);
            }
        }
    }

    /// Whether `run`'s stream failed.
    pub(super) fn failed(&self, run: &str) -> bool {
        self.runs.contains_key(run)
    }

    /// Counts `n` facts of the failed `run` as not recorded; the first
    /// time, says so (a `tracing` warning: once per run).
    pub(super) fn dropped(&mut self, run: &str, n: usize) {
        if let Some((failure, warned)) = self.runs.get_mut(run) {
            failure.dropped += n as u64;
            if !*warned {
                *warned = true;
                tracing::warn!(
                    run,
                    "reel-recorder: run {run}: its stream failed earlier ({}); its later facts are dropped, not recorded (counted in its failure)",
                    failure.detail
                );
            }
        }
    }

    /// The answer to a flush for `run` (see [`Msg::Flush`]).
    pub(super) fn answer(&self, run: Option<&str>) -> Result<(), WriteError> {
        if let Some(f) = &self.global {
            return Err(f.clone());
        }
        match run {
            Some(run) => match self.runs.get(run) {
                Some((f, _)) => Err(WriteError::Run(f.clone())),
                None => Ok(()),
            },
            None => self.whole().map_or(Ok(()), Err),
        }
    }

    /// Every failure, for the whole recorder: the store's, else each
    /// failed run's (by run id).
    pub(crate) fn whole(&self) -> Option<WriteError> {
        if let Some(f) = &self.global {
            return Some(f.clone());
        }
        let mut runs: Vec<&RunFailure> = self.runs.values().map(|(f, _)| f).collect();
        runs.sort_unstable_by(|a, b| a.run.cmp(&b.run));
        match runs.len() {
            0 => None,
            1 => Some(WriteError::Run(runs[0].clone())),
            total => Some(WriteError::Runs {
                shown: runs.into_iter().take(RUNS_SHOWN).cloned().collect(),
                total,
            }),
        }
    }
}
