//! The replay engine: re-drives recorded calls with a replay context that
//! serves every answer from the record and matches every fact the tool files
//! against it, in order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use reel::context::*;
use reel::fact::*;
use reel::redact::{KnownSecrets, Redactor};
use reel::tools::Tools;
use reel::Fact;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::matching::{diff_kinds, kind_json, resolve_refs, show, FieldDiff, IgnoreRule};
use crate::recording::{RecordedCall, Recording};
pub use reel::report::{
    CallReport, Divergence, DivergenceKind, ReplayReport, ResultCheck, Verdict,
};

/// How strictly to replay.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplayOptions {
    /// Fields to ignore when matching (JSON pointers per kind).
    pub ignore: Vec<IgnoreRule>,
    /// Compare only each call's result, not its facts.
    pub results_only: bool,
    /// Replay only this top-level call.
    pub only_call: Option<String>,
    /// Test credentials by need; a need without one gets a stand-in that
    /// carries the recorded fingerprint.
    pub credentials: BTreeMap<String, String>,
    /// Extra key names that were redacted when recording (the recorder's
    /// `redact_keys`), so that replayed facts are redacted the same way.
    pub redact_keys: Vec<String>,
    /// Serve child calls from the record even when their tool is registered.
    pub serve_children: bool,
    /// Typed services the replayed tools get with `ctx.get::<T>()`, as the
    /// host registered them live: services are not facts, so the test
    /// registers its own (see [`ReplayOptions::service`]). Not serialised.
    #[serde(skip)]
    pub services: Services,
}

impl ReplayOptions {
    /// Registers `service` as the `T` every replayed call's
    /// `ctx.get::<T>()` returns (a test double, or the real thing).
    pub fn service<T: Send + Sync + 'static>(mut self, service: Arc<T>) -> ReplayOptions {
        self.services.insert(service);
        self
    }

    /// Ignores `pointer` (into the fields) of every fact of `kind`.
    pub fn ignore(mut self, kind: &str, pointer: &str) -> ReplayOptions {
        self.ignore.push(IgnoreRule {
            kind: Some(kind.into()),
            pointer: pointer.into(),
        });
        self
    }
}

/// Replays a recording against `tools`.
pub async fn replay(recording: &Recording, tools: &Tools, options: &ReplayOptions) -> ReplayReport {
    let session = Arc::new(Session {
        recording: recording.clone(),
        tools: tools.clone(),
        redactor: Redactor::new(&options.redact_keys),
        options: options.clone(),
        out: Mutex::new(Out::default()),
        run_teardowns: Mutex::new(HashMap::new()),
    });
    // Run-level facts before the first call (run.started) go first.
    {
        let mut out = session.lock_out();
        for f in recording.facts.iter().take_while(|f| f.call.is_none()) {
            out.push_fact(f.at, f.offset, None, f.kind.clone());
        }
    }
    for call in recording.top_level_calls() {
        if options
            .only_call
            .as_deref()
            .is_some_and(|only| only != call.started.call_id)
        {
            continue;
        }
        let _ = replay_call(&session, call, None, CancelHandle::new()).await;
    }
    // Run-level facts after the calls began (run-scoped cleanups, run.ended).
    {
        let mut out = session.lock_out();
        for f in recording
            .facts
            .iter()
            .skip_while(|f| f.call.is_none())
            .filter(|f| f.call.is_none())
        {
            out.push_fact(f.at, f.offset, None, f.kind.clone());
        }
    }
    let out = std::mem::take(&mut *session.lock_out());
    let mut calls = out.calls;
    calls.sort_by_key(|(order, _)| *order);
    ReplayReport {
        source: recording.source.clone(),
        run_id: recording.head.key().to_owned(),
        outside_run: recording.head.run_id().is_none(),
        calls: calls.into_iter().map(|(_, c)| c).collect(),
        facts: out.facts,
        matched_facts: out.matched,
    }
}

struct Session {
    recording: Recording,
    tools: Tools,
    redactor: Redactor,
    options: ReplayOptions,
    out: Mutex<Out>,
    /// Run- and session-scoped registrations so far, per `scope:key_hash`.
    run_teardowns: Mutex<HashMap<String, u64>>,
}

#[derive(Default)]
struct Out {
    facts: Vec<Fact>,
    calls: Vec<(u64, CallReport)>,
    matched: u64,
}

