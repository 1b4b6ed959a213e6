//! The document model: a tape's lines, each with its parse, kept current
//! under incremental edits; and the [`Index`] derived from them.
//!
//! A tape is one JSON value per line, so a line parses alone
//! ([`reel_core::tape::parse_line`]): an edit re-parses only the lines it touches
//! (the lines of its range, as they are after the edit) and the lines below
//! keep their parses while their numbers shift. Only the first line's parse
//! depends on its number (it must be the header), and an edit can only move
//! a line to or from the first place by touching the first line, so no
//! untouched line ever needs a new parse. [`Document::parsed_lines`] counts
//! every line parse, for tests that show a keystroke costs one line.
//!
//! The [`Index`] (the [`Timeline`] over the parsed facts, the calls with the
//! lines they stand on, artifact puts and lines, the tape's faults) is
//! derived from the parsed lines without parsing anything: it is dropped on
//! each edit and rebuilt on the next question, one pass over the facts.
//! What may stand where and the stream rules are the core's
//! ([`TapeCheck`], which runs [`StreamRules`](reel_core::rules::StreamRules)): the index
//! only places each fault on its line, so the editor marks what `reel
//! import` and `verify` refuse.
//!
//! Lines end at `\n`; a `\r` before it belongs to the line's text for edits
//! and is left out for parsing and for positions.

use std::collections::HashMap;

use reel_core::fact::FactKind;
use reel_core::rules::Rule;
use reel_core::tape::{
    parse_line, Fault, FaultKind, Seen, TapeCheck, TapeError, TapeHeader, TapeLine,
};
use reel_core::Fact;
use tower_lsp_server::ls_types::{Position, Range};

use super::position::Encoding;
use reel_viewer::timeline::{Timeline, TimelineBuilder};

mod index;
pub use index::{CallSpan, Index, Item, Problem};

/// Call nesting deeper than this is flattened in the call tree (outline
/// and folding stay usable, and nothing recurses without bound).
pub const MAX_NESTING: usize = 32;

/// No line, no call.
const NONE: usize = usize::MAX;

/// The code of a problem that is a gap in the seqs: the timeline's gap
/// anomaly says it too, and where both stand on one line only the
/// anomaly is shown.
pub const GAP: &str = "gap";

/// What a line holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// An empty (or all-whitespace) line.
    Blank,
    /// The header (valid on the first line only).
    Header(Box<TapeHeader>),
    /// A fact.
    Fact(Box<Fact>),
    /// An artifact's bytes (only the digest and size are kept).
    Artifact {
        /// `sha256:<hex>`.
        digest: String,
        /// Size in bytes.
        size: u64,
    },
    /// Not what a tape may hold here.
    Invalid {
        /// 1-based byte column, when the JSON parser gave one.
        column: Option<usize>,
        /// What is wrong.
        what: String,
    },
}

/// One line of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    raw: String,
    parsed: Parsed,
}

impl Line {
    fn parse(line_no: usize, raw: String) -> Line {
        let parsed = match parse_line(line_no, strip_cr(&raw)) {
            Ok(TapeLine::Blank) => Parsed::Blank,
            Ok(TapeLine::Header(h)) => Parsed::Header(Box::new(h)),
            Ok(TapeLine::Fact(f)) => Parsed::Fact(Box::new(f)),
            Ok(TapeLine::Artifact(digest, bytes)) => Parsed::Artifact {
                digest,
                size: bytes.len() as u64,
            },
            Err(TapeError::Line { column, what, .. }) => Parsed::Invalid { column, what },
            Err(other) => Parsed::Invalid {
                column: None,
                what: other.to_string(),
            },
        };
        Line { raw, parsed }
    }

    fn placeholder() -> Line {
        Line {
            raw: String::new(),
            parsed: Parsed::Blank,
        }
    }

    /// The line's text (without a trailing `\r`).
    pub fn text(&self) -> &str {
        strip_cr(&self.raw)
    }

    /// What the line holds.
    pub fn parsed(&self) -> &Parsed {
        &self.parsed
    }

    /// The fact on this line, if it holds one.
    pub fn fact(&self) -> Option<&Fact> {
        match &self.parsed {
            Parsed::Fact(f) => Some(f),
            _ => None,
        }
    }
}

fn strip_cr(raw: &str) -> &str {
    raw.strip_suffix('\r').unwrap_or(raw)
}

