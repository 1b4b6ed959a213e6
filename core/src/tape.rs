//! The tape: a portable, human-diffable export of one run, as JSON Lines.
//!
//! ```text
//! {"format":"reel.tape.v1","run":{...run record...},"facts_sha256":"..."}
//! {"seq":0,"at":...,"offset":0,"call":null,"kind":"run.started","data":{...}}
//! {"seq":1,...}
//! {"artifact":"sha256:...","size":12,"base64":"..."}
//! ```
//!
//! Line 1 is the header; then one fact per line in seq order; then one line
//! per artifact the facts refer to. `facts_sha256` is a sha-256 over the
//! stored encoding of every fact, in order: proof of what was recorded,
//! independent of how the archive grouped facts into blocks.
//!
//! Reading never panics: a bad tape gets a [`TapeError`] naming the line
//! and what is wrong with it. Importing is all or nothing, and a refused
//! import names the line too: a fact that breaks a stream rule (see
//! [`crate::rules`]), an artifact that does not match its digest,
//! or a header that counts more facts than the tape holds (a tape cut
//! short).

use std::collections::BTreeSet;
use std::io::{BufRead, Write};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::codec::{encode_fact, parse_digest};
use crate::fact::Fact;
use crate::run::RunRecord;

mod check;

use check::{naming, Whole};
pub use check::{Fault, FaultKind, Seen, TapeCheck};

/// The format tag of tapes whose facts an older reel reads whole.
pub const FORMAT: &str = "reel.tape.v1";
/// The format tag of tapes holding a fact field that version 1 lacks (a
/// log that names the calls in flight, a structured tool error: the
/// archive's format 5; a progress report sent to a client: format 6), or
/// a kind it lacks (`model.called`, format 6). An older reel would drop such a field, and then
/// find `facts_sha256` wrong: it refuses the tape instead ("upgrade reel").
pub const FORMAT_V2: &str = "reel.tape.v2";

/// The format a tape of `facts` is written in: [`FORMAT`] unless a fact
/// needs [`FORMAT_V2`], so that a tape any reel can read stays readable.
pub fn format_for(facts: &[Fact]) -> &'static str {
    let needs_v2 = facts.iter().any(|f| match &f.kind {
        crate::fact::FactKind::Log(l) => !l.in_flight.is_empty(),
        crate::fact::FactKind::Progress(p) => p.delivered,
        crate::fact::FactKind::CallEnded(e) => matches!(
            e.outcome,
            crate::fact::CallOutcome::Error {
                result: Some(_),
                ..
            }
        ),
        crate::fact::FactKind::ModelCalled(_) => true,
        _ => false,
    });
    if needs_v2 {
        FORMAT_V2
    } else {
        FORMAT
    }
}

/// The first line of a tape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TapeHeader {
    /// [`FORMAT`], or [`FORMAT_V2`] when a fact needs it ([`format_for`]).
    pub format: String,
    /// The run record at export time.
    pub run: RunRecord,
    /// sha-256 (hex) over the stored encodings of the facts, in order.
    #[serde(default)]
    pub facts_sha256: Option<String>,
}

/// One artifact carried by a tape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapeArtifact {
    /// `sha256:<hex>` of the bytes.
    pub artifact: String,
    /// Size in bytes.
    pub size: u64,
    /// The bytes, standard base64.
    pub base64: String,
}

/// A whole tape in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Tape {
    /// The header.
    pub header: TapeHeader,
    /// The facts, in seq order.
    pub facts: Vec<Fact>,
    /// The artifacts: (digest, bytes).
    pub artifacts: Vec<(String, Vec<u8>)>,
}

/// What a line of a tape holds.
#[derive(Debug, Clone, PartialEq)]
pub enum TapeLine {
    /// The header (line 1).
    Header(TapeHeader),
    /// A fact.
    Fact(Fact),
    /// An artifact: (digest, bytes).
    Artifact(String, Vec<u8>),
    /// An empty line (ignored).
    Blank,
}

/// Errors reading or writing tapes. Messages name the line (1-based).
#[derive(Debug, thiserror::Error)]
pub enum TapeError {
    /// A line that is not what a tape may hold there.
    #[error("line {line}{}: {what}", column.map(|c| format!(", column {c}")).unwrap_or_default())]
    Line {
        /// 1-based line number.
        line: usize,
        /// 1-based column, when known.
        column: Option<usize>,
        /// What is wrong, and what to do.
        what: String,
    },
    /// Reading or writing failed.
    #[error("tape I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// The store the tape was imported into failed (for the sled archive,
    /// a `reel_archive::ArchiveError`: downcast it).
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
}

