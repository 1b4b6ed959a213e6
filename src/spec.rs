//! Tool specs: a tool declares itself once.
//!
//! A [`ToolSpec`] holds what a tool says about itself (name, id, title,
//! description, MCP annotations), the JSON Schema of its input and output
//! (derived from its argument and result types with `schemars`), its mode
//! (sync or async: filled in by what accepted the function, never a label),
//! the credentials it needs (by name) and the arguments that carry claim
//! tickets for artifacts it wants.
//!
//! Before the tool runs, the host resolves every declared want (the
//! artifact's data replaces the ticket in the arguments, and
//! [`CallStarted::wanted`](crate::fact::CallStarted::wanted) names the
//! tickets), files `call.started` with the spec in it, validates the input
//! against the schema (a rejected input ends the call with an error naming
//! each failing JSON pointer; the tool never runs), and resolves every
//! declared need. The replayer does the same from the record.
//!
//! Field names follow the record's (snake case); [`ToolSpec::mcp_tool`]
//! gives the spec as MCP's `Tool` of `tools/list` (`name`, `title`,
//! `description`, `inputSchema`, `outputSchema`, `annotations` with
//! `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`).
//!
//! ```
//! use reel::spec::{Annotations, JsonSchema, ToolSpec};
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct DeployArgs {
//!     service: String,
//!     replicas: u8,
//! }
//!
//! let spec = ToolSpec::new::<DeployArgs, String>("deploy")
//!     .title("Deploy a service")
//!     .annotations(Annotations { destructive_hint: Some(true), ..Annotations::default() })
//!     .needs(["github", "registry"])
//!     .wants(["plan"]);
//! assert_eq!(spec.needs, ["github", "registry"]);
//! assert!(spec.validate(&json!({ "service": "billing", "replicas": 2 })).is_ok());
//!
//! let rejected = spec.validate(&json!({ "service": 7, "replicas": 300 })).unwrap_err();
//! let pointers: Vec<&str> = rejected.iter().map(|e| e.pointer.as_str()).collect();
//! assert_eq!(pointers, ["/service", "/replicas"]);
//!
//! let mcp = spec.mcp_tool();
//! assert_eq!(mcp["annotations"], json!({ "destructiveHint": true }));
//! assert_eq!(mcp["inputSchema"]["required"], json!(["service", "replicas"]));
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::context::CallBackend;
use crate::fact::{ArtifactMeta, CallMode};
use crate::redact::{artifact_ref, Redactor, ARTIFACT_REF};

/// Derives the JSON Schema of a type (re-exported from `schemars`; derive
/// it with `schemars` as a dependency of your crate).
pub use schemars::JsonSchema;

/// What a tool declares about itself. Serialisable: it is recorded in
/// `call.started` (see [`CallStarted::spec`](crate::fact::CallStarted::spec)).
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
    /// registry ([`Tools::tool`](crate::tools::Tools::tool),
    /// [`Tools::tool_sync`](crate::tools::Tools::tool_sync)) or the host's
    /// invoke; a value set by hand is overwritten.
    pub mode: CallMode,
    /// Credentials the tool needs, by name; each is resolved before the tool
    /// runs, and a need that fails stops the call.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Arguments (top-level members of the input) that carry claim tickets
    /// (see [`claim_ticket`]); each is resolved to the artifact's data
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

/// One reason an input was rejected: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputError {
    /// JSON pointer into the input (`""` is the whole input).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}

/// The longest message kept per input error (a message may quote the
/// value it rejects).
const MESSAGE_LIMIT: usize = 200;

impl ToolSpec {
    /// A spec for a tool taking `A` and returning `O`: the input and output
    /// schemas are derived from the types. Async until a registry or host
    /// accepts a sync function for it.
    pub fn new<A: JsonSchema, O: JsonSchema>(name: impl Into<String>) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            id: None,
            title: None,
            description: None,
            annotations: None,
            input_schema: schemars::schema_for!(A).to_value(),
            output_schema: Some(schemars::schema_for!(O).to_value()),
            mode: CallMode::Async,
            needs: Vec::new(),
            wants: Vec::new(),
        }
    }

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

    /// Checks `input` against the input schema. `Err` lists every failing
    /// place, in the schema's order; a message under a secret-named key
    /// (`password`, `token`, ...) never quotes the value. A schema that is
    /// not valid JSON Schema is one error at the root saying so.
    pub fn validate(&self, input: &Value) -> Result<(), Vec<InputError>> {
        validate_value(
            &self.input_schema,
            input,
            "the tool's input schema",
            "the tool's spec",
        )
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

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MESSAGE_LIMIT) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… (cut)", &text[..at]),
    }
}

/// The claim ticket to pass as a wanted argument: a reference to the
/// artifact `meta` describes, by its id in the run's scope, in the shape
/// [`artifact_ref`] reads: `{"$reel.artifact": id, "size": N,
/// "media_type": "..."}`.
///
/// ```
/// use reel::fact::{ArtifactMeta, Identity, Origin};
/// use reel::redact::artifact_ref;
///
/// let meta = ArtifactMeta {
///     id: "art-1".into(),
///     digest: "sha256:00".into(),
///     size: 12,
///     media_type: "application/json".into(),
///     scope: Identity::default(),
///     origin: Origin { run_id: Some("r1".into()), call_id: "c1".into() },
/// };
/// assert_eq!(artifact_ref(&reel::spec::claim_ticket(&meta)), Some("art-1"));
/// ```
pub fn claim_ticket(meta: &ArtifactMeta) -> Value {
    let mut m = Map::new();
    m.insert(ARTIFACT_REF.into(), json!(meta.id));
    m.insert("size".into(), json!(meta.size));
    m.insert("media_type".into(), json!(meta.media_type));
    Value::Object(m)
}

