//! A recorded run, loaded from a tape or an archive, indexed for replay.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use reel::fact::*;
use reel::tape::{Tape, TapeError};
use reel::{Fact, RunRecord};
use reel_archive::Archive;
use reel_archive::ArchiveError;
use reel_archive::TapeExt;

/// Why a recording could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The tape file could not be read.
    #[error("cannot read tape {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The tape is malformed.
    #[error("tape {path}: {source}")]
    Tape {
        /// The file.
        path: String,
        /// What is wrong (with its line).
        source: TapeError,
    },
    /// The archive failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The recording has no head: neither `run.started` nor the
    /// `call.started` of a call outside any run.
    #[error("{0}: the recording begins neither with run.started nor with the call.started of a call outside any run: export it again")]
    NoRunStarted(String),
}

/// One recorded call: its `call.started` and the facts filed under it.
#[derive(Debug, Clone)]
pub struct RecordedCall {
    /// `call.started`.
    pub started: CallStarted,
    /// Seq of `call.started`.
    pub started_seq: u64,
    /// Every fact under this call id, in seq order (including
    /// `call.started` and `call.ended`).
    pub facts: Vec<Fact>,
    /// Ids of child calls, in start order.
    pub children: Vec<String>,
}

impl RecordedCall {
    /// `call.ended`, when the call ended.
    pub fn ended(&self) -> Option<&CallEnded> {
        self.facts.iter().find_map(|f| match &f.kind {
            FactKind::CallEnded(e) => Some(e),
            _ => None,
        })
    }
}

/// The head of a recorded stream: a run's `run.started`, or what a call
/// outside any run says in its place.
#[derive(Debug, Clone, PartialEq)]
pub enum Head {
    /// A run.
    Run(RunStarted),
    /// A call outside any run.
    OutsideRun(OutsideRun),
}

impl Head {
    /// Where the recorded calls belong.
    pub fn home(&self) -> reel::context::Home {
        match self {
            Head::Run(r) => reel::context::Home::Run(r.run_id.clone()),
            Head::OutsideRun(o) => reel::context::Home::OutsideRun { key: o.key.clone() },
        }
    }

    /// The run's id; `None` for a call outside any run.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Head::Run(r) => Some(&r.run_id),
            Head::OutsideRun(_) => None,
        }
    }

    /// The key the stream was kept under (the run id, or the call's key).
    pub fn key(&self) -> &str {
        match self {
            Head::Run(r) => &r.run_id,
            Head::OutsideRun(o) => &o.key,
        }
    }

    /// The hosting session.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Head::Run(r) => r.session_id.as_deref(),
            Head::OutsideRun(o) => o.session_id.as_deref(),
        }
    }

    /// The caller's identity.
    pub fn identity(&self) -> Option<&Identity> {
        match self {
            Head::Run(r) => r.identity.as_ref(),
            Head::OutsideRun(o) => o.identity.as_ref(),
        }
    }

    /// What recorded it.
    pub fn producer(&self) -> &Producer {
        match self {
            Head::Run(r) => &r.producer,
            Head::OutsideRun(o) => &o.producer,
        }
    }

    /// The teardown scopes the recording door honoured.
    pub fn teardown_scopes(&self) -> &[TeardownScope] {
        match self {
            Head::Run(r) => &r.teardown_scopes,
            Head::OutsideRun(o) => &o.teardown_scopes,
        }
    }
}

/// A recorded run ready to replay.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Where it came from (a tape path or `archive:<run id>`).
    pub source: String,
    /// The run record.
    pub record: RunRecord,
    /// What the stream's head says: the `run.started` of a run, or what
    /// the `call.started` of a call outside any run says in its place.
    pub head: Head,
    /// Every fact, in seq order.
    pub facts: Vec<Fact>,
    /// Calls by id.
    pub calls: HashMap<String, RecordedCall>,
    /// Call ids in start order.
    pub call_order: Vec<String>,
    /// Artifact bytes by digest.
    pub artifacts: HashMap<String, Vec<u8>>,
}

