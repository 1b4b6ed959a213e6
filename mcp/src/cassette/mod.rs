//! `reel mcp mock`: a recorded MCP session served back as an MCP server,
//! for client tests (a cassette).
//!
//! Issue 14: "Matching is strict: tool name plus args, with the replayer's
//! ignore rules by JSON pointer. Progress, log and elicitation messages are
//! replayed in their recorded order. A miss is a JSON-RPC error that names
//! the closest recorded call and the first field that differs. Never a
//! first-in, first-out guess."
//!
//! - `initialize` answers the recorded server info, capabilities and
//!   instructions (the protocol version is negotiated as rmcp does);
//!   `tools/list` answers the recorded list.
//! - A `tools/call` is answered by the first unanswered recorded call of
//!   that tool whose arguments equal the request's (ignored pointers
//!   aside). Its progress goes to the request's `progressToken` (none: not
//!   sent), its log messages as `notifications/message`, its questions as
//!   `elicitation/create` (the client's answer is awaited, not compared),
//!   in recorded order; then the recorded result. A recorded JSON-RPC
//!   error is answered as that error, its `data` included (a record that
//!   kept only its text, `json-rpc error CODE: MESSAGE`, without).
//! - On 2026-07-28 (no server-to-client requests) a recorded question is
//!   an input-required round instead: the `tools/call` is answered with
//!   `resultType: "input_required"`, the question in `inputRequests` and a
//!   `requestState` sealed with the mock's own HMAC key (drawn at random
//!   when it starts; see `rounds.rs`); the client's next round, with the
//!   state and an answer, resumes the replay after the question. A state
//!   whose seal does not hold, of another tool or round, or used already
//!   is refused (`-32602`). A recorded result or listing without
//!   `resultType` gets `complete`, as that version requires.
//! - A call that became a task (SEP-2663) is answered with its recorded
//!   `CreateTaskResult`, its `tasks/get` polls with the recorded statuses
//!   in order, and its `tasks/update`s checked against the recorded
//!   answers to the task's questions (`tasks.rs`).
//! - `tools/list` with a `cursor` answers the recorded page of that cursor;
//!   `resources/list` and `prompts/list` answer their recorded pages when
//!   the record has them (else as a server without them does).
//! - Every answer taken from the record goes out field for field as
//!   recorded, fields this version's model does not know included
//!   (`capabilities.tasks`, a tool's `execution`): rmcp answers through
//!   typed models, so a relay between rmcp and the client puts the recorded
//!   JSON back in place of the typed result; rmcp decides only the
//!   negotiated `protocolVersion` and top-level members the record lacks
//!   (what the negotiated version requires: `resultType`, a listing's
//!   `ttlMs` on 2026-07-28).
//! - A miss is JSON-RPC error `-32602` whose message names the closest
//!   recorded call (same tool, fewest differing fields; else the nearest
//!   tool name) and the first differing field as a JSON pointer into the
//!   arguments, expected vs got; its `data` carries the same as JSON.

#![allow(deprecated)]

mod http;
pub mod matching;
mod recorded;
mod relay;
mod report;
pub(crate) mod rounds;
pub mod session;
mod tasks;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use reel::context::Elicitation;
use reel::fact::{CallOutcome, ElicitMode};
use reel::matching::IgnoreRule;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, DiscoverResult,
    ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourcesResult, ListToolsResult, LoggingMessageNotification,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotification,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResultType, ServerConfig, ServerNotification, SetLevelRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ServerHandler;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::serve::{serve_until_closed, ServeError};
pub use http::{BoundHttpMock, HttpMock};
pub use matching::{parse_ignore, Match};
use relay::Exact;
pub use report::Report;
pub use session::{Event, Interaction, LoadError, Read, Session};

/// The MCP server of a recorded session. Cheap to clone; each connection
/// shares which recorded calls were answered.
#[derive(Clone)]
pub struct Cassette {
    session: Arc<Session>,
    ignored: Arc<Vec<String>>,
    used: Arc<Mutex<Vec<bool>>>,
    rounds: rounds::Rounds,
    tasks: tasks::Served,
    /// The recorded JSON of answers on their way out, by request id (as
    /// JSON text): the relay puts it in place of rmcp's typed result.
    exact: Exact,
    /// What it did, for [`Cassette::report`].
    tally: Arc<Mutex<report::Tally>>,
}