/// A tape document as an editor holds it.
#[derive(Debug)]
pub struct Document {
    lines: Vec<Line>,
    parsed_lines: u64,
    index: Option<Index>,
    index_builds: u64,
}

/// The lines and the index, borrowed together.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The lines (never empty).
    pub lines: &'a [Line],
    /// The derived index.
    pub index: &'a Index,
}

impl Document {
    /// Parses every line of `text`.
    pub fn new(text: &str) -> Document {
        let mut doc = Document {
            lines: Vec::new(),
            parsed_lines: 0,
            index: None,
            index_builds: 0,
        };
        doc.replace_all(text);
        doc
    }

    fn replace_all(&mut self, text: &str) {
        self.lines = text
            .split('\n')
            .enumerate()
            .map(|(i, raw)| Line::parse(i + 1, raw.to_owned()))
            .collect();
        self.parsed_lines += self.lines.len() as u64;
        self.index = None;
    }

    /// The lines (at least one: an empty document has one empty line).
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The whole text, as the editor has it.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&line.raw);
        }
        out
    }

    /// How many line parses this document has done since it was opened.
    pub fn parsed_lines(&self) -> u64 {
        self.parsed_lines
    }

    /// How many times the index was built since the document was opened.
    pub fn index_builds(&self) -> u64 {
        self.index_builds
    }

    /// Applies one content change: `range` (in `enc` units) replaced by
    /// `text`, or the whole document when `range` is `None`. Positions out
    /// of range are clamped (past the end of a line is its end, past the
    /// last line is the end of the document); a reversed range is read the
    /// right way round. Never panics.
    pub fn apply_change(&mut self, range: Option<Range>, text: &str, enc: Encoding) {
        let Some(range) = range else {
            self.replace_all(text);
            return;
        };
        self.index = None;
        let key = |p: Position| (p.line, p.character);
        let (start, end) = if key(range.end) < key(range.start) {
            (range.end, range.start)
        } else {
            (range.start, range.end)
        };
        let (l1, b1) = self.clamp(start, enc);
        let (l2, mut b2) = self.clamp(end, enc);
        if l1 == l2 {
            b2 = b2.max(b1);
        }
        let prefix = &self.lines[l1].raw[..b1];
        let suffix = &self.lines[l2].raw[b2..];
        let mut joined = String::with_capacity(prefix.len() + text.len() + suffix.len());
        joined.push_str(prefix);
        joined.push_str(text);
        joined.push_str(suffix);

        // A line left as it was keeps its parse: the lines of the range that
        // the edit did not change, before it (same place) or after it
        // (shifted), as long as it stays off or on line 1. Typing Enter
        // re-parses only the new line.
        let parts: Vec<&str> = joined.split('\n').collect();
        let k = parts.len();
        let mut taken = vec![false; l2 - l1 + 1];
        let mut fresh = Vec::with_capacity(k);
        for (i, raw) in parts.into_iter().enumerate() {
            let at = l1 + i;
            let same_place = Some(at).filter(|&j| j <= l2);
            let shifted = (l2 + 1 + i).checked_sub(k).filter(|&j| j >= l1);
            let reuse = [same_place, shifted]
                .into_iter()
                .flatten()
                .find(|&j| !taken[j - l1] && (j == 0) == (at == 0) && self.lines[j].raw == raw);
            match reuse {
                Some(j) => {
                    taken[j - l1] = true;
                    fresh.push(std::mem::replace(&mut self.lines[j], Line::placeholder()));
                }
                None => {
                    fresh.push(Line::parse(at + 1, raw.to_owned()));
                    self.parsed_lines += 1;
                }
            }
        }
        self.lines.splice(l1..=l2, fresh);
    }

    /// (line index, byte offset) of a position, clamped into the document.
    fn clamp(&self, p: Position, enc: Encoding) -> (usize, usize) {
        let l = p.line as usize;
        match self.lines.get(l) {
            Some(line) => (l, enc.byte_clamped(line.text(), p.character)),
            None => {
                let last = self.lines.len() - 1;
                (last, self.lines[last].text().len())
            }
        }
    }

    /// The lines with the index, built now if an edit dropped it.
    pub fn view(&mut self) -> View<'_> {
        let index = match &mut self.index {
            Some(index) => &*index,
            slot @ None => {
                self.index_builds += 1;
                &*slot.insert(Index::build(&self.lines))
            }
        };
        View {
            lines: &self.lines,
            index,
        }
    }
}
