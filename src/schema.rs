//! JSON Schema for tool specs: deriving a spec's schemas from types
//! (`schemars`) and validating inputs and answers against them
//! (`jsonschema`, without network or file access). [`ToolSpecExt`] puts
//! both on the core's [`ToolSpec`]; [`validate_value`] is the one JSON Schema
//! validation (tool inputs, elicitation answers).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fact::CallMode;
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
