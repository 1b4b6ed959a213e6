//! [`Run`]: a run being recorded (its facts go to the writer here), and
//! what starts one ([`RunStart`], [`Caller`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use reel::context::*;
use reel::fact::*;
use reel::rules::{ends_stream, LateFact};
use reel::NewFact;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::Durability;
use crate::writer::report_late;

use super::inner::RecorderInner;
use super::lock;
use super::teardown::{run_cleanup, Teardowns};
use super::RecorderError;

/// How to start a run.
#[derive(Debug, Clone)]
pub struct RunStart {
    pub(super) run_id: String,
    pub(super) session_id: Option<String>,
    pub(super) identity: Option<Identity>,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) teardown_scopes: Option<Vec<TeardownScope>>,
    pub(super) secrets: Vec<Secret>,
    pub(super) cancellation: Option<CancellationToken>,
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
            secrets: Vec::new(),
            cancellation: None,
        }
    }

    /// The host's own cancellation token for the run (seed 000: the
    /// signal comes from the run): when it is cancelled, the run is, as by
    /// [`Run::cancel`] with no reason (a task on the tokio runtime
    /// `start_run` runs on watches it until the run ends). The run's own
    /// token ([`Run::cancellation_token`]) is a child of it: cancelling
    /// the run never cancels the host's token, which other work may share.
    pub fn cancellation(mut self, token: CancellationToken) -> RunStart {
        self.cancellation = Some(token);
        self
    }

    /// A value known to be secret (a token the host holds, say): scrubbed
    /// by value from every fact of the run, its `run.started` included,
    /// as a resolved credential's value is. Kept in memory only, and
    /// forgotten when the run ends. An empty value is ignored.
    pub fn secret(mut self, secret: Secret) -> RunStart {
        if !secret.expose().is_empty() {
            self.secrets.push(secret);
        }
        self
    }

    /// Binds the run to a hosting session (caller data, not identity).
    /// Session-scoped cleanups are kept per (tenant, principal, session),
    /// so another tenant or principal passing the same string reaches
    /// none of them. An empty id is refused by [`Recorder::start_run`](crate::Recorder::start_run).
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
    /// session when the run is bound to a session. The session scope is
    /// honoured only by a run bound to a session (seed 000: the scopes are
    /// what the door "can actually honour"): on a run with no session id
    /// it is left out of `run.started` and `ctx.teardown_scopes()` even
    /// when listed here, and a session-scoped registration is refused as
    /// a scope the door does not honour ([`ContextError::ScopeNotHonoured`],
    /// which says how to bind a session).
    pub fn teardown_scopes(mut self, scopes: impl IntoIterator<Item = TeardownScope>) -> RunStart {
        self.teardown_scopes = Some(scopes.into_iter().collect());
        self
    }
}

/// Who makes a call outside any run ([`Recorder::call_from`](crate::Recorder::call_from)): what a
/// [`RunStart`] says of a run's caller.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub(super) session_id: Option<String>,
    pub(super) identity: Option<Identity>,
    pub(super) labels: BTreeMap<String, String>,
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

/// The calls a run-level cancel reaches: those of the run that are
/// running and have no parent (a dispatched child is cancelled with its
/// parent, as by a call's own [`Canceller`](crate::Canceller)).
#[derive(Default)]
pub(super) struct RunCancel {
    /// `Some(reason)` once the run was cancelled.
    pub(super) cancelled: Option<Option<String>>,
    pub(super) live: BTreeMap<String, CancelHandle>,
}

/// A run being recorded. Cheap to clone.
#[derive(Clone)]
pub struct Run {
    pub(super) inner: Arc<RunInner>,
}

