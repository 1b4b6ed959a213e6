//! The pages: server-rendered HTML, every recorded string through the
//! viewer's `escape`; the runs table (`table.rs`), a run, its tape, the event stream and
//! the two embedded assets.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, Query};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use reel::{Fact, RunRecord, RunState};
use reel_archive::{Cursor, RunFilter};
use reel_viewer::render::html::{escape, fragment, sections, STYLE};
use reel_viewer::render::text::{duration, timestamp, TextRenderer};
use reel_viewer::timeline::{Timeline, TimelineBuilder};

use crate::source::{Access, Admitted, FactItem, ReadError};
use crate::FACTS_PER_PAGE;

mod table;
pub(crate) use table::runs;

/// The console's script: live updates, the filter inside a run, deep
/// links. It writes recorded data only with `textContent`.
const SCRIPT: &str = include_str!("assets/console.js");
/// The console's own styles, served after the viewer's.
const CONSOLE_STYLE: &str = include_str!("assets/console.css");
/// Runs per page of the runs table.
const RUNS_PER_PAGE: usize = 50;
/// Past this many facts, a run's first look reads only its page.
const BIG_RUN_FACTS: u64 = 50_000;

pub(crate) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

pub(crate) async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        format!("{STYLE}\n{CONSOLE_STYLE}"),
    )
        .into_response()
}

/// The page around `body`: the stylesheet, the script, nothing inline.
fn page(title: &str, kind: &str, stale: Option<String>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<link rel=\"stylesheet\" href=\"/assets/console.css\">\n\
         <script src=\"/assets/console.js\" defer></script>\n</head>\n\
         <body data-page=\"{kind}\">\n<nav class=\"top\"><a href=\"/\">reel</a> \
         <span class=\"muted\">console · read-only</span></nav>\n",
        escape(title)
    );
    if let Some(stale) = stale {
        let _ = writeln!(
            out,
            "<p class=\"stale\" role=\"status\">{}</p>",
            escape(&stale)
        );
    }
    out.push_str(body);
    out.push_str("\n</body>\n</html>\n");
    out
}

fn error_page(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<main class=\"panel\"><h1>{}</h1><p>{}</p><p><a href=\"/\">All runs</a></p></main>",
        status.as_u16(),
        escape(message)
    );
    (status, Html(page("reel: error", "error", None, &body))).into_response()
}

/// Why a request failed: its status and what to say.
struct Failed(StatusCode, String);

impl IntoResponse for Failed {
    fn into_response(self) -> Response {
        error_page(self.0, &self.1)
    }
}

/// Runs blocking archive reads off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failed> + Send + 'static,
) -> Result<T, Failed> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(Failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request failed: {e}"),
        ))
    })
}

fn read_error(e: ReadError) -> Failed {
    match e {
        ReadError::UnknownRun(m) => Failed(StatusCode::NOT_FOUND, m),
        ReadError::BadRequest(m) => Failed(StatusCode::BAD_REQUEST, m),
        ReadError::Other(m) => Failed(StatusCode::INTERNAL_SERVER_ERROR, m),
    }
}

fn state_class(state: RunState) -> &'static str {
    match state {
        RunState::Completed => "st-ok",
        RunState::Running => "st-running",
        RunState::Cancelled => "st-aborted",
        _ => "st-error",
    }
}

fn run_href(run_id: &str) -> String {
    format!("/runs/{}", fragment(run_id))
}

fn took(r: &RunRecord) -> String {
    match (r.duration_ns(), r.state) {
        (Some(d), _) => duration(d),
        (None, RunState::Running) => "running".into(),
        (None, _) => "never ended".into(),
    }
}

/// A run page's query.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RunQuery {
    /// The first seq listed (rounded down to a page boundary).
    from: Option<u64>,
}

/// `/runs/{id}`: the run's header, anomalies and waterfall (the viewer's),
/// one page of its facts, its ledgers.
pub(crate) async fn run(
    access: Access,
    Path(run_id): Path<String>,
    Query(query): Query<RunQuery>,
) -> Response {
    let from = query.from.unwrap_or(0) / FACTS_PER_PAGE * FACTS_PER_PAGE;
    let reading = access.clone();
    let rendered = blocking(move || {
        let record = reading.run(&run_id).map_err(read_error)?;
        let cached = reading.timeline(&record);
        let (title, body, timeline) =
            render_run(&reading, &record, from, cached).map_err(read_error)?;
        // A closed run's timeline no longer changes: later pages read only
        // their own facts.
        if let Some(timeline) = timeline {
            reading.keep_timeline(&record, timeline);
        }
        Ok((title, body))
    })
    .await;
    match rendered {
        Ok((title, body)) => Html(page(&title, "run", access.stale(), &body)).into_response(),
        Err(r) => r.into_response(),
    }
}

