//! JSON Schema for tool specs: deriving a spec's schemas from types
//! (`schemars`) and validating inputs and answers against them
//! (`jsonschema`, without network or file access). [`ToolSpecExt`] puts
//! both on the core's [`ToolSpec`]; [`validate_value`] is the one JSON Schema
//! validation (tool inputs, elicitation answers).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fact::CallMode;
use crate::lock::lock;
use crate::redact::Redactor;
use reel_core::spec::ToolSpec;

/// Derives the JSON Schema of a type (re-exported from `schemars`; derive
/// it with `schemars` as a dependency of your crate).
pub use schemars::JsonSchema;

/// What a [`ToolSpec`] does with JSON Schema: derives its schemas from
/// types (`schemars`) and validates inputs against them (`jsonschema`).
/// These were inherent methods before `ToolSpec` moved into the
/// dependency-light core; the trait keeps their names and signatures, so
/// `ToolSpec::new::<A, O>(name)` and `spec.validate(&input)` read as they
/// always did once it is in scope (`use reel::spec::ToolSpecExt`, or
/// `use reel::ToolSpecExt`).
pub trait ToolSpecExt {
    /// A spec for a tool taking `A` and returning `O`: the input and output
    /// schemas are derived from the types. Async until a registry or host
    /// accepts a sync function for it.
    fn new<A: JsonSchema, O: JsonSchema>(name: impl Into<String>) -> Self
    where
        Self: Sized;

    /// Checks `input` against the input schema. `Err` lists every failing
    /// place, in the schema's order; a message under a secret-named key
    /// (`password`, `token`, ...) never quotes the value. A schema that is
    /// not valid JSON Schema is one error at the root saying so.
    fn validate(&self, input: &Value) -> Result<(), Vec<InputError>>;
}

impl ToolSpecExt for ToolSpec {
    fn new<A: JsonSchema, O: JsonSchema>(name: impl Into<String>) -> ToolSpec {
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

    fn validate(&self, input: &Value) -> Result<(), Vec<InputError>> {
        validate_value(
            &self.input_schema,
            input,
            "the tool's input schema",
            "the tool's spec",
        )
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

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MESSAGE_LIMIT) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… (cut)", &text[..at]),
    }
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
    let validator = match compiled(schema) {
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
    let redactor = std::cell::OnceCell::new();
    let redactor = || redactor.get_or_init(Redactor::default);
    let errors: Vec<InputError> = validator
            .iter_errors(input)
            .map(|e| {
                let pointer = e.instance_path().as_str().to_owned();
                let secret = pointer
                    .split('/')
                    .skip(1)
                    .any(|segment| redactor().is_secret_key(&unescape(segment)));
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

/// The most compiled schemas [`compiled`] keeps; past it, the cache
/// starts again empty.
const COMPILED_MAX: usize = 256;

/// The validators of the schemas validated so far, by a hash of the
/// schema (each entry keeps its schema, compared whole on a hit).
type Compiled = std::collections::HashMap<u64, Vec<(Value, Arc<jsonschema::Validator>)>>;

/// `schema` compiled, once per process: a tool's schemas are the same at
/// every call, and compiling one (the draft's meta-schema, the resolver,
/// the keywords' tree) cost more than the rest of a served call's
/// recording (the `mcp-serve` row's profile: `validator_for` twice per
/// call, the input and the output schema). A schema that does not
/// compile is not kept.
fn compiled(
    schema: &Value,
) -> Result<Arc<jsonschema::Validator>, jsonschema::ValidationError<'static>> {
    static CACHE: LazyLock<Mutex<Compiled>> = LazyLock::new(Default::default);
    let key = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        hash_value(schema, &mut h);
        h.finish()
    };
    if let Some(found) = lock(&CACHE)
        .get(&key)
        .and_then(|same| same.iter().find(|(s, _)| s == schema))
    {
        return Ok(found.1.clone());
    }
    // Compiled outside the lock: another schema's validation goes on.
    let validator = Arc::new(jsonschema::validator_for(schema)?);
    let mut cache = lock(&CACHE);
    if cache.values().map(Vec::len).sum::<usize>() >= COMPILED_MAX {
        cache.clear();
    }
    cache
        .entry(key)
        .or_default()
        .push((schema.clone(), validator.clone()));
    Ok(validator)
}

/// Feeds `v` to `h`, the same for equal values (object keys in their
/// order: a schema is compared whole on a hit, so order only costs a
/// second entry).
fn hash_value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            b.hash(h);
        }
        Value::Number(n) => {
            h.write_u8(2);
            n.to_string().hash(h);
        }
        Value::String(s) => {
            h.write_u8(3);
            s.hash(h);
        }
        Value::Array(items) => {
            h.write_u8(4);
            h.write_usize(items.len());
            for item in items {
                hash_value(item, h);
            }
        }
        Value::Object(map) => {
            h.write_u8(5);
            h.write_usize(map.len());
            for (k, item) in map {
                k.hash(h);
                hash_value(item, h);
            }
        }
    }
}

/// Why `schema` is not a JSON Schema `jsonschema` can use (not valid
/// against its meta-schema, or one that does not compile: a bad regex, an
/// unresolvable `$ref`), cut to a readable length; `None` when it is one.
/// A linter's check of a schema someone else declared (`reel mcp check`).
pub fn schema_fault(schema: &Value) -> Option<String> {
    jsonschema::validator_for(schema)
        .err()
        .map(|e| cut(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// A schema is compiled once per process (see `compiled`), and two
    /// schemas that differ anywhere keep validators of their own.
    #[test]
    fn a_schema_is_compiled_once_and_never_mistaken_for_another() {
        let three = json!({ "type": "string", "minLength": 3, "x-reel-test": "once" });
        let five = json!({ "type": "string", "minLength": 5, "x-reel-test": "once" });
        let first = compiled(&three).unwrap();
        assert!(Arc::ptr_eq(&first, &compiled(&three).unwrap()));
        assert!(!Arc::ptr_eq(&first, &compiled(&five).unwrap()));
        let check = |schema: &Value| validate_value(schema, &json!("abcd"), "s", "f").is_ok();
        assert!(check(&three));
        assert!(!check(&five));
        assert!(check(&three));
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
    fn a_schema_fault_says_why_and_a_good_schema_has_none() {
        assert_eq!(schema_fault(&json!({ "type": "object" })), None);
        let fault = schema_fault(&json!({ "type": "thing" })).expect("a fault");
        assert!(fault.contains("thing"), "{fault}");
        assert!(schema_fault(&json!({ "type": "string", "pattern": "(" })).is_some());
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
