//! Tasks of the mock (SEP-2663): a recorded `tools/call` that became a
//! task (its `call.output` at stage `mcp:task`, as the proxy files it:
//! `crate::proxy::TASK_CREATED`) is answered with the recorded
//! `CreateTaskResult`, and each `tasks/get` naming its `taskId` with the
//! next recorded `tasks/get` answer, poll by poll, the last one repeated
//! once the record has no more; a `completed` answer inlines the call's
//! recorded result. A `tasks/update` of a task it served is checked
//! against the record: its `inputResponses` (the client's answers to the
//! task's questions) must equal those of the task's next recorded
//! `tasks/update` (a recorded value that was redacted equals no live
//! one); one that differs, or comes when the record has no more, is a
//! miss (`-32602` naming the first differing field as a JSON pointer into
//! `inputResponses`, counted with the calls missed). A
//! `tasks/cancel` of a task it served is acknowledged (the record's
//! statuses already say what followed); a task id it did not serve is
//! `-32602`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reel::fact::CallOutcome;
use reel::lock::lock;
use rmcp::model::{
    CallToolResponse, CreateTaskResult, ErrorData, GetTaskResult, ServerCapabilities,
    TASKS_EXTENSION_ID,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::{Cassette, Session};
use crate::proxy::{TASK_CREATED, TASK_GET, TASK_UPDATE};

/// The tasks the mock served, by task id.
pub(super) type Served = Arc<Mutex<HashMap<String, Task>>>;

/// A task the mock served.
pub(super) struct Task {
    /// The recorded call's index.
    index: usize,
    /// How many `tasks/get` it answered.
    polled: usize,
    /// How many `tasks/update` it took.
    updated: usize,
}

/// What a session opened without `initialize` serves: what its
/// `server/discover` said (tools only when it has none), with the tasks
/// extension when a recorded call became a task (a client's tasks/get is
/// refused by a server that does not declare it).
pub(super) fn capabilities(session: &Session) -> ServerCapabilities {
    let said = session.discover_result.as_ref();
    let said = said.and_then(|d| serde_json::from_value(d["capabilities"].clone()).ok());
    let mut caps: ServerCapabilities =
        said.unwrap_or_else(|| ServerCapabilities::builder().enable_tools().build());
    if session.calls.iter().any(|c| !c.task.is_empty()) && !caps.supports_tasks() {
        caps.extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), Default::default());
    }
    caps
}

fn unknown(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("reel mock: no task {task_id:?} was served (a recorded tools/call creates it)"),
        None,
    )
}

fn unreadable(call: &str, what: &str, e: serde_json::Error) -> ErrorData {
    ErrorData::internal_error(
        format!("reel mock: call {call} recorded a {what} that does not read: {e}"),
        None,
    )
}

impl Cassette {
    /// Recorded call `index`'s `CreateTaskResult` as the answer to
    /// `context`'s `tools/call`, when the call became a task; its task is
    /// served from now on.
    pub(super) fn task_created(
        &self,
        index: usize,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let call = &self.session.calls[index];
        let (_, created) = call.task.iter().find(|(s, _)| s == TASK_CREATED)?;
        let result = created.get("result")?;
        Some(
            serde_json::from_value::<CreateTaskResult>(result.clone())
                .map(|typed| {
                    let task = Task {
                        index,
                        polled: 0,
                        updated: 0,
                    };
                    lock(&self.tasks).insert(typed.task.task_id.clone(), task);
                    self.exactly(context, result);
                    CallToolResponse::Task(typed)
                })
                .map_err(|e| unreadable(&call.call_id, "task", e)),
        )
    }

    /// The next recorded `tasks/get` answer of task `task_id`.
    pub(super) fn poll(
        &self,
        task_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let (index, n) = {
            let mut tasks = lock(&self.tasks);
            let task = tasks.get_mut(task_id).ok_or_else(|| unknown(task_id))?;
            task.polled += 1;
            (task.index, task.polled - 1)
        };
        let call = &self.session.calls[index];
        let polls: Vec<&Value> = call
            .task
            .iter()
            .filter(|(s, _)| s == TASK_GET)
            .map(|(_, v)| v)
            .collect();
        let Some(recorded) = polls.get(n).or(polls.last()) else {
            return Err(ErrorData::internal_error(
                format!(
                    "reel mock: call {} recorded no tasks/get answer",
                    call.call_id
                ),
                None,
            ));
        };
        if let Some(error) = recorded.get("error") {
            return Err(super::recorded::error_data(error));
        }
        let mut answer = recorded.get("result").cloned().unwrap_or(Value::Null);
        if answer.get("status").and_then(Value::as_str) == Some("completed") {
            let inlined = match &call.outcome {
                Some(CallOutcome::Ok { result }) => Some(result.clone()),
                // A tool error; a JSON-RPC error ends a task `failed`.
                Some(CallOutcome::Error { error, result }) => result
                    .clone()
                    .filter(|_| !error.starts_with(crate::outcome::RPC_ERROR))
                    .or_else(|| crate::outcome::parse_tool_error(error)),
                _ => None,
            };
            if let (Some(result), Some(a)) = (inlined, answer.as_object_mut()) {
                a.insert("result".into(), result);
            }
        }
        let typed = serde_json::from_value::<GetTaskResult>(answer.clone())
            .map_err(|e| unreadable(&call.call_id, "tasks/get answer", e))?;
        self.exactly(context, &answer);
        Ok(typed)
    }

    /// A `tasks/update` of task `task_id` with `responses` (its
    /// `inputResponses`): acknowledged when they are the task's next
    /// recorded ones, else a miss.
    pub(super) fn task_update(&self, task_id: &str, responses: &Value) -> Result<(), ErrorData> {
        let (index, n) = {
            let mut tasks = lock(&self.tasks);
            let task = tasks.get_mut(task_id).ok_or_else(|| unknown(task_id))?;
            task.updated += 1;
            (task.index, task.updated - 1)
        };
        let call = &self.session.calls[index];
        let recorded = call
            .task
            .iter()
            .filter(|(s, _)| s == TASK_UPDATE)
            .nth(n)
            .map(|(_, v)| v.pointer("/request/inputResponses").unwrap_or(&Value::Null));
        let why = match recorded {
            None => format!(
                "call {} recorded {n} tasks/update, this is one more",
                call.call_id
            ),
            Some(recorded) => {
                let diff = crate::cassette::matching::diff_args(recorded, responses, &[]);
                let Some(first) = diff.first() else {
                    return Ok(());
                };
                format!(
                    "its inputResponses differ from those of call {}'s tasks/update #{}: first difference {first}",
                    call.call_id,
                    n + 1
                )
            }
        };
        lock(&self.tally).missed += 1;
        let message =
            format!("reel mock: tasks/update of task {task_id:?} matches no record: {why}");
        tracing::warn!("{}", message.trim_start_matches("reel "));
        Err(ErrorData::invalid_params(message, None))
    }

    /// `tasks/cancel` of task `task_id`: acknowledged when the mock served
    /// it.
    pub(super) fn task_ack(&self, task_id: &str) -> Result<(), ErrorData> {
        match lock(&self.tasks).contains_key(task_id) {
            true => Ok(()),
            false => Err(unknown(task_id)),
        }
    }
}
