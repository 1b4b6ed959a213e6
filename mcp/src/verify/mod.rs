//! `reel mcp verify`: re-drive a recorded session's `tools/call` requests
//! against a live MCP server over stdio, and compare each answer with the
//! recorded one using reel's matcher.
//!
//! Issue 14: "It replays every recorded `tools/call` request against a new
//! build of a server, in any language, answering its elicitations from the
//! tape. It reports per call with reel's matcher (the same one-line
//! divergences), takes the same ignore rules, and exits non-zero on
//! divergence."
//!
//! The client is a plain newline-delimited JSON-RPC client ([`LineClient`]),
//! not an SDK: it sends the recorded requests byte for byte as the record
//! has them (arguments exactly, no schema checks of its own) and sees the
//! server's answers unchanged. Each answer becomes the `call.ended` it
//! would be recorded as (a result is `ok` with the whole `CallToolResult`,
//! a JSON-RPC error is `json-rpc error CODE: MESSAGE` with the error
//! object, `data` included, kept beside it), and is compared
//! with the recorded `call.ended` by [`diff_kinds`] with the ignore rules
//! (durations and invocation ids are not compared). Before it, the
//! `notifications/progress` and `notifications/message` the server sent
//! during the call are compared in order with the recorded `progress` and
//! `log` facts (as those facts: `progress:/payload/message`,
//! `log:/data`, ...; a progress count is not compared).

mod session_logs;
mod task;
use session_logs::{own_messages, session_logs, SessionLog};

use std::collections::VecDeque;
use std::process::Stdio;

use reel::fact::{CallEnded, CallOutcome, ElicitOutcome, FactKind, Level, Log, Progress};
use reel::matching::{diff_kinds, show, FieldDiff, IgnoreRule};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::cassette::session::{Event, Interaction, Session};

/// A newline-delimited JSON-RPC client of an MCP server started as a
/// child process (stdio transport). Server requests met while waiting for
/// a response go to the answerer passed to [`LineClient::request`].
#[derive(Debug)]
pub struct LineClient {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

/// What the server sent while a request was waiting: notifications.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Received {
    /// The notifications, in order (`{"method", "params"}`).
    pub notifications: Vec<Value>,
}

impl LineClient {
    /// Starts `program` with `args`, its stdin and stdout piped (its stderr
    /// is this process's).
    pub fn spawn(program: &str, args: &[String]) -> std::io::Result<LineClient> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(LineClient {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 1,
        })
    }

    async fn send(&mut self, message: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Sends a request and waits for its response: `Ok(result)` or
    /// `Err(error object)`. Requests from the server meanwhile are answered
    /// by `answer(method, params)` (a result, or an error object).
    pub async fn request(
        &mut self,
        method: &str,
        params: Value,
        answer: &mut (dyn FnMut(&str, &Value) -> Result<Value, Value> + Send),
    ) -> std::io::Result<(Result<Value, Value>, Received)> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let mut received = Received::default();
        loop {
            let Some(line) = self.lines.next_line().await? else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the server closed its output before answering {method}"),
                ));
            };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let method_of = msg.get("method").and_then(Value::as_str).map(str::to_owned);
            match (method_of, msg.get("id")) {
                (Some(m), Some(rid)) => {
                    let reply = match answer(&m, msg.get("params").unwrap_or(&Value::Null)) {
                        Ok(result) => json!({"jsonrpc": "2.0", "id": rid, "result": result}),
                        Err(error) => json!({"jsonrpc": "2.0", "id": rid, "error": error}),
                    };
                    self.send(&reply).await?;
                }
                (Some(m), None) => received
                    .notifications
                    .push(json!({"method": m, "params": msg.get("params").cloned().unwrap_or(Value::Null)})),
                (None, Some(rid)) if rid == &json!(id) => {
                    let response = match msg.get("error") {
                        Some(e) => Err(e.clone()),
                        None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    return Ok((response, received));
                }
                _ => {}
            }
        }
    }

    /// Closes the server's stdin and waits for it to exit.
    pub async fn close(mut self) -> std::io::Result<()> {
        drop(self.stdin);
        let _ = self.child.wait().await?;
        Ok(())
    }
}

