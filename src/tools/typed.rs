//! Typed registration: a tool whose spec's input and output types are the
//! function's own, checked by the compiler ([`TypedTool`], what
//! `#[reel::tool]` yields, and [`Tools::typed`] without the attribute).

use std::future::Future;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Tool, Tools};
use crate::context::{ToolContext, ToolError};
use crate::fact::CallMode;
use crate::schema::{JsonSchema, ToolSpecExt};
use reel_core::spec::{Annotations, ToolSpec};

/// What a tool's input type needs: it is deserialised from the call's
/// arguments, and the spec's input schema is derived from it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's input: it needs `Deserialize` and `JsonSchema`",
    label = "the input of this tool (`#[reel::tool]` or `TypedTool`)",
    note = "put `#[reel::schema]` on the type (or derive `serde::Deserialize` and `schemars::JsonSchema`)"
)]
pub trait ToolInput: DeserializeOwned + JsonSchema + Send + 'static {}
impl<T: DeserializeOwned + JsonSchema + Send + 'static> ToolInput for T {}

/// What a tool's output type needs: it is serialised into the call's
/// result, and the spec's output schema is derived from it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's output: it needs `Serialize` and `JsonSchema`",
    label = "the output of this tool (`#[reel::tool]` or `TypedTool`)",
    note = "put `#[reel::schema]` on the type (or derive `serde::Serialize` and `schemars::JsonSchema`)"
)]
pub trait ToolOutput: Serialize + JsonSchema + Send + 'static {}
impl<T: Serialize + JsonSchema + Send + 'static> ToolOutput for T {}

/// A tool function's result type, `Result<Out, ToolError>`: how
/// `#[reel::tool]` reads `Out` from the signature (an alias of that type
/// works as well).
#[diagnostic::on_unimplemented(
    message = "a tool returns `Result<Out, ToolError>`, not `{Self}`",
    label = "`#[reel::tool]` reads the tool's output type from this"
)]
pub trait ToolResult {
    /// The tool's output.
    type Out;
}
impl<O> ToolResult for Result<O, ToolError> {
    type Out = O;
}

/// A tool with its spec, typed: the spec's input and output schemas are
/// derived from `A` and `O`, the very types the function takes and
/// returns, so the two cannot disagree (a function of other types does
/// not compile). `#[reel::tool]` yields one; [`Tools::with`] registers it.
///
/// ```
/// use reel::prelude::*;
///
/// #[reel::schema]
/// struct Sum { a: i64, b: i64 }
///
/// async fn add(_ctx: ToolContext, s: Sum) -> Result<i64, ToolError> {
///     Ok(s.a + s.b)
/// }
///
/// let tool = TypedTool::new("add", add).title("Add two numbers");
/// assert_eq!(tool.spec().input_schema["required"], json!(["a", "b"]));
/// assert_eq!(tool.spec().output_schema.as_ref().unwrap()["type"], "integer");
/// let tools = Tools::new().with(tool);
/// assert_eq!(tools.get("add").unwrap().spec().unwrap().title.as_deref(), Some("Add two numbers"));
/// ```
pub struct TypedTool<A, O> {
    run: super::ToolFn,
    mode: CallMode,
    spec: ToolSpec,
    types: PhantomData<fn(A) -> O>,
}

