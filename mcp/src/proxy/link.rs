//! Linking the messages of a proxied session to the calls they belong to,
//! and filing them through each call's context: one state machine over the
//! session's JSON-RPC messages.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use reel::context::{ElicitAnswer, Elicitation, Platform, Secret, ToolContext, ToolError};
use reel::fact::{ClientInfo, ElicitOutcome, Level};
use reel::redact::KnownSecrets;
use reel_recorder::{CallBuilder, Canceller, Elicitor, LogListener, MemoryVault, Run};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub(crate) mod task;

/// Which way a line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    ClientToServer,
    ServerToClient,
}

impl Dir {
    pub(super) fn source(self) -> &'static str {
        match self {
            Dir::ClientToServer => "client",
            Dir::ServerToClient => "server",
        }
    }

    pub(super) fn sink(self) -> &'static str {
        match self {
            Dir::ClientToServer => "server",
            Dir::ServerToClient => "client",
        }
    }
}

/// What happens to a call, in the order the proxy saw it.
enum Event {
    Progress(Value),
    Log {
        level: Level,
        logger: Option<String>,
        data: Value,
    },
    Elicit {
        question: Elicitation,
        answer: oneshot::Receiver<Value>,
    },
    /// An intermediate output of the call at a stage (a task's creation
    /// and each of its `tasks/*` exchanges, [`task`]).
    Stage {
        stage: &'static str,
        value: Value,
    },
    /// The server's response: its `result`, or its `error` object.
    Done(Result<Value, Value>),
}

/// A client request being recorded as a call.
struct Pending {
    events: mpsc::UnboundedSender<Event>,
    canceller: Canceller,
    /// A `tools/call` (log messages and elicitations go to these).
    tool_call: bool,
    /// The call's id in the run.
    call_id: String,
    token: Option<String>,
    /// A `tasks/*` request about a call that became a task: its answer
    /// goes to that call ([`task`]).
    poll: Option<task::Poll>,
}

#[derive(Default)]
struct State {
    client: Option<ClientInfo>,
    initialized: bool,
    /// The listing methods whose first page was recorded.
    listed: HashSet<String>,
    /// Client requests in flight, by id (as JSON text), oldest first.
    pending: Vec<(String, Pending)>,
    /// progressToken (as JSON text) -> request id.
    tokens: HashMap<String, String>,
    /// Server requests (elicitations) waiting for the client's response.
    asked: HashMap<String, oneshot::Sender<Value>>,
    tasks: Vec<JoinHandle<()>>,
    /// The client's other requests forwarded and not answered yet (ping,
    /// resources/read, a second tools/list...), by id: their responses
    /// are matched, not recorded. The newest [`UNANSWERED`] are kept.
    client_asked: VecDeque<String>,
    /// The server's other requests (sampling, roots, ping, an elicitation
    /// with no call in flight) forwarded and not answered yet, by id.
    server_asked: VecDeque<String>,
    /// The progress tokens of the client's requests not recorded as
    /// `tools/call`s (the newest [`UNANSWERED`]): progress on them is
    /// forwarded, not recorded, and no unmatched message.
    other_tokens: VecDeque<String>,
    /// The progress tokens of the newest [`UNANSWERED`] calls the server
    /// answered, with their call ids: progress on one of them came after
    /// the result, and its record says whose.
    answered_tokens: VecDeque<(String, String)>,
    /// Why the proxy was stopped (Ctrl-C, SIGTERM), once it was: the
    /// client's requests still unanswered then get a JSON-RPC error
    /// saying so ([`Router::farewells`]) instead of a bare end of stream.
    stopped: Option<String>,
    /// The session's declared secrets ([`Router::scrubbing`]), scrubbed
    /// from a line the operator is shown (the record is the recorder's
    /// to redact).
    secrets: KnownSecrets,
}

/// Calls suspended between exchanges: at an input-required round
/// (2026-07-28), by the `requestState` the client will echo, and those
/// that became tasks (SEP-2663), by task id ([`task`]). Shared by the
/// routers of one run's sessionless HTTP exchanges: a call's next round,
/// or its task's next poll, comes in another exchange.
pub(crate) type Rounds = Arc<Suspended>;

