//! # reel: a flight recorder for agent tool calls
//!
//! This crate is reel's small, stable core: the [fact model](fact), the
//! [archive] (an embedded sled database holding runs as append-only
//! streams of facts, in blocks), and the [tape] format (a JSON Lines
//! export of one run). The recorder, the replayer and the viewer are built on
//! it in their own crates.
//!
//! ```
//! use reel::archive::{Archive, ArchiveConfig, RunFilter};
//! use reel::fact::{FactKind, NewFact, Producer, Progress, RunStarted, RunEnded, RunStatus};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let archive = Archive::open(dir.path(), ArchiveConfig::default()).unwrap();
//! let fact = |kind| NewFact { at: 1, offset: 0, call: None, kind };
//! archive.append("run-1", vec![
//!     fact(FactKind::RunStarted(RunStarted {
//!         run_id: "run-1".into(),
//!         session_id: None,
//!         identity: None,
//!         producer: Producer { name: "doc".into(), version: "1".into() },
//!         labels: Default::default(),
//!         teardown_scopes: vec![],
//!     })),
//!     fact(FactKind::Progress(Progress { payload: json!({"message": "working"}), count: 1 })),
//! ]).unwrap();
//! archive.append("run-1", vec![fact(FactKind::RunEnded(RunEnded { status: RunStatus::Completed }))]).unwrap();
//!
//! let facts: Vec<_> = archive.facts("run-1", ..).unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(facts.iter().map(|f| f.seq).collect::<Vec<_>>(), vec![0, 1, 2]);
//! let page = archive.list_runs(&RunFilter::default()).unwrap();
//! assert_eq!(page.runs[0].run_id, "run-1");
//! ```
#![warn(missing_docs)]

pub mod archive;
pub mod context;
pub mod fact;
pub mod live;
pub mod redact;
pub mod run;
pub mod spec;
/// Proptest strategies for the fact model (feature `proptest`).
#[cfg(feature = "proptest")]
pub mod strategy;
pub mod tape;
pub mod tools;

pub use archive::{Archive, ArchiveConfig, ArchiveError};
pub use fact::{Fact, FactKind, NewFact};
pub use run::{RunRecord, RunState};
