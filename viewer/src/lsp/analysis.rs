//! The answers: outline, hover, definition, folding and diagnostics, from a
//! [`View`] of a document. Pure functions: no IO, no state, no panics on
//! any text or position.

use std::fmt::Write as _;

use reel::fact::*;
use reel::redact::{ARTIFACT_REF, MARKER, NESTED};
use reel::Fact;
use serde_json::Value;
use tower_lsp_server::ls_types::{
    Diagnostic, DiagnosticSeverity, DocumentSymbol, FoldingRange, FoldingRangeKind, Hover,
    HoverContents, MarkupContent, MarkupKind, NumberOrString, Position, Range, SymbolKind,
};

use super::document::{Item, Parsed, View, MAX_NESTING};
use super::position::Encoding;
use crate::display::{cut, progress_line};
use crate::names::name;
use crate::render::text::{duration, timestamp};
use crate::timeline::Anomaly;
use reel::report::ReplayReport;

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

/// The outline: the run, its calls nested by dispatch, their facts; and
/// the artifact lines.
pub fn document_symbols(view: View<'_>, enc: Encoding) -> Vec<DocumentSymbol> {
    let ix = view.index;
    let t = &ix.timeline;
    let header = ix.header.and_then(|h| match view.lines[h].parsed() {
        Parsed::Header(h) => Some(h),
        _ => None,
    });
    let run_id = t
        .run
        .as_ref()
        .map(|r| r.run_id.clone())
        .or_else(|| header.map(|h| h.run.run_id.clone()));
    let mut detail = match (t.ended, header) {
        (Some((status, _)), _) => name(&status),
        (None, Some(h)) => h.run.state.as_str().to_owned(),
        (None, None) => "no header".to_owned(),
    };
    let _ = write!(
        detail,
        " · {} facts · {} calls · {}",
        t.facts,
        t.calls.len(),
        duration(t.duration_ns())
    );
    let first = ix.header.or(ix.run_started).unwrap_or(0);
    let children = ix
        .top
        .iter()
        // The header is the run symbol's own line.
        .filter(|item| Some(**item) != ix.header.map(Item::Line))
        .filter_map(|item| symbol(view, *item, enc, 0))
        .collect::<Vec<_>>();
    let whole = Range::new(
        Position::new(0, 0),
        line_range(view, ix.last_line.max(first), enc).end,
    );
    let outside = t.run.as_ref().and_then(|r| r.outside_run.as_deref());
    let name = match (outside, run_id.as_deref()) {
        (Some(call), Some(key)) => format!("no run · call {call} (kept as {key})"),
        (_, Some(run)) => format!("run {run}"),
        (_, None) => "run (no run.started)".to_owned(),
    };
    vec![new_symbol(
        name,
        Some(detail),
        SymbolKind::NAMESPACE,
        whole,
        line_range(view, first, enc),
        Some(children),
    )]
}

#[allow(deprecated)] // `deprecated` is a required field of the struct.
fn new_symbol(
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    range: Range,
    selection_range: Range,
    children: Option<Vec<DocumentSymbol>>,
) -> DocumentSymbol {
    DocumentSymbol {
        // Clients refuse empty names.
        name: if name.trim().is_empty() {
            "(unnamed)".into()
        } else {
            name
        },
        detail,
        kind,
        tags: None,
        deprecated: None,
        range,
        selection_range,
        children,
    }
}

