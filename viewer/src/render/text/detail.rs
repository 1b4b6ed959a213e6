//! The detail of each fact kind: what `reel show` prints after a fact's
//! kind (and the HTML page's detail panel and the LSP's hovers repeat).

use super::*;

impl TextRenderer {
    /// The style and the unescaped detail of `fact`, whose call's tool
    /// is `tool`.
    pub(super) fn detail(&self, fact: &Fact, tool: &str) -> (Style, String) {
        let plain = Style::new();
        match &fact.kind {
            FactKind::RunStarted(r) => {
                let mut d = format!("by {} {}", r.producer.name, r.producer.version);
                match &r.identity {
                    Some(id) => {
                        let _ = write!(d, "; identity {}", identity(id));
                    }
                    None => d.push_str("; no caller identity"),
                }
                if let Some(s) = &r.session_id {
                    let _ = write!(d, "; session {s}");
                }
                if !r.labels.is_empty() {
                    let _ = write!(d, "; labels {}", labels(&r.labels));
                }
                let scopes: Vec<_> = r.teardown_scopes.iter().map(|s| s.to_string()).collect();
                let _ = write!(d, "; teardown scopes [{}]", scopes.join(", "));
                (BOLD, d)
            }
            FactKind::CallStarted(c) => call_started(c),
            FactKind::CredentialRequested(c) => (plain, format!("{} ({})", c.need, mode(c.mode))),
            FactKind::CredentialResolved(c) => (
                GREEN,
                format!(
                    "{} ({}) fingerprint {}",
                    c.need,
                    mode(c.mode),
                    c.fingerprint.0
                ),
            ),
            FactKind::CredentialFailed(c) => {
                (RED, format!("{} ({}): {}", c.need, mode(c.mode), c.reason))
            }
            FactKind::CredentialRefused(c) => (YELLOW, format!("{}: {}", c.need, c.reason)),
            FactKind::ArtifactPut(a) => (
                plain,
                format!(
                    "{} {} {} B {}",
                    a.meta.id, a.meta.media_type, a.meta.size, a.meta.digest
                ),
            ),
            FactKind::ArtifactGet(a) => match &a.meta {
                Some(m) => (plain, format!("{} found, {} B", a.id, m.size)),
                None => (YELLOW, format!("{} not found", a.id)),
            },
            FactKind::ArtifactRefused(a) => (
                YELLOW,
                format!(
                    "{}: {}",
                    if a.op == ArtifactOp::Put {
                        "put"
                    } else {
                        "get"
                    },
                    a.reason
                ),
            ),
            FactKind::Progress(p) => (plain, self.templates.line(tool, &p.payload, p.count)),
            FactKind::ProgressDropped(d) => (
                YELLOW,
                format!(
                    "{} progress report{} dropped (the recorder's queue was full)",
                    d.count,
                    if d.count == 1 { "" } else { "s" }
                ),
            ),
            FactKind::RedactionTripped(t) => (
                RED,
                format!(
                    "{}: a secret ({}) in {} {} was scrubbed (missed by: {})",
                    t.point, t.encoding, t.fact, t.field, t.rule
                ),
            ),
            FactKind::Log(l) => log(l),
            FactKind::ElicitRequested(e) => (
                plain,
                format!(
                    "\"{}\" ({}{})",
                    e.message,
                    if e.mode == ElicitMode::Form {
                        "form"
                    } else {
                        "url"
                    },
                    e.ttl_ms
                        .map(|t| format!(", ttl {}", duration(t * 1_000_000)))
                        .unwrap_or_default()
                        + &e.url
                            .as_deref()
                            .map(|u| format!(", {u}"))
                            .unwrap_or_default()
                ),
            ),
            FactKind::ElicitRefused(e) => (YELLOW, format!("\"{}\": {}", e.message, e.reason)),
            FactKind::ElicitAnswered(e) => elicit_answered(e),
            FactKind::TeardownRegistered(t) => {
                let what = match (t.first, t.registrations) {
                    (true, _) => "first".to_owned(),
                    // Recorded before liveness was counted.
                    (false, 0) => "repeat (kept the first)".to_owned(),
                    (false, n) => {
                        format!("repeat, registration {n} (kept the first, liveness refreshed)")
                    }
                };
                (plain, format!("{} {} {what}", t.scope, t.key_hash))
            }
            FactKind::TeardownRefused(t) => (YELLOW, format!("{}: {}", t.scope, t.reason)),
            FactKind::TeardownRan(t) => teardown_ran(t),
            FactKind::Effect(e) => {
                let outcome = match &e.outcome {
                    EffectOutcome::Ok(v) => format!("ok {}", compact(v, 80)),
                    EffectOutcome::Err(m) => format!("error: {m}"),
                };
                (
                    plain,
                    format!("{} {} → {outcome}", e.name, compact(&e.request, 60)),
                )
            }
            FactKind::Clock(c) => (plain, timestamp(c.unix_nanos)),
            FactKind::Random(r) => (plain, format!("{:#018x}", r.value)),
            FactKind::CancelRequested(c) => (
                YELLOW,
                c.reason.clone().unwrap_or_else(|| "(no reason)".into()),
            ),
            FactKind::CallOutput(o) => {
                let mut d = String::new();
                if let Some(s) = &o.stage {
                    let _ = write!(d, "[{s}] ");
                }
                d.push_str(&compact(&o.value, 100));
                if let Some(n) = &o.note {
                    let _ = write!(d, " ({n})");
                }
                (plain, d)
            }
            FactKind::CallEnded(e) => call_ended(e),
            FactKind::RunEnded(e) => (BOLD, name(&e.status)),
            FactKind::ModelCalled(m) => model_called(m),
            FactKind::Unknown { kind, data } => unknown(kind, data, plain),
        }
    }
}