/// What [`Rounds`] holds.
#[derive(Default)]
pub(crate) struct Suspended {
    rounds: Mutex<HashMap<String, Round>>,
    tasks: Mutex<HashMap<String, task::Tasked>>,
}

/// A call whose `tools/call` was answered input-required: its questions
/// wait for the client's next round.
pub(crate) struct Round {
    events: mpsc::UnboundedSender<Event>,
    canceller: Canceller,
    /// The `inputRequests` keys of its elicitations, with where each
    /// answer goes.
    answers: Vec<(String, oneshot::Sender<Value>)>,
}

/// How many unanswered requests not recorded as calls are remembered
/// each way (a peer that never answers cannot grow the proxy's memory).
const UNANSWERED: usize = 1024;

/// Tool name of the record of a message that matched nothing: a line that
/// is not JSON, a response to no request in flight in its direction,
/// progress on no known token. The viewer counts each such call as an
/// anomaly of its run (`reel_viewer::timeline::UNMATCHED_TOOL`, the same
/// name).
pub const UNMATCHED: &str = "mcp:unmatched";

/// Tool name of the record of a request the proxy refused and never
/// forwarded (a JSON-RPC batch, SEP-2243 headers that disagree with the
/// body): args `message` (the body), ended with the JSON-RPC error the
/// client was answered.
pub const REFUSED: &str = "mcp:refused";

/// What ends a proxied request the session ended without an answer to
/// (its call's error; `reel mcp check` finds it by this text).
pub const NEVER_ANSWERED: &str = "the MCP session ended before the server answered";

/// How many characters of a line that is not JSON the operator is shown
/// (the record keeps it whole).
const SHOWN_CHARS: usize = 200;

/// Remembers request `id` in `book` (the oldest forgotten past
/// [`UNANSWERED`]).
fn remember(book: &mut VecDeque<String>, id: String) {
    if book.len() == UNANSWERED {
        book.pop_front();
    }
    book.push_back(id);
}

/// Takes request `id` out of `book`; whether it was there.
fn answered(book: &mut VecDeque<String>, id: &str) -> bool {
    match book.iter().position(|k| k == id) {
        Some(i) => {
            book.remove(i);
            true
        }
        None => false,
    }
}

/// The server's response message as a call's end.
fn done(mut m: Value) -> Event {
    let obj = m.as_object_mut();
    match obj {
        Some(obj) => match obj.remove("error") {
            Some(error) => Event::Done(Err(error)),
            None => Event::Done(Ok(obj.remove("result").unwrap_or(Value::Null))),
        },
        None => Event::Done(Ok(Value::Null)),
    }
}

/// The session's recording side: sees a copy of every line.
pub(crate) struct Router {
    run: Option<Run>,
    state: Mutex<State>,
    rounds: Rounds,
    /// The rounds are this router's alone (cleared when it closes).
    own_rounds: bool,
}

fn key(id: &Value) -> String {
    id.to_string()
}

impl Router {
    pub(crate) fn new(run: Option<Run>) -> Router {
        Router {
            run,
            state: Mutex::new(State::default()),
            rounds: Rounds::default(),
            own_rounds: true,
        }
    }

    /// A router whose suspended calls are kept in `rounds`, shared with
    /// other routers of the run (whoever shares them ends them, with
    /// [`end_rounds`]).
    pub(crate) fn sharing(run: Option<Run>, rounds: Rounds) -> Router {
        Router {
            run,
            state: Mutex::new(State::default()),
            rounds,
            own_rounds: false,
        }
    }

    /// Scrubs `secrets` (the values the run was started with) from what
    /// the operator is shown of a message (a line that is not JSON).
    pub(crate) fn scrubbing(self, secrets: &[Secret]) -> Router {
        {
            let mut state = self.state();
            for secret in secrets {
                state.secrets.add(secret.clone());
            }
        }
        self
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        reel::lock::lock(&self.state)
    }

