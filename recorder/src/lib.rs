//! # reel-recorder: live contexts that record
//!
//! A host (an agent runtime, an MCP server) opens a [`Recorder`] on an
//! archive, starts a [`Run`], and invokes tools through
//! [`Run::call`]: each tool receives a [`reel::context::ToolContext`] whose
//! every capability (progress, logs, credentials, artifacts, elicitation,
//! teardown, cancellation, nested dispatch, output history, journaled
//! effects, clock, randomness) does its job and files its facts. Facts go
//! through a queue to one writer thread per recorder, which redacts them,
//! numbers them and stores them in the archive.
//!
//! ```
//! use std::sync::Arc;
//! use reel::context::{ToolContext, ToolError};
//! use reel::fact::RunStatus;
//! use reel_recorder::{MemoryVault, Recorder, RecorderConfig, RunStart};
//! use serde_json::json;
//!
//! async fn greet(ctx: ToolContext, name: String) -> Result<String, ToolError> {
//!     let token = ctx.credential("greeter").await?; // only a fingerprint is kept
//!     ctx.progress(json!({ "message": "Greeting", "done": 1, "total": 1 }));
//!     let who = name.clone();
//!     let greeting = ctx
//!         .effect("greeter.compose", &name, move || async move {
//!             Ok::<_, String>(format!("hello, {who}"))
//!         })
//!         .await?;
//!     assert!(!token.secret().expose().is_empty());
//!     Ok(greeting)
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let recorder = Recorder::open(dir.path(), RecorderConfig::default()).await.unwrap();
//! let run = recorder.start_run(RunStart::new("run-1")).await.unwrap();
//! let vault = Arc::new(MemoryVault::new().with("greeter", "s3cr3t-value"));
//! let out = run.call("greet", "ann").credentials(vault).invoke(greet).await.unwrap();
//! assert_eq!(out, "hello, ann");
//! run.end(RunStatus::Completed).await.unwrap();
//! let archive = recorder.archive().clone();
//! recorder.shutdown().await.unwrap();
//! assert_eq!(archive.run("run-1").unwrap().calls, 1);
//! # });
//! ```
#![warn(missing_docs)]

mod config;
mod host;
mod providers;
mod tape;
mod writer;

pub use config::{Durability, RecorderConfig};
pub use host::{CallBuilder, Caller, Canceller, Recorder, RecorderError, Run, RunStart};
pub use providers::{
    validate, ArtifactStore, CredentialProvider, Elicitor, LogListener, MemoryArtifactStore,
    MemoryVault, ProgressListener, ResolvedSecret, ScriptedElicitor,
};
pub use tape::{TapeRecording, TapeRecordingError};
pub use writer::{RunFailure, WriteError, RUNS_SHOWN};

/// The hash the recorder records in place of a teardown key: keyed
/// ([`reel::context::keyed_teardown_key_hash`]) under `archive`'s
/// fingerprint key, which never lives in the archive, so a copy of an
/// archive cannot test guessed keys against it. A replay needs no key: it
/// binds each key the tool registers to the recorded hash at its place.
pub fn teardown_key_hash(
    archive: &reel_archive::Archive,
    tool: &str,
    scope: reel::fact::TeardownScope,
    key: &str,
) -> String {
    keyed_teardown_key_hash(&archive.keyring(), tool, scope, key)
}

/// [`teardown_key_hash`] under a recorder's key, whatever it records into.
pub(crate) fn keyed_teardown_key_hash(
    keys: &reel_archive::Keyring,
    tool: &str,
    scope: reel::fact::TeardownScope,
    key: &str,
) -> String {
    reel::context::keyed_teardown_key_hash(
        |bytes| keys.keyed_mac(reel::context::TEARDOWN_KEY_PURPOSE, bytes),
        tool,
        scope,
        key,
    )
}
