//! Tool specs as data: what a tool declares about itself, as recorded in
//! `call.started` (see `fact::CallStarted::spec`).
//!
//! A [`ToolSpec`] holds what a tool says about itself (name, id, title,
//! description, MCP annotations), the JSON Schema of its input and output,
//! its mode (sync or async: filled in by what accepted the function, never
//! a label), the credentials it needs (by name) and the arguments that
//! carry claim tickets for artifacts it wants. Deriving the schemas from
//! types (`schemars`) and validating inputs against them (`jsonschema`)
//! are the `reel` crate's (`reel::spec::ToolSpecExt`): this crate stays at
//! serde.
//!
//! Field names follow the record's (snake case); [`ToolSpec::mcp_tool`]
//! gives the spec as MCP's `Tool` of `tools/list` (`name`, `title`,
//! `description`, `inputSchema`, `outputSchema`, `annotations` with
//! `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`).
//!
//! ```
//! use reel_core::fact::CallMode;
//! use reel_core::spec::{Annotations, ToolSpec};
//! use serde_json::json;
//!
//! let spec = ToolSpec {
//!     name: "deploy".into(),
//!     id: None,
//!     title: None,
//!     description: None,
//!     annotations: None,
//!     input_schema: json!({ "type": "object" }),
//!     output_schema: None,
//!     mode: CallMode::Async,
//!     needs: vec![],
//!     wants: vec![],
//! }
//! .title("Deploy a service")
//! .annotations(Annotations { destructive_hint: Some(true), ..Annotations::default() })
//! .needs(["github", "registry", "github"]);
//! assert_eq!(spec.needs, ["github", "registry"]);
//! let mcp = spec.mcp_tool();
//! assert_eq!(mcp["annotations"], json!({ "destructiveHint": true }));
//! assert_eq!(mcp["inputSchema"], json!({ "type": "object" }));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// What a tool declares about itself. Serialisable: it is recorded in
/// `call.started` (see `fact::CallStarted::spec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name: the name it is registered and called under.
    pub name: String,
    /// The tool's id, when it differs from its name.
    #[serde(default)]
    pub id: Option<String>,
    /// A title for people.
    #[serde(default)]
    pub title: Option<String>,
    /// What the tool does, for people and models.
    #[serde(default)]
    pub description: Option<String>,
    /// MCP's behaviour hints; `None` when the tool gave none.
    #[serde(default)]
    pub annotations: Option<Annotations>,
    /// JSON Schema of the tool's input (its arguments).
    pub input_schema: Value,
    /// JSON Schema of the tool's result, when known (`null` is not a
    /// schema: it reads back as `None`).
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Sync or async: what accepted the tool's function. Filled in by the
    /// registry (`reel::tools::Tools::tool`,
    /// `Tools::tool_sync`) or the host's
    /// invoke; a value set by hand is overwritten.
    pub mode: CallMode,
    /// Credentials the tool needs, by name; each is resolved before the tool
    /// runs, and a need that fails stops the call.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Arguments (top-level members of the input) that carry claim tickets
    /// (see `reel::spec::claim_ticket`); each is resolved to the artifact's data
    /// before the tool runs.
    #[serde(default)]
    pub wants: Vec<String>,
}

/// MCP's tool annotations: hints about the tool's behaviour, for clients.
/// Each is `None` unless the tool gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Annotations {
    /// The tool does not modify its environment.
    #[serde(default)]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    #[serde(default)]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    #[serde(default)]
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    #[serde(default)]
    pub open_world_hint: Option<bool>,
}

impl Annotations {
    /// The hints given, as words for people: `read-only`, `not
    /// destructive`, `idempotent`, `open world`, ... in MCP's order.
    pub fn words(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut hint = |v: Option<bool>, yes: &'static str, no: &'static str| {
            if let Some(v) = v {
                out.push(if v { yes } else { no });
            }
        };
        hint(self.read_only_hint, "read-only", "not read-only");
        hint(self.destructive_hint, "destructive", "not destructive");
        hint(self.idempotent_hint, "idempotent", "not idempotent");
        hint(self.open_world_hint, "open world", "closed world");
        out
    }
}

/// Declared execution discipline of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallMode {
    /// Synchronous.
    Sync,
    /// Asynchronous.
    Async,
}

names!(CallMode { Sync => "sync", Async => "async" });

impl ToolSpec {
    /// The tool's id, when it differs from its name.
    pub fn id(mut self, id: impl Into<String>) -> ToolSpec {
        self.id = Some(id.into());
        self
    }

    /// A title for people.
    pub fn title(mut self, title: impl Into<String>) -> ToolSpec {
        self.title = Some(title.into());
        self
    }

    /// What the tool does.
    pub fn description(mut self, description: impl Into<String>) -> ToolSpec {
        self.description = Some(description.into());
        self
    }

    /// MCP's behaviour hints.
    pub fn annotations(mut self, annotations: Annotations) -> ToolSpec {
        self.annotations = Some(annotations);
        self
    }

    /// Replaces the derived input schema (e.g. one written by hand).
    pub fn input_schema(mut self, schema: Value) -> ToolSpec {
        self.input_schema = schema;
        self
    }

    /// Replaces the derived output schema; `None` when unknown.
    pub fn output_schema(mut self, schema: Option<Value>) -> ToolSpec {
        self.output_schema = schema;
        self
    }

    /// Adds credential needs, by name (a name declared twice counts once).
    pub fn needs<S: Into<String>>(mut self, needs: impl IntoIterator<Item = S>) -> ToolSpec {
        for need in needs {
            let need = need.into();
            if !self.needs.contains(&need) {
                self.needs.push(need);
            }
        }
        self
    }

    /// Adds artifact wants: the arguments that carry claim tickets.
    pub fn wants<S: Into<String>>(mut self, wants: impl IntoIterator<Item = S>) -> ToolSpec {
        for want in wants {
            let want = want.into();
            if !self.wants.contains(&want) {
                self.wants.push(want);
            }
        }
        self
    }

    /// The tool's id: its `id`, or its name when it has none.
    pub fn tool_id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.name)
    }

    /// The spec as MCP's `Tool` (an entry of `tools/list`): `name`,
    /// `title`, `description`, `inputSchema`, `outputSchema` and
    /// `annotations` (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
    /// `openWorldHint`), each present only when the spec has it.
    pub fn mcp_tool(&self) -> Value {
        let mut tool = Map::new();
        tool.insert("name".into(), json!(self.name));
        if let Some(t) = &self.title {
            tool.insert("title".into(), json!(t));
        }
        if let Some(d) = &self.description {
            tool.insert("description".into(), json!(d));
        }
        tool.insert("inputSchema".into(), self.input_schema.clone());
        if let Some(o) = &self.output_schema {
            tool.insert("outputSchema".into(), o.clone());
        }
        if let Some(a) = &self.annotations {
            let mut hints = Map::new();
            for (key, v) in [
                ("readOnlyHint", a.read_only_hint),
                ("destructiveHint", a.destructive_hint),
                ("idempotentHint", a.idempotent_hint),
                ("openWorldHint", a.open_world_hint),
            ] {
                if let Some(v) = v {
                    hints.insert(key.into(), json!(v));
                }
            }
            tool.insert("annotations".into(), Value::Object(hints));
        }
        Value::Object(tool)
    }
}