    /// Records what one line says (after it was forwarded). Never fails:
    /// a line that is not JSON is recorded as a call [`UNMATCHED`] holding
    /// it (an anomaly of the run), and said with the line, its declared
    /// secrets scrubbed and cut to [`SHOWN_CHARS`].
    pub(crate) fn observe(&self, dir: Dir, line: &[u8]) {
        if self.run.is_none() {
            return;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            return;
        }
        let message: Value = match serde_json::from_slice(text) {
            Ok(m) => m,
            Err(e) => {
                // Kept, as what it is: the archive holds the line (the
                // recorder redacts it as any fact), and the operator is
                // told which, scrubbed first, then cut.
                let line = String::from_utf8_lossy(text).into_owned();
                let mut state = self.state();
                let mut shown = line.clone();
                state.secrets.scrub(&mut shown);
                if let Some((cut, _)) = shown.char_indices().nth(SHOWN_CHARS) {
                    shown.truncate(cut);
                    shown.push('…');
                }
                tracing::warn!(
                    "the {} wrote a line that is not JSON ({e}) where only MCP messages may go: {shown:?}; \
                     forwarded to the {}, recorded as an anomaly of the run ({UNMATCHED})",
                    dir.source(),
                    dir.sink()
                );
                let why = format!("a line that is not JSON ({e})");
                return self.record_unmatched(dir, Value::String(line), why, &mut state);
            }
        };
        match message {
            Value::Array(batch) => batch.into_iter().for_each(|m| self.message(dir, m)),
            m => self.message(dir, m),
        }
    }

    fn message(&self, dir: Dir, mut m: Value) {
        let Some(obj) = m.as_object_mut() else {
            return tracing::warn!(
                "a message from the {} is not an object: not recorded",
                dir.source()
            );
        };
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = obj.get("id").cloned();
        if let (Some(name), Some(id)) = (method.as_deref(), id.as_ref()) {
            if name.starts_with("notifications/") {
                self.notification_with_id(dir, name, id, obj);
            }
        }
        let params = obj.remove("params");
        match (dir, method.as_deref(), id) {
            (Dir::ClientToServer, Some(method), Some(id)) => {
                let token = params
                    .as_ref()
                    .and_then(|p| p.pointer("/_meta/progressToken"))
                    .map(key);
                let recorded = self.task_request(method, &id, params.as_ref())
                    || self.request(method, &id, params);
                let mut state = self.state();
                if !recorded {
                    remember(&mut state.client_asked, key(&id));
                }
                if let (Some(token), false) = (token, method == "tools/call") {
                    remember(&mut state.other_tokens, token);
                }
            }
            (Dir::ClientToServer, Some("notifications/cancelled"), None) => {
                let params = params.unwrap_or(Value::Null);
                let Some(id) = params.get("requestId") else {
                    return;
                };
                let reason = params.get("reason").and_then(Value::as_str);
                self.cancel(id, reason);
            }
            (Dir::ClientToServer, None, Some(id)) => {
                // The client's response to a server request: an
                // elicitation's answer only when that elicitation was
                // forwarded and is still waiting (issue 29: a response
                // sent before the question is no answer to it).
                let mut state = self.state();
                let id = key(&id);
                if let Some(tx) = state.asked.remove(&id) {
                    let _ = tx.send(m);
                } else if !answered(&mut state.server_asked, &id) {
                    self.unmatched(
                        &mut state,
                        dir,
                        m,
                        format!("a response to id {id}, which no forwarded server request was waiting for"),
                    );
                }
            }
            (Dir::ServerToClient, None, Some(id)) => {
                let mut state = self.state();
                let id = key(&id);
                match state.pending.iter().position(|(k, _)| *k == id) {
                    Some(i) => {
                        let (_, p) = state.pending.remove(i);
                        if let Some(token) = &p.token {
                            state.tokens.remove(token);
                            if state.answered_tokens.len() == UNANSWERED {
                                state.answered_tokens.pop_front();
                            }
                            let answered = (token.clone(), p.call_id.clone());
                            state.answered_tokens.push_back(answered);
                        }
                        finish(&self.rounds, p, m);
                    }
                    None if answered(&mut state.client_asked, &id) => {}
                    None => self.unmatched(
                        &mut state,
                        dir,
                        m,
                        format!("a response to id {id}, which no forwarded client request was waiting for"),
                    ),
                }
            }
            (Dir::ServerToClient, Some("notifications/progress"), None) => {
                let Some(Value::Object(mut params)) = params else {
                    return;
                };
                let Some(token) = params.remove("progressToken") else {
                    return;
                };
                let mut state = self.state();
                let call = state
                    .tokens
                    .get(&key(&token))
                    .and_then(|id| state.pending.iter().find(|(k, _)| k == id))
                    .map(|(_, p)| p.events.clone());
                match call {
                    Some(events) => {
                        let _ = events.send(Event::Progress(Value::Object(params)));
                    }
                    None if state.other_tokens.contains(&key(&token)) => {}
                    None => {
                        params.insert("progressToken".into(), token);
                        m["params"] = Value::Object(params);
                        self.stray_progress(&mut state, dir, m);
                    }
                }
            }
            (Dir::ServerToClient, Some("notifications/message"), None) => {
                self.log_message(params.unwrap_or(Value::Null))
            }
            (Dir::ServerToClient, Some(method), Some(id)) => {
                let mut state = self.state();
                let events = state
                    .pending
                    .iter()
                    .rev()
                    .find(|(_, p)| p.tool_call)
                    .map(|(_, p)| p.events.clone());
                let (Some(events), "elicitation/create") = (events, method) else {
                    // Not recorded; its response is matched to it.
                    return remember(&mut state.server_asked, key(&id));
                };
                let question = question_of(params.as_ref());
                let (tx, answer) = oneshot::channel();
                state.asked.insert(key(&id), tx);
                let _ = events.send(Event::Elicit { question, answer });
            }
            _ => {}
        }
    }