/// The default `initialize` params when the record has none.
fn default_initialize() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "reel-mcp-verify", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The outcome a JSON-RPC response is recorded as ([`crate::outcome`]).
pub fn outcome_of(response: &Result<Value, Value>) -> CallOutcome {
    match crate::outcome::call_end(response.clone()) {
        Ok(result) => CallOutcome::Ok { result },
        Err(error) => CallOutcome::Error {
            result: error.result().cloned(),
            error: error.to_string(),
        },
    }
}

/// A recorded elicitation answer as the client's response: MCP's
/// `ElicitResult`, or the JSON-RPC error the client answered with (recorded
/// as outcome `error`, `json-rpc error CODE: MESSAGE`).
fn elicit_result(outcome: &ElicitOutcome) -> Result<Value, Value> {
    match outcome {
        ElicitOutcome::Accept { content } => Ok(json!({"action": "accept", "content": content})),
        ElicitOutcome::Decline => Ok(json!({"action": "decline"})),
        ElicitOutcome::Error { message } => match crate::outcome::parse_rpc_error(message) {
            Some((code, message)) => Err(json!({"code": code, "message": message})),
            None => Ok(json!({"action": "cancel"})),
        },
        _ => Ok(json!({"action": "cancel"})),
    }
}

/// How one recorded call went against the live server.
#[derive(Debug, Clone, PartialEq)]
pub struct CallCheck {
    /// The recorded call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Every differing field of the result (empty: matched).
    pub diff: Vec<FieldDiff>,
    /// One line: `matched`, or the first divergence.
    pub line: String,
}

/// The whole verification.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// Where the session came from.
    pub source: String,
    /// One check per recorded `tools/call`, in recorded order.
    pub calls: Vec<CallCheck>,
}

impl VerifyReport {
    /// True when every call matched.
    pub fn is_match(&self) -> bool {
        self.calls.iter().all(|c| c.diff.is_empty())
    }
}

impl std::fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in &self.calls {
            writeln!(f, "{}", c.line)?;
        }
        let diverged = self.calls.iter().filter(|c| !c.diff.is_empty()).count();
        if diverged == 0 {
            write!(
                f,
                "all {} calls matched ({})",
                self.calls.len(),
                self.source
            )
        } else {
            write!(
                f,
                "{diverged} of {} calls diverged ({})",
                self.calls.len(),
                self.source
            )
        }
    }
}

/// Why verification could not run (bad input or a server that does not
/// start: exit code 2).
#[derive(Debug)]
pub struct VerifyError(pub String);

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VerifyError {}

/// The notifications a call's recorded events say the server sends, as
/// facts: progress (count by position), log (delivered).
fn expected_messages(call: &Interaction) -> Vec<(Option<u64>, FactKind)> {
    let mut out = Vec::new();
    for (event, seq) in call.events.iter().zip(
        call.event_seqs
            .iter()
            .map(|s| Some(*s))
            .chain(std::iter::repeat(None)),
    ) {
        let kind = match event {
            Event::Progress(payload) => FactKind::Progress(Progress {
                payload: numbers_as_floats(payload.clone()),
                count: 0,
                delivered: false,
            }),
            // The session's message: checked against the pool (see
            // `session_logs`), not as this call's.
            Event::Log { in_flight, .. } if !in_flight.is_empty() => continue,
            Event::Log {
                level,
                logger,
                data,
                ..
            } => FactKind::Log(Log {
                level: *level,
                logger: logger.clone(),
                subflow: None,
                data: data.clone(),
                delivered: true,
                in_flight: Vec::new(),
            }),
            Event::Elicit { .. } => continue,
        };
        out.push((seq, kind));
    }
    out
}

/// The notifications the live server sent during a call, as facts.
fn received_messages(received: &Received) -> Vec<FactKind> {
    let mut out = Vec::new();
    for note in &received.notifications {
        let mut params = note["params"].clone();
        match note["method"].as_str() {
            Some("notifications/progress") => {
                if let Value::Object(m) = &mut params {
                    m.remove("progressToken");
                    m.remove("_meta");
                }
                out.push(FactKind::Progress(Progress {
                    payload: numbers_as_floats(params),
                    count: 0,
                    delivered: false,
                }));
            }
            Some("notifications/message") => {
                let Ok(level) = serde_json::from_value::<Level>(params["level"].clone()) else {
                    continue;
                };
                out.push(FactKind::Log(Log {
                    level,
                    logger: params["logger"].as_str().map(str::to_owned),
                    subflow: None,
                    data: params.get("data").cloned().unwrap_or(Value::Null),
                    delivered: true,
                    in_flight: Vec::new(),
                }));
            }
            _ => {}
        }
    }
    out
}