impl Out {
    fn push_fact(&mut self, at: i64, offset: u64, call: Option<&str>, kind: FactKind) {
        let seq = self.facts.len() as u64;
        self.facts.push(Fact {
            seq,
            at,
            offset,
            call: call.map(str::to_owned),
            kind,
        });
    }
}

impl Session {
    fn lock_out(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Facts the host files (not matched against the tool's facts).
fn is_host_fact(kind: &FactKind) -> bool {
    matches!(
        kind,
        FactKind::CallStarted(_)
            | FactKind::CallEnded(_)
            | FactKind::CancelRequested(_)
            | FactKind::TeardownRan(_)
    )
}

fn outcome_of(result: &Result<Value, ToolError>, reason: Option<String>) -> CallOutcome {
    match result {
        Ok(v) => CallOutcome::Ok { result: v.clone() },
        Err(e) if e.is_cancelled() => CallOutcome::Aborted { reason },
        Err(e) => CallOutcome::Error {
            error: e.to_string(),
        },
    }
}

fn served_result(call: &RecordedCall) -> Result<Value, ToolError> {
    match call.ended().map(|e| &e.outcome) {
        Some(CallOutcome::Ok { result }) => Ok(result.clone()),
        Some(CallOutcome::Error { error }) => Err(ToolError::Failed(error.clone())),
        Some(CallOutcome::Aborted { reason }) => Err(ContextError::Cancelled {
            reason: reason.clone(),
        }
        .into()),
        None => Err(ToolError::msg("the recorded call never ended")),
    }
}

/// The call with its payloads that were stored as artifacts (too large to
/// keep inline) put back in place: the tool gets its recorded arguments, and
/// the recorded result compares with the replayed one.
fn resolved_call(call: &RecordedCall, artifacts: &HashMap<String, Vec<u8>>) -> RecordedCall {
    let mut call = call.clone();
    let mut started = FactKind::CallStarted(call.started.clone());
    resolve_refs(&mut started, artifacts);
    if let FactKind::CallStarted(s) = started {
        call.started = s;
    }
    for f in &mut call.facts {
        resolve_refs(&mut f.kind, artifacts);
    }
    call
}

/// Replays one call (and, through dispatch, its children).
fn replay_call<'a>(
    session: &'a Arc<Session>,
    call: &'a RecordedCall,
    dispatched: Option<(&'a str, &'a Value)>,
    cancel: CancelHandle,
) -> BoxFuture<'a, Result<Value, ToolError>> {
    Box::pin(async move {
        let rec = &session.recording;
        let call = &resolved_call(call, &rec.artifacts);
        let started = call.started.clone();
        let order = call.started_seq;
        let call_id = started.call_id.clone();
        let first = call.facts.first();
        session.lock_out().push_fact(
            first.map_or(0, |f| f.at),
            first.map_or(0, |f| f.offset),
            Some(&call_id),
            FactKind::CallStarted(started.clone()),
        );
        let expected: Vec<Fact> = call
            .facts
            .iter()
            .filter(|f| !is_host_fact(&f.kind))
            .cloned()
            .collect();
        let mut report = CallReport {
            call_id: call_id.clone(),
            tool: started.tool_name.clone(),
            parent: started.parent_call.clone(),
            verdict: Verdict::Matched,
            divergence: None,
            facts_expected: expected.len(),
            facts_replayed: 0,
            unrecorded_effects: Vec::new(),
            result: ResultCheck {
                expected: call.ended().map(|e| e.outcome.clone()),
                actual: None,
                matches: false,
            },
        };

        // A child dispatched differently from the recorded one.
        if let Some((tool, args)) = dispatched {
            let mut asked = started.clone();
            asked.tool_name = tool.to_owned();
            asked.args = args.clone();
            let mut asked_kind = FactKind::CallStarted(asked);
            session
                .redactor
                .redact_fact(&mut asked_kind, &mut KnownSecrets::new());
            let diff = diff_kinds(
                &FactKind::CallStarted(started.clone()),
                &asked_kind,
                &session.options.ignore,
            );
            if !diff.is_empty() && !session.options.results_only {
                report.divergence = Some(divergence(
                    &report,
                    DivergenceKind::ChildCall,
                    0,
                    Some(call.started_seq),
                    Some(kind_json(&FactKind::CallStarted(started.clone()))),
                    Some(kind_json(&asked_kind)),
                    diff,
                ));
            }
        }

        let tool = session.tools.get(&started.tool_name).cloned();
        let serve = dispatched.is_some() && (session.options.serve_children || tool.is_none());
        if serve || tool.is_none() {
            // Not re-driven: the recorded facts stand in the timeline, those
            // of its child calls (served with it) included, in record order.
            let mut subtree = HashSet::new();
            let mut stack = vec![call];
            while let Some(c) = stack.pop() {
                subtree.insert(c.started.call_id.as_str());
                stack.extend(c.children.iter().filter_map(|id| rec.calls.get(id)));
            }
            let mut out = session.lock_out();
            for f in rec.facts.iter().filter(|f| {
                f.seq != call.started_seq && f.call.as_deref().is_some_and(|c| subtree.contains(c))
            }) {
                let mut kind = f.kind.clone();
                resolve_refs(&mut kind, &rec.artifacts);
                out.push_fact(f.at, f.offset, f.call.as_deref(), kind);
            }
            report.verdict = if tool.is_none() && dispatched.is_none() {
                Verdict::MissingTool
            } else if report.divergence.is_some() {
                Verdict::Diverged
            } else {
                Verdict::Served
            };
            report.result.matches = report.divergence.is_none();
            out.calls.push((order, report));
            drop(out);
            // Children of a served call are served with it.
            return served_result(call);
        }
        let tool = tool.expect("checked above");

        // Today's tool declares itself as the record says: its mode (what
        // the registry accepted) and, when it has one, its spec. A tool
        // registered without a spec takes the recorded one (the host's).
        let mut today = started.clone();
        today.mode = tool.mode();
        if let Some(spec) = tool.spec() {
            today.spec = Some(Box::new(spec.clone()));
        }
        if report.divergence.is_none() && !session.options.results_only {
            let recorded = FactKind::CallStarted(started.clone());
            let now = FactKind::CallStarted(today.clone());
            let diff = diff_kinds(&recorded, &now, &session.options.ignore);
            if !diff.is_empty() {
                report.divergence = Some(divergence(
                    &report,
                    DivergenceKind::FactMismatch,
                    0,
                    Some(call.started_seq),
                    Some(kind_json(&recorded)),
                    Some(kind_json(&now)),
                    diff,
                ));
            }
        }

        // Where cancellation was recorded: after how many of the tool's facts.
        let ended_seq = call
            .facts
            .iter()
            .find(|f| matches!(f.kind, FactKind::CallEnded(_)))
            .map(|f| f.seq);
        // Where cancellation was recorded: after how many of the tool's
        // facts, and after how many of its children had started (a
        // cancellation during a dispatch takes effect once that child,
        // cancelled with it, has ended: the child's own record says where
        // it stopped). A child cancelled through its parent has no
        // `cancel.requested` of its own: it was cancelled after its last
        // recorded fact.
        let cancel_point = call
            .facts
            .iter()
            .find_map(|f| match &f.kind {
                FactKind::CancelRequested(c) if ended_seq.is_none_or(|e| f.seq < e) => Some((
                    expected.iter().filter(|e| e.seq < f.seq).count(),
                    call.children
                        .iter()
                        .filter_map(|id| rec.calls.get(id))
                        .filter(|child| child.started_seq < f.seq)
                        .count(),
                    c.reason.clone(),
                )),
                _ => None,
            })
            .or_else(|| match call.ended().map(|e| &e.outcome) {
                Some(CallOutcome::Aborted { reason }) if call.started.parent_call.is_some() => {
                    Some((expected.len(), 0, reason.clone()))
                }
                _ => None,
            });

        let backend = Arc::new(ReplayBackend {
            session: session.clone(),
            call: call.clone(),
            expected,
            cancel: cancel.clone(),
            cancel_point,
            state: Mutex::new(CallState {
                report,
                emitted: 0,
                host_done: 0,
                secrets: KnownSecrets::new(),
                teardowns: HashMap::new(),
                next_child: 0,
                children_done: 0,
                progress: 0,
            }),
        });
        backend.maybe_cancel(0);
        let info = CallInfo {
            home: rec.head.home(),
            session_id: rec.head.session_id().map(str::to_owned),
            identity: rec.head.identity().cloned(),
            teardown_scopes: rec.head.teardown_scopes().to_vec(),
            // Replay is a recording-aware context: the record's values.
            diagnostics: Some(Diagnostics {
                run_id: rec.head.run_id().map(str::to_owned),
                call_id: call_id.clone(),
                invocation_id: started
                    .invocation_id
                    .clone()
                    .unwrap_or_else(|| call_id.clone()),
                producer: rec.head.producer().clone(),
            }),
            started: today,
        };
        let dyn_backend: Arc<dyn CallBackend> = backend.clone();

        // The host's own needs for this call, as recorded: the declared
        // needs the record resolved that the recorded spec does not
        // declare. Today's spec declares the rest; the input is validated
        // and all of them are resolved before the tool runs, as live.
        let spec_needs: &[String] = started.spec.as_ref().map_or(&[], |s| &s.needs);
        let extra: Vec<CredentialNeed> = call
            .facts
            .iter()
            .filter_map(|f| match &f.kind {
                FactKind::CredentialRequested(r) if r.mode == CredentialMode::Declared => {
                    Some(CredentialNeed {
                        need: r.need.clone(),
                        kind: r.kind.clone(),
                    })
                }
                FactKind::CredentialRefused(r) if r.mode == CredentialMode::Declared => {
                    Some(CredentialNeed::new(r.need.clone()))
                }
                _ => None,
            })
            .filter(|n| !spec_needs.contains(&n.need))
            .collect();
        let result = match before_tool(&info, &dyn_backend, &extra, &cancel).await {
            Err(e) => Err(e),
            Ok(declared) => {
                let ctx = ToolContext::new(info, dyn_backend, declared, &cancel)
                    .with_services(session.options.services.clone());
                let handle = ctx.clone();
                let args = started.args.clone();
                match AssertUnwindSafe(tool.call(ctx, args)).catch_unwind().await {
                    Ok(r) => after_tool(&handle, r),
                    Err(panic) => Err(ToolError::msg(format!(
                        "the tool panicked during replay: {}",
                        panic_message(&*panic)
                    ))),
                }
            }
        };
        backend.finish(&result, order);
        result
    })
}

struct CallState {
    report: CallReport,
    emitted: usize,
    /// Recorded host facts (cancel.requested, teardown.ran) already put in
    /// the re-derived timeline.
    host_done: usize,
    /// The call's known secrets: its credential stand-ins, and values
    /// learned from secret-named keys, redacted as the recorder did.
    secrets: KnownSecrets,
    /// Call-scoped registrations so far, per key hash.
    teardowns: HashMap<String, u64>,
    next_child: usize,
    /// Child calls that have ended.
    children_done: usize,
    /// Progress reports filed so far (numbers them).
    progress: u64,
}

struct ReplayBackend {
    session: Arc<Session>,
    call: RecordedCall,
    expected: Vec<Fact>,
    cancel: CancelHandle,
    /// (tool facts filed, children ended, reason).
    cancel_point: Option<(usize, usize, Option<String>)>,
    state: Mutex<CallState>,
}

fn divergence(
    report: &CallReport,
    kind: DivergenceKind,
    index: usize,
    seq: Option<u64>,
    expected: Option<Value>,
    actual: Option<Value>,
    diff: Vec<FieldDiff>,
) -> Divergence {
    let at = format!(
        "call {} `{}`, fact {index}{}",
        report.call_id,
        report.tool,
        seq.map(|s| format!(" (seq {s})")).unwrap_or_default()
    );
    let line = match (kind, diff.first()) {
        (DivergenceKind::ExtraFact, _) => format!(
            "{at}: the record has no fact here, the tool filed {}",
            actual
                .as_ref()
                .map(|a| a["kind"].to_string())
                .unwrap_or_default()
        ),
        (DivergenceKind::MissingFact, _) => format!(
            "{at}: the record has {} here, the tool filed nothing more",
            expected
                .as_ref()
                .map(|e| e["kind"].to_string())
                .unwrap_or_default()
        ),
        (DivergenceKind::UnrecordedEffect, _) => format!(
            "{at}: effect {} is not in the record (replay never runs effects)",
            actual
                .as_ref()
                .map(|a| a["data"]["name"].to_string())
                .unwrap_or_default()
        ),
        (_, Some(d)) => format!(
            "{at}, {}: expected {}, got {}",
            d.path,
            show(&d.expected),
            show(&d.actual)
        ),
        (_, None) => format!("{at}: differs"),
    };
    Divergence {
        kind,
        index,
        seq,
        expected,
        actual,
        diff,
        line,
    }
}

impl ReplayBackend {
    fn state(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The recorded fact at the current position.
    fn peek(&self) -> Option<&Fact> {
        let i = self.state().emitted;
        self.expected.get(i)
    }

    fn maybe_cancel(&self, emitted: usize) {
        if let Some((at, children, reason)) = &self.cancel_point {
            if *at == emitted
                && self.state().children_done >= *children
                && !self.cancel.is_cancelled()
            {
                self.cancel.cancel(reason.clone());
            }
        }
    }

    /// Recorded host facts of this call (not call.started / call.ended).
    fn host_facts(&self) -> impl Iterator<Item = &Fact> {
        self.call.facts.iter().filter(|f| {
            is_host_fact(&f.kind)
                && !matches!(f.kind, FactKind::CallStarted(_) | FactKind::CallEnded(_))
        })
    }

    /// Puts recorded host facts with a seq below `before` into the timeline.
    fn host_facts_before(&self, st: &mut CallState, out: &mut Out, before: u64) {
        for f in self.host_facts().skip(st.host_done) {
            if f.seq >= before {
                break;
            }
            out.push_fact(f.at, f.offset, f.call.as_deref(), f.kind.clone());
            st.host_done += 1;
        }
    }

    fn note(&self, st: &mut CallState, d: Divergence) {
        if st.report.divergence.is_none() {
            st.report.divergence = Some(d);
        }
    }

    /// Ends the call: missing facts, the result, the report.
    fn finish(&self, result: &Result<Value, ToolError>, order: u64) {
        let mut st = self.state();
        let actual = outcome_of(result, self.cancel.reason());
        let mut actual_kind = FactKind::CallEnded(CallEnded {
            outcome: actual,
            duration_ns: 0,
            invocation_id: None,
        });
        self.session
            .redactor
            .redact_fact(&mut actual_kind, &mut st.secrets);
        let FactKind::CallEnded(CallEnded {
            outcome: actual, ..
        }) = actual_kind
        else {
            unreachable!("built above")
        };
        let results_only = self.session.options.results_only;
        if st.emitted < self.expected.len() && !results_only {
            let f = &self.expected[st.emitted];
            let d = divergence(
                &st.report,
                DivergenceKind::MissingFact,
                st.emitted + 1,
                Some(f.seq),
                Some(kind_json(&f.kind)),
                None,
                Vec::new(),
            );
            self.note(&mut st, d);
        }
        let expected = st.report.result.expected.clone();
        let matches = expected.as_ref() == Some(&actual);
        if !matches {
            let e = expected
                .clone()
                .map(|o| serde_json::to_value(o).unwrap_or_default());
            let a = serde_json::to_value(&actual).ok();
            let mut diff = Vec::new();
            diff_result(&e, &a, &mut diff);
            let ended = self
                .call
                .facts
                .iter()
                .find(|f| matches!(f.kind, FactKind::CallEnded(_)));
            let d = divergence(
                &st.report,
                DivergenceKind::Result,
                st.emitted + 1,
                ended.map(|f| f.seq),
                e,
                a,
                diff,
            );
            self.note(&mut st, d);
        }
        st.report.result.actual = Some(actual.clone());
        st.report.result.matches = matches;
        st.report.facts_replayed = st.emitted;
        if st.report.divergence.is_some() {
            st.report.verdict = Verdict::Diverged;
        }
        let ended = self
            .call
            .facts
            .iter()
            .rev()
            .find(|f| matches!(f.kind, FactKind::CallEnded(_)));
        let mut out = self.session.lock_out();
        self.host_facts_before(&mut st, &mut out, ended.map_or(u64::MAX, |f| f.seq));
        out.push_fact(
            ended.map_or(0, |f| f.at),
            ended.map_or(0, |f| f.offset),
            Some(&self.call.started.call_id),
            FactKind::CallEnded(CallEnded {
                outcome: actual,
                duration_ns: self.call.ended().map_or(0, |e| e.duration_ns),
                invocation_id: self.call.started.invocation_id.clone(),
            }),
        );
        // Facts the host filed after the end (a late cancellation).
        self.host_facts_before(&mut st, &mut out, u64::MAX);
        out.calls.push((order, st.report.clone()));
    }
}

fn diff_result(e: &Option<Value>, a: &Option<Value>, out: &mut Vec<FieldDiff>) {
    match (e, a) {
        (Some(Value::Object(em)), Some(Value::Object(am))) => {
            let mut keys: Vec<&String> = em
                .keys()
                .chain(am.keys().filter(|k| !em.contains_key(*k)))
                .collect();
            keys.dedup();
            for k in keys {
                if em.get(k) != am.get(k) {
                    out.push(FieldDiff {
                        path: format!("call.ended.outcome.{k}"),
                        expected: em.get(k).cloned(),
                        actual: am.get(k).cloned(),
                    });
                }
            }
        }
        _ => out.push(FieldDiff {
            path: "call.ended.outcome".into(),
            expected: e.clone(),
            actual: a.clone(),
        }),
    }
}

impl ReplayBackend {
    /// Files one fact under the call's state lock (taken by the caller, so
    /// that numbering a progress report and filing it are one step).
    fn file(&self, mut st: std::sync::MutexGuard<'_, CallState>, mut kind: FactKind) {
        self.session
            .redactor
            .redact_fact(&mut kind, &mut st.secrets);
        let i = st.emitted;
        st.emitted += 1;
        let recorded = self.expected.get(i);
        let (at, offset) = recorded
            .or(self.expected.last())
            .map_or((0, 0), |f| (f.at, f.offset));
        {
            let mut out = self.session.lock_out();
            if let Some(rec) = recorded {
                self.host_facts_before(&mut st, &mut out, rec.seq);
            }
            out.push_fact(at, offset, Some(&self.call.started.call_id), kind.clone());
            if recorded.is_some() {
                out.matched += 1;
            }
        }
        if !self.session.options.results_only {
            match recorded {
                // Equal facts (the common case) need no diff; a recorded
                // artifact reference never equals the replayed value, so
                // such facts take the full path below.
                Some(rec) if rec.kind == kind => {}
                Some(rec) => {
                    let mut expected = rec.kind.clone();
                    resolve_refs(&mut expected, &self.session.recording.artifacts);
                    let diff = diff_kinds(&expected, &kind, &self.session.options.ignore);
                    if !diff.is_empty() {
                        let d = divergence(
                            &st.report,
                            DivergenceKind::FactMismatch,
                            i + 1,
                            Some(rec.seq),
                            Some(kind_json(&expected)),
                            Some(kind_json(&kind)),
                            diff,
                        );
                        self.note(&mut st, d);
                    }
                }
                None => {
                    let d = divergence(
                        &st.report,
                        DivergenceKind::ExtraFact,
                        i + 1,
                        None,
                        None,
                        Some(kind_json(&kind)),
                        Vec::new(),
                    );
                    self.note(&mut st, d);
                }
            }
        }
        let emitted = st.emitted;
        drop(st);
        self.maybe_cancel(emitted);
    }
}

impl CallBackend for ReplayBackend {
    fn emit(&self, kind: FactKind) {
        self.file(self.state(), kind);
    }