impl std::fmt::Debug for Cassette {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cassette")
            .field("source", &self.session.source)
            .field("calls", &self.session.calls.len())
            .finish_non_exhaustive()
    }
}

impl Cassette {
    /// Serves `session`, matching arguments with the `ignore` rules (those
    /// for `call.started` under `/args`).
    pub fn new(session: Session, ignore: &[IgnoreRule]) -> Cassette {
        let n = session.calls.len();
        Cassette {
            session: Arc::new(session),
            ignored: Arc::new(matching::arg_ignores(ignore)),
            used: Arc::new(Mutex::new(vec![false; n])),
            rounds: rounds::Rounds::new(),
            tasks: tasks::Served::default(),
            exact: Exact::default(),
            tally: Arc::default(),
        }
    }

    /// The answer to request `context.id` is `recorded`, field for field.
    fn exactly(&self, context: &RequestContext<RoleServer>, recorded: &Value) {
        if let Some(key) = relay::key(relay::exchange_of(context), &context.id) {
            lock(&self.exact).insert(key, recorded.clone());
        }
    }

    /// The session served.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Serves one client on standard input and output until it closes.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client on a byte stream pair (newline-delimited JSON-RPC).
    pub async fn serve_io<R, W>(self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        // client -> rmcp as it comes; rmcp -> client through `relay`.
        let (rmcp_side, relay_side) = tokio::io::duplex(64 << 10);
        let (rmcp_read, rmcp_write) = tokio::io::split(rmcp_side);
        let (relay_read, mut relay_write) = tokio::io::split(relay_side);
        let inbound = tokio::spawn(async move {
            let mut read = read;
            let _ = tokio::io::copy(&mut read, &mut relay_write).await;
            let _ = relay_write.shutdown().await;
        });
        let outbound = tokio::spawn(relay::relay(relay_read, write, self.exact.clone()));
        let served = serve_until_closed(self, rmcp_read, rmcp_write).await;
        // rmcp's side is dropped: the relay reads to its end and flushes.
        let _ = outbound.await;
        inbound.abort();
        served
    }

    fn take(&self, tool: &str, args: &Value) -> Match {
        let mut used = lock(&self.used);
        let m = matching::find(&self.session.calls, &used, tool, args, &self.ignored);
        let mut tally = lock(&self.tally);
        match &m {
            Match::Hit(i) => {
                used[*i] = true;
                tally.served += 1;
                tally.covered.insert(tool.to_owned());
            }
            Match::Miss { .. } => tally.missed += 1,
        }
        m
    }
}

use reel::lock::lock;

