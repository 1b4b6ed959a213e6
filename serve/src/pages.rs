//! The pages: server-rendered HTML, every recorded string through the
//! viewer's `escape`; the runs table (`table.rs`), a run (`run.rs`: its
//! waterfall, lanes (`lanes.rs`), facts (`fact.rs`) and live updates
//! (`follow.rs`)), its artifacts (`artifact.rs`), two runs compared
//! (`compare.rs`), replay reports (`replay.rs`), a proxy recording's wire
//! view (`wire.rs`), its tape, the event stream and the embedded assets;
//! the tools overview (`tools.rs`) and the charts it and the runs table
//! draw (`chart.rs`, inline SVG).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, Query};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use reel_archive::{Cursor, RunFilter};
use reel_core::{Fact, RunRecord, RunState};
use reel_viewer::render::html::{escape, fragment, sections, STYLE};
use reel_viewer::render::text::{duration, timestamp, Color, TextRenderer};
use reel_viewer::timeline::{Timeline, TimelineBuilder};

use crate::source::{Access, Admitted, ReadError};
use crate::FACTS_PER_PAGE;

mod artifact;
mod chart;
mod compare;
mod fact;
mod follow;
mod lanes;
mod replay;
mod run;
mod table;
mod tools;
mod wire;
pub(crate) use artifact::{artifact, artifact_raw};
pub(crate) use compare::compare;
pub(crate) use follow::run_events;
pub(crate) use replay::{report, reports};
pub(crate) use run::run;
pub(crate) use table::runs;
pub(crate) use tools::tools;
pub(crate) use wire::wire;

/// The console's script: live updates of the runs table
/// (`console.js`), then a run's page (`run.js`: the filter, collapse and
/// focus, deep links, the copy buttons, live updates). One file served,
/// so a page loads one script; it writes recorded data only with
/// `textContent`.
const SCRIPT: &str = concat!(
    include_str!("assets/console.js"),
    "\n",
    include_str!("assets/run.js")
);
/// The console's own styles, served after the viewer's.
const CONSOLE_STYLE: &str = include_str!("assets/console.css");
/// Runs per page of the runs table.
const RUNS_PER_PAGE: usize = 50;
/// A run of more facts than this first opens with its page's facts only
/// (its whole timeline built beside it for the next look).
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

/// `/favicon.ico`: no icon, said without an error (a 404 is one in the
/// browser's console on every page).
pub(crate) async fn no_icon() -> StatusCode {
    StatusCode::NO_CONTENT
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
         <a href=\"/tools\">tools</a> <span class=\"muted\">console · read-only</span></nav>\n",
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
