//! One recorded call re-driven: its report begun, the call served from the
//! record or run against a [`ReplayBackend`], in the steps below.

use super::*;

/// Replays one call (and, through dispatch, its children).
pub(super) fn replay_call<'a>(
    session: &'a Arc<Session>,
    call: Arc<RecordedCall>,
    dispatched: Option<(&'a str, &'a Value)>,
    cancel: CancelHandle,
) -> BoxFuture<'a, Result<Value, ToolError>> {
    Box::pin(async move {
        let rec = &session.recording;
        // Shared with the call's backend, not copied into it.
        let resolved = call;
        let call: &RecordedCall = &resolved;
        let started = &call.started;
        let order = call.started_seq;
        let call_id = started.call_id.clone();
        let first = call.facts.first();
        session.lock_out().push_fact(
            first.map_or(0, |f| f.at),
            first.map_or(0, |f| f.offset),
            Some(&call_id),
            FactKind::CallStarted(started.clone()),
        );
        // Where the facts the tool files are among the call's (the host's
        // are matched apart): positions, not copies.
        let expected: Vec<usize> = call
            .facts
            .iter()
            .enumerate()
            .filter(|(_, f)| !is_host_fact(&f.kind))
            .map(|(i, _)| i)
            .collect();
        let mut report = new_report(call, expected.len());

        // A child dispatched differently from the recorded one.
        if let Some((tool, args)) = dispatched {
            check_dispatched(session, call, tool, args, &mut report);
        }

        let tool = session.tools.get(&started.tool_name).cloned();
        let serve = dispatched.is_some() && (session.options.serve_children || tool.is_none());
        let missing = tool.is_none() && dispatched.is_none();
        let tool = match tool {
            Some(tool) if !serve => tool,
            _ => return serve_recorded(session, call, report, missing),
        };

        let today = declared_today(&tool, started);
        if report.divergence.is_none() && !session.options.results_only {
            check_declared(session, call, &today, &mut report);
        }
        let cancel_point = cancel_point(session, call, &expected);

        let backend = Arc::new(ReplayBackend {
            session: session.clone(),
            host: host_positions(call),
            call: resolved.clone(),
            tool_facts: expected,
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
                progress: reel::sequence::Sequencer::new(),
                dropping: 0,
            }),
        });
        backend.maybe_cancel(0);
        let info = call_info(rec, call, today);
        let dyn_backend: Arc<dyn CallBackend> = backend.clone();
        let extra = host_needs(call);
        let result = match before_tool(&info, &dyn_backend, &extra, &cancel).await {
            Err(e) => Err(e),
            Ok(declared) => {
                let ctx = ToolContext::new(info, dyn_backend, declared, &cancel)
                    .with_services(session.options.services.clone());
                let handle = ctx.clone();
                let args = started.args.clone();
                match AssertUnwindSafe(tool.call(ctx, args)).catch_unwind().await {
                    Ok(r) => after_tool(&handle, r),
                    Err(panic) => Err({
                        handle.close();
                        ToolError::msg(format!(
                            "the tool panicked during replay: {}",
                            panic_message(&*panic)
                        ))
                    }),
                }
            }
        };
        backend.finish(&result, order);
        result
    })
}

/// The call's report before anything of it is replayed: matched so far,
/// expecting `facts_expected` facts of the tool.
fn new_report(call: &RecordedCall, facts_expected: usize) -> CallReport {
    let started = &call.started;
    CallReport {
        call_id: started.call_id.clone(),
        tool: started.tool_name.clone(),
        parent: started.parent_call.clone(),
        verdict: Verdict::Matched,
        divergence: None,
        facts_expected,
        facts_replayed: 0,
        unrecorded_effects: Vec::new(),
        result: ResultCheck {
            expected: call.ended().map(|e| e.outcome.clone()),
            actual: None,
            matches: false,
        },
        // The tool is re-driven with the recorded arguments: where
        // redaction hid one, it runs on the marker, not on what it had.
        unproven: reel_core::matching::redacted_paths("call.started:/args", &started.args),
    }
}

