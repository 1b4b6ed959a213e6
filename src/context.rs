//! The context contract: what a tool receives, written once, run unchanged
//! under a recording context (production) and a replay context (tests).
//!
//! # Why a concrete context over a pluggable backend
//!
//! A tool is a plain `async fn(ToolContext, Args) -> Result<Out, ToolError>`.
//! [`ToolContext`] is one concrete type, so tool signatures carry no generic
//! parameter and a registry of tools ([`crate::tools::Tools`]) is a plain map.
//! The context itself decides which facts a capability files and in which
//! order (request, answer); a [`CallBackend`] only supplies the answers and
//! receives the facts. The recorder's backend asks real providers and writes
//! the facts to the archive; the replayer's backend reads answers from the
//! record and matches the facts against it. Because the fact-filing logic
//! lives here once, a recorded run and its replay file the same facts for
//! the same tool code.
//!
//! # Order of facts for each capability
//!
//! | capability | facts filed, in order |
//! |---|---|
//! | [`ToolContext::progress`] | `progress` |
//! | [`ToolContext::log`], [`ToolContext::notify`] | `log` |
//! | [`ToolContext::credential`] | `credential.requested`, then `.resolved` / `.failed`; or `.refused` alone when no provider is attached |
//! | [`Artifacts::put`], [`Artifacts::get`] | `artifact.put` / `artifact.get`; or `artifact.refused` |
//! | [`ToolContext::elicit`] | `elicit.requested`, `elicit.answered`; or `elicit.refused` alone when no elicitor is attached |
//! | [`ToolContext::on_teardown`] | `teardown.registered`, or `teardown.refused` |
//! | [`ToolContext::effect`] | `effect` (after the closure ran, or with the recorded outcome) |
//! | [`ToolContext::now`], [`ToolContext::random`] | `clock`, `random` |
//! | [`ToolContext::set_output`], [`ToolContext::respond`] | `call.output`; after respond a capability refuses or drops its fact, and a `log` of logger [`AFTER_RESPOND_LOGGER`] flags it (see [`after_tool`]) |
//! | [`ToolContext::dispatch`] | the child's own `call.started` .. `call.ended`, under the child's call id |
//!
//! The host files `call.started`, `call.ended`, `cancel.requested` and
//! `teardown.ran`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

use crate::fact::*;
use crate::spec::{InputError, ToolSpec};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An artifact as a store returns it: its ticket and its bytes.
pub type FoundArtifact = (ArtifactMeta, Vec<u8>);

/// A journaled side effect, ready to run once (live) or never (replay).
pub type EffectFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<Value, String>> + Send>;

/// A registered cleanup.
pub type Cleanup = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), String>> + Send>;

/// Everything the host knows about one call, fixed when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    /// Where the call belongs: a run, or no run at all.
    pub home: Home,
    /// The hosting session, when the run is bound to one. Caller data.
    pub session_id: Option<String>,
    /// The identity the caller supplied; `None` when none was.
    pub identity: Option<Identity>,
    /// Teardown scopes this host honours (`[]`: none ever fires).
    pub teardown_scopes: Vec<TeardownScope>,
    /// The fields of this call's `call.started`.
    pub started: CallStarted,
    /// The diagnostic scope of the call when it is recorded (or replayed
    /// from a record); `None` for a context built without recording.
    pub diagnostics: Option<Diagnostics>,
}

/// Where a call belongs: to a run, or to no run at all (seed 000: `runId`
/// is absent where there is no run, as for a call served over MCP). A call
/// outside any run is a stream of its own in the archive, kept under a key
/// the recorder assigns; that key is not a run id and the tool never sees
/// it as one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Home {
    /// The call belongs to this run.
    Run(String),
    /// The call belongs to no run; the archive keeps it (and any call it
    /// dispatches) under `key`.
    OutsideRun {
        /// The archive's key ([`OutsideRun::key`](crate::fact::OutsideRun::key)).
        key: String,
    },
}

impl Home {
    /// The run's id; `None` outside any run.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Home::Run(id) => Some(id),
            Home::OutsideRun { .. } => None,
        }
    }

    /// The key the archive keeps the call's stream under: the run id, or
    /// the key of the call outside any run.
    pub fn key(&self) -> &str {
        match self {
            Home::Run(id) => id,
            Home::OutsideRun { key } => key,
        }
    }
}

/// The diagnostic scope of one invocation (seed 002's `diagnostics`),
/// present when recording is on. It holds only what is on the record, so a
/// replay gives back the same values and a tool that logs them replays
/// without a divergence: no archive path, no process id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    /// The run the call belongs to; `None` for a call outside any run.
    pub run_id: Option<String>,
    /// The call's id.
    pub call_id: String,
    /// The invocation id shared by `call.started`, `call.ended` and the
    /// host's receipts.
    pub invocation_id: String,
    /// What recorded the run (`run.started`'s producer: in replay, the
    /// recorder that made the record).
    pub producer: Producer,
}

/// A resolved credential. Its secret never reaches a fact, a log line or an
/// error message: `Debug` and `Display` print only the fingerprint.
#[derive(Clone)]
pub struct Credential {
    /// The need it answers, e.g. `"github"`.
    pub need: String,
    /// The kind, when known.
    pub kind: Option<String>,
    /// The keyed fingerprint recorded in its place.
    pub fingerprint: Fingerprint,
    /// Expiry, unix nanoseconds.
    pub expires_at: Option<i64>,
    secret: Secret,
}

impl Credential {
    /// A credential; the recorder or replayer fills in the fingerprint.
    pub fn new(need: impl Into<String>, secret: Secret, fingerprint: Fingerprint) -> Credential {
        Credential {
            need: need.into(),
            kind: None,
            fingerprint,
            expires_at: None,
            secret,
        }
    }

    /// The secret, for the one place that needs it (an outgoing request).
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("need", &self.need)
            .field("kind", &self.kind)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// A secret value: zeroed on drop, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(zeroize::Zeroizing<String>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(zeroize::Zeroizing::new(value.into()))
    }

    /// The value. Keep it out of payloads, logs and errors.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A credential the tool needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialNeed {
    /// The need or service name.
    pub need: String,
    /// The kind wanted, when it matters.
    pub kind: Option<String>,
}

impl CredentialNeed {
    /// A need by name.
    pub fn new(need: impl Into<String>) -> CredentialNeed {
        CredentialNeed {
            need: need.into(),
            kind: None,
        }
    }
}

/// A question for the user, in one of MCP 2025-11-25's two modes.
///
/// Form mode asks for structured content under `schema`; URL mode sends the
/// user to `url` (out of band: a sign-in, a payment) and names the
/// elicitation by `elicitation_id`, which the client's completion
/// notification carries back. [`Elicitation::to_mcp`] gives the request
/// parameters as MCP spells them.
///
/// ```
/// use reel::context::Elicitation;
/// let q = Elicitation::url("Sign in to GitHub", "https://github.test/login", "el-1");
/// let mcp = q.to_mcp();
/// assert_eq!(mcp["mode"], "url");
/// assert_eq!(mcp["url"], "https://github.test/login");
/// assert_eq!(mcp["elicitationId"], "el-1");
/// assert_eq!(mcp["message"], "Sign in to GitHub");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// The question.
    pub message: String,
    /// JSON Schema of the answer (form mode; `{}` in URL mode). An
    /// accepted answer is validated against all of it.
    pub schema: Value,
    /// Form or url.
    pub mode: ElicitMode,
    /// Time to live in milliseconds.
    pub ttl_ms: Option<u64>,
    /// URL mode: the link the user visits.
    pub url: Option<String>,
    /// The elicitation's id. URL mode: the id the client's completion
    /// notification names. Either mode, over MCP 2026-07-28: the key of
    /// the question in the input-required round's `inputRequests` (without
    /// one, the host names it).
    pub elicitation_id: Option<String>,
}

impl Elicitation {
    /// A form question.
    pub fn form(message: impl Into<String>, schema: Value) -> Elicitation {
        Elicitation {
            message: message.into(),
            schema,
            mode: ElicitMode::Form,
            ttl_ms: None,
            url: None,
            elicitation_id: None,
        }
    }

    /// A URL question: the user visits `url`; `elicitation_id` names this
    /// elicitation for the client's completion notification.
    pub fn url(
        message: impl Into<String>,
        url: impl Into<String>,
        elicitation_id: impl Into<String>,
    ) -> Elicitation {
        Elicitation {
            mode: ElicitMode::Url,
            url: Some(url.into()),
            elicitation_id: Some(elicitation_id.into()),
            ..Elicitation::form(message, json!({}))
        }
    }

    /// Bounds how long to wait for an answer.
    pub fn ttl_ms(mut self, ttl: u64) -> Elicitation {
        self.ttl_ms = Some(ttl);
        self
    }

    /// The `elicitation/create` request parameters, as MCP 2025-11-25
    /// spells them: `mode`, `message`, and `requestedSchema` (form) or
    /// `url` and `elicitationId` (url).
    pub fn to_mcp(&self) -> Value {
        match self.mode {
            ElicitMode::Form => json!({
                "mode": "form",
                "message": self.message,
                "requestedSchema": self.schema,
            }),
            ElicitMode::Url => json!({
                "mode": "url",
                "message": self.message,
                "url": self.url,
                "elicitationId": self.elicitation_id,
            }),
        }
    }
}

/// The user's answer, as the elicitor reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitAnswer {
    /// Accept / decline / cancel / timeout / error.
    pub outcome: ElicitOutcome,
    /// Validation errors of the answer against the schema.
    pub validation_errors: Vec<String>,
    /// True when the answer was known without asking.
    pub pre_resolved: bool,
}

/// An agent-core style progress report: build it with
/// `Report::new().used_model(true).payload(json!({...}))`, or as a struct.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// Whether this step used a model; `None` means unknown.
    pub used_model: Option<bool>,
    /// App-defined detail, kept only when content logging is on.
    pub payload: Option<Value>,
}

impl Report {
    /// A report saying nothing yet (model use unknown, no payload).
    pub fn new() -> Report {
        Report::default()
    }

    /// Whether this step used a model.
    pub fn used_model(mut self, used: bool) -> Report {
        self.used_model = Some(used);
        self
    }

    /// App-defined detail, kept only when content logging is on.
    pub fn payload(mut self, payload: Value) -> Report {
        self.payload = Some(payload);
        self
    }
}

