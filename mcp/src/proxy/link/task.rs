//! Tool calls that become tasks (SEP-2663, the `io.modelcontextprotocol/tasks`
//! extension): a `tools/call` answered `resultType: "task"` stays one call
//! across the `tasks/get`, `tasks/update` and `tasks/cancel` requests that
//! name its `taskId`, until a `tasks/get` answers a terminal status.
//!
//! What the call's record holds (existing fact kinds, no new one): a
//! `call.output` at stage [`TASK_CREATED`] whose value is `{"result": the
//! CreateTaskResult}`, then one `call.output` per `tasks/*` exchange at the
//! stage of its method ([`TASK_GET`], [`TASK_UPDATE`], [`TASK_CANCEL`]), its value
//! `{"request": params without _meta, "result": answer}` (or `"error"`);
//! a `tasks/get` answer's inlined `result` is not repeated there, it is
//! the call's end. `tasks/cancel` files `cancel.requested` as it comes.
//! The end: `completed` ends the call with the inlined result (a tool
//! error as one), `failed` with the inlined JSON-RPC error, `cancelled`
//! cancelled.
//!
//! A task's questions (`inputRequests` of a `tasks/get` answer, or of the
//! `CreateTaskResult`, status `input_required`) are the call's
//! elicitations, as an `elicitation/create`'s: each key's question is
//! filed (`elicit.requested`) when an answer first shows it, and the
//! client's answer to it, the value under that key of a `tasks/update`'s
//! `inputResponses`, is filed as the elicitation's answer
//! (`elicit.answered`) when the client sends it. A key is asked once per
//! task (the polls repeat it until it is answered), at most
//! [`UNANSWERED`] keys a task; a question the task ends without an answer
//! to ends unanswered. A call's facts are filed in order and its
//! elicitation waits for its answer, so the exchanges that come while a
//! question waits are filed after the answer.

use super::*;

/// Stage of the `call.output` that holds the `CreateTaskResult`.
pub const TASK_CREATED: &str = "mcp:task";
/// Stage of a `tasks/get` exchange's `call.output`.
pub const TASK_GET: &str = "mcp:tasks/get";
/// Stage of a `tasks/update` exchange's `call.output`.
pub const TASK_UPDATE: &str = "mcp:tasks/update";
/// Stage of a `tasks/cancel` exchange's `call.output`.
pub const TASK_CANCEL: &str = "mcp:tasks/cancel";

/// Why a task's call ended cancelled when the client sent `tasks/cancel`.
pub const CLIENT_CANCELLED: &str = "the client sent tasks/cancel for its task";
/// Why a task's call ended cancelled when the server cancelled it.
pub const SERVER_CANCELLED: &str = "the server cancelled the task";

/// A call that became a task, waiting for its `tasks/*` exchanges.
pub(crate) struct Tasked {
    events: mpsc::UnboundedSender<Event>,
    canceller: Canceller,
    call_id: String,
    /// The client sent `tasks/cancel` (its `cancel.requested` is filed).
    cancel_sent: bool,
    /// The `inputRequests` keys asked so far.
    asked: HashSet<String>,
    /// The questions waiting for the client's answer, by key, with where
    /// the answer goes.
    waiting: Vec<(String, oneshot::Sender<Value>)>,
}

impl Tasked {
    /// Files the questions of `answer`'s `inputRequests` not asked yet.
    fn ask(&mut self, answer: &Value) {
        let Some(Value::Object(requests)) = answer.get("inputRequests") else {
            return;
        };
        for (k, request) in requests {
            if request.get("method").and_then(Value::as_str) != Some("elicitation/create")
                || self.asked.contains(k)
            {
                continue;
            }
            if self.asked.len() >= UNANSWERED {
                // A server minting keys without end cannot grow the
                // proxy's memory: the rest are the exchanges' alone.
                tracing::warn!(
                    "call {}: its task asked {UNANSWERED} questions already; more are recorded \
                     only in its tasks/get exchanges",
                    self.call_id
                );
                return;
            }
            self.asked.insert(k.clone());
            let (tx, answer) = oneshot::channel();
            self.waiting.push((k.clone(), tx));
            let _ = self.events.send(Event::Elicit {
                question: question_of(request.get("params")),
                answer,
            });
        }
    }

    /// Hands the client's `inputResponses` to the questions waiting for
    /// them.
    fn answer(&mut self, responses: Option<&Value>) {
        let Some(Value::Object(responses)) = responses else {
            return;
        };
        for (k, response) in responses {
            if let Some(i) = self.waiting.iter().position(|(w, _)| w == k) {
                let (_, tx) = self.waiting.remove(i);
                let _ = tx.send(json!({ "result": response }));
            }
        }
    }
}

/// A client's `tasks/*` request about a known task.
pub(super) struct Poll {
    stage: &'static str,
    task_id: String,
    /// Its params, without `_meta`.
    request: Value,
}

