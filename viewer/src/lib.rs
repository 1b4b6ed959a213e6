//! # reel-viewer: timelines for people
//!
//! [`timeline::Timeline`] rebuilds a run from its facts (pure, no IO): the
//! call tree, durations, ledgers and anomalies. [`render`] turns it into
//! text, JSON or a self-contained HTML page. The `reel` binary (the CLI)
//! lives beside this library.
//!
//! ```
//! use reel_core::fact::*;
//! use reel_core::Fact;
//! use reel_viewer::timeline::Timeline;
//! use serde_json::json;
//!
//! let fact = |seq, call: Option<&str>, kind| Fact { seq, at: 0, offset: seq * 1000, call: call.map(Into::into), kind };
//! let facts = vec![
//!     fact(0, None, FactKind::RunStarted(RunStarted {
//!         run_id: "r".into(), session_id: None, identity: None,
//!         producer: Producer { name: "doc".into(), version: "1".into() },
//!         labels: Default::default(), teardown_scopes: vec![],
//!     })),
//!     fact(1, Some("c1"), FactKind::CallStarted(CallStarted {
//!         call_id: "c1".into(), tool_name: "walk".into(), tool_id: None, parent_call: None,
//!         iteration: 0, invocation_id: None, mode: CallMode::Async, protocol: None,
//!         platform: None, client_info: None, args: json!(12), wanted: None, attached: None,
//!         spec: None,
//!         dispatch_tools: None,
//!         outside_run: None,
//!     })),
//!     fact(2, Some("c1"), FactKind::Progress(Progress { payload: json!({"message": "Hop 1 of 12"}), count: 1, delivered: false })),
//! ];
//! let timeline = Timeline::build(&facts);
//! assert_eq!(timeline.calls[0].last_progress.as_deref(), Some("Hop 1 of 12"));
//! // The call and the run never ended: both are anomalies.
//! assert_eq!(timeline.anomalies.len(), 2);
//! ```
#![warn(missing_docs)]

pub mod diff;
pub mod display;
pub mod names;
pub mod render;
pub mod timeline;