/// Refusals and failures of context capabilities. Each message says what
/// to do; none contains a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// No credential provider attached (fail closed).
    #[error("credential {need:?} refused: no credential provider is attached to this call; attach one on the host with `.credentials(provider)` when starting the call, or branch on `ctx.has_credentials()`")]
    NoCredentialProvider {
        /// The need.
        need: String,
    },
    /// The provider could not resolve the credential.
    #[error("credential {need:?} could not be resolved: {reason}")]
    CredentialFailed {
        /// The need.
        need: String,
        /// The provider's reason.
        reason: String,
    },
    /// No artifact store attached (fail closed).
    #[error("artifacts refused: no artifact store is attached to this call; attach one on the host with `.artifacts(store)` when starting the call, or branch on `ctx.has_artifacts()`")]
    NoArtifactStore,
    /// The store failed.
    #[error("artifact store failed: {0}")]
    ArtifactStore(String),
    /// No elicitor attached (fail closed).
    #[error("cannot ask the user: no elicitor is attached to this call; attach one on the host with `.elicitor(elicitor)` when starting the call, or branch on `ctx.has_elicitor()`")]
    NoElicitor,
    /// The elicitor failed (a transport error): no answer came.
    #[error("asking the user failed: the elicitor reported an error ({0}); no answer came, so treat the question as unanswered (ask again, or end the call)")]
    Elicit(String),
    /// A teardown scope this host does not honour.
    #[error("teardown scope {scope} is not honoured by {door}, which honours: {}; branch on `ctx.teardown_scopes()`", honoured_list(.honoured))]
    ScopeNotHonoured {
        /// The scope asked for.
        scope: TeardownScope,
        /// The door (seed 000): which host, serving what, refused it.
        door: String,
        /// The scopes the host honours.
        honoured: Vec<TeardownScope>,
    },
    /// The session scope on a run with no session id: a session-scoped
    /// cleanup would be filed under no session (never under `""`).
    #[error("teardown scope session refused: this run has no session id, so no session of its own would ever end and run the cleanup; start the run with `.session(id)` on the host (a non-empty id), or register under the run scope")]
    NoSession,
    /// No dispatcher attached.
    #[error("cannot call tool {tool:?}: this call has no tool dispatch; attach one on the host with `.dispatcher(tools)`, or branch on `ctx.can_dispatch()`")]
    NoDispatch {
        /// The tool asked for.
        tool: String,
    },
    /// The effect's outcome could not be used.
    #[error("effect {name:?}: {detail}")]
    Effect {
        /// The effect.
        name: String,
        /// What went wrong.
        detail: String,
    },
    /// A capability used after [`ToolContext::respond`]: respond ended the
    /// call, so nothing after it is part of the call's result.
    #[error("{capability} refused: respond already ended this call, and its result is the responded value; return respond's early exit at once (`ctx.respond(value)?` or `return ctx.respond(value);`) so nothing runs after it")]
    AfterRespond {
        /// The capability, e.g. `"credential"` or `"respond"`.
        capability: String,
    },
    /// No service of the type asked for is registered for this call.
    #[error("no service of type {type_name} is registered for this call: register one on the host with `.service(Arc::new(value))` on the call (in replay, with `ReplayOptions::service`)")]
    NoService {
        /// The type asked for (`std::any::type_name`).
        type_name: &'static str,
    },
    /// The call's input did not fit the type asked for.
    #[error("the input of tool {tool:?} does not fit type {type_name}: {detail}")]
    InputType {
        /// The tool.
        tool: String,
        /// The type asked for.
        type_name: &'static str,
        /// What did not fit.
        detail: String,
    },
    /// The call was cancelled.
    #[error("cancelled{}", .reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    Cancelled {
        /// Why, when known.
        reason: Option<String>,
    },
    /// The tool returned, but the recorder could not make the call's facts
    /// durable before its result was to be handed back (call-boundary
    /// durability): the result is withheld, because nothing says the call
    /// is on the record. The tool did run: its effects happened.
    #[error("the tool ran, but the recorder could not make the call's facts durable ({detail}); its result is withheld. Look at the recorder's store (its log says more); a cluster store waits as long as its offline policy allows (REEL_NATS_OFFLINE_WAIT_MS)")]
    NotRecorded {
        /// What the recorder's store said.
        detail: String,
    },
}

/// The door a call came through, for a person (seed 000: a refused
/// teardown scope "throws, naming the door"): what served it, and where it
/// belongs. Built only from what is on the record, so a replay says the
/// same.
fn door(info: &CallInfo) -> String {
    let host = match &info.diagnostics {
        Some(d) => format!("{} {}", d.producer.name, d.producer.version),
        None => "a context built without recording".to_owned(),
    };
    match &info.home {
        // Not the run's id: two runs of the same code refuse alike.
        Home::Run(_) => format!("this door ({host}, serving a run)"),
        Home::OutsideRun { .. } => format!("this door ({host}, serving a call outside any run)"),
    }
}

fn honoured_list(h: &[TeardownScope]) -> String {
    if h.is_empty() {
        "none".into()
    } else {
        h.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The error a tool returns.
///
/// `?` works on any [`std::error::Error`] (`std::io::Error`,
/// `serde_json::Error`, an HTTP client's error, a type of your own): it
/// becomes [`ToolError::Source`], which keeps the error itself, so
/// [`ToolError::source`], [`ToolError::chain`] and
/// [`ToolError::downcast_ref`] reach it and its causes. A
/// [`ContextError`] becomes [`ToolError::Context`], as before. The
/// recorded message is the error's `Display`, unchanged.
///
/// Like `anyhow::Error`, `ToolError` does not itself implement
/// `std::error::Error`: a blanket `From<E: Error>` and the reflexive
/// `From<ToolError>` could not both exist otherwise. Use
/// [`ToolError::source`] / [`ToolError::chain`] for the chain, or
/// `.to_string()` where an `Error` is wanted.
///
/// ```
/// use reel::context::ToolError;
/// fn read(path: &str) -> Result<String, ToolError> {
///     Ok(std::fs::read_to_string(path)?)
/// }
/// let err = read("/nonexistent/reel-doc-test").unwrap_err();
/// let io = err.downcast_ref::<std::io::Error>().expect("the io::Error itself");
/// assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
/// assert_eq!(err.to_string(), io.to_string());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// A context capability refused or failed.
    Context(ContextError),
    /// The tool's own failure, as a message (also what replay gives back
    /// for a recorded [`ToolError::Source`]: the record keeps the message).
    Failed(String),
    /// The tool's own failure, the error itself (from `?` on any
    /// `std::error::Error`, or from an effect's error, live).
    Source(ErrorSource),
    /// The arguments did not fit the tool.
    InvalidArgs {
        /// The tool.
        tool: String,
        /// What did not fit.
        detail: String,
    },
    /// No tool of that name.
    UnknownTool(String),
    /// The input did not match the tool's input schema: the tool did not
    /// run.
    InvalidInput {
        /// The tool.
        tool: String,
        /// Every failing place (JSON pointer) and what is wrong there.
        errors: Vec<InputError>,
        /// Wanted arguments that still hold their claim ticket.
        unresolved: Vec<String>,
    },
    /// Respond's early exit (see [`ToolContext::respond`]): not a failure.
    /// The host turns it into the call's result, the responded value. It
    /// can only be made by `respond`.
    Responded(Responded),
}

/// The early exit [`ToolContext::respond`] returns: carries the responded
/// value to the host, which ends the call with it ([`after_tool`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Responded {
    value: Value,
}

impl Responded {
    /// The responded value.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

impl fmt::Display for Responded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the tool responded, which ends the call with the responded value; a host ends the call with it (this error reaches you only when a tool runs without a host)")
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::Context(e) => fmt::Display::fmt(e, f),
            ToolError::Failed(m) => f.write_str(m),
            ToolError::Source(s) => f.write_str(&s.message),
            ToolError::InvalidArgs { tool, detail } => {
                write!(f, "invalid arguments for tool {tool:?}: {detail}")
            }
            ToolError::UnknownTool(tool) => write!(f, "no tool {tool:?} is registered"),
            ToolError::InvalidInput {
                tool,
                errors,
                unresolved,
            } => f.write_str(&crate::spec::rejection(tool, errors, unresolved)),
            ToolError::Responded(r) => fmt::Display::fmt(r, f),
        }
    }
}

/// A tool's own error, kept whole: its message (what is recorded), the
/// value (for [`ToolError::downcast_ref`]) and, when it is a
/// `std::error::Error`, its cause chain. Two are equal when their messages
/// are.
#[derive(Clone)]
pub struct ErrorSource {
    message: String,
    value: Arc<dyn std::any::Any + Send + Sync>,
    error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl ErrorSource {
    /// The message (the error's `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }

    fn of_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> ErrorSource {
        let message = e.to_string();
        let value = Arc::new(e);
        ErrorSource {
            message,
            value: value.clone(),
            error: Some(value),
        }
    }

    fn of_display<E: fmt::Display + Send + Sync + 'static>(e: E) -> ErrorSource {
        ErrorSource {
            message: e.to_string(),
            value: Arc::new(e),
            error: None,
        }
    }
}

impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(e) => fmt::Debug::fmt(e, f),
            None => fmt::Debug::fmt(&self.message, f),
        }
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &ErrorSource) -> bool {
        self.message == other.message
    }
}

impl Eq for ErrorSource {}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(e: E) -> ToolError {
        let boxed: Box<dyn std::any::Any + Send + Sync> = Box::new(e);
        match boxed.downcast::<ContextError>() {
            Ok(context) => ToolError::Context(*context),
            Err(other) => match other.downcast::<E>() {
                Ok(e) => ToolError::Source(ErrorSource::of_error(*e)),
                Err(_) => unreachable!("boxed as E just above"),
            },
        }
    }
}

/// `ToolError` as a `std::error::Error` (for `Box<dyn Error>`,
/// `io::Error::other` and `?` into them): it keeps the message and the
/// chain.
struct BoxedToolError(ToolError);

impl fmt::Debug for BoxedToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for BoxedToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for BoxedToolError {
    // The wrapped error shows the same message as the box: its causes
    // follow.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source().and_then(|e| e.source())
    }
}

impl From<ToolError> for Box<dyn std::error::Error + Send + Sync + 'static> {
    fn from(e: ToolError) -> Self {
        Box::new(BoxedToolError(e))
    }
}

impl From<ToolError> for Box<dyn std::error::Error + 'static> {
    fn from(e: ToolError) -> Self {
        Box::new(BoxedToolError(e))
    }
}

impl ToolError {
    /// A tool failure with a message.
    pub fn msg(message: impl fmt::Display) -> ToolError {
        ToolError::Failed(message.to_string())
    }