/// An artifact's bytes as argument data: JSON when its media type is JSON
/// (`application/json`, `...+json`), else UTF-8 text as a string; `None`
/// for bytes that are neither.
pub fn artifact_data(media_type: &str, bytes: &[u8]) -> Option<Value> {
    let essence = media_type.split(';').next().unwrap_or("").trim();
    if essence == "application/json" || essence.ends_with("+json") {
        serde_json::from_slice(bytes).ok()
    } else {
        std::str::from_utf8(bytes).ok().map(|s| json!(s))
    }
}

/// Resolves the declared wants of `spec` in `args` (the host does this
/// before it files `call.started`): each wanted argument that holds a
/// [`claim_ticket`] of an artifact the backend finds in the run's scope is
/// replaced by the artifact's data ([`artifact_data`]). Returns the tickets
/// of the resolved arguments, by argument name; `None` when none resolved
/// (absent, not empty). An argument that does not resolve (no store
/// attached, no such artifact in scope, bytes that are neither JSON nor
/// text) keeps its ticket, and input validation judges it.
pub async fn resolve_wants(
    spec: &ToolSpec,
    args: &mut Value,
    backend: &dyn CallBackend,
) -> Option<BTreeMap<String, ArtifactMeta>> {
    if spec.wants.is_empty() || !backend.has_artifacts() {
        return None;
    }
    let mut wanted = BTreeMap::new();
    for name in &spec.wants {
        let Some(id) = args.get(name).and_then(artifact_ref).map(str::to_owned) else {
            continue;
        };
        let Ok(Some((meta, bytes))) = backend.get_artifact(&id).await else {
            continue;
        };
        if let Some(data) = artifact_data(&meta.media_type, &bytes) {
            args[name.as_str()] = data;
            wanted.insert(name.clone(), meta);
        }
    }
    (!wanted.is_empty()).then_some(wanted)
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

/// The wanted arguments of `spec` that still hold a claim ticket in `args`.
pub(crate) fn unresolved_wants(spec: &ToolSpec, args: &Value) -> Vec<String> {
    spec.wants
        .iter()
        .filter(|w| args.get(w.as_str()).and_then(artifact_ref).is_some())
        .cloned()
        .collect()
}

/// Validates `input` against the full JSON Schema `schema` (every
/// keyword `jsonschema` knows; no remote `$ref`): every failing place, by
/// JSON pointer, with what is wrong there. A message never quotes a value
/// under a key that names a secret. `what` names the schema and `fix` what
/// to fix, for the error given when the schema itself is not valid.
pub fn validate_value(
    schema: &Value,
    input: &Value,
    what: &str,
    fix: &str,
) -> Result<(), Vec<InputError>> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![InputError {
                pointer: String::new(),
                message: format!(
                    "{what} is not a valid JSON Schema ({}): fix {fix}",
                    cut(&e.to_string())
                ),
            }])
        }
    };
    let redactor = Redactor::default();
    let errors: Vec<InputError> = validator
            .iter_errors(input)
            .map(|e| {
                let pointer = e.instance_path().as_str().to_owned();
                let secret = pointer
                    .split('/')
                    .skip(1)
                    .any(|segment| redactor.is_secret_key(&unescape(segment)));
                let message = if secret {
                    format!(
                        "the value does not match the schema (`{}`; not quoted: the key names a secret)",
                        e.kind().keyword()
                    )
                } else {
                    cut(&e.to_string())
                };
                InputError { pointer, message }
            })
            .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Login {
        user: String,
        #[schemars(length(min = 12))]
        password: String,
    }

    #[test]
    fn a_message_under_a_secret_key_never_quotes_the_value() {
        let spec = ToolSpec::new::<Login, ()>("login");
        let errors = spec
            .validate(&json!({ "user": "ann", "password": "hunter2" }))
            .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].pointer, "/password");
        assert!(!errors[0].message.contains("hunter2"), "{}", errors[0]);
        assert!(errors[0].message.contains("minLength"), "{}", errors[0]);
    }

    #[test]
    fn a_schema_that_does_not_compile_is_one_error_at_the_root() {
        let spec = ToolSpec::new::<Value, Value>("x").input_schema(json!({ "type": 12 }));
        let errors = spec.validate(&json!(1)).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].pointer, "");
        assert!(errors[0]
            .to_string()
            .starts_with("(root): the tool's input schema is not a valid JSON Schema"));
    }

    #[test]
    fn artifact_data_reads_json_and_text() {
        assert_eq!(
            artifact_data("application/json", b"{\"a\":1}"),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            artifact_data("application/vnd.x+json; charset=utf-8", b"[1]"),
            Some(json!([1]))
        );
        assert_eq!(artifact_data("text/markdown", b"# hi"), Some(json!("# hi")));
        assert_eq!(artifact_data("application/json", b"not json"), None);
        assert_eq!(
            artifact_data("application/octet-stream", &[0xff, 0xfe]),
            None
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "x".repeat(500);
        let spec = ToolSpec::new::<u8, ()>("n");
        let errors = spec.validate(&json!(long)).unwrap_err();
        assert!(
            errors[0].message.chars().count() < MESSAGE_LIMIT + 10,
            "{}",
            errors[0]
        );
        assert!(errors[0].message.ends_with("… (cut)"));
    }
}
