//! Replay reports: `/reports` lists the reports under `reel serve
//! --reports DIR` (the `<tape>.report.json` files the replayer writes
//! beside a tape that diverged); `/reports/{name}` shows one the way two
//! runs are compared (`compare.rs`): per replayed call, the recording's
//! facts of that call beside the re-driven tool's, aligned by their
//! index in the call (the replayer's own alignment: its `call.started`
//! is 0), the first divergence highlighted with its field.
//!
//! The recording is the tape beside the report when it is there, else
//! the archive's run of the report's run id; without either only the
//! replayed side is shown (and the page says so).

use reel_core::report::{CallReport, ReplayReport, Verdict};
use reel_viewer::diff::align;

use super::compare::{field_list, side_by_side, Side};
use super::*;

fn report_href(name: &str) -> String {
    let parts: Vec<String> = name.split('/').map(fragment).collect();
    format!("/reports/{}", parts.join("/"))
}

/// `/reports`: the reports, newest first.
pub(crate) async fn reports(console: Access) -> Response {
    let c = console.clone();
    let listed = blocking(move || {
        let files = c.reports().map_err(read_error)?;
        Ok(files
            .into_iter()
            .map(|f| {
                let read = crate::reports::read(&f.path);
                (f, read)
            })
            .collect::<Vec<_>>())
    })
    .await;
    let files = match listed {
        Ok(f) => f,
        Err(r) => return r.into_response(),
    };
    let mut body = String::from("<main class=\"panel\"><h1>Replay reports</h1>");
    match console.reports_dir() {
        None => body.push_str(
            "<p id=\"no-reports\">No reports directory: start the console with \
             <code>reel serve --reports DIR</code> to list the <code>*.report.json</code> \
             files the replayer writes beside a tape that diverged.</p>",
        ),
        Some(dir) => {
            let _ = write!(
                body,
                "<p class=\"muted\">{} report(s) under <code>{}</code>.</p>",
                files.len(),
                escape(&dir.display().to_string())
            );
        }
    }
    body.push_str(
        "<table class=\"runs\" id=\"reports\"><thead><tr><th>report</th><th>run</th>\
         <th>verdict</th><th>first divergence</th></tr></thead><tbody>",
    );
    for (f, read) in &files {
        let _ = write!(
            body,
            "<tr class=\"report\" data-name=\"{}\"><td><a class=\"mono\" href=\"{}\">{}</a></td>",
            escape(&f.name),
            escape(&report_href(&f.name)),
            escape(&f.name)
        );
        match read {
            Ok(r) => {
                let diverged = r.calls.iter().filter(|c| !is_ok(c)).count();
                let first = r
                    .calls
                    .iter()
                    .find_map(|c| c.divergence.as_ref().map(|d| d.line.clone()))
                    .unwrap_or_default();
                let _ = write!(
                    body,
                    "<td class=\"mono\">{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                    escape(&r.run_id),
                    if diverged == 0 { "good" } else { "bad" },
                    if diverged == 0 {
                        reel_core::report::ReplaySummary::of(&r.calls).to_string()
                    } else {
                        format!("{diverged} of {} calls diverged", r.calls.len())
                    },
                    escape(&first)
                );
            }
            Err(e) => {
                let _ = write!(
                    body,
                    "<td colspan=\"3\" class=\"bad\">{}</td></tr>",
                    escape(e)
                );
            }
        }
    }
    body.push_str("</tbody></table></main>");
    Html(page(
        "reel: replay reports",
        "reports",
        console.stale(),
        &body,
    ))
    .into_response()
}

/// Nothing went differently (an unproven call is not a divergence; the
/// summary says it is unproven).
fn is_ok(c: &CallReport) -> bool {
    matches!(
        c.verdict,
        Verdict::Matched | Verdict::Served | Verdict::Unproven
    )
}