    /// A server's `notifications/message`: the one tool call in flight's,
    /// else the session's (see the comment inside).
    fn log_message(&self, params: Value) {
        let level = params
            .get("level")
            .and_then(Value::as_str)
            .map_or(Level::Info, level_of);
        let logger = params
            .get("logger")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let data = params.get("data").cloned().unwrap_or(Value::Null);
        // A log message names no request: it belongs to the one
        // tool call in flight, if one is. With several (an agent's
        // parallel calls) or none, it is the session's, and the
        // record says which calls were in flight rather than guess.
        let state = self.state();
        let mut calls = state.pending.iter().filter(|(_, p)| p.tool_call);
        match (calls.next(), calls.next()) {
            (Some((_, only)), None) => {
                let _ = only.events.send(Event::Log {
                    level,
                    logger,
                    data,
                });
            }
            _ => {
                let in_flight = state
                    .pending
                    .iter()
                    .filter(|(_, p)| p.tool_call)
                    .map(|(_, p)| p.call_id.clone())
                    .collect();
                if let Some(run) = &self.run {
                    run.log(level, logger, data, in_flight);
                }
            }
        }
    }

    /// Records a message that matched nothing in flight in its direction
    /// as what it is: a call [`UNMATCHED`] whose args are the message and
    /// where it came from, ended with `why` as its error. It is never
    /// taken as an answer.
    fn unmatched(&self, state: &mut State, dir: Dir, message: Value, why: String) {
        tracing::warn!(
            "the {} sent {why}: forwarded, recorded as an anomaly of the run ({UNMATCHED})",
            dir.source()
        );
        self.record_unmatched(dir, message, why, state);
    }

    /// Progress `m` on a token no request in flight carries: recorded as
    /// a call [`UNMATCHED`], naming the call it came after when the token
    /// was an answered call's (`after_result_of`).
    fn stray_progress(&self, state: &mut State, dir: Dir, m: Value) {
        let token = m
            .pointer("/params/progressToken")
            .map(key)
            .unwrap_or_default();
        let after = state
            .answered_tokens
            .iter()
            .rev()
            .find(|(t, _)| *t == token)
            .map(|(_, call)| call.clone());
        let why = match &after {
            Some(call) => format!("progress on token {token} after the result of call {call}"),
            None => format!("progress on token {token}, which no request in flight carries"),
        };
        tracing::warn!(
            "the {} sent {why}: forwarded, recorded as an anomaly of the run ({UNMATCHED})",
            dir.source()
        );
        let mut args = json!({ "from": dir.source(), "message": m });
        if let Some(call) = after {
            args["after_result_of"] = Value::String(call);
        }
        self.record_unmatched_args(dir, args, why, state);
    }

    /// A notification (`notifications/...`) that carries an id, which a
    /// notification must not: recorded as a call [`UNMATCHED`] holding it
    /// (and said). It is still remembered as the request its id makes it,
    /// so the other side's answer to it is no stray answer.
    fn notification_with_id(&self, dir: Dir, name: &str, id: &Value, message: &Map<String, Value>) {
        let why = format!("a notification ({name}) that carries an id ({id})");
        let mut state = self.state();
        self.unmatched(&mut state, dir, Value::Object(message.clone()), why);
    }

