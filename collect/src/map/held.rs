//! A trace still held, as the running run it will be written as: what
//! `reel runs` and the console list meanwhile (the live socket's held
//! runs, `LiveServer::start_holding`). Its record is the one its
//! `run.started` will give, with the calls its tool and agent spans so
//! far name; no fact of it is stored yet.

use reel::fact::{Fact, FactKind};
use reel::RunRecord;

use super::{role, run_id, run_started, tool_name, tree, Role};
use crate::decode::SpanIn;

/// The running record of a trace held as `spans` (in arrival order);
/// `None` when there are none.
pub fn held_record(spans: &[SpanIn]) -> Option<RunRecord> {
    let (root, _) = tree(spans)?;
    let id = run_id(&spans[root].trace_id);
    let started = spans.iter().map(|s| s.start).min().unwrap_or_default();
    let head = Fact {
        seq: 0,
        at: i64::try_from(started).unwrap_or(i64::MAX),
        offset: 0,
        call: None,
        kind: FactKind::RunStarted(run_started(spans, root, &id)),
    };
    let mut record = RunRecord::from_first(&head)?;
    for span in spans
        .iter()
        .filter(|s| matches!(role(s), Role::Tool | Role::Agent))
    {
        record.calls += 1;
        record.ended_calls += 1;
        record.tools.insert(tool_name(span));
    }
    Some(record)
}