/// `/reports/{name}`: one report.
pub(crate) async fn report(console: Access, Path(name): Path<String>) -> Response {
    let c = console.clone();
    let n = name.clone();
    let read = blocking(move || c.report(&n).map_err(read_error)).await;
    let (report, recorded) = match read {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    let body = render_report(&name, &report, recorded.as_deref());
    Html(page(
        &format!("reel: replay of {}", report.run_id),
        "report",
        console.stale(),
        &body,
    ))
    .into_response()
}

fn render_report(name: &str, report: &ReplayReport, recorded: Option<&[Fact]>) -> String {
    let diverged = report.calls.iter().filter(|c| !is_ok(c)).count();
    let mut body = format!(
        "<main class=\"panel\" id=\"report\" data-run=\"{}\"><h1><span class=\"muted\">replay of</span> \
         <span class=\"mono\">{}</span> <span class=\"pill {}\">{}</span></h1>\
         <p class=\"muted\">report <code>{}</code> · source <code>{}</code> · {} facts matched · \
         {} of {} calls diverged</p>",
        escape(&report.run_id),
        escape(&report.run_id),
        if diverged == 0 { "st-ok" } else { "st-error" },
        if diverged == 0 { "matched" } else { "diverged" },
        escape(name),
        escape(&report.source),
        report.matched_facts,
        diverged,
        report.calls.len()
    );
    if recorded.is_none() {
        body.push_str(
            "<p class=\"stale\" id=\"no-recording\">Neither the tape beside this report nor a run \
             of its id in the archive was found: only the replayed side is shown.</p>",
        );
    }
    // The first divergence, in the report's order of calls.
    let first = report
        .calls
        .iter()
        .find_map(|c| c.divergence.as_ref().map(|d| (c, d)));
    if let Some((c, d)) = first {
        let _ = write!(
            body,
            "<section id=\"first-divergence\" class=\"divergence\" data-call=\"{}\" data-index=\"{}\" \
             data-field=\"{}\"><h2>First divergence</h2><p><b>{}</b> in call <a class=\"mono\" \
             href=\"#call-{}\">{}</a> <b>{}</b>, fact {} of the call{}</p><p>{}</p>",
            escape(&c.call_id),
            d.index,
            escape(d.diff.first().map(|f| f.path.as_str()).unwrap_or("")),
            escape(d.kind.as_str()),
            escape(&fragment(&c.call_id)),
            escape(&c.call_id),
            escape(&c.tool),
            d.index,
            d.seq.map(|s| format!(" (recorded #{s})")).unwrap_or_default(),
            escape(&d.line)
        );
        if !d.diff.is_empty() {
            field_list(&mut body, &d.diff);
        }
        body.push_str("</section>\n");
    }
    for c in &report.calls {
        call_section(
            &mut body,
            report,
            c,
            recorded,
            first.map(|(f, _)| f.call_id == c.call_id),
        );
    }
    body.push_str("</main>");
    body
}

fn call_section(
    body: &mut String,
    report: &ReplayReport,
    c: &CallReport,
    recorded: Option<&[Fact]>,
    is_first: Option<bool>,
) {
    let verdict = match c.verdict {
        Verdict::Matched => "matched",
        Verdict::Diverged => "diverged",
        Verdict::MissingTool => "missing tool",
        Verdict::Served => "served from the record",
        Verdict::Unproven => "unproven",
    };
    let _ = write!(
        body,
        "<section class=\"call-report\" id=\"call-{}\" data-call=\"{}\" data-verdict=\"{verdict}\">\
         <h2><span class=\"mono\">{}</span> <b>{}</b> <span class=\"pill {}\">{verdict}</span></h2>\
         <p class=\"muted\">{} facts recorded · {} replayed · result {}</p>",
        escape(&fragment(&c.call_id)),
        escape(&c.call_id),
        escape(&c.call_id),
        escape(&c.tool),
        if is_ok(c) { "st-ok" } else { "st-error" },
        c.facts_expected,
        c.facts_replayed,
        if c.result.matches { "matches" } else { "differs" },
    );
    if !c.unrecorded_effects.is_empty() {
        let _ = write!(
            body,
            "<p class=\"bad\">effects the record does not have (never run): {}</p>",
            escape(&c.unrecorded_effects.join(", "))
        );
    }
    let of_call = |facts: &[Fact]| -> Vec<Fact> {
        facts
            .iter()
            .filter(|f| f.call.as_deref() == Some(c.call_id.as_str()))
            .cloned()
            .collect()
    };
    let expected = recorded.map(of_call).unwrap_or_default();
    let actual = of_call(&report.facts);
    let mut rows = align(&expected, &actual);
    let marked = c.divergence.as_ref().map(|d| d.index);
    if let Some(d) = &c.divergence {
        // The replayer's own verdict at its place: its fields, as it
        // matched them (with the test's rules).
        while rows.len() <= d.index {
            rows.push(Vec::new());
        }
        rows[d.index] = if d.diff.is_empty() {
            vec![reel_core::matching::FieldDiff {
                path: d.kind.as_str().into(),
                expected: d.expected.clone(),
                actual: d.actual.clone(),
            }]
        } else {
            d.diff.clone()
        };
    }
    let a = Side {
        title: "recorded".into(),
        facts: &expected,
        href: recorded.map(|_| run_href(&report.run_id)),
    };
    let b = Side {
        title: "replayed".into(),
        facts: &actual,
        href: None,
    };
    let len = rows.len();
    // Only the report's first divergence is `#first-diff`.
    let anchor = (is_first == Some(true)).then_some("first-diff");
    side_by_side(body, &a, &b, &rows, 0..len, marked, anchor);
    body.push_str("</section>\n");
}
