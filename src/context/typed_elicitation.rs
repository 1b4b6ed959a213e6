//! Typed questions: `ctx.elicit_as::<T>(message)` asks for a `T`, its
//! schema derived from the type and restricted to what MCP's elicitation
//! can ask (a flat object of primitives, enums of strings and
//! multi-select enum lists, SEP-1330), and gives back a `T`.

use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use super::{ContextError, Elicitation, ToolContext};
use crate::fact::{ElicitOutcome, ElicitRefused, FactKind};
use crate::schema::JsonSchema;

/// The answer to a typed question ([`ToolContext::elicit_as`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited<T> {
    /// The user answered, and the answer fits `T`.
    Accepted(T),
    /// The user declined to answer.
    Declined,
    /// The user dismissed the question.
    Cancelled,
    /// Nobody answered within the question's ttl.
    TimedOut,
}

/// The requested schema of a question for a `T`: schemars' schema of the
/// type with every subschema inlined, each field reduced to what MCP's
/// elicitation schema allows. `Err` names the fields (or the type) that
/// MCP cannot ask for, and why.
///
/// ```
/// use reel::context::question_schema;
/// use serde_json::json;
///
/// #[reel::schema]
/// enum Env { Staging, Production }
///
/// #[reel::schema]
/// struct Confirm {
///     /// Ship it now?
///     ship: bool,
///     env: Env,
///     note: Option<String>,
/// }
///
/// let schema = question_schema::<Confirm>().unwrap();
/// assert_eq!(schema["properties"]["env"], json!({ "type": "string", "enum": ["Staging", "Production"] }));
/// assert_eq!(schema["properties"]["note"], json!({ "type": "string" }));
/// assert_eq!(schema["required"], json!(["ship", "env"]));
///
/// #[reel::schema]
/// struct Nested { confirm: Confirm }
/// let refused = question_schema::<Nested>().unwrap_err();
/// assert!(refused.contains("field `confirm`: an object"), "{refused}");
/// ```
pub fn question_schema<T: JsonSchema>() -> Result<Value, String> {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let root = schema.as_value();
    let Some(properties) = root.get("properties").and_then(Value::as_object) else {
        return Err("the question's type is not a struct of named fields".into());
    };
    let mut fields = Map::new();
    let mut refused = Vec::new();
    for (name, field) in properties {
        match primitive(field) {
            Ok(f) => {
                fields.insert(name.clone(), f);
            }
            Err(why) => refused.push(format!("field `{name}`: {why}")),
        }
    }
    if !refused.is_empty() {
        return Err(refused.join("; "));
    }
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(fields));
    if let Some(required) = root.get("required") {
        out.insert("required".into(), required.clone());
    }
    Ok(Value::Object(out))
}

/// What MCP's primitive schemas keep, by type.
fn kept(ty: &str) -> &'static [&'static str] {
    match ty {
        "string" => &[
            "title",
            "description",
            "default",
            "minLength",
            "maxLength",
            "format",
            "enum",
            "oneOf",
        ],
        "integer" | "number" => &["title", "description", "default", "minimum", "maximum"],
        "boolean" => &["title", "description", "default"],
        "array" => &[
            "title",
            "description",
            "default",
            "minItems",
            "maxItems",
            "uniqueItems",
        ],
        _ => &[],
    }
}

/// The string formats MCP's string schema names.
const FORMATS: &[&str] = &["email", "uri", "date", "date-time"];

/// One field reduced to an MCP primitive schema, or why it cannot be one.
fn primitive(field: &Value) -> Result<Value, String> {
    let field = &without_null(field);
    if let Some(choices) = titled_choices(field) {
        let mut out = Map::new();
        out.insert("type".into(), json!("string"));
        copy_docs(field, &mut out);
        out.insert("oneOf".into(), Value::Array(choices));
        return Ok(Value::Object(out));
    }
    let ty = match field.get("type") {
        Some(Value::String(t)) => t.as_str(),
        _ => return Err("not a single primitive type".into()),
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(ty));
    match ty {
        "string" | "integer" | "number" | "boolean" => {
            if let Some(values) = field.get("enum") {
                if ty != "string"
                    || !values
                        .as_array()
                        .is_some_and(|v| v.iter().all(Value::is_string))
                {
                    return Err("an enum whose values are not all strings".into());
                }
            }
        }
        "array" => {
            let items = field.get("items").map(without_null);
            let items = match &items {
                Some(i) if i.get("enum").is_some() && i["type"] == "string" => {
                    json!({ "type": "string", "enum": i["enum"] })
                }
                Some(i) => match titled_choices(i) {
                    Some(choices) => json!({ "anyOf": choices }),
                    None => return Err(
                        "a list of something other than an enum of strings (MCP's multi-select)"
                            .into(),
                    ),
                },
                None => return Err("a list without item type".into()),
            };
            out.insert("items".into(), items);
        }
        "object" => return Err("an object (MCP asks for a flat object of primitives)".into()),
        other => return Err(format!("type `{other}`")),
    }
    for key in kept(ty) {
        if let Some(v) = field.get(*key) {
            if *key == "format" && !v.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                continue;
            }
            out.insert((*key).into(), v.clone());
        }
    }
    Ok(Value::Object(out))
}

