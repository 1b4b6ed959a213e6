//! A proxied MCP session loaded from a tape or an archive run, as the
//! recording shape has it (the book's "MCP servers and clients"): one run,
//! `mcp:initialize` and `mcp:tools/list` calls once, then one call per
//! `tools/call` whose progress, log and elicitation facts are filed under it.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::Path;

use reel::fact::{CallOutcome, ElicitOutcome, ElicitRequested, FactKind, Level};
use reel::matching::resolve_refs;
use reel::tape::Tape;
use reel_archive::{Archive, ArchiveConfig, TapeExt};
use serde_json::Value;

mod ingested;
pub use ingested::NO_DEFINITION;

/// Tool name of the recorded `initialize` exchange.
pub const INITIALIZE: &str = "mcp:initialize";
/// Tool name of the recorded `server/discover` exchange (2026-07-28's
/// opening, instead of `initialize`).
pub const DISCOVER: &str = "mcp:server/discover";
/// Tool name of the recorded `tools/list` exchange.
pub const TOOLS_LIST: &str = "mcp:tools/list";

/// Why a session could not be loaded (bad input: exit code 2).
#[derive(Debug)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// A message the server sent during a call, in recorded order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `notifications/progress`: the params without `progressToken`.
    Progress(Value),
    /// `notifications/message`.
    Log {
        /// The level.
        level: Level,
        /// The logger name, when set.
        logger: Option<String>,
        /// The data.
        data: Value,
        /// Empty for the call's own message. A message of the session that
        /// could not be tied to one call names the calls in flight when it
        /// came: it is replayed with the newest of them (where it came on
        /// the wire), and `verify` takes it from any of them.
        in_flight: Vec<String>,
    },
    /// `elicitation/create`, with the client's recorded answer.
    Elicit {
        /// The question.
        question: ElicitRequested,
        /// The answer as recorded (`None`: the record has none).
        answer: Option<ElicitOutcome>,
    },
}

/// One recorded `resources/read` or `prompts/get`.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// `resources/read` or `prompts/get`.
    pub method: String,
    /// The request's params as recorded (`uri`; `name` and `arguments`).
    pub params: Value,
    /// The server's result, or the recorded error: its text, and the
    /// error object when the record kept it whole.
    pub answer: Result<Value, (String, Option<Value>)>,
}

/// One recorded `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    /// The call's id in the record.
    pub call_id: String,
    /// The MCP tool name.
    pub tool: String,
    /// The request's `arguments` (`{}` when absent).
    pub args: Value,
    /// Progress, log and elicitation messages, in recorded order.
    pub events: Vec<Event>,
    /// The seq of each event's fact (an elicitation's question).
    pub event_seqs: Vec<u64>,
    /// How the call ended (`None`: the record ends before it did).
    pub outcome: Option<CallOutcome>,
    /// The seq of the call's `call.ended`, when recorded.
    pub ended_seq: Option<u64>,
    /// When the `tools/call` became a task (SEP-2663): its recorded
    /// exchanges in order, each the stage (`mcp:task`, `mcp:tasks/get`,
    /// ...: [`crate::proxy::TASK_CREATED`] and its siblings) and the
    /// `call.output` value filed for it. Empty otherwise.
    pub task: Vec<(String, Value)>,
}

/// A recorded MCP session: the protocol exchanges and the tool calls in
/// start order.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Where it came from (a tape path, or `run ID in DIR`).
    pub source: String,
    /// The run's id.
    pub run_id: String,
    /// The client's `initialize` params, as recorded.
    pub initialize_params: Option<Value>,
    /// The server's `initialize` result, as recorded.
    pub initialize_result: Option<Value>,
    /// The client's `server/discover` params, as recorded (a 2026-07-28
    /// session opens with it, not with `initialize`).
    pub discover_params: Option<Value>,
    /// The server's `server/discover` result, as recorded.
    pub discover_result: Option<Value>,
    /// On 2026-07-28, the `_meta` every request of the client carried (its
    /// protocol version, client info and capabilities, log level), as the
    /// recorded `tools/list` (else `server/discover`) request had it.
    pub request_meta: Option<Value>,
    /// The server's first `tools/list` result (no cursor), as recorded.
    pub tools_list: Option<Value>,
    /// Every recorded `tools/list` page: the request's `cursor` (`None`
    /// for the first page) and the server's result, in recorded order.
    pub tools_list_pages: Vec<(Option<String>, Value)>,
    /// Every recorded `tools/call`, in start order.
    pub calls: Vec<Interaction>,
    /// Every recorded `resources/read` and `prompts/get`, in order.
    pub reads: Vec<Read>,
    /// Other recorded listings (`resources/list`, `prompts/list`): the
    /// method, the request's `cursor` (`None` for the first page) and the
    /// server's result, in recorded order.
    pub listings: Vec<(String, Option<String>, Value)>,
}

