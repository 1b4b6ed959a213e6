//! A mapped trace into the archive, through the recorder's redaction.
//!
//! The recorder's writer stamps every fact with its own clock, while a run
//! taken in keeps its spans' times; so a run is written here the way the
//! writer prepares a batch, step for step: each fact redacted in order
//! with the run's known secrets (`Redactor::redact_fact`: secret-named keys
//! everywhere, and every value learned under one scrubbed from what
//! follows), then the tripwire over the whole run (`guard_facts`: a hit is
//! scrubbed and filed as `redaction.tripped` beside it), numbered, and
//! appended whole as the recorder appends a batch
//! (`Archive::append_numbered`: the stream rules checked, one block in one
//! journal frame), then flushed: one `fdatasync` of the journal per run,
//! where an import (written past the journal) would cost a checkpoint.

use reel::context::Secret;
use reel::fact::{Fact, FactKind, RunStarted};
use reel::redact::{KnownSecrets, Redactor};
use reel::tripwire::Tripwire;
use reel_archive::{Archive, ArchiveError};

use crate::decode::SpanIn;
use crate::map::{late_run_id, map_late, map_trace, run_id, Late};

/// Writes runs taken in.
pub struct RunWriter {
    archive: Archive,
    redactor: Redactor,
    secrets: Vec<Secret>,
    tripwire: Tripwire,
    buf: Vec<u8>,
}

impl std::fmt::Debug for RunWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunWriter")
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

/// What writing a trace did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The run's id.
    pub run_id: String,
    /// How many facts it holds.
    pub facts: usize,
    /// How many `redaction.tripped` facts the tripwire added.
    pub tripped: usize,
}

impl RunWriter {
    /// A writer into `archive` that scrubs `secrets` (known secret values)
    /// from every fact, redacts keys named `redact_keys` besides the
    /// built-in secret names, and runs the tripwire.
    pub fn new(archive: Archive, secrets: Vec<Secret>, redact_keys: &[String]) -> RunWriter {
        let mut tripwire = Tripwire::new();
        for s in &secrets {
            tripwire.add(s.expose());
        }
        let keys = archive.keyring();
        RunWriter {
            archive,
            redactor: Redactor::new(redact_keys).keyed(reel::redact::Tagger::new(move |b| {
                keys.keyed_mac(reel::redact::TAG_PURPOSE, b)
            })),
            secrets,
            tripwire,
            buf: Vec::new(),
        }
    }

    /// The archive written to.
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    /// Maps one trace's spans to a run and writes it; `None` when there
    /// were no spans. A trace whose run is in the archive already (a
    /// collector restarted, or one that forgot it) is written as late
    /// spans ([`RunWriter::write_late`]), never over it.
    pub fn write(&mut self, spans: Vec<SpanIn>) -> Result<Option<Written>, ArchiveError> {
        if let Some(first) = spans.first() {
            if self.exists(&run_id(&first.trace_id))? {
                return self.late(spans, false);
            }
        }
        let Some((run_id, facts)) = map_trace(spans) else {
            return Ok(None);
        };
        self.append(run_id, facts)
    }

    /// Writes spans that came after their trace's run was written as a
    /// run of their own ([`map_late`]): the next `otel-TRACEID-late-N`
    /// free, labelled with the first run's id and beginning with its
    /// `run.started`; the first run is never touched.
    pub fn write_late(&mut self, spans: Vec<SpanIn>) -> Result<Option<Written>, ArchiveError> {
        self.late(spans, true)
    }

    fn late(
        &mut self,
        spans: Vec<SpanIn>,
        remembered: bool,
    ) -> Result<Option<Written>, ArchiveError> {
        let Some(trace) = spans.first().map(|s| s.trace_id.clone()) else {
            return Ok(None);
        };
        let of = run_id(&trace);
        let head = self.head(&of)?;
        let mut n = 1;
        let late_id = loop {
            let id = late_run_id(&trace, n);
            if !self.exists(&id)? {
                break id;
            }
            n += 1;
        };
        let late = Late {
            of,
            run_id: late_id.clone(),
            head,
            remembered,
        };
        let Some(facts) = map_late(spans, late) else {
            return Ok(None);
        };
        self.append(late_id, facts)
    }

    /// Whether the archive holds a run `run_id`.
    fn exists(&self, run_id: &str) -> Result<bool, ArchiveError> {
        match self.archive.run(run_id) {
            Ok(_) => Ok(true),
            Err(ArchiveError::UnknownRun { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The `run.started` of the run `run_id`, when it is there and reads.
    fn head(&self, run_id: &str) -> Result<Option<RunStarted>, ArchiveError> {
        let mut facts = match self.archive.facts(run_id, 0..1) {
            Ok(facts) => facts,
            Err(ArchiveError::UnknownRun { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(match facts.next() {
            Some(Ok(Fact {
                kind: FactKind::RunStarted(started),
                ..
            })) => Some(started),
            _ => None,
        })
    }

    /// Guards a mapped run's facts and appends them whole, then flushes.
    fn append(
        &mut self,
        run_id: String,
        facts: Vec<Fact>,
    ) -> Result<Option<Written>, ArchiveError> {
        let (facts, tripped) = self.guard(facts);
        let n = facts.len();
        self.archive.append_numbered(&run_id, facts)?;
        self.archive.flush()?;
        Ok(Some(Written {
            run_id,
            facts: n,
            tripped,
        }))
    }

    /// Redaction, then the tripwire, then the seqs: the writer's steps.
    fn guard(&mut self, mut facts: Vec<Fact>) -> (Vec<Fact>, usize) {
        let mut known = KnownSecrets::new();
        for s in &self.secrets {
            known.add(s.clone());
        }
        for fact in &mut facts {
            self.redactor.redact_fact(&mut fact.kind, &mut known);
        }
        let tripped =
            self.tripwire
                .guard_facts("archive", "known-values", None, &mut facts, &mut self.buf);
        for (seq, fact) in facts.iter_mut().enumerate() {
            fact.seq = seq as u64;
        }
        (facts, tripped)
    }
}
