//! `/tools`: the tools overview. Per tool, over the runs the filters
//! select (status, tenant, time range, as the runs table's URL names
//! them): calls, errors, error rate, p50/p95/p99 duration and progress
//! reports per call, then small charts over time (calls and errors per
//! bucket, duration percentiles per bucket). Merged from the runs'
//! summaries (`Archive::overview`), never from their facts, but for runs
//! without one. The runs-over-time chart of the first page is here too
//! (`runs_chart`).

use reel_core::summary::{Overview, ToolOverview};

use super::chart::{self, Axis, Line, Part};
use super::table::RunsQuery;
use super::*;

/// Time buckets of the charts.
pub(crate) const BUCKETS: u32 = 30;

/// The tools overview shows this many tools' charts at most (the table
/// lists every tool).
const CHARTED: usize = 40;

fn axis(o: &Overview) -> Axis {
    Axis {
        since: o.since,
        bucket_ns: o.bucket_ns,
        buckets: o.run_buckets.len(),
    }
}

/// The states a runs chart stacks, bottom first, with their classes.
const STATES: [(RunState, &str); 5] = [
    (RunState::Completed, "k-ok"),
    (RunState::Failed, "k-error"),
    (RunState::Incomplete, "k-error-dim"),
    (RunState::Cancelled, "k-aborted"),
    (RunState::Running, "k-running"),
];

/// Runs per state per bucket, stacked.
pub(crate) fn runs_chart(o: &Overview) -> String {
    let bars: Vec<Vec<Part<'_>>> = o
        .run_buckets
        .iter()
        .map(|b| {
            STATES
                .iter()
                .map(|(state, class)| Part {
                    class,
                    name: state.as_str(),
                    value: b.get(state).copied().unwrap_or(0),
                })
                .collect()
        })
        .collect();
    let legend: Vec<(&str, &str)> = STATES.iter().map(|(s, c)| (*c, s.as_str())).collect();
    chart::bars(
        "runs started over time, per state",
        &axis(o),
        &bars,
        &legend,
    )
}

/// One tool's calls and errors per bucket, stacked.
fn calls_chart(name: &str, o: &Overview, t: &ToolOverview) -> String {
    let bars: Vec<Vec<Part<'_>>> = t
        .buckets
        .iter()
        .map(|b| {
            vec![
                Part {
                    class: "k-calls",
                    name: "without error",
                    value: b.calls.saturating_sub(b.errors),
                },
                Part {
                    class: "k-error",
                    name: "with an error",
                    value: b.errors,
                },
            ]
        })
        .collect();
    chart::bars(
        &format!("{name}: calls and errors over time"),
        &axis(o),
        &bars,
        &[("k-calls", "calls"), ("k-error", "errors")],
    )
}

/// One tool's duration percentiles per bucket.
fn durations_chart(name: &str, o: &Overview, t: &ToolOverview) -> String {
    let line = |class, label, q| Line {
        class,
        name: label,
        values: t.buckets.iter().map(|b| b.durations.quantile(q)).collect(),
    };
    chart::lines(
        &format!("{name}: duration percentiles over time"),
        &axis(o),
        &[
            line("k-p50", "p50", 0.50),
            line("k-p95", "p95", 0.95),
            line("k-p99", "p99", 0.99),
        ],
        duration,
    )
}

/// `/tools`: the tools overview.
pub(crate) async fn tools(access: Access, Query(query): Query<RunsQuery>) -> Response {
    let filter = match query.summary_filter() {
        Ok(f) => f,
        Err(why) => return error_page(StatusCode::BAD_REQUEST, &why),
    };
    let reading = access.clone();
    let found = blocking(move || reading.overview(&filter, BUCKETS).map_err(read_error)).await;
    let o = match found {
        Ok(o) => o,
        Err(r) => return r.into_response(),
    };
    let mut body = String::new();
    body.push_str("<header class=\"panel\"><h1>Tools</h1>\n");
    form(&mut body, &query);
    summary_line(&mut body, &o);
    body.push_str("</header>\n");
    body.push_str(&render(&o));
    Html(page("reel: tools", "tools", access.stale(), &body)).into_response()
}

/// The page's body below its header, for a given overview (the snapshot
/// tests render it for a fixed archive).
pub(crate) fn render(o: &Overview) -> String {
    let mut body = String::new();
    figures_table(&mut body, o);
    for (i, (name, t)) in o.tools.iter().enumerate().take(CHARTED) {
        let _ = writeln!(
            body,
            "<section class=\"panel tool\" id=\"tool-{i}\" aria-label=\"{n}\"><h2 class=\"mono\">{n}</h2>\
             <div class=\"charts\">{}{}</div></section>",
            calls_chart(name, o, t),
            durations_chart(name, o, t),
            n = escape(name),
        );
    }
    if o.tools.len() > CHARTED {
        let _ = writeln!(
            body,
            "<p class=\"muted\">Charts of the first {CHARTED} tools only: narrow the runs \
             (tenant, status, time) to chart others.</p>"
        );
    }
    body
}