impl Session {
    /// Loads `what`: a tape file when such a file exists, else a run id in
    /// the archive at `archive`.
    pub fn load(what: &str, archive: &Path) -> Result<Session, LoadError> {
        let path = Path::new(what);
        if path.is_file() {
            let file = std::fs::File::open(path)
                .map_err(|e| LoadError(format!("cannot read {what}: {e}")))?;
            let tape = Tape::read(BufReader::new(file))
                .map_err(|e| LoadError(format!("{what} is not a tape: {e}")))?;
            return Session::from_tape(&tape, what.to_owned());
        }
        if !archive.is_dir() {
            return Err(LoadError(format!(
                "{what} is neither a tape file nor a run (no archive at {})",
                archive.display()
            )));
        }
        let opened = Archive::open(archive, ArchiveConfig::default()).map_err(|e| {
            LoadError(format!(
                "cannot open the archive {}: {e}",
                archive.display()
            ))
        })?;
        let tape = Tape::export(&opened, what).map_err(|e| {
            LoadError(format!(
                "{what} is neither a tape file nor a run in {}: {e}",
                archive.display()
            ))
        })?;
        Session::from_tape(&tape, format!("run {what} in {}", archive.display()))
    }

    /// Whether the session was a 2026-07-28 one only: opened without
    /// `initialize` (with `server/discover`, or with that version's
    /// per-request `_meta`). Served over HTTP, it has no session id.
    pub fn sessionless(&self) -> bool {
        self.initialize_result.is_none()
            && (self.discover_result.is_some() || self.request_meta.is_some())
    }

    /// The recorded calls whose arguments or answer hold a redacted value
    /// (the record's marker): the mock serves them as recorded, redacted,
    /// and a client sending the real argument misses them.
    pub fn redacted_calls(&self) -> Vec<&Interaction> {
        use super::matching::holds_redacted;
        self.calls
            .iter()
            .filter(|c| {
                holds_redacted(&c.args)
                    || match &c.outcome {
                        Some(CallOutcome::Ok { result }) => holds_redacted(result),
                        Some(CallOutcome::Error { error, result }) => {
                            reel::marker::holds_marker_str(error)
                                || result.as_ref().is_some_and(holds_redacted)
                        }
                        _ => false,
                    }
            })
            .collect()
    }

    /// The session a tape holds. Large payloads kept as artifacts are put
    /// back in place.
    pub fn from_tape(tape: &Tape, source: String) -> Result<Session, LoadError> {
        let artifacts: HashMap<String, Vec<u8>> = tape.artifacts.iter().cloned().collect();
        let mut session = Session {
            source,
            run_id: tape.header.run.run_id.clone(),
            initialize_params: None,
            initialize_result: None,
            discover_params: None,
            discover_result: None,
            request_meta: None,
            reads: Vec::new(),
            tools_list: None,
            tools_list_pages: Vec::new(),
            calls: Vec::new(),
            listings: Vec::new(),
        };
        // call id -> what it is: an exchange name, or an index into calls.
        enum Slot {
            Exchange(String, Value),
            Call(usize),
        }
        let mut slots: HashMap<String, Slot> = HashMap::new();
        // A run taken in whose agent is a call: its calls are the run's.
        let agents = ingested::run_agents(tape);
        for fact in &tape.facts {
            let mut kind = fact.kind.clone();
            resolve_refs(&mut kind, &artifacts);
            match kind {
                FactKind::CallStarted(c) => {
                    let top = c.parent_call.as_ref().is_none_or(|p| agents.contains(p));
                    if !top || agents.contains(&c.call_id) {
                        continue;
                    }
                    // `mcp:` names are the protocol's exchanges (and the
                    // proxy's unmatched messages), never a tool's: MCP tool
                    // names have no colon.
                    if c.tool_name.starts_with("mcp:") {
                        slots.insert(c.call_id, Slot::Exchange(c.tool_name, c.args));
                    } else {
                        slots.insert(c.call_id.clone(), Slot::Call(session.calls.len()));
                        session.calls.push(Interaction {
                            call_id: c.call_id,
                            tool: c.tool_name,
                            args: if c.args.is_null() {
                                Value::Object(Default::default())
                            } else {
                                c.args
                            },
                            events: Vec::new(),
                            event_seqs: Vec::new(),
                            outcome: None,
                            ended_seq: None,
                            task: Vec::new(),
                        });
                    }
                }
                FactKind::Log(l) if fact.call.is_none() => {
                    // The session's own message, with the calls in flight.
                    let newest = l.in_flight.iter().rev().find_map(|id| match slots.get(id) {
                        Some(Slot::Call(i)) => Some(*i),
                        _ => None,
                    });
                    if let Some(i) = newest {
                        let call = &mut session.calls[i];
                        call.event_seqs.push(fact.seq);
                        call.events.push(Event::Log {
                            level: l.level,
                            logger: l.logger,
                            data: l.data,
                            in_flight: l.in_flight,
                        });
                    }
                }
                other => {
                    let Some(slot) = fact.call.as_ref().and_then(|id| slots.get(id)) else {
                        continue;
                    };
                    match slot {
                        Slot::Exchange(name, args) => {
                            if let FactKind::CallEnded(e) = other {
                                session.exchange_ended(name, args, e.outcome);
                            }
                        }
                        Slot::Call(i) => session.calls[*i].file(fact.seq, other),
                    }
                }
            }
        }
        if ingested::is_ingested(tape) {
            ingested::adapt(&mut session, tape);
        }
        if session.calls.is_empty()
            && session.initialize_result.is_none()
            && session.discover_result.is_none()
            && session.tools_list.is_none()
        {
            return Err(LoadError(format!(
                "{} holds no MCP session (no `{INITIALIZE}`, `{TOOLS_LIST}` or tool calls)",
                session.source
            )));
        }
        Ok(session)
    }
}