impl<A, O> std::fmt::Debug for TypedTool<A, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedTool")
            .field("mode", &self.mode)
            .field("spec", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl<A, O> TypedTool<A, O> {
    /// An async tool named `name`, its spec derived from `A` and `O`.
    pub fn new<F, Fut>(name: impl Into<String>, tool: F) -> TypedTool<A, O>
    where
        A: ToolInput,
        O: ToolOutput,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let mut spec = <ToolSpec as ToolSpecExt>::new::<A, O>(name);
        spec.mode = CallMode::Async;
        let run = Tools::erase_async(&spec.name, tool);
        TypedTool::from_parts(run, CallMode::Async, spec)
    }

    /// A sync tool (a plain function) named `name`, its spec derived
    /// from `A` and `O`; it runs on a blocking thread, as
    /// [`Tools::tool_sync`]'s do.
    pub fn new_sync<F>(name: impl Into<String>, tool: F) -> TypedTool<A, O>
    where
        A: ToolInput,
        O: ToolOutput,
        F: Fn(ToolContext, A) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        let mut spec = <ToolSpec as ToolSpecExt>::new::<A, O>(name);
        spec.mode = CallMode::Sync;
        let run = Tools::erase_sync(&spec.name, tool);
        TypedTool::from_parts(run, CallMode::Sync, spec)
    }

    fn from_parts(run: super::ToolFn, mode: CallMode, spec: ToolSpec) -> TypedTool<A, O> {
        TypedTool {
            run,
            mode,
            spec,
            types: PhantomData,
        }
    }

    fn edit(mut self, f: impl FnOnce(ToolSpec) -> ToolSpec) -> TypedTool<A, O> {
        self.spec = f(self.spec);
        self
    }

    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The tool's id, when it differs from its name.
    pub fn id(self, id: impl Into<String>) -> TypedTool<A, O> {
        self.edit(|s| s.id(id))
    }

    /// A title for people.
    pub fn title(self, title: impl Into<String>) -> TypedTool<A, O> {
        self.edit(|s| s.title(title))
    }

    /// What the tool does.
    pub fn description(self, description: impl Into<String>) -> TypedTool<A, O> {
        self.edit(|s| s.description(description))
    }

    /// MCP's behaviour hints.
    pub fn annotations(self, annotations: Annotations) -> TypedTool<A, O> {
        self.edit(|s| s.annotations(annotations))
    }

    /// Credential needs, by name.
    pub fn needs<S: Into<String>>(self, needs: impl IntoIterator<Item = S>) -> TypedTool<A, O> {
        self.edit(|s| s.needs(needs))
    }

    /// Artifact wants: the arguments that carry claim tickets.
    pub fn wants<S: Into<String>>(self, wants: impl IntoIterator<Item = S>) -> TypedTool<A, O> {
        self.edit(|s| s.wants(wants))
    }
}

impl<A, O> From<TypedTool<A, O>> for Tool {
    fn from(typed: TypedTool<A, O>) -> Tool {
        Tool {
            run: typed.run,
            mode: typed.mode,
            spec: Some(typed.spec),
        }
    }
}

impl Tools {
    /// Registers a typed tool ([`TypedTool`], what `#[reel::tool]`
    /// yields) under its spec's name, replacing one of the same name.
    pub fn with<A, O>(mut self, tool: TypedTool<A, O>) -> Tools {
        let name = tool.spec.name.clone();
        self.map.insert(name, tool.into());
        self
    }

    /// Registers an async tool under `name` with the spec derived from
    /// its own argument and result types (`TypedTool::new(name, tool)`):
    /// the typed registration without the attribute.
    ///
    /// ```
    /// use reel::prelude::*;
    /// async fn add(_ctx: ToolContext, (a, b): (i64, i64)) -> Result<i64, ToolError> {
    ///     Ok(a + b)
    /// }
    /// let tools = Tools::new().typed("add", add);
    /// let spec = tools.get("add").unwrap().spec().unwrap();
    /// assert_eq!(spec.output_schema.as_ref().unwrap()["type"], "integer");
    /// ```
    pub fn typed<A, O, F, Fut>(self, name: &str, tool: F) -> Tools
    where
        A: ToolInput,
        O: ToolOutput,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.with(TypedTool::new(name, tool))
    }

    /// [`Tools::typed`] for a sync tool (a plain function).
    pub fn typed_sync<A, O, F>(self, name: &str, tool: F) -> Tools
    where
        A: ToolInput,
        O: ToolOutput,
        F: Fn(ToolContext, A) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        self.with(TypedTool::new_sync(name, tool))
    }
}
