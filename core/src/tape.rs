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
use crate::fact::{Fact, FactKind};
use crate::run::RunRecord;

/// The format tag of this version's tapes.
pub const FORMAT: &str = "reel.tape.v1";

/// The first line of a tape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TapeHeader {
    /// Always [`FORMAT`].
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
            Some(FORMAT) => serde_json::from_value(value)
                .map(TapeLine::Header)
                .map_err(|e| TapeError::at(line_no, format!("the header does not fit {FORMAT}: {e}"))),
            // A later version of the tape format: a newer reel wrote it.
            Some(other)
                if other
                    .strip_prefix("reel.tape.v")
                    .and_then(|v| v.parse::<u32>().ok())
                    .is_some_and(|v| v > 1) =>
            {
                Err(TapeError::at(
                    line_no,
                    format!("tape format {other:?} was written by a newer reel and is not supported by this reel (it reads {FORMAT}): upgrade reel"),
                ))
            }
            Some(other) if other.starts_with("reel.tape.") => Err(TapeError::at(
                line_no,
                format!("tape format {other:?} is not supported by this reel (reads {FORMAT}): upgrade reel"),
            )),
            _ => Err(TapeError::at(
                line_no,
                format!("line 1 must be the tape header {{\"format\":\"{FORMAT}\",...}}: is this a reel tape?"),
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
    pub fn read_with_lines(reader: impl BufRead) -> Result<(Tape, TapeLines), TapeError> {
        let mut header = None;
        let mut facts: Vec<Fact> = Vec::new();
        let mut artifacts = Vec::new();
        let mut at = TapeLines::default();
        let mut lines = 0;
        for (i, line) in reader.split(b'\n').enumerate() {
            let line_no = i + 1;
            lines = line_no;
            let bytes = line?;
            let text = std::str::from_utf8(&bytes).map_err(|e| {
                TapeError::at(
                    line_no,
                    format!(
                        "not valid UTF-8 (byte {}): tapes are UTF-8 JSON Lines",
                        e.valid_up_to() + 1
                    ),
                )
            })?;
            match parse_line(line_no, text.trim_end_matches('\r'))? {
                TapeLine::Header(h) => header = Some(h),
                TapeLine::Fact(f) => {
                    if !artifacts.is_empty() {
                        return Err(TapeError::at(
                            line_no,
                            "a fact after the artifact lines: facts come first",
                        ));
                    }
                    let want = facts.len() as u64;
                    if f.seq != want {
                        return Err(TapeError::at(
                            line_no,
                            format!("fact has seq {} where {want} was expected: facts run from 0 without a gap", f.seq),
                        ));
                    }
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
        let header = header.ok_or_else(|| {
            TapeError::at(lines.max(1), "the tape is empty: it has no header line")
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

    /// A tape of `run` holding `facts` and `artifacts`, with the header's
    /// `facts_sha256` computed over the facts.
    pub fn new(run: RunRecord, facts: Vec<Fact>, artifacts: Vec<(String, Vec<u8>)>) -> Tape {
        Tape {
            header: TapeHeader {
                format: FORMAT.into(),
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
    pub fn check_whole(&self, lines: &TapeLines) -> Result<(), TapeError> {
        let fact_line = |index: usize| lines.facts.get(index).copied().unwrap_or(index + 2);
        let counted = self.header.run.facts;
        if (self.facts.len() as u64) < counted {
            let last = match self.facts.len() {
                0 => "it holds none".to_owned(),
                n => format!("the last is on line {}", fact_line(n - 1)),
            };
            return Err(TapeError::at(
                1,
                format!(
                    "the header counts {counted} facts but the tape holds {} ({last}): the tape is cut short or facts were removed; nothing was imported: export the run again",
                    self.facts.len()
                ),
            ));
        }
        if self.facts.is_empty() {
            return Err(TapeError::at(
                2,
                "the tape holds no facts: a run holds at least its run.started, on the line after the header; nothing was imported",
            ));
        }
        let named = match &self.facts[0].kind {
            FactKind::RunStarted(started) => Some(("run.started names run", &started.run_id)),
            FactKind::CallStarted(c) => c
                .outside_run
                .as_ref()
                .map(|o| ("the call outside any run names key", &o.key)),
            _ => None,
        };
        if let Some((what, id)) = named {
            if *id != self.header.run.run_id {
                return Err(TapeError::at(
                    fact_line(0),
                    format!(
                        "{what} {id:?} but the header (line 1) names {:?}; nothing was imported: make them agree",
                        self.header.run.run_id
                    ),
                ));
            }
        }
        Ok(())
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
