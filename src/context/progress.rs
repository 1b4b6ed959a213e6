//! Progress and logging: progress reports, log lines and MCP notifications,
//! and sub-flow loggers.

use super::*;
use reel_core::lock::lock;

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

impl ToolContext {
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
        self.file_progress(payload);
    }

    /// Files a report: whether it is on the record (see
    /// [`ToolContext::progress_mcp`]).
    fn file_progress(&self, payload: Value) -> bool {
        // Checked and filed under the gate `close` takes (see there).
        let _gate = reel_core::lock::read(&self.inner.gate);
        if self.after_respond("progress").is_err() {
            return false;
        }
        // The fact's count is numbering, like its seq: 0 here, and given
        // by the stream's `Sequencer` in filing order, so that counts
        // follow record order also when clones of the context report
        // concurrently (the recorder's writer numbers it; the replayer's
        // backend as it files).
        self.inner.backend.progress(payload)
    }

    /// MCP-style progress (`notifications/progress`): files the payload
    /// `{progress, total?, message?}` through [`ToolContext::progress`].
    /// The optional parts are named, never positional: build them with
    /// [`McpProgress`]; a bare number is a progress with neither.
    ///
    /// Returns a boolean, as FrontMCP's `progress` does. It means
    /// **recorded**: true when the report is on the record (filed in call
    /// order, and handed to the call's progress listener when one is
    /// attached: over MCP, queued as `notifications/progress` for a client
    /// that sent a progress token); false when it is not: after
    /// [`ToolContext::respond`], after the call ended (a clone that
    /// outlived it), or dropped because the recorder's queue was over its
    /// progress bound (counted in `progress.dropped`). It does not mean
    /// delivered: whether a client received a report is not on the record
    /// (a `progress` fact has no `delivered`, as a `log` fact has), so a
    /// replay could not give that answer back; the recorded one it gives
    /// back exactly. [`ToolContext::notify`]'s boolean says whether a
    /// message was handed on for a client.
    ///
    /// ```
    /// use reel::context::{McpProgress, ToolContext};
    /// fn walk(ctx: &ToolContext) {
    ///     let recorded = ctx.progress_mcp(McpProgress::new(3.0).total(12.0).message("Hop 3 of 12"));
    ///     ctx.progress_mcp(4.0);
    /// #   let _ = recorded;
    /// }
    /// ```
    pub fn progress_mcp(&self, progress: impl Into<McpProgress>) -> bool {
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
        self.file_progress(Value::Object(p))
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
    /// filters the message out, the queue is closed, the call has
    /// responded, or it has ended (a clone that outlived it; nothing is
    /// filed then). The `log` fact records the same boolean as
    /// `delivered`, and a replay returns the recorded one.
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
        *lock(&self.inner.logger) = Some(name.into());
    }

    pub(super) fn log_with(
        &self,
        level: Level,
        logger: Option<String>,
        subflow: Option<String>,
        data: Value,
    ) -> bool {
        // Checked and filed under the gate `close` takes (see there).
        let _gate = reel_core::lock::read(&self.inner.gate);
        if self.after_respond("log").is_err() {
            return false;
        }
        let logger = logger.or_else(|| lock(&self.inner.logger).clone());
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
            in_flight: Vec::new(),
        }));
        delivered
    }

    /// The sub-flow logger of this call: the same instance each time.
    pub fn subflow_logger(&self) -> SubFlowLogger {
        self.named_subflow("main")
    }

    /// A named sub-flow logger of this call: the same instance per name.
    pub fn named_subflow(&self, name: &str) -> SubFlowLogger {
        let mut map = lock(&self.inner.subflows);
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
}
