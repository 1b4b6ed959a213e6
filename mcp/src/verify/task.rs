//! `verify` of a call that became a task (SEP-2663): the live server
//! answers the `tools/call` with a task of its own, which is followed to
//! its end as the record's was, and its end compared with the recorded
//! one.
//!
//! Following it: `tasks/get` polled at the interval the live task asks
//! (`pollIntervalMs`, held between 10 ms and 1 s); when a live answer is
//! `input_required` with `inputRequests`, the record's next `tasks/update`
//! is sent (its `inputResponses`, the client's recorded answers); when the
//! record sent `tasks/cancel`, it is sent after as many polls as the
//! record made before it. A terminal status ends it as the proxy ends a
//! task's call: `completed` with the inlined result (a tool error as one),
//! `failed` with the inlined error, `cancelled` cancelled. A task that
//! has not ended after four times the record's polls and 50 more ends
//! the check with an error saying so (a server that never ends its task
//! cannot hang `verify`).

use std::collections::VecDeque;
use std::time::Duration;

use reel::fact::CallOutcome;
use serde_json::{json, Map, Value};

use super::{answer_plain, outcome_of, LineClient};
use crate::cassette::session::Interaction;
use crate::proxy::{CLIENT_CANCELLED, SERVER_CANCELLED, TASK_CANCEL, TASK_GET, TASK_UPDATE};

/// The live task's id, when `response` to recorded `call` created one
/// and the recorded call became a task too.
pub(super) fn created(call: &Interaction, response: &Result<Value, Value>) -> Option<String> {
    let result = response.as_ref().ok()?;
    if call.task.is_empty() || result.get("resultType").and_then(Value::as_str) != Some("task") {
        return None;
    }
    result
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// How long to wait before the next poll, as `answer` asks.
fn interval(answer: &Value) -> Duration {
    let ms = answer
        .get("pollIntervalMs")
        .and_then(Value::as_u64)
        .unwrap_or(100);
    Duration::from_millis(ms.clamp(10, 1000))
}

/// Follows live task `task_id` (created by `created`, the `tools/call`'s
/// answer) as the record followed recorded `call`'s, with the requests'
/// `_meta` `meta`: its end as the call's outcome.
pub(super) async fn follow(
    client: &mut LineClient,
    call: &Interaction,
    meta: &Map<String, Value>,
    task_id: &str,
    created: &Value,
) -> std::io::Result<CallOutcome> {
    let recorded_polls = call.task.iter().filter(|(s, _)| s == TASK_GET).count();
    let mut updates: VecDeque<Value> = call
        .task
        .iter()
        .filter(|(s, _)| s == TASK_UPDATE)
        .map(|(_, v)| {
            v.pointer("/request/inputResponses")
                .cloned()
                .unwrap_or_else(|| json!({}))
        })
        .collect();
    let cancel_after = call
        .task
        .iter()
        .position(|(s, _)| s == TASK_CANCEL)
        .map(|at| {
            call.task[..at]
                .iter()
                .filter(|(s, _)| s == TASK_GET)
                .count()
        });
    let limit = recorded_polls * 4 + 50;
    let mut plain = |m: &str, _: &Value| answer_plain(m);
    let params = |extra: Value| {
        let mut p = json!({ "taskId": task_id, "_meta": meta });
        if let (Some(p), Value::Object(extra)) = (p.as_object_mut(), extra) {
            p.extend(extra);
        }
        p
    };
    let mut last = created.clone();
    let mut cancel_sent = false;
    for polls in 0..=limit {
        let asks = last
            .get("inputRequests")
            .and_then(Value::as_object)
            .is_some_and(|r| !r.is_empty());
        if last.get("status").and_then(Value::as_str) == Some("input_required") && asks {
            if let Some(responses) = updates.pop_front() {
                let update = params(json!({ "inputResponses": responses }));
                // Its ack is not compared: the task's end says what followed.
                let _ = client.request("tasks/update", update, &mut plain).await?;
            }
        }
        if cancel_after.is_some_and(|n| polls >= n) && !cancel_sent {
            cancel_sent = true;
            let _ = client
                .request("tasks/cancel", params(json!({})), &mut plain)
                .await?;
        }
        if polls == limit {
            break;
        }
        tokio::time::sleep(interval(&last)).await;
        let (response, _) = client
            .request("tasks/get", params(json!({})), &mut plain)
            .await?;
        let answer = match response {
            Ok(answer) => answer,
            Err(error) => return Ok(outcome_of(&Err(error))),
        };
        match answer.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let result = answer.get("result").cloned().unwrap_or(Value::Null);
                return Ok(outcome_of(&Ok(result)));
            }
            Some("failed") => {
                let error = answer.get("error").cloned().unwrap_or_else(
                    || json!({"code": -32603, "message": "the task failed with no error inlined"}),
                );
                return Ok(outcome_of(&Err(error)));
            }
            Some("cancelled") => {
                let why = if cancel_sent {
                    CLIENT_CANCELLED
                } else {
                    SERVER_CANCELLED
                };
                return Ok(CallOutcome::Aborted {
                    reason: Some(why.to_owned()),
                });
            }
            _ => last = answer,
        }
    }
    Ok(CallOutcome::Error {
        error: format!(
            "task {task_id} had not ended after {limit} polls of tasks/get (the record's ended \
             after {recorded_polls})"
        ),
        result: None,
    })
}