/// MCP's `progress` and `total` are numbers: `1` and `1.0` are one value.
fn numbers_as_floats(mut payload: Value) -> Value {
    for key in ["progress", "total"] {
        if let Some(n) = payload.get(key).and_then(Value::as_f64) {
            payload[key] = json!(n);
        }
    }
    payload
}

fn kind_name(kind: &FactKind) -> String {
    kind.name().to_owned()
}

fn check(
    call: &Interaction,
    received: &Received,
    got: CallOutcome,
    pool: &mut [SessionLog],
    ignore: &[IgnoreRule],
) -> CallCheck {
    let name = format!("call {} `{}`", call.call_id, call.tool);
    let at_seq = |seq: Option<u64>| match seq {
        Some(seq) => format!(" (seq {seq})"),
        None => String::new(),
    };
    let divergence = |diff: Vec<FieldDiff>, line: String| CallCheck {
        call_id: call.call_id.clone(),
        tool: call.tool.clone(),
        diff,
        line,
    };
    // The messages first, in order: they came before the answer.
    // A kind ignored whole (`--ignore log`) is not compared at all.
    let compared = |k: &FactKind| {
        !ignore
            .iter()
            .any(|r| r.pointer.is_empty() && r.kind.as_deref() == Some(k.name()))
    };
    let mut expected = expected_messages(call);
    expected.retain(|(_, e)| compared(e));
    let mut received = received_messages(received);
    received.retain(|a| compared(a));
    let actual = own_messages(call, &expected, received, pool, ignore);
    for i in 0..expected.len().max(actual.len()) {
        let n = i + 1;
        match (expected.get(i), actual.get(i)) {
            (Some((seq, e)), Some(a)) => {
                let diff = diff_kinds(e, a, ignore);
                if let Some(d) = diff.first() {
                    let line = format!(
                        "{name}, message {n}{}, {}: expected {}, got {}",
                        at_seq(*seq),
                        d.path,
                        show(&d.expected),
                        show(&d.actual)
                    );
                    return divergence(diff, line);
                }
            }
            (Some((seq, e)), None) => {
                let line = format!(
                    "{name}, message {n}{}: the record has {} here, the server sent nothing more",
                    at_seq(*seq),
                    kind_name(e)
                );
                let diff = vec![FieldDiff {
                    path: "fact".into(),
                    expected: Some(kind_name(e).into()),
                    actual: None,
                }];
                return divergence(diff, line);
            }
            (None, Some(a)) => {
                let line = format!(
                    "{name}, message {n}: the server sent {} the record does not have",
                    kind_name(a)
                );
                let diff = vec![FieldDiff {
                    path: "fact".into(),
                    expected: None,
                    actual: Some(kind_name(a).into()),
                }];
                return divergence(diff, line);
            }
            (None, None) => {}
        }
    }
    let ended = |outcome| {
        FactKind::CallEnded(CallEnded {
            outcome,
            duration_ns: 0,
            invocation_id: None,
        })
    };
    let recorded = call.outcome.clone().unwrap_or(CallOutcome::Aborted {
        reason: Some("the record ends before the call's answer".into()),
    });
    let diff = diff_kinds(&ended(recorded), &ended(got), ignore);
    let line = match diff.first() {
        None => format!("{name}: matched"),
        Some(d) => format!(
            "{name}, result{}, {}: expected {}, got {}",
            at_seq(call.ended_seq),
            d.path,
            show(&d.expected),
            show(&d.actual)
        ),
    };
    divergence(diff, line)
}

