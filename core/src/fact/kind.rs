//! [`FactKind`], one variant per fact of the catalogue, and the envelope's
//! hand-written serde: `kind` is the dotted name, `data` the fields, and a
//! kind this version does not know becomes [`FactKind::Unknown`].

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::kinds::*;
use super::Fact;

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
    /// A model was called (an inference, taken in from an agent
    /// framework's spans; format 6).
    ModelCalled(ModelCalled) = "model.called",
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
