//! A recorded run, loaded from a tape or an archive, indexed for replay.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use reel::archive::Archive;
use reel::fact::*;
use reel::tape::{Tape, TapeError};
use reel::{ArchiveError, Fact, RunRecord};

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
    /// The recording has no `run.started`.
    #[error("{0}: the recording does not begin with run.started")]
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

/// A recorded run ready to replay.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Where it came from (a tape path or `archive:<run id>`).
    pub source: String,
    /// The run record.
    pub record: RunRecord,
    /// `run.started`.
    pub run: RunStarted,
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
        let run = facts
            .iter()
            .find_map(|f| match &f.kind {
                FactKind::RunStarted(r) => Some(r.clone()),
                _ => None,
            })
            .ok_or_else(|| LoadError::NoRunStarted(source.clone()))?;
        let mut calls: HashMap<String, RecordedCall> = HashMap::new();
        let mut call_order = Vec::new();
        for fact in &facts {
            if let FactKind::CallStarted(c) = &fact.kind {
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
                );
            }
            if let Some(call) = fact.call.as_ref().and_then(|c| calls.get_mut(c)) {
                call.facts.push(fact.clone());
            }
        }
        Ok(Recording {
            source,
            record,
            run,
            facts,
            calls,
            call_order,
            artifacts,
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
