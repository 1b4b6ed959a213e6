//! The context contract: what a tool receives, written once, run unchanged
//! under a recording context (production) and a replay context (tests).
//!
//! # Why a concrete context over a pluggable backend
//!
//! A tool is a plain `async fn(ToolContext, Args) -> Result<Out, ToolError>`.
//! [`ToolContext`] is one concrete type, so tool signatures carry no generic
//! parameter and a registry of tools (`reel::tools::Tools`) is a plain map.
//! The context itself decides which facts a capability files and in which
//! order (request, answer); a [`CallBackend`] only supplies the answers and
//! receives the facts. The recorder's backend asks real providers and writes
//! the facts to the archive; the replayer's backend reads answers from the
//! record and matches the facts against it. Because the fact-filing logic
//! lives here once, a recorded run and its replay file the same facts for
//! the same tool code.
//!
//! # Order of facts for each capability
//!
//! | capability | facts filed, in order |
//! |---|---|
//! | [`ToolContext::progress`] | `progress` |
//! | [`ToolContext::log`], [`ToolContext::notify`] | `log` |
//! | [`ToolContext::credential`] | `credential.requested`, then `.resolved` / `.failed`; or `.refused` alone when no provider is attached |
//! | [`Artifacts::put`], [`Artifacts::get`] | `artifact.put` / `artifact.get`; or `artifact.refused` |
//! | [`ToolContext::elicit`] | `elicit.requested`, `elicit.answered`; or `elicit.refused` alone when no elicitor is attached |
//! | [`ToolContext::on_teardown`] | `teardown.registered`, or `teardown.refused` |
//! | [`ToolContext::effect`] | `effect` (after the closure ran, or with the recorded outcome) |
//! | [`ToolContext::now`], [`ToolContext::random`] | `clock`, `random` |
//! | [`ToolContext::set_output`], [`ToolContext::respond`] | `call.output`; after respond a capability refuses or drops its fact, and a `log` of logger [`AFTER_RESPOND_LOGGER`] flags it (see [`after_tool`]) |
//! | [`ToolContext::dispatch`] | the child's own `call.started` .. `call.ended`, under the child's call id; or a `log` of logger [`DISPATCH_REFUSED_LOGGER`] alone when no dispatch is attached |
//!
//! After the call ended ([`ToolContext::close`], which the host calls as
//! the tool's future completes), a clone of the context that outlived the
//! call files nothing: a capability that can fail refuses with
//! [`ContextError::AfterCallEnded`], one that cannot drops its fact
//! (`notify` answers false; the clock and randomness still answer, without
//! a fact), and each refusal is counted by the host
//! ([`CallBackend::refused_after_end`]), whose run's end records the counts.
//!
//! The host files `call.started`, `call.ended`, `cancel.requested` and
//! `teardown.ran`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

use crate::fact::*;
use crate::schema::{InputError, ToolSpecExt as _};
use reel_core::spec::ToolSpec;

mod artifacts;
mod backend;
mod call;
mod cancellation;
mod credentials;
mod dispatch;
mod effects;
mod elicitation;
mod error;
mod lifecycle;
mod output;
mod progress;
mod services;
mod teardown;
mod typed_elicitation;

/// A secret value (its own module: redaction and the tripwire hold it too).
pub use crate::secret::Secret;
pub use artifacts::*;
pub use backend::*;
pub use call::*;
pub use cancellation::*;
pub use credentials::*;
pub use dispatch::DISPATCH_REFUSED_LOGGER;
pub use elicitation::*;
pub use error::*;
pub use lifecycle::*;
pub use output::*;
pub use progress::*;
pub use services::*;
pub use teardown::*;
pub use typed_elicitation::{question_schema, Elicited};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An artifact as a store returns it: its ticket and its bytes.
pub type FoundArtifact = (ArtifactMeta, Vec<u8>);

/// A journaled side effect, ready to run once (live) or never (replay).
pub type EffectFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<Value, String>> + Send>;

/// A registered cleanup.
pub type Cleanup = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), String>> + Send>;

/// Everything the host knows about one call, fixed when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInfo {
    /// Where the call belongs: a run, or no run at all.
    pub home: Home,
    /// The hosting session, when the run is bound to one. Caller data.
    pub session_id: Option<String>,
    /// The identity the caller supplied; `None` when none was.
    pub identity: Option<Identity>,
    /// Teardown scopes this host honours (`[]`: none ever fires).
    pub teardown_scopes: Vec<TeardownScope>,
    /// The fields of this call's `call.started`.
    pub started: CallStarted,
    /// The diagnostic scope of the call when it is recorded (or replayed
    /// from a record); `None` for a context built without recording.
    pub diagnostics: Option<Diagnostics>,
}

