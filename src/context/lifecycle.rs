//! The host's steps around a tool, shared by the recorder and the replayer:
//! [`before_tool`] (wants, input validation, needs) and [`after_tool`]
//! (respond's early exit becomes the call's result).

use super::*;
use crate::redact::artifact_ref;

/// What the host does after filing `call.started` and before the tool runs,
/// the same live and in replay:
///
/// 1. the spec (when the call has one) must be of the called tool;
/// 2. the input is validated against the spec's input schema: a rejected
///    input is [`ToolError::InvalidInput`], naming each failing JSON
///    pointer, and no credential is resolved;
/// 3. the declared needs are resolved, in order ([`resolve_declared`]):
///    the spec's, then `extra` (the host's for this call; a name declared
///    in both is resolved once).
///
/// `Ok` holds the declared credentials for [`ToolContext::new`]; on `Err`
/// the tool must not run, and the host ends the call with the error.
pub async fn before_tool(
    info: &CallInfo,
    backend: &Arc<dyn CallBackend>,
    extra: &[CredentialNeed],
    cancel: &CancelHandle,
) -> Result<Vec<Credential>, ToolError> {
    let started = &info.started;
    let mut needs: Vec<CredentialNeed> = Vec::new();
    if let Some(spec) = &started.spec {
        if spec.name != started.tool_name {
            return Err(ToolError::msg(format!(
                "the call of tool {:?} carries the spec of tool {:?}, so the tool did not run: give the call its own tool's spec",
                started.tool_name, spec.name
            )));
        }
        if let Err(errors) = spec.validate(&started.args) {
            return Err(ToolError::InvalidInput {
                tool: started.tool_name.clone(),
                unresolved: unresolved_wants(spec, &started.args),
                errors,
            });
        }
        needs.extend(spec.needs.iter().map(CredentialNeed::new));
    }
    for need in extra {
        if !needs.iter().any(|n| n.need == need.need) {
            needs.push(need.clone());
        }
    }
    resolve_declared(info, backend, &needs, cancel).await
}

/// The logger name of the record's flags of code that went on after
/// [`ToolContext::respond`] (`warning` logs, never delivered).
pub const AFTER_RESPOND_LOGGER: &str = "reel.respond";

/// The logger name of the count of uses of a context after its call
/// ended ([`ToolContext::close`]): a `warning` log, never delivered, that
/// the recorder files at the run's end (before `run.ended`; for a call
/// outside any run, before its `call.ended`), with no call, and data
/// `{"message", "refused": total, "calls": {call id: {capability: n}}}`.
pub const AFTER_END_LOGGER: &str = "reel.after_end";

/// What the host does with the tool's result before it ends the call, the
/// same live and in replay: when the tool responded
/// ([`ToolContext::respond`]), the call's result is the responded value;
/// a tool that returned anything but respond's early exit after
/// responding is flagged on the record (a `warning` log of logger
/// [`AFTER_RESPOND_LOGGER`] naming what it returned) and its return is
/// not the result. `ctx` is (a clone of) the context the tool ran with.
///
/// Then it ends the context's call ([`ToolContext::close`]): a clone that
/// outlives the call files nothing more. (A host whose tool panicked
/// calls `close` itself.)
///
/// Last, a result is checked against the spec's output schema, when it
/// declares one: a result off the schema is [`ToolError::InvalidOutput`],
/// naming each failing JSON pointer (seed 004's `outputSchema`; MCP sends
/// a result as `structuredContent`, which must match it).
pub fn after_tool(ctx: &ToolContext, result: Result<Value, ToolError>) -> Result<Value, ToolError> {
    let result = responded_result(ctx, result);
    ctx.close();
    let (Ok(value), Some(schema)) = (&result, ctx.spec().and_then(|s| s.output_schema.as_ref()))
    else {
        return result;
    };
    match crate::schema::validate_value(
        schema,
        value,
        "the tool's output schema",
        "the tool's spec",
    ) {
        Ok(()) => result,
        Err(errors) => Err(ToolError::InvalidOutput {
            tool: ctx.tool_name().into(),
            errors,
        }),
    }
}

fn responded_result(
    ctx: &ToolContext,
    result: Result<Value, ToolError>,
) -> Result<Value, ToolError> {
    let Some(value) = ctx.responded() else {
        return match result {
            Err(ToolError::Responded(_)) => Err(ToolError::msg(
                "the tool returned the early exit of another call's respond: respond on this call's own context",
            )),
            other => other,
        };
    };
    let returned = match result {
        Err(ToolError::Responded(_)) => return Ok(value),
        Ok(other) => json!({ "ok": other }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    ctx.flag_after_respond(json!({
        "message": "the tool went on after respond and returned something else; the call's result stays the responded value: return respond's early exit at once (`ctx.respond(value)?`)",
        "returned": returned,
    }));
    Ok(value)
}

/// The message of a caught panic (a tool's, for the record).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// The wanted arguments of `spec` that still hold a claim ticket in `args`.
pub(crate) fn unresolved_wants(spec: &ToolSpec, args: &Value) -> Vec<String> {
    spec.wants
        .iter()
        .filter(|w| args.get(w.as_str()).and_then(artifact_ref).is_some())
        .cloned()
        .collect()
}
