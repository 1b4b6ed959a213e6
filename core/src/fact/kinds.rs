//! The catalogue: one struct with named fields per fact kind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;

/// `run.started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    /// The run's id, as the host named it.
    pub run_id: String,
    /// The hosting session, when the run is bound to one. Caller data.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The identity the caller supplied; `None` when none was.
    #[serde(default)]
    pub identity: Option<Identity>,
    /// What recorded the run.
    pub producer: Producer,
    /// Free-form labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The teardown scopes this host honours; empty means none ever fires.
    #[serde(default)]
    pub teardown_scopes: Vec<TeardownScope>,
}

/// `call.started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallStarted {
    /// Unique id of this invocation.
    pub call_id: String,
    /// Tool name.
    pub tool_name: String,
    /// Tool id, when it differs from the name.
    #[serde(default)]
    pub tool_id: Option<String>,
    /// The call that dispatched this one (nested dispatch).
    #[serde(default)]
    pub parent_call: Option<String>,
    /// Iteration of the agent loop.
    #[serde(default)]
    pub iteration: u32,
    /// Opaque invocation id shared by this call's `call.started` and
    /// `call.ended` and the host's receipts. The recorder always sets one
    /// (the host's, or one it generates); `None` in records that predate
    /// that.
    #[serde(default)]
    pub invocation_id: Option<String>,
    /// Sync or async: what the registry (or host) accepted for the tool.
    pub mode: CallMode,
    /// Protocol the call came over, e.g. `"mcp"`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Detected AI platform, e.g. `"claude"`.
    #[serde(default)]
    pub platform: Option<String>,
    /// Client information, when the transport gave it.
    #[serde(default)]
    pub client_info: Option<ClientInfo>,
    /// The call's arguments (after redaction).
    pub args: Value,
    /// Claim tickets of resolved wanted artifacts; `None` when nothing was
    /// wanted or resolved (absent and empty differ).
    #[serde(default)]
    pub wanted: Option<BTreeMap<String, ArtifactMeta>>,
    /// What the host attached to this call (the capabilities the tool can
    /// branch on); `None` in records that predate it.
    #[serde(default)]
    pub attached: Option<Attached>,
    /// The tool's spec, when it declared one: on every call, so that each
    /// call's record stands alone (replaying one call, a child served from
    /// the record, a hover on its line) and says what the tool declared
    /// then, also when a host changes a tool within a run. `None` for a
    /// tool without a spec and in records that predate specs. Boxed: a
    /// spec is large, and most facts are not calls.
    #[serde(default)]
    pub spec: Option<Box<crate::spec::ToolSpec>>,
    /// The tools the call could dispatch to, sorted (`None`: no dispatch
    /// attached, or a record made before this was kept; `Some([])`: a
    /// dispatch with no tools). Replay answers `ctx.tools()` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_tools: Option<Vec<String>>,
    /// Present exactly on the first fact of a call outside any run (seed
    /// 000: `runId` is absent where there is no run, as for a call served
    /// over MCP): who called and what served it, as a `run.started` says
    /// it for a run. Such a call is a stream of its own in the archive,
    /// stored under [`OutsideRun::key`]; no run id is invented for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_run: Option<Box<OutsideRun>>,
}

/// The head of a call outside any run: what `run.started` says for a run
/// (the session, the caller, the producer, labels and the teardown scopes
/// honoured), said by the call's own `call.started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutsideRun {
    /// The key the archive keeps the call under: `call-` and 128 random
    /// bits, assigned by the recorder (never the host's invocation id, which
    /// need not be unique, nor a run id: the call has none).
    pub key: String,
    /// The hosting session (an MCP session, say), when there is one.
    /// Caller data.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The identity the caller supplied; `None` when none was.
    #[serde(default)]
    pub identity: Option<Identity>,
    /// What recorded the call.
    pub producer: Producer,
    /// Free-form labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The teardown scopes this door honours (a call outside any run has
    /// no run to tie a cleanup to).
    #[serde(default)]
    pub teardown_scopes: Vec<TeardownScope>,
}

/// What a host attached to a call. A tool branches on these
/// (`has_credentials()`, ...); replay gives the same answers back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Attached {
    /// A credential provider.
    pub credentials: bool,
    /// An artifact store.
    pub artifacts: bool,
    /// An elicitor.
    pub elicitor: bool,
    /// Nested tool dispatch.
    pub dispatch: bool,
    /// A listener for log notifications.
    pub log_listener: bool,
    /// Whether `report` payloads are kept (content logging).
    #[serde(default)]
    pub content_logging: bool,
}

/// `credential.requested`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialRequested {
    /// The need or service name, e.g. `"github"`.
    pub need: String,
    /// Declared or pulled.
    pub mode: CredentialMode,
    /// Kind of credential wanted, e.g. `"oauth"`, when stated.
    #[serde(default)]
    pub kind: Option<String>,
}

/// `credential.resolved`. Never carries the secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialResolved {
    /// The need or service name.
    pub need: String,
    /// Declared or pulled.
    pub mode: CredentialMode,
    /// Kind of credential, when known.
    #[serde(default)]
    pub kind: Option<String>,
    /// Keyed fingerprint of the secret.
    pub fingerprint: Fingerprint,
    /// Expiry, unix nanoseconds, when known.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