/// A child dispatched as `tool` with `args`: a divergence on `report` when
/// that differs from the recorded start (unless only results are compared).
fn check_dispatched(
    session: &Session,
    call: &RecordedCall,
    tool: &str,
    args: &Value,
    report: &mut CallReport,
) {
    let started = &call.started;
    let mut asked = started.clone();
    asked.tool_name = tool.to_owned();
    asked.args = args.clone();
    let mut asked_kind = FactKind::CallStarted(asked);
    session
        .redactor
        .redact_fact(&mut asked_kind, &mut KnownSecrets::new());
    let mut diff = diff_kinds(
        &FactKind::CallStarted(started.clone()),
        &asked_kind,
        &session.options.ignore,
    );
    // A marker the replay could not key equals the recorded one as far
    // as can be shown; the child's own report says it is unproven.
    let _ = reel_core::matching::split_unproven(&mut diff);
    if !diff.is_empty() && !session.options.results_only {
        report.divergence = Some(divergence(
            report,
            DivergenceKind::ChildCall,
            0,
            Some(call.started_seq),
            Some(kind_json(&FactKind::CallStarted(started.clone()))),
            Some(kind_json(&asked_kind)),
            diff,
        ));
    }
}

/// A call not re-driven (served, or its tool `missing`): the recorded facts
/// stand in the timeline, those of its child calls (served with it)
/// included, in record order; the recorded outcome is its result.
fn serve_recorded(
    session: &Session,
    call: &RecordedCall,
    mut report: CallReport,
    missing: bool,
) -> Result<Value, ToolError> {
    let rec = &session.recording;
    let mut subtree = HashSet::new();
    let mut members = Vec::new();
    let mut stack = vec![call];
    while let Some(c) = stack.pop() {
        if subtree.insert(c.started.call_id.as_str()) {
            members.push(c);
        }
        stack.extend(
            c.children
                .iter()
                .filter_map(|id| session.calls.get(id).map(|c| &**c)),
        );
    }
    let in_subtree = |f: &&Fact| f.call.as_deref().is_some_and(|c| subtree.contains(c));
    let mut facts: Vec<(&Fact, bool)> = if session.moved {
        // The subtree's calls hold its facts, their payloads already
        // put back in place; the facts of no call hold the rest (a
        // call id started twice).
        members
            .iter()
            .flat_map(|c| c.facts.iter().map(|f| (f, false)))
            .chain(rec.facts.iter().filter(in_subtree).map(|f| (f, true)))
            .collect()
    } else {
        rec.facts
            .iter()
            .filter(in_subtree)
            .map(|f| (f, true))
            .collect()
    };
    facts.retain(|(f, _)| f.seq != call.started_seq);
    facts.sort_by_key(|(f, _)| f.seq);
    let mut out = session.lock_out();
    for (f, resolve) in facts {
        let mut kind = f.kind.clone();
        if resolve {
            resolve_refs(&mut kind, &rec.artifacts);
        }
        out.push_fact(f.at, f.offset, f.call.as_deref(), kind);
    }
    report.verdict = if missing {
        Verdict::MissingTool
    } else if report.divergence.is_some() {
        Verdict::Diverged
    } else {
        Verdict::Served
    };
    report.result.matches = report.divergence.is_none();
    out.calls.push((call.started_seq, report));
    drop(out);
    // Children of a served call are served with it.
    served_result(call)
}

/// Today's tool declares itself as the record says: its mode (what the
/// registry accepted) and, when it has one, its spec. A tool registered
/// without a spec takes the recorded one (the host's).
fn declared_today(tool: &reel::tools::Tool, started: &CallStarted) -> CallStarted {
    let mut today = started.clone();
    today.mode = tool.mode();
    if let Some(spec) = tool.spec() {
        today.spec = Some(Box::new(spec.clone()));
    }
    today
}

/// A divergence on `report` when the call as `today` declares it differs
/// from the recorded start.
fn check_declared(
    session: &Session,
    call: &RecordedCall,
    today: &CallStarted,
    report: &mut CallReport,
) {
    let recorded = FactKind::CallStarted(call.started.clone());
    let now = FactKind::CallStarted(today.clone());
    let diff = diff_kinds(&recorded, &now, &session.options.ignore);
    if !diff.is_empty() {
        report.divergence = Some(divergence(
            report,
            DivergenceKind::FactMismatch,
            0,
            Some(call.started_seq),
            Some(kind_json(&recorded)),
            Some(kind_json(&now)),
            diff,
        ));
    }
}

