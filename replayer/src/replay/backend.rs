//! The replay backend: one `CallBackend` that answers every capability of a
//! re-driven call from the record (identity, credentials as stand-ins,
//! artifacts, elicitation, effects, clock, randomness, children, cleanups)
//! and matches each fact the tool files against the recorded fact at its
//! place, keeping the call's report.

use super::*;
use reel_core::lock::lock;

pub(super) struct CallState {
    pub(super) report: CallReport,
    pub(super) emitted: usize,
    /// Recorded host facts (cancel.requested, teardown.ran) already put in
    /// the re-derived timeline.
    pub(super) host_done: usize,
    /// The call's known secrets: its credential stand-ins, and values
    /// learned from secret-named keys, redacted as the recorder did.
    pub(super) secrets: KnownSecrets,
    /// Call-scoped registrations so far, per key hash.
    pub(super) teardowns: HashMap<String, u64>,
    pub(super) next_child: usize,
    /// Child calls that have ended.
    pub(super) children_done: usize,
    /// Numbers the call's progress reports (the one numberer).
    pub(super) progress: reel::sequence::Sequencer,
    /// Replayed progress reports still to swallow: the record's
    /// `progress.dropped` says the recorder dropped this many here.
    pub(super) dropping: u64,
}

pub(super) struct ReplayBackend {
    pub(super) session: Arc<Session>,
    pub(super) call: Arc<RecordedCall>,
    /// Positions in `call.facts` of the host facts put back into the
    /// timeline (see `host_positions`).
    pub(super) host: Vec<usize>,
    /// Positions in `call.facts` of the facts the tool files, in order
    /// (see [`ReplayBackend::expected`]).
    pub(super) tool_facts: Vec<usize>,
    pub(super) cancel: CancelHandle,
    /// (tool facts filed, children ended, reason).
    pub(super) cancel_point: Option<(usize, usize, Option<String>)>,
    pub(super) state: Mutex<CallState>,
}

