//! What a mock did, for `reel mcp mock --report FILE`: the tools the
//! record offers and which were called, the calls served, missed and
//! refused.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use rmcp::model::ErrorData;

use super::{Cassette, Interaction, Session};
use reel::lock::lock;

/// What the mock did until now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The tools the recorded `tools/list` pages offer, sorted.
    pub tools_discovered: Vec<String>,
    /// Those a client called and was answered from the record.
    pub tools_covered: Vec<String>,
    /// Those never answered.
    pub tools_uncovered: Vec<String>,
    /// `tools/call`s answered from the record (rounds after the first not
    /// counted again).
    pub calls_served: u64,
    /// `tools/call`s no recorded call matched, and `tasks/update`s whose
    /// answers were not the recorded ones (answered with an error).
    pub calls_missed: u64,
    /// `tools/call`s whose client closed the response stream before their
    /// answer (a 2026-07-28 cancellation): the replay stopped sending.
    pub calls_cancelled: u64,
    /// `resources/read`s and `prompts/get`s answered from the record.
    pub reads_served: u64,
    /// `resources/read`s and `prompts/get`s the record holds no answer
    /// to (answered with an error): misses, as `calls_missed`.
    pub reads_missed: u64,
    /// Requests refused before serving (HTTP: a batch, headers that
    /// disagree with the body).
    pub requests_refused: u64,
    /// Recorded calls no client asked for.
    pub recorded_calls_unused: usize,
}

/// The counts behind a [`Report`].
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) covered: BTreeSet<String>,
    pub(crate) served: u64,
    pub(crate) missed: u64,
    pub(crate) cancelled: u64,
    pub(crate) reads_served: u64,
    pub(crate) reads_missed: u64,
    pub(crate) refused: u64,
}

impl Report {
    /// Requests the record held no answer to: `tools/call`s,
    /// `resources/read`s and `prompts/get`s (the mock exits 1 on any).
    pub fn missed(&self) -> u64 {
        self.calls_missed + self.reads_missed
    }

    /// The report as lines of text.
    pub fn text(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        format!(
            "tools discovered: {} ({})\ntools covered: {} ({})\ntools uncovered: {} ({})\n\
             calls served: {}\ncalls missed: {}\ncalls cancelled: {}\nreads served: {}\nreads missed: {}\n\
             requests refused: {}\nrecorded calls unused: {}\n",
            self.tools_discovered.len(),
            list(&self.tools_discovered),
            self.tools_covered.len(),
            list(&self.tools_covered),
            self.tools_uncovered.len(),
            list(&self.tools_uncovered),
            self.calls_served,
            self.calls_missed,
            self.calls_cancelled,
            self.reads_served,
            self.reads_missed,
            self.requests_refused,
            self.recorded_calls_unused,
        )
    }
}

/// The tool names the recorded listings offer.
fn discovered(session: &Session) -> BTreeSet<String> {
    let pages = session
        .tools_list_pages
        .iter()
        .map(|(_, page)| page)
        .chain(session.tools_list.as_ref());
    pages
        .filter_map(|page| page.get("tools").and_then(Value::as_array))
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

impl Cassette {
    /// What the mock did until now.
    pub fn report(&self) -> Report {
        let tally = lock(&self.tally);
        let tools = discovered(&self.session);
        let covered: Vec<String> = tally.covered.iter().cloned().collect();
        Report {
            tools_uncovered: tools.difference(&tally.covered).cloned().collect(),
            tools_discovered: tools.into_iter().collect(),
            tools_covered: covered,
            calls_served: tally.served,
            calls_missed: tally.missed,
            calls_cancelled: tally.cancelled,
            reads_served: tally.reads_served,
            reads_missed: tally.reads_missed,
            requests_refused: tally.refused,
            recorded_calls_unused: lock(&self.used).iter().filter(|u| !**u).count(),
        }
    }

    /// The client closed the response stream of recorded call `call`'s
    /// replay (a cancellation, on 2026-07-28) before its message `at`:
    /// the replay stops sending there, counted and said; the error is for
    /// no one (the stream is gone).
    pub(crate) fn stream_closed(&self, call: &Interaction, at: usize) -> ErrorData {
        lock(&self.tally).cancelled += 1;
        tracing::warn!(
            "the client closed its response stream: the replay of call {} ({}) stopped \
             after {at} of its {} recorded messages",
            call.call_id,
            call.tool,
            call.events.len()
        );
        ErrorData::internal_error("reel mock: the client closed its response stream", None)
    }

    /// Counts a request refused before serving.
    pub(crate) fn refused(&self) {
        lock(&self.tally).refused += 1;
    }
}