/// Where cancellation was recorded: after how many of the tool's facts
/// (`expected`, their positions), and after how many of its children had
/// started (a cancellation during a dispatch takes effect once that child,
/// cancelled with it, has ended: the child's own record says where it
/// stopped), with its reason. A child cancelled through its parent has no
/// `cancel.requested` of its own: it was cancelled after its last recorded
/// fact.
fn cancel_point(
    session: &Session,
    call: &RecordedCall,
    expected: &[usize],
) -> Option<(usize, usize, Option<String>)> {
    let ended_seq = call
        .facts
        .iter()
        .find(|f| matches!(f.kind, FactKind::CallEnded(_)))
        .map(|f| f.seq);
    call.facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CancelRequested(c) if ended_seq.is_none_or(|e| f.seq < e) => Some((
                expected
                    .iter()
                    .filter(|&&e| call.facts[e].seq < f.seq)
                    .count(),
                call.children
                    .iter()
                    .filter_map(|id| session.calls.get(id))
                    .filter(|child| child.started_seq < f.seq)
                    .count(),
                c.reason.clone(),
            )),
            _ => None,
        })
        // A cancel that came after the tool's last fact, of a call that
        // then ended ok, came too late to matter: the tool had done its
        // last check (cancellation is cooperative). Replayed at that
        // point it would abort a tool that, on the record, finished.
        .filter(|(after, children, _)| {
            let finished = matches!(
                call.ended().map(|e| &e.outcome),
                Some(CallOutcome::Ok { .. })
            );
            !(finished && *after == expected.len() && *children == call.children.len())
        })
        .or_else(|| match call.ended().map(|e| &e.outcome) {
            Some(CallOutcome::Aborted { reason }) if call.started.parent_call.is_some() => {
                Some((expected.len(), 0, reason.clone()))
            }
            _ => None,
        })
}

/// What the tool's context says of the call: the record's values (replay
/// is a recording-aware context), started as `today` declares it.
fn call_info(rec: &Recording, call: &RecordedCall, today: CallStarted) -> CallInfo {
    let call_id = call.started.call_id.clone();
    CallInfo {
        home: rec.head.home(),
        session_id: rec.head.session_id().map(str::to_owned),
        identity: rec.head.identity().cloned(),
        teardown_scopes: rec.head.teardown_scopes().to_vec(),
        diagnostics: Some(Diagnostics {
            run_id: rec.head.run_id().map(str::to_owned),
            invocation_id: call
                .started
                .invocation_id
                .clone()
                .unwrap_or_else(|| call_id.clone()),
            call_id,
            producer: rec.head.producer().clone(),
        }),
        started: today,
    }
}

/// The host's own needs for this call, as recorded: the declared needs the
/// record resolved that the recorded spec does not declare. Today's spec
/// declares the rest; the input is validated and all of them are resolved
/// before the tool runs, as live.
fn host_needs(call: &RecordedCall) -> Vec<CredentialNeed> {
    let spec_needs: &[String] = call.started.spec.as_ref().map_or(&[], |s| &s.needs);
    call.facts
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
        .collect()
}

/// Where in the call's facts the host facts a replay puts back into the
/// timeline are (`cancel.requested`, `teardown.ran`: the host facts but the
/// call's start and end), found once per call instead of on every filed fact.
fn host_positions(call: &RecordedCall) -> Vec<usize> {
    call.facts
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            is_host_fact(&f.kind)
                && !matches!(f.kind, FactKind::CallStarted(_) | FactKind::CallEnded(_))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Facts the host files (not matched against the tool's facts).
fn is_host_fact(kind: &FactKind) -> bool {
    matches!(
        kind,
        FactKind::CallStarted(_)
            | FactKind::CallEnded(_)
            | FactKind::CancelRequested(_)
            | FactKind::TeardownRan(_)
            // Filed by the recorder's tripwire, not by the tool.
            | FactKind::RedactionTripped(_)
    ) || matches!(kind, FactKind::CallOutput(o) if o.stage.as_deref() == Some(reel_core::marker::RECEIPT_STAGE))
}

fn served_result(call: &RecordedCall) -> Result<Value, ToolError> {
    match call.ended().map(|e| &e.outcome) {
        Some(CallOutcome::Ok { result }) => Ok(result.clone()),
        Some(CallOutcome::Error {
            error,
            result: Some(result),
        }) => Err(ToolError::structured(error, result.clone())),
        Some(CallOutcome::Error { error, .. }) => Err(ToolError::Failed(error.clone())),
        Some(CallOutcome::Aborted { reason }) => Err(ContextError::Cancelled {
            reason: reason.clone(),
        }
        .into()),
        None => Err(ToolError::msg("the recorded call never ended")),
    }
}