    /// True when the failure is a cancellation.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ToolError::Context(ContextError::Cancelled { .. }))
    }

    /// The error this one wraps: the tool's own error (for
    /// [`ToolError::Source`]) or the context's; `None` for a message.
    pub fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ToolError::Context(e) => Some(e),
            ToolError::Source(s) => s
                .error
                .as_deref()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }

    /// The wrapped error and its causes, outermost first (empty for a
    /// message).
    pub fn chain(&self) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
        std::iter::successors(self.source(), |e| e.source())
    }

    /// The tool's own error as a `T`, when it is one (live: replay gives
    /// back the recorded message, [`ToolError::Failed`], and this is
    /// `None`). Also looks through the cause chain.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            ToolError::Source(s) => s
                .value
                .downcast_ref::<T>()
                .or_else(|| self.chain().find_map(|e| e.downcast_ref::<T>())),
            _ => self.chain().find_map(|e| e.downcast_ref::<T>()),
        }
    }

    /// The value of an effect's error of a type that is not a
    /// `std::error::Error` (a `String`, say), live.
    pub fn downcast_value<T: 'static>(&self) -> Option<&T> {
        match self {
            ToolError::Source(s) => s.value.downcast_ref::<T>(),
            _ => None,
        }
    }
}

/// The answers a context needs and the sink for the facts it files: one per
/// call. Implemented by the recorder (live) and the replayer (from the log).
///
/// Contract: [`CallBackend::emit`] is called for every fact the tool causes,
/// in order, and must neither block nor fail. A progress report comes as a
/// [`Progress`] fact whose `count` is 0: the backend has it numbered by
/// its stream's [`Sequencer`](crate::sequence::Sequencer) in the order it
/// was filed (it is the hot path: a tool calls it in loops, so a live
/// backend may send it in a compact form, as the recorder does). An answering method is called
/// right after the context filed the fact that asks (e.g.
/// `credential.requested`) and before it files the answer.
pub trait CallBackend: Send + Sync {
    /// Files one fact of this call.
    fn emit(&self, kind: FactKind);
    /// An await point: waits while the write queue is over its bound.
    fn ready(&self) -> BoxFuture<'_, ()>;
    /// True when a credential provider is attached.
    fn has_credentials(&self) -> bool;
    /// Resolves a credential; `Err` is the provider's reason.
    fn credential<'a>(
        &'a self,
        need: &'a CredentialNeed,
        mode: CredentialMode,
    ) -> BoxFuture<'a, Result<Credential, String>>;
    /// True when an artifact store is attached.
    fn has_artifacts(&self) -> bool;
    /// Stores bytes under the run's scope; returns the origin-stamped ticket.
    fn put_artifact<'a>(
        &'a self,
        media_type: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<ArtifactMeta, String>>;
    /// Fetches an artifact of the run's scope by id.
    fn get_artifact<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>>;
    /// True when an elicitor is attached.
    fn has_elicitor(&self) -> bool;
    /// Asks the user.
    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>>;
    /// Runs (live) or looks up (replay) a journaled effect.
    fn effect<'a>(
        &'a self,
        name: &'a str,
        request: &'a Value,
        run: EffectFn,
    ) -> BoxFuture<'a, EffectOutcome>;
    /// Reads the clock, unix nanoseconds.
    fn clock(&self) -> i64;
    /// Draws randomness.
    fn random(&self) -> u64;
    /// Registers a cleanup with the holder of `scope` named by `holder`
    /// (the call, the run, or the (tenant, principal, session) of
    /// [`TeardownKey`]: the same key [`ToolContext::teardown_key`] gives the
    /// tool). A repeat under the same (tool, scope, key) in that holder
    /// keeps the first cleanup and refreshes its liveness: the holder counts
    /// the registrations and keeps the time of the last one (the backend's
    /// clock), which its `teardown.ran` reports.
    fn register_teardown(
        &self,
        scope: TeardownScope,
        holder: &TeardownKey,
        key_hash: &str,
        cleanup: Cleanup,
    ) -> Registration;
    /// The hash recorded in place of a teardown key (in `teardown.*`
    /// facts, and the name its holder keeps the cleanup under). The
    /// default is the unkeyed [`teardown_key_hash`]; the recorder keys it
    /// under the fingerprint key ([`keyed_teardown_key_hash`]), and the
    /// replayer gives back the recorded hash a key was bound to.
    fn teardown_key_hash(&self, tool: &str, scope: TeardownScope, key: &str) -> String {
        teardown_key_hash(tool, scope, key)
    }
    /// True when nested tool dispatch is available.
    fn can_dispatch(&self) -> bool;
    /// The tools this call can dispatch to, sorted: `None` when it has no
    /// dispatch, `Some([])` for a dispatch with no tools. The default,
    /// for backends that do not know, is `None` without dispatch and
    /// `Some([])` with it; the recorder and the replayer override it.
    fn dispatch_tools(&self) -> Option<Vec<String>> {
        self.can_dispatch().then(Vec::new)
    }
    /// Runs another tool as a child of this call.
    fn dispatch<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
    /// Delivers a log line to a listening client; false when none listens.
    fn deliver_log(&self, level: Level, data: &Value) -> bool;
    /// [`CallBackend::deliver_log`] with the logger's name (MCP's
    /// `logger`), what the context calls. The default drops the name and
    /// delivers with `deliver_log`.
    fn deliver_log_from(&self, level: Level, logger: Option<&str>, data: &Value) -> bool {
        let _ = logger;
        self.deliver_log(level, data)
    }
    /// Whether `report` payloads are kept (content logging).
    fn content_logging(&self) -> bool;
}

/// What a holder answers to [`CallBackend::register_teardown`]: seed 000's
/// "registering twice under one (tool, scope, key) is a no-op that keeps the
/// FIRST cleanup (it holds the live handle) and refreshes liveness", as
/// numbers. `teardown.registered` records all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// True for the first registration under the key (its cleanup is the
    /// one kept); false for a repeat.
    pub first: bool,
    /// Registrations under the key in this holder so far, this one included.
    pub registrations: u64,
    /// When this one was made, unix nanoseconds from the backend's clock.
    pub at: i64,
}

/// The execution context a tool receives. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<Inner>,
}

struct Inner {
    info: CallInfo,
    backend: Arc<dyn CallBackend>,
    cancel: CancellationToken,
    cancel_reason: Arc<Mutex<Option<String>>>,
    declared: Vec<Credential>,
    subflows: Mutex<HashMap<String, SubFlowLogger>>,
    outputs: Mutex<Vec<Value>>,
    /// The value `respond` ended the call with. A `OnceLock`, so that the
    /// check every capability makes (`progress()` included) is one atomic
    /// load, never a lock.
    responded: OnceLock<Value>,
    /// The logger name of `log` and `notify` facts (`set_logger`).
    logger: Mutex<Option<String>>,
    services: Services,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("home", &self.inner.info.home)
            .field("call_id", &self.inner.info.started.call_id)
            .field("tool", &self.inner.info.started.tool_name)
            .finish_non_exhaustive()
    }
}

/// The host's handle on a call's cancellation.
#[derive(Clone, Debug)]
pub struct CancelHandle {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

impl Default for CancelHandle {
    fn default() -> CancelHandle {
        CancelHandle::new()
    }
}

impl CancelHandle {
    /// A fresh, untripped handle.
    pub fn new() -> CancelHandle {
        CancelHandle {
            token: CancellationToken::new(),
            reason: Arc::new(Mutex::new(None)),
        }
    }

    /// Trips the token (the host files `cancel.requested` itself). The
    /// first reason given is kept.
    pub fn cancel(&self, reason: Option<String>) {
        let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if r.is_none() {
            *r = reason;
        }
        drop(r);
        self.token.cancel();
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// A handle for a child call: cancelled with this one, and on its own.
    pub fn child(&self) -> CancelHandle {
        CancelHandle {
            token: self.token.child_token(),
            reason: self.reason.clone(),
        }
    }

    /// The reason given to the first [`CancelHandle::cancel`].
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl ToolContext {
    /// Builds a context for one call (host side: the recorder or replayer).
    /// `declared` are the credentials resolved for the tool's declared
    /// needs, in declaration order (an `Option` works: none or one).
    pub fn new(
        info: CallInfo,
        backend: Arc<dyn CallBackend>,
        declared: impl IntoIterator<Item = Credential>,
        cancel: &CancelHandle,
    ) -> ToolContext {
        ToolContext {
            inner: Arc::new(Inner {
                info,
                backend,
                cancel: cancel.token.clone(),
                cancel_reason: cancel.reason.clone(),
                declared: declared.into_iter().collect(),
                subflows: Mutex::new(HashMap::new()),
                outputs: Mutex::new(Vec::new()),
                responded: OnceLock::new(),
                logger: Mutex::new(None),
                services: Services::default(),
            }),
        }
    }

    /// Gives the context the host's typed services ([`ToolContext::get`]).
    /// A host calls it right after [`ToolContext::new`], before the tool
    /// has the context; on a context already shared it gives the context
    /// back unchanged.
    pub fn with_services(mut self, services: Services) -> ToolContext {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.services = services;
        }
        self
    }

    fn emit(&self, kind: FactKind) {
        self.inner.backend.emit(kind);
    }

    /// The value [`ToolContext::respond`] ended the call with, if it did.
    pub fn responded(&self) -> Option<Value> {
        self.inner.responded.get().cloned()
    }

    /// Files the anomaly of code that went on after respond: a `warning`
    /// log of logger [`AFTER_RESPOND_LOGGER`], never delivered to a client.
    fn flag_after_respond(&self, data: Value) {
        self.emit(FactKind::Log(Log {
            level: Level::Warning,
            logger: Some(AFTER_RESPOND_LOGGER.into()),
            subflow: None,
            data,
            delivered: false,
        }));
    }

    /// `Err(AfterRespond)` (flagged on the record) once the call responded:
    /// a capability that can fail refuses; one that cannot drops its fact.
    fn after_respond(&self, capability: &str) -> Result<(), ContextError> {
        if self.inner.responded.get().is_none() {
            return Ok(());
        }
        let err = ContextError::AfterRespond {
            capability: capability.into(),
        };
        self.flag_after_respond(json!({
            "message": err.to_string(),
            "capability": capability,
        }));
        Err(err)
    }

    // ---- identity facts ---------------------------------------------------

    /// The run this call belongs to; `None` for a call outside any run
    /// (seed 000: `runId` is absent where there is no run, as for a call
    /// served over MCP).
    pub fn run_id(&self) -> Option<&str> {
        self.inner.info.home.run_id()
    }

    /// Where the call belongs: a run, or no run (with the key the archive
    /// keeps it under).
    pub fn home(&self) -> &Home {
        &self.inner.info.home
    }

    /// The tool's metadata (seed 004's `metadata`): its spec, when it
    /// declared one, as on the record. The same as [`ToolContext::spec`].
    pub fn metadata(&self) -> Option<&ToolSpec> {
        self.spec()
    }

    /// The parsed, validated input as recorded in `call.started` (after
    /// the spec's wants were resolved into it), as JSON.
    pub fn input_json(&self) -> &Value {
        &self.inner.info.started.args
    }

    /// The input as `T` (seed 004's `input`):
    /// [`ContextError::InputType`] when it does not fit `T`.
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, ContextError> {
        serde_json::from_value(self.input_json().clone()).map_err(|e| ContextError::InputType {
            tool: self.tool_name().into(),
            type_name: std::any::type_name::<T>(),
            detail: e.to_string(),
        })
    }

    /// The history of the input, oldest first (seed 004's
    /// `inputHistory`). A tool cannot change its input here, so the
    /// history is the recorded input alone.
    pub fn input_history(&self) -> Vec<Value> {
        vec![self.input_json().clone()]
    }

    /// The protocol the call came over, e.g. `"mcp"`, as recorded.
    pub fn protocol(&self) -> Option<&str> {
        self.inner.info.started.protocol.as_deref()
    }

    /// The call that dispatched this one, when it is a child call.
    pub fn parent_call(&self) -> Option<&str> {
        self.inner.info.started.parent_call.as_deref()
    }

    /// The client that made the request (name, version, title), as
    /// recorded; `None` when the host gave none.
    pub fn client_info(&self) -> Option<&ClientInfo> {
        self.inner.info.started.client_info.as_ref()
    }

    /// The AI platform making the request (seed 004's `platform`): the
    /// host's, when it set one on the call (a value outside the list is
    /// [`Platform::Unknown`]), else detected from the recorded client info
    /// by [`Platform::detect`]. Replay gives the same from the record.
    pub fn platform(&self) -> Platform {
        match self.inner.info.started.platform.as_deref() {
            Some(p) => Platform::parse(p),
            None => Platform::detect(self.client_info()),
        }
    }

    /// A typed service the host registered for this call (seed 004's
    /// `get(token)`, by type): [`ContextError::NoService`], naming the
    /// type, when none is registered. Live, the host registers services
    /// for every call with `Recorder::service` and for one call with
    /// `CallBuilder::service` (the call's own wins for its type); a child
    /// call of [`ToolContext::dispatch`] gets its parent's services, the
    /// same `Arc`s. In replay, the test registers them with
    /// `ReplayOptions::service`, for every call, children included.
    /// Services are not facts: nothing about them is recorded.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ContextError> {
        self.inner.services.get::<T>()
    }