/// The kind `reel collect` gives a span it has no mapping for.
const OTEL_SPAN: &str = "otel.span";

/// A kind this reel does not know: a newer writer's, or a span `reel
/// collect` took in and kept as it came (known to be raw, said so).
fn unknown(kind: &str, data: &serde_json::Value, plain: Style) -> (Style, String) {
    if kind == OTEL_SPAN {
        return (
            plain,
            format!("(a span kept as it came) {}", compact(data, 100)),
        );
    }
    (
        YELLOW,
        format!(
            "(a kind this reel does not know; from a newer writer) {}",
            compact(data, 100)
        ),
    )
}

/// A model call: which model, its tokens and why it stopped.
fn model_called(m: &reel_core::fact::ModelCalled) -> (Style, String) {
    let mut d = format!(
        "{} {}",
        m.operation,
        m.response_model
            .as_deref()
            .or(m.model.as_deref())
            .unwrap_or("(model not reported)")
    );
    if let Some(p) = &m.provider {
        let _ = write!(d, " ({p})");
    }
    if let (Some(i), Some(o)) = (m.input_tokens, m.output_tokens) {
        let _ = write!(d, ", {i} tokens in, {o} out");
    }
    if !m.finish_reasons.is_empty() {
        let _ = write!(d, ", finished: {}", m.finish_reasons.join(", "));
    }
    match &m.error {
        Some(e) => {
            let _ = write!(d, ", error: {e}");
            (YELLOW, d)
        }
        None => (Style::new(), d),
    }
}

