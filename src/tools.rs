//! A registry of tool functions by name, shared by hosts (nested dispatch),
//! the recorder's demo and the replayer.
//!
//! A tool is an `async fn(ToolContext, Args) -> Result<Out, ToolError>` with
//! `Args: DeserializeOwned` and `Out: Serialize`; the registry erases the
//! types to JSON at its edge.
//!
//! ```
//! use reel::context::{ToolContext, ToolError};
//! use reel::tools::Tools;
//!
//! async fn add(_ctx: ToolContext, (a, b): (i64, i64)) -> Result<i64, ToolError> {
//!     Ok(a + b)
//! }
//! let tools = Tools::new().register("add", add);
//! assert!(tools.get("add").is_some());
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::context::{BoxFuture, ToolContext, ToolError};

/// A type-erased tool: JSON in, JSON out.
pub type ToolFn =
    Arc<dyn Fn(ToolContext, Value) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;

/// Tools by name.
#[derive(Clone, Default)]
pub struct Tools {
    map: BTreeMap<String, ToolFn>,
}

impl fmt::Debug for Tools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.map.keys()).finish()
    }
}

impl Tools {
    /// An empty registry.
    pub fn new() -> Tools {
        Tools::default()
    }

    /// Registers a typed tool under `name` (replacing one of the same name).
    pub fn register<A, O, F, Fut>(mut self, name: &str, tool: F) -> Tools
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let tool = Arc::new(tool);
        let tool_name = name.to_owned();
        let erased: ToolFn = Arc::new(move |ctx: ToolContext, args: Value| {
            let tool = tool.clone();
            let tool_name = tool_name.clone();
            Box::pin(async move {
                let args: A = serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
                    tool: tool_name.clone(),
                    detail: e.to_string(),
                })?;
                let out = tool(ctx, args).await?;
                serde_json::to_value(out).map_err(|e| {
                    ToolError::Failed(format!(
                        "tool {tool_name:?}: its result does not serialise: {e}"
                    ))
                })
            })
        });
        self.map.insert(name.to_owned(), erased);
        self
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<&ToolFn> {
        self.map.get(name)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }
}
