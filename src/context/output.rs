//! Outputs: `set_output`, `respond`, and what is flagged when code goes on
//! after respond.

use super::*;
use reel_core::lock::lock;

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

impl ToolContext {
    /// The value [`ToolContext::respond`] ended the call with, if it did.
    pub fn responded(&self) -> Option<Value> {
        self.inner.responded.get().cloned()
    }

    /// Files the anomaly of code that went on after respond: a `warning`
    /// log of logger [`AFTER_RESPOND_LOGGER`], never delivered to a client.
    pub(super) fn flag_after_respond(&self, data: Value) {
        self.emit(FactKind::Log(Log {
            level: Level::Warning,
            logger: Some(AFTER_RESPOND_LOGGER.into()),
            subflow: None,
            data,
            delivered: false,
            in_flight: Vec::new(),
        }));
    }

    /// Ends the context's call (host side: the recorder and the replayer
    /// call it as the tool's future completes, before the call's end is
    /// filed): from now on every use of the context, through any clone, is
    /// refused ([`ContextError::AfterCallEnded`], or the fact dropped where
    /// the capability cannot fail) and reported to the backend
    /// ([`CallBackend::refused_after_end`]), which counts it.
    ///
    /// It waits for a progress report or log line being filed through
    /// another clone at that moment: once it returns, none can land after
    /// the call's end.
    pub fn close(&self) {
        let _gate = reel_core::lock::write(&self.inner.gate);
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the call has ended ([`ToolContext::close`]).
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// `Err(AfterCallEnded)` (counted by the backend) once the call ended,
    /// and `Err(AfterRespond)` (flagged on the record) once it responded:
    /// a capability that can fail refuses; one that cannot drops its fact.
    pub(super) fn after_respond(&self, capability: &str) -> Result<(), ContextError> {
        if self.is_closed() {
            self.inner.backend.refused_after_end(capability);
            return Err(ContextError::AfterCallEnded {
                capability: capability.into(),
                call_id: self.call_id().into(),
            });
        }
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

    /// True (and counted by the backend) when the call has ended: for the
    /// capabilities that answer without refusing (the clock, randomness).
    pub(super) fn refused_after_end(&self, capability: &str) -> bool {
        let closed = self.is_closed();
        if closed {
            self.inner.backend.refused_after_end(capability);
        }
        closed
    }

    // ---- identity facts ---------------------------------------------------

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
        lock(&self.inner.outputs).last().cloned()
    }

    pub(super) fn push_output(
        &self,
        value: impl Serialize,
        stage: Option<&str>,
        note: Option<&str>,
    ) -> Value {
        let value = serde_json::to_value(value)
            .unwrap_or_else(|e| json!({ "unserialisable": e.to_string() }));
        lock(&self.inner.outputs).push(value.clone());
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
        lock(&self.inner.outputs).clone()
    }

    // ---- nested dispatch ----------------------------------------------------------
}
