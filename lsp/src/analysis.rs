//! The answers: outline, hover, definition, folding and diagnostics, from a
//! [`View`] of a document. Pure functions: no IO, no state, no panics on
//! any text or position.

use std::fmt::Write as _;

use reel_core::fact::*;
use reel_core::marker::{ARTIFACT_REF, MARKER, NESTED};
use reel_core::Fact;
use serde_json::Value;
use tower_lsp_server::ls_types::{
    Diagnostic, DiagnosticSeverity, DocumentSymbol, FoldingRange, FoldingRangeKind, Hover,
    HoverContents, MarkupContent, MarkupKind, NumberOrString, Position, Range, SymbolKind,
};

use super::document::{Item, Parsed, View, GAP, MAX_NESTING};
use super::position::Encoding;
use reel_core::display::{cut, progress_line};
use reel_core::report::ReplayReport;
use reel_viewer::names::name;
use reel_viewer::render::text::{duration, timestamp};
use reel_viewer::timeline::Anomaly;

/// The most characters of a pretty-printed payload shown in a hover.
pub const HOVER_PAYLOAD_LIMIT: usize = 20_000;

/// The most diagnostics published for one document (a last one says how
/// many more there are).
pub const MAX_DIAGNOSTICS: usize = 5_000;

/// The `source` of diagnostics about the tape itself.
pub const SOURCE: &str = "reel";

/// The `source` of diagnostics from a replay report.
pub const REPORT_SOURCE: &str = "reel replay";

/// The range of a whole line.
pub fn line_range(view: View<'_>, line: usize, enc: Encoding) -> Range {
    let text = view.lines.get(line).map_or("", |l| l.text());
    let n = u32::try_from(line).unwrap_or(u32::MAX);
    Range::new(Position::new(n, 0), Position::new(n, enc.line_len(text)))
}

/// The line a question is about: `None` when the position is not in the
/// document (past the last line, past the end of its line, inside a
/// character).
pub fn line_at(view: View<'_>, pos: Position, enc: Encoding) -> Option<usize> {
    let n = pos.line as usize;
    let line = view.lines.get(n)?;
    enc.byte_exact(line.text(), pos.character)?;
    Some(n)
}

// ---------------------------------------------------------------------------
// Outline
// ---------------------------------------------------------------------------

mod diagnostics;
mod hover;
mod symbols;

pub use diagnostics::{diagnostics, ReportInput};
pub use hover::{definition, hover};
pub use symbols::{document_symbols, folding_ranges};