/// `credential.failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialFailed {
    /// The need or service name.
    pub need: String,
    /// Declared or pulled.
    pub mode: CredentialMode,
    /// Why it failed (never containing the secret).
    pub reason: String,
}

/// `credential.refused`: no provider attached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialRefused {
    /// The need or service name.
    pub need: String,
    /// Declared or pulled.
    pub mode: CredentialMode,
    /// The refusal as the tool saw it.
    pub reason: String,
}

/// `artifact.put`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactPut {
    /// The claim ticket, origin stamped.
    pub meta: ArtifactMeta,
}

/// `artifact.get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactGet {
    /// The id asked for.
    pub id: String,
    /// The ticket found; `None` when the store had no such artifact.
    #[serde(default)]
    pub meta: Option<ArtifactMeta>,
}

/// `artifact.refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRefused {
    /// Put or get.
    pub op: ArtifactOp,
    /// The id concerned, for a get.
    #[serde(default)]
    pub id: Option<String>,
    /// The refusal as the tool saw it.
    pub reason: String,
}

/// `progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The tool's payload, stored untouched (after redaction).
    pub payload: Value,
    /// How many progress reports this call has made so far, this one included.
    pub count: u64,
    /// Whether the report was sent to a client (an MCP client that asked
    /// for progress with a `progressToken`); false when nothing listened,
    /// and in records made before it was kept. (Format 6.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delivered: bool,
}

/// `log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// RFC 5424 level.
    pub level: Level,
    /// Logger name, when given.
    #[serde(default)]
    pub logger: Option<String>,
    /// Sub-flow logger id, when logged through one.
    #[serde(default)]
    pub subflow: Option<String>,
    /// The message or structured data.
    pub data: Value,
    /// Whether a client received it.
    pub delivered: bool,
    /// For a log filed under the run (no call) because it could not be
    /// tied to one call: the calls in flight when it came (oldest first),
    /// one of which may have sent it. Empty otherwise. (Format 5.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<String>,
}

/// `elicit.requested`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitRequested {
    /// The question.
    pub message: String,
    /// The requested schema (JSON Schema).
    pub schema: Value,
    /// Form or url.
    pub mode: ElicitMode,
    /// Time to live in milliseconds, when bounded.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// URL mode: the link the user visits (MCP 2025-11-25 `url`); `None`
    /// in form mode and in records made before URL mode carried it.
    #[serde(default)]
    pub url: Option<String>,
    /// URL mode: the elicitation's id (MCP 2025-11-25 `elicitationId`),
    /// which the client's completion notification names.
    #[serde(default)]
    pub elicitation_id: Option<String>,
}

/// `elicit.refused`: the tool asked, but no elicitor is attached, so no
/// one was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitRefused {
    /// The question.
    pub message: String,
    /// Form or url.
    pub mode: ElicitMode,
    /// Why, and how to attach an elicitor.
    pub reason: String,
}

/// `elicit.answered`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitAnswered {
    /// Accept, decline, cancel or timeout.
    pub outcome: ElicitOutcome,
    /// Validation errors of the answer against the schema.
    #[serde(default)]
    pub validation_errors: Vec<String>,
    /// True when the answer was known before asking (no user involved).
    #[serde(default)]
    pub pre_resolved: bool,
}

/// `teardown.registered`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeardownRegistered {
    /// The scope.
    pub scope: TeardownScope,
    /// Hash of the isolation key (never the key).
    pub key_hash: String,
    /// False for a repeat registration, which kept the first cleanup.
    pub first: bool,
    /// How many registrations the holder has had under this (tool, scope,
    /// key), this one included: a repeat keeps the first cleanup and
    /// refreshes its liveness (seed 000). `0` on facts recorded before it
    /// was kept.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub registrations: u64,
    /// When this registration was made, unix nanoseconds from the host's
    /// clock: the liveness a `teardown.ran` reports as `last_registered_at`.
    /// `0` on facts recorded before it was kept.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub registered_at: i64,
}

/// `teardown.refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeardownRefused {
    /// The scope asked for.
    pub scope: TeardownScope,
    /// Hash of the isolation key.
    pub key_hash: String,
    /// The scopes the host honours.
    pub honoured: Vec<TeardownScope>,
    /// The refusal as the tool saw it.
    pub reason: String,
}

/// `teardown.ran`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeardownRan {
    /// The scope.
    pub scope: TeardownScope,
    /// Hash of the isolation key.
    pub key_hash: String,
    /// How it ended.
    pub outcome: TeardownOutcome,
    /// How long it took, nanoseconds.
    pub duration_ns: u64,
    /// How many registrations kept this cleanup alive (the first and every
    /// repeat); `0` on facts recorded before it was kept.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub registrations: u64,
    /// When the last of them was made (unix nanoseconds, the host's clock):
    /// when the cleaned-up resource was last used. `0` on facts recorded
    /// before it was kept.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub last_registered_at: i64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// `effect`: a journaled side effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The effect's name, e.g. `"github.plan"`.
    pub name: String,
    /// The request, as the tool passed it (after redaction).
    pub request: Value,
    /// What it returned.
    pub outcome: EffectOutcome,
}

