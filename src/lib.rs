//! # reel: a flight recorder for agent tool calls
//!
//! This crate is what a tool is written against: the [context
//! contract](context), [redaction](redact), the [tripwire], the tool
//! [registry](tools) and [tool specs](spec) with their JSON Schema. It sits
//! on `reel-core` (as `tracing` on `tracing-core`) and re-exports it
//! whole: the [fact model](fact), the [stream rules](rules), the [fact
//! encoding](codec), the [replay report](report)'s data types and the
//! [tape] format (a JSON Lines export of one run) are reached as
//! `reel::fact`, `reel::rules`, ... as always. It has no storage: the sled
//! archive is `reel-archive`, and the recorder, the replayer and the viewer
//! are built on these in their own crates.
//!
//! ```
//! use reel::fact::{Fact, FactKind, Producer, Progress, RunStarted, RunEnded, RunStatus};
//! use reel::rules::StreamRules;
//! use reel::run::RunRecord;
//! use reel::tape::Tape;
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
//!     fact(1, FactKind::Progress(Progress { payload: json!({"message": "working"}), count: 1 })),
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

// The fact model and its formats: the core's, re-exported whole so every
// path (`reel::fact::Fact`, `reel::tape::Tape`, ...) keeps working.
/// Proptest strategies for the fact model (feature `proptest`).
#[cfg(feature = "proptest")]
pub use reel_core::strategy;
pub use reel_core::{
    codec, display, fact, gap, guard, lock, marker, matching, report, rules, run, sequence, store,
    tape,
};

pub mod context;
pub mod redact;
mod schema;
mod secret;
pub mod spec;
pub mod tools;
pub mod tripwire;

/// Derives serde's `Serialize`/`Deserialize` and schemars' `JsonSchema`
/// through this crate's copies, for tool inputs, outputs and questions
/// (`#[reel::schema]`): a tool crate needs no other dependency.
pub use reel_macros::schema;
/// Declares a tool with its spec (`#[reel::tool]`, see
/// [`tools::TypedTool`]); the attribute's arguments are described in the
/// `reel-macros` crate.
pub use reel_macros::tool;

/// What a tool crate needs, in one import: `use reel::prelude::*;`.
///
/// ```
/// use reel::prelude::*;
///
/// #[reel::schema]
/// struct Greeting { name: String }
///
/// /// Greets someone by name.
/// #[reel::tool(title = "Greet", read_only)]
/// async fn greet(ctx: ToolContext, args: Greeting) -> Result<Value, ToolError> {
///     ctx.progress(json!({ "message": "greeting" }));
///     Ok(json!({ "text": format!("Hello, {}!", args.name) }))
/// }
///
/// let tools = Tools::new().with(greet_tool());
/// let spec = tools.get("greet").unwrap().spec().unwrap();
/// assert_eq!(spec.description.as_deref(), Some("Greets someone by name."));
/// assert_eq!(spec.annotations.unwrap().read_only_hint, Some(true));
/// assert_eq!(spec.input_schema["required"], json!(["name"]));
/// ```
pub mod prelude {
    pub use crate::context::{Credential, Elicitation, Elicited, ToolContext, ToolError};
    pub use crate::spec::{Annotations, JsonSchema, ToolSpec, ToolSpecExt};
    pub use crate::tools::{Tools, TypedTool};
    pub use serde_json::{json, Value};
}

/// What the attributes' expansions name (`#[reel::schema]` derives
/// through these): not an API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
}

pub use fact::{Fact, FactKind, NewFact};
pub use run::{RunRecord, RunState};
pub use spec::ToolSpecExt;

/// The README's and the book's Rust examples, compiled (and run, unless
/// marked `no_run`) as doc tests of this crate: an example that no longer
/// compiles fails `cargo test`. The MCP page's are the doc tests of
/// `reel-mcp` (which this crate does not depend on); `tests/it/tidy/doc_examples.rs`
/// checks that every page with a Rust example is compiled by one of them.
#[cfg(doctest)]
pub mod doc_examples {
    #[doc = include_str!("../README.md")]
    pub struct Readme;
    #[doc = include_str!("../docs/src/recording.md")]
    pub struct Recording;
    #[doc = include_str!("../docs/src/replay.md")]
    pub struct Replay;
}
