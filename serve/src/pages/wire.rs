//! `/runs/{id}/wire`: a proxy recording's wire view. Beside the calls,
//! the JSON-RPC traffic of each request in order: direction, time since
//! the run started and since the request, method, and what was sent.
//!
//! `reel mcp record` (the proxy, `reel_mcp::proxy`) records what each
//! message meant, not the message: a `tools/call` is a call (its args the
//! request's `arguments`, its result the `CallToolResult`),
//! `notifications/progress` a `progress` fact, `notifications/message` a
//! `log`, `elicitation/create` and its answer `elicit.*` facts, the
//! client's `notifications/cancelled` a `cancel.requested`; a message it
//! could not link is the call `mcp:unmatched`, which keeps the message.
//! JSON-RPC ids, exact bytes and framing are not kept. So this view
//! rebuilds each message from its fact and says so; nothing here is a
//! captured byte.

use reel_core::FactKind;
use serde_json::{json, Value};

use super::*;

/// The most facts of a run the wire view reads (it holds them).
const MAX_WIRE_FACTS: u64 = 250_000;

/// Client to server, or back.
const TO_SERVER: &str = "client → server";
const TO_CLIENT: &str = "server → client";

/// The message a fact of an MCP call stands for: (direction, method,
/// body). `None` for facts that are no message (the recorder's own).
fn message(fact: &Fact, tool: &str) -> Option<(&'static str, String, Value)> {
    let data = serde_json::to_value(fact).ok()?["data"].take();
    Some(match &fact.kind {
        FactKind::CallStarted(c) => match tool.strip_prefix("mcp:") {
            Some("unmatched") => {
                let from = c.args["from"].as_str().unwrap_or("");
                let dir = if from.contains("server") {
                    TO_CLIENT
                } else {
                    TO_SERVER
                };
                (dir, "(unmatched message)".into(), c.args["message"].clone())
            }
            Some(method) => (TO_SERVER, method.to_owned(), c.args.clone()),
            None => (
                TO_SERVER,
                "tools/call".into(),
                json!({ "name": tool, "arguments": c.args }),
            ),
        },
        FactKind::Progress(p) => (
            TO_CLIENT,
            "notifications/progress".into(),
            p.payload.clone(),
        ),
        FactKind::Log(_) => (TO_CLIENT, "notifications/message".into(), data),
        FactKind::ElicitRequested(_) => (TO_CLIENT, "elicitation/create".into(), data),
        FactKind::ElicitAnswered(_) => (TO_SERVER, "(response to elicitation/create)".into(), data),
        FactKind::CancelRequested(_) => (TO_SERVER, "notifications/cancelled".into(), data),
        FactKind::CallEnded(e) => (
            TO_CLIENT,
            "(response)".into(),
            serde_json::to_value(&e.outcome).unwrap_or(Value::Null),
        ),
        _ => return None,
    })
}

/// `/runs/{id}/wire`.
pub(crate) async fn wire(console: Access, Path(run_id): Path<String>) -> Response {
    let c = console.clone();
    let id = run_id.clone();
    let read = blocking(move || {
        c.run_facts(&id, MAX_WIRE_FACTS, "shows on a wire view: see `reel show`")
            .map_err(read_error)
    })
    .await;
    let (record, facts) = match read {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    let body = render(&record, &facts);
    Html(page(
        &format!("reel: wire view of {run_id}"),
        "wire",
        console.stale(),
        &body,
    ))
    .into_response()
}

fn render(record: &RunRecord, facts: &[Fact]) -> String {
    let timeline = Timeline::build(facts);
    let href = run_href(&record.run_id);
    let mut body = format!(
        "<main class=\"panel\" id=\"wire\"><h1><span class=\"muted\">MCP wire view of</span> \
         <a class=\"mono\" href=\"{}\">{}</a></h1>",
        escape(&href),
        escape(&record.run_id)
    );
    match record.labels.get("mcp.transport") {
        Some(t) => {
            let _ = write!(
                body,
                "<p class=\"muted\">recorded by <code>reel mcp record</code> over {}{}</p>",
                escape(t),
                record
                    .labels
                    .get("mcp.command")
                    .map(|c| format!(" · server <code>{}</code>", escape(c)))
                    .unwrap_or_default()
            );
        }
        None => body.push_str(
            "<p class=\"stale\">This run was not recorded by <code>reel mcp record</code> \
             (it has no <code>mcp.transport</code> label): its calls are shown as the messages \
             they would be.</p>",
        ),
    }
    body.push_str(
        "<p class=\"note\" id=\"wire-note\">Rebuilt from the recorded facts: the proxy records \
         what each JSON-RPC message meant (a <code>tools/call</code> is a call, a progress \
         notification a <code>progress</code> fact, …), not the message itself. JSON-RPC ids, \
         exact bytes and framing are not kept; a message it could not link to a request is the \
         call <code>mcp:unmatched</code>, which keeps the message as sent.</p>\
         <div class=\"wire-grid\"><nav class=\"wire-calls\"><h2>Calls</h2><ol>",
    );
    for c in &timeline.calls {
        let _ = write!(
            body,
            "<li><a href=\"#req-{}\"><span class=\"mono\">{}</span> <b>{}</b></a> \
             <span class=\"muted\">{}</span></li>",
            escape(&fragment(&c.call_id)),
            escape(&c.call_id),
            escape(&c.tool),
            escape(&c.duration_ns.map(duration).unwrap_or_else(|| "—".into()))
        );
    }
    body.push_str("</ol></nav><div class=\"wire-messages\"><h2>Messages, grouped by request</h2>");
    for c in &timeline.calls {
        let _ = write!(
            body,
            "<section class=\"wire-group\" id=\"req-{}\" data-call=\"{}\"><h3>request \
             <a class=\"mono\" href=\"{}#call={}\">{}</a> <b>{}</b></h3><ol class=\"wire-list\">",
            escape(&fragment(&c.call_id)),
            escape(&c.call_id),
            escape(&href),
            escape(&fragment(&c.call_id)),
            escape(&c.call_id),
            escape(&c.tool)
        );
        for f in facts
            .iter()
            .filter(|f| f.call.as_deref() == Some(&c.call_id))
        {
            let Some((dir, method, content)) = message(f, &c.tool) else {
                continue;
            };
            let since = f.offset.saturating_sub(c.started_offset);
            let _ = write!(
                body,
                "<li class=\"msg {}\" data-seq=\"{}\" data-dir=\"{}\" data-method=\"{}\">\
                 <div class=\"msg-head\"><a class=\"mono\" href=\"{}#seq-{}\">#{}</a> \
                 <span class=\"mono muted\">+{} (request +{})</span> <span class=\"dir\">{dir}</span> \
                 <b>{}</b></div><pre class=\"raw\">{}</pre></li>",
                if dir == TO_SERVER { "to-server" } else { "to-client" },
                f.seq,
                if dir == TO_SERVER { "to-server" } else { "to-client" },
                escape(&method),
                escape(&href),
                f.seq,
                f.seq,
                escape(&duration(f.offset)),
                escape(&duration(since)),
                escape(&method),
                escape(&serde_json::to_string_pretty(&content).unwrap_or_default())
            );
        }
        body.push_str("</ol></section>\n");
    }
    body.push_str("</div></div></main>");
    body
}