    /// [`Router::unmatched`]'s record, said by its caller.
    fn record_unmatched(&self, dir: Dir, message: Value, why: String, state: &mut State) {
        let args = json!({ "from": dir.source(), "message": message });
        self.record_unmatched_args(dir, args, why, state);
    }

    /// A call [`UNMATCHED`] of `args` (`from`, `message`, and for progress
    /// after a result, `after_result_of`: that call's id), ended with `why`.
    fn record_unmatched_args(&self, dir: Dir, args: Value, why: String, state: &mut State) {
        let Some(run) = &self.run else { return };
        let call = run.call(UNMATCHED, args).protocol("mcp");
        let why = format!("unmatched: the {} sent {why}", dir.source());
        state.tasks.push(tokio::spawn(async move {
            let _ = call
                .invoke(
                    move |_ctx, _args: Value| async move { Err::<Value, _>(ToolError::msg(why)) },
                )
                .await;
        }));
    }

    /// Records a request the proxy refused (never forwarded) as a call
    /// [`REFUSED`]: its args the body as sent (JSON, else text), its end
    /// the JSON-RPC `error` object the client was answered.
    pub(crate) fn refused(&self, body: &[u8], error: &Value) {
        let Some(run) = &self.run else { return };
        let message = serde_json::from_slice::<Value>(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
        let text = crate::outcome::rpc_error_text(error);
        tracing::warn!("refused a request, not forwarded: {text}");
        // Its error whole, as a forwarded request's.
        let end = crate::outcome::call_end(Err(error.clone()));
        let call = run
            .call(REFUSED, json!({ "message": message }))
            .protocol("mcp");
        self.state().tasks.push(tokio::spawn(async move {
            let _ = call
                .invoke(move |_ctx, _args: Value| async move { end })
                .await;
        }));
    }

    /// The proxy is stopping for `reason`: every call in flight is
    /// cancelled with it (it ends `cancelled`, not failed), and the
    /// client's unanswered requests will be answered with it
    /// ([`Router::farewells`]).
    pub(crate) fn stop(&self, reason: &str) {
        let mut state = self.state();
        state.stopped = Some(reason.to_owned());
        for (_, p) in &state.pending {
            p.canceller.cancel(Some(reason));
        }
    }

    /// After [`Router::stop`], once the server has said its last: one
    /// JSON-RPC error line (code -32000, the reason) per client request
    /// the server never answered, for the client to read before the end
    /// of its stream. Empty when the proxy was not stopped.
    pub(crate) fn farewells(&self) -> Vec<Vec<u8>> {
        let state = self.state();
        let Some(reason) = &state.stopped else {
            return Vec::new();
        };
        state
            .pending
            .iter()
            .map(|(k, _)| k)
            .chain(state.client_asked.iter())
            .filter_map(|k| serde_json::from_str::<Value>(k).ok())
            .map(|id| {
                let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": reason}});
                let mut line = error.to_string().into_bytes();
                line.push(b'\n');
                line
            })
            .collect()
    }

    /// Cancels the call of the client's request `id`, if it is in flight
    /// (a `tasks/*` request given up on is not its task cancelled).
    fn cancel(&self, id: &Value, reason: Option<&str>) {
        let id = key(id);
        let state = self.state();
        let mut calls = state.pending.iter().filter(|(_, p)| p.poll.is_none());
        if let Some((_, p)) = calls.find(|(k, _)| *k == id) {
            p.canceller.cancel(reason);
        }
    }

    /// The client gave up on its request `id` without a message (on
    /// 2026-07-28 over HTTP: it closed the response stream).
    pub(super) fn cancel_request(&self, id: &Value, reason: &str) {
        self.cancel(id, Some(reason));
    }

    /// A client request: `initialize`, the first `tools/list`,
    /// `resources/list` and `prompts/list` (each page of them), and every
    /// `tools/call` become calls. Whether it did (a request that did not
    /// is only remembered, for its response to match).
    fn request(&self, method: &str, id: &Value, params: Option<Value>) -> bool {
        let mut state = self.state();
        let mut client = None;
        let mut secure = None;
        let (name, args, tool_call) = match method {
            // 2026-07-28 opens with `server/discover` instead: recorded the
            // same way, so a mock and verify open as the client did.
            "server/discover" if !state.initialized => {
                state.initialized = true;
                let params = params.unwrap_or_else(|| json!({}));
                if let Some(c) = params.get("_meta").and_then(|m| m.get(CLIENT_INFO)) {
                    state.client = Some(client_info(c));
                }
                ("mcp:server/discover".to_owned(), params, false)
            }
            "initialize" if !state.initialized => {
                state.initialized = true;
                let params = params.unwrap_or_else(|| json!({}));
                state.client = params.get("clientInfo").map(client_info);
                ("mcp:initialize".to_owned(), params, false)
            }
            // The first listing, and every further page of one.
            "tools/list" | "resources/list" | "prompts/list"
                if !state.listed.contains(method)
                    || params.as_ref().is_some_and(|p| p.get("cursor").is_some()) =>
            {
                state.listed.insert(method.to_owned());
                (
                    format!("mcp:{method}"),
                    params.unwrap_or_else(|| json!({})),
                    false,
                )
            }
            // What the client read: recorded, so a mock can serve it.
            "resources/read" | "prompts/get" => (
                format!("mcp:{method}"),
                params.unwrap_or_else(|| json!({})),
                false,
            ),
            "tools/call" => {
                let mut params = match params {
                    Some(Value::Object(p)) => p,
                    _ => Map::new(),
                };
                let Some(name) = params
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                else {
                    tracing::warn!("a tools/call without a tool name: not recorded");
                    return false;
                };
                let meta = params.get("_meta");
                let token = meta.and_then(|m| m.get("progressToken")).map(key);
                // 2026-07-28: the client names itself in each request's
                // `_meta` (there is no initialize).
                if let Some(c) = meta.and_then(|m| m.get(CLIENT_INFO)) {
                    client = Some(client_info(c));
                }
                if let Some(token) = &token {
                    state.tokens.insert(token.clone(), key(id));
                }
                // The next round of a call suspended at an input-required
                // round: the same call goes on, its questions answered.
                let round = params
                    .get("requestState")
                    .and_then(Value::as_str)
                    .and_then(|s| lock(&self.rounds.rounds).remove(s));
                if let Some(round) = round {
                    let responses = params.get("inputResponses");
                    for (k, answer) in round.answers {
                        let response = match responses.and_then(|r| r.get(&k)) {
                            Some(r) => json!({ "result": r }),
                            None => json!({ "error": {
                                "code": -32602,
                                "message": format!("the next round carried no answer to {k:?}"),
                            }}),
                        };
                        let _ = answer.send(response);
                    }
                    let pending = Pending {
                        events: round.events,
                        call_id: round.canceller.call_id().to_owned(),
                        canceller: round.canceller,
                        tool_call: true,
                        token: token.clone(),
                        poll: None,
                    };
                    state.pending.push((key(id), pending));
                    return true;
                }
                let args = params.remove("arguments").unwrap_or_else(|| json!({}));
                secure = params.remove("secureArguments");
                (name, args, true)
            }
            _ => return false,
        };
        let Some(run) = &self.run else { return false };
        let id_key = key(id);
        let token = state
            .tokens
            .iter()
            .find(|(_, v)| **v == id_key)
            .map(|(t, _)| t.clone());
        let elicitor = Arc::new(ProxyElicitor::default());
        let mut call = secure_arguments(run, run.call(&name, args).protocol("mcp"), secure);
        let client = client.or_else(|| state.client.clone());
        if let Some(client) = client {
            call = call
                .platform(Platform::detect(Some(&client)))
                .client_info(client);
        }
        if tool_call {
            call = call
                .elicitor(elicitor.clone())
                .listener(Arc::new(Forwarded))
                .progress_listener(Arc::new(Forwarded));
        }
        let canceller = call.canceller();
        let call_id = call.id().to_owned();
        let (events, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let _ = call
                .invoke(move |ctx, _args: Value| follow(ctx, rx, elicitor))
                .await;
        });
        // Finished calls' handles are dropped as the session goes (a long
        // session would otherwise keep one per call it ever saw).
        if state.tasks.len() >= 64 && state.tasks.len().is_power_of_two() {
            state.tasks.retain(|t| !t.is_finished());
        }
        state.tasks.push(task);
        let pending = Pending {
            events,
            canceller,
            tool_call,
            call_id,
            token,
            poll: None,
        };
        state.pending.push((id_key, pending));
        true
    }

