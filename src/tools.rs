//! A registry of tool functions by name, shared by hosts (nested dispatch),
//! the recorder's demo and the replayer.
//!
//! A tool is an `async fn(ToolContext, Args) -> Result<Out, ToolError>`, or
//! a plain `fn(ToolContext, Args) -> Result<Out, ToolError>` (a sync tool),
//! with `Args: DeserializeOwned` and `Out: Serialize`; the registry erases
//! the types to JSON at its edge. A tool may declare itself with a
//! [`ToolSpec`]. The registry knows each tool's mode from the function it
//! accepted ([`Tools::register`] and [`Tools::tool`] take async functions,
//! [`Tools::register_sync`] and [`Tools::tool_sync`] plain ones): the
//! record's `mode` is that fact, not a label.
//!
//! ```
//! use reel::context::{ToolContext, ToolError};
//! use reel::fact::CallMode;
//! use reel::spec::{ToolSpec, ToolSpecExt};
//! use reel::tools::Tools;
//!
//! async fn add(_ctx: ToolContext, (a, b): (i64, i64)) -> Result<i64, ToolError> {
//!     Ok(a + b)
//! }
//! fn double(_ctx: ToolContext, n: i64) -> Result<i64, ToolError> {
//!     Ok(2 * n)
//! }
//! let tools = Tools::new()
//!     .tool(ToolSpec::new::<(i64, i64), i64>("add").title("Add two numbers"), add)
//!     .register_sync("double", double);
//! assert_eq!(tools.get("add").unwrap().spec().unwrap().title.as_deref(), Some("Add two numbers"));
//! assert_eq!(tools.get("add").unwrap().mode(), CallMode::Async);
//! assert_eq!(tools.get("double").unwrap().mode(), CallMode::Sync);
//! assert!(tools.get("double").unwrap().spec().is_none());
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

mod typed;

pub use typed::{ToolInput, ToolOutput, ToolResult, TypedTool};

use crate::context::{BoxFuture, ToolContext, ToolError};
use crate::fact::CallMode;
use reel_core::spec::ToolSpec;

/// A type-erased tool: JSON in, JSON out.
pub type ToolFn =
    Arc<dyn Fn(ToolContext, Value) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;

/// One registered tool: its function, the mode of the function the
/// registry accepted, and its spec when it declared one. Cheap to clone.
#[derive(Clone)]
pub struct Tool {
    run: ToolFn,
    mode: CallMode,
    spec: Option<ToolSpec>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("mode", &self.mode)
            .field("spec", &self.spec.as_ref().map(|s| &s.name))
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// Sync or async: what the registry accepted.
    pub fn mode(&self) -> CallMode {
        self.mode
    }

    /// The tool's spec, when it declared one (its `mode` is the tool's).
    pub fn spec(&self) -> Option<&ToolSpec> {
        self.spec.as_ref()
    }

    /// The type-erased function.
    pub fn function(&self) -> &ToolFn {
        &self.run
    }

    /// Runs the tool (a sync tool on a blocking thread, see
    /// [`run_blocking`]).
    pub fn call(
        &self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        (self.run)(ctx, args)
    }
}

/// Tools by name.
#[derive(Clone, Default)]
pub struct Tools {
    map: BTreeMap<String, Tool>,
}

impl fmt::Debug for Tools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.map.keys()).finish()
    }
}

fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> Result<A, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
        tool: tool.to_owned(),
        detail: e.to_string(),
    })
}

fn result_value<O: Serialize>(tool: &str, out: O) -> Result<Value, ToolError> {
    serde_json::to_value(out).map_err(|e| {
        ToolError::Failed(format!("tool {tool:?}: its result does not serialise: {e}"))
    })
}

/// Runs a synchronous tool body on tokio's blocking pool, so that a tool
/// that blocks never stalls the runtime's workers (which serve the other
/// calls). A panic in `f` resumes on the awaiting task, where the host
/// catches and records it. Needs a tokio runtime.
pub async fn run_blocking<O, F>(f: F) -> Result<O, ToolError>
where
    O: Send + 'static,
    F: FnOnce() -> Result<O, ToolError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ToolError::msg(format!(
            "the sync tool's thread was stopped before it finished: {e}"
        ))),
    }
}