    /// The hosting session, when bound to one (caller data, not identity).
    pub fn session_id(&self) -> Option<&str> {
        self.inner.info.session_id.as_deref()
    }

    /// The identity the caller supplied; `None` when the caller gave none.
    pub fn identity(&self) -> Option<&Identity> {
        self.inner.info.identity.as_ref()
    }

    /// This invocation's id.
    pub fn call_id(&self) -> &str {
        &self.inner.info.started.call_id
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.inner.info.started.tool_name
    }

    /// The tool's id (its name when no id was given).
    pub fn tool_id(&self) -> &str {
        let s = &self.inner.info.started;
        s.tool_id.as_deref().unwrap_or(&s.tool_name)
    }

    /// Everything `call.started` recorded about this call.
    pub fn call(&self) -> &CallStarted {
        &self.inner.info.started
    }

    /// The opaque invocation id shared by this call's `call.started` and
    /// `call.ended` and the host's receipts. Always present: the host
    /// generates one when it sets none; a record made before invocation ids
    /// were always present has none, and its call id stands in.
    pub fn invocation_id(&self) -> &str {
        let s = &self.inner.info.started;
        s.invocation_id.as_deref().unwrap_or(&s.call_id)
    }

    /// Sync or async: whether the registry (or host) accepted a synchronous
    /// or an asynchronous function for this tool.
    pub fn mode(&self) -> CallMode {
        self.inner.info.started.mode
    }

    /// The tool's spec, when it declared one (as on the record).
    pub fn spec(&self) -> Option<&ToolSpec> {
        self.inner.info.started.spec.as_deref()
    }

    /// The diagnostic scope of this invocation: present when the call is
    /// recorded (and in replay, with the record's values); `None` in a
    /// context built without recording.
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        self.inner.info.diagnostics.as_ref()
    }

    /// Iteration of the agent loop.
    pub fn iteration(&self) -> u32 {
        self.inner.info.started.iteration
    }

    /// Claim tickets of resolved wanted artifacts; `None` when none.
    pub fn wanted(&self) -> Option<&BTreeMap<String, ArtifactMeta>> {
        self.inner.info.started.wanted.as_ref()
    }

    /// Teardown scopes this host honours; empty means none ever fires.
    pub fn teardown_scopes(&self) -> &[TeardownScope] {
        &self.inner.info.teardown_scopes
    }

    // ---- cancellation -------------------------------------------------------

    /// True once cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Completes when cancellation is requested.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// Runs `fut` unless the call is cancelled first: every await of the
    /// context goes through here. Cancellation wins a tie (it is polled
    /// first), so a replay, which trips the token at the recorded point,
    /// ends the same await the same way. On cancellation `fut` is dropped
    /// and nothing of it is filed: `cancel.requested` (the host's) already
    /// marks the point, and the call ends `aborted` unless the tool goes on.
    async fn until_cancelled<T>(&self, fut: impl Future<Output = T>) -> Result<T, ContextError> {
        self.check_cancel()?;
        let cancelled = self.inner.cancel.cancelled();
        futures::pin_mut!(cancelled);
        futures::pin_mut!(fut);
        match futures::future::select(cancelled, fut).await {
            futures::future::Either::Left(_) => Err(self.cancelled_error()),
            futures::future::Either::Right((value, _)) => Ok(value),
        }
    }

    fn cancelled_error(&self) -> ContextError {
        ContextError::Cancelled {
            reason: self
                .inner
                .cancel_reason
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    /// `Err(Cancelled)` once cancellation was requested: `ctx.check_cancel()?`.
    pub fn check_cancel(&self) -> Result<(), ContextError> {
        if self.is_cancelled() {
            Err(ContextError::Cancelled {
                reason: self
                    .inner
                    .cancel_reason
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            })
        } else {
            Ok(())
        }
    }

    /// The cancellation token, to pass on to other code.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    // ---- progress -----------------------------------------------------------

    /// Reports progress. Never blocks, never fails; the payload is stored
    /// untouched (after redaction). A top-level string `message` is what a
    /// person reads; the rest is what the record keeps.
    ///
    /// Where reel differs from seed 000 ("payload ... forwarded
    /// untouched"): the payload is redacted before it is persisted, like
    /// every fact ([`crate::redact`]): values under secret-named keys
    /// (`token`, `access_token`, `api_key`, ...) become `[REDACTED]`, and
    /// the run's known secrets are scrubbed from its strings. Counts and
    /// usage are not secrets: `token_count`, `promptTokenCount`,
    /// `total_tokens` and the other usage fields of the model APIs are kept
    /// as sent, and no number is learned from them.
    pub fn progress(&self, payload: Value) {
        if self.after_respond("progress").is_err() {
            return;
        }
        // The context builds the fact, as for every capability. Its count
        // is numbering, like its seq: 0 here, and given by the stream's
        // `Sequencer` in filing order, so that counts follow record order
        // also when clones of the context report concurrently (the
        // recorder's writer numbers it; the replayer's backend as it files).
        self.inner
            .backend
            .emit(FactKind::Progress(Progress { payload, count: 0 }));
    }

    /// MCP-style progress (`notifications/progress`): files the payload
    /// `{progress, total?, message?}` through [`ToolContext::progress`].
    /// The optional parts are named, never positional: build them with
    /// [`McpProgress`]; a bare number is a progress with neither.
    ///
    /// Unlike FrontMCP's `progress`, it returns nothing: whether a report
    /// went to a client is not in the record (a `progress` fact has no
    /// `delivered`, as a `log` fact has), so a replay could not give the
    /// live answer back, and a tool branching on it would replay
    /// differently. Use [`ToolContext::notify`] where the tool needs to
    /// know.
    ///
    /// ```
    /// use reel::context::{McpProgress, ToolContext};
    /// fn walk(ctx: &ToolContext) {
    ///     ctx.progress_mcp(McpProgress::new(3.0).total(12.0).message("Hop 3 of 12"));
    ///     ctx.progress_mcp(4.0);
    /// }
    /// ```
    pub fn progress_mcp(&self, progress: impl Into<McpProgress>) {
        let McpProgress {
            progress,
            total,
            message,
        } = progress.into();
        let mut p = serde_json::Map::new();
        p.insert("progress".into(), json!(progress));
        if let Some(t) = total {
            p.insert("total".into(), json!(t));
        }
        if let Some(m) = message {
            p.insert("message".into(), json!(m));
        }
        self.progress(Value::Object(p));
    }

    /// agent-core style report: `{usedModel?, payload?}`; the payload is kept
    /// only when content logging is on.
    pub fn report(&self, report: Report) {
        let mut p = serde_json::Map::new();
        if let Some(u) = report.used_model {
            p.insert("usedModel".into(), json!(u));
        }
        if let Some(payload) = report.payload {
            if self.inner.backend.content_logging() {
                p.insert("payload".into(), payload);
            }
        }
        self.progress(Value::Object(p));
    }

    // ---- logging --------------------------------------------------------------

    /// Logs at an RFC 5424 level. Never fails.
    pub fn log(&self, level: Level, data: impl Into<Value>) {
        self.log_with(level, None, None, data.into());
    }

    /// MCP `notify` (seed 004's `notify(message)`): a log message for the
    /// client at level info, FrontMCP's default.
    ///
    /// Returns whether the message was handed on for a client: true when
    /// the call's log listener accepted it (over MCP: a client session is
    /// attached and the message passes the level the client set, and it
    /// was queued for sending; it is sent after, in order, and before the
    /// call's result). It is not an acknowledgement: true does not mean the
    /// client received it (a client that went away meanwhile makes no
    /// error). False when no listener is attached, the client's level
    /// filters the message out, the queue is closed, or the call has
    /// responded. The `log` fact records the same boolean as `delivered`,
    /// and a replay returns the recorded one.
    pub fn notify(&self, message: impl Into<Value>) -> bool {
        self.notify_at(Level::Info, message)
    }

    /// [`ToolContext::notify`] at `level`. The level comes first, as in
    /// [`ToolContext::log`]: one order for every logging method.
    pub fn notify_at(&self, level: Level, message: impl Into<Value>) -> bool {
        self.log_with(level, None, None, message.into())
    }

    /// Names the logger of this call's later `log` and `notify` facts
    /// (MCP's `logger`); none until set.
    pub fn set_logger(&self, name: impl Into<String>) {
        *self.inner.logger.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.into());
    }

    fn log_with(
        &self,
        level: Level,
        logger: Option<String>,
        subflow: Option<String>,
        data: Value,
    ) -> bool {
        if self.after_respond("log").is_err() {
            return false;
        }
        let logger = logger.or_else(|| {
            self.inner
                .logger
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        });
        let delivered = self
            .inner
            .backend
            .deliver_log_from(level, logger.as_deref(), &data);
        self.emit(FactKind::Log(Log {
            level,
            logger,
            subflow,
            data,
            delivered,
        }));
        delivered
    }

    /// The sub-flow logger of this call: the same instance each time.
    pub fn subflow_logger(&self) -> SubFlowLogger {
        self.named_subflow("main")
    }

    /// A named sub-flow logger of this call: the same instance per name.
    pub fn named_subflow(&self, name: &str) -> SubFlowLogger {
        let mut map = self
            .inner
            .subflows
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.entry(name.to_owned())
            .or_insert_with(|| SubFlowLogger {
                inner: Arc::new(SubFlowInner {
                    ctx: Arc::downgrade(&self.inner),
                    name: name.to_owned(),
                }),
            })
            .clone()
    }

    // ---- credentials ----------------------------------------------------------

    /// True when a credential provider is attached.
    pub fn has_credentials(&self) -> bool {
        self.inner.backend.has_credentials()
    }

    /// The credential resolved for the tool's first declared need, when it
    /// declared one (a tool whose declared need fails does not run at all).
    /// See [`ToolContext::declared`] for the others.
    pub fn declared_credential(&self) -> Option<&Credential> {
        self.inner.declared.first()
    }

    /// The credential resolved for the declared need `need` (declared in the
    /// tool's spec or by the host for this call); `None` when it was not
    /// declared.
    pub fn declared(&self, need: &str) -> Option<&Credential> {
        self.inner.declared.iter().find(|c| c.need == need)
    }

    /// Every credential resolved for a declared need, in declaration order
    /// (the spec's needs first, then the host's for this call).
    pub fn declared_credentials(&self) -> &[Credential] {
        &self.inner.declared
    }

    /// Pulls a credential on demand. Fails closed without a provider.
    pub async fn credential(&self, need: impl Into<String>) -> Result<Credential, ContextError> {
        self.credential_for(&CredentialNeed::new(need), CredentialMode::Pulled)
            .await
    }

    /// Resolves a need in the given mode (the host uses `Declared`).
    pub async fn credential_for(
        &self,
        need: &CredentialNeed,
        mode: CredentialMode,
    ) -> Result<Credential, ContextError> {
        self.after_respond("credential")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        if !self.has_credentials() {
            let err = ContextError::NoCredentialProvider {
                need: need.need.clone(),
            };
            self.emit(FactKind::CredentialRefused(CredentialRefused {
                need: need.need.clone(),
                mode,
                reason: err.to_string(),
            }));
            return Err(err);
        }
        self.emit(FactKind::CredentialRequested(CredentialRequested {
            need: need.need.clone(),
            mode,
            kind: need.kind.clone(),
        }));
        match self
            .until_cancelled(self.inner.backend.credential(need, mode))
            .await?
        {
            Ok(c) => {
                self.emit(FactKind::CredentialResolved(CredentialResolved {
                    need: need.need.clone(),
                    mode,
                    kind: c.kind.clone(),
                    fingerprint: c.fingerprint.clone(),
                    expires_at: c.expires_at,
                }));
                Ok(c)
            }
            Err(reason) => {
                self.emit(FactKind::CredentialFailed(CredentialFailed {
                    need: need.need.clone(),
                    mode,
                    reason: reason.clone(),
                }));
                Err(ContextError::CredentialFailed {
                    need: need.need.clone(),
                    reason,
                })
            }
        }
    }

    // ---- artifacts --------------------------------------------------------------

    /// True when an artifact store is attached.
    pub fn has_artifacts(&self) -> bool {
        self.inner.backend.has_artifacts()
    }

    /// The claim-check store, bound to this run's scope (composed by the
    /// host from the run's identity, session and id: see
    /// [`artifact_scope`]; the tool cannot name, widen or replace it).
    /// Always present: without a store every method refuses, saying how to
    /// attach one.
    pub fn artifacts(&self) -> Artifacts<'_> {
        Artifacts { ctx: self }
    }