/// `clock`: a clock read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// The value read, unix nanoseconds.
    pub unix_nanos: i64,
}

/// `random`: randomness drawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Random {
    /// The value drawn.
    pub value: u64,
}

/// `progress.dropped`: `count` progress reports of the call were dropped
/// here, in call order, because the recorder's queue was full (seed 000:
/// "with nothing listening it is a no-op that drops the report"). The
/// dropped reports are counted: the call's next report's `count` follows
/// them, so a count says how many reports the tool made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressDropped {
    /// How many reports were dropped in a row.
    pub count: u64,
}

/// `redaction.tripped`: the tripwire (`reel::tripwire`) found a secret
/// value, raw or encoded, in bytes about to leave the process, and
/// scrubbed it. It names where and how, never the value nor a digest of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedactionTripped {
    /// Where the bytes were going: `archive`, `tape` or `otlp`.
    pub point: String,
    /// The kind of the fact it was found in (`call.ended`, ...), or the
    /// span's name for `otlp`.
    pub fact: String,
    /// The field it was found in, as a JSON pointer into the fact's
    /// envelope (`/data/outcome/result/note`).
    pub field: String,
    /// How the value was encoded: `raw`, `json`, `debug`, `percent`,
    /// `base64`, `base64url`.
    pub encoding: String,
    /// Which rule missed it: `known-values` (the redactor's scrub of
    /// known secret values) for a value the run resolved or the host
    /// declared, `declared-at-export` for a value the host declared only
    /// at export (no rule could have known it).
    pub rule: String,
}

/// `cancel.requested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequested {
    /// Why, when given.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `call.output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallOutput {
    /// The output value.
    pub value: Value,
    /// Stage label, when given.
    #[serde(default)]
    pub stage: Option<String>,
    /// A note, when given.
    #[serde(default)]
    pub note: Option<String>,
}

/// `call.ended`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallEnded {
    /// How the call ended, with its result or error.
    pub outcome: CallOutcome,
    /// Duration of the call, nanoseconds.
    pub duration_ns: u64,
    /// The invocation id of the call's `call.started`; `None` in records
    /// that predate it.
    #[serde(default)]
    pub invocation_id: Option<String>,
}

impl CallEnded {
    /// Ok, error or aborted.
    pub fn status(&self) -> CallStatus {
        self.outcome.status()
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CallOutcome {
    /// The tool returned a result.
    Ok {
        /// The result (after redaction).
        result: Value,
    },
    /// The tool returned an error.
    Error {
        /// The error message.
        error: String,
        /// The error as the caller received it, when it is structured: an
        /// MCP tool error (`isError: true`) is the whole result, content,
        /// `structuredContent` and `_meta`; a JSON-RPC error is the whole
        /// error object, `code`, `message` and `data`; `error` is then its
        /// text. Never `null` (which reads back as `None`). (Format 5.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    /// The call was cancelled.
    Aborted {
        /// Why, when known.
        #[serde(default)]
        reason: Option<String>,
    },
}

names!(CallOutcome { Ok => "ok", Error => "error", Aborted => "aborted" });

impl CallOutcome {
    /// Ok, error or aborted.
    pub fn status(&self) -> CallStatus {
        match self {
            CallOutcome::Ok { .. } => CallStatus::Ok,
            CallOutcome::Error { .. } => CallStatus::Error,
            CallOutcome::Aborted { .. } => CallStatus::Aborted,
        }
    }
}

/// `model.called`: one call of a model (an inference), as an agent
/// framework reported it in an OpenTelemetry GenAI span (`chat`,
/// `text_completion`, `generate_content`, `embeddings`) that `reel collect`
/// took in. Filed at the span's start, under the call the model was
/// called in (none: the run's own). What the span did not carry is absent
/// (`None`, empty), never invented; the messages only when the framework
/// captured content. (Format 6.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCalled {
    /// The operation (`gen_ai.operation.name`), e.g. `"chat"`.
    pub operation: String,
    /// The provider (`gen_ai.provider.name`, or the older `gen_ai.system`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model asked for (`gen_ai.request.model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model that answered (`gen_ai.response.model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    /// Tokens in (`gen_ai.usage.input_tokens`, or `prompt_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Tokens out (`gen_ai.usage.output_tokens`, or `completion_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Why the model stopped (`gen_ai.response.finish_reasons`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finish_reasons: Vec<String>,
    /// How long the call took, nanoseconds.
    pub duration_ns: u64,
    /// The error (`error.type`, or the span's status message), when it
    /// failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The messages sent (`gen_ai.input.messages`, and the system
    /// instructions), when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The messages received (`gen_ai.output.messages`), when captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The tools offered to the model (`gen_ai.tool.definitions`), when
    /// the framework reported them: what `reel mcp mock` lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_definitions: Option<Value>,
}

/// `run.ended`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnded {
    /// How the run ended.
    pub status: RunStatus,
}
