//! The wire's findings: what the proxy could not link (kept as calls
//! `mcp:unmatched`), what it refused (`mcp:refused`), and requests the
//! session ended without an answer to.

use reel::fact::CallOutcome;
use serde_json::Value;

use super::{Call, Finding, Rule};
use crate::proxy::link::{NEVER_ANSWERED, REFUSED, UNMATCHED};

/// How many characters of a recorded line a finding quotes.
const QUOTED: usize = 80;

/// Whether `outcome` is the proxy's end of a request the session ended
/// without an answer to.
pub(super) fn unanswered(outcome: &CallOutcome) -> bool {
    matches!(outcome, CallOutcome::Error { error, .. } if error.contains(NEVER_ANSWERED))
}

/// Every wire finding of `calls`, of a session over stdio or not (over
/// streamable HTTP: a body or an event is where a line would be).
pub(super) fn findings(calls: &[Call], stdio: bool) -> Vec<Finding> {
    calls
        .iter()
        .filter_map(|c| match c.tool.as_str() {
            UNMATCHED => Some(unmatched(c, stdio)),
            REFUSED => Some(refused(c)),
            _ => never_answered(c),
        })
        .collect()
}

/// A progress fact filed on `call` after its end (at `seq`).
pub(super) fn progress_after(call: &Call, seq: u64) -> Finding {
    Finding {
        rule: Rule::ProgressAfterResult,
        seq,
        call: Some(call.id.clone()),
        tool: call.is_tool_call().then(|| call.tool.clone()),
        what: format!("progress for `{}` came after its result", call.tool),
        fix: PROGRESS_FIX.into(),
    }
}

const PROGRESS_FIX: &str = "send every notifications/progress of a request before its response: \
     a client drops the token once it has the result";

fn never_answered(c: &Call) -> Option<Finding> {
    let answered = match &c.end {
        None => false,
        Some((_, _, outcome)) => !unanswered(outcome),
    };
    if answered {
        return None;
    }
    let request = match c.tool.strip_prefix("mcp:") {
        Some(method) => format!("`{method}`"),
        None => format!("`tools/call` of `{}`", c.tool),
    };
    Some(Finding {
        rule: Rule::NeverAnswered,
        seq: c.end.as_ref().map_or(c.seq, |(seq, _, _)| *seq),
        call: Some(c.id.clone()),
        tool: c.is_tool_call().then(|| c.tool.clone()),
        what: format!("the server never answered the {request} (the session ended first)"),
        fix: "answer every request, with its result or a JSON-RPC error; a client waits for \
              each until it times out"
            .into(),
    })
}

fn refused(c: &Call) -> Finding {
    let why = match &c.end {
        Some((_, _, CallOutcome::Error { error, .. })) => error.clone(),
        _ => "refused".into(),
    };
    Finding {
        rule: Rule::Refused,
        seq: c.seq,
        call: Some(c.id.clone()),
        tool: None,
        what: format!("the proxy refused a request of the client, not forwarded: {why}"),
        fix: "send one JSON-RPC message per POST, with Mcp-Method and Mcp-Name headers that \
              say what its body says"
            .into(),
    }
}

/// A message the proxy could not link: what it was, by its shape.
fn unmatched(c: &Call, stdio: bool) -> Finding {
    let from = c.args.get("from").and_then(Value::as_str).unwrap_or("peer");
    let message = c.args.get("message").cloned().unwrap_or(Value::Null);
    let finding = |rule: Rule, what: String, fix: &str| Finding {
        rule,
        seq: c.seq,
        call: Some(c.id.clone()),
        tool: None,
        what,
        fix: fix.into(),
    };
    if let Value::String(line) = &message {
        let (stream, fix) = if !stdio {
            (
                "the HTTP stream (a body or an event)",
                "send only JSON-RPC messages in request and response bodies and in SSE events",
            )
        } else if from == "server" {
            (
                "its standard output",
                "write logs and banners to standard error: standard output carries MCP \
                 messages only, one JSON object per line",
            )
        } else {
            (
                "the server's standard input",
                "the client must write MCP messages only, one JSON object per line",
            )
        };
        return finding(
            Rule::NotJson,
            format!(
                "the {from} wrote a line that is not JSON on {stream}: {}",
                quoted(line)
            ),
            fix,
        );
    }
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id");
    match (method, id) {
        (Some(m), Some(id)) if m.starts_with("notifications/") => finding(
            Rule::NotificationWithId,
            format!("the {from} sent the notification `{m}` with an id ({id})"),
            "send notifications without an id: a message with an id is a request, which the \
             other side must answer",
        ),
        (Some("notifications/progress"), None) => {
            let token = message
                .pointer("/params/progressToken")
                .map_or_else(|| "none".to_owned(), Value::to_string);
            match c.args.get("after_result_of").and_then(Value::as_str) {
                Some(call) => Finding {
                    call: Some(call.to_owned()),
                    ..finding(
                        Rule::ProgressAfterResult,
                        format!(
                            "the {from} sent progress on token {token} after the call's result \
                             (the message is kept as call {})",
                            c.id
                        ),
                        PROGRESS_FIX,
                    )
                },
                None => finding(
                    Rule::StrayProgress,
                    format!(
                        "the {from} sent progress on token {token}, which no request in flight \
                         carries"
                    ),
                    "send progress only on the progressToken of a request still in flight",
                ),
            }
        }
        (None, Some(id)) => {
            let asker = if from == "server" { "client" } else { "server" };
            finding(
                Rule::UnaskedAnswer,
                format!(
                    "the {from} answered id {id}, which no request of the {asker} was waiting for"
                ),
                "answer each request once, with the id it came with",
            )
        }
        _ => {
            let why = match &c.end {
                Some((_, _, CallOutcome::Error { error, .. })) => error.clone(),
                _ => format!("a message from the {from} no call could take"),
            };
            finding(Rule::Unmatched, why, "see the message with `reel show RUN`")
        }
    }
}

/// A recorded line as a finding quotes it: JSON-quoted, cut.
fn quoted(line: &str) -> String {
    match line.char_indices().nth(QUOTED) {
        None => format!("{line:?}"),
        Some((at, _)) => format!("{:?}…", &line[..at]),
    }
}