pub(super) fn divergence(
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
    // A fact replay itself refused (the tool asked for an artifact, a
    // credential, ... where the record has something else): the step the
    // tool took is the news, not the refusal fact it produced.
    let refused = actual
        .as_ref()
        .and_then(|a| a["data"]["reason"].as_str())
        .and_then(|r| r.split_once("reel replay: "))
        .map(|(_, why)| why);
    let line = match (kind, diff.first()) {
        (DivergenceKind::FactMismatch, _) if refused.is_some() => format!(
            "{at}: the record has {} here, but the tool asked for something else ({}), \
             so its steps are out of step with the record from here (one step early or late?)",
            expected
                .as_ref()
                .map(|e| e["kind"].to_string())
                .unwrap_or_default(),
            refused
                .unwrap_or_default()
                .trim_start_matches("reel replay: ")
        ),
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
        reel_core::lock::lock(&self.state)
    }

    /// The `i`th fact the record says the tool filed.
    fn expected(&self, i: usize) -> Option<&Fact> {
        self.tool_facts.get(i).map(|&at| &self.call.facts[at])
    }

    /// The recorded fact at the current position.
    fn peek(&self) -> Option<&Fact> {
        let i = self.state().emitted;
        self.expected(i)
    }

    pub(super) fn maybe_cancel(&self, emitted: usize) {
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
        self.host.iter().map(|&i| &self.call.facts[i])
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
    pub(super) fn finish(&self, result: &Result<Value, ToolError>, order: u64) {
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
        if let (Some(f), false) = (self.expected(st.emitted), results_only) {
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
        let mut matches = expected.as_ref() == Some(&actual);
        let mut hidden = Vec::new();
        if !matches {
            let e = expected
                .clone()
                .map(|o| serde_json::to_value(o).unwrap_or_default());
            let a = serde_json::to_value(&actual).ok();
            let mut diff = Vec::new();
            diff_result(&e, &a, &mut diff);
            // Different only in markers one side could not key: equal as
            // far as can be shown.
            hidden = reel_core::matching::split_unproven(&mut diff);
            matches = diff.is_empty() && !hidden.is_empty();
            if !matches {
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
        }
        if matches {
            let outcome = serde_json::to_value(&actual).unwrap_or_default();
            let bare = reel_core::matching::bare_marker_paths("call.ended:/outcome", &outcome);
            for place in bare.into_iter().chain(hidden) {
                if !st.report.unproven.contains(&place) {
                    st.report.unproven.push(place);
                }
            }
        }
        st.report.result.actual = Some(actual.clone());
        st.report.result.matches = matches;
        st.report.facts_replayed = st.emitted;
        if st.report.divergence.is_some() {
            st.report.verdict = Verdict::Diverged;
        } else if !st.report.unproven.is_empty() {
            st.report.verdict = Verdict::Unproven;
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

/// Notes the places of a recorded fact, equal to the replayed one, that
/// redaction hid: equal there only as markers, so not shown equal.
fn unproven_at(report: &mut CallReport, recorded: &FactKind) {
    for place in reel_core::matching::redacted_places(recorded) {
        if !report.unproven.contains(&place) {
            report.unproven.push(place);
        }
    }
}

/// The result's differences, field by field down to the leaves
/// (`call.ended:/outcome/result/pages/1/bytes`), as facts are compared.
fn diff_result(e: &Option<Value>, a: &Option<Value>, out: &mut Vec<FieldDiff>) {
    reel_core::matching::diff_values("call.ended:/outcome", e.as_ref(), a.as_ref(), out);
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
        let recorded = self.expected(i);
        let (at, offset) = recorded
            .or_else(|| self.expected(self.tool_facts.len().checked_sub(1)?))
            .map_or((0, 0), |f| (f.at, f.offset));
        // Compared first, then moved into the output: the fact is never
        // copied (a copy of every replayed fact was most of replay's
        // allocations).
        if !self.session.options.results_only {
            match recorded {
                // Equal facts (the common case) need no diff; a recorded
                // artifact reference never equals the replayed value, so
                // such facts take the full path below.
                Some(rec) if rec.kind == kind => unproven_at(&mut st.report, &rec.kind),
                Some(rec) => {
                    let mut expected = rec.kind.clone();
                    resolve_refs(&mut expected, &self.session.recording.artifacts);
                    let mut diff = diff_kinds(&expected, &kind, &self.session.options.ignore);
                    let hidden = reel_core::matching::split_unproven(&mut diff);
                    if diff.is_empty() {
                        unproven_at(&mut st.report, &expected);
                        for place in hidden {
                            if !st.report.unproven.contains(&place) {
                                st.report.unproven.push(place);
                            }
                        }
                    } else {
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
        {
            let mut out = self.session.lock_out();
            if let Some(rec) = recorded {
                self.host_facts_before(&mut st, &mut out, rec.seq);
            }
            out.push_fact(at, offset, Some(&self.call.started.call_id), kind);
            if recorded.is_some() {
                out.matched += 1;
            }
        }
        let emitted = st.emitted;
        drop(st);
        self.maybe_cancel(emitted);
    }
}

impl CallBackend for ReplayBackend {
    fn emit(&self, kind: FactKind) {
        match kind {
            FactKind::Progress(p) => {
                self.progress(p.payload);
            }
            kind => self.file(self.state(), kind),
        }
    }

    // Numbered in filing order, as the recorder's writer numbers. The
    // recorder dropped reports where the record holds
    // `progress.dropped { count }`: the replayed reports in that place are
    // swallowed (false, as live), counted, and the fact is filed once, as
    // recorded; the next report's count follows them, as the recorded one
    // does.
    fn progress(&self, payload: Value) -> bool {
        let mut st = self.state();
        let count = st.progress.progress("");
        if st.dropping > 0 {
            st.dropping -= 1;
            return false;
        }
        if let Some(FactKind::ProgressDropped(d)) = self.expected(st.emitted).map(|f| &f.kind) {
            let d = d.clone();
            st.dropping = d.count.saturating_sub(1);
            self.file(st, FactKind::ProgressDropped(d));
            return false;
        }
        // Whether a client was sent it: the record's answer.
        let delivered = matches!(
            self.expected(st.emitted).map(|f| &f.kind),
            Some(FactKind::Progress(p)) if p.delivered
        );
        self.file(
            st,
            FactKind::Progress(Progress {
                payload,
                count,
                delivered,
            }),
        );
        delivered
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
                self.state()
                    .secrets
                    .add_credential(Secret::new(secret.clone()), Some(&r.fingerprint));
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
                let seq = self.expected(st.emitted).map(|f| f.seq);
                let expected = self.expected(st.emitted).map(|f| kind_json(&f.kind));
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
                lock(&self.session.run_teardowns)
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

    fn teardown_key_hash(&self, tool: &str, scope: TeardownScope, key: &str) -> String {
        // See `TeardownHashes`.
        let local = reel::context::teardown_key_hash(tool, scope, key);
        let recorded = match self.peek().map(|f| &f.kind) {
            Some(FactKind::TeardownRegistered(r)) if r.scope == scope => Some(&r.key_hash),
            Some(FactKind::TeardownRefused(r)) if r.scope == scope => Some(&r.key_hash),
            _ => None,
        };
        let old = recorded.is_some_and(|r| r.starts_with("sha256:"));
        if let (Some(keys), false) = (&self.session.options.keys, old) {
            return reel::context::keyed_teardown_key_hash(
                |bytes| keys.keyed_mac(reel::context::TEARDOWN_KEY_PURPOSE, bytes),
                tool,
                scope,
                key,
            );
        }
        let mut hashes = lock(&self.session.teardown_hashes);
        if let Some(bound) = hashes.by_key.get(&local) {
            return bound.clone();
        }
        match recorded {
            Some(r) if r.starts_with("hmac-sha256:") && hashes.bound.insert(r.clone()) => {
                hashes.by_key.insert(local, r.clone());
                r.clone()
            }
            _ => local,
        }
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
            let Some(child) = child_id.and_then(|id| self.session.calls.get(&id).cloned()) else {
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
                child,
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