impl ServerHandler for Cassette {
    fn get_info(&self) -> ServerConfig {
        self.session
            .initialize_result
            .clone()
            .and_then(|v| serde_json::from_value::<InitializeResult>(v).ok())
            .unwrap_or_else(|| {
                // A 2026-07-28 session: what its discovery said it serves.
                ServerConfig::new(tasks::capabilities(&self.session))
            })
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.poll(&request.task_id, &context)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let responses = serde_json::to_value(&request.input_responses).unwrap_or(Value::Null);
        self.task_update(&request.task_id, &responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_ack(&request.task_id)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let answer = self.negotiate_initialize(&request);
        if let (Some(recorded), true) = (&self.session.initialize_result, answer.is_ok()) {
            self.exactly(&context, recorded);
        }
        answer
    }

    /// 2026-07-28's opening: the recorded answer, field for field, when the
    /// session was opened this way; else what `get_info` says.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let recorded = self
            .session
            .discover_result
            .as_ref()
            .and_then(|v| Some((v, serde_json::from_value::<DiscoverResult>(v.clone()).ok()?)));
        match recorded {
            Some((exact, typed)) => {
                self.exactly(&context, exact);
                Ok(typed)
            }
            None => Ok(DiscoverResult::from_server_info(
                self.supported_protocol_versions().into_owned(),
                self.get_info(),
            )),
        }
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Recorded messages are replayed as recorded, whatever the level.
        Ok(())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let recorded = self.listing("resources/list", request, &context)?;
        match recorded {
            Some(page) => Ok(page),
            None if self.get_info().capabilities.resources.is_some() => {
                Ok(ListResourcesResult::default())
            }
            None => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "reel mock: the record has no resources/list answer",
                None,
            )),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let recorded = self.read::<ReadResourceResult>(
            "resources/read",
            &format!("of {uri:?}"),
            &context,
            |p| p.get("uri").and_then(Value::as_str) == Some(uri.as_str()),
        )?;
        Ok(recorded.into())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let name = request.name;
        let arguments = request.arguments.map(Value::Object);
        let recorded = self.read::<GetPromptResult>(
            "prompts/get",
            &format!("of {name:?} with these arguments"),
            &context,
            |p| {
                p.get("name").and_then(Value::as_str) == Some(name.as_str())
                    && p.get("arguments").filter(|a| !a.is_null()) == arguments.as_ref()
            },
        )?;
        Ok(recorded.into())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let recorded = self.listing("prompts/list", request, &context)?;
        match recorded {
            Some(page) => Ok(page),
            None if self.get_info().capabilities.prompts.is_some() => {
                Ok(ListPromptsResult::default())
            }
            None => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "reel mock: the record has no prompts/list answer",
                None,
            )),
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let page = match &cursor {
            None => self.session.tools_list.as_ref(),
            Some(c) => match self
                .session
                .tools_list_pages
                .iter()
                .find(|(k, _)| k.as_deref() == Some(c.as_str()))
            {
                Some((_, page)) => Some(page),
                None => {
                    return Err(ErrorData::invalid_params(
                        format!("reel mock: no tools/list page was recorded for cursor {c:?}"),
                        None,
                    ))
                }
            },
        };
        match page {
            Some(v) => serde_json::from_value::<ListToolsResult>(v.clone())
                .map(|mut list| {
                    // 2026-07-28 requires `resultType` (a 2025-11-25
                    // recording has none); rmcp drops it for older peers.
                    list.result_type.get_or_insert(ResultType::COMPLETE);
                    self.exactly(&context, v);
                    list
                })
                .map_err(|e| {
                    ErrorData::internal_error(
                        format!("reel mock: the recorded tools/list does not read: {e}"),
                        None,
                    )
                }),
            None => Err(ErrorData::internal_error(
                "reel mock: the record has no tools/list answer",
                None,
            )),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let modern = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if let Some(sealed) = &request.request_state {
            // The next round of a call suspended at a question.
            let (index, from, round) =
                self.rounds
                    .resume(sealed, &tool, request.input_responses.as_ref())?;
            return self.replay(index, from, round, modern, &context).await;
        }
        let index = match self.take(&tool, &args) {
            Match::Hit(i) => i,
            Match::Miss {
                closest,
                first,
                message,
            } => {
                let data = json!({
                    "closest": closest.map(|i| {
                        let c = &self.session.calls[i];
                        json!({"call_id": c.call_id, "tool": c.tool, "args": c.args})
                    }),
                    "pointer": first.as_ref().map(|d| d.pointer.clone()),
                    "expected": first.as_ref().and_then(|d| d.expected.clone()),
                    "got": first.as_ref().and_then(|d| d.got.clone()),
                });
                tracing::warn!("{}", message.trim_start_matches("reel "));
                return Err(ErrorData::invalid_params(message, Some(data)));
            }
        };
        self.replay(index, 0, 0, modern, &context).await
    }
}

impl Cassette {
    /// A recorded `CallToolResult` as the answer to `context`'s request,
    /// the relay told its JSON.
    fn served(
        &self,
        context: &RequestContext<RoleServer>,
        call: &Interaction,
        result: Value,
    ) -> Result<CallToolResponse, ErrorData> {
        let answer = served_result(call, result.clone());
        if answer.is_ok() {
            self.exactly(context, &result);
        }
        answer
    }

