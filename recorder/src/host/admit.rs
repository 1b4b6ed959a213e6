//! What is refused before anything of a call is recorded.

use std::sync::atomic::Ordering;

use reel::context::ToolError;
use reel::fact::{CallStarted, OutsideRun};

use super::lock;
use super::run::{Caller, Run};

/// What is refused before anything of a call is recorded: a call of a run
/// that ended, a `wanted` beyond the declared wants, a host-chosen call id
/// the run holds already (claimed here when it is free).
pub(super) fn admit(run: &Run, started: &mut CallStarted, host_id: bool) -> Result<(), ToolError> {
    if run.inner.ended.load(Ordering::SeqCst) {
        return Err(ToolError::msg(format!(
            "run {:?} has already ended: start a new run",
            run.id()
        )));
    }
    host_wanted(started)?;
    if host_id {
        run.claim_call_id(&started.call_id)
            .map_err(ToolError::msg)?;
    }
    Ok(())
}

/// Holds the host's own `wanted` ([`CallBuilder::wanted`]) to seed 000's
/// rule: present only for declared wants, and never empty.
fn host_wanted(started: &mut CallStarted) -> Result<(), ToolError> {
    let Some(wanted) = &started.wanted else {
        return Ok(());
    };
    if wanted.is_empty() {
        started.wanted = None;
        return Ok(());
    }
    let declared = started
        .spec
        .as_ref()
        .map(|s| s.wants.as_slice())
        .unwrap_or_default();
    let undeclared: Vec<&String> = wanted.keys().filter(|k| !declared.contains(k)).collect();
    if undeclared.is_empty() {
        // A ticket the host says it resolved must not still be in the
        // argument: the tool would get the ticket, the record say data.
        let unresolved: Vec<&String> = wanted
            .keys()
            .filter(|k| reel::redact::artifact_ref(&started.args[k.as_str()]).is_some())
            .collect();
        if unresolved.is_empty() {
            return Ok(());
        }
        return Err(ToolError::msg(format!(
            "the call of tool {:?} names wanted argument(s) {unresolved:?} in `.wanted(..)` whose argument still holds a claim ticket: `wanted` names the tickets the host resolved into the arguments' data (seed 000); put the artifact's data in the argument, or leave it out of `.wanted(..)` and let the spec's want resolve it; the tool did not run and nothing of this call was recorded",
            started.tool_name
        )));
    }
    Err(ToolError::msg(format!(
        "the call of tool {:?} names wanted argument(s) {undeclared:?} that its spec does not declare (it declares {declared:?}): `wanted` holds the claim tickets of the tool's declared wants that resolved (seed 000); declare them with `ToolSpec::wants` on the call's spec, or leave them out of `.wanted(..)`; the tool did not run and nothing of this call was recorded",
        started.tool_name
    )))
}

/// A call outside any run heads its own stream: its `call.started` says
/// what a `run.started` would, and its id is the stream's end.
pub(super) fn head_outside_stream(
    run: &Run,
    caller: Caller,
    started: &mut CallStarted,
) -> Result<(), ToolError> {
    let Some(root) = &run.inner.outside else {
        return Ok(());
    };
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
    Ok(())
}