impl TapeError {
    /// An error at `line` (1-based), saying `what` is wrong and what to do.
    pub fn at(line: usize, what: impl Into<String>) -> TapeError {
        TapeError::Line {
            line,
            column: None,
            what: what.into(),
        }
    }
}

/// Parses one line of a tape. `line_no` is 1-based; line 1 must be the
/// header and no other line may be.
pub fn parse_line(line_no: usize, text: &str) -> Result<TapeLine, TapeError> {
    if text.trim().is_empty() {
        return Ok(TapeLine::Blank);
    }
    let value: Value = serde_json::from_str(text).map_err(|e| TapeError::Line {
        line: line_no,
        column: Some(e.column()),
        what: format!("not valid JSON: {e}"),
    })?;
    let Value::Object(map) = &value else {
        return Err(TapeError::at(line_no, "a tape line must be a JSON object"));
    };
    if line_no == 1 {
        let format = map.get("format").and_then(Value::as_str);
        return match format {
            Some(FORMAT | FORMAT_V2) => serde_json::from_value(value)
                .map(TapeLine::Header)
                .map_err(|e| TapeError::at(line_no, format!("the header does not fit {FORMAT}: {e}"))),
            // A later version of the tape format: a newer reel wrote it.
            Some(other)
                if other
                    .strip_prefix("reel.tape.v")
                    .and_then(|v| v.parse::<u32>().ok())
                    .is_some_and(|v| v > 2) =>
            {
                Err(TapeError::at(
                    line_no,
                    format!("tape format {other:?} was written by a newer reel and is not supported by this reel (it reads {FORMAT} and {FORMAT_V2}): upgrade reel"),
                ))
            }
            Some(other) if other.starts_with("reel.tape.") => Err(TapeError::at(
                line_no,
                format!("tape format {other:?} is not supported by this reel (reads {FORMAT}): upgrade reel"),
            )),
            _ => Err(TapeError::at(
                line_no,
                format!("not a tape header (a reel tape starts with {{\"format\":\"{FORMAT}\",...}}): is this a reel tape?"),
            )),
        };
    }
    if map.contains_key("format") {
        return Err(TapeError::at(
            line_no,
            "a second header: only line 1 may be the header",
        ));
    }
    if map.contains_key("artifact") {
        let a: TapeArtifact = serde_json::from_value(value)
            .map_err(|e| TapeError::at(line_no, format!("artifact line: {e}")))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&a.base64)
            .map_err(|e| {
                TapeError::at(line_no, format!("artifact bytes are not valid base64: {e}"))
            })?;
        let Some(digest) = parse_digest(&a.artifact) else {
            return Err(TapeError::at(
                line_no,
                format!(
                    "artifact digest {:?} is not sha256:<64 hex digits>",
                    a.artifact
                ),
            ));
        };
        let actual: [u8; 32] = Sha256::digest(&bytes).into();
        if actual != digest {
            return Err(TapeError::at(
                line_no,
                format!("artifact {} does not match its bytes", a.artifact),
            ));
        }
        if a.size != bytes.len() as u64 {
            return Err(TapeError::at(
                line_no,
                format!(
                    "artifact {} says size {} but holds {} bytes",
                    a.artifact,
                    a.size,
                    bytes.len()
                ),
            ));
        }
        return Ok(TapeLine::Artifact(a.artifact, bytes));
    }
    serde_json::from_value(value)
        .map(TapeLine::Fact)
        .map_err(|e| TapeError::at(line_no, format!("not a valid fact: {e}")))
}

/// sha-256 (hex) over the stored encodings of `facts`, in order.
pub fn facts_digest<'a>(facts: impl IntoIterator<Item = &'a Fact>) -> String {
    let mut hasher = Sha256::new();
    let mut buf = Vec::new();
    for fact in facts {
        buf.clear();
        // Facts are plain data: encoding cannot fail.
        encode_fact(fact, &mut buf).expect("fact encodes");
        hasher.update((buf.len() as u64).to_le_bytes());
        hasher.update(&buf);
    }
    hex::encode(hasher.finalize())
}

/// The 1-based line each part of a tape is on: as it was read
/// ([`Tape::read_with_lines`]), or as [`Tape::write`] lays it out
/// ([`TapeLines::written`]). Errors of [`Tape::import_with_lines`] name
/// these lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapeLines {
    /// The line of each fact, in the order of [`Tape::facts`].
    pub facts: Vec<usize>,
    /// The line of each artifact, in the order of [`Tape::artifacts`].
    pub artifacts: Vec<usize>,
}