fn stage_of(method: &str) -> Option<&'static str> {
    match method {
        "tasks/get" => Some(TASK_GET),
        "tasks/update" => Some(TASK_UPDATE),
        "tasks/cancel" => Some(TASK_CANCEL),
        _ => None,
    }
}

impl Router {
    /// A client's `tasks/get`, `tasks/update` or `tasks/cancel` naming a
    /// task the proxy saw created: linked to that task's call (its answer
    /// is filed there). Whether it was; any other request is not.
    pub(super) fn task_request(&self, method: &str, id: &Value, params: Option<&Value>) -> bool {
        let Some(stage) = stage_of(method) else {
            return false;
        };
        let Some(task_id) = params.and_then(|p| p.get("taskId")).and_then(Value::as_str) else {
            return false;
        };
        let pending = {
            let mut tasks = lock(&self.rounds.tasks);
            let Some(task) = tasks.get_mut(task_id) else {
                return false;
            };
            if stage == TASK_UPDATE {
                task.answer(params.and_then(|p| p.get("inputResponses")));
            }
            if stage == TASK_CANCEL && !task.cancel_sent {
                task.cancel_sent = true;
                task.canceller.cancel(Some(CLIENT_CANCELLED));
            }
            let mut request = params.cloned().unwrap_or(Value::Null);
            if let Some(r) = request.as_object_mut() {
                r.remove("_meta");
            }
            Pending {
                events: task.events.clone(),
                canceller: task.canceller.clone(),
                tool_call: false,
                call_id: task.call_id.clone(),
                token: None,
                poll: Some(Poll {
                    stage,
                    task_id: task_id.to_owned(),
                    request,
                }),
            }
        };
        self.state().pending.push((key(id), pending));
        true
    }
}

/// A `tools/call`'s answer `result` that creates a task: files it on the
/// call and keeps the call for its task's exchanges. Whether it did.
pub(super) fn created(rounds: &Rounds, p: &Pending, result: Option<&Value>) -> bool {
    let Some(result) = result.filter(|_| p.tool_call) else {
        return false;
    };
    if result.get("resultType").and_then(Value::as_str) != Some("task") {
        return false;
    }
    let Some(task_id) = result.get("taskId").and_then(Value::as_str) else {
        return false;
    };
    let mut tasks = lock(&rounds.tasks);
    if tasks.len() >= UNANSWERED {
        // A client that never polls its tasks to their end cannot grow
        // the proxy's memory: this one ends with its CreateTaskResult.
        tracing::warn!(
            "{UNANSWERED} tasks are already waiting for their end: task {task_id} is recorded \
             as its tools/call's answer, its tasks/* requests not linked"
        );
        return false;
    }
    let _ = p.events.send(Event::Stage {
        stage: TASK_CREATED,
        value: json!({ "result": result }),
    });
    let mut tasked = Tasked {
        events: p.events.clone(),
        canceller: p.canceller.clone(),
        call_id: p.call_id.clone(),
        cancel_sent: false,
        asked: HashSet::new(),
        waiting: Vec::new(),
    };
    tasked.ask(result);
    tasks.insert(task_id.to_owned(), tasked);
    true
}

/// The server's answer `m` to a `tasks/*` request linked to a task's call
/// (`p.poll`): filed on the call; a `tasks/get` answering a terminal
/// status ends it.
pub(super) fn answered(rounds: &Rounds, p: Pending, m: Value) {
    let Some(poll) = p.poll else { return };
    let mut value = json!({ "request": poll.request });
    let mut end = None;
    if let Some(error) = m.get("error") {
        value["error"] = error.clone();
    } else {
        let mut result = m.get("result").cloned().unwrap_or(Value::Null);
        if poll.stage == TASK_GET {
            let status = result
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let inlined = result.as_object_mut().and_then(|r| r.remove("result"));
            end = match status.as_str() {
                "completed" => Some(Ok(inlined.unwrap_or(Value::Null))),
                "failed" => Some(Err(result.get("error").cloned().unwrap_or_else(
                    || json!({"code": -32603, "message": "the task failed with no error inlined"}),
                ))),
                "cancelled" => {
                    let sent = lock(&rounds.tasks)
                        .get(&poll.task_id)
                        .is_some_and(|t| t.cancel_sent);
                    if !sent {
                        p.canceller.cancel(Some(SERVER_CANCELLED));
                    }
                    Some(Ok(Value::Null))
                }
                _ => None,
            };
        }
        value["result"] = result;
    }
    let _ = p.events.send(Event::Stage {
        stage: poll.stage,
        value: value.clone(),
    });
    if poll.stage == TASK_GET {
        if let Some(task) = lock(&rounds.tasks).get_mut(&poll.task_id) {
            task.ask(&value["result"]);
        }
    }
    if let Some(end) = end {
        lock(&rounds.tasks).remove(&poll.task_id);
        let _ = p.events.send(Event::Done(end));
    }
}