/// The run's page body: the whole run folds into the timeline (the
/// waterfall describes all of it), unless `cached` holds it already; facts
/// `from..from + FACTS_PER_PAGE` are listed.
fn render_run(
    reader: &Access,
    record: &Admitted,
    from: u64,
    cached: Option<Arc<Timeline>>,
) -> Result<(String, String, Option<Arc<Timeline>>), ReadError> {
    let text = TextRenderer::new(false);
    let until = from + FACTS_PER_PAGE;
    let partial = cached.is_none() && record.facts > BIG_RUN_FACTS;
    let mut list = String::new();
    let mut listed = 0u64;
    let mut gaps = Vec::new();
    let timeline = match cached {
        Some(timeline) => {
            reader.facts(record, from, Some(until), |item| match item {
                FactItem::Fact(fact) => {
                    let tool = fact
                        .call
                        .as_deref()
                        .and_then(|c| timeline.call(c))
                        .map_or("", |c| c.tool.as_str());
                    fact_item(&mut list, &fact, tool, &text.detail_text(&fact, tool));
                    listed += 1;
                }
                FactItem::Gap(gap) => gaps.push(gap),
            })?;
            timeline
        }
        None => {
            // A partial read builds as a live run is built: what its page
            // does not show (a call's end) is not an anomaly.
            let mut builder = if partial {
                TimelineBuilder::for_record(&RunRecord {
                    state: RunState::Running,
                    ..(**record).clone()
                })
            } else {
                TimelineBuilder::for_record(record)
            };
            // A big run's first look reads its page only (the archive
            // pages by seq); the whole run's timeline is built beside it
            // for the next look.
            let (start, end) = if partial {
                reader.build_timeline_later(record);
                (from, Some(until))
            } else {
                (0, None)
            };
            reader.facts(record, start, end, |item| match item {
                FactItem::Fact(fact) => {
                    builder.push(&fact);
                    if (from..until).contains(&fact.seq) {
                        let tool = fact
                            .call
                            .as_deref()
                            .and_then(|c| builder.call_info(c))
                            .map_or("", |(t, _)| t)
                            .to_owned();
                        fact_item(&mut list, &fact, &tool, &text.detail_text(&fact, &tool));
                        listed += 1;
                    }
                }
                FactItem::Gap(gap) => {
                    builder.push_gap(&gap);
                    gaps.push(gap);
                }
            })?;
            Arc::new(builder.finish())
        }
    };
    let mut body = String::new();
    sections::header(&mut body, record, &timeline, listed);
    if partial {
        let _ = writeln!(
            body,
            "<p id=\"partial\" class=\"stale\" role=\"status\">This run has {} facts: the waterfall, \
             anomalies and ledgers below are those of facts {from}–{} only. The whole run's are \
             being read: reload in a moment.</p>",
            record.facts,
            until.min(record.facts) - 1
        );
    }
    // The run's facts (a partial timeline knows its page's only).
    let total = timeline.facts.max(record.facts);
    let id = fragment(&record.run_id);
    let _ = writeln!(
        body,
        "<p class=\"actions\"><a href=\"/runs/{}/tape\" download>Download tape</a> \
         <span class=\"muted\">· <code>reel show {}</code></span></p>",
        escape(&id),
        escape(&record.run_id)
    );
    sections::anomalies(&mut body, &timeline);
    sections::waterfall(&mut body, &timeline);
    // The facts: a filter, the pager, the list.
    let _ = write!(
        body,
        "<section id=\"facts\" class=\"panel\" data-from=\"{from}\" data-per-page=\"{FACTS_PER_PAGE}\" \
         data-total=\"{}\"><h2>Facts {}–{} of {}</h2>\n<div class=\"filters\">\
         <label>kind <select id=\"kind-filter\"><option value=\"\">any</option>",
        total,
        if listed == 0 { 0 } else { from },
        if listed == 0 { 0 } else { from + listed - 1 },
        total
    );
    for kind in timeline.kinds.keys() {
        let _ = write!(body, "<option>{}</option>", escape(kind));
    }
    body.push_str(
        "</select></label> <label>text <input id=\"text-filter\" type=\"search\" \
         placeholder=\"tool, call, message…\"></label> \
         <span id=\"call-filter\" class=\"tag\" hidden></span> \
         <button id=\"clear-filter\" type=\"button\">clear</button> \
         <span id=\"filter-count\" class=\"muted\"></span></div>\n",
    );
    let pager = pager(&id, from, total);
    body.push_str(&pager);
    for gap in &gaps {
        let _ = writeln!(body, "<p class=\"bad\">⚠ {}</p>", escape(&gap.to_string()));
    }
    body.push_str("<ol class=\"fact-list\">\n");
    body.push_str(&list);
    body.push_str("</ol>\n");
    body.push_str(&pager);
    body.push_str("</section>\n");
    sections::ledgers(&mut body, &timeline);
    // A partial timeline is never kept as the run's.
    let whole = (!partial).then_some(timeline);
    Ok((format!("reel: {}", record.describe()), body, whole))
}