impl TapeLines {
    /// The lines of `tape` as [`Tape::write`] lays it out: the header on
    /// line 1, the facts from line 2, then the artifacts.
    pub fn written(tape: &Tape) -> TapeLines {
        let facts = tape.facts.len();
        TapeLines {
            facts: (2..2 + facts).collect(),
            artifacts: (2 + facts..2 + facts + tape.artifacts.len()).collect(),
        }
    }
}

impl Tape {
    /// Reads a whole tape. Facts must run in seq order from 0 without a gap.
    pub fn read(reader: impl BufRead) -> Result<Tape, TapeError> {
        Tape::read_with_lines(reader).map(|(tape, _)| tape)
    }

    /// [`Tape::read`], also giving the line each fact and artifact was on.
    ///
    /// What may stand where is [`TapeCheck`]'s: reading refuses what it
    /// finds that [`Fault::read_refuses`] (a missing header, a fact after
    /// the artifacts, a seq out of order); the rest of the stream rules are
    /// the import's and `verify`'s ([`Tape::check_whole`], [`crate::rules`]).
    pub fn read_with_lines(reader: impl BufRead) -> Result<(Tape, TapeLines), TapeError> {
        let mut header = None;
        let mut facts: Vec<Fact> = Vec::new();
        let mut artifacts = Vec::new();
        let mut at = TapeLines::default();
        let mut check = TapeCheck::default();
        let mut faults = Vec::new();
        let refused = |faults: &mut Vec<Fault>| {
            faults
                .drain(..)
                .find(Fault::read_refuses)
                .map_or(Ok(()), |f| Err(f.into_error()))
        };
        for (i, line) in reader.split(b'\n').enumerate() {
            let line_no = i + 1;
            let bytes = line?;
            let parsed = std::str::from_utf8(&bytes)
                .map_err(|e| {
                    TapeError::at(
                        line_no,
                        format!(
                            "not valid UTF-8 (byte {}): tapes are UTF-8 JSON Lines",
                            e.valid_up_to() + 1
                        ),
                    )
                })
                .and_then(|text| parse_line(line_no, text.trim_end_matches('\r')));
            let parsed = match parsed {
                Ok(parsed) => parsed,
                Err(e) => {
                    // A fault of an earlier line this one shows (line 1
                    // blank, and the tape goes on) comes first.
                    check.line(line_no, Seen::Invalid, &mut faults);
                    refused(&mut faults)?;
                    return Err(e);
                }
            };
            check.line(line_no, Seen::of(&parsed), &mut faults);
            refused(&mut faults)?;
            match parsed {
                TapeLine::Header(h) => header = Some(h),
                TapeLine::Fact(f) => {
                    facts.push(f);
                    at.facts.push(line_no);
                }
                TapeLine::Artifact(d, b) => {
                    artifacts.push((d, b));
                    at.artifacts.push(line_no);
                }
                TapeLine::Blank => {}
            }
        }
        check.finish(&mut faults);
        refused(&mut faults)?;
        let header = header.ok_or_else(|| {
            // Not reached: a tape without its header was refused above.
            TapeError::at(1, "the tape has no header line")
        })?;
        let tape = Tape {
            header,
            facts,
            artifacts,
        };
        Ok((tape, at))
    }

    /// True when the header's `facts_sha256` matches the facts (a tape with
    /// no digest, e.g. written by hand, passes).
    pub fn digest_matches(&self) -> bool {
        self.header
            .facts_sha256
            .as_deref()
            .is_none_or(|d| d == facts_digest(&self.facts))
    }

    /// The same run under the id `new_id` (to import a tape beside the run
    /// it came from, or a second copy of it): the header's run, every
    /// `run_id` field naming the old id (the run's start, the origin of
    /// the artifacts it put) and the artifact scope made from the run id
    /// (`run:<id>`) name the new one; the origin of an artifact another
    /// run put, and text that mentions the id, are kept as recorded. The
    /// header's `facts_sha256` is computed again when it matched (an
    /// edited tape stays flagged as edited).
    ///
    /// ```
    /// # use reel_core::tape::Tape;
    /// # fn doc(tape: Tape) -> Result<(), String> {
    /// let copy = tape.renamed("deploy-copy")?;
    /// assert_eq!(copy.header.run.run_id, "deploy-copy");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A tape of a call outside any run (its id is the call's key, not a
    /// run's), an empty new id, or facts that no longer read as facts.
    pub fn renamed(mut self, new_id: &str) -> Result<Tape, String> {
        if self.header.run.outside_run.is_some() {
            return Err(format!(
                "the tape holds a call outside any run (kept as {}): it has no run id to change",
                self.header.run.run_id
            ));
        }
        if new_id.trim().is_empty() {
            return Err("the new run id is empty".into());
        }
        let old = std::mem::replace(&mut self.header.run.run_id, new_id.to_owned());
        let matched = self.digest_matches();
        let (old_scope, new_scope) = (format!("run:{old}"), format!("run:{new_id}"));
        for fact in &mut self.facts {
            let mut value = serde_json::to_value(&*fact).map_err(|e| e.to_string())?;
            rename_in(&mut value, &old, new_id, &old_scope, &new_scope);
            *fact = serde_json::from_value(value)
                .map_err(|e| format!("fact #{} does not read after renaming: {e}", fact.seq))?;
        }
        if matched && self.header.facts_sha256.is_some() {
            self.header.facts_sha256 = Some(facts_digest(&self.facts));
        }
        Ok(self)
    }