    fn progress(&self, payload: Value) {
        let mut st = self.state();
        st.progress += 1;
        let count = st.progress;
        self.file(st, FactKind::Progress(Progress { payload, count }));
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn has_credentials(&self) -> bool {
        match self.call.started.attached {
            Some(a) => a.credentials,
            None => !self
                .call
                .facts
                .iter()
                .any(|f| matches!(f.kind, FactKind::CredentialRefused(_))),
        }
    }

    fn credential<'a>(
        &'a self,
        need: &'a CredentialNeed,
        _mode: CredentialMode,
    ) -> BoxFuture<'a, Result<Credential, String>> {
        let answer = match self.peek().map(|f| &f.kind) {
            Some(FactKind::CredentialResolved(r)) if r.need == need.need => {
                let secret = self
                    .session
                    .options
                    .credentials
                    .get(&need.need)
                    .cloned()
                    .unwrap_or_else(|| format!("reel-replay-stand-in:{}", r.fingerprint.0));
                self.state().secrets.add(Secret::new(secret.clone()));
                let mut c = Credential::new(
                    need.need.clone(),
                    Secret::new(secret),
                    r.fingerprint.clone(),
                );
                c.kind = r.kind.clone();
                c.expires_at = r.expires_at;
                Ok(c)
            }
            Some(FactKind::CredentialFailed(f)) if f.need == need.need => Err(f.reason.clone()),
            _ => Err(format!(
                "reel replay: the record has no answer for credential {:?} here",
                need.need
            )),
        };
        Box::pin(async move { answer })
    }