pub(super) struct RunInner {
    pub(super) rec: Arc<RecorderInner>,
    /// The stream's key: the run id, or the key of a call outside any run.
    pub(super) id: Arc<str>,
    /// Set for the stream of a call outside any run (no `run.started`, no
    /// `run.ended`): that call's id, once it is invoked. Its `call.ended`
    /// ends the stream.
    pub(super) outside: Option<OnceLock<String>>,
    pub(super) session_id: Option<String>,
    pub(super) identity: Option<Identity>,
    pub(super) teardown_scopes: Vec<TeardownScope>,
    pub(super) next_call: AtomicU64,
    /// The call ids of the stream: generated ones from when their call is
    /// prepared, a host's from when its call is invoked. A call id is
    /// unique within its stream (seed 000: `toolCallId`).
    pub(super) call_ids: Mutex<HashSet<String>>,
    pub(super) teardowns: Mutex<Teardowns>,
    /// Uses of a call's context after the call ended, refused, per call id
    /// and capability: filed at the stream's end ([`Run::file_refused`]),
    /// after which it is `None` and a refusal is reported as late.
    pub(super) refused: Mutex<Option<BTreeMap<String, BTreeMap<String, u64>>>>,
    /// The run's cancellation token (the host's, or its own).
    pub(super) cancel_token: CancellationToken,
    /// The run's calls that a run-level cancel reaches, and whether (and
    /// why) the run was cancelled.
    pub(super) cancel: Mutex<RunCancel>,
    /// Cancelled when the run ends (stops the watch of a host's token).
    pub(super) ended_token: CancellationToken,
    /// `end` was called (no new calls).
    pub(super) ended: AtomicBool,
    /// `run.ended` was filed (no more facts).
    pub(super) closed: AtomicBool,
}

