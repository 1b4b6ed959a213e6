//! `/compare?a=RUN&b=RUN`: two runs side by side, fact by fact, aligned
//! as `reel diff` aligns them (the viewer's `reel_viewer::diff::align`,
//! one code for both): each row the two facts at one position, with their
//! calls and tools, `≠` where they differ, the first difference
//! highlighted (`#first-diff`) with its fields. Times, durations and ids
//! that always differ between two runs are not compared.
//!
//! The side-by-side table ([`side_by_side`]) also shows a replay report
//! (`replay.rs`): the recording against the re-driven tool.

use std::collections::HashMap;

use reel_core::matching::{show, FieldDiff};
use reel_viewer::diff::{align, first_difference};

use super::*;

/// The most facts of one run compared in the browser (both are held).
const MAX_COMPARED: u64 = 250_000;

/// The most rows one page shows.
const ROWS_PER_PAGE: usize = 2000;

/// The compare page's query.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct CompareQuery {
    a: Option<String>,
    b: Option<String>,
    /// The first row shown (default: the start, or near the first
    /// difference when it is past the first page).
    from: Option<usize>,
}

/// One side of the table: whose facts, where they link to, their tools.
pub(super) struct Side<'a> {
    /// The column's title.
    pub(super) title: String,
    /// The facts.
    pub(super) facts: &'a [Fact],
    /// The run page its facts link to, when it is in the archive.
    pub(super) href: Option<String>,
}

fn tools(facts: &[Fact]) -> HashMap<&str, &str> {
    facts
        .iter()
        .filter_map(|f| match &f.kind {
            reel_core::FactKind::CallStarted(c) => Some((c.call_id.as_str(), c.tool_name.as_str())),
            _ => None,
        })
        .collect()
}

fn cell(out: &mut String, fact: Option<&Fact>, side: &Side<'_>, tools: &HashMap<&str, &str>) {
    let Some(f) = fact else {
        out.push_str("<td class=\"side none muted\">(no fact)</td>");
        return;
    };
    let tool = f
        .call
        .as_deref()
        .and_then(|c| tools.get(c).copied())
        .unwrap_or("");
    let seq = match &side.href {
        Some(h) => format!(
            "<a class=\"mono\" href=\"{}#seq-{s}\">#{s}</a>",
            escape(h),
            s = f.seq
        ),
        None => format!("<span class=\"mono\">#{}</span>", f.seq),
    };
    let _ = write!(
        out,
        "<td class=\"side\" data-seq=\"{}\" data-call=\"{}\">{seq} <span class=\"kind\">{}</span> ",
        f.seq,
        escape(f.call.as_deref().unwrap_or("")),
        escape(f.kind.name())
    );
    if let Some(c) = &f.call {
        let _ = write!(
            out,
            "<span class=\"mono\">{}</span> <b>{}</b> ",
            escape(c),
            escape(tool)
        );
    }
    let _ = write!(
        out,
        "<span class=\"fact-line\">{}</span></td>",
        escape(&TextRenderer::new(Color::Plain).detail_text(f, tool))
    );
}

/// The field differences of a row, one line each.
pub(super) fn field_list(out: &mut String, diffs: &[FieldDiff]) {
    out.push_str("<ul class=\"field-diffs\">");
    for d in diffs {
        let _ = write!(
            out,
            "<li><code class=\"path\">{}</code>: <span class=\"expected\">{}</span> vs \
             <span class=\"actual\">{}</span></li>",
            escape(&d.path),
            escape(&show(&d.expected)),
            escape(&show(&d.actual))
        );
    }
    out.push_str("</ul>");
}

/// Rows `range` of two fact lists aligned by position (`rows[i]`: the
/// differences at position `i`), the row `first` marked as the first
/// difference (class `first-diff`, its fields under it with the id
/// `anchor`; without an anchor, class `divergence`: a later call's own
/// first divergence in a replay report).
pub(super) fn side_by_side(
    out: &mut String,
    a: &Side<'_>,
    b: &Side<'_>,
    rows: &[Vec<FieldDiff>],
    range: std::ops::Range<usize>,
    first: Option<usize>,
    anchor: Option<&str>,
) {
    let (ta, tb) = (tools(a.facts), tools(b.facts));
    let _ = write!(
        out,
        "<table class=\"compare\"><thead><tr><th>#</th><th></th><th>{}</th><th>{}</th></tr></thead><tbody>",
        escape(&a.title),
        escape(&b.title)
    );
    for i in range {
        let Some(diffs) = rows.get(i) else { break };
        let is_first = first == Some(i);
        let _ = write!(
            out,
            "<tr class=\"row{}{}\" id=\"row-{i}\" data-index=\"{i}\"",
            if diffs.is_empty() { "" } else { " differs" },
            match (is_first, anchor) {
                (true, Some(_)) => " first-diff",
                (true, None) => " divergence",
                _ => "",
            },
        );
        if !diffs.is_empty() {
            let paths: Vec<&str> = diffs.iter().map(|d| d.path.as_str()).collect();
            let _ = write!(out, " title=\"differs: {}\"", escape(&paths.join(", ")));
        }
        let _ = write!(
            out,
            "><td class=\"mono muted\">{i}</td><td class=\"mark\">{}</td>",
            if diffs.is_empty() { "" } else { "≠" }
        );
        cell(out, a.facts.get(i), a, &ta);
        cell(out, b.facts.get(i), b, &tb);
        out.push_str("</tr>\n");
        if is_first {
            let id = anchor
                .map(|a| format!(" id=\"{}\"", escape(a)))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<tr class=\"diff-fields\"{id}><td></td><td>▶</td><td colspan=\"2\">\
                 <b>first difference</b>",
            );
            field_list(out, diffs);
            out.push_str("</td></tr>\n");
        }
    }
    out.push_str("</tbody></table>\n");
}