fn pager(id: &str, from: u64, total: u64) -> String {
    let mut out = String::from("<p class=\"pager\">");
    if from > 0 {
        let _ = write!(
            out,
            "<a class=\"prev\" href=\"/runs/{}?from={}\">← facts {}–{}</a> ",
            escape(id),
            from - FACTS_PER_PAGE,
            from - FACTS_PER_PAGE,
            from - 1
        );
    }
    if from + FACTS_PER_PAGE < total {
        let next = from + FACTS_PER_PAGE;
        let _ = write!(
            out,
            "<a class=\"next\" href=\"/runs/{}?from={next}\">facts {next}–{} →</a>",
            escape(id),
            (next + FACTS_PER_PAGE).min(total) - 1
        );
    }
    out.push_str("</p>\n");
    out
}

/// One fact: its anchor (`seq-N`, the CLI's seq), its line as `reel show`
/// words it, and the inspector (fields and raw JSON).
fn fact_item(out: &mut String, fact: &Fact, tool: &str, line: &str) {
    let json = serde_json::to_value(fact).unwrap_or_default();
    let kind = json["kind"].as_str().unwrap_or("").to_owned();
    let call = fact.call.as_deref().unwrap_or("");
    let _ = write!(
        out,
        "<li class=\"fact\" id=\"seq-{seq}\" data-seq=\"{seq}\" data-kind=\"{k}\" data-call=\"{c}\">\
         <div class=\"fact-head\"><a class=\"mono anchor\" href=\"#seq-{seq}\">#{seq}</a> \
         <span class=\"mono muted\">+{t}</span> <span class=\"kind\">{k}</span> ",
        seq = fact.seq,
        k = escape(&kind),
        c = escape(call),
        t = escape(&duration(fact.offset)),
    );
    if !call.is_empty() {
        let _ = write!(
            out,
            "<span class=\"mono\">{}</span> <b>{}</b> ",
            escape(call),
            escape(tool)
        );
    }
    let _ = write!(
        out,
        "<span class=\"fact-line\">{}</span></div><details class=\"inspect\"><summary>fields</summary>\
         <table class=\"fields\"><tr><th>seq</th><td>{}</td></tr><tr><th>at</th><td>{}</td></tr>\
         <tr><th>offset</th><td>+{}</td></tr><tr><th>kind</th><td>{}</td></tr>",
        escape(line),
        fact.seq,
        escape(&timestamp(fact.at)),
        escape(&duration(fact.offset)),
        escape(&kind),
    );
    if !call.is_empty() {
        let _ = write!(
            out,
            "<tr><th>call</th><td class=\"mono\">{}</td></tr>",
            escape(call)
        );
    }
    let fields: BTreeMap<String, serde_json::Value> = match &json["data"] {
        serde_json::Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => BTreeMap::new(),
    };
    for (name, value) in &fields {
        let shown = match value {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let _ = write!(
            out,
            "<tr><th>{}</th><td class=\"mono\">{}</td></tr>",
            escape(name),
            escape(&shown)
        );
    }
    let raw = serde_json::to_string_pretty(&json).unwrap_or_default();
    let _ = writeln!(
        out,
        "</table><pre class=\"raw\">{}</pre></details></li>",
        escape(&raw)
    );
}

/// `/runs/{id}/tape`: the run as a tape (JSON Lines), as `reel export`
/// writes it.
pub(crate) async fn tape(access: Access, Path(run_id): Path<String>) -> Response {
    let id = run_id.clone();
    let written = blocking(move || {
        let record = access.run(&id).map_err(read_error)?;
        let tape = access.tape(&record).map_err(read_error)?;
        let mut out = Vec::new();
        tape.write(&mut out).map_err(|e| {
            Failed(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("writing the tape failed: {e}"),
            )
        })?;
        Ok(out)
    })
    .await;
    match written {
        Ok(bytes) => {
            // A file name of the id's safe characters only.
            let name: String = run_id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            (
                [
                    (header::CONTENT_TYPE, "application/x-ndjson".to_owned()),
                    (
                        header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{name}.tape.jsonl\""),
                    ),
                ],
                bytes,
            )
                .into_response()
        }
        Err(r) => r.into_response(),
    }
}

/// `/events`: a `runs` event each time the archive was opened again (new
/// or changed runs); for a tenant-limited grant, only when that tenant's
/// newest runs changed.
pub(crate) async fn events(access: Access) -> Response {
    let rx = access.subscribe();
    let seen = match access.tenant() {
        None => None,
        Some(_) => {
            let a = access.clone();
            tokio::task::spawn_blocking(move || a.signature())
                .await
                .ok()
        }
    };
    let stream = futures::stream::unfold(
        (rx, access, seen),
        |(mut rx, access, mut seen)| async move {
            loop {
                rx.changed().await.ok()?;
                let generation = *rx.borrow_and_update();
                if let Some(before) = &seen {
                    let a = access.clone();
                    let now = tokio::task::spawn_blocking(move || a.signature())
                        .await
                        .ok()?;
                    if &now == before {
                        continue;
                    }
                    seen = Some(now);
                }
                return Some((
                    Ok::<_, Infallible>(
                        Event::default().event("runs").data(generation.to_string()),
                    ),
                    (rx, access, seen),
                ));
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