fn symbol(view: View<'_>, item: Item, enc: Encoding, depth: usize) -> Option<DocumentSymbol> {
    let ix = view.index;
    match item {
        Item::Call(i) => {
            let c = &ix.calls[i];
            let node = ix.timeline_call(&c.call_id);
            let detail = call_status(node);
            let range = Range::new(
                line_range(view, c.started, enc).start,
                line_range(view, c.last, enc).end,
            );
            // Depth is bounded by MAX_NESTING in the index; the guard keeps
            // it so here whatever the index holds.
            let children = (depth <= MAX_NESTING).then(|| {
                c.items
                    .iter()
                    .filter_map(|item| symbol(view, *item, enc, depth + 1))
                    .collect()
            });
            Some(new_symbol(
                format!("{} {}", c.call_id, c.tool),
                Some(detail),
                SymbolKind::FUNCTION,
                range,
                line_range(view, c.started, enc),
                children,
            ))
        }
        Item::Line(n) => {
            let range = line_range(view, n, enc);
            match view.lines[n].parsed() {
                Parsed::Fact(f) => {
                    let tool = ix.call_of_line(n).map_or("", |c| c.tool.as_str());
                    Some(new_symbol(
                        format!("#{} {}", f.seq, f.kind.name()),
                        short_detail(f, tool),
                        SymbolKind::EVENT,
                        range,
                        range,
                        None,
                    ))
                }
                Parsed::Artifact { digest, size } => Some(new_symbol(
                    format!("artifact {}", short(digest, 19)),
                    Some(format!("{size} B")),
                    SymbolKind::FILE,
                    range,
                    range,
                    None,
                )),
                Parsed::Header(_) => Some(new_symbol(
                    "header".into(),
                    None,
                    SymbolKind::PACKAGE,
                    range,
                    range,
                    None,
                )),
                Parsed::Blank | Parsed::Invalid { .. } => None,
            }
        }
    }
}

/// The first `n` characters of `s`, with `…` when there were more.
fn short(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((b, _)) => format!("{}…", &s[..b]),
        None => s.to_owned(),
    }
}

fn call_status(node: Option<&crate::timeline::CallNode>) -> String {
    let Some(node) = node else {
        return "not in the timeline".into();
    };
    let took = node.duration_ns.map(duration).unwrap_or_default();
    match (node.status, &node.error) {
        (Some(CallStatus::Ok), _) => format!("ok in {took}"),
        (Some(CallStatus::Error), Some(e)) => format!("error in {took}: {}", cut(e, 80)),
        (Some(CallStatus::Error), None) => format!("error in {took}"),
        (Some(CallStatus::Aborted), _) => format!("aborted in {took}"),
        (None, _) => "never ended".into(),
    }
}