impl Interaction {
    /// Files fact `kind` (at `seq`) of this call.
    fn file(&mut self, seq: u64, kind: FactKind) {
        // A task's questions and their answers are its `tasks/get` and
        // `tasks/update` exchanges' (in `task`): not the `tools/call`'s to
        // replay.
        let tasked = !self.task.is_empty();
        if tasked
            && matches!(
                kind,
                FactKind::ElicitRequested(_) | FactKind::ElicitAnswered(_)
            )
        {
            return;
        }
        if matches!(
            kind,
            FactKind::Progress(_) | FactKind::Log(_) | FactKind::ElicitRequested(_)
        ) {
            self.event_seqs.push(seq);
        }
        match kind {
            FactKind::Progress(p) => self.events.push(Event::Progress(p.payload)),
            FactKind::Log(l) => self.events.push(Event::Log {
                level: l.level,
                logger: l.logger,
                data: l.data,
                in_flight: Vec::new(),
            }),
            FactKind::ElicitRequested(q) => self.events.push(Event::Elicit {
                question: q,
                answer: None,
            }),
            FactKind::ElicitAnswered(a) => {
                if let Some(Event::Elicit { answer, .. }) = self
                    .events
                    .iter_mut()
                    .rev()
                    .find(|e| matches!(e, Event::Elicit { answer: None, .. }))
                {
                    *answer = Some(a.outcome);
                }
            }
            FactKind::CallOutput(o)
                if o.stage
                    .as_deref()
                    .is_some_and(|s| s.starts_with("mcp:task")) =>
            {
                self.task.push((o.stage.unwrap_or_default(), o.value));
            }
            FactKind::CallEnded(e) => {
                self.outcome = Some(e.outcome);
                self.ended_seq = Some(seq);
            }
            _ => {}
        }
    }
}

impl Session {
    /// Files the end of a recorded protocol exchange (`mcp:` and its
    /// method) with its request's `args`: the opening, a listing's page, a
    /// read.
    fn exchange_ended(&mut self, name: &str, args: &Value, outcome: CallOutcome) {
        if let Some(method @ ("resources/read" | "prompts/get")) = name.strip_prefix("mcp:") {
            let answer = match outcome {
                CallOutcome::Ok { result } => Ok(result),
                CallOutcome::Error { error, result } => Err((error, result)),
                CallOutcome::Aborted { reason } => {
                    Err((reason.unwrap_or_else(|| "aborted".into()), None))
                }
            };
            self.reads.push(Read {
                method: method.to_owned(),
                params: args.clone(),
                answer,
            });
            return;
        }
        let result = match outcome {
            CallOutcome::Ok { result } => Some(result),
            _ => None,
        };
        if name == INITIALIZE {
            self.initialize_params = Some(args.clone());
            self.initialize_result = result;
        } else if name == DISCOVER {
            self.discover_params = Some(args.clone());
            self.discover_result = result;
            if self.request_meta.is_none() {
                self.request_meta = args.get("_meta").cloned();
            }
        } else if name != TOOLS_LIST {
            if let (Some(result), Some(method)) = (result, name.strip_prefix("mcp:")) {
                let cursor = args
                    .get("cursor")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.listings.push((method.to_owned(), cursor, result));
            }
        } else if let Some(result) = result {
            if let Some(meta) = args.get("_meta") {
                self.request_meta = Some(meta.clone());
            }
            let cursor = args
                .get("cursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() && self.tools_list.is_none() {
                self.tools_list = Some(result.clone());
            }
            self.tools_list_pages.push((cursor, result));
        }
    }
}
