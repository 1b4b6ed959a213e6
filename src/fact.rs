//! The fact model: one run is one append-only stream of [`Fact`]s.
//!
//! A fact is an envelope (`seq`, `at`, `offset`, `call`) around one
//! [`FactKind`]. Every kind is a struct with named fields, so that the stored
//! encoding (MessagePack with field names) survives reordering of fields.
//!
//! # Encoding
//!
//! A fact serialises as a map with the keys `seq`, `at`, `offset`, `call`,
//! `kind` (the dotted name, e.g. `"progress"` or `"call.started"`) and `data`
//! (the kind's fields). A reader that meets a kind it does not know (written by
//! a newer version of reel) keeps it as [`FactKind::Unknown`] with its raw
//! fields; it never fails the read.
//!
//! # Absent is not empty
//!
//! Every optional field is an `Option`, serialised as `null` when absent. An
//! empty string, list or map is `Some(empty)` and stays distinct from `None`
//! through MessagePack, JSON and the tape.
//!
//! ```
//! use reel::fact::{Fact, FactKind, Progress};
//! use serde_json::json;
//!
//! let fact = Fact {
//!     seq: 3,
//!     at: 1_700_000_000_000_000_000,
//!     offset: 42_000,
//!     call: Some("call-1".into()),
//!     kind: FactKind::Progress(Progress { payload: json!({"message": "Hop 3 of 12"}), count: 3 }),
//! };
//! let json = serde_json::to_string(&fact).unwrap();
//! assert!(json.contains(r#""kind":"progress""#));
//! let back: Fact = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, fact);
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A recorded fact: the envelope around one [`FactKind`].
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Per-run sequence number: gapless, strictly increasing from 0, assigned
    /// by the archive's sequencer (never by the tool).
    pub seq: u64,
    /// Wall-clock time, unix nanoseconds.
    pub at: i64,
    /// Monotonic nanoseconds since the run started.
    pub offset: u64,
    /// The tool call this fact belongs to; `None` for run-level facts.
    pub call: Option<String>,
    /// What happened.
    pub kind: FactKind,
}

impl FactKind {
    /// True for a fact that begins a stream: `run.started`, or the
    /// `call.started` of a call outside any run. Only a stream's first fact
    /// may be one (see the archive's stream rules).
    pub fn begins_stream(&self) -> bool {
        match self {
            FactKind::RunStarted(_) => true,
            FactKind::CallStarted(c) => c.outside_run.is_some(),
            _ => false,
        }
    }
}

/// A fact before the sequencer has numbered it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFact {
    /// Wall-clock time, unix nanoseconds.
    pub at: i64,
    /// Monotonic nanoseconds since the run started.
    pub offset: u64,
    /// The tool call this fact belongs to; `None` for run-level facts.
    pub call: Option<String>,
    /// What happened.
    pub kind: FactKind,
}

impl NewFact {
    /// Gives the fact its sequence number.
    pub fn with_seq(self, seq: u64) -> Fact {
        Fact {
            seq,
            at: self.at,
            offset: self.offset,
            call: self.call,
            kind: self.kind,
        }
    }
}

impl Fact {
    /// The fact without its sequence number, e.g. to append it elsewhere.
    pub fn into_new(self) -> NewFact {
        NewFact {
            at: self.at,
            offset: self.offset,
            call: self.call,
            kind: self.kind,
        }
    }
}

