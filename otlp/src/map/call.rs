//! A call's span: what its request is (an MCP method or a tool call),
//! the MCP session it is in, and its attributes.

use super::*;

/// What a recorded call was, for its span's name and attributes.
///
/// A call recorded from MCP (`protocol` = `mcp`) follows the
/// OpenTelemetry MCP conventions (open-telemetry/semantic-conventions-genai,
/// `docs/gen-ai/mcp.md` and `model/mcp/spans.yaml`, `model/mcp/common.yaml`):
/// `mcp.method.name` is the JSON-RPC method, and the span is named
/// `{mcp.method.name} {target}`, the target being `gen_ai.tool.name` when
/// there is one, else `{mcp.method.name}` alone (`tools/call get-weather`,
/// `initialize`). A `tools/call` span is also the GenAI `execute_tool`
/// span ("MCP tool call execution spans are compatible with GenAI
/// execute_tool spans"; one span, not two), so it keeps
/// `gen_ai.operation.name` = `execute_tool` and the `gen_ai.tool.*`
/// attributes; other methods carry neither ("SHOULD be set to
/// `execute_tool` when the operation describes a tool call and SHOULD NOT
/// be set otherwise"). Any other call is a GenAI `execute_tool
/// {gen_ai.tool.name}` span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Request {
    /// A tool call not recorded from MCP.
    Tool { tool: String },
    /// An MCP request: `method`, and for a `tools/call` its `tool`.
    Mcp {
        method: String,
        tool: Option<String>,
    },
}

impl Request {
    /// `reel mcp record` records `initialize` and the first `tools/list`
    /// as calls named `mcp:{method}` (see `reel_mcp::proxy`), and every
    /// `tools/call` as a call of the tool's name. An MCP tool name cannot
    /// be mistaken for the first: MCP tool names hold no `:`.
    pub(super) fn of(c: &CallStarted) -> Request {
        if c.protocol.as_deref() != Some("mcp") {
            return Request::Tool {
                tool: c.tool_name.clone(),
            };
        }
        match c.tool_name.strip_prefix("mcp:") {
            Some(method) => Request::Mcp {
                method: method.to_owned(),
                tool: None,
            },
            None => Request::Mcp {
                method: "tools/call".into(),
                tool: Some(c.tool_name.clone()),
            },
        }
    }

    pub(super) fn span_name(&self) -> String {
        match self {
            Request::Tool { tool } => format!("execute_tool {tool}"),
            Request::Mcp {
                method,
                tool: Some(tool),
            } => format!("{method} {tool}"),
            Request::Mcp { method, tool: None } => method.clone(),
        }
    }

    pub(super) fn is_tool_call(&self) -> bool {
        !matches!(self, Request::Mcp { tool: None, .. })
    }

    pub(super) fn is_mcp(&self) -> bool {
        matches!(self, Request::Mcp { .. })
    }
}

/// What a stream's record says of its MCP session, for each MCP span of
/// the stream. A field the record does not hold is `None`, and its
/// attribute is left out (absent, never empty).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct McpSession {
    /// `network.transport`, and `network.protocol.name` when it is HTTP,
    /// from the `mcp.transport` label `reel mcp record` gives its runs:
    /// `stdio` is `pipe`, `streamable-http` is `tcp` over `http` ("SHOULD
    /// be set to `tcp` or `quic` if the transport protocol is HTTP. It
    /// SHOULD be set to `pipe` if the transport is stdio."). `McpHost`
    /// records no transport for the calls it serves, so theirs is absent.
    transport: Option<(&'static str, Option<&'static str>)>,
    /// The `Mcp-Session-Id` of a proxied streamable HTTP session (the
    /// `mcp.session` label). Stdio has no session id.
    session: Option<String>,
    /// `mcp.protocol.version`: the version the server answered
    /// `initialize` with (the `protocolVersion` of the recorded
    /// `mcp:initialize` call's result). A session without a recorded
    /// `initialize` (2026-07-28 names the version in each request's
    /// `_meta`, which is not recorded; `McpHost` records no version)
    /// leaves it out.
    version: Option<String>,
}

impl McpSession {
    pub(super) fn of(record: &RunRecord, facts: &[Fact]) -> McpSession {
        let transport = match record.labels.get("mcp.transport").map(String::as_str) {
            Some("stdio") => Some(("pipe", None)),
            Some("streamable-http") => Some(("tcp", Some("http"))),
            // Another label value says nothing this mapping knows.
            _ => None,
        };
        let initialize = mcp_initialize(facts);
        let version = facts
            .iter()
            .filter(|f| initialize.is_some() && f.call.as_deref() == initialize)
            .find_map(|f| match &f.kind {
                FactKind::CallEnded(CallEnded {
                    outcome: CallOutcome::Ok { result },
                    ..
                }) => result.get("protocolVersion").and_then(Value::as_str),
                _ => None,
            })
            .and_then(protocol_version)
            .map(str::to_owned);
        McpSession {
            transport,
            session: record.labels.get("mcp.session").cloned(),
            version,
        }
    }
}

