//! Dispatch: a tool calling another tool of its registry, as a child call.

use super::*;

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