macro_rules! fact_kinds {
    ($( $(#[$doc:meta])* $variant:ident($ty:ident) = $name:literal, )*) => {
        /// One variant per fact of the catalogue (see DESIGN.md).
        #[derive(Debug, Clone, PartialEq)]
        pub enum FactKind {
            $( $(#[$doc])* $variant($ty), )*
            /// A kind this version of reel does not know, written by a newer
            /// writer: kept with its raw fields, shown, never a crash.
            Unknown {
                /// The kind's dotted name as written.
                kind: String,
                /// The kind's fields, untouched.
                data: Value,
            },
        }

        impl FactKind {
            /// Every kind name this version knows, in catalogue order.
            pub const KNOWN: &'static [&'static str] = &[$($name),*];

            /// The dotted name of this kind, e.g. `"call.started"`.
            pub fn name(&self) -> &str {
                match self {
                    $( FactKind::$variant(_) => $name, )*
                    FactKind::Unknown { kind, .. } => kind,
                }
            }

            fn serialize_data<S: Serializer>(&self, state: &mut S::SerializeStruct) -> Result<(), S::Error> {
                match self {
                    $( FactKind::$variant(v) => state.serialize_field("data", v), )*
                    FactKind::Unknown { data, .. } => state.serialize_field("data", data),
                }
            }

            /// Builds a kind from its name and fields. An unknown name is kept
            /// as [`FactKind::Unknown`]; a known name with fields that do not
            /// fit is an error.
            pub fn from_parts(kind: &str, data: Value) -> Result<FactKind, serde_json::Error> {
                Ok(match kind {
                    $( $name => FactKind::$variant(serde_json::from_value(data)?), )*
                    _ => FactKind::Unknown { kind: kind.to_owned(), data },
                })
            }
        }

        impl<'de> DeserializeSeed<'de> for KindSeed<'_> {
            type Value = FactKind;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<FactKind, D::Error> {
                Ok(match self.0 {
                    $( $name => FactKind::$variant($ty::deserialize(d)?), )*
                    other => FactKind::Unknown { kind: other.to_owned(), data: Value::deserialize(d)? },
                })
            }
        }
    };
}

fact_kinds! {
    /// A run began.
    RunStarted(RunStarted) = "run.started",
    /// A tool call began.
    CallStarted(CallStarted) = "call.started",
    /// A credential was asked for.
    CredentialRequested(CredentialRequested) = "credential.requested",
    /// A credential resolved; only its fingerprint is kept.
    CredentialResolved(CredentialResolved) = "credential.resolved",
    /// The provider could not resolve a credential.
    CredentialFailed(CredentialFailed) = "credential.failed",
    /// No provider was attached: the request was refused (fail closed).
    CredentialRefused(CredentialRefused) = "credential.refused",
    /// An artifact was stored.
    ArtifactPut(ArtifactPut) = "artifact.put",
    /// An artifact was fetched.
    ArtifactGet(ArtifactGet) = "artifact.get",
    /// An artifact operation was refused (no store, or out of scope).
    ArtifactRefused(ArtifactRefused) = "artifact.refused",
    /// The tool reported progress.
    Progress(Progress) = "progress",
    /// Progress reports the recorder dropped (its queue was full): how
    /// many, where they would have been.
    ProgressDropped(ProgressDropped) = "progress.dropped",
    /// The last line of redaction caught a secret on its way out: where,
    /// and which rule missed it (never the value).
    RedactionTripped(RedactionTripped) = "redaction.tripped",
    /// The tool logged or notified.
    Log(Log) = "log",
    /// The tool asked the user a question.
    ElicitRequested(ElicitRequested) = "elicit.requested",
    /// The user's answer (or its absence).
    ElicitAnswered(ElicitAnswered) = "elicit.answered",
    /// A question was refused: no elicitor is attached (fail closed).
    ElicitRefused(ElicitRefused) = "elicit.refused",
    /// A cleanup was registered (or a repeat registration kept the first).
    TeardownRegistered(TeardownRegistered) = "teardown.registered",
    /// A cleanup registration was refused: the scope is not honoured.
    TeardownRefused(TeardownRefused) = "teardown.refused",
    /// A cleanup ran.
    TeardownRan(TeardownRan) = "teardown.ran",
    /// A journaled side effect and its outcome.
    Effect(Effect) = "effect",
    /// The tool read the clock.
    Clock(Clock) = "clock",
    /// The tool drew randomness.
    Random(Random) = "random",
    /// Cancellation was requested (possibly after the call ended).
    CancelRequested(CancelRequested) = "cancel.requested",
    /// An output was produced (output history; `respond` ends the call).
    CallOutput(CallOutput) = "call.output",
    /// A tool call ended.
    CallEnded(CallEnded) = "call.ended",
    /// A run ended.
    RunEnded(RunEnded) = "run.ended",
}

struct KindSeed<'a>(&'a str);

impl Serialize for Fact {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("Fact", 6)?;
        state.serialize_field("seq", &self.seq)?;
        state.serialize_field("at", &self.at)?;
        state.serialize_field("offset", &self.offset)?;
        state.serialize_field("call", &self.call)?;
        state.serialize_field("kind", self.kind.name())?;
        self.kind.serialize_data::<S>(&mut state)?;
        state.end()
    }
}