    fn has_artifacts(&self) -> bool {
        match self.call.started.attached {
            Some(a) => a.artifacts,
            None => !self
                .call
                .facts
                .iter()
                .any(|f| matches!(f.kind, FactKind::ArtifactRefused(_))),
        }
    }

    fn put_artifact<'a>(
        &'a self,
        media_type: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<ArtifactMeta, String>> {
        let answer = match self.peek().map(|f| &f.kind) {
            Some(FactKind::ArtifactPut(p)) => Ok(ArtifactMeta {
                // Id, scope and origin come from the record; what describes
                // the bytes comes from the bytes the tool has now.
                digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
                size: bytes.len() as u64,
                media_type: media_type.to_owned(),
                ..p.meta.clone()
            }),
            Some(FactKind::ArtifactRefused(r)) => Err(r.reason.clone()),
            _ => Err("reel replay: the record has no artifact.put here".to_string()),
        };
        Box::pin(async move { answer })
    }

    fn get_artifact<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        let answer = match self.peek().map(|f| &f.kind) {
            Some(FactKind::ArtifactGet(g)) => match &g.meta {
                None => Ok(None),
                Some(meta) => match self.session.recording.artifacts.get(&meta.digest) {
                    Some(bytes) => Ok(Some((meta.clone(), bytes.clone()))),
                    None => Err(format!(
                        "reel replay: the recording lacks the bytes of artifact {} ({}): export the tape again from the archive",
                        meta.id, meta.digest
                    )),
                },
            },
            Some(FactKind::ArtifactRefused(r)) => Err(r.reason.clone()),
            _ => Err(format!("reel replay: the record has no artifact.get of {id:?} here")),
        };
        Box::pin(async move { answer })
    }