fn form(body: &mut String, query: &RunsQuery) {
    body.push_str(
        "<form class=\"filters\" method=\"get\" action=\"/tools\" role=\"search\">\
         <label>status <select name=\"status\"><option value=\"\">any</option>",
    );
    let chosen = query.value("status");
    for s in RunState::ALL {
        let selected = if chosen.as_deref() == Some(s.as_str()) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{}</option>", s.as_str());
    }
    body.push_str("</select></label>");
    for (name, hint) in [
        ("tenant", ""),
        ("since", "2h, 2026-11-30, RFC 3339"),
        ("until", "2026-12-01T08:00:00Z"),
    ] {
        let _ = write!(
            body,
            " <label>{name} <input name=\"{name}\" value=\"{}\"{}></label>",
            escape(&query.value(name).unwrap_or_default()),
            if hint.is_empty() {
                String::new()
            } else {
                format!(" placeholder=\"{hint}\"")
            }
        );
    }
    body.push_str(" <button>Show</button> <a href=\"/tools\">clear</a></form>");
}

fn summary_line(body: &mut String, o: &Overview) {
    let _ = write!(
        body,
        "<p id=\"window\" class=\"muted\" data-runs=\"{}\" data-from-facts=\"{}\">{} runs",
        o.runs, o.from_facts, o.runs
    );
    if o.runs > 0 {
        let _ = write!(
            body,
            " started {} → {}",
            escape(&timestamp(o.since)),
            escape(&timestamp(o.until))
        );
    }
    if o.from_facts > 0 {
        let _ = write!(
            body,
            " · {} without a stored summary, read from their facts",
            o.from_facts
        );
    }
    if o.unreadable > 0 {
        let _ = write!(
            body,
            " · <span class=\"bad\">{} left out: their facts could not be read (run <code>reel verify</code>)</span>",
            o.unreadable
        );
    }
    body.push_str("</p>");
}

fn figures_table(body: &mut String, o: &Overview) {
    body.push_str("<section id=\"tools\" class=\"panel\" aria-label=\"tools\">\n");
    if o.tools.is_empty() {
        body.push_str("<p class=\"muted\">No tool was called in these runs.</p></section>\n");
        return;
    }
    body.push_str(
        "<div class=\"table-wrap\"><table class=\"runs tools\"><thead><tr>\
         <th scope=\"col\">tool</th><th scope=\"col\" class=\"num\">calls</th>\
         <th scope=\"col\" class=\"num\">errors</th><th scope=\"col\" class=\"num\">error rate</th>\
         <th scope=\"col\" class=\"num\">p50</th><th scope=\"col\" class=\"num\">p95</th>\
         <th scope=\"col\" class=\"num\">p99</th><th scope=\"col\" class=\"num\">progress/call</th>\
         </tr></thead><tbody>\n",
    );
    let ns = |v: Option<u64>| v.map_or_else(|| "–".to_owned(), duration);
    for (i, (name, t)) in o.tools.iter().enumerate() {
        let t = &t.total;
        let name_cell = if i < CHARTED {
            format!("<a class=\"mono\" href=\"#tool-{i}\">{}</a>", escape(name))
        } else {
            format!("<span class=\"mono\">{}</span>", escape(name))
        };
        let _ = writeln!(
            body,
            "<tr class=\"tool\" data-tool=\"{n}\" data-calls=\"{}\" data-errors=\"{}\" \
             data-progress=\"{}\" data-p50=\"{}\" data-p95=\"{}\" data-p99=\"{}\">\
             <td>{name_cell}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{:.1}%</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{:.1}</td></tr>",
            t.calls,
            t.errors,
            t.progress,
            t.durations.quantile(0.50).unwrap_or(0),
            t.durations.quantile(0.95).unwrap_or(0),
            t.durations.quantile(0.99).unwrap_or(0),
            t.calls,
            t.errors,
            t.error_rate() * 100.0,
            ns(t.durations.quantile(0.50)),
            ns(t.durations.quantile(0.95)),
            ns(t.durations.quantile(0.99)),
            t.progress_per_call(),
            n = escape(name),
        );
    }
    body.push_str("</tbody></table></div></section>\n");
}