    /// The session is over: calls still waiting end (no answer came), and
    /// every call's facts are filed.
    pub(crate) async fn close(&self) {
        let tasks = {
            let mut state = self.state();
            state.pending.clear();
            state.asked.clear();
            if self.own_rounds {
                end_rounds(&self.rounds);
            }
            std::mem::take(&mut state.tasks)
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// The server's answer to a client request: the call's end, or (a
/// `tools/call` answered `resultType: "input_required"` with a
/// `requestState`, 2026-07-28) its elicitations, the call kept for the
/// client's next round. Other input requests (sampling, roots) are not
/// recorded.
fn finish(rounds: &Rounds, p: Pending, m: Value) {
    if p.poll.is_some() {
        return task::answered(rounds, p, m);
    }
    let result = m.get("result");
    if task::created(rounds, &p, result) {
        return;
    }
    let state_key = result
        .filter(|r| r.get("resultType").and_then(Value::as_str) == Some("input_required"))
        .and_then(|r| r.get("requestState"))
        .and_then(Value::as_str);
    let (Some(result), Some(state_key), true) = (result, state_key, p.tool_call) else {
        let _ = p.events.send(done(m));
        return;
    };
    let mut answers = Vec::new();
    if let Some(Value::Object(requests)) = result.get("inputRequests") {
        for (k, request) in requests {
            if request.get("method").and_then(Value::as_str) != Some("elicitation/create") {
                continue;
            }
            let (tx, answer) = oneshot::channel();
            answers.push((k.clone(), tx));
            let _ = p.events.send(Event::Elicit {
                question: question_of(request.get("params")),
                answer,
            });
        }
    }
    lock(&rounds.rounds).insert(
        state_key.to_owned(),
        Round {
            events: p.events,
            canceller: p.canceller,
            answers,
        },
    );
}

/// Prefix of the credential need a `tools/call`'s secure argument is
/// recorded under (`secureArguments/NAME`).
pub const SECURE_ARGUMENT_NEED: &str = "secureArguments/";

/// A `tools/call`'s `secureArguments` (SEP-3221: values the host injects
/// apart from the model's `arguments`) as the call's credentials: each a
/// need `secureArguments/NAME` resolved before the call, recorded as
/// `credential.requested` and `credential.resolved` with the recorder's
/// keyed fingerprint of the value (a string as it is, anything else as
/// JSON), never the value. Each value is known to `run` as a secret
/// before the call starts, so it is scrubbed from every fact from
/// `call.started` on: the client also putting it under a plain key of
/// `arguments`, or the server echoing it.
fn secure_arguments(run: &Run, mut call: CallBuilder, secure: Option<Value>) -> CallBuilder {
    let Some(Value::Object(secure)) = secure else {
        return call;
    };
    if secure.is_empty() {
        return call;
    }
    let mut vault = MemoryVault::new();
    for (name, value) in secure {
        let need = format!("{SECURE_ARGUMENT_NEED}{name}");
        let text = match value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        run.secret(Secret::new(text.clone()));
        vault = vault.with(&need, &text);
        call = call.needs(need);
    }
    call.credentials(Arc::new(vault))
}

/// Ends the calls suspended in `rounds` (no next round or poll will
/// come).
pub(crate) fn end_rounds(rounds: &Rounds) {
    lock(&rounds.rounds).clear();
    lock(&rounds.tasks).clear();
}

use reel::lock::lock;

/// An `elicitation/create`'s params as the question recorded.
fn question_of(params: Option<&Value>) -> Elicitation {
    let text = |k: &str| {
        params
            .and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if text("mode") == "url" {
        Elicitation::url(text("message"), text("url"), text("elicitationId"))
    } else {
        Elicitation::form(
            text("message"),
            params
                .and_then(|p| p.get("requestedSchema"))
                .cloned()
                .unwrap_or_else(|| json!({})),
        )
    }
}

/// The `_meta` key of a 2026-07-28 request's client identity.
const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// An MCP `Implementation` object as the recorded client.
fn client_info(c: &Value) -> ClientInfo {
    let text = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
    ClientInfo {
        name: text("name").unwrap_or_default(),
        version: text("version"),
        title: text("title"),
    }
}

fn level_of(level: &str) -> Level {
    match level {
        "emergency" => Level::Emergency,
        "alert" => Level::Alert,
        "critical" => Level::Critical,
        "error" => Level::Error,
        "warning" => Level::Warning,
        "notice" => Level::Notice,
        "debug" => Level::Debug,
        _ => Level::Info,
    }
}

/// The body of a proxied call: files what the proxy saw of it through its
/// context until the server's response (its result), or the end of the
/// session. A cancellation from the client is filed when it comes
/// (`cancel.requested`), but the call goes on filing what the server still
/// sends for it (progress, log messages: the client was sent them) until
/// the server answers or the session ends; then it ends cancelled.
async fn follow(
    ctx: ToolContext,
    mut events: mpsc::UnboundedReceiver<Event>,
    elicitor: Arc<ProxyElicitor>,
) -> Result<Value, ToolError> {
    let mut cancelled = false;
    loop {
        let event = tokio::select! {
            biased;
            event = events.recv() => event,
            _ = ctx.cancelled(), if !cancelled => {
                cancelled = true;
                continue;
            }
        };
        match event {
            None => {
                // A cancelled call whose session then ended is cancelled.
                ctx.check_cancel()?;
                return Err(ToolError::msg(NEVER_ANSWERED));
            }
            Some(Event::Progress(payload)) => ctx.progress(payload),
            Some(Event::Stage { stage, value }) => {
                ctx.set_output_as(value, reel::context::Stage::new(stage))
            }
            Some(Event::Log {
                level,
                logger,
                data,
            }) => {
                if let Some(logger) = logger {
                    ctx.set_logger(logger);
                }
                ctx.log(level, data);
            }
            Some(Event::Elicit { question, answer }) => {
                lock(&elicitor.waiting).push_back(answer);
                // The answer (or its failure) is recorded by the context.
                let _ = ctx.elicit(question).await;
            }
            Some(Event::Done(response)) => {
                // Answered after the client gave up on it: cancelled.
                ctx.check_cancel()?;
                return crate::outcome::call_end(response);
            }
        }
    }
}

/// Answers a proxied call's elicitation with the client's response to it.
#[derive(Default)]
struct ProxyElicitor {
    waiting: Mutex<VecDeque<oneshot::Receiver<Value>>>,
}

impl Elicitor for ProxyElicitor {
    fn elicit<'a>(
        &'a self,
        _question: &'a Elicitation,
    ) -> Pin<Box<dyn Future<Output = Result<ElicitAnswer, String>> + Send + 'a>> {
        let next = lock(&self.waiting).pop_front();
        Box::pin(async move {
            let response = next
                .ok_or("no elicitation is waiting")?
                .await
                .map_err(|_| {
                    "the session (or, for a task's question, the task) ended before the client \
                     answered"
                        .to_owned()
                })?;
            if let Some(error) = response.get("error") {
                return Err(crate::outcome::rpc_error_text(error));
            }
            let result = response.get("result").cloned().unwrap_or(Value::Null);
            let outcome = match result.get("action").and_then(Value::as_str) {
                Some("accept") => ElicitOutcome::Accept {
                    content: result.get("content").cloned().unwrap_or_else(|| json!({})),
                },
                Some("decline") => ElicitOutcome::Decline,
                Some("cancel") => ElicitOutcome::Cancel,
                other => return Err(format!("the client answered with action {other:?}")),
            };
            Ok(ElicitAnswer {
                outcome,
                validation_errors: Vec::new(),
                pre_resolved: false,
            })
        })
    }
}

/// The proxy forwarded every log message to the client before filing it.
struct Forwarded;

impl LogListener for Forwarded {
    fn deliver(&self, _call_id: &str, _level: Level, _data: &Value) -> bool {
        true
    }
}

/// The proxy forwarded every progress notification to the client before
/// filing it: each is `delivered`.
impl reel_recorder::ProgressListener for Forwarded {
    fn progress(&self, _call_id: &str, _payload: &Value) -> bool {
        true
    }
}