/// `/compare?a=RUN&b=RUN`.
pub(crate) async fn compare(console: Access, Query(q): Query<CompareQuery>) -> Response {
    let (Some(a), Some(b)) = (
        q.a.as_deref().map(str::trim).filter(|s| !s.is_empty()),
        q.b.as_deref().map(str::trim).filter(|s| !s.is_empty()),
    ) else {
        let body = format!(
            "<main class=\"panel\"><h1>Compare two runs</h1><form action=\"/compare\" method=\"get\">\
             <label>run <input name=\"a\" value=\"{}\" required></label> \
             <label>with run <input name=\"b\" value=\"{}\" required></label> \
             <button type=\"submit\">compare</button></form>\
             <p class=\"muted\">Aligned fact by fact as <code>reel diff A B</code> aligns them.</p></main>",
            escape(q.a.as_deref().unwrap_or("")),
            escape(q.b.as_deref().unwrap_or(""))
        );
        return Html(page("reel: compare", "compare", console.stale(), &body)).into_response();
    };
    let (a, b) = (a.to_owned(), b.to_owned());
    let c = console.clone();
    let read = blocking(move || {
        let what = "compares: use `reel diff A B`, which streams";
        let fa = c.run_facts(&a, MAX_COMPARED, what).map_err(read_error)?;
        let fb = c.run_facts(&b, MAX_COMPARED, what).map_err(read_error)?;
        Ok((a, fa, b, fb))
    })
    .await;
    let (a, (ra, fa), b, (rb, fb)) = match read {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    let rows = align(&fa, &fb);
    let first = first_difference(&rows);
    let start = q.from.unwrap_or(match first {
        Some(f) if f >= ROWS_PER_PAGE => f.saturating_sub(20),
        _ => 0,
    });
    let end = (start + ROWS_PER_PAGE).min(rows.len());
    let mut body = format!(
        "<main class=\"panel\" id=\"compare\" data-first=\"{}\"><h1>Compare <a class=\"mono\" href=\"{}\">{}</a> \
         <span class=\"muted\">with</span> <a class=\"mono\" href=\"{}\">{}</a></h1>",
        first.map(|f| f.to_string()).unwrap_or_default(),
        escape(&run_href(&a)),
        escape(&a),
        escape(&run_href(&b)),
        escape(&b)
    );
    let _ = write!(
        body,
        "<p id=\"verdict\" class=\"{}\">{}</p><p class=\"muted\">{} · {} · aligned fact by fact as \
         <code>reel diff {} {}</code> aligns them; times, durations and ids are not compared. \
         Rows {}–{} of {}.</p>",
        if first.is_some() { "bad" } else { "good" },
        match first {
            Some(i) => format!(
                "The runs differ first at fact {i}: <a href=\"#first-diff\">see the first difference</a>."
            ),
            None => format!("The runs match ({} facts).", fa.len()),
        },
        escape(&format!("{}: {} facts, {}", a, fa.len(), ra.state.as_str())),
        escape(&format!("{}: {} facts, {}", b, fb.len(), rb.state.as_str())),
        escape(&fragment(&a)),
        escape(&fragment(&b)),
        start,
        end.saturating_sub(1),
        rows.len()
    );
    let pager = |out: &mut String| {
        out.push_str("<p class=\"pager\">");
        let base = format!("/compare?a={}&b={}", fragment(&a), fragment(&b));
        if start > 0 {
            let _ = write!(
                out,
                "<a href=\"{}&from={}\">← earlier rows</a> ",
                escape(&base),
                start.saturating_sub(ROWS_PER_PAGE)
            );
        }
        if end < rows.len() {
            let _ = write!(
                out,
                "<a href=\"{}&from={end}\">later rows →</a>",
                escape(&base)
            );
        }
        out.push_str("</p>");
    };
    pager(&mut body);
    let sa = Side {
        title: a.clone(),
        facts: &fa,
        href: Some(run_href(&a)),
    };
    let sb = Side {
        title: b.clone(),
        facts: &fb,
        href: Some(run_href(&b)),
    };
    side_by_side(
        &mut body,
        &sa,
        &sb,
        &rows,
        start..end,
        first,
        Some("first-diff"),
    );
    pager(&mut body);
    body.push_str("</main>");
    Html(page(
        &format!("reel: compare {a} with {b}"),
        "compare",
        console.stale(),
        &body,
    ))
    .into_response()
}
