//! The host side: [`Recorder`], [`Run`], [`CallBuilder`], and the live
//! backend that answers a tool's context.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::FutureExt;
use reel::context::*;
use reel::fact::*;
use reel::spec::{resolve_wants, ToolSpec};
use reel::tools::{run_blocking, Tool, Tools};
use reel::NewFact;
use reel_archive::{Archive, ArchiveConfig, ArchiveError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::config::{Durability, RecorderConfig};
use crate::providers::{
    ArtifactStore, CredentialProvider, Elicitor, LogListener, ProgressListener,
};
use crate::writer::{unix_nanos, Queue};

/// Errors of the host side.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// The archive failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// A run with this id exists already.
    #[error(
        "run {0:?} already exists in the archive or is being recorded: give each run a unique id"
    )]
    RunExists(String),
    /// The run has ended.
    #[error("run {0:?} has already ended: start a new run")]
    RunEnded(String),
    /// The run was started with an empty session id.
    #[error("run {0:?} not started: its session id is empty, and an empty id names no session (session-scoped cleanups would be shared by every run that passes \"\"); pass a non-empty `.session(id)`, or leave it out for a run bound to no session")]
    EmptySession(String),
    /// The writer failed; the message says how.
    #[error("the recorder's writer failed: {0}")]
    Writer(String),
    /// The writer thread could not start.
    #[error("the recorder's writer thread could not start: {0}")]
    Thread(#[from] std::io::Error),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records runs into an archive. Cheap to clone. Dropping the last clone
/// (and every [`Run`]) flushes and stops the writer, like a guard;
/// [`Recorder::shutdown`] does the same and says when everything is durable.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<RecorderInner>,
}

struct RecorderInner {
    archive: Archive,
    queue: Queue,
    live: Mutex<Option<crate::live::LiveServer>>,
    config: RecorderConfig,
    live_runs: Mutex<HashSet<String>>,
    /// Session-scoped cleanups by (tenant, principal, session): never by
    /// the session string alone.
    sessions: Mutex<HashMap<TeardownKey, Teardowns>>,
    /// Services every call gets ([`Recorder::service`]).
    services: std::sync::RwLock<Services>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("archive", &self.inner.archive.dir())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Opens (or creates) the archive in `dir` and starts the writer.
    pub async fn open(
        dir: impl AsRef<Path>,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        let dir = dir.as_ref().to_path_buf();
        let archive_config = ArchiveConfig {
            fingerprint_key: config.fingerprint_key.clone(),
            ..ArchiveConfig::default()
        };
        let archive = tokio::task::spawn_blocking(move || {
            // The facts' clock calibrates once per process (well under
            // a millisecond on this machine), off the runtime's threads.
            drop(quanta::Clock::new());
            Archive::open(dir, archive_config)
        })
        .await
        .map_err(|e| RecorderError::Writer(format!("opening the archive panicked: {e}")))??;
        Recorder::with_archive(archive, config)
    }

    /// Records into an archive already open.
    pub fn with_archive(
        archive: Archive,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        let queue = Queue::start(archive.clone(), &config)?;
        // Live inspection needs a tokio runtime to serve on.
        let live = match (config.serve_live, tokio::runtime::Handle::try_current()) {
            (true, Ok(_)) => Some(crate::live::LiveServer::start(archive.clone())?),
            _ => None,
        };
        Ok(Recorder {
            inner: Arc::new(RecorderInner {
                archive,
                queue,
                live: Mutex::new(live),
                config,
                live_runs: Mutex::new(HashSet::new()),
                sessions: Mutex::new(HashMap::new()),
                services: std::sync::RwLock::new(Services::default()),
            }),
        })
    }

    /// The archive recorded into (for reads).
    pub fn archive(&self) -> &Archive {
        &self.inner.archive
    }

    /// The configuration.
    pub fn config(&self) -> &RecorderConfig {
        &self.inner.config
    }