    // ---- elicitation ----------------------------------------------------------

    /// True when an elicitor is attached: [`ToolContext::elicit`] refuses
    /// without one.
    pub fn has_elicitor(&self) -> bool {
        self.inner.backend.has_elicitor()
    }

    /// Asks the user a question and waits for the answer.
    ///
    /// Without an elicitor the question is refused (`elicit.refused`,
    /// [`ContextError::NoElicitor`]). An accepted answer is validated
    /// against the full JSON Schema of the question (the same live and in
    /// replay); each failing place is one of
    /// [`ElicitAnswer::validation_errors`], as `"<JSON pointer>: <what is
    /// wrong>"`. An elicitor's failure is recorded as outcome `error` and
    /// returned as [`ContextError::Elicit`].
    pub async fn elicit(&self, question: Elicitation) -> Result<ElicitAnswer, ContextError> {
        self.after_respond("elicit")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        if !self.inner.backend.has_elicitor() {
            let err = ContextError::NoElicitor;
            self.emit(FactKind::ElicitRefused(ElicitRefused {
                message: question.message.clone(),
                mode: question.mode,
                reason: err.to_string(),
            }));
            return Err(err);
        }
        self.emit(FactKind::ElicitRequested(ElicitRequested {
            message: question.message.clone(),
            schema: question.schema.clone(),
            mode: question.mode,
            ttl_ms: question.ttl_ms,
            url: question.url.clone(),
            elicitation_id: question.elicitation_id.clone(),
        }));
        match self
            .until_cancelled(self.inner.backend.elicit(&question))
            .await?
        {
            Ok(mut answer) => {
                if let ElicitOutcome::Accept { content } = &answer.outcome {
                    for e in validate_answer(&question.schema, content) {
                        if !answer.validation_errors.contains(&e) {
                            answer.validation_errors.push(e);
                        }
                    }
                }
                self.emit(FactKind::ElicitAnswered(ElicitAnswered {
                    outcome: answer.outcome.clone(),
                    validation_errors: answer.validation_errors.clone(),
                    pre_resolved: answer.pre_resolved,
                }));
                match answer.outcome {
                    ElicitOutcome::Error { message } => Err(ContextError::Elicit(message)),
                    _ => Ok(answer),
                }
            }
            Err(e) => {
                self.emit(FactKind::ElicitAnswered(ElicitAnswered {
                    outcome: ElicitOutcome::Error { message: e.clone() },
                    validation_errors: Vec::new(),
                    pre_resolved: false,
                }));
                Err(ContextError::Elicit(e))
            }
        }
    }

    // ---- teardown ---------------------------------------------------------------

    /// The isolation key of `scope` for this call: who a cleanup
    /// registered under `scope` belongs to, composed from the caller's
    /// tenant and principal and the host's ids, never from a caller string
    /// alone (seed 000's `toolSessionKey`). It is the key the host files
    /// this call's `scope` cleanups under, and the key to give a live
    /// resource the tool opens for that lifetime.
    ///
    /// - [`TeardownScope::Call`]: (tenant, principal, run, call);
    /// - [`TeardownScope::Run`]: (tenant, principal, run);
    /// - [`TeardownScope::Session`]: (tenant, principal, session), or
    ///   [`ContextError::NoSession`] when the run has no session id.
    ///
    /// An absent tenant or principal differs from an empty one, and parts
    /// are length-prefixed, so no two different compositions give the same
    /// key. The key works whether or not the host honours `scope`
    /// ([`ToolContext::teardown_scopes`] says that).
    ///
    /// ```no_run
    /// use reel::context::{ToolContext, ToolError};
    /// use reel::fact::TeardownScope;
    /// # struct Browser;
    /// # impl Browser { async fn close(self) -> Result<(), String> { Ok(()) } }
    /// # async fn open_browser(_key: &str) -> Browser { Browser }
    /// async fn browse(ctx: ToolContext, url: String) -> Result<String, ToolError> {
    ///     // One browser per (tenant, principal, run): another tenant's run
    ///     // never gets this one, whatever its ids are.
    ///     let key = ctx.teardown_key(TeardownScope::Run)?;
    ///     let browser = open_browser(key.as_str()).await;
    ///     ctx.on_teardown(TeardownScope::Run, key.as_str(), move || browser.close())?;
    ///     Ok(url)
    /// }
    /// ```
    pub fn teardown_key(&self, scope: TeardownScope) -> Result<TeardownKey, ContextError> {
        TeardownKey::of(&self.inner.info, scope)
    }