impl<'de> Deserialize<'de> for Fact {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Fact, D::Error> {
        const FIELDS: &[&str] = &["seq", "at", "offset", "call", "kind", "data"];
        deserializer.deserialize_struct("Fact", FIELDS, FactVisitor)
    }
}

struct FactVisitor;

impl<'de> Visitor<'de> for FactVisitor {
    type Value = Fact;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a fact: a map with seq, at, offset, call, kind and data")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fact, A::Error> {
        let mut seq = None;
        let mut at = None;
        let mut offset = None;
        let mut call: Option<Option<String>> = None;
        let mut kind_name: Option<String> = None;
        let mut kind: Option<FactKind> = None;
        // `data` normally follows `kind`; if it comes first it is buffered.
        let mut early_data: Option<Value> = None;
        while let Some(key) = map.next_key::<FieldName>()? {
            match key {
                FieldName::Seq => seq = Some(map.next_value()?),
                FieldName::At => at = Some(map.next_value()?),
                FieldName::Offset => offset = Some(map.next_value()?),
                FieldName::Call => call = Some(map.next_value()?),
                FieldName::Kind => kind_name = Some(map.next_value()?),
                FieldName::Data => match &kind_name {
                    Some(name) => kind = Some(map.next_value_seed(KindSeed(name))?),
                    None => early_data = Some(map.next_value()?),
                },
                FieldName::Other => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let name = kind_name.ok_or_else(|| de::Error::missing_field("kind"))?;
        let kind = match (kind, early_data) {
            (Some(kind), _) => kind,
            (None, Some(data)) => FactKind::from_parts(&name, data).map_err(de::Error::custom)?,
            (None, None) => return Err(de::Error::missing_field("data")),
        };
        Ok(Fact {
            seq: seq.ok_or_else(|| de::Error::missing_field("seq"))?,
            at: at.ok_or_else(|| de::Error::missing_field("at"))?,
            offset: offset.ok_or_else(|| de::Error::missing_field("offset"))?,
            call: call.unwrap_or(None),
            kind,
        })
    }
}

enum FieldName {
    Seq,
    At,
    Offset,
    Call,
    Kind,
    Data,
    Other,
}

impl<'de> Deserialize<'de> for FieldName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FieldName, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FieldName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a fact field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FieldName, E> {
                Ok(match v {
                    "seq" => FieldName::Seq,
                    "at" => FieldName::At,
                    "offset" => FieldName::Offset,
                    "call" => FieldName::Call,
                    "kind" => FieldName::Kind,
                    "data" => FieldName::Data,
                    _ => FieldName::Other,
                })
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<FieldName, E> {
                match std::str::from_utf8(v) {
                    Ok(s) => self.visit_str(s),
                    Err(_) => Ok(FieldName::Other),
                }
            }
        }
        d.deserialize_identifier(V)
    }
}

// ---------------------------------------------------------------------------
// Shared value types
// ---------------------------------------------------------------------------

/// The identity the caller supplied. Never synthesised: a run without caller
/// identity has `identity: None`, and each part is absent unless supplied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Identity {
    /// Tenant the run belongs to.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Principal (user or service) on whose behalf the run acts.
    #[serde(default)]
    pub principal: Option<String>,
    /// Conversation the run is part of.
    #[serde(default)]
    pub conversation: Option<String>,
}

/// What wrote the run: a program name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    /// Program name, e.g. `"my-agent"`.
    pub name: String,
    /// Program version.
    pub version: String,
}

/// `as_str()` (the name a fact records, its serde name) and `Display` (the
/// same name) for a fact enum, so that renderers print names, never
/// `format!("{:?}")`. `fact::tests::enum_names_are_serde_names` holds
/// every name to serde's.
macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The name the record uses for this value (its serde name).
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($ty::$variant { .. } => $name,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

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

/// Declared execution discipline of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallMode {
    /// Synchronous.
    Sync,
    /// Asynchronous.
    Async,
}