    /// A tape of `run` holding `facts` and `artifacts`, with the header's
    /// `facts_sha256` computed over the facts.
    pub fn new(run: RunRecord, facts: Vec<Fact>, artifacts: Vec<(String, Vec<u8>)>) -> Tape {
        Tape {
            header: TapeHeader {
                format: format_for(&facts).into(),
                facts_sha256: Some(facts_digest(&facts)),
                run,
            },
            facts,
            artifacts,
        }
    }

    /// Writes the tape as JSON Lines.
    pub fn write(&self, mut out: impl Write) -> Result<(), TapeError> {
        serde_json::to_writer(&mut out, &self.header).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        for fact in &self.facts {
            serde_json::to_writer(&mut out, fact).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        }
        for (digest, bytes) in &self.artifacts {
            let line = TapeArtifact {
                artifact: digest.clone(),
                size: bytes.len() as u64,
                base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            };
            serde_json::to_writer(&mut out, &line).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(())
    }

    /// Checks what the tape's own lines must say before anything of it is
    /// stored anywhere: that it holds every fact its header counts (a tape
    /// cut short is refused), at least one, and that its first fact names
    /// the stream the header names. Errors name lines as `lines` gives them.
    /// (These are [`TapeCheck::finish`]'s faults of a whole tape.)
    pub fn check_whole(&self, lines: &TapeLines) -> Result<(), TapeError> {
        let fact_line = |index: usize| lines.facts.get(index).copied().unwrap_or(index + 2);
        let whole = Whole {
            header: Some((self.header.run.run_id.as_str(), self.header.run.facts)),
            held: self.facts.len() as u64,
            last: self.facts.len().checked_sub(1).map(fact_line),
            first: self
                .facts
                .first()
                .and_then(|f| Some((fact_line(0), naming(&f.kind)?))),
        };
        match whole.fault() {
            None => Ok(()),
            Some(fault) => {
                let tail = match fault.kind {
                    FaultKind::CutShort { .. } => "; nothing was imported: export the run again",
                    FaultKind::OtherStream { .. } => "; nothing was imported: make them agree",
                    _ => "; nothing was imported",
                };
                Err(TapeError::at(fault.line, format!("{}{tail}", fault.kind)))
            }
        }
    }
}

/// Renames the run in one fact's JSON: `run_id` fields equal to `old` and
/// strings equal to `old_scope` (see [`Tape::renamed`]).
fn rename_in(value: &mut Value, old: &str, new: &str, old_scope: &str, new_scope: &str) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if key == "run_id" && field.as_str() == Some(old) {
                    *field = Value::String(new.to_owned());
                } else {
                    rename_in(field, old, new, old_scope, new_scope);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                rename_in(item, old, new, old_scope, new_scope);
            }
        }
        Value::String(s) if s == old_scope => *s = new_scope.to_owned(),
        _ => {}
    }
}

/// Every artifact digest (`sha256:<64 hex>` string) the facts refer to:
/// what a tape of them carries.
pub fn referenced_digests<'a>(facts: impl IntoIterator<Item = &'a Fact>) -> BTreeSet<String> {
    let mut wanted = BTreeSet::new();
    for fact in facts {
        collect_digests(
            &serde_json::to_value(fact).unwrap_or(Value::Null),
            &mut wanted,
        );
    }
    wanted
}

/// Collects every `sha256:<64 hex>` string in a JSON value.
fn collect_digests(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::String(s) if parse_digest(s).is_some() => {
            out.insert(s.clone());
        }
        Value::Array(items) => items.iter().for_each(|v| collect_digests(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_digests(v, out)),
        _ => {}
    }
}