/// Starts `program args` and re-drives every recorded `tools/call` of
/// `session` against it, in order: the session opened as recorded (see
/// [`open`]), then each call with its recorded arguments, the recorded
/// per-request `_meta` of a 2026-07-28 client and a progress token, its elicitations answered with the
/// recorded answers in order (none left: `cancel`).
pub async fn verify(
    session: &Session,
    program: &str,
    args: &[String],
    ignore: &[IgnoreRule],
) -> Result<VerifyReport, VerifyError> {
    let mut client = LineClient::spawn(program, args)
        .map_err(|e| VerifyError(format!("cannot start {program}: {e}")))?;
    open(&mut client, session, program).await?;
    let mut pool = session_logs(session);
    let mut calls = Vec::new();
    let mut dead: Option<String> = None;
    for (n, call) in session.calls.iter().enumerate() {
        if let Some(why) = &dead {
            calls.push(CallCheck {
                call_id: call.call_id.clone(),
                tool: call.tool.clone(),
                diff: vec![FieldDiff {
                    path: "call".into(),
                    expected: Some(json!("an answer")),
                    actual: None,
                }],
                line: format!("call {} `{}`: not answered: {why}", call.call_id, call.tool),
            });
            continue;
        }
        let mut answers: VecDeque<ElicitOutcome> = call
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Elicit { answer, .. } => {
                    Some(answer.clone().unwrap_or(ElicitOutcome::Cancel))
                }
                _ => None,
            })
            .collect();
        let mut answer = |m: &str, _: &Value| -> Result<Value, Value> {
            if m == "elicitation/create" {
                elicit_result(&answers.pop_front().unwrap_or(ElicitOutcome::Cancel))
            } else {
                answer_plain(m)
            }
        };
        let mut meta = match &session.request_meta {
            Some(Value::Object(m)) => m.clone(),
            _ => serde_json::Map::new(),
        };
        // A task's tasks/* requests carry the record's _meta, no token.
        let task_meta = meta.clone();
        meta.insert("progressToken".into(), json!(format!("reel-verify-{n}")));
        let params = json!({
            "name": call.tool,
            "arguments": call.args,
            "_meta": meta,
        });
        let answered = match client.request("tools/call", params, &mut answer).await {
            Ok((response, received)) => match (task::created(call, &response), &response) {
                (Some(task_id), Ok(created)) => {
                    task::follow(&mut client, call, &task_meta, &task_id, created)
                        .await
                        .map(|end| (end, received))
                }
                _ => Ok((outcome_of(&response), received)),
            },
            Err(e) => Err(e),
        };
        match answered {
            Ok((got, received)) => calls.push(check(call, &received, got, &mut pool, ignore)),
            Err(e) => {
                let why = e.to_string();
                calls.push(CallCheck {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    diff: vec![FieldDiff {
                        path: "call".into(),
                        expected: Some(json!("an answer")),
                        actual: None,
                    }],
                    line: format!("call {} `{}`: not answered: {why}", call.call_id, call.tool),
                });
                dead = Some(why);
            }
        }
    }
    let _ = client.close().await;
    Ok(VerifyReport {
        source: session.source.clone(),
        calls,
    })
}

/// Opens the session the way the recording did: `server/discover` with
/// the recorded params for a 2026-07-28 session that opened so; else
/// `initialize` with the recorded params (a record with neither gets a
/// 2025-11-25 handshake with the elicitation capability) and
/// `notifications/initialized`.
async fn open(
    client: &mut LineClient,
    session: &Session,
    program: &str,
) -> Result<(), VerifyError> {
    let mut refuse = |m: &str, _: &Value| -> Result<Value, Value> { answer_plain(m) };
    if let Some(params) = &session.discover_params {
        let (opened, _) = client
            .request("server/discover", params.clone(), &mut refuse)
            .await
            .map_err(|e| VerifyError(format!("{program} did not answer server/discover: {e}")))?;
        return match opened {
            Ok(_) => Ok(()),
            Err(e) => Err(VerifyError(format!(
                "{program} refused server/discover: {e}"
            ))),
        };
    }
    let params = session
        .initialize_params
        .clone()
        .unwrap_or_else(default_initialize);
    let (init, _) = client
        .request("initialize", params, &mut refuse)
        .await
        .map_err(|e| VerifyError(format!("{program} did not answer initialize: {e}")))?;
    if let Err(e) = init {
        return Err(VerifyError(format!("{program} refused initialize: {e}")));
    }
    client
        .notify("notifications/initialized", json!({}))
        .await
        .map_err(|e| VerifyError(format!("{program} stopped reading: {e}")))
}

/// Answers for server requests other than elicitation: `ping` and
/// `roots/list` are answered, anything else is method-not-found.
fn answer_plain(method: &str) -> Result<Value, Value> {
    match method {
        "ping" => Ok(json!({})),
        "roots/list" => Ok(json!({"roots": []})),
        other => {
            Err(json!({"code": -32601, "message": format!("reel verify does not answer {other}")}))
        }
    }
}