    fn has_elicitor(&self) -> bool {
        match self.call.started.attached {
            Some(a) => a.elicitor,
            None => true,
        }
    }

    fn elicit<'a>(
        &'a self,
        _question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        let answer = match self.peek().map(|f| &f.kind) {
            Some(FactKind::ElicitAnswered(a)) => Ok(ElicitAnswer {
                outcome: a.outcome.clone(),
                validation_errors: a.validation_errors.clone(),
                pre_resolved: a.pre_resolved,
            }),
            _ => Err("reel replay: the record has no answer to this question here".to_string()),
        };
        Box::pin(async move { answer })
    }

    fn effect<'a>(
        &'a self,
        name: &'a str,
        request: &'a Value,
        run: EffectFn,
    ) -> BoxFuture<'a, EffectOutcome> {
        // Replay never runs an effect: the closure is dropped unrun.
        drop(run);
        let outcome = match self.peek().map(|f| &f.kind) {
            Some(FactKind::Effect(e)) if e.name == name => {
                let mut outcome = e.outcome.clone();
                if let EffectOutcome::Ok(v) = &mut outcome {
                    let mut k = FactKind::Effect(Effect {
                        name: name.into(),
                        request: Value::Null,
                        outcome: EffectOutcome::Ok(std::mem::take(v)),
                    });
                    resolve_refs(&mut k, &self.session.recording.artifacts);
                    if let FactKind::Effect(Effect { outcome: o, .. }) = k {
                        outcome = o;
                    }
                }
                outcome
            }
            _ => {
                let mut st = self.state();
                st.report.unrecorded_effects.push(name.to_owned());
                let index = st.emitted + 1;
                let seq = self.expected.get(st.emitted).map(|f| f.seq);
                let expected = self.expected.get(st.emitted).map(|f| kind_json(&f.kind));
                let actual = kind_json(&FactKind::Effect(Effect {
                    name: name.into(),
                    request: request.clone(),
                    outcome: EffectOutcome::Err(String::new()),
                }));
                let d = divergence(
                    &st.report,
                    DivergenceKind::UnrecordedEffect,
                    index,
                    seq,
                    expected,
                    Some(actual),
                    Vec::new(),
                );
                self.note(&mut st, d);
                EffectOutcome::Err(format!(
                    "reel replay: effect {name:?} is not in the record here; replay never runs effects"
                ))
            }
        };
        Box::pin(async move { outcome })
    }

    fn clock(&self) -> i64 {
        match self.peek().map(|f| &f.kind) {
            Some(FactKind::Clock(c)) => c.unix_nanos,
            _ => self.session.recording.record.started_at,
        }
    }

    fn random(&self) -> u64 {
        match self.peek().map(|f| &f.kind) {
            Some(FactKind::Random(r)) => r.value,
            _ => 0,
        }
    }

    fn register_teardown(
        &self,
        scope: TeardownScope,
        _holder: &TeardownKey,
        key_hash: &str,
        cleanup: Cleanup,
    ) -> Registration {
        // Replay never runs cleanups: they belong to the live world.
        drop(cleanup);
        // Counted here, as the live holders count: a tool that registers
        // differently diverges.
        let bump = |n: &mut u64| {
            *n += 1;
            *n
        };
        let counted = match scope {
            TeardownScope::Call => bump(self.state().teardowns.entry(key_hash.into()).or_insert(0)),
            TeardownScope::Run | TeardownScope::Session => bump(
                self.session
                    .run_teardowns
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(format!("{scope}:{key_hash}"))
                    .or_insert(0),
            ),
        };
        let mut registration = Registration {
            first: counted == 1,
            registrations: counted,
            at: self.clock(),
        };
        let recorded = match self.peek().map(|f| &f.kind) {
            Some(FactKind::TeardownRegistered(r)) if r.scope == scope && r.key_hash == key_hash => {
                Some(r)
            }
            _ => None,
        };
        if let Some(r) = recorded {
            // The time is the record's, as a clock read is.
            registration.at = r.registered_at;
            if r.registrations == 0 {
                // Recorded before liveness was kept: no count to give.
                registration.registrations = 0;
            }
            // A session outlives the run: its earlier registrations may
            // belong to runs this replay does not hold, so whether this one
            // was the first, and how many came before, is the record's
            // answer.
            if scope == TeardownScope::Session {
                registration.first = r.first;
                registration.registrations = r.registrations;
            }
        }
        registration
    }

    fn can_dispatch(&self) -> bool {
        match self.call.started.attached {
            Some(a) => a.dispatch,
            None => !self.call.children.is_empty(),
        }
    }

    fn dispatch_tools(&self) -> Option<Vec<String>> {
        // The record's list; a record made before it was kept: the
        // replay's registry, when the call had dispatch.
        match &self.call.started.dispatch_tools {
            Some(tools) => Some(tools.clone()),
            None => self
                .can_dispatch()
                .then(|| self.session.tools.names().map(str::to_owned).collect()),
        }
    }

    fn dispatch<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let child_id = {
                let mut st = self.state();
                let n = st.next_child;
                st.next_child += 1;
                self.call.children.get(n).cloned()
            };
            let Some(child) =
                child_id.and_then(|id| self.session.recording.calls.get(&id).cloned())
            else {
                let mut st = self.state();
                let index = st.emitted + 1;
                let d = Divergence {
                    kind: DivergenceKind::ChildCall,
                    index,
                    seq: None,
                    expected: None,
                    actual: Some(serde_json::json!({ "tool": tool, "args": args })),
                    diff: Vec::new(),
                    line: format!(
                        "call {} `{}`, fact {index}: the tool dispatched `{tool}`, but the record has no more child calls",
                        st.report.call_id, st.report.tool
                    ),
                };
                self.note(&mut st, d);
                return Err(ToolError::msg(format!(
                    "reel replay: the record has no child call for `{tool}` here"
                )));
            };
            let result = replay_call(
                &self.session,
                &child,
                Some((tool, &args)),
                self.cancel.child(),
            )
            .await;
            let emitted = {
                let mut st = self.state();
                st.children_done += 1;
                st.emitted
            };
            self.maybe_cancel(emitted);
            result
        })
    }

    fn deliver_log(&self, _level: Level, _data: &Value) -> bool {
        match self.peek().map(|f| &f.kind) {
            Some(FactKind::Log(l)) => l.delivered,
            _ => false,
        }
    }

    fn content_logging(&self) -> bool {
        self.call
            .started
            .attached
            .is_some_and(|a| a.content_logging)
    }
}