names!(CallMode { Sync => "sync", Async => "async" });

/// The client that made the request (MCP `clientInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// Client name.
    pub name: String,
    /// Client version, when given.
    #[serde(default)]
    pub version: Option<String>,
    /// Client title (MCP `clientInfo.title`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The claim ticket of a stored artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    /// Artifact id as the tool sees it.
    pub id: String,
    /// `sha256:<hex>` of the bytes; the archive stores bytes under it.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Media type, e.g. `text/markdown`.
    pub media_type: String,
    /// The scope the artifact is stored under.
    pub scope: Identity,
    /// Which run and call put it.
    pub origin: Origin,
}

/// Where an artifact came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The run that put it; `None` for a call outside any run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The call that put it.
    pub call_id: String,
}

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

/// A keyed fingerprint (HMAC-SHA256 with the fingerprint key, kept outside
/// the archive: see `Archive::fingerprint`) of a secret: tells "same
/// credential" apart without keeping it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(pub String);

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

// ---------------------------------------------------------------------------
// The catalogue
// ---------------------------------------------------------------------------

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

/// `run.ended`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnded {
    /// How the run ended.
    pub status: RunStatus,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// The serde name of `value`: the string it serialises to, or the tag
    /// `tag` of the object it serialises to.
    fn serde_name<T: Serialize>(value: &T, tag: Option<&str>) -> String {
        let v = serde_json::to_value(value).expect("serialises");
        match (tag, &v) {
            (None, Value::String(s)) => s.clone(),
            (Some(tag), Value::Object(o)) => o[tag].as_str().expect("tag").to_owned(),
            // An externally tagged variant with data: its one key.
            (None, Value::Object(o)) if o.len() == 1 => o.keys().next().unwrap().clone(),
            _ => panic!("unexpected serde form {v}"),
        }
    }

    fn check<T: Serialize + fmt::Display>(
        values: &[T],
        tag: Option<&str>,
        as_str: fn(&T) -> &'static str,
    ) {
        for v in values {
            let name = serde_name(v, tag);
            assert_eq!(as_str(v), name);
            assert_eq!(v.to_string(), name);
        }
    }

    #[test]
    fn enum_names_are_serde_names() {
        use TeardownScope as S;
        check(&[S::Call, S::Run, S::Session], None, S::as_str);
        check(&[CallMode::Sync, CallMode::Async], None, CallMode::as_str);
        check(
            &[CredentialMode::Declared, CredentialMode::Pulled],
            None,
            CredentialMode::as_str,
        );
        check(&Level::ALL, None, Level::as_str);
        check(
            &[ElicitMode::Form, ElicitMode::Url],
            None,
            ElicitMode::as_str,
        );
        check(
            &[
                ElicitOutcome::Accept { content: json!({}) },
                ElicitOutcome::Decline,
                ElicitOutcome::Cancel,
                ElicitOutcome::Error {
                    message: "m".into(),
                },
                ElicitOutcome::Timeout,
            ],
            Some("outcome"),
            ElicitOutcome::as_str,
        );
        check(
            &[
                TeardownOutcome::Ok,
                TeardownOutcome::Error {
                    message: "m".into(),
                },
                TeardownOutcome::TimedOut,
            ],
            Some("outcome"),
            TeardownOutcome::as_str,
        );
        check(
            &[EffectOutcome::Ok(json!(1)), EffectOutcome::Err("e".into())],
            None,
            EffectOutcome::as_str,
        );
        check(
            &[CallStatus::Ok, CallStatus::Error, CallStatus::Aborted],
            None,
            CallStatus::as_str,
        );
        check(
            &[
                RunStatus::Completed,
                RunStatus::Failed,
                RunStatus::Cancelled,
            ],
            None,
            RunStatus::as_str,
        );
        check(
            &[ArtifactOp::Put, ArtifactOp::Get],
            None,
            ArtifactOp::as_str,
        );
        check(
            &[
                CallOutcome::Ok { result: json!(1) },
                CallOutcome::Error { error: "e".into() },
                CallOutcome::Aborted { reason: None },
            ],
            Some("status"),
            CallOutcome::as_str,
        );
    }
}
