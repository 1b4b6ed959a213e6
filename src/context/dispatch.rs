//! Dispatch: a tool calling another tool of its registry, as a child call.

use super::*;

/// The logger name of the record's note of a refused dispatch (see
/// [`ToolContext::dispatch`]).
pub const DISPATCH_REFUSED_LOGGER: &str = "reel.dispatch";

impl ToolContext {
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
    ///
    /// Without a dispatch it is refused ([`ContextError::NoDispatch`]),
    /// and the refusal is on the record, as the other capabilities'
    /// are: a `warning` log of logger [`DISPATCH_REFUSED_LOGGER`], never
    /// delivered, with data `{"message", "tool"}` (a log, not a kind of
    /// its own: a new kind would change the pinned encoding of facts, and
    /// every older reel would refuse the archives; a log every reel reads).
    pub async fn dispatch(&self, tool: &str, args: impl Serialize) -> Result<Value, ToolError> {
        self.after_respond("dispatch")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        if !self.can_dispatch() {
            let err = ContextError::NoDispatch { tool: tool.into() };
            self.emit(FactKind::Log(Log {
                level: Level::Warning,
                logger: Some(DISPATCH_REFUSED_LOGGER.into()),
                subflow: None,
                data: json!({ "message": err.to_string(), "tool": tool }),
                delivered: false,
                in_flight: Vec::new(),
            }));
            return Err(err.into());
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
