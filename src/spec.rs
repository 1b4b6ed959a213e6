//! Tool specs: a tool declares itself once.
//!
//! A [`ToolSpec`] holds what a tool says about itself (name, id, title,
//! description, MCP annotations), the JSON Schema of its input and output
//! (derived from its argument and result types with `schemars`, see
//! [`ToolSpecExt::new`]), its mode
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
//! `ToolSpec` itself is plain data and lives in the core
//! ([`reel_core::spec`]) with the facts that record it; what needs
//! `schemars` (deriving the schemas from types) and `jsonschema`
//! (validating an input) is [`ToolSpecExt`], re-exported at the crate root:
//! bring it into scope with the spec (`use reel::spec::{ToolSpec,
//! ToolSpecExt}`) to call `ToolSpec::new::<A, O>` and `spec.validate`.
//!
//! ```
//! use reel::spec::{Annotations, JsonSchema, ToolSpec, ToolSpecExt};
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

use serde_json::{json, Map, Value};

use crate::context::CallBackend;
use crate::fact::ArtifactMeta;
use crate::redact::{artifact_ref, ARTIFACT_REF};

/// Deriving and validating JSON Schema ([`ToolSpecExt`]: `ToolSpec::new`,
/// `validate`), the input errors, and the one validation of a value
/// against a schema.
pub use crate::schema::{schema_fault, validate_value, InputError, JsonSchema, ToolSpecExt};

/// The spec as data (the record's): the core's ([`reel_core::spec`]).
pub use reel_core::spec::{Annotations, ToolSpec};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
