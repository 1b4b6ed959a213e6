//! Spans that came after their trace's run was written, as a run of their
//! own linked to it.
//!
//! The run written first has ended, and nothing may follow `run.ended`
//! (the stream rules, as for a fact a tool files after its run ended), so
//! late spans never rewrite it nor append to it: they become the run
//! `otel-TRACEID-late-N` (`N` from 1, the next one free), which
//!
//! - begins with the first run's `run.started` (its identity, session,
//!   producer and labels) when it can be read, else one from the late
//!   spans, labelled [`LATE_OF_LABEL`] with the first run's id;
//! - says so first: a `log` fact of logger [`LATE_LOGGER`] naming the
//!   first run, the trace and each late span with its parent span id (a
//!   parent in the first run, which this run's calls cannot name);
//! - maps each span as a whole trace's are mapped, the spans whose parent
//!   is not among them at the run's top level, in span time order.

use std::collections::HashMap;

use reel::fact::{Fact, FactKind, Level, Log, RunEnded, RunStarted, RunStatus};
use serde_json::json;

use super::{merge, number, run_started, Draft, Trace, MAX_DEPTH, SOURCE_LABEL};
use crate::decode::SpanIn;

/// The label of a run of late spans: the id of the run their trace was
/// written as first.
pub const LATE_OF_LABEL: &str = "reel.late_of";

/// The logger of the `log` fact that begins a run of late spans.
pub const LATE_LOGGER: &str = "reel.late";

/// The run id of the `n`th run of a trace's late spans.
pub fn late_run_id(trace_id: &str, n: u32) -> String {
    format!("otel-{trace_id}-late-{n}")
}

/// Where late spans go, and what they came after.
#[derive(Debug, Clone)]
pub struct Late {
    /// The run the trace was written as first.
    pub of: String,
    /// The run the late spans are written as ([`late_run_id`]).
    pub run_id: String,
    /// The first run's `run.started`, when it could be read.
    pub head: Option<RunStarted>,
    /// The collector remembers the first run's span ids (they are not
    /// among these); false when it found the run in the archive only (it
    /// restarted since), so these may repeat spans the first run holds.
    pub remembered: bool,
}

/// The facts of the run of `spans`, which came after their trace was
/// written ([`Late`]); `None` when there are no spans.
pub fn map_late(mut spans: Vec<SpanIn>, late: Late) -> Option<Vec<Fact>> {
    let Late {
        of,
        run_id,
        head,
        remembered,
    } = late;
    let (of, run_id) = (of.as_str(), run_id.as_str());
    for s in &mut spans {
        s.end = s.end.max(s.start);
    }
    spans.sort_by(|a, b| (a.start, &a.span_id).cmp(&(b.start, &b.span_id)));
    let (tops, children) = forest(&spans);
    let first = *tops.first()?;
    let mut started = match head {
        Some(head) => head,
        None => run_started(&spans, first, run_id),
    };
    started.run_id = run_id.to_owned();
    started
        .labels
        .entry(SOURCE_LABEL.to_owned())
        .or_insert_with(|| "otlp".to_owned());
    started
        .labels
        .insert(LATE_OF_LABEL.to_owned(), of.to_owned());
    let start = spans[first].start;
    let trace_id = spans[first].trace_id.clone();
    let listed: Vec<_> = spans
        .iter()
        .map(|s| json!({"span_id": s.span_id, "parent_span_id": s.parent, "name": s.name}))
        .collect();
    let mut drafts = vec![
        Draft {
            at: start,
            call: None,
            kind: FactKind::RunStarted(started),
        },
        Draft {
            at: start,
            call: None,
            kind: FactKind::Log(Log {
                level: Level::Warning,
                logger: Some(LATE_LOGGER.into()),
                subflow: None,
                data: json!({
                    "message": if remembered {
                        format!(
                            "{} span(s) of trace {trace_id} came after its run {of} was \
                             written: kept here, never rewriting it (raise reel collect's \
                             --grace-ms if the exporter sends a trace's spans further apart)",
                            spans.len()
                        )
                    } else {
                        format!(
                            "{} span(s) of trace {trace_id} came when the archive held its run \
                             {of} already, written before reel collect last started: kept here, \
                             never rewriting it; some may be spans {of} holds (the collector \
                             did not remember which)",
                            spans.len()
                        )
                    },
                    "run": of,
                    "remembered": remembered,
                    "trace_id": trace_id,
                    "spans": listed,
                }),
                delivered: false,
                in_flight: Vec::new(),
            }),
        },
    ];
    let mut trace = Trace {
        spans: &spans,
        children,
        call_ids: Default::default(),
        tool_calls: Default::default(),
    };
    let groups = tops.iter().map(|&t| trace.span(t, None)).collect();
    drafts.extend(merge(groups));
    // A root among them (the first run stood in for it) gives the status.
    let failed = tops
        .iter()
        .any(|&t| spans[t].parent.is_none() && spans[t].status_code == 2);
    drafts.push(Draft {
        at: spans.iter().map(|s| s.end).max().unwrap_or(start),
        call: None,
        kind: FactKind::RunEnded(RunEnded {
            status: if failed {
                RunStatus::Failed
            } else {
                RunStatus::Completed
            },
        }),
    });
    Some(number(drafts, start))
}

/// The spans whose parent is not among `spans` (in their order), and
/// each other span's children. A span whose chain of parents does not
/// reach one of those within [`MAX_DEPTH`] (a cycle) is one of them too.
fn forest(spans: &[SpanIn]) -> (Vec<usize>, HashMap<usize, Vec<usize>>) {
    let parents = super::parents(spans);
    let parent_of = |i: usize| parents[i];
    let mut tops = Vec::new();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..spans.len() {
        let mut at = i;
        let mut reaches = false;
        for _ in 0..MAX_DEPTH {
            match parent_of(at) {
                Some(p) => at = p,
                None => {
                    reaches = true;
                    break;
                }
            }
        }
        match (reaches, parent_of(i)) {
            (true, Some(p)) => children.entry(p).or_default().push(i),
            _ => tops.push(i),
        }
    }
    (tops, children)
}