impl Run {
    /// A stream of the recorder `rec`, kept under `id`, before its first
    /// fact: a run (`outside` false), or a call outside any run.
    pub(super) fn open(
        rec: Arc<RecorderInner>,
        id: &str,
        outside: bool,
        session_id: Option<String>,
        identity: Option<Identity>,
        teardown_scopes: Vec<TeardownScope>,
        cancel_token: CancellationToken,
    ) -> Run {
        Run {
            inner: Arc::new(RunInner {
                rec,
                id: Arc::from(id),
                outside: outside.then(OnceLock::new),
                session_id,
                identity,
                teardown_scopes,
                next_call: AtomicU64::new(1),
                call_ids: Mutex::new(HashSet::new()),
                teardowns: Mutex::new(Teardowns::default()),
                refused: Mutex::new(Some(BTreeMap::new())),
                cancel_token,
                cancel: Mutex::new(RunCancel::default()),
                ended_token: CancellationToken::new(),
                ended: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        }
    }
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

    /// A fresh call id, reserved: `c1`, `c2`, ..., skipping every id the
    /// stream holds already (a host may have chosen `c2`).
    pub(super) fn generate_call_id(&self) -> String {
        let mut ids = lock(&self.inner.call_ids);
        loop {
            let n = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
            let id = format!("c{n}");
            if ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// Gives back a generated id its call never used (the host chose
    /// another).
    pub(super) fn release_call_id(&self, id: &str) {
        lock(&self.inner.call_ids).remove(id);
    }

    /// Claims a host-chosen call id for a call about to start: refused
    /// when the stream holds it already (a call started, or prepared
    /// with it as its generated id).
    pub(super) fn claim_call_id(&self, id: &str) -> Result<(), String> {
        if lock(&self.inner.call_ids).insert(id.to_owned()) {
            return Ok(());
        }
        Err(format!(
            "call id {id:?} is taken in run {:?}: a call id is unique within its run (seed 000's toolCallId), and a call of this run started with it, or was prepared with it; give each call its own id with `.call_id(..)`, or leave it out for a generated one; nothing of this call was recorded",
            self.id()
        ))
    }

    /// A value learnt to be secret while the run goes on (a value a host
    /// received for a call about to start, say): scrubbed by value from
    /// every fact of the run filed after this, as
    /// [`RunStart::secret`] is from the start. Kept in memory only; an
    /// empty value is ignored.
    pub fn secret(&self, secret: Secret) {
        if !secret.expose().is_empty() {
            self.inner.rec.queue.secret(&self.inner.id, secret, None);
        }
    }

    /// Where the stream's calls belong.
    pub(super) fn home(&self) -> Home {
        match &self.inner.outside {
            None => Home::Run(self.id().to_owned()),
            Some(_) => Home::OutsideRun {
                key: self.id().to_owned(),
            },
        }
    }

    /// Files a log message the run received but cannot tie to one call: a
    /// `log` fact of the run itself (no call) that names `in_flight`, the
    /// calls in flight when it came, one of which may have sent it (empty:
    /// none was). A proxy's log notification on a transport that does not
    /// say which request it belongs to is one: the record says what is
    /// known, and does not guess.
    pub fn log(&self, level: Level, logger: Option<String>, data: Value, in_flight: Vec<String>) {
        self.emit(
            None,
            FactKind::Log(Log {
                level,
                logger,
                subflow: None,
                data,
                delivered: true,
                in_flight,
            }),
        );
    }

    /// Files one fact of this run (the entry point to the queue, with
    /// [`Run::emit_progress`] for progress reports).
    /// After `run.ended` (or the `call.ended` of a call outside any run) a
    /// stream takes no facts: a late one is reported ([`report_late`]) and
    /// not recorded.
    pub(super) fn emit(&self, call: Option<&str>, kind: FactKind) {
        if self.inner.closed.load(Ordering::SeqCst) {
            return self.late(kind.name());
        }
        let closes = match &self.inner.outside {
            None => ends_stream(None, call, &kind),
            Some(root) => root
                .get()
                .is_some_and(|root| ends_stream(Some(root), call, &kind)),
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
    /// False when the report was dropped (the queue is over its progress
    /// bound): the caller counts it for `progress.dropped`.
    pub(super) fn emit_progress(&self, call: u64, payload: Value) -> bool {
        if self.inner.closed.load(Ordering::SeqCst) {
            self.late("progress");
            return true;
        }
        self.inner.rec.queue.progress(call, payload)
    }

    /// Whether a progress report filed now would be queued.
    pub(super) fn progress_room(&self) -> bool {
        self.inner.rec.queue.progress_room()
    }

    /// Counts a use of `call`'s context after the call ended (see
    /// [`ToolContext::close`]); once the count is filed, reported as late.
    pub(super) fn refused_after_end(&self, call: &str, capability: &str) {
        let mut refused = lock(&self.inner.refused);
        match refused.as_mut() {
            Some(calls) => {
                *calls
                    .entry(call.to_owned())
                    .or_default()
                    .entry(capability.to_owned())
                    .or_default() += 1;
            }
            None => {
                drop(refused);
                self.late(&format!("{capability} (of call {call}, after it ended)"));
            }
        }
    }

    /// Files the count of the uses of contexts after their call ended, if
    /// any (a `warning` log of logger [`AFTER_END_LOGGER`], no call), then
    /// `end`, the stream's last fact, under one lock: a refusal counted
    /// later is reported as late.
    pub(super) fn file_refused_then(&self, call: Option<&str>, end: FactKind) {
        let mut refused = lock(&self.inner.refused);
        if let Some(calls) = refused.take().filter(|c| !c.is_empty()) {
            let total: u64 = calls.values().flat_map(|c| c.values()).sum();
            self.emit(
                None,
                FactKind::Log(Log {
                    level: Level::Warning,
                    logger: Some(AFTER_END_LOGGER.into()),
                    subflow: None,
                    data: serde_json::json!({
                        "message": format!("{total} use(s) of a call's context after the call ended were refused and not recorded (a clone held by a spawned task that outlived its call): finish the work before the tool returns"),
                        "refused": total,
                        "calls": calls,
                    }),
                    delivered: false, in_flight: Vec::new(),
                }),
            );
        }
        self.emit(call, end);
    }

    /// A fact filed after the stream's end: not recorded, reported.
    #[cold]
    pub(super) fn late(&self, kind: &str) {
        report_late(&LateFact {
            stream: self.inner.id.to_string(),
            kind: kind.to_owned(),
            count: 1,
        });
    }

    /// Cancels the run (seed 000: the signal comes from the run): files
    /// `cancel.requested` for every running call of the run that has no
    /// parent, then trips it (its children are cancelled with it, as by
    /// [`Canceller::cancel`](crate::Canceller::cancel)); a call invoked
    /// afterwards starts cancelled. Trips the run's token too
    /// ([`Run::cancellation_token`]; a child of the host's when it gave
    /// one, never the host's itself). The first reason given is kept; a
    /// second cancel changes nothing.
    pub fn cancel(&self, reason: Option<&str>) {
        self.cancel_calls(reason.map(str::to_owned));
        self.inner.cancel_token.cancel();
    }

    /// The run's cancellation token: a child of the host's
    /// ([`RunStart::cancellation`]), or the run's own. Cancelling it
    /// cancels the run, as [`Run::cancel`] does (without a reason).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel_token.clone()
    }

    /// True once the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        lock(&self.inner.cancel).cancelled.is_some()
    }

    pub(super) fn cancel_calls(&self, reason: Option<String>) {
        let mut state = lock(&self.inner.cancel);
        if state.cancelled.is_some() {
            return;
        }
        state.cancelled = Some(reason.clone());
        for (call_id, handle) in &state.live {
            self.cancel_call(call_id, handle, reason.clone());
        }
    }

    /// Files `cancel.requested` for `call_id`, then trips its handle.
    fn cancel_call(&self, call_id: &str, handle: &CancelHandle, reason: Option<String>) {
        self.emit(
            Some(call_id),
            FactKind::CancelRequested(CancelRequested {
                reason: reason.clone(),
            }),
        );
        handle.cancel(reason);
    }

    /// A call of the run has started (its `call.started` is filed): a
    /// run-level cancel reaches it from now on, or at once when the run
    /// was cancelled already. Children are reached through their parent.
    pub(super) fn call_started(&self, call_id: &str, parent: Option<&str>, handle: &CancelHandle) {
        if parent.is_some() {
            return;
        }
        let mut state = lock(&self.inner.cancel);
        match state.cancelled.clone() {
            Some(reason) => self.cancel_call(call_id, handle, reason),
            None => {
                state.live.insert(call_id.to_owned(), handle.clone());
            }
        }
    }

    /// A call of the run has ended: a run-level cancel no longer reaches it.
    pub(super) fn call_ended(&self, call_id: &str) {
        lock(&self.inner.cancel).live.remove(call_id);
    }

    /// Cancels the run when `token` (the host's) is cancelled, until the
    /// run ends: a task on the current tokio runtime (outside one, only
    /// [`Run::cancel`] cancels the run).
    pub(super) fn watch(&self, token: CancellationToken) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let run = Arc::downgrade(&self.inner);
        let ended = self.inner.ended_token.clone();
        runtime.spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {
                    if let Some(inner) = run.upgrade() {
                        Run { inner }.cancel_calls(None);
                    }
                }
                _ = ended.cancelled() => {}
            }
        });
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
        self.file_refused_then(None, FactKind::RunEnded(RunEnded { status }));
        self.inner.ended_token.cancel();
        let rec = &self.inner.rec;
        rec.queue.run_closed(&self.inner.id);
        lock(&rec.live_runs).remove(&*self.inner.id);
        if rec.config.durability != Durability::Buffered {
            rec.queue.flush(Some(&self.inner.id)).await?;
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
}

/// A fresh invocation id: `inv-` and 128 bits from the thread's
/// cryptographically secure generator (seeded by the OS), as hex. Not
/// derived from the run and call ids (`c1`, `c2`, ... would make it as easy
/// to guess): a receipt naming it cannot be forged for another call.
pub(super) fn new_invocation_id() -> String {
    format!("inv-{:032x}", rand::random::<u128>())
}

/// Running a holder's cleanups (see [`super::teardown`]).
impl Run {
    pub(super) async fn run_teardowns(
        &self,
        call: Option<&str>,
        scope: TeardownScope,
        teardowns: Teardowns,
    ) {
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