impl Recording {
    /// Loads a tape file.
    pub fn from_tape_file(path: impl AsRef<Path>) -> Result<Recording, LoadError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|source| LoadError::Io {
            path: name.clone(),
            source,
        })?;
        let tape = Tape::read(BufReader::new(file)).map_err(|source| LoadError::Tape {
            path: name.clone(),
            source,
        })?;
        Recording::from_tape(name, tape)
    }

    /// Indexes a tape already read.
    pub fn from_tape(source: String, tape: Tape) -> Result<Recording, LoadError> {
        Recording::new(
            source,
            tape.header.run,
            tape.facts,
            tape.artifacts.into_iter().collect(),
        )
    }

    /// Loads a run from an archive.
    pub fn from_archive(archive: &Archive, run_id: &str) -> Result<Recording, LoadError> {
        let tape = Tape::export(archive, run_id)?;
        Recording::from_tape(format!("archive:{run_id}"), tape)
    }

    fn new(
        source: String,
        record: RunRecord,
        facts: Vec<Fact>,
        artifacts: HashMap<String, Vec<u8>>,
    ) -> Result<Recording, LoadError> {
        let head = head_of(&source, &facts)?;
        let mut calls: HashMap<String, RecordedCall> = HashMap::new();
        let mut call_order = Vec::new();
        for fact in &facts {
            start_call(&mut calls, &mut call_order, fact);
            if let Some(call) = fact.call.as_ref().and_then(|c| calls.get_mut(c)) {
                call.facts.push(fact.clone());
            }
        }
        Ok(Recording {
            source,
            record,
            head,
            facts,
            calls,
            call_order,
            artifacts,
        })
    }

    /// Indexes a tape for one replay ([`crate::ReplayInput::from_tape`]):
    /// like [`Recording::new`], but each call's facts are moved into the
    /// call, not copied, so `facts` keeps only the facts of no known call
    /// (the run's own, and any under an unknown call id). Never handed to
    /// a caller: `replay` reads those two parts as one.
    pub(crate) fn index_moved(source: String, tape: Tape) -> Result<Recording, LoadError> {
        let facts = tape.facts;
        let head = head_of(&source, &facts)?;
        let mut calls: HashMap<String, RecordedCall> = HashMap::new();
        let mut call_order = Vec::new();
        let mut rest = Vec::new();
        let mut reordered = false;
        for fact in facts {
            // A call id started twice (a damaged or hand-made tape): as in
            // a `Recording`, the later call holds the id, and the earlier
            // one's facts stay among the facts of no call.
            if let Some(earlier) = start_call(&mut calls, &mut call_order, &fact) {
                rest.extend(earlier.facts);
                reordered = true;
            }
            match fact.call.as_ref().and_then(|c| calls.get_mut(c)) {
                Some(call) => call.facts.push(fact),
                None => rest.push(fact),
            }
        }
        if reordered {
            // `replay` finds where the calls began by seq.
            rest.sort_by_key(|f| f.seq);
        }
        Ok(Recording {
            source,
            record: tape.header.run,
            head,
            facts: rest,
            calls,
            call_order,
            artifacts: tape.artifacts.into_iter().collect(),
        })
    }

    /// Top-level calls (no parent), in start order.
    pub fn top_level_calls(&self) -> impl Iterator<Item = &RecordedCall> {
        self.call_order
            .iter()
            .filter_map(|id| self.calls.get(id))
            .filter(|c| c.started.parent_call.is_none())
    }
}

/// Indexes `fact` when it is a `call.started`: the call under its id (its
/// facts still to come), in start order, and among its parent's children.
/// Returns the call it replaced, when the id was started before.
fn start_call(
    calls: &mut HashMap<String, RecordedCall>,
    call_order: &mut Vec<String>,
    fact: &Fact,
) -> Option<RecordedCall> {
    let FactKind::CallStarted(c) = &fact.kind else {
        return None;
    };
    if let Some(parent) = c.parent_call.as_ref().and_then(|p| calls.get_mut(p)) {
        parent.children.push(c.call_id.clone());
    }
    call_order.push(c.call_id.clone());
    calls.insert(
        c.call_id.clone(),
        RecordedCall {
            started: c.clone(),
            started_seq: fact.seq,
            facts: Vec::new(),
            children: Vec::new(),
        },
    )
}

/// What the stream's first fact says it is.
fn head_of(source: &str, facts: &[Fact]) -> Result<Head, LoadError> {
    facts
        .first()
        .and_then(|f| match &f.kind {
            FactKind::RunStarted(r) => Some(Head::Run(r.clone())),
            FactKind::CallStarted(c) => c.outside_run.as_deref().cloned().map(Head::OutsideRun),
            _ => None,
        })
        .ok_or_else(|| LoadError::NoRunStarted(source.to_owned()))
}