/// A few words about a fact, for the outline.
fn short_detail(f: &Fact, tool: &str) -> Option<String> {
    let one_line = |s: &str| cut(&s.replace(['\n', '\r'], " "), 80);
    Some(match &f.kind {
        FactKind::Progress(p) => one_line(&progress_line(tool, &p.payload, p.count)),
        FactKind::CallEnded(e) => {
            format!("{} in {}", name(&e.status()), duration(e.duration_ns))
        }
        FactKind::RunEnded(e) => name(&e.status),
        FactKind::Log(l) => name(&l.level),
        FactKind::CredentialRequested(c) => one_line(&c.need),
        FactKind::CredentialResolved(c) => one_line(&c.need),
        FactKind::CredentialFailed(c) => one_line(&format!("{}: {}", c.need, c.reason)),
        FactKind::CredentialRefused(c) => one_line(&c.need),
        FactKind::ArtifactPut(a) => one_line(&a.meta.id),
        FactKind::ArtifactGet(a) => one_line(&a.id),
        FactKind::Effect(e) => one_line(&e.name),
        FactKind::ElicitRequested(e) => one_line(&e.message),
        FactKind::CallOutput(o) => one_line(o.stage.as_deref()?),
        FactKind::CancelRequested(c) => one_line(c.reason.as_deref()?),
        FactKind::Unknown { .. } => "a kind this reel does not know".into(),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------
// Hover
// ---------------------------------------------------------------------------

/// The hover of a line: for a fact, its kind, call and tool, offset from
/// the run's start, the call's duration, the progress display line and
/// the payload pretty-printed (with what was redacted when recorded).
pub fn hover(view: View<'_>, pos: Position, enc: Encoding) -> Option<Hover> {
    let n = line_at(view, pos, enc)?;
    let text = match view.lines[n].parsed() {
        Parsed::Fact(f) => fact_hover(view, n, f),
        Parsed::Header(h) => {
            let t = &view.index.timeline;
            let what = match &h.run.outside_run {
                None => format!("run {}", code(&h.run.run_id)),
                Some(call) => format!(
                    "no run · call {} (kept as {})",
                    code(call),
                    code(&h.run.run_id)
                ),
            };
            let mut s = format!(
                "**tape** {} · {what} · {}\n\n",
                code(&h.format),
                escape(h.run.state.as_str())
            );
            let _ = writeln!(
                s,
                "The header says {} facts and {} calls; this document holds {} facts and {} calls.",
                h.run.facts,
                h.run.calls,
                t.facts,
                t.calls.len()
            );
            let _ = write!(s, "\nStarted {}", timestamp(h.run.started_at));
            if let Some(end) = h.run.ended_at {
                let _ = write!(
                    s,
                    ", took {}",
                    duration(end.saturating_sub(h.run.started_at).max(0) as u64)
                );
            }
            s.push('.');
            s
        }
        Parsed::Artifact { digest, size } => {
            let mut s = format!("**artifact** {} · {size} B", code(digest));
            let puts = view.index.puts_of_digest(digest);
            if let Some(&p) = puts.first() {
                let _ = write!(s, "\n\nPut on line {}", p + 1);
                if let Some(FactKind::ArtifactPut(a)) = view.lines[p].fact().map(|f| &f.kind) {
                    let _ = write!(
                        s,
                        " as {} ({})",
                        code(&a.meta.id),
                        escape(&a.meta.media_type)
                    );
                }
                s.push('.');
            }
            s
        }
        Parsed::Blank | Parsed::Invalid { .. } => return None,
    };
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: Some(line_range(view, n, enc)),
    })
}

fn fact_hover(view: View<'_>, n: usize, f: &Fact) -> String {
    let ix = view.index;
    let call = ix.call_of_line(n);
    let mut s = format!("**{}** #{}", escape(f.kind.name()), f.seq);
    match (&f.call, call) {
        (Some(id), Some(c)) => {
            let _ = write!(s, " · call {} · tool {}", code(id), code(&c.tool));
            if let Some(p) = &c.parent_call {
                let _ = write!(s, " · dispatched by {}", code(p));
            }
        }
        (Some(id), None) => {
            let _ = write!(s, " · call {} (which has not started above)", code(id));
        }
        (None, _) => s.push_str(" · run-level"),
    }
    let _ = write!(s, "\n\n+{} from the run's start", duration(f.offset));
    if let Some(c) = call.filter(|c| c.started != n) {
        let _ = write!(
            s,
            " (+{} into the call)",
            duration(f.offset.saturating_sub(c.started_offset))
        );
    }
    let _ = write!(s, " · {}", timestamp(f.at));

    match &f.kind {
        FactKind::CallStarted(c) => {
            let _ = write!(
                s,
                "\n\nCall {}: {}",
                code(&c.call_id),
                escape(&call_status(ix.timeline_call(&c.call_id)))
            );
            if let Some(inv) = &c.invocation_id {
                let _ = write!(s, " · invocation {}", code(inv));
            }
            match &c.spec {
                Some(spec) => spec_hover(&mut s, spec),
                None => {
                    let _ = write!(
                        s,
                        "\n\nNo tool spec: the tool declared nothing about itself"
                    );
                }
            }
        }
        FactKind::CallEnded(e) => {
            let how = match &e.outcome {
                CallOutcome::Ok { .. } => "ok".to_owned(),
                CallOutcome::Error { error } => format!("with an error: {}", cut(error, 200)),
                CallOutcome::Aborted { reason } => match reason {
                    Some(r) => format!("aborted: {}", cut(r, 200)),
                    None => "aborted".to_owned(),
                },
            };
            let _ = write!(
                s,
                "\n\nThe call took {} and ended {}",
                duration(e.duration_ns),
                escape(&how)
            );
        }
        FactKind::ArtifactGet(g) => {
            let made = source_of_get(view, n, g).map(|l| (l, view.lines[l].fact()));
            let _ = match made {
                Some((l, Some(put))) => write!(
                    s,
                    "\n\nMade by the {} on line {}",
                    escape(put.kind.name()),
                    l + 1
                ),
                Some((l, None)) => write!(s, "\n\nIts bytes are on line {}", l + 1),
                None if g.meta.is_none() => write!(s, "\n\nThe store had no such artifact"),
                None => write!(s, "\n\nNot put in this tape"),
            };
        }
        FactKind::Progress(p) => {
            let tool = call.map_or("", |c| c.tool.as_str());
            let _ = write!(
                s,
                "\n\nShown as: {}",
                escape(&progress_line(tool, &p.payload, p.count))
            );
        }
        FactKind::Unknown { .. } => {
            s.push_str("\n\nA kind this reel does not know (written by a newer reel): its fields are kept as they are.");
        }
        _ => {}
    }

    let data = serde_json::to_value(f)
        .ok()
        .and_then(|mut v| v.get_mut("data").map(Value::take))
        .unwrap_or(Value::Null);
    let mut marks = Marks::default();
    marks.walk(&data, &mut String::new());
    if !marks.redacted.is_empty() {
        let _ = write!(
            s,
            "\n\nRedacted when recorded (the secret was never stored), shown as {}: {}",
            code(MARKER),
            list(&marks.redacted)
        );
    }
    if !marks.artifacts.is_empty() {
        let _ = write!(
            s,
            "\n\nStored as artifacts (too large to keep inline): {}",
            list(&marks.artifacts)
        );
    }
    if !marks.nested.is_empty() {
        let _ = write!(
            s,
            "\n\nNested too deep to keep as JSON, kept as JSON text: {}",
            list(&marks.nested)
        );
    }
    let pretty = serde_json::to_string_pretty(&data).unwrap_or_default();
    let pretty = cut(&pretty, HOVER_PAYLOAD_LIMIT);
    let fence = "`".repeat(longest_run(&pretty, '`').max(2) + 1);
    let _ = write!(s, "\n\n{fence}json\n{pretty}\n{fence}");
    s
}

/// Where a payload holds redaction markers, artifact references and
/// capped subtrees (as JSON pointers).
#[derive(Default)]
struct Marks {
    redacted: Vec<String>,
    artifacts: Vec<String>,
    nested: Vec<String>,
}

impl Marks {
    const MAX: usize = 20;

    fn walk(&mut self, v: &Value, path: &mut String) {
        if self.redacted.len() + self.artifacts.len() + self.nested.len() > 3 * Self::MAX {
            return;
        }
        match v {
            Value::String(s) if s == MARKER => push_max(&mut self.redacted, pointer(path)),
            Value::Object(map) => {
                if let Some(Value::String(d)) = map.get(ARTIFACT_REF) {
                    push_max(&mut self.artifacts, format!("{} → {}", pointer(path), d));
                }
                if map.contains_key(NESTED) {
                    push_max(&mut self.nested, pointer(path));
                }
                for (k, item) in map {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    self.walk(item, path);
                    path.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    let _ = write!(path, "/{i}");
                    self.walk(item, path);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
}

fn push_max(list: &mut Vec<String>, item: String) {
    if list.len() < Marks::MAX {
        list.push(item);
    }
}

fn pointer(path: &str) -> String {
    if path.is_empty() {
        "/".into()
    } else {
        path.into()
    }
}

/// The hover's section on a call's tool spec: title and name, the
/// description, the annotations, mode, needs, wants and the input's
/// members (the whole spec is in the payload below).
fn spec_hover(s: &mut String, spec: &reel::spec::ToolSpec) {
    let _ = write!(s, "\n\n**Tool spec** {}", code(&spec.name));
    if let Some(t) = &spec.title {
        let _ = write!(s, " · {}", escape(&cut(t, 200)));
    }
    if let Some(id) = &spec.id {
        let _ = write!(s, " · id {}", code(id));
    }
    if let Some(d) = &spec.description {
        let _ = write!(s, "\n\n{}", escape(&cut(d, 500)));
    }
    let mode = match spec.mode {
        CallMode::Sync => "sync",
        CallMode::Async => "async",
    };
    let _ = write!(s, "\n\nMode {mode}");
    match spec.annotations.map(|a| a.words()) {
        Some(words) if !words.is_empty() => {
            let _ = write!(s, " · {}", words.join(", "));
        }
        _ => s.push_str(" · no annotations"),
    }
    if !spec.needs.is_empty() {
        let _ = write!(s, " · needs {}", list(&spec.needs));
    }
    if !spec.wants.is_empty() {
        let _ = write!(s, " · wants {}", list(&spec.wants));
    }
    if let Some(props) = spec
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    {
        let names: Vec<String> = props.keys().cloned().collect();
        let _ = write!(s, "\n\nInput: {}", list(&names));
        if let Some(required) = spec.input_schema.get("required").and_then(Value::as_array) {
            let required: Vec<String> = required
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if !required.is_empty() {
                let _ = write!(s, " (required: {})", list(&required));
            }
        }
    }
}

fn list(items: &[String]) -> String {
    items.iter().map(|i| code(i)).collect::<Vec<_>>().join(", ")
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for ch in s.chars() {
        if ch == c {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// Inline code that holds any text (recorded strings are untrusted).
fn code(s: &str) -> String {
    let s = cut(&s.replace(['\n', '\r'], " "), 200);
    let fence = "`".repeat(longest_run(&s, '`') + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// Markdown text (never at the start of a line) with the characters that
/// could make markup escaped: emphasis, code, links, HTML, tables.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '<' | '>' | '~' | '&' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(ch),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Definition
// ---------------------------------------------------------------------------

/// Where a line's fact comes from: `artifact.get` → the `artifact.put` that
/// made it (by digest, else by id; the last one above, else the first
/// below); a child's `call.started` → its parent's `call.started` (the
/// dispatching call); every other fact of a call (`call.ended` included) →
/// its `call.started`; `run.ended` → `run.started`. Returns the target
/// line.
pub fn definition(view: View<'_>, pos: Position, enc: Encoding) -> Option<usize> {
    let n = line_at(view, pos, enc)?;
    let ix = view.index;
    let f = view.lines[n].fact()?;
    match &f.kind {
        FactKind::ArtifactGet(g) => {
            if let Some(line) = source_of_get(view, n, g) {
                return Some(line);
            }
        }
        FactKind::CallStarted(c) => {
            return ix.call(c.parent_call.as_deref()?).map(|p| p.started);
        }
        FactKind::RunEnded(_) => return ix.run_started,
        _ => {}
    }
    ix.call_of_line(n)
        .map(|c| c.started)
        .or_else(|| ix.call(f.call.as_deref()?).map(|c| c.started))
        .filter(|&l| l != n)
}

/// The line that made what an `artifact.get` on line `n` fetched: the
/// `artifact.put` of its digest (else of its id), the last one above `n`,
/// else the first below; failing that, the artifact line of its bytes.
fn source_of_get(view: View<'_>, n: usize, g: &ArtifactGet) -> Option<usize> {
    let ix = view.index;
    let pick = |lines: &[usize]| {
        lines
            .iter()
            .rev()
            .find(|&&l| l < n)
            .or_else(|| lines.first())
            .copied()
    };
    g.meta
        .as_ref()
        .and_then(|m| pick(ix.puts_of_digest(&m.digest)))
        .or_else(|| pick(ix.puts_of_id(&g.id)))
        .or_else(|| g.meta.as_ref().and_then(|m| ix.artifact_line(&m.digest)))
}

// ---------------------------------------------------------------------------
// Folding
// ---------------------------------------------------------------------------

/// One folding range per call: from its `call.started` line to its
/// `call.ended` line (or, for a call that never ended, its last fact).
pub fn folding_ranges(view: View<'_>) -> Vec<FoldingRange> {
    view.index
        .calls
        .iter()
        .filter_map(|c| {
            let end = c.ended.unwrap_or(c.last);
            (end > c.started).then(|| FoldingRange {
                start_line: u32::try_from(c.started).unwrap_or(u32::MAX),
                start_character: None,
                end_line: u32::try_from(end).unwrap_or(u32::MAX),
                end_character: None,
                kind: Some(FoldingRangeKind::Region),
                collapsed_text: Some(format!("{} {}", c.call_id, c.tool)),
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Diagnostics
// ---------------------------------------------------------------------------

/// What is known about the replay report beside the tape.
#[derive(Debug, Clone, Copy)]
pub enum ReportInput<'a> {
    /// There is none (or the document is not a file).
    None,
    /// It was read.
    Read {
        /// The report's file name, for messages.
        name: &'a str,
        /// What it says.
        report: &'a ReplayReport,
    },
    /// It is there but could not be read.
    Unreadable {
        /// The report's file name.
        name: &'a str,
        /// Why.
        error: &'a str,
    },
}

/// Every diagnostic of a document: lines that are not valid tape lines
/// (with the parser's column), structural problems, the timeline's
/// anomalies at the lines they concern, and the divergences of a replay
/// report beside the tape.
pub fn diagnostics(view: View<'_>, enc: Encoding, report: ReportInput<'_>) -> Vec<Diagnostic> {
    let ix = view.index;
    let mut out = Vec::new();
    let diag = |range: Range, severity, code: &str, source: &str, message: String| Diagnostic {
        range,
        severity: Some(severity),
        code: Some(NumberOrString::String(code.to_owned())),
        code_description: None,
        source: Some(source.to_owned()),
        message,
        related_information: None,
        tags: None,
        data: None,
    };

    for (n, line) in view.lines.iter().enumerate() {
        if let Parsed::Invalid { column, what } = line.parsed() {
            let mut range = line_range(view, n, enc);
            if let Some(col) = column {
                range.start.character = enc.units(line.text(), col.saturating_sub(1));
            }
            out.push(diag(
                range,
                DiagnosticSeverity::ERROR,
                "invalid-line",
                SOURCE,
                what.clone(),
            ));
        }
    }
    for p in &ix.problems {
        let severity = match p.code {
            "call-restarted" => DiagnosticSeverity::WARNING,
            "unknown-kind" => DiagnosticSeverity::INFORMATION,
            _ => DiagnosticSeverity::ERROR,
        };
        out.push(diag(
            line_range(view, p.line, enc),
            severity,
            p.code,
            SOURCE,
            p.message.clone(),
        ));
    }
    for a in &ix.timeline.anomalies {
        let line = match a {
            Anomaly::Gap(gap) => ix
                .line_of_gap(gap.first)
                .or_else(|| gap.last.and_then(|l| ix.line_of_seq(l.saturating_add(1)))),
            Anomaly::UnendedRun => ix.run_started.or(ix.header),
            other => other.seq().and_then(|s| ix.line_of_seq(s)),
        }
        .unwrap_or(0);
        let code = serde_json::to_value(a)
            .ok()
            .and_then(|v| v.get("anomaly").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "anomaly".into());
        let severity = if matches!(a, Anomaly::Gap(_)) {
            DiagnosticSeverity::ERROR
        } else {
            DiagnosticSeverity::WARNING
        };
        out.push(diag(
            line_range(view, line, enc),
            severity,
            &code,
            SOURCE,
            a.describe(),
        ));
    }

    let top = ix.header.or(ix.run_started).unwrap_or(0);
    match report {
        ReportInput::None => {}
        ReportInput::Unreadable { name, error } => out.push(diag(
            line_range(view, top, enc),
            DiagnosticSeverity::WARNING,
            "report-unreadable",
            REPORT_SOURCE,
            format!("the replay report {name} could not be read: {error}"),
        )),
        ReportInput::Read { name, report } => {
            let run = ix.timeline.run.as_ref().map(|r| r.run_id.as_str());
            match (report.run_id.as_str(), run) {
                (theirs, Some(ours)) if theirs != ours => out.push(diag(
                    line_range(view, top, enc),
                    DiagnosticSeverity::WARNING,
                    "report-other-run",
                    REPORT_SOURCE,
                    format!(
                        "the replay report {name} is about run {theirs:?}, not this tape's run {ours:?}: its divergences are not shown"
                    ),
                )),
                _ => {
                    for (c, d) in report
                        .calls
                        .iter()
                        .filter_map(|c| Some((c, c.divergence.as_ref()?)))
                    {
                        let call = ix.call(&c.call_id);
                        let by_index = call.and_then(|c| {
                            c.items
                                .iter()
                                .filter_map(|item| match item {
                                    Item::Line(l) => Some(*l),
                                    Item::Call(_) => None,
                                })
                                .nth(d.index)
                        });
                        let line = d
                            .seq
                            .and_then(|s| ix.line_of_seq(s))
                            .or(by_index)
                            .or(call.map(|c| c.started))
                            .unwrap_or(top);
                        out.push(diag(
                            line_range(view, line, enc),
                            DiagnosticSeverity::ERROR,
                            d.kind.as_str(),
                            REPORT_SOURCE,
                            format!("replay diverged ({name}): {}", d.line),
                        ));
                    }
                }
            }
        }
    }

    out.sort_by_key(|d| d.range.start.line);
    if out.len() > MAX_DIAGNOSTICS {
        let more = out.len() - MAX_DIAGNOSTICS;
        out.truncate(MAX_DIAGNOSTICS);
        out.push(diag(
            line_range(view, top, enc),
            DiagnosticSeverity::INFORMATION,
            "too-many",
            SOURCE,
            format!("{more} more problems are not shown"),
        ));
    }
    out
}
