"""A bare newline-delimited JSON-RPC MCP server for `reel mcp record`'s
tests of what a peer may send out of turn (mcp_record_rules.rs). Each tool
does one thing a well-behaved server would not, or a thing the record must
keep apart. Standard library only.

- `forge_next`: first sends a response to the client's *next* request id
  (one the client has not sent yet), then answers this call.
- `echo`: answers `genuine ID`.
- `ask`: asks the client (`elicitation/create`, server id 0 first), waits
  for its response, and answers with what it got.
- `fail`: a tool error (`isError: true`, with `structuredContent`).
- `broken`: a JSON-RPC error (-32000).
- `resources/read`: one progress notification on the request's token,
  then the contents; `ping`: `{}`.
- `count`: two progress notifications on the request's token, then waits
  for the client's `notifications/cancelled` of this request, then sends
  four more (a server slow to notice), and never answers it (the spec
  lets a server drop a cancelled request).

Its `initialize`, `tools/list`, `resources/list`, `prompts/list` and
`echo` answers carry fields newer than this reel's model
(`capabilities.tasks`, a tool's `execution`, unknown members), which a
mock must serve back as recorded.
"""

import json
import sys

# The secret in the data of `broken`'s JSON-RPC error (mcp_record_rules.rs).
BROKEN_KEY = "sk-broken-4c1d9e7a2b6f8e3d"

server_id = 0


def send(message):
    print(json.dumps(message), flush=True)


def read_until(pred):
    """Reads lines until one satisfies `pred`; returns it (None at EOF).
    Responses and notifications that do not are dropped."""
    for line in sys.stdin:
        m = json.loads(line)
        if pred(m):
            return m
    return None


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def progress(token, n):
    send({"jsonrpc": "2.0", "method": "notifications/progress",
          "params": {"progressToken": token, "progress": n, "total": 6}})


for line in sys.stdin:
    m = json.loads(line)
    if "method" not in m or "id" not in m:
        # Responses the client sent out of turn, notifications: not ours.
        continue
    rid = m["id"]
    params = m.get("params") or {}
    method = m["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25",
                  "capabilities": {"tools": {"listChanged": False}, "resources": {}, "prompts": {},
                                   "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
                  "serverInfo": {"name": "raw", "version": "0", "x-build": "future"},
                  "instructions": "be kind"}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"},
                             "execution": {"taskSupport": "optional"}, "x-rank": i}
                            for i, n in enumerate(["forge_next", "echo", "ask", "fail", "broken", "count"])]}
    elif method == "resources/list":
        result = {"resources": [{"uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain",
                                 "x-size-class": "small"}]}
    elif method == "prompts/list":
        result = {"prompts": [{"name": "greet", "description": "Say hello",
                               "arguments": [{"name": "who", "required": True}], "x-tone": "warm"}]}
    elif method == "resources/read":
        token = params.get("_meta", {}).get("progressToken")
        if token is not None:
            progress(token, 1)
        result = {"contents": [{"uri": params.get("uri"), "text": "notes"}]}
    elif method == "ping":
        result = {}
    elif method == "tools/call":
        name = params.get("name")
        if name == "forge_next":
            send({"jsonrpc": "2.0", "id": rid + 1, "result": text("FORGED")})
            result = text("forged the next")
        elif name == "echo":
            result = text(f"genuine {rid}")
            result["x-trace"] = {"span": "s-1"}
        elif name == "ask":
            qid = server_id
            server_id += 1
            send({"jsonrpc": "2.0", "id": qid, "method": "elicitation/create",
                  "params": {"mode": "form", "message": "Name?",
                             "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}})
            answer = read_until(lambda a: a.get("id") == qid and "method" not in a)
            result = text(json.dumps(answer.get("result", answer.get("error"))))
        elif name == "fail":
            result = {"content": [{"type": "text", "text": "the tool failed"}],
                      "structuredContent": {"why": "on purpose"}, "isError": True}
        elif name == "broken":
            # Its data names a secret: kept in the record, redacted.
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "the server broke",
                                                         "data": {"api_key": BROKEN_KEY}}})
            continue
        elif name == "count":
            token = params["_meta"]["progressToken"]
            progress(token, 1)
            progress(token, 2)
            read_until(lambda c: c.get("method") == "notifications/cancelled"
                       and c["params"]["requestId"] == rid)
            for n in range(3, 7):
                progress(token, n)
            continue
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {name}"}})
            continue
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
