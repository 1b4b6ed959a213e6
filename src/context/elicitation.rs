//! Elicitation: asking the user a question, and holding the answer to the
//! question's JSON Schema, live and in replay alike.

use super::*;

/// A question for the user, in one of MCP 2025-11-25's two modes.
///
/// Form mode asks for structured content under `schema`; URL mode sends the
/// user to `url` (out of band: a sign-in, a payment) and names the
/// elicitation by `elicitation_id`, which the client's completion
/// notification carries back. [`Elicitation::to_mcp`] gives the request
/// parameters as MCP spells them.
///
/// ```
/// use reel::context::Elicitation;
/// let q = Elicitation::url("Sign in to GitHub", "https://github.test/login", "el-1");
/// let mcp = q.to_mcp();
/// assert_eq!(mcp["mode"], "url");
/// assert_eq!(mcp["url"], "https://github.test/login");
/// assert_eq!(mcp["elicitationId"], "el-1");
/// assert_eq!(mcp["message"], "Sign in to GitHub");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// The question.
    pub message: String,
    /// JSON Schema of the answer (form mode; `{}` in URL mode). An
    /// accepted answer is validated against all of it.
    pub schema: Value,
    /// Form or url.
    pub mode: ElicitMode,
    /// Time to live in milliseconds.
    pub ttl_ms: Option<u64>,
    /// URL mode: the link the user visits.
    pub url: Option<String>,
    /// The elicitation's id. URL mode: the id the client's completion
    /// notification names. Either mode, over MCP 2026-07-28: the key of
    /// the question in the input-required round's `inputRequests` (without
    /// one, the host names it).
    pub elicitation_id: Option<String>,
}

impl Elicitation {
    /// A form question.
    pub fn form(message: impl Into<String>, schema: Value) -> Elicitation {
        Elicitation {
            message: message.into(),
            schema,
            mode: ElicitMode::Form,
            ttl_ms: None,
            url: None,
            elicitation_id: None,
        }
    }

    /// A URL question: the user visits `url`; `elicitation_id` names this
    /// elicitation for the client's completion notification.
    pub fn url(
        message: impl Into<String>,
        url: impl Into<String>,
        elicitation_id: impl Into<String>,
    ) -> Elicitation {
        Elicitation {
            mode: ElicitMode::Url,
            url: Some(url.into()),
            elicitation_id: Some(elicitation_id.into()),
            ..Elicitation::form(message, json!({}))
        }
    }

    /// Bounds how long to wait for an answer.
    pub fn ttl_ms(mut self, ttl: u64) -> Elicitation {
        self.ttl_ms = Some(ttl);
        self
    }

    /// The `elicitation/create` request parameters, as MCP 2025-11-25
    /// spells them: `mode`, `message`, and `requestedSchema` (form) or
    /// `url` and `elicitationId` (url).
    pub fn to_mcp(&self) -> Value {
        match self.mode {
            ElicitMode::Form => json!({
                "mode": "form",
                "message": self.message,
                "requestedSchema": self.schema,
            }),
            ElicitMode::Url => json!({
                "mode": "url",
                "message": self.message,
                "url": self.url,
                "elicitationId": self.elicitation_id,
            }),
        }
    }
}

/// The user's answer, as the elicitor reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitAnswer {
    /// Accept / decline / cancel / timeout / error.
    pub outcome: ElicitOutcome,
    /// Validation errors of the answer against the schema.
    pub validation_errors: Vec<String>,
    /// True when the answer was known without asking.
    pub pre_resolved: bool,
}

/// FrontMCP's status of an elicitation's answer (seed 004's `ElicitResult`
/// `status`): MCP's outcomes folded into three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElicitStatus {
    /// The user answered, and the answer fits the question's schema.
    Accept,
    /// No usable answer: the user declined or dismissed the question, the
    /// answer does not fit the schema (its validation errors say where),
    /// or the elicitor failed.
    Reject,
    /// Nobody answered within the ttl.
    Timeout,
}

impl ElicitStatus {
    /// FrontMCP's name: `accept`, `reject` or `timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitStatus::Accept => "accept",
            ElicitStatus::Reject => "reject",
            ElicitStatus::Timeout => "timeout",
        }
    }
}

impl fmt::Display for ElicitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// FrontMCP's view of an answer (seed 004: `{ status, content?,
/// validationErrors? }`), from [`ElicitAnswer::frontmcp`]. MCP's finer
/// outcome stays on the answer ([`ElicitAnswer::outcome`]) and on the
/// record.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitResult {
    /// Accept, reject or timeout.
    pub status: ElicitStatus,
    /// The answer's content: present only when accepted.
    pub content: Option<Value>,
    /// Why an accepted answer was rejected: one `"<JSON pointer>:
    /// <message>"` per place it does not fit the schema. Present only on
    /// such a rejection (never empty).
    pub validation_errors: Option<Vec<String>>,
}

impl ElicitResult {
    /// The view as FrontMCP spells it: `{"status": .., "content"?: ..,
    /// "validationErrors"?: [..]}`, absent parts left out.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("status".into(), json!(self.status.as_str()));
        if let Some(content) = &self.content {
            out.insert("content".into(), content.clone());
        }
        if let Some(errors) = &self.validation_errors {
            out.insert("validationErrors".into(), json!(errors));
        }
        Value::Object(out)
    }
}

