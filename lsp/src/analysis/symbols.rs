//! The outline (document symbols: the run, its calls nested by
//! dispatch, their facts) and the folding ranges of a tape.

use super::*;

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
            let detail = call_summary(node);
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

/// A call's status and duration, in the words every renderer uses
/// ([`reel_viewer::names::call_status`]).
pub(super) fn call_summary(node: Option<&reel_viewer::timeline::CallNode>) -> String {
    let Some(node) = node else {
        return "not in the timeline".into();
    };
    let status = reel_viewer::names::call_status(node.status);
    let took = node.duration_ns.map(duration).unwrap_or_default();
    match (node.status, &node.error) {
        (None, _) => status.into(),
        (Some(CallStatus::Error), Some(e)) => format!("{status} in {took}: {}", cut(e, 80)),
        _ => format!("{status} in {took}"),
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