    /// Registers a cleanup for `key` under `scope`. The first registration
    /// under (tool, scope, key) wins; a repeat keeps the first cleanup,
    /// refreshes its liveness and is recorded as a repeat: seed 000's
    /// "registering twice under one (tool, scope, key) is a no-op that keeps
    /// the FIRST cleanup (it holds the live handle) and refreshes liveness,
    /// so calling this on every execute is the intended shape for a reused
    /// session". `teardown.registered` records the count of registrations
    /// so far and this one's time; the cleanup's `teardown.ran` records the
    /// count and the time of the last one, so the record shows how many
    /// executes kept a session's resource alive and when it was last used.
    /// Returns whether this was the first registration.
    ///
    /// A scope the host does not honour is refused;
    /// so is the session scope on a run with no session id. Cleanups are
    /// held per [`ToolContext::teardown_key`] of the scope, so another
    /// tenant, principal, session or run never runs, nor repeats, this one.
    /// Only a hash of the key is recorded: the recorder's is keyed under
    /// the fingerprint key (see [`keyed_teardown_key_hash`]), so a copy of
    /// the archive cannot test guessed keys.
    pub fn on_teardown<F, Fut, E>(
        &self,
        scope: TeardownScope,
        key: &str,
        cleanup: F,
    ) -> Result<bool, ContextError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        self.after_respond("on_teardown")?;
        let key_hash = self
            .inner
            .backend
            .teardown_key_hash(self.tool_name(), scope, key);
        let holder = if self.inner.info.teardown_scopes.contains(&scope) {
            self.teardown_key(scope)
        } else {
            Err(ContextError::ScopeNotHonoured {
                scope,
                door: door(&self.inner.info),
                honoured: self.inner.info.teardown_scopes.clone(),
            })
        };
        let holder = match holder {
            Ok(holder) => holder,
            Err(err) => {
                self.emit(FactKind::TeardownRefused(TeardownRefused {
                    scope,
                    key_hash,
                    honoured: self.inner.info.teardown_scopes.clone(),
                    reason: err.to_string(),
                }));
                return Err(err);
            }
        };
        let cleanup: Cleanup =
            Box::new(move || Box::pin(async move { cleanup().await.map_err(|e| e.to_string()) }));
        let registration = self
            .inner
            .backend
            .register_teardown(scope, &holder, &key_hash, cleanup);
        self.emit(FactKind::TeardownRegistered(TeardownRegistered {
            scope,
            key_hash,
            first: registration.first,
            registrations: registration.registrations,
            registered_at: registration.at,
        }));
        Ok(registration.first)
    }

    // ---- effects, clock, randomness ------------------------------------------------

    /// Runs a side effect through the journal: live, `run` is called once and
    /// its outcome recorded; in replay the recorded outcome is returned and
    /// `run` is never called.
    ///
    /// An error of `run` comes back live as [`ToolError::Source`], the error
    /// itself (`err.downcast_ref::<MyError>()`, or
    /// [`ToolError::downcast_value`] for a non-`Error` type such as
    /// `String`); in replay the record holds only its message, which comes
    /// back as [`ToolError::Failed`] with the same `Display`.
    pub async fn effect<Req, T, E, F, Fut>(
        &self,
        name: &str,
        request: &Req,
        run: F,
    ) -> Result<T, ToolError>
    where
        Req: Serialize + ?Sized,
        T: Serialize + DeserializeOwned,
        E: fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        self.after_respond("effect")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        let request = serde_json::to_value(request).map_err(|e| ContextError::Effect {
            name: name.into(),
            detail: format!("its request does not serialise: {e}"),
        })?;
        // Live, the closure's error itself is kept for the tool (typed);
        // the record keeps its message, which is all replay has.
        let typed: Arc<Mutex<Option<ErrorSource>>> = Arc::default();
        let slot = typed.clone();
        let run: EffectFn = Box::new(move || {
            Box::pin(async move {
                match run().await {
                    Ok(v) => serde_json::to_value(v)
                        .map_err(|e| format!("its result does not serialise: {e}")),
                    Err(e) => {
                        let source = ErrorSource::of_display(e);
                        let message = source.message.clone();
                        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(source);
                        Err(message)
                    }
                }
            })
        });
        let outcome = self
            .until_cancelled(self.inner.backend.effect(name, &request, run))
            .await?;
        self.emit(FactKind::Effect(Effect {
            name: name.into(),
            request,
            outcome: outcome.clone(),
        }));
        match outcome {
            EffectOutcome::Ok(v) => serde_json::from_value(v).map_err(|e| {
                ToolError::from(ContextError::Effect {
                    name: name.into(),
                    detail: format!("the recorded result does not fit the expected type: {e}"),
                })
            }),
            EffectOutcome::Err(e) => {
                let typed = typed.lock().unwrap_or_else(|p| p.into_inner()).take();
                match typed {
                    Some(source) if source.message == e => Err(ToolError::Source(source)),
                    _ => Err(ToolError::Failed(e)),
                }
            }
        }
    }

    /// Reads the clock (unix nanoseconds), journaled.
    pub fn now(&self) -> i64 {
        let unix_nanos = self.inner.backend.clock();
        self.emit(FactKind::Clock(Clock { unix_nanos }));
        unix_nanos
    }

    /// Draws 64 random bits, journaled.
    pub fn random(&self) -> u64 {
        let value = self.inner.backend.random();
        self.emit(FactKind::Random(Random { value }));
        value
    }

    // ---- output ---------------------------------------------------------------------

    /// Records an intermediate output (output history), with no stage.
    /// After [`ToolContext::respond`] it is dropped (and flagged).
    pub fn set_output(&self, value: impl Serialize) {
        self.set_output_as(value, Stage::default());
    }

    /// Records an intermediate output at a named stage, with an optional
    /// note: `ctx.set_output_as(v, Stage::new("draft").note("before ranking"))`.
    pub fn set_output_as(&self, value: impl Serialize, stage: Stage) {
        if self.after_respond("output").is_err() {
            return;
        }
        self.push_output(value, stage.stage.as_deref(), stage.note.as_deref());
    }

    /// The latest output (seed 004's `output`): the last one recorded, or
    /// respond's; `None` before any.
    pub fn output(&self) -> Option<Value> {
        self.inner
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .cloned()
    }

    fn push_output(&self, value: impl Serialize, stage: Option<&str>, note: Option<&str>) -> Value {
        let value = serde_json::to_value(value)
            .unwrap_or_else(|e| json!({ "unserialisable": e.to_string() }));
        self.inner
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(value.clone());
        self.emit(FactKind::CallOutput(CallOutput {
            value: value.clone(),
            stage: stage.map(str::to_owned),
            note: note.map(str::to_owned),
        }));
        value
    }

    /// Sets the call's output and ends execution (seed 004): files
    /// `call.output` with stage `respond` and returns respond's early exit,
    /// [`ToolError::Responded`], never `Ok`. Propagate it at once, with
    /// `ctx.respond(value)?` or `return ctx.respond(value);` (the `T` lets
    /// the latter type as the tool's own result); the host ends the call
    /// with `value` ([`after_tool`]), live and in replay.
    ///
    /// Code that goes on after respond does not change the result: a
    /// capability that can fail (a second `respond` too) refuses with
    /// [`ContextError::AfterRespond`], one that cannot (progress, log,
    /// output) drops its fact, and a tool that returns something else
    /// still ends with the responded value. Each is flagged on the record
    /// as a `warning` log of logger [`AFTER_RESPOND_LOGGER`]. The clock
    /// and randomness keep working: reading them changes nothing.
    ///
    /// ```
    /// use reel::context::{ToolContext, ToolError};
    /// use serde_json::{json, Value};
    /// async fn search(ctx: ToolContext, query: String) -> Result<Value, ToolError> {
    ///     if query.is_empty() {
    ///         ctx.respond(json!({ "pages": [] }))?;
    ///     }
    ///     Ok(json!({ "pages": [query] }))
    /// }
    /// ```
    pub fn respond<T: Serialize>(&self, value: T) -> Result<T, ToolError> {
        self.after_respond("respond")?;
        let value = self.push_output(&value, Some("respond"), None);
        // The first respond sets it; a second was refused above.
        let _ = self.inner.responded.set(value.clone());
        Err(ToolError::Responded(Responded { value }))
    }

    /// The outputs recorded so far, oldest first.
    pub fn output_history(&self) -> Vec<Value> {
        self.inner
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    // ---- nested dispatch ----------------------------------------------------------

    /// True when this call can dispatch other tools.
    pub fn can_dispatch(&self) -> bool {
        self.inner.backend.can_dispatch()
    }

    /// The tools this call can dispatch to, sorted by name: `None` when the
    /// host attached no dispatch, `Some(vec![])` when it attached one with
    /// no tools. In replay: the replay's registry, when the recorded call
    /// had dispatch.
    pub fn tools(&self) -> Option<Vec<String>> {
        self.inner.backend.dispatch_tools()
    }

    /// Calls another tool as a child of this call.
    pub async fn dispatch(&self, tool: &str, args: impl Serialize) -> Result<Value, ToolError> {
        self.after_respond("dispatch")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        if !self.can_dispatch() {
            return Err(ContextError::NoDispatch { tool: tool.into() }.into());
        }
        let args = serde_json::to_value(args).map_err(|e| ToolError::InvalidArgs {
            tool: tool.into(),
            detail: e.to_string(),
        })?;
        // Not raced: the child is cancelled with this call (its token is a
        // child of this one), its own awaits end cancelled, and it files its
        // own `call.ended`; dropping it mid-run would leave its record open.
        let result = self.inner.backend.dispatch(tool, args).await;
        self.check_cancel()?;
        result
    }
}

/// An MCP progress report ([`ToolContext::progress_mcp`]): how far along,
/// and optionally out of how much and in the tool's own words (the
/// `message` a person reads, seed 000's display rule).
///
/// ```
/// use reel::context::McpProgress;
/// let hop = McpProgress::new(3.0).total(12.0).message("Hop 3 of 12");
/// assert_eq!(hop.total_value(), Some(12.0));
/// assert_eq!(McpProgress::from(1.0).message_text(), None);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct McpProgress {
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
}

impl McpProgress {
    /// Progress so far, with no total and no message.
    pub fn new(progress: f64) -> McpProgress {
        McpProgress {
            progress,
            total: None,
            message: None,
        }
    }

    /// The total the progress counts towards.
    pub fn total(mut self, total: f64) -> McpProgress {
        self.total = Some(total);
        self
    }

    /// What a person reads, e.g. `"Hop 3 of 12"`.
    pub fn message(mut self, message: impl Into<String>) -> McpProgress {
        self.message = Some(message.into());
        self
    }

    /// The progress so far.
    pub fn progress_value(&self) -> f64 {
        self.progress
    }

    /// The total, when one was given.
    pub fn total_value(&self) -> Option<f64> {
        self.total
    }

    /// The message, when one was given.
    pub fn message_text(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl From<f64> for McpProgress {
    fn from(progress: f64) -> McpProgress {
        McpProgress::new(progress)
    }
}

/// The stage and note of an output ([`ToolContext::set_output_as`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stage {
    stage: Option<String>,
    note: Option<String>,
}

impl Stage {
    /// A named stage, e.g. `"draft"`.
    pub fn new(stage: impl Into<String>) -> Stage {
        Stage {
            stage: Some(stage.into()),
            note: None,
        }
    }

    /// Adds a note for the reader of the record.
    pub fn note(mut self, note: impl Into<String>) -> Stage {
        self.note = Some(note.into());
        self
    }
}

/// The AI platform making a request (seed 004's `AIPlatformType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    /// `openai`.
    OpenAi,
    /// `claude`.
    Claude,
    /// `gemini`.
    Gemini,
    /// `langchain`.
    LangChain,
    /// `vercel-ai`.
    VercelAi,
    /// `unknown`.
    Unknown,
}

