//! [`TapeCheck`]: what may stand where in a tape, and the stream rules
//! over its facts, checked one line at a time; the faults it finds.

use crate::fact::{Fact, FactKind};
use crate::rules::{head_names, Rule, StreamRules, Violation};

use super::{TapeError, TapeHeader, TapeLine, FORMAT};

/// A line of a tape as [`TapeCheck`] takes it: what [`parse_line`](super::parse_line) made
/// of it, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum Seen<'a> {
    /// An empty line.
    Blank,
    /// The header.
    Header(&'a TapeHeader),
    /// A fact.
    Fact(&'a Fact),
    /// An artifact.
    Artifact,
    /// A line [`parse_line`](super::parse_line) refused.
    Invalid,
}

impl<'a> Seen<'a> {
    /// What `line` holds.
    pub fn of(line: &'a TapeLine) -> Seen<'a> {
        match line {
            TapeLine::Header(h) => Seen::Header(h),
            TapeLine::Fact(f) => Seen::Fact(f),
            TapeLine::Artifact(..) => Seen::Artifact,
            TapeLine::Blank => Seen::Blank,
        }
    }
}

/// What is wrong with a tape beyond one line's parse, and on which line.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub kind: FaultKind,
}

/// What [`TapeCheck`] finds.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Line 1 is blank, and the tape goes on: line 1 must be the header.
    NoHeader,
    /// Nothing but blank lines.
    Empty,
    /// A fact after the artifact lines.
    FactAfterArtifacts,
    /// A fact whose seq is `u64::MAX`: no stream is numbered that far.
    SeqOutOfRange,
    /// A fact that breaks a stream rule ([`StreamRules`], with the rules
    /// of the stream the first fact names).
    Breaks(Violation),
    /// The first fact names another stream than the header.
    OtherStream {
        /// What names it (`run.started names run`, ...).
        what: &'static str,
        /// The stream it names.
        named: String,
        /// The stream the header names.
        header: String,
    },
    /// The header counts more facts than the tape holds.
    CutShort {
        /// The facts the header counts.
        counted: u64,
        /// The facts the tape holds.
        held: u64,
        /// The line of the last fact, if there is one.
        last: Option<usize>,
    },
    /// The tape holds no fact.
    NoFacts,
}

impl Fault {
    /// Whether [`Tape::read`](super::Tape::read) refuses a tape for it (else only an import
    /// and `verify` do): a tape that does not read as a tape, or whose
    /// seqs are out of order ([`Rule::Gapless`]).
    pub fn read_refuses(&self) -> bool {
        match &self.kind {
            FaultKind::NoHeader
            | FaultKind::Empty
            | FaultKind::FactAfterArtifacts
            | FaultKind::SeqOutOfRange => true,
            FaultKind::Breaks(v) => matches!(v.rule, Rule::Gapless { .. }),
            FaultKind::OtherStream { .. } | FaultKind::CutShort { .. } | FaultKind::NoFacts => {
                false
            }
        }
    }

    /// The fault as the error reading a tape gives.
    pub fn into_error(self) -> TapeError {
        TapeError::at(self.line, self.kind.to_string())
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultKind::NoHeader => write!(
                f,
                "line 1 is blank: it must be the tape header {{\"format\":\"{FORMAT}\",...}}"
            ),
            FaultKind::Empty => f.write_str("the tape is empty: it has no header line"),
            FaultKind::FactAfterArtifacts => {
                f.write_str("a fact after the artifact lines: facts come first")
            }
            FaultKind::SeqOutOfRange => write!(f, "seq {} is out of range", u64::MAX),
            FaultKind::Breaks(Violation {
                seq,
                rule: Rule::Gapless { expected },
                ..
            }) => write!(
                f,
                "fact has seq {seq} where {expected} was expected: facts run from 0 without a gap, in order"
            ),
            FaultKind::Breaks(v) => write!(f, "{v}"),
            FaultKind::OtherStream {
                what,
                named,
                header,
            } => write!(
                f,
                "{what} {named:?} but the header (line 1) names {header:?}"
            ),
            FaultKind::CutShort {
                counted,
                held,
                last,
            } => {
                let last = match last {
                    None => "it holds none".to_owned(),
                    Some(line) => format!("the last is on line {line}"),
                };
                write!(
                    f,
                    "the header counts {counted} facts but the tape holds {held} ({last}): the tape is cut short or facts were removed"
                )
            }
            FaultKind::NoFacts => f.write_str(
                "the tape holds no facts: a run holds at least its run.started, on the line after the header",
            ),
        }
    }
}

