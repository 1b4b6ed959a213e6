//! The fact enums (statuses, outcomes, levels, scopes, modes), each with
//! `as_str()` and `Display` giving its serde name.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Lifetime a cleanup is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TeardownScope {
    /// Runs when the call ends.
    Call,
    /// Runs when the run ends.
    Run,
    /// Runs when the hosting session ends.
    Session,
}

names!(TeardownScope { Call => "call", Run => "run", Session => "session" });

/// Whether a credential was declared up front or pulled on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialMode {
    /// Declared by the tool and resolved before it ran (push).
    Declared,
    /// Pulled by the tool while running.
    Pulled,
}

names!(CredentialMode { Declared => "declared", Pulled => "pulled" });

/// The eight RFC 5424 severity levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// System is unusable.
    Emergency,
    /// Action must be taken immediately.
    Alert,
    /// Critical conditions.
    Critical,
    /// Error conditions.
    Error,
    /// Warning conditions.
    Warning,
    /// Normal but significant.
    Notice,
    /// Informational.
    Info,
    /// Debug-level messages.
    Debug,
}

names!(Level {
    Emergency => "emergency",
    Alert => "alert",
    Critical => "critical",
    Error => "error",
    Warning => "warning",
    Notice => "notice",
    Info => "info",
    Debug => "debug",
});

impl Level {
    /// All levels, most severe first.
    pub const ALL: [Level; 8] = [
        Level::Emergency,
        Level::Alert,
        Level::Critical,
        Level::Error,
        Level::Warning,
        Level::Notice,
        Level::Info,
        Level::Debug,
    ];
}

/// How an elicitation is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitMode {
    /// A form built from the schema.
    Form,
    /// A URL the user visits.
    Url,
}

names!(ElicitMode { Form => "form", Url => "url" });

/// The outcome of an elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ElicitOutcome {
    /// The user answered.
    Accept {
        /// The answer's content.
        content: Value,
    },
    /// The user declined.
    Decline,
    /// The user dismissed the question.
    Cancel,
    /// The elicitor failed (a transport error): no answer came, and the
    /// user may never have seen the question.
    Error {
        /// The elicitor's reason.
        message: String,
    },
    /// Nobody answered within the ttl.
    Timeout,
}

names!(ElicitOutcome {
    Accept => "accept",
    Decline => "decline",
    Cancel => "cancel",
    Error => "error",
    Timeout => "timeout",
});

/// How a cleanup ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TeardownOutcome {
    /// The cleanup finished.
    Ok,
    /// The cleanup failed; recorded, never thrown into the run.
    Error {
        /// What went wrong.
        message: String,
    },
    /// The cleanup did not finish within its time bound.
    TimedOut,
}

names!(TeardownOutcome { Ok => "ok", Error => "error", TimedOut => "timed_out" });

/// The outcome of a journaled effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectOutcome {
    /// The effect returned a value.
    Ok(Value),
    /// The effect failed with this error.
    Err(String),
}

names!(EffectOutcome { Ok => "ok", Err => "err" });

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Returned a result.
    Ok,
    /// Returned an error.
    Error,
    /// Was cancelled.
    Aborted,
}

names!(CallStatus { Ok => "ok", Error => "error", Aborted => "aborted" });

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Finished normally.
    Completed,
    /// Finished with an error.
    Failed,
    /// Was cancelled.
    Cancelled,
}

names!(RunStatus { Completed => "completed", Failed => "failed", Cancelled => "cancelled" });

/// Which artifact operation a refusal concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactOp {
    /// Storing.
    Put,
    /// Fetching.
    Get,
}

names!(ArtifactOp { Put => "put", Get => "get" });