/// The call id of the stream's first recorded MCP `initialize`, whose
/// result names the session's protocol version for every span of the
/// stream (live export keeps its facts while the stream is open).
pub(crate) fn mcp_initialize(facts: &[Fact]) -> Option<&str> {
    facts.iter().find_map(|f| match &f.kind {
        FactKind::CallStarted(c)
            if c.protocol.as_deref() == Some("mcp") && c.tool_name == "mcp:initialize" =>
        {
            f.call.as_deref()
        }
        _ => None,
    })
}

/// `v` when it has the form of an MCP protocol version (`YYYY-MM-DD`).
/// The version is read from a recorded result, which is content: only
/// that form is exported without `--content`, never other text.
pub(super) fn protocol_version(v: &str) -> Option<&str> {
    let b = v.as_bytes();
    let shape = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
    shape.then_some(v)
}

/// The code of a proxied call's JSON-RPC error: `reel mcp record` ends a
/// call answered with a JSON-RPC error with the error `json-rpc error
/// <code>: <message>`. `None` when `error` is not one (the call failed
/// otherwise); `Some(None)` when its code is not an integer.
pub(super) fn json_rpc_error(error: &str) -> Option<Option<i64>> {
    let rest = error.strip_prefix("json-rpc error ")?;
    let code = rest.split_once(':').map_or(rest, |(code, _)| code);
    Some(code.trim().parse().ok())
}

/// The attribute of a call's content `what` (`arguments`, `result`):
/// `gen_ai.tool.call.*` for a tool call, `reel.call.*` for another MCP
/// request (`initialize`'s params are no tool's arguments).
pub(super) fn content_key(tool_call: bool, what: &str) -> &'static str {
    match (tool_call, what) {
        (true, "arguments") => "gen_ai.tool.call.arguments",
        (true, _) => "gen_ai.tool.call.result",
        (false, "arguments") => "reel.call.arguments",
        (false, _) => "reel.call.result",
    }
}

/// A call's attributes; `run_session` is the session of the run the call
/// is in (a call outside any run names its own), `mcp` what the stream
/// says of its MCP session.
pub(super) fn call_attributes(
    c: &CallStarted,
    request: &Request,
    run_session: Option<&str>,
    mcp: &McpSession,
    options: &Options,
) -> Vec<KeyValue> {
    let tool_call = request.is_tool_call();
    let mut a = Vec::new();
    if tool_call {
        a.extend([
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", c.tool_name.clone()),
            s(
                "gen_ai.tool.call.id",
                c.invocation_id.clone().unwrap_or_else(|| c.call_id.clone()),
            ),
            s("gen_ai.tool.type", "function"),
        ]);
    }
    a.push(s("reel.call.id", c.call_id.clone()));
    if let Some(d) = c.spec.as_ref().and_then(|s| s.description.clone()) {
        if tool_call {
            a.push(s("gen_ai.tool.description", d));
        }
    }
    if let Some(p) = &c.parent_call {
        a.push(s("reel.call.parent", p.clone()));
    }
    if c.iteration > 0 {
        a.push(int("reel.call.iteration", i64::from(c.iteration)));
    }
    if let Some(p) = &c.platform {
        a.push(s("reel.platform", p.clone()));
    }
    if let Some(ci) = &c.client_info {
        a.push(s("reel.client.name", ci.name.clone()));
    }
    let session = match &c.outside_run {
        Some(o) => o.session_id.clone(),
        None => run_session.map(str::to_owned),
    };
    if let Some(o) = &c.outside_run {
        a.push(s("reel.outside_run.key", o.key.clone()));
        identity_attributes(&mut a, o.identity.as_ref(), None);
    }
    match request {
        Request::Mcp { method, .. } => {
            a.push(s("mcp.method.name", method.clone()));
            // The proxied HTTP session's id, else the session the host
            // named (`McpHost`: the `Mcp-Session-Id`); none over stdio.
            if let Some(session) = mcp.session.clone().or(session) {
                a.push(s("mcp.session.id", session));
            }
            if let Some(v) = &mcp.version {
                a.push(s("mcp.protocol.version", v.clone()));
            }
            if let Some((transport, protocol)) = mcp.transport {
                a.push(s("network.transport", transport));
                if let Some(p) = protocol {
                    a.push(s("network.protocol.name", p));
                }
            }
            // The JSON-RPC request id, when the host recorded one as a
            // label (`McpHost` does; `reel mcp record` does not yet).
            if let Some(id) = c
                .outside_run
                .as_ref()
                .and_then(|o| o.labels.get("jsonrpc.request.id"))
            {
                a.push(s("jsonrpc.request.id", id.clone()));
            }
        }
        Request::Tool { .. } => {
            if let Some(p) = &c.protocol {
                a.push(s("reel.protocol", p.clone()));
            }
        }
    }
    if options.content {
        a.push(json(content_key(tool_call, "arguments"), &c.args));
    }
    a
}