impl Tools {
    /// An empty registry.
    pub fn new() -> Tools {
        Tools::default()
    }

    fn insert(
        mut self,
        name: String,
        run: ToolFn,
        mode: CallMode,
        spec: Option<ToolSpec>,
    ) -> Tools {
        let spec = spec.map(|mut s| {
            s.mode = mode;
            s
        });
        self.map.insert(name, Tool { run, mode, spec });
        self
    }

    fn erase_async<A, O, F, Fut>(name: &str, tool: F) -> ToolFn
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let tool = Arc::new(tool);
        let tool_name: Arc<str> = Arc::from(name);
        Arc::new(move |ctx: ToolContext, args: Value| {
            let tool = tool.clone();
            let tool_name = tool_name.clone();
            Box::pin(async move {
                let args: A = parse_args(&tool_name, args)?;
                let out = tool(ctx, args).await?;
                result_value(&tool_name, out)
            })
        })
    }

    fn erase_sync<A, O, F>(name: &str, tool: F) -> ToolFn
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        let tool = Arc::new(tool);
        let tool_name: Arc<str> = Arc::from(name);
        Arc::new(move |ctx: ToolContext, args: Value| {
            let tool = tool.clone();
            let tool_name = tool_name.clone();
            Box::pin(async move {
                let args: A = parse_args(&tool_name, args)?;
                let out = run_blocking(move || tool(ctx, args)).await?;
                result_value(&tool_name, out)
            })
        })
    }

    /// Registers an async tool under `name` (replacing one of the same
    /// name), without a spec. Such a tool lacks what a spec gives
    /// ([`Tools::tool`]): its input is not validated (only deserialised
    /// into `A`), its result is not checked, `ctx.metadata()` is minimal (name, id, mode),
    /// it declares no needs or wants, and over MCP it is listed with an
    /// input schema that takes any object, no output schema (its result is
    /// text only) and a description saying so. No spec is derived from
    /// `A` and `O`: that would need `JsonSchema` of both, which a tool over
    /// a type without one could not meet; use [`Tools::tool`] with
    /// `ToolSpec::new::<A, O>(name)` to get the derived one.
    pub fn register<A, O, F, Fut>(self, name: &str, tool: F) -> Tools
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let run = Tools::erase_async(name, tool);
        self.insert(name.to_owned(), run, CallMode::Async, None)
    }

    /// Registers a sync tool (a plain function) under `name`, without a
    /// spec (what that lacks: see [`Tools::register`]). It receives the same context as an async tool and runs on a
    /// blocking thread ([`run_blocking`]); its calls are recorded as
    /// `mode: sync`.
    pub fn register_sync<A, O, F>(self, name: &str, tool: F) -> Tools
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        let run = Tools::erase_sync(name, tool);
        self.insert(name.to_owned(), run, CallMode::Sync, None)
    }

    /// Registers an async tool that declares itself with `spec`, under the
    /// spec's name (the spec's mode becomes async).
    pub fn tool<A, O, F, Fut>(self, spec: ToolSpec, tool: F) -> Tools
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let run = Tools::erase_async(&spec.name, tool);
        self.insert(spec.name.clone(), run, CallMode::Async, Some(spec))
    }

    /// Registers a sync tool that declares itself with `spec`, under the
    /// spec's name (the spec's mode becomes sync).
    pub fn tool_sync<A, O, F>(self, spec: ToolSpec, tool: F) -> Tools
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        let run = Tools::erase_sync(&spec.name, tool);
        self.insert(spec.name.clone(), run, CallMode::Sync, Some(spec))
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.map.get(name)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// The specs of the tools that declared one, sorted by name (what MCP's
    /// `tools/list` is derived from, see [`ToolSpec::mcp_tool`]).
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.map.values().filter_map(Tool::spec)
    }
}
