//! The recorded answers to requests other than `tools/call`: a listing's
//! page, a `resources/read`, a `prompts/get`, served field for field; a
//! recorded error as the error the server answered.

use rmcp::model::{ErrorCode, ErrorData, PaginatedRequestParams};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::Cassette;
use reel::lock::lock;

impl Cassette {
    /// The recorded answer to a `method` request whose params `fits`
    /// (`what` says which, for the error when none does): the result,
    /// served field for field, or the recorded error.
    pub(super) fn read<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        what: &str,
        context: &RequestContext<RoleServer>,
        fits: impl Fn(&Value) -> bool,
    ) -> Result<T, ErrorData> {
        let Some(read) = self
            .session
            .reads
            .iter()
            .find(|r| r.method == method && fits(&r.params))
        else {
            // A miss, as a `tools/call`'s: counted toward the exit code.
            lock(&self.tally).reads_missed += 1;
            let message = format!("reel mock: no {method} {what} was recorded");
            tracing::warn!("{}", message.trim_start_matches("reel "));
            return Err(ErrorData::invalid_params(message, None));
        };
        lock(&self.tally).reads_served += 1;
        match &read.answer {
            Ok(result) => {
                let typed = serde_json::from_value::<T>(result.clone()).map_err(|e| {
                    ErrorData::internal_error(
                        format!("reel mock: the recorded {method} does not read: {e}"),
                        None,
                    )
                })?;
                self.exactly(context, result);
                Ok(typed)
            }
            Err((text, kept)) => Err(recorded_error(text, kept.as_ref())),
        }
    }

    /// The recorded page of listing `method` for the request's cursor,
    /// read as `T` (its JSON kept for the relay); `None`: not recorded.
    pub(super) fn listing<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        request: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<T>, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let Some((_, _, page)) = self
            .session
            .listings
            .iter()
            .find(|(m, c, _)| m == method && *c == cursor)
        else {
            return match cursor {
                Some(c) => Err(ErrorData::invalid_params(
                    format!("reel mock: no {method} page was recorded for cursor {c:?}"),
                    None,
                )),
                None => Ok(None),
            };
        };
        let typed = serde_json::from_value::<T>(page.clone()).map_err(|e| {
            ErrorData::internal_error(
                format!("reel mock: the recorded {method} does not read: {e}"),
                None,
            )
        })?;
        self.exactly(context, page);
        Ok(Some(typed))
    }
}

/// A recorded error (its text, and the structured value kept beside it)
/// as the mock's answer: a JSON-RPC error as the server sent it, `data`
/// included ([`crate::outcome::rpc_error`]); any other text as an
/// internal error saying it.
pub(super) fn recorded_error(text: &str, kept: Option<&Value>) -> ErrorData {
    match crate::outcome::rpc_error(text, kept) {
        Some(error) => error_data(&error),
        None => ErrorData::internal_error(text.to_owned(), None),
    }
}

/// A JSON-RPC error object as rmcp's error.
pub(super) fn error_data(error: &Value) -> ErrorData {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    ErrorData::new(
        ErrorCode(i32::try_from(code).unwrap_or(-32603)),
        message.to_owned(),
        error.get("data").cloned(),
    )
}
