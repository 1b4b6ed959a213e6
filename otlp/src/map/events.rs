//! Span events: one per fact other than the span boundaries.

use super::*;

pub(super) fn event(name: &str, t: u64, attributes: Vec<KeyValue>) -> Event {
    Event {
        time_unix_nano: t,
        name: name.into(),
        attributes,
        dropped_attributes_count: 0,
    }
}

/// The span event of one fact other than the span boundaries; `None` for
/// facts no trace viewer needs (clock and random reads).
pub(super) fn fact_event(
    kind: &FactKind,
    t: u64,
    tool: Option<&str>,
    options: &Options,
) -> Option<Event> {
    let c = options.content;
    let name = kind.name();
    let mut a = Vec::new();
    match kind {
        FactKind::CredentialRequested(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.mode", f.mode.as_str()));
        }
        FactKind::CredentialResolved(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.mode", f.mode.as_str()));
            a.push(s("reel.credential.fingerprint", f.fingerprint.0.clone()));
        }
        FactKind::CredentialFailed(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.reason", f.reason.clone()));
        }
        FactKind::CredentialRefused(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.reason", f.reason.clone()));
        }
        FactKind::ArtifactPut(f) => artifact_meta(&mut a, &f.meta),
        FactKind::ArtifactGet(f) => match &f.meta {
            Some(m) => artifact_meta(&mut a, m),
            None => a.push(s("reel.artifact.id", f.id.clone())),
        },
        FactKind::ArtifactRefused(f) => {
            a.push(s("reel.artifact.op", f.op.as_str()));
            a.push(s("reel.artifact.reason", f.reason.clone()));
        }
        FactKind::Progress(f) => {
            a.push(int("reel.progress.count", f.count as i64));
            a.push(s(
                "reel.progress.line",
                reel_core::display::progress_line(tool.unwrap_or("?"), &f.payload, f.count),
            ));
            if c {
                a.push(json("reel.progress.payload", &f.payload));
            }
        }
        FactKind::ProgressDropped(f) => a.push(int("reel.progress.dropped", f.count as i64)),
        FactKind::RedactionTripped(f) => {
            a.push(s("reel.redaction.point", f.point.clone()));
            a.push(s("reel.redaction.fact", f.fact.clone()));
            a.push(s("reel.redaction.field", f.field.clone()));
            a.push(s("reel.redaction.encoding", f.encoding.clone()));
            a.push(s("reel.redaction.rule", f.rule.clone()));
        }
        FactKind::Log(f) => {
            a.push(s("log.level", f.level.as_str()));
            if let Some(l) = &f.logger {
                a.push(s("reel.log.logger", l.clone()));
            }
            if c {
                a.push(json("reel.log.data", &f.data));
            }
        }
        FactKind::ElicitRequested(f) => {
            a.push(s("reel.elicit.mode", f.mode.as_str()));
            if c {
                a.push(s("reel.elicit.message", f.message.clone()));
            }
        }
        FactKind::ElicitAnswered(f) => {
            a.push(s("reel.elicit.outcome", f.outcome.as_str()));
            if !f.validation_errors.is_empty() {
                a.push(int(
                    "reel.elicit.validation_errors",
                    f.validation_errors.len() as i64,
                ));
            }
            if c {
                if let ElicitOutcome::Accept { content } = &f.outcome {
                    a.push(json("reel.elicit.content", content));
                }
            }
        }
        FactKind::ElicitRefused(f) => {
            a.push(s("reel.elicit.mode", f.mode.as_str()));
            a.push(s("reel.elicit.reason", f.reason.clone()));
        }
        FactKind::TeardownRegistered(f) => {
            a.push(s("reel.teardown.scope", f.scope.as_str()));
            a.push(boolean("reel.teardown.first", f.first));
        }
        FactKind::TeardownRefused(f) => {
            a.push(s("reel.teardown.scope", f.scope.as_str()));
            a.push(s("reel.teardown.reason", f.reason.clone()));
        }
        FactKind::TeardownRan(f) => {
            a.push(s("reel.teardown.scope", f.scope.as_str()));
            a.push(s("reel.teardown.outcome", f.outcome.as_str()));
            a.push(int("reel.teardown.duration_ns", f.duration_ns as i64));
            if let (true, TeardownOutcome::Error { message }) = (c, &f.outcome) {
                a.push(s("reel.teardown.error", message.clone()));
            }
        }
        FactKind::Effect(f) => {
            a.push(s("reel.effect.name", f.name.clone()));
            a.push(s(
                "reel.effect.outcome",
                match f.outcome {
                    EffectOutcome::Ok(_) => "ok",
                    EffectOutcome::Err(_) => "error",
                },
            ));
            if c {
                a.push(json("reel.effect.request", &f.request));
            }
        }
        FactKind::CancelRequested(f) => {
            if let Some(r) = &f.reason {
                a.push(s("reel.cancel.reason", r.clone()));
            }
        }
        FactKind::CallOutput(f) => {
            if let Some(stage) = &f.stage {
                a.push(s("reel.output.stage", stage.clone()));
            }
            if c {
                a.push(json("reel.output.value", &f.value));
            }
        }
        FactKind::ModelCalled(f) => model_called(&mut a, f, c),
        FactKind::Clock(_) | FactKind::Random(_) => return None,
        FactKind::Unknown { .. } => {}
        FactKind::RunStarted(_)
        | FactKind::RunEnded(_)
        | FactKind::CallStarted(_)
        | FactKind::CallEnded(_) => return None,
    }
    Some(event(name, t, a))
}

/// A model call's attributes, by the GenAI conventions' names (the
/// messages only with content).
fn model_called(a: &mut Vec<KeyValue>, f: &reel_core::fact::ModelCalled, c: bool) {
    a.push(s("gen_ai.operation.name", f.operation.clone()));
    let strings = [
        ("gen_ai.provider.name", &f.provider),
        ("gen_ai.request.model", &f.model),
        ("gen_ai.response.model", &f.response_model),
        ("error.type", &f.error),
    ];
    for (key, value) in strings {
        if let Some(v) = value {
            a.push(s(key, v.clone()));
        }
    }
    let tokens = [
        ("gen_ai.usage.input_tokens", f.input_tokens),
        ("gen_ai.usage.output_tokens", f.output_tokens),
    ];
    for (key, n) in tokens {
        if let Some(n) = n {
            a.push(int(key, n.min(i64::MAX as u64) as i64));
        }
    }
    if !f.finish_reasons.is_empty() {
        a.push(json(
            "gen_ai.response.finish_reasons",
            &Value::from(f.finish_reasons.clone()),
        ));
    }
    if c {
        let content = [
            ("gen_ai.input.messages", &f.input),
            ("gen_ai.output.messages", &f.output),
        ];
        for (key, value) in content {
            if let Some(v) = value {
                a.push(json(key, v));
            }
        }
    }
}

pub(super) fn artifact_meta(a: &mut Vec<KeyValue>, m: &reel_core::fact::ArtifactMeta) {
    a.push(s("reel.artifact.id", m.id.clone()));
    a.push(s("reel.artifact.digest", m.digest.clone()));
    a.push(int("reel.artifact.size", m.size as i64));
    a.push(s("reel.artifact.media_type", m.media_type.clone()));
}
