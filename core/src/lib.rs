//! # reel-core: the fact model and its formats
//!
//! The bottom of reel, as `tracing-core` is tracing's: the [fact
//! model](fact), the stored [encoding](codec) of a fact, the [stream
//! rules](rules) and the one [numberer](sequence), [run records](run), the
//! [tape] format, the [replay report](report)'s data and the
//! [matching](matching) rules, the [progress display rule](display), tool
//! specs as [data](spec), the record's [markers](marker) and the seams the
//! layers above plug into: the [storage trait](store) and the [tripwire
//! guard](guard). It depends on serde-level crates only: no async runtime,
//! no network, no schema validation. The context contract, redaction and
//! the tripwire are the `reel` crate's, which re-exports all of this, so a
//! tool author writes `use reel::...`; the viewer, the archive and the
//! exporters depend on this crate alone.
//!
//! ```
//! use reel_core::fact::{Fact, FactKind, Producer, Progress, RunStarted, RunEnded, RunStatus};
//! use reel_core::rules::StreamRules;
//! use reel_core::run::RunRecord;
//! use reel_core::tape::Tape;
//! use serde_json::json;
//!
//! let fact = |seq, kind| Fact { seq, at: 1, offset: 0, call: None, kind };
//! let facts = vec![
//!     fact(0, FactKind::RunStarted(RunStarted {
//!         run_id: "run-1".into(),
//!         session_id: None,
//!         identity: None,
//!         producer: Producer { name: "doc".into(), version: "1".into() },
//!         labels: Default::default(),
//!         teardown_scopes: vec![],
//!     })),
//!     fact(1, FactKind::Progress(Progress { payload: json!({"message": "working"}), count: 1, delivered: false })),
//!     fact(2, FactKind::RunEnded(RunEnded { status: RunStatus::Completed })),
//! ];
//! // Every stream keeps the rules; the record is derived from the facts.
//! let mut rules = StreamRules::new("run-1");
//! assert!(facts.iter().all(|f| rules.check(f).is_ok()));
//! let mut record = RunRecord::from_first(&facts[0]).unwrap();
//! facts.iter().for_each(|f| { record.observe(f); });
//! // A tape round-trips, and its digest proves the facts unchanged.
//! let mut bytes = Vec::new();
//! Tape::new(record, facts.clone(), vec![]).write(&mut bytes).unwrap();
//! let tape = Tape::read(&bytes[..]).unwrap();
//! assert!(tape.digest_matches() && tape.facts == facts);
//! ```
#![warn(missing_docs)]

#[macro_use]
mod names;

pub mod codec;
pub mod display;
pub mod fact;
pub mod gap;
pub mod guard;
pub mod lock;
pub mod marker;
pub mod matching;
pub mod report;
pub mod rules;
pub mod run;
pub mod sequence;
pub mod spec;
pub mod store;
/// Proptest strategies for the fact model (feature `proptest`).
#[cfg(feature = "proptest")]
pub mod strategy;
pub mod summary;
pub mod tape;

pub use fact::{Fact, FactKind, NewFact};
pub use run::{RunRecord, RunState};