    /// Registers a typed service every call gets with `ctx.get::<T>()`:
    /// every call of every run invoked from now on (one per type; a later
    /// one of the same type replaces it), and the children they dispatch.
    /// A call's own [`CallBuilder::service`] of the same type wins for that
    /// call. Services are not recorded: a replay registers its own with
    /// `ReplayOptions::service`.
    pub fn service<T: Send + Sync + 'static>(&self, service: Arc<T>) -> &Recorder {
        self.inner
            .services
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(service);
        self
    }

    /// How many session-scoped cleanups wait under `key` (the
    /// [`TeardownKey::session`] of a tenant, principal and session) for a
    /// run of that session to call [`Run::end_session`].
    pub fn session_cleanups(&self, key: &TeardownKey) -> usize {
        lock(&self.inner.sessions)
            .get(key)
            .map_or(0, |t| t.order.len())
    }

    /// Starts a run: files `run.started`. Refuses an id already used and an
    /// empty session id ([`RecorderError::EmptySession`]).
    pub async fn start_run(&self, start: RunStart) -> Result<Run, RecorderError> {
        let id = start.run_id.clone();
        if start.session_id.as_deref() == Some("") {
            return Err(RecorderError::EmptySession(id));
        }
        {
            let mut live = lock(&self.inner.live_runs);
            let exists = match self.inner.archive.run(&id) {
                Ok(_) => true,
                Err(ArchiveError::UnknownRun { .. }) => false,
                Err(e) => return Err(e.into()),
            };
            if exists || !live.insert(id.clone()) {
                return Err(RecorderError::RunExists(id));
            }
        }
        let teardown_scopes = start.teardown_scopes.unwrap_or_else(|| {
            let mut s = vec![TeardownScope::Call, TeardownScope::Run];
            if start.session_id.is_some() {
                s.push(TeardownScope::Session);
            }
            s
        });
        let run = Run {
            inner: Arc::new(RunInner {
                rec: self.inner.clone(),
                id: Arc::from(id.as_str()),
                outside: None,
                session_id: start.session_id.clone(),
                identity: start.identity.clone(),
                teardown_scopes: teardown_scopes.clone(),
                next_call: AtomicU64::new(1),
                teardowns: Mutex::new(Teardowns::default()),
                ended: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        };
        run.emit(
            None,
            FactKind::RunStarted(RunStarted {
                run_id: id,
                session_id: start.session_id,
                identity: start.identity,
                producer: self.inner.config.producer.clone(),
                labels: start.labels,
                teardown_scopes,
            }),
        );
        if self.inner.config.durability != Durability::Buffered {
            self.flush().await?;
        }
        Ok(run)
    }

    /// Prepares a call outside any run (seed 000: a call served where
    /// there is no run, as over MCP, has no run id): the tool sees
    /// `ctx.run_id() == None`, and the archive keeps the call (with the
    /// calls it dispatches) as a stream of its own under a key the recorder
    /// assigns ([`CallBuilder::key`]), never under an invented run id. Its
    /// first fact is its `call.started`, its last its `call.ended`; only
    /// the call teardown scope is honoured (there is no run to end, and no
    /// session end to wait for). See [`Recorder::call_from`] to say who
    /// calls.
    pub fn call(&self, tool: &str, args: impl Serialize) -> CallBuilder {
        self.outside_run(Caller::default(), tool, args)
    }

    /// [`Recorder::call`], with the caller's identity, session and labels.
    /// Refuses an empty session id ([`RecorderError::EmptySession`]).
    pub fn call_from(
        &self,
        caller: Caller,
        tool: &str,
        args: impl Serialize,
    ) -> Result<CallBuilder, RecorderError> {
        if caller.session_id.as_deref() == Some("") {
            return Err(RecorderError::EmptySession(format!(
                "(a call of {tool} outside any run)"
            )));
        }
        Ok(self.outside_run(caller, tool, args))
    }

    fn outside_run(&self, caller: Caller, tool: &str, args: impl Serialize) -> CallBuilder {
        let key = format!("call-{:032x}", rand::random::<u128>());
        let stream = Run {
            inner: Arc::new(RunInner {
                rec: self.inner.clone(),
                id: Arc::from(key.as_str()),
                outside: Some(OnceLock::new()),
                session_id: caller.session_id.clone(),
                identity: caller.identity.clone(),
                teardown_scopes: vec![TeardownScope::Call],
                next_call: AtomicU64::new(1),
                teardowns: Mutex::new(Teardowns::default()),
                ended: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        };
        let mut builder = stream.call(tool, args);
        builder.outside = Some(caller);
        builder
    }

    /// Waits until everything filed so far is durable.
    pub async fn flush(&self) -> Result<(), RecorderError> {
        self.inner
            .queue
            .flush()
            .await
            .map_err(RecorderError::Writer)
    }

    /// Facts filed but not yet written (a gauge of the queue).
    pub fn queued(&self) -> usize {
        self.inner.queue.in_flight()
    }

    /// Flushes everything, stops the writer and returns once all that was
    /// filed is durable. Facts filed afterwards are not recorded.
    pub async fn shutdown(self) -> Result<(), RecorderError> {
        // Everything filed is written first, so that followers of ended runs
        // get their last facts before the socket goes.
        let flushed = self.flush().await;
        let live = lock(&self.inner.live).take();
        if let Some(live) = live {
            live.stop(Duration::from_secs(2)).await;
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.queue.close())
            .await
            .map_err(|e| RecorderError::Writer(format!("stopping the writer panicked: {e}")))?;
        flushed?;
        match self.inner.queue.failure() {
            Some(f) => Err(RecorderError::Writer(f)),
            None => Ok(()),
        }
    }
}

/// How to start a run.
#[derive(Debug, Clone)]
pub struct RunStart {
    run_id: String,
    session_id: Option<String>,
    identity: Option<Identity>,
    labels: BTreeMap<String, String>,
    teardown_scopes: Option<Vec<TeardownScope>>,
}

impl RunStart {
    /// A run with this id (unique in the archive).
    pub fn new(run_id: impl Into<String>) -> RunStart {
        RunStart {
            run_id: run_id.into(),
            session_id: None,
            identity: None,
            labels: BTreeMap::new(),
            teardown_scopes: None,
        }
    }

    /// Binds the run to a hosting session (caller data, not identity).
    /// Session-scoped cleanups are kept per (tenant, principal, session),
    /// so another tenant or principal passing the same string reaches
    /// none of them. An empty id is refused by [`Recorder::start_run`].
    pub fn session(mut self, session_id: impl Into<String>) -> RunStart {
        self.session_id = Some(session_id.into());
        self
    }

    /// The identity the caller supplied.
    pub fn identity(mut self, identity: Identity) -> RunStart {
        self.identity = Some(identity);
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> RunStart {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The teardown scopes this host honours. Default: call and run, plus
    /// session when the run is bound to a session. A run that honours the
    /// session scope but has no session id refuses session-scoped
    /// registrations ([`ContextError::NoSession`]).
    pub fn teardown_scopes(mut self, scopes: impl IntoIterator<Item = TeardownScope>) -> RunStart {
        self.teardown_scopes = Some(scopes.into_iter().collect());
        self
    }
}

/// Who makes a call outside any run ([`Recorder::call_from`]): what a
/// [`RunStart`] says of a run's caller.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    session_id: Option<String>,
    identity: Option<Identity>,
    labels: BTreeMap<String, String>,
}

impl Caller {
    /// A caller who says nothing of itself.
    pub fn new() -> Caller {
        Caller::default()
    }

    /// The hosting session (an MCP session id, say). Caller data; the
    /// call's artifacts are scoped to it when the caller names no
    /// conversation.
    pub fn session(mut self, session_id: impl Into<String>) -> Caller {
        self.session_id = Some(session_id.into());
        self
    }

    /// The identity the caller supplied.
    pub fn identity(mut self, identity: Identity) -> Caller {
        self.identity = Some(identity);
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Caller {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// A run being recorded. Cheap to clone.
#[derive(Clone)]
pub struct Run {
    inner: Arc<RunInner>,
}

struct RunInner {
    rec: Arc<RecorderInner>,
    /// The stream's key: the run id, or the key of a call outside any run.
    id: Arc<str>,
    /// Set for the stream of a call outside any run (no `run.started`, no
    /// `run.ended`): that call's id, once it is invoked. Its `call.ended`
    /// ends the stream.
    outside: Option<OnceLock<String>>,
    session_id: Option<String>,
    identity: Option<Identity>,
    teardown_scopes: Vec<TeardownScope>,
    next_call: AtomicU64,
    teardowns: Mutex<Teardowns>,
    /// `end` was called (no new calls).
    ended: AtomicBool,
    /// `run.ended` was filed (no more facts).
    closed: AtomicBool,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl Run {
    /// The run's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Where the stream's calls belong.
    fn home(&self) -> Home {
        match &self.inner.outside {
            None => Home::Run(self.id().to_owned()),
            Some(_) => Home::OutsideRun {
                key: self.id().to_owned(),
            },
        }
    }

    /// Files one fact of this run (the entry point to the queue, with
    /// [`Run::emit_progress`] for progress reports).
    /// After `run.ended` (or the `call.ended` of a call outside any run) a
    /// stream takes no facts: a late one is reported on standard error and
    /// not recorded.
    fn emit(&self, call: Option<&str>, kind: FactKind) {
        if self.inner.closed.load(Ordering::SeqCst) {
            eprintln!(
                "reel-recorder: run {}: a {} fact arrived after the run ended and was not recorded",
                self.inner.id,
                kind.name()
            );
            return;
        }
        let closes = match (&self.inner.outside, &kind) {
            (None, FactKind::RunEnded(_)) => true,
            (Some(root), FactKind::CallEnded(_)) => {
                call.is_some() && call == root.get().map(String::as_str)
            }
            _ => false,
        };
        let queue = &self.inner.rec.queue;
        let tick = queue.tick();
        // `at` and `offset` are the writer's to fill in, from the tick.
        let fact = NewFact {
            at: 0,
            offset: 0,
            call: call.map(str::to_owned),
            kind,
        };
        queue.fact(&self.inner.id, tick, fact);
        if closes {
            self.inner.closed.store(true, Ordering::SeqCst);
        }
    }

    /// Files a progress report of the call opened as `call` (see
    /// [`crate::writer::Queue::open_call`]): [`Run::emit`] for the hot path,
    /// numbered and built by the writer.
    fn emit_progress(&self, call: u64, payload: Value) {
        if self.inner.closed.load(Ordering::SeqCst) {
            eprintln!(
                "reel-recorder: run {}: a progress fact arrived after the run ended and was not recorded",
                self.inner.id
            );
            return;
        }
        self.inner.rec.queue.progress(call, payload);
    }

    /// Prepares a call of `tool` with `args`.
    pub fn call(&self, tool: &str, args: impl Serialize) -> CallBuilder {
        let n = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
        let args = serde_json::to_value(args)
            .unwrap_or_else(|e| serde_json::json!({ "unserialisable": e.to_string() }));
        CallBuilder {
            run: self.clone(),
            outside: None,
            started: CallStarted {
                call_id: format!("c{n}"),
                tool_name: tool.into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: Some(new_invocation_id()),
                mode: CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args,
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            },
            providers: Providers::default(),
            needs: Vec::new(),
            cancel: CancelHandle::new(),
            services: Services::default(),
        }
    }

    /// Ends the run: runs its run-scoped cleanups (reverse order, each
    /// bounded in time, failures recorded), files `run.ended`, and with
    /// call-boundary or every-fact durability waits until all of it is
    /// durable.
    pub async fn end(&self, status: RunStatus) -> Result<(), RecorderError> {
        if self.inner.ended.swap(true, Ordering::SeqCst) {
            return Err(RecorderError::RunEnded(self.id().into()));
        }
        let teardowns = std::mem::take(&mut *lock(&self.inner.teardowns));
        self.run_teardowns(None, TeardownScope::Run, teardowns)
            .await;
        self.emit(None, FactKind::RunEnded(RunEnded { status }));
        let rec = &self.inner.rec;
        rec.queue.run_closed(&self.inner.id);
        lock(&rec.live_runs).remove(&*self.inner.id);
        if rec.config.durability != Durability::Buffered {
            rec.queue.flush().await.map_err(RecorderError::Writer)?;
        }
        Ok(())
    }

    /// Ends the run's hosting session: runs every session-scoped cleanup
    /// registered under its [`TeardownKey::session`] (this run's tenant,
    /// principal and session; by this run or earlier ones) and records
    /// them in this run. Cleanups of another tenant or principal under the
    /// same session string are not this session's and stay. A run bound to
    /// no session has none to end.
    pub async fn end_session(&self) -> Result<(), RecorderError> {
        let Ok(key) = TeardownKey::session(
            self.inner.identity.as_ref(),
            self.inner.session_id.as_deref(),
        ) else {
            return Ok(());
        };
        let teardowns = lock(&self.inner.rec.sessions)
            .remove(&key)
            .unwrap_or_default();
        self.run_teardowns(None, TeardownScope::Session, teardowns)
            .await;
        Ok(())
    }

    async fn run_teardowns(&self, call: Option<&str>, scope: TeardownScope, teardowns: Teardowns) {
        let bound = self.inner.rec.config.teardown_timeout;
        for (key_hash, cleanup, (registrations, last_registered_at)) in
            teardowns.into_reverse_order()
        {
            let started = Instant::now();
            let outcome = run_cleanup(cleanup, bound).await;
            self.emit(
                call,
                FactKind::TeardownRan(TeardownRan {
                    scope,
                    key_hash,
                    outcome,
                    duration_ns: started.elapsed().as_nanos() as u64,
                    registrations,
                    last_registered_at,
                }),
            );
        }
    }
}

/// A fresh invocation id: `inv-` and 128 bits from the thread's
/// cryptographically secure generator (seeded by the OS), as hex. Not
/// derived from the run and call ids (`c1`, `c2`, ... would make it as easy
/// to guess): a receipt naming it cannot be forged for another call.
fn new_invocation_id() -> String {
    format!("inv-{:032x}", rand::random::<u128>())
}

async fn run_cleanup(cleanup: Cleanup, bound: Duration) -> TeardownOutcome {
    // Spawned, so that a panicking cleanup is recorded, not thrown.
    let mut task = tokio::spawn(cleanup());
    match tokio::time::timeout(bound, &mut task).await {
        Err(_) => {
            // Stopped, not abandoned: a cleanup never runs past its bound,
            // nor alongside the next one (reverse order is a dependency
            // order). Waits for the task to be dropped, itself bounded.
            task.abort();
            let _ = tokio::time::timeout(bound, task).await;
            TeardownOutcome::TimedOut
        }
        Ok(Err(join)) => TeardownOutcome::Error {
            message: if join.is_panic() {
                "the cleanup panicked".into()
            } else {
                "the cleanup was cancelled".into()
            },
        },
        Ok(Ok(Err(message))) => TeardownOutcome::Error { message },
        Ok(Ok(Ok(()))) => TeardownOutcome::Ok,
    }
}

/// Cleanups of one scope holder, first registration per key wins; a
/// repeat refreshes the key's liveness (seed 000).
#[derive(Default)]
struct Teardowns {
    order: Vec<(String, Cleanup)>,
    /// Per key: (registrations so far, unix nanos of the last one).
    liveness: HashMap<String, (u64, i64)>,
}

impl Teardowns {
    /// Registers at `at` (unix nanos); a repeat key drops its cleanup, keeps
    /// the first one, and counts.
    fn register(&mut self, key_hash: &str, cleanup: Cleanup, at: i64) -> Registration {
        let entry = self.liveness.entry(key_hash.to_owned()).or_insert((0, at));
        entry.0 += 1;
        entry.1 = at;
        let registrations = entry.0;
        let first = registrations == 1;
        if first {
            self.order.push((key_hash.to_owned(), cleanup));
        }
        Registration {
            first,
            registrations,
            at,
        }
    }

    /// The cleanups, last registered first, each with its liveness.
    fn into_reverse_order(mut self) -> impl Iterator<Item = (String, Cleanup, (u64, i64))> {
        self.order.into_iter().rev().map(move |(key, cleanup)| {
            let live = self.liveness.remove(&key).unwrap_or_default();
            (key, cleanup, live)
        })
    }
}

#[derive(Clone, Default)]
struct Providers {
    credentials: Option<Arc<dyn CredentialProvider>>,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    elicitor: Option<Arc<dyn Elicitor>>,
    dispatcher: Option<Tools>,
    listener: Option<Arc<dyn LogListener>>,
    progress: Option<Arc<dyn ProgressListener>>,
}

/// A call about to be made. Attach what the tool may use, then `invoke`.
pub struct CallBuilder {
    run: Run,
    /// Set for a call outside any run: who calls.
    outside: Option<Caller>,
    started: CallStarted,
    providers: Providers,
    needs: Vec<CredentialNeed>,
    cancel: CancelHandle,
    services: Services,
}

/// Cancels one call from the host; usable before, during and after it.
#[derive(Clone)]
pub struct Canceller {
    run: Run,
    call_id: String,
    handle: CancelHandle,
}

impl Canceller {
    /// Files `cancel.requested` (also after the call ended: recorded, nothing
    /// overwritten) and trips the call's cancellation token.
    pub fn cancel(&self, reason: Option<&str>) {
        self.run.emit(
            Some(&self.call_id),
            FactKind::CancelRequested(CancelRequested {
                reason: reason.map(str::to_owned),
            }),
        );
        self.handle.cancel(reason.map(str::to_owned));
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident, $field:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $name(mut self, value: impl Into<$ty>) -> CallBuilder {
            self.started.$field = Some(value.into());
            self
        }
    };
}

impl CallBuilder {
    /// Overrides the call id (default: `c1`, `c2`, ... per run).
    pub fn call_id(mut self, id: impl Into<String>) -> CallBuilder {
        self.started.call_id = id.into();
        self
    }

    setter!(
        /// The tool's id, when it differs from its name.
        tool_id, tool_id: String);
    setter!(
        /// The opaque invocation id shared with the host's receipts
        /// (default: a generated one, see [`CallBuilder::invocation`]).
        invocation_id, invocation_id: String);
    setter!(
        /// The protocol the call came over, e.g. `"mcp"`.
        protocol, protocol: String);
    setter!(
        /// The detected AI platform, e.g. `"claude"`.
        platform, platform: String);
    setter!(
        /// The client that made the request.
        client_info, client_info: ClientInfo);
    setter!(
        /// Claim tickets of the resolved wanted artifacts (the data is
        /// already in the args).
        wanted, wanted: BTreeMap<String, ArtifactMeta>);

    /// The iteration of the agent loop.
    pub fn iteration(mut self, n: u32) -> CallBuilder {
        self.started.iteration = n;
        self
    }

    /// The tool's spec, recorded in `call.started`: its wants are resolved
    /// and its input validated before the tool runs, and its needs are
    /// resolved along with the call's own [`CallBuilder::needs`]. Its mode
    /// becomes that of the function invoked. The spec's name must be the
    /// called tool's.
    pub fn spec(mut self, spec: ToolSpec) -> CallBuilder {
        self.started.spec = Some(Box::new(spec));
        self
    }

    /// Attaches a credential provider.
    pub fn credentials(mut self, provider: Arc<dyn CredentialProvider>) -> CallBuilder {
        self.providers.credentials = Some(provider);
        self
    }

    /// Declares a credential need for this call, in addition to the spec's
    /// needs (a need declared by both is resolved once), resolved before the
    /// tool runs; if it fails, the tool does not run.
    pub fn needs(mut self, need: impl Into<String>) -> CallBuilder {
        self.needs.push(CredentialNeed::new(need));
        self
    }

    /// Attaches an artifact store.
    pub fn artifacts(mut self, store: Arc<dyn ArtifactStore>) -> CallBuilder {
        self.providers.artifacts = Some(store);
        self
    }

    /// Attaches an elicitor.
    pub fn elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> CallBuilder {
        self.providers.elicitor = Some(elicitor);
        self
    }

    /// Attaches nested dispatch over these tools.
    pub fn dispatcher(mut self, tools: Tools) -> CallBuilder {
        self.providers.dispatcher = Some(tools);
        self
    }

    /// Registers a typed service the tool gets with `ctx.get::<T>()` (one
    /// per type; a later one of the same type replaces it), over the
    /// recorder's ([`Recorder::service`]): this one wins for its type. The
    /// children the call dispatches get the same services. Services are
    /// not recorded: a replay registers its own with
    /// `ReplayOptions::service`.
    pub fn service<T: Send + Sync + 'static>(mut self, service: Arc<T>) -> CallBuilder {
        self.services.insert(service);
        self
    }

    /// Attaches a listener for log notifications.
    pub fn listener(mut self, listener: Arc<dyn LogListener>) -> CallBuilder {
        self.providers.listener = Some(listener);
        self
    }

    /// Attaches a listener that sees each progress report as it is filed
    /// (an MCP server sends them as `notifications/progress`). Without one,
    /// a report is only recorded.
    pub fn progress_listener(mut self, listener: Arc<dyn ProgressListener>) -> CallBuilder {
        self.providers.progress = Some(listener);
        self
    }

    /// A handle that cancels this call.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            run: self.run.clone(),
            call_id: self.started.call_id.clone(),
            handle: self.cancel.clone(),
        }
    }

    /// The call's id.
    pub fn id(&self) -> &str {
        &self.started.call_id
    }

    /// The key the archive keeps the call's stream under: the run's id, or
    /// for a call outside any run the key the recorder assigned it (`call-`
    /// and 32 hex digits), which `reel show` and `Archive::facts` take.
    pub fn key(&self) -> &str {
        self.run.id()
    }

    /// The call's invocation id: the host's, or the one generated for the
    /// call (`inv-` and 32 hex digits of OS-seeded randomness), for the
    /// host's receipts. It is on the call's `call.started` and `call.ended`.
    pub fn invocation(&self) -> &str {
        self.started.invocation_id.as_deref().unwrap_or_default()
    }

    /// Runs a typed tool and records the call.
    pub async fn invoke<A, O, F, Fut>(self, tool: F) -> Result<O, ToolError>
    where
        A: DeserializeOwned,
        O: Serialize + DeserializeOwned,
        F: FnOnce(ToolContext, A) -> Fut,
        Fut: Future<Output = Result<O, ToolError>>,
    {
        let tool_name = self.started.tool_name.clone();
        let value = self
            .invoke_with(CallMode::Async, move |ctx, args| async move {
                let args: A = serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
                    tool: tool_name,
                    detail: e.to_string(),
                })?;
                let out = tool(ctx, args).await?;
                serde_json::to_value(out)
                    .map_err(|e| ToolError::msg(format!("the result does not serialise: {e}")))
            })
            .await?;
        serde_json::from_value(value)
            .map_err(|e| ToolError::msg(format!("the result does not deserialise: {e}")))
    }

    /// Runs a typed sync tool (a plain function, on a blocking thread) and
    /// records the call as `mode: sync`. It receives the same context as an
    /// async tool.
    pub async fn invoke_sync<A, O, F>(self, tool: F) -> Result<O, ToolError>
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce(ToolContext, A) -> Result<O, ToolError> + Send + 'static,
    {
        let tool_name = self.started.tool_name.clone();
        let value = self
            .invoke_with(CallMode::Sync, move |ctx, args| async move {
                let args: A = serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
                    tool: tool_name,
                    detail: e.to_string(),
                })?;
                let out = run_blocking(move || tool(ctx, args)).await?;
                serde_json::to_value(out)
                    .map_err(|e| ToolError::msg(format!("the result does not serialise: {e}")))
            })
            .await?;
        serde_json::from_value(value)
            .map_err(|e| ToolError::msg(format!("the result does not deserialise: {e}")))
    }

    /// Runs a registered tool and records the call, with the tool's mode
    /// and (unless [`CallBuilder::spec`] set one) its spec.
    pub async fn invoke_erased(mut self, tool: &Tool) -> Result<Value, ToolError> {
        if self.started.spec.is_none() {
            self.started.spec = tool.spec().cloned().map(Box::new);
        }
        let tool = tool.clone();
        self.invoke_with(tool.mode(), move |ctx, args| tool.call(ctx, args))
            .await
    }

    /// Runs the tool of the call's name from `tools` (see
    /// [`CallBuilder::invoke_erased`]); a name `tools` does not have is
    /// recorded as a call that ends with [`ToolError::UnknownTool`].
    pub async fn invoke_tool(self, tools: &Tools) -> Result<Value, ToolError> {
        match tools.get(&self.started.tool_name) {
            Some(tool) => self.invoke_erased(tool).await,
            None => {
                let name = self.started.tool_name.clone();
                self.invoke_with(CallMode::Async, move |_, _| async move {
                    Err(ToolError::UnknownTool(name))
                })
                .await
            }
        }
    }

    async fn invoke_with<F, Fut>(self, mode: CallMode, tool: F) -> Result<Value, ToolError>
    where
        F: FnOnce(ToolContext, Value) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>>,
    {
        let run = self.run;
        if run.inner.ended.load(Ordering::SeqCst) {
            return Err(ToolError::msg(format!(
                "run {:?} has already ended: start a new run",
                run.id()
            )));
        }
        let started_at = Instant::now();
        let mut started = self.started;
        // A call outside any run heads its own stream: its call.started
        // says what a run.started would, and its id is the stream's end.
        if let (Some(caller), Some(root)) = (self.outside, &run.inner.outside) {
            let rec = &run.inner.rec;
            if root.set(started.call_id.clone()).is_err()
                || !lock(&rec.live_runs).insert(run.id().to_owned())
            {
                return Err(ToolError::msg(format!(
                    "the call outside any run kept as {:?} was invoked already: prepare each call with `Recorder::call`",
                    run.id()
                )));
            }
            started.outside_run = Some(Box::new(OutsideRun {
                key: run.id().to_owned(),
                session_id: caller.session_id,
                identity: caller.identity,
                producer: rec.config.producer.clone(),
                labels: caller.labels,
                teardown_scopes: run.inner.teardown_scopes.clone(),
            }));
        }
        // The mode is what accepted the function, never a label.
        started.mode = mode;
        if let Some(spec) = &mut started.spec {
            spec.mode = mode;
            if started.tool_id.is_none() {
                started.tool_id = spec.id.clone();
            }
        }
        started.dispatch_tools = self
            .providers
            .dispatcher
            .as_ref()
            .map(|tools| tools.names().map(str::to_owned).collect());
        started.attached = Some(Attached {
            credentials: self.providers.credentials.is_some(),
            artifacts: self.providers.artifacts.is_some(),
            elicitor: self.providers.elicitor.is_some(),
            dispatch: self.providers.dispatcher.is_some(),
            log_listener: self.providers.listener.is_some(),
            content_logging: run.inner.rec.config.content_logging,
        });
        let call_id = started.call_id.clone();
        // The call's own services over the recorder's.
        let services = self.services.over(
            &run.inner
                .rec
                .services
                .read()
                .unwrap_or_else(|p| p.into_inner()),
        );
        let progress_key = run
            .inner
            .rec
            .queue
            .open_call(&run.inner.id, &Arc::from(call_id.as_str()));
        let backend = Arc::new(LiveBackend {
            run: run.clone(),
            progress_key,
            call_id: call_id.clone(),
            invocation_id: started.invocation_id.clone(),
            inherited: (
                started.iteration,
                started.protocol.clone(),
                started.platform.clone(),
                started.client_info.clone(),
            ),
            providers: self.providers,
            services: services.clone(),
            teardowns: Mutex::new(Teardowns::default()),
            cancel: self.cancel.clone(),
        });
        // Declared wants are resolved before call.started is filed: it
        // carries the data in its args and the tickets in `wanted`.
        if let Some(spec) = started.spec.take() {
            let resolved = resolve_wants(&spec, &mut started.args, &*backend).await;
            started.spec = Some(spec);
            if let Some(resolved) = resolved {
                started
                    .wanted
                    .get_or_insert_with(BTreeMap::new)
                    .extend(resolved);
            }
        }
        let args = started.args.clone();
        run.emit(Some(&call_id), FactKind::CallStarted(started.clone()));
        let info = CallInfo {
            home: run.home(),
            session_id: run.inner.session_id.clone(),
            identity: run.inner.identity.clone(),
            teardown_scopes: run.inner.teardown_scopes.clone(),
            diagnostics: Some(Diagnostics {
                run_id: run.home().run_id().map(str::to_owned),
                call_id: call_id.clone(),
                invocation_id: started
                    .invocation_id
                    .clone()
                    .unwrap_or_else(|| call_id.clone()),
                producer: run.inner.rec.config.producer.clone(),
            }),
            started,
        };
        let dyn_backend: Arc<dyn CallBackend> = backend.clone();

        // The input is validated and the declared needs are resolved
        // before the tool runs.
        let result = match before_tool(&info, &dyn_backend, &self.needs, &self.cancel).await {
            Err(err) => Err(err),
            Ok(declared) => {
                let ctx = ToolContext::new(info, dyn_backend, declared, &self.cancel)
                    .with_services(services);
                let handle = ctx.clone();
                match AssertUnwindSafe(tool(ctx, args)).catch_unwind().await {
                    Ok(result) => after_tool(&handle, result),
                    Err(panic) => {
                        let message = panic_message(&*panic);
                        backend
                            .finish(
                                started_at,
                                &Err(ToolError::msg(format!("the tool panicked: {message}"))),
                            )
                            .await;
                        std::panic::resume_unwind(panic);
                    }
                }
            }
        };
        backend.finish(started_at, &result).await;
        result
    }
}

/// The live answers to one call's context.
struct LiveBackend {
    run: Run,
    /// The key the call's progress reports name it by.
    progress_key: u64,
    call_id: String,
    invocation_id: Option<String>,
    /// What a dispatched child inherits: iteration, protocol, platform and
    /// client info.
    inherited: (u32, Option<String>, Option<String>, Option<ClientInfo>),
    providers: Providers,
    /// The call's services, which a dispatched child gets too.
    services: Services,
    teardowns: Mutex<Teardowns>,
    cancel: CancelHandle,
}

impl LiveBackend {
    /// Runs the call's cleanups, files `call.ended` and waits for
    /// durability as configured.
    async fn finish(&self, started_at: Instant, result: &Result<Value, ToolError>) {
        let teardowns = std::mem::take(&mut *lock(&self.teardowns));
        self.run
            .run_teardowns(Some(&self.call_id), TeardownScope::Call, teardowns)
            .await;
        let outcome = match result {
            Ok(v) => CallOutcome::Ok { result: v.clone() },
            Err(e) if e.is_cancelled() => CallOutcome::Aborted {
                reason: self.cancel.reason(),
            },
            Err(e) => CallOutcome::Error {
                error: e.to_string(),
            },
        };
        self.run.emit(
            Some(&self.call_id),
            FactKind::CallEnded(CallEnded {
                outcome,
                duration_ns: started_at.elapsed().as_nanos() as u64,
                invocation_id: self.invocation_id.clone(),
            }),
        );
        let run = &self.run.inner;
        if let Some(root) = &run.outside {
            if root.get() == Some(&self.call_id) {
                // The call outside any run ended: so did its stream.
                run.ended.store(true, Ordering::SeqCst);
                run.rec.queue.run_closed(&run.id);
                lock(&run.rec.live_runs).remove(&*run.id);
            }
        }
        if self.run.inner.rec.config.durability != Durability::Buffered {
            if let Err(e) = self.run.inner.rec.queue.flush().await {
                eprintln!(
                    "reel-recorder: call {} of run {}: {e}",
                    self.call_id,
                    self.run.id()
                );
            }
        }
    }

    /// The artifact scope of the run, composed (see [`artifact_scope`]):
    /// never the bare caller identity, which would let runs without one, or
    /// with the same one in different sessions, read each other's.
    fn scope(&self) -> Identity {
        let run = &self.run.inner;
        artifact_scope(
            &self.run.home(),
            run.session_id.as_deref(),
            run.identity.as_ref(),
        )
    }
}

impl CallBackend for LiveBackend {
    fn emit(&self, kind: FactKind) {
        self.run.emit(Some(&self.call_id), kind);
    }

    fn progress(&self, payload: Value) {
        // The hot path: no allocation, no lock (see `Msg::Progress`); a
        // listener, when attached, sees the report first.
        if let Some(listener) = &self.providers.progress {
            listener.progress(&self.call_id, &payload);
        }
        self.run.emit_progress(self.progress_key, payload);
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let rec = &self.run.inner.rec;
            rec.queue.room().await;
            if rec.config.durability == Durability::EveryFact {
                if let Err(e) = rec.queue.flush().await {
                    eprintln!("reel-recorder: {e}");
                }
            }
        })
    }

    fn has_credentials(&self) -> bool {
        self.providers.credentials.is_some()
    }

    fn credential<'a>(
        &'a self,
        need: &'a CredentialNeed,
        _mode: CredentialMode,
    ) -> BoxFuture<'a, Result<Credential, String>> {
        Box::pin(async move {
            let provider = self
                .providers
                .credentials
                .as_ref()
                .ok_or("no credential provider")?;
            let resolved = provider
                .resolve(self.run.inner.identity.as_ref(), need)
                .await?;
            // Scrub this value from every later fact of the run.
            self.run
                .inner
                .rec
                .queue
                .secret(&self.run.inner.id, resolved.secret.clone());
            let fingerprint = self
                .run
                .inner
                .rec
                .archive
                .fingerprint(resolved.secret.expose().as_bytes());
            let mut c = Credential::new(need.need.clone(), resolved.secret, fingerprint);
            c.kind = resolved.kind.or_else(|| need.kind.clone());
            c.expires_at = resolved.expires_at;
            Ok(c)
        })
    }

    fn has_artifacts(&self) -> bool {
        self.providers.artifacts.is_some()
    }

    fn put_artifact<'a>(
        &'a self,
        media_type: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<ArtifactMeta, String>> {
        Box::pin(async move {
            let store = self
                .providers
                .artifacts
                .as_ref()
                .ok_or("no artifact store")?;
            let meta = ArtifactMeta {
                id: String::new(),
                digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
                size: bytes.len() as u64,
                media_type: media_type.into(),
                scope: self.scope(),
                origin: Origin {
                    run_id: self.run.home().run_id().map(str::to_owned),
                    call_id: self.call_id.clone(),
                },
            };
            let scope = meta.scope.clone();
            let meta = store.put(meta, bytes.clone()).await?;
            // The store's contract, checked: a ticket comes back under the
            // scope it was given, with an id.
            if meta.scope != scope || meta.id.is_empty() {
                return Err(
                    "the artifact store broke its contract: the ticket it returned has another scope or no id; refused: a store must keep the scope it is given and assign a non-empty id (see `ArtifactStore`)"
                        .to_string(),
                );
            }
            self.run.inner.rec.queue.artifact(bytes);
            Ok(meta)
        })
    }

    fn get_artifact<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        Box::pin(async move {
            let store = self
                .providers
                .artifacts
                .as_ref()
                .ok_or("no artifact store")?;
            let scope = self.scope();
            let found = store.get(&scope, id).await?;
            // The store's contract, checked: an artifact of another scope
            // never reaches the tool, whatever the store returns.
            if let Some((meta, _)) = &found {
                // Nothing of the other artifact (not even its scope) goes
                // into the message: it belongs to someone else.
                if meta.scope != scope || meta.id != id {
                    return Err(format!(
                        "the artifact store broke its contract: asked for {id:?} in this run's scope, it returned an artifact of another scope or id; refused: a store must return only artifacts of the scope asked for (see `ArtifactStore`)"
                    ));
                }
            }
            if let Some((_, bytes)) = &found {
                self.run.inner.rec.queue.artifact(bytes.clone());
            }
            Ok(found)
        })
    }

    fn has_elicitor(&self) -> bool {
        self.providers.elicitor.is_some()
    }

    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(async move {
            let elicitor = self.providers.elicitor.as_ref().ok_or("no elicitor")?;
            let answer = match question.ttl_ms {
                Some(ttl) => match tokio::time::timeout(
                    Duration::from_millis(ttl),
                    elicitor.elicit(question),
                )
                .await
                {
                    Ok(answer) => answer,
                    Err(_) => Ok(ElicitAnswer {
                        outcome: ElicitOutcome::Timeout,
                        validation_errors: Vec::new(),
                        pre_resolved: false,
                    }),
                },
                None => elicitor.elicit(question).await,
            };
            // The context validates an accepted answer against the
            // question's schema, the same live and in replay.
            answer
        })
    }

    fn effect<'a>(
        &'a self,
        _name: &'a str,
        _request: &'a Value,
        run: EffectFn,
    ) -> BoxFuture<'a, EffectOutcome> {
        Box::pin(async move {
            match run().await {
                Ok(v) => EffectOutcome::Ok(v),
                Err(e) => EffectOutcome::Err(e),
            }
        })
    }

    fn clock(&self) -> i64 {
        unix_nanos()
    }

    fn random(&self) -> u64 {
        rand::random()
    }

    fn register_teardown(
        &self,
        scope: TeardownScope,
        holder: &TeardownKey,
        key_hash: &str,
        cleanup: Cleanup,
    ) -> Registration {
        // The call and the run hold their own cleanups (their keys name
        // them); sessions outlive runs, so the recorder holds theirs, per
        // (tenant, principal, session).
        let at = self.clock();
        match scope {
            TeardownScope::Call => lock(&self.teardowns).register(key_hash, cleanup, at),
            TeardownScope::Run => lock(&self.run.inner.teardowns).register(key_hash, cleanup, at),
            TeardownScope::Session => lock(&self.run.inner.rec.sessions)
                .entry(holder.clone())
                .or_default()
                .register(key_hash, cleanup, at),
        }
    }

    fn can_dispatch(&self) -> bool {
        self.providers.dispatcher.is_some()
    }

    fn dispatch_tools(&self) -> Option<Vec<String>> {
        self.providers
            .dispatcher
            .as_ref()
            .map(|tools| tools.names().map(str::to_owned).collect())
    }

    fn dispatch<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let tools =
                self.providers.dispatcher.clone().ok_or_else(|| {
                    ToolError::from(ContextError::NoDispatch { tool: tool.into() })
                })?;
            let mut child = self.run.call(tool, args);
            child.started.parent_call = Some(self.call_id.clone());
            // What the parent's caller said holds for the child too; the
            // child gets its own call id and invocation id.
            let (iteration, protocol, platform, client_info) = self.inherited.clone();
            child.started.iteration = iteration;
            child.started.protocol = protocol;
            child.started.platform = platform;
            child.started.client_info = client_info;
            child.providers = self.providers.clone();
            // The parent's services, the same `Arc`s.
            child.services = self.services.clone();
            child.cancel = self.cancel.child();
            child.invoke_tool(&tools).await
        })
    }

    fn deliver_log(&self, level: Level, data: &Value) -> bool {
        self.deliver_log_from(level, None, data)
    }

    fn deliver_log_from(&self, level: Level, logger: Option<&str>, data: &Value) -> bool {
        self.providers
            .listener
            .as_ref()
            .is_some_and(|l| l.deliver_from(&self.call_id, level, logger, data))
    }

    fn content_logging(&self) -> bool {
        self.run.inner.rec.config.content_logging
    }
}
