//! How renderers name the fact model's enums: by the names the facts are
//! stored under, never by `Debug`.
//!
//! Until the fact enums carry their own `as_str()`/`Display` (issue 13),
//! [`name`] reads a unit variant's serde name, the one the archive and the
//! tape write (`completed`, `warning`, `sync`, ...): one helper, so that a
//! renamed variant changes every rendering at once, and switching to
//! `as_str()` is a change here and at its callers only. [`call_status`] is
//! the one wording of a call's status (text summary, HTML waterfall, LSP).

use reel_core::fact::CallStatus;
use serde::Serialize;

/// The stored name of a unit enum variant (`RunStatus::Completed` is
/// `completed`, `Level::Warning` is `warning`).
///
/// ```
/// use reel_core::fact::RunStatus;
/// assert_eq!(reel_viewer::names::name(&RunStatus::Cancelled), "cancelled");
/// ```
pub fn name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        // Not a unit variant: not seen for the enums the renderers name.
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// A call's status as every renderer words it: `ok`, `error`, `aborted`,
/// or `never ended` for a call with no `call.ended`.
///
/// ```
/// use reel_core::fact::CallStatus;
/// use reel_viewer::names::call_status;
/// assert_eq!(call_status(Some(CallStatus::Aborted)), "aborted");
/// assert_eq!(call_status(None), "never ended");
/// ```
pub fn call_status(status: Option<CallStatus>) -> &'static str {
    match status {
        Some(CallStatus::Ok) => "ok",
        Some(CallStatus::Error) => "error",
        Some(CallStatus::Aborted) => "aborted",
        None => "never ended",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::fact::{CallMode, Level, RunStatus};

    #[test]
    fn names_are_the_stored_ones() {
        for status in [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::Value::String(name(&status))
            );
        }
        assert_eq!(name(&Level::Warning), "warning");
        assert_eq!(name(&CallMode::Sync), "sync");
        for status in [CallStatus::Ok, CallStatus::Error, CallStatus::Aborted] {
            assert_eq!(call_status(Some(status)), name(&status));
        }
    }
}