impl Platform {
    /// The seed's name: `openai`, `claude`, `gemini`, `langchain`,
    /// `vercel-ai` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::OpenAi => "openai",
            Platform::Claude => "claude",
            Platform::Gemini => "gemini",
            Platform::LangChain => "langchain",
            Platform::VercelAi => "vercel-ai",
            Platform::Unknown => "unknown",
        }
    }

    /// The platform of a seed name (any case); anything else is
    /// [`Platform::Unknown`].
    pub fn parse(name: &str) -> Platform {
        [
            Platform::OpenAi,
            Platform::Claude,
            Platform::Gemini,
            Platform::LangChain,
            Platform::VercelAi,
        ]
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(name.trim()))
        .unwrap_or(Platform::Unknown)
    }

    /// Detects the platform from MCP `clientInfo`. The rule: the client's
    /// name, then its title, lower-cased, is looked up in this table, first
    /// match wins; no client info, or no match, is `unknown`.
    ///
    /// | the name or title contains | platform |
    /// |---|---|
    /// | `openai`, `chatgpt`, `codex` | `openai` |
    /// | `claude`, `anthropic` | `claude` |
    /// | `gemini`, `google` | `gemini` |
    /// | `langchain`, `langgraph` | `langchain` |
    /// | `vercel`, `ai-sdk` | `vercel-ai` |
    ///
    /// ```
    /// use reel::context::Platform;
    /// use reel::fact::ClientInfo;
    /// let client = |name: &str| ClientInfo { name: name.into(), version: None, title: None };
    /// assert_eq!(Platform::detect(Some(&client("Claude Desktop"))), Platform::Claude);
    /// assert_eq!(Platform::detect(Some(&client("openai-mcp"))), Platform::OpenAi);
    /// assert_eq!(Platform::detect(Some(&client("@ai-sdk/mcp"))), Platform::VercelAi);
    /// assert_eq!(Platform::detect(Some(&client("my-cli"))), Platform::Unknown);
    /// assert_eq!(Platform::detect(None), Platform::Unknown);
    /// ```
    pub fn detect(client: Option<&ClientInfo>) -> Platform {
        const TABLE: &[(&str, Platform)] = &[
            ("openai", Platform::OpenAi),
            ("chatgpt", Platform::OpenAi),
            ("codex", Platform::OpenAi),
            ("claude", Platform::Claude),
            ("anthropic", Platform::Claude),
            ("gemini", Platform::Gemini),
            ("google", Platform::Gemini),
            ("langchain", Platform::LangChain),
            ("langgraph", Platform::LangChain),
            ("vercel", Platform::VercelAi),
            ("ai-sdk", Platform::VercelAi),
        ];
        let Some(client) = client else {
            return Platform::Unknown;
        };
        for text in std::iter::once(&client.name).chain(client.title.as_ref()) {
            let text = text.to_lowercase();
            if let Some((_, p)) = TABLE.iter().find(|(needle, _)| text.contains(needle)) {
                return *p;
            }
        }
        Platform::Unknown
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Platform> for String {
    fn from(p: Platform) -> String {
        p.as_str().into()
    }
}

/// Typed services a host gives a call's context ([`ToolContext::get`]),
/// one per type. Cheap to clone.
#[derive(Clone, Default)]
pub struct Services {
    by_type: HashMap<std::any::TypeId, (&'static str, Arc<dyn std::any::Any + Send + Sync>)>,
}

impl Services {
    /// Registers `service` as the `T` of this call (replacing an earlier
    /// `T`).
    pub fn insert<T: Send + Sync + 'static>(&mut self, service: Arc<T>) {
        self.by_type.insert(
            std::any::TypeId::of::<T>(),
            (std::any::type_name::<T>(), service),
        );
    }

    /// The registered `T`: [`ContextError::NoService`] naming the type when
    /// there is none.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, ContextError> {
        self.by_type
            .get(&std::any::TypeId::of::<T>())
            .and_then(|(_, s)| s.clone().downcast::<T>().ok())
            .ok_or(ContextError::NoService {
                type_name: std::any::type_name::<T>(),
            })
    }

    /// These services layered over `base`: every type of `base`, except
    /// that a type registered here wins (the same `Arc`s, nothing copied).
    /// How a host gives a call its own services on top of host-wide ones.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use reel::context::Services;
    ///
    /// let mut host = Services::default();
    /// host.insert(Arc::new(String::from("host-wide")));
    /// host.insert(Arc::new(7u32));
    /// let mut call = Services::default();
    /// call.insert(Arc::new(String::from("the call's own")));
    /// let both = call.over(&host);
    /// assert_eq!(*both.get::<String>().unwrap(), "the call's own");
    /// assert_eq!(*both.get::<u32>().unwrap(), 7);
    /// ```
    pub fn over(mut self, base: &Services) -> Services {
        for (id, service) in &base.by_type {
            self.by_type.entry(*id).or_insert_with(|| service.clone());
        }
        self
    }

    /// True when no service is registered.
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.by_type.values().map(|(n, _)| *n).collect();
        names.sort_unstable();
        f.debug_set().entries(names).finish()
    }
}

/// The unkeyed hash of a teardown key: sha-256 over tool, scope and key,
/// first 16 bytes, hex, `sha256:...`. What archives written before keyed
/// hashes hold (a replay of one still matches them), and what a backend
/// that holds no key records. Anyone can compute it: a guessable key (a
/// PIN) is found from it by trying every guess. The recorder records
/// [`keyed_teardown_key_hash`] instead.
pub fn teardown_key_hash(tool: &str, scope: TeardownScope, key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"reel.teardown.v1\0");
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(scope.to_string().as_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    let out = h.finalize();
    format!("sha256:{}", hex::encode(&out[..16]))
}

/// The purpose a keyed teardown key hash is MACed under (the recorder's
/// `Archive::keyed_mac`, under the fingerprint key, which never lives in
/// the archive).
pub const TEARDOWN_KEY_PURPOSE: &str = "reel/teardown-key";

/// The keyed hash of a teardown key, `hmac-sha256:...` (first 16 bytes,
/// hex), given `mac`: a keyed MAC (HMAC-SHA256 under a key kept outside
/// the archive) of the bytes it is handed. The bytes are tool, scope and
/// key, each framed by its byte length, so no two triples share them.
/// Without the key a recorded hash tells nothing about the key, and a
/// guess cannot be tested against it.
///
/// ```
/// use reel::context::{keyed_teardown_key_hash, teardown_key_hash};
/// use reel::fact::TeardownScope;
/// let mac = |bytes: &[u8]| {
///     // Stands in for `Archive::keyed_mac(TEARDOWN_KEY_PURPOSE, bytes)`.
///     let mut out = [0u8; 32];
///     out[..bytes.len().min(32)].copy_from_slice(&bytes[..bytes.len().min(32)]);
///     out
/// };
/// let h = keyed_teardown_key_hash(mac, "walk", TeardownScope::Call, "4711");
/// assert!(h.starts_with("hmac-sha256:"));
/// assert_ne!(h, teardown_key_hash("walk", TeardownScope::Call, "4711"));
/// ```
pub fn keyed_teardown_key_hash(
    mac: impl FnOnce(&[u8]) -> [u8; 32],
    tool: &str,
    scope: TeardownScope,
    key: &str,
) -> String {
    let scope = scope.to_string();
    let mut bytes = Vec::with_capacity(tool.len() + scope.len() + key.len() + 24);
    for part in [tool, scope.as_str(), key] {
        bytes.extend_from_slice(part.len().to_string().as_bytes());
        bytes.push(b':');
        bytes.extend_from_slice(part.as_bytes());
    }
    let out = mac(&bytes);
    zeroize::Zeroize::zeroize(&mut bytes);
    format!("hmac-sha256:{}", hex::encode(&out[..16]))
}

/// The isolation key of a teardown scope's holder (see
/// [`ToolContext::teardown_key`]): the scope and the parts that say whose it
/// is, in one canonical string. Each part is `-` when absent or
/// `<byte length>:<bytes>` when present, so an absent tenant differs from an
/// empty one and `a:b` + `c` never meets `a` + `b:c`:
///
/// ```
/// use reel::context::TeardownKey;
/// use reel::fact::Identity;
/// let acme = Identity {
///     tenant: Some("acme".into()),
///     principal: Some("ann".into()),
///     conversation: None,
/// };
/// let key = TeardownKey::session(Some(&acme), Some("s-1")).unwrap();
/// assert_eq!(key.as_str(), "session;tenant=4:acme;principal=3:ann;session=3:s-1");
/// // Another tenant with the same session string is another session.
/// let other = Identity { tenant: Some("globex".into()), ..acme.clone() };
/// assert_ne!(TeardownKey::session(Some(&other), Some("s-1")).unwrap(), key);
/// // No session id: refused, never filed under "".
/// assert!(TeardownKey::session(Some(&acme), None).is_err());
/// assert!(TeardownKey::session(Some(&acme), Some("")).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TeardownKey {
    scope: TeardownScope,
    key: String,
}

impl TeardownKey {
    /// The key of one call's cleanups: (tenant, principal, run, call), or
    /// for a call outside any run (tenant, principal, the key its stream is
    /// kept under, call).
    pub fn call(identity: Option<&Identity>, home: &Home, call_id: &str) -> TeardownKey {
        let home = match home {
            Home::Run(run_id) => ("run", run_id.as_str()),
            Home::OutsideRun { key } => ("outside-run", key.as_str()),
        };
        TeardownKey::compose(TeardownScope::Call, identity, &[home, ("call", call_id)])
    }

    /// The key of one run's cleanups: (tenant, principal, run).
    pub fn run(identity: Option<&Identity>, run_id: &str) -> TeardownKey {
        TeardownKey::compose(TeardownScope::Run, identity, &[("run", run_id)])
    }

    /// The key of a hosting session's cleanups: (tenant, principal,
    /// session). [`ContextError::NoSession`] when there is no session id,
    /// or it is empty: nothing is ever keyed on an empty session.
    pub fn session(
        identity: Option<&Identity>,
        session_id: Option<&str>,
    ) -> Result<TeardownKey, ContextError> {
        match session_id {
            Some(session) if !session.is_empty() => Ok(TeardownKey::compose(
                TeardownScope::Session,
                identity,
                &[("session", session)],
            )),
            _ => Err(ContextError::NoSession),
        }
    }

    /// The key of `scope` for the call `info` describes.
    pub fn of(info: &CallInfo, scope: TeardownScope) -> Result<TeardownKey, ContextError> {
        let identity = info.identity.as_ref();
        match scope {
            TeardownScope::Call => Ok(TeardownKey::call(
                identity,
                &info.home,
                &info.started.call_id,
            )),
            TeardownScope::Run => match info.home.run_id() {
                Some(run_id) => Ok(TeardownKey::run(identity, run_id)),
                None => Err(ContextError::ScopeNotHonoured {
                    scope,
                    door: door(info),
                    honoured: info.teardown_scopes.clone(),
                }),
            },
            TeardownScope::Session => TeardownKey::session(identity, info.session_id.as_deref()),
        }
    }

    fn compose(
        scope: TeardownScope,
        identity: Option<&Identity>,
        ids: &[(&str, &str)],
    ) -> TeardownKey {
        fn part(out: &mut String, name: &str, value: Option<&str>) {
            out.push(';');
            out.push_str(name);
            out.push('=');
            match value {
                None => out.push('-'),
                Some(v) => {
                    out.push_str(&v.len().to_string());
                    out.push(':');
                    out.push_str(v);
                }
            }
        }
        let mut key = scope.to_string();
        part(
            &mut key,
            "tenant",
            identity.and_then(|i| i.tenant.as_deref()),
        );
        part(
            &mut key,
            "principal",
            identity.and_then(|i| i.principal.as_deref()),
        );
        for (name, value) in ids {
            part(&mut key, name, Some(value));
        }
        TeardownKey { scope, key }
    }