    /// Replays recorded call `index` from its event `from` on: progress and
    /// log messages, questions (`elicitation/create`; on 2026-07-28 an
    /// input-required round, after which the client's next round resumes
    /// here), then the recorded answer.
    async fn replay(
        &self,
        index: usize,
        from: usize,
        round: u32,
        modern: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = &self.session.calls[index];
        let token = context.meta.get_progress_token();
        let mut reports = call.events[..from.min(call.events.len())]
            .iter()
            .filter(|e| matches!(e, Event::Progress(_)))
            .count() as u64;
        for (at, event) in call.events.iter().enumerate().skip(from) {
            if context.ct.is_cancelled() {
                return Err(self.stream_closed(call, at));
            }
            match event {
                Event::Progress(payload) => {
                    reports += 1;
                    let Some(token) = &token else { continue };
                    let mut params = match payload {
                        Value::Object(m) => m.clone(),
                        other => {
                            let mut m = serde_json::Map::new();
                            m.insert("message".into(), Value::String(other.to_string()));
                            m
                        }
                    };
                    params.insert(
                        "progressToken".into(),
                        serde_json::to_value(token).unwrap_or(Value::Null),
                    );
                    if !params.get("progress").is_some_and(Value::is_number) {
                        // As `serve` does: the number of reports so far.
                        params.insert("progress".into(), json!(reports));
                    }
                    if let Ok(p) =
                        serde_json::from_value::<ProgressNotificationParam>(Value::Object(params))
                    {
                        let _ = context
                            .peer
                            .send_notification(ServerNotification::ProgressNotification(
                                ProgressNotification::new(p),
                            ))
                            .await;
                    }
                }
                Event::Log {
                    level,
                    logger,
                    data,
                    ..
                } => {
                    let mut params = json!({"level": level, "data": data});
                    if let Some(l) = logger {
                        params["logger"] = json!(l);
                    }
                    if let Ok(p) = serde_json::from_value::<LoggingMessageNotificationParam>(params)
                    {
                        let _ = context
                            .peer
                            .send_notification(ServerNotification::LoggingMessageNotification(
                                LoggingMessageNotification::new(p),
                            ))
                            .await;
                    }
                }
                Event::Elicit { question, .. } => {
                    let q = match question.mode {
                        ElicitMode::Url => Elicitation::url(
                            question.message.clone(),
                            question.url.clone().unwrap_or_default(),
                            question.elicitation_id.clone().unwrap_or_default(),
                        ),
                        ElicitMode::Form => {
                            Elicitation::form(question.message.clone(), question.schema.clone())
                        }
                    };
                    let params = crate::serve::convert::elicit_params(&q)
                        .map_err(|e| ErrorData::internal_error(e, None))?;
                    if modern {
                        return Ok(self
                            .rounds
                            .suspend(index, &call.tool, round + 1, at + 1, params)
                            .into());
                    }
                    let _ = context.peer.create_elicitation(params).await;
                }
            }
        }
        if let Some(task) = self.task_created(index, context) {
            return task;
        }
        match &call.outcome {
            Some(CallOutcome::Ok { result }) => self.served(context, call, result.clone()),
            // A JSON-RPC error is answered as recorded, `data` included; a
            // tool error (`isError: true`) is served as its result.
            Some(CallOutcome::Error { error, result }) => {
                if error.starts_with(crate::outcome::RPC_ERROR) {
                    return Err(recorded::recorded_error(error, result.as_ref()));
                }
                match result
                    .clone()
                    .or_else(|| crate::outcome::parse_tool_error(error))
                {
                    Some(result) => self.served(context, call, result),
                    None => Err(recorded::recorded_error(error, None)),
                }
            }
            Some(CallOutcome::Aborted { reason }) => Err(ErrorData::internal_error(
                format!(
                    "reel mock: call {} was aborted when recorded ({})",
                    call.call_id,
                    reason.as_deref().unwrap_or("no reason")
                ),
                None,
            )),
            None => Err(ErrorData::internal_error(
                format!(
                    "reel mock: the record of call {} ends before its answer",
                    call.call_id
                ),
                None,
            )),
        }
    }
}

/// A recorded `CallToolResult` as the mock's answer.
fn served_result(call: &Interaction, result: Value) -> Result<CallToolResponse, ErrorData> {
    serde_json::from_value::<CallToolResult>(result)
        .map(|mut r| {
            r.result_type.get_or_insert(ResultType::COMPLETE);
            CallToolResponse::from(r)
        })
        .map_err(|e| {
            ErrorData::internal_error(
                format!(
                    "reel mock: call {} recorded a result that is not a CallToolResult: {e}",
                    call.call_id
                ),
                None,
            )
        })
}