/// Where a call belongs: to a run, or to no run at all (seed 000: `runId`
/// is absent where there is no run, as for a call served over MCP). A call
/// outside any run is a stream of its own in the archive, kept under a key
/// the recorder assigns; that key is not a run id and the tool never sees
/// it as one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Home {
    /// The call belongs to this run.
    Run(String),
    /// The call belongs to no run; the archive keeps it (and any call it
    /// dispatches) under `key`.
    OutsideRun {
        /// The archive's key ([`OutsideRun::key`](crate::fact::OutsideRun::key)).
        key: String,
    },
}

impl Home {
    /// The run's id; `None` outside any run.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Home::Run(id) => Some(id),
            Home::OutsideRun { .. } => None,
        }
    }

    /// The key the archive keeps the call's stream under: the run id, or
    /// the key of the call outside any run.
    pub fn key(&self) -> &str {
        match self {
            Home::Run(id) => id,
            Home::OutsideRun { key } => key,
        }
    }
}

/// The diagnostic scope of one invocation (seed 002's `diagnostics`),
/// present when recording is on. It holds only what is on the record, so a
/// replay gives back the same values and a tool that logs them replays
/// without a divergence: no archive path, no process id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    /// The run the call belongs to; `None` for a call outside any run.
    pub run_id: Option<String>,
    /// The call's id.
    pub call_id: String,
    /// The invocation id shared by `call.started`, `call.ended` and the
    /// host's receipts.
    pub invocation_id: String,
    /// What recorded the run (`run.started`'s producer: in replay, the
    /// recorder that made the record).
    pub producer: Producer,
}

/// The execution context a tool receives. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<Inner>,
}

struct Inner {
    info: CallInfo,
    backend: Arc<dyn CallBackend>,
    cancel: CancellationToken,
    cancel_reason: Arc<Mutex<Option<String>>>,
    declared: Vec<Credential>,
    subflows: Mutex<HashMap<String, SubFlowLogger>>,
    outputs: Mutex<Vec<Value>>,
    /// The value `respond` ended the call with. A `OnceLock`, so that the
    /// check every capability makes (`progress()` included) is one atomic
    /// load, never a lock.
    responded: OnceLock<Value>,
    /// The host ended the call ([`ToolContext::close`]): every later use
    /// of the context is refused and counted.
    closed: std::sync::atomic::AtomicBool,
    /// Held shared while a report or a log line is checked and filed, and
    /// exclusively by [`ToolContext::close`]: once `close` returns, none
    /// can still land (after the call's end, which the host files next).
    gate: std::sync::RwLock<()>,
    /// The logger name of `log` and `notify` facts (`set_logger`).
    logger: Mutex<Option<String>>,
    services: Services,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("home", &self.inner.info.home)
            .field("call_id", &self.inner.info.started.call_id)
            .field("tool", &self.inner.info.started.tool_name)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// Builds a context for one call (host side: the recorder or replayer).
    /// `declared` are the credentials resolved for the tool's declared
    /// needs, in declaration order (an `Option` works: none or one).
    pub fn new(
        info: CallInfo,
        backend: Arc<dyn CallBackend>,
        declared: impl IntoIterator<Item = Credential>,
        cancel: &CancelHandle,
    ) -> ToolContext {
        ToolContext {
            inner: Arc::new(Inner {
                info,
                backend,
                cancel: cancel.token.clone(),
                cancel_reason: cancel.reason.clone(),
                declared: declared.into_iter().collect(),
                subflows: Mutex::new(HashMap::new()),
                outputs: Mutex::new(Vec::new()),
                responded: OnceLock::new(),
                closed: std::sync::atomic::AtomicBool::new(false),
                gate: std::sync::RwLock::new(()),
                logger: Mutex::new(None),
                services: Services::default(),
            }),
        }
    }

    /// Gives the context the host's typed services ([`ToolContext::get`]).
    /// A host calls it right after [`ToolContext::new`], before the tool
    /// has the context; on a context already shared it gives the context
    /// back unchanged.
    pub fn with_services(mut self, services: Services) -> ToolContext {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.services = services;
        }
        self
    }

    pub(super) fn emit(&self, kind: FactKind) {
        self.inner.backend.emit(kind);
    }
}