/// An optional field's schema without its `null` (the field is then
/// simply not required).
fn without_null(field: &Value) -> Value {
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = field.get(key) {
            let not_null: Vec<&Value> = branches.iter().filter(|b| b["type"] != "null").collect();
            if not_null.len() == 1 && branches.len() == 2 {
                return not_null[0].clone();
            }
        }
    }
    let mut field = field.clone();
    if let Some(Value::Array(types)) = field.get("type") {
        let not_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let [one] = not_null.as_slice() {
            let one = (*one).clone();
            field["type"] = one;
        }
    }
    if let Some(Value::Array(values)) = field.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    field
}

/// An enum whose variants carry doc comments, as schemars writes it
/// (`oneOf` of `{"const": .., "description": ..}`), as MCP's titled
/// choices (`{"const": .., "title": ..}`).
fn titled_choices(field: &Value) -> Option<Vec<Value>> {
    let branches = field.get("oneOf")?.as_array()?;
    branches
        .iter()
        .map(|b| {
            let value = b.get("const")?.as_str()?;
            let title = b
                .get("title")
                .or_else(|| b.get("description"))
                .and_then(Value::as_str)
                .unwrap_or(value);
            Some(json!({ "const": value, "title": title }))
        })
        .collect()
}

fn copy_docs(field: &Value, out: &mut Map<String, Value>) {
    for key in ["title", "description", "default"] {
        if let Some(v) = field.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
}

impl ToolContext {
    /// Asks the user for a `T` and gives it back typed.
    ///
    /// The question's schema is derived from `T` ([`question_schema`]);
    /// a type MCP cannot ask for (a nested object, a list of anything but
    /// an enum of strings, a non-string enum) is refused before asking:
    /// `elicit.refused` is on the record and the error is
    /// [`ContextError::QuestionType`], naming the fields. Otherwise it is
    /// [`ToolContext::elicit`] with that schema, recorded and replayed as
    /// any question; an accepted answer that does not fit `T` (its schema,
    /// then its deserialisation) is [`ContextError::AnswerType`].
    pub async fn elicit_as<T: DeserializeOwned + JsonSchema>(
        &self,
        message: impl Into<String>,
    ) -> Result<Elicited<T>, ContextError> {
        let message = message.into();
        let ty = std::any::type_name::<T>().to_owned();
        let schema = match question_schema::<T>() {
            Ok(schema) => schema,
            Err(detail) => {
                let err = ContextError::QuestionType { ty, detail };
                self.after_respond("elicit")?;
                self.emit(FactKind::ElicitRefused(ElicitRefused {
                    message,
                    mode: crate::fact::ElicitMode::Form,
                    reason: err.to_string(),
                }));
                return Err(err);
            }
        };
        let answer = self.elicit(Elicitation::form(message, schema)).await?;
        match answer.outcome {
            ElicitOutcome::Accept { content } => {
                if !answer.validation_errors.is_empty() {
                    return Err(ContextError::AnswerType {
                        ty,
                        detail: answer.validation_errors.join("; "),
                    });
                }
                serde_json::from_value(content)
                    .map(Elicited::Accepted)
                    .map_err(|e| ContextError::AnswerType {
                        ty,
                        detail: e.to_string(),
                    })
            }
            ElicitOutcome::Decline => Ok(Elicited::Declined),
            ElicitOutcome::Cancel => Ok(Elicited::Cancelled),
            ElicitOutcome::Timeout => Ok(Elicited::TimedOut),
            ElicitOutcome::Error { message } => Err(ContextError::Elicit(message)),
        }
    }
}