/// What may stand where in a tape, and the stream rules over its facts,
/// checked one line at a time: the one statement of a tape's structure.
/// [`Tape::read_with_lines`](super::Tape::read_with_lines) feeds it the lines it reads and refuses at
/// the first fault that [`Fault::read_refuses`]; the language server feeds
/// it every line of a document, also invalid ones, and shows every fault.
///
/// The structure: line 1 is the header; then the facts, whose seqs keep
/// the stream rules ([`StreamRules`], of the stream the first fact
/// names, as an import checks them); then the artifacts. The header counts
/// the facts, and names the stream the first fact names.
#[derive(Debug, Clone, Default)]
pub struct TapeCheck {
    blank_first: bool,
    any: bool,
    header: Option<(String, u64)>,
    artifacts: bool,
    rules: Option<StreamRules>,
    /// Facts (and invalid lines where facts stand) so far.
    held: u64,
    last: Option<usize>,
    /// The first fact's line and the stream it names, once seen.
    first: Option<(usize, Option<(&'static str, String)>)>,
}

impl TapeCheck {
    /// Takes line `line_no` (1-based, in order), pushing what is wrong
    /// onto `faults`.
    pub fn line(&mut self, line_no: usize, seen: Seen<'_>, faults: &mut Vec<Fault>) {
        if matches!(seen, Seen::Blank) {
            self.blank_first |= line_no == 1;
            return;
        }
        if self.blank_first && !self.any {
            faults.push(Fault {
                line: 1,
                kind: FaultKind::NoHeader,
            });
        }
        self.any = true;
        let fact = match seen {
            Seen::Blank => return,
            Seen::Header(h) => {
                self.header = Some((h.run.run_id.clone(), h.run.facts));
                return;
            }
            Seen::Artifact => {
                self.artifacts = true;
                return;
            }
            // A line that should be a fact (none was lost to count it as
            // cut short); the rules see a gap at the next fact.
            Seen::Invalid => {
                if !self.artifacts && line_no > 1 {
                    self.held += 1;
                }
                return;
            }
            Seen::Fact(f) => f,
        };
        self.held += 1;
        self.last = Some(line_no);
        if self.artifacts {
            faults.push(Fault {
                line: line_no,
                kind: FaultKind::FactAfterArtifacts,
            });
        }
        if self.first.is_none() {
            let named = naming(&fact.kind).map(|(what, id)| (what, id.to_owned()));
            self.first = Some((line_no, named));
        }
        if fact.seq == u64::MAX {
            faults.push(Fault {
                line: line_no,
                kind: FaultKind::SeqOutOfRange,
            });
            return;
        }
        let rules = self
            .rules
            .get_or_insert_with(|| StreamRules::new(head_names(&fact.kind).unwrap_or_default()));
        if let Err(violation) = rules.check(fact) {
            faults.push(Fault {
                line: line_no,
                kind: FaultKind::Breaks(violation),
            });
        }
    }

    /// After the last line: pushes what is wrong with the tape as a whole
    /// (empty; cut short; no fact; a first fact naming another stream).
    pub fn finish(&self, faults: &mut Vec<Fault>) {
        if !self.any {
            // Line 1, where the header is missing: a reader and an editor
            // count the lines after a last newline differently.
            faults.push(Fault {
                line: 1,
                kind: FaultKind::Empty,
            });
            return;
        }
        let whole = Whole {
            header: self.header.as_ref().map(|(id, n)| (id.as_str(), *n)),
            held: self.held,
            last: self.last,
            first: match &self.first {
                Some((line, Some((what, named)))) => Some((*line, (*what, named.as_str()))),
                _ => None,
            },
        };
        faults.extend(whole.fault());
    }
}

/// What a whole tape says of itself: the header's stream and count, the
/// facts it holds, the first fact.
pub(super) struct Whole<'a> {
    pub(super) header: Option<(&'a str, u64)>,
    pub(super) held: u64,
    pub(super) last: Option<usize>,
    /// The first fact's line, when it names a stream, and what it names.
    pub(super) first: Option<(usize, (&'static str, &'a str))>,
}

/// What a head names (see [`head_names`]), and how a message says so.
pub(super) fn naming(kind: &FactKind) -> Option<(&'static str, &str)> {
    let what = match kind {
        FactKind::RunStarted(_) => "run.started names run",
        _ => "the call outside any run names key",
    };
    head_names(kind).map(|id| (what, id))
}

impl Whole<'_> {
    /// The first fault of a whole tape: cut short, then no fact, then a
    /// first fact naming another stream than the header.
    pub(super) fn fault(&self) -> Option<Fault> {
        let (stream, counted) = self.header?;
        if self.held < counted {
            return Some(Fault {
                line: 1,
                kind: FaultKind::CutShort {
                    counted,
                    held: self.held,
                    last: self.last,
                },
            });
        }
        if self.held == 0 {
            return Some(Fault {
                line: 2,
                kind: FaultKind::NoFacts,
            });
        }
        let (line, (what, named)) = self.first?;
        (named != stream).then(|| Fault {
            line,
            kind: FaultKind::OtherStream {
                what,
                named: named.to_owned(),
                header: stream.to_owned(),
            },
        })
    }
}
