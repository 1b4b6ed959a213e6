//! The contract's errors: a capability's ([`ContextError`]) and a tool's
//! ([`ToolError`]).

use super::*;

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
    /// A typed question's type is not one MCP can ask for
    /// (`ctx.elicit_as::<T>`): it was not asked.
    #[error("cannot ask the user for a `{ty}`: {detail}; MCP asks for a flat object whose fields are strings, numbers, integers, booleans, enums of strings or lists of such enums (multi-select)")]
    QuestionType {
        /// The question's Rust type.
        ty: String,
        /// What does not fit, by field.
        detail: String,
    },
    /// An accepted answer to a typed question does not fit its type
    /// (`ctx.elicit_as::<T>`); the answer is on the record as it came.
    #[error("the user's answer does not fit `{ty}`: {detail}; treat the question as unanswered (ask again, or end the call)")]
    AnswerType {
        /// The question's Rust type.
        ty: String,
        /// Where and how the answer does not fit.
        detail: String,
    },
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
    /// A capability used on a context whose call has ended (a clone held by
    /// a spawned task that outlived the call): nothing more is filed for
    /// the call (seed 000: progress arrives "BEFORE this call's
    /// tool_end"); the refusal is counted, and the run's end records the
    /// count (a `warning` log of logger [`AFTER_END_LOGGER`]).
    #[error("{capability} refused: call {call_id} has ended, and a context that outlives its call (a clone held by a spawned task) files nothing more for it; finish the work before the tool returns (await the task), or do it in a call of its own. The refusal is counted on the record")]
    AfterCallEnded {
        /// The capability, e.g. `"progress"` or `"artifacts.put"`.
        capability: String,
        /// The call that ended.
        call_id: String,
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
pub(super) fn door(info: &CallInfo) -> String {
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
    /// The result (returned, or responded) did not match the tool's
    /// declared output schema: the tool ran, and the call ends with this
    /// error instead of the result, live and in replay.
    InvalidOutput {
        /// The tool.
        tool: String,
        /// Every failing place (JSON pointer into the result) and what is
        /// wrong there.
        errors: Vec<InputError>,
    },
    /// The tool's own failure as its caller received it, structured: an
    /// MCP tool error (`isError: true`) is its whole result. The call's
    /// `error` fact keeps both the message and the value, and a replay or
    /// a mock gives back the value whole.
    Structured {
        /// What the failure says (the result's text).
        message: String,
        /// The value the caller received.
        result: Value,
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
    pub(super) value: Value,
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
            } => f.write_str(&rejection(tool, errors, unresolved)),
            ToolError::InvalidOutput { tool, errors } => {
                let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                write!(
                    f,
                    "tool {tool:?} returned a result that does not match its output schema, so the call ends with this error instead: {}; return a result that matches the spec's output schema, or fix the schema",
                    list.join("; ")
                )
            }
            ToolError::Structured { message, .. } => f.write_str(message),
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
    pub(super) message: String,
    pub(super) value: Arc<dyn std::any::Any + Send + Sync>,
    pub(super) error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl ErrorSource {
    /// The message (the error's `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(super) fn of_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> ErrorSource {
        let message = e.to_string();
        let value = Arc::new(e);
        ErrorSource {
            message,
            value: value.clone(),
            error: Some(value),
        }
    }

    pub(super) fn of_display<E: fmt::Display + Send + Sync + 'static>(e: E) -> ErrorSource {
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

    /// A failure its caller receives as `result`, said as `message` (see
    /// [`ToolError::Structured`]).
    pub fn structured(message: impl fmt::Display, result: Value) -> ToolError {
        ToolError::Structured {
            message: message.to_string(),
            result,
        }
    }

    /// The value the caller received, for a [`ToolError::Structured`].
    pub fn result(&self) -> Option<&Value> {
        match self {
            ToolError::Structured { result, .. } => Some(result),
            _ => None,
        }
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

/// Why a call's input was rejected, with a hint for wanted arguments that
/// still hold their claim ticket: the message of
/// [`ToolError::InvalidInput`](crate::context::ToolError::InvalidInput).
pub(crate) fn rejection(tool: &str, errors: &[InputError], unresolved: &[String]) -> String {
    let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let mut s = format!(
        "tool {tool:?} rejected its input, so it did not run: {}",
        list.join("; ")
    );
    if !unresolved.is_empty() {
        s.push_str(&format!(
            " (wanted {} {} still {} a claim ticket: the artifact was not found in this run's scope, or no artifact store is attached)",
            if unresolved.len() == 1 { "argument" } else { "arguments" },
            unresolved.join(", "),
            if unresolved.len() == 1 { "holds" } else { "hold" },
        ));
    }
    s.push_str("; send arguments that match the tool's input schema");
    s
}