impl ElicitAnswer {
    /// FrontMCP's status of this answer: `accept` for an accepted answer
    /// with no validation errors; `reject` for one with validation errors,
    /// for MCP's `decline` and `cancel`, and for an elicitor's `error`;
    /// `timeout` for `timeout`.
    pub fn status(&self) -> ElicitStatus {
        match &self.outcome {
            ElicitOutcome::Accept { .. } if self.validation_errors.is_empty() => {
                ElicitStatus::Accept
            }
            ElicitOutcome::Timeout => ElicitStatus::Timeout,
            _ => ElicitStatus::Reject,
        }
    }

    /// FrontMCP's view of this answer (seed 004's `ElicitResult`): its
    /// [`ElicitAnswer::status`], the content of an accepted answer, and
    /// the validation errors of an answer rejected for not fitting the
    /// question's schema. The same live and in replay: it is computed from
    /// the answer, which replay gives back from the record.
    ///
    /// ```
    /// use reel::context::{ElicitAnswer, ElicitStatus};
    /// use reel::fact::ElicitOutcome;
    /// use serde_json::json;
    /// let answer = ElicitAnswer {
    ///     outcome: ElicitOutcome::Accept { content: json!({ "confirmed": "yes" }) },
    ///     validation_errors: vec!["/confirmed: \"yes\" is not of type \"boolean\"".into()],
    ///     pre_resolved: false,
    /// };
    /// let view = answer.frontmcp();
    /// assert_eq!(view.status, ElicitStatus::Reject);
    /// assert_eq!(view.content, None);
    /// assert_eq!(view.to_json()["validationErrors"][0], answer.validation_errors[0]);
    /// ```
    pub fn frontmcp(&self) -> ElicitResult {
        let status = self.status();
        let content = match (&self.outcome, status) {
            (ElicitOutcome::Accept { content }, ElicitStatus::Accept) => Some(content.clone()),
            _ => None,
        };
        let validation_errors = match &self.outcome {
            ElicitOutcome::Accept { .. } if !self.validation_errors.is_empty() => {
                Some(self.validation_errors.clone())
            }
            _ => None,
        };
        ElicitResult {
            status,
            content,
            validation_errors,
        }
    }
}

/// Validates an elicitation answer against the full JSON Schema of the
/// question ([`crate::schema::validate_value`]): one `"<JSON pointer>:
/// <message>"` per failing place (`"(root): ..."` for the whole answer);
/// empty when it fits.
///
/// ```
/// use serde_json::json;
/// let schema = json!({
///     "type": "object",
///     "properties": { "n": { "type": "integer", "minimum": 1 } },
///     "required": ["n"],
/// });
/// assert!(reel::context::validate_answer(&schema, &json!({ "n": 2 })).is_empty());
/// assert_eq!(
///     reel::context::validate_answer(&schema, &json!({ "n": 0 })),
///     vec!["/n: 0 is less than the minimum of 1".to_string()],
/// );
/// ```
pub fn validate_answer(schema: &Value, content: &Value) -> Vec<String> {
    match crate::schema::validate_value(
        schema,
        content,
        "the question's schema",
        "the question (`Elicitation::schema`)",
    ) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

impl ToolContext {
    /// True when an elicitor is attached: [`ToolContext::elicit`] refuses
    /// without one.
    pub fn has_elicitor(&self) -> bool {
        self.inner.backend.has_elicitor()
    }

    /// Asks the user a question and waits for the answer.
    ///
    /// Without an elicitor the question is refused (`elicit.refused`,
    /// [`ContextError::NoElicitor`]). An accepted answer is validated
    /// against the full JSON Schema of the question (the same live and in
    /// replay); each failing place is one of
    /// [`ElicitAnswer::validation_errors`], as `"<JSON pointer>: <what is
    /// wrong>"`. An elicitor's failure is recorded as outcome `error` and
    /// returned as [`ContextError::Elicit`].
    pub async fn elicit(&self, question: Elicitation) -> Result<ElicitAnswer, ContextError> {
        self.after_respond("elicit")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        if !self.inner.backend.has_elicitor() {
            let err = ContextError::NoElicitor;
            self.emit(FactKind::ElicitRefused(ElicitRefused {
                message: question.message.clone(),
                mode: question.mode,
                reason: err.to_string(),
            }));
            return Err(err);
        }
        self.emit(FactKind::ElicitRequested(ElicitRequested {
            message: question.message.clone(),
            schema: question.schema.clone(),
            mode: question.mode,
            ttl_ms: question.ttl_ms,
            url: question.url.clone(),
            elicitation_id: question.elicitation_id.clone(),
        }));
        match self
            .until_cancelled(self.inner.backend.elicit(&question))
            .await?
        {
            Ok(mut answer) => {
                if let ElicitOutcome::Accept { content } = &answer.outcome {
                    for e in validate_answer(&question.schema, content) {
                        if !answer.validation_errors.contains(&e) {
                            answer.validation_errors.push(e);
                        }
                    }
                }
                self.emit(FactKind::ElicitAnswered(ElicitAnswered {
                    outcome: answer.outcome.clone(),
                    validation_errors: answer.validation_errors.clone(),
                    pre_resolved: answer.pre_resolved,
                }));
                match answer.outcome {
                    ElicitOutcome::Error { message } => Err(ContextError::Elicit(message)),
                    _ => Ok(answer),
                }
            }
            Err(e) => {
                self.emit(FactKind::ElicitAnswered(ElicitAnswered {
                    outcome: ElicitOutcome::Error { message: e.clone() },
                    validation_errors: Vec::new(),
                    pre_resolved: false,
                }));
                Err(ContextError::Elicit(e))
            }
        }
    }

    // ---- teardown ---------------------------------------------------------------
}