/// A call's start: its arguments, where it stands, what it declares.
fn call_started(c: &reel_core::fact::CallStarted) -> (Style, String) {
    let mut d = format!("▶ args {}", compact(&c.args, 100));
    if let Some(o) = &c.outside_run {
        let _ = write!(
            d,
            " (outside any run, by {} {}",
            o.producer.name, o.producer.version
        );
        match &o.identity {
            Some(id) => {
                let _ = write!(d, "; identity {}", identity(id));
            }
            None => d.push_str("; no caller identity"),
        }
        if let Some(s) = &o.session_id {
            let _ = write!(d, "; session {s}");
        }
        let scopes: Vec<_> = o.teardown_scopes.iter().map(|s| s.to_string()).collect();
        let _ = write!(d, "; teardown scopes [{}])", scopes.join(", "));
    }
    if let Some(p) = &c.parent_call {
        let _ = write!(d, " (child of {p})");
    }
    if c.iteration > 0 {
        let _ = write!(d, " · iteration {}", c.iteration);
    }
    if let Some(spec) = &c.spec {
        let _ = write!(d, " · {}", spec_summary(spec));
    }
    if c.mode == CallMode::Sync {
        d.push_str(" · sync");
    }
    if let Some(wanted) = &c.wanted {
        let names: Vec<&str> = wanted.keys().map(String::as_str).collect();
        let _ = write!(d, " · wanted [{}]", names.join(", "));
    }
    if let Some(id) = c.tool_id.as_deref().filter(|id| *id != c.tool_name) {
        let _ = write!(d, " · tool id {id}");
    }
    // Where the call came from: protocol, platform, client.
    let via: Vec<String> = [
        c.protocol.clone(),
        // A bare "unknown" reads as anything; it is the platform.
        c.platform.clone().map(|p| format!("platform {p}")),
        c.client_info.as_ref().map(|ci| match &ci.version {
            Some(v) => format!("{} {v}", ci.name),
            None => ci.name.clone(),
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !via.is_empty() {
        let _ = write!(d, " · via {}", via.join(", "));
    }
    if let Some(id) = &c.invocation_id {
        let _ = write!(d, " · invocation {id}");
    }
    (BOLD, d)
}

/// Labels as `key=value`, space-separated, in key order.
pub(crate) fn labels(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A log line, styled by its level.
fn log(l: &reel_core::fact::Log) -> (Style, String) {
    let mut d = name(&l.level);
    if let Some(s) = &l.subflow {
        let _ = write!(d, " [{s}]");
    }
    let text = match &l.data {
        Value::String(s) => cut(s, 120),
        other => compact(other, 120),
    };
    let _ = write!(d, " {text}");
    if !l.in_flight.is_empty() {
        // Filed under the session: it named no call, and several were in
        // flight (the record does not guess which sent it).
        let _ = write!(
            d,
            " · not tied to a call; in flight: {}",
            l.in_flight.join(", ")
        );
    }
    let style = if l.level <= Level::Error {
        RED
    } else if l.level == Level::Warning {
        YELLOW
    } else {
        Style::new()
    };
    (style, d)
}

/// An elicitation's answer.
fn elicit_answered(e: &reel_core::fact::ElicitAnswered) -> (Style, String) {
    let mut d = match &e.outcome {
        ElicitOutcome::Accept { content } => format!("accept {}", compact(content, 80)),
        ElicitOutcome::Decline => "decline".into(),
        ElicitOutcome::Cancel => "cancel".into(),
        ElicitOutcome::Timeout => "timeout".into(),
        ElicitOutcome::Error { message } => format!("error: {}", cut(message, 120)),
    };
    if !e.validation_errors.is_empty() {
        let _ = write!(d, "; invalid: {}", e.validation_errors.join("; "));
    }
    if e.pre_resolved {
        d.push_str(" (pre-resolved)");
    }
    (Style::new(), d)
}

/// A cleanup that ran: its outcome and how long the resource was kept
/// alive.
fn teardown_ran(t: &reel_core::fact::TeardownRan) -> (Style, String) {
    let (style, o) = match &t.outcome {
        TeardownOutcome::Ok => (Style::new(), "ok".to_string()),
        TeardownOutcome::Error { message } => (RED, format!("error: {message}")),
        TeardownOutcome::TimedOut => (RED, "timed out".to_string()),
    };
    let mut d = format!(
        "{} {} {o} in {}",
        t.scope,
        t.key_hash,
        duration(t.duration_ns)
    );
    // How many executes kept the resource alive, and when it
    // was last used (seed 000's liveness); nothing on facts
    // recorded before it was counted.
    let last = || match t.last_registered_at {
        0 => String::new(),
        at => format!(" at {}", timestamp(at)),
    };
    match t.registrations {
        0 => {}
        1 => {
            let _ = write!(d, "; registered once{}", last());
        }
        n => {
            let _ = write!(d, "; kept alive by {n} registrations, the last{}", last());
        }
    }
    (style, d)
}

/// A call's end: its outcome and duration.
fn call_ended(e: &reel_core::fact::CallEnded) -> (Style, String) {
    match &e.outcome {
        CallOutcome::Ok { result } => (
            GREEN,
            format!(
                "■ ok in {} → {}",
                duration(e.duration_ns),
                compact(result, 100)
            ),
        ),
        CallOutcome::Error { error, .. } => (
            RED,
            format!("■ error in {}: {error}", duration(e.duration_ns)),
        ),
        CallOutcome::Aborted { reason } => (
            YELLOW,
            format!(
                "■ aborted in {}{}",
                duration(e.duration_ns),
                reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        ),
    }
}
