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
//! use reel_core::fact::{Fact, FactKind, Progress};
//! use serde_json::json;
//!
//! let fact = Fact {
//!     seq: 3,
//!     at: 1_700_000_000_000_000_000,
//!     offset: 42_000,
//!     call: Some("call-1".into()),
//!     kind: FactKind::Progress(Progress { payload: json!({"message": "Hop 3 of 12"}), count: 3, delivered: false }),
//! };
//! let json = serde_json::to_string(&fact).unwrap();
//! assert!(json.contains(r#""kind":"progress""#));
//! let back: Fact = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, fact);
//! ```

mod enums;
mod kind;
mod kinds;
mod values;

pub use crate::spec::CallMode;
pub use enums::*;
pub use kind::FactKind;
pub use kinds::*;
pub use values::*;

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

#[cfg(test)]
mod tests;