    /// The scope this key is of.
    pub fn scope(&self) -> TeardownScope {
        self.scope
    }

    /// The canonical string, e.g. to pass to [`ToolContext::on_teardown`]
    /// or to name a live resource by.
    pub fn as_str(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for TeardownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

/// The scope a run's artifacts are stored under, composed as seed 000
/// composes it: the caller's tenant and principal as supplied (absent stays
/// absent, empty stays empty), and a conversation that is always present:
///
/// - `conversation:<id>` when the caller named a (non-empty) conversation;
/// - else `session:<id>` when the run is bound to a (non-empty) session;
/// - else `run:<id>`: the run alone; for a call outside any run,
///   `call:<key>`: that call alone (with the calls it dispatches).
///
/// The source is part of the value, so a session string never aliases a
/// conversation or a run of the same name. This is what stores key on and
/// what `artifact.*` facts record as `scope`; the tool's
/// [`ToolContext::identity`] stays what the caller supplied.
///
/// ```
/// use reel::context::artifact_scope;
/// use reel::context::Home;
/// let run = Home::Run("run-1".into());
/// let scope = artifact_scope(&run, Some("s-1"), None);
/// assert_eq!((scope.tenant, scope.conversation.as_deref()), (None, Some("session:s-1")));
/// assert_eq!(artifact_scope(&run, None, None).conversation.as_deref(), Some("run:run-1"));
/// let outside = Home::OutsideRun { key: "call-1f".into() };
/// assert_eq!(artifact_scope(&outside, None, None).conversation.as_deref(), Some("call:call-1f"));
/// ```
pub fn artifact_scope(
    home: &Home,
    session_id: Option<&str>,
    identity: Option<&Identity>,
) -> Identity {
    let named = identity
        .and_then(|i| i.conversation.as_deref())
        .filter(|c| !c.is_empty());
    let session = session_id.filter(|s| !s.is_empty());
    let conversation = match (named, session) {
        (Some(c), _) => format!("conversation:{c}"),
        (None, Some(s)) => format!("session:{s}"),
        (None, None) => match home {
            Home::Run(run_id) => format!("run:{run_id}"),
            Home::OutsideRun { key } => format!("call:{key}"),
        },
    };
    Identity {
        tenant: identity.and_then(|i| i.tenant.clone()),
        principal: identity.and_then(|i| i.principal.clone()),
        conversation: Some(conversation),
    }
}

/// The claim-check store of a call, bound to the run's scope.
pub struct Artifacts<'a> {
    ctx: &'a ToolContext,
}

impl Artifacts<'_> {
    /// Stores bytes; the ticket's origin names this run and call.
    pub async fn put(
        &self,
        media_type: &str,
        bytes: impl Into<Vec<u8>>,
    ) -> Result<ArtifactMeta, ContextError> {
        let ctx = self.ctx;
        ctx.after_respond("artifacts.put")?;
        ctx.until_cancelled(ctx.inner.backend.ready()).await?;
        if !ctx.has_artifacts() {
            return Err(self.refuse(ArtifactOp::Put, None, ContextError::NoArtifactStore));
        }
        match ctx
            .until_cancelled(ctx.inner.backend.put_artifact(media_type, bytes.into()))
            .await?
        {
            Ok(meta) => {
                ctx.emit(FactKind::ArtifactPut(ArtifactPut { meta: meta.clone() }));
                Ok(meta)
            }
            Err(e) => Err(self.refuse(ArtifactOp::Put, None, ContextError::ArtifactStore(e))),
        }
    }

    /// Fetches an artifact of this run's scope; `None` when there is none.
    pub async fn get(&self, id: &str) -> Result<Option<FoundArtifact>, ContextError> {
        let ctx = self.ctx;
        ctx.after_respond("artifacts.get")?;
        ctx.until_cancelled(ctx.inner.backend.ready()).await?;
        if !ctx.has_artifacts() {
            return Err(self.refuse(ArtifactOp::Get, Some(id), ContextError::NoArtifactStore));
        }
        match ctx
            .until_cancelled(ctx.inner.backend.get_artifact(id))
            .await?
        {
            Ok(found) => {
                ctx.emit(FactKind::ArtifactGet(ArtifactGet {
                    id: id.into(),
                    meta: found.as_ref().map(|(m, _)| m.clone()),
                }));
                Ok(found)
            }
            Err(e) => Err(self.refuse(ArtifactOp::Get, Some(id), ContextError::ArtifactStore(e))),
        }
    }

    fn refuse(&self, op: ArtifactOp, id: Option<&str>, err: ContextError) -> ContextError {
        self.ctx.emit(FactKind::ArtifactRefused(ArtifactRefused {
            op,
            id: id.map(str::to_owned),
            reason: err.to_string(),
        }));
        err
    }
}

/// A sub-flow logger: bound to its call; the same instance per name.
#[derive(Clone)]
pub struct SubFlowLogger {
    inner: Arc<SubFlowInner>,
}

struct SubFlowInner {
    ctx: std::sync::Weak<Inner>,
    name: String,
}

impl SubFlowLogger {
    /// The sub-flow's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// True when both handles are the same instance.
    pub fn same_instance(&self, other: &SubFlowLogger) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Logs through the sub-flow. After the call ended, this does nothing.
    pub fn log(&self, level: Level, data: impl Into<Value>) {
        if let Some(inner) = self.inner.ctx.upgrade() {
            let ctx = ToolContext { inner };
            ctx.log_with(level, None, Some(self.inner.name.clone()), data.into());
        }
    }
}

impl fmt::Debug for SubFlowLogger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubFlowLogger")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// Resolves a call's declared credential needs before its tool runs (the
/// host's side of declare-and-push), filing their facts through the call's
/// backend, in order. The resolved credentials become the tool's
/// [`ToolContext::declared_credentials`]; the first need that fails stops
/// the call: its tool must not run.
pub async fn resolve_declared(
    info: &CallInfo,
    backend: &Arc<dyn CallBackend>,
    needs: &[CredentialNeed],
    cancel: &CancelHandle,
) -> Result<Vec<Credential>, ToolError> {
    if needs.is_empty() {
        return Ok(Vec::new());
    }
    let pre = ToolContext::new(info.clone(), backend.clone(), None, cancel);
    let mut declared = Vec::with_capacity(needs.len());
    for need in needs {
        declared.push(pre.credential_for(need, CredentialMode::Declared).await?);
    }
    Ok(declared)
}

/// What the host does after filing `call.started` and before the tool runs,
/// the same live and in replay:
///
/// 1. the spec (when the call has one) must be of the called tool;
/// 2. the input is validated against the spec's input schema: a rejected
///    input is [`ToolError::InvalidInput`], naming each failing JSON
///    pointer, and no credential is resolved;
/// 3. the declared needs are resolved, in order ([`resolve_declared`]):
///    the spec's, then `extra` (the host's for this call; a name declared
///    in both is resolved once).
///
/// `Ok` holds the declared credentials for [`ToolContext::new`]; on `Err`
/// the tool must not run, and the host ends the call with the error.
pub async fn before_tool(
    info: &CallInfo,
    backend: &Arc<dyn CallBackend>,
    extra: &[CredentialNeed],
    cancel: &CancelHandle,
) -> Result<Vec<Credential>, ToolError> {
    let started = &info.started;
    let mut needs: Vec<CredentialNeed> = Vec::new();
    if let Some(spec) = &started.spec {
        if spec.name != started.tool_name {
            return Err(ToolError::msg(format!(
                "the call of tool {:?} carries the spec of tool {:?}, so the tool did not run: give the call its own tool's spec",
                started.tool_name, spec.name
            )));
        }
        if let Err(errors) = spec.validate(&started.args) {
            return Err(ToolError::InvalidInput {
                tool: started.tool_name.clone(),
                unresolved: crate::spec::unresolved_wants(spec, &started.args),
                errors,
            });
        }
        needs.extend(spec.needs.iter().map(CredentialNeed::new));
    }
    for need in extra {
        if !needs.iter().any(|n| n.need == need.need) {
            needs.push(need.clone());
        }
    }
    resolve_declared(info, backend, &needs, cancel).await
}

/// The logger name of the record's flags of code that went on after
/// [`ToolContext::respond`] (`warning` logs, never delivered).
pub const AFTER_RESPOND_LOGGER: &str = "reel.respond";

/// What the host does with the tool's result before it ends the call, the
/// same live and in replay: when the tool responded
/// ([`ToolContext::respond`]), the call's result is the responded value;
/// a tool that returned anything but respond's early exit after
/// responding is flagged on the record (a `warning` log of logger
/// [`AFTER_RESPOND_LOGGER`] naming what it returned) and its return is
/// not the result. `ctx` is (a clone of) the context the tool ran with.
pub fn after_tool(ctx: &ToolContext, result: Result<Value, ToolError>) -> Result<Value, ToolError> {
    let Some(value) = ctx.responded() else {
        return match result {
            Err(ToolError::Responded(_)) => Err(ToolError::msg(
                "the tool returned the early exit of another call's respond: respond on this call's own context",
            )),
            other => other,
        };
    };
    let returned = match result {
        Err(ToolError::Responded(_)) => return Ok(value),
        Ok(other) => json!({ "ok": other }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    ctx.flag_after_respond(json!({
        "message": "the tool went on after respond and returned something else; the call's result stays the responded value: return respond's early exit at once (`ctx.respond(value)?`)",
        "returned": returned,
    }));
    Ok(value)
}

/// Validates an elicitation answer against the full JSON Schema of the
/// question ([`crate::spec::validate_value`]): one `"<JSON pointer>:
/// <message>"` per failing place (`"(root): ..."` for the whole answer);
/// empty when it fits.
///
/// ```
/// use serde_json::json;
/// let schema = json!({
///     "type": "object",
///     "properties": { "n": { "type": "integer", "minimum": 1 } },
///     "required": ["n"],
/// });
/// assert!(reel::context::validate_answer(&schema, &json!({ "n": 2 })).is_empty());
/// assert_eq!(
///     reel::context::validate_answer(&schema, &json!({ "n": 0 })),
///     vec!["/n: 0 is less than the minimum of 1".to_string()],
/// );
/// ```
pub fn validate_answer(schema: &Value, content: &Value) -> Vec<String> {
    match crate::spec::validate_value(
        schema,
        content,
        "the question's schema",
        "the question (`Elicitation::schema`)",
    ) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

/// The message of a caught panic (a tool's, for the record).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}
