"""A bare newline-delimited JSON-RPC MCP server that gets many things
wrong, for `reel mcp check` (mcp_check.rs): the session recorded through
`reel mcp record` must show each of them as a finding. Standard library
only.

- a banner on its standard output before it serves (not JSON);
- `tools/list`: `lookup` listed twice, `undescribed` without a
  description, `shapeless` with an inputSchema that is no JSON Schema,
  `listy` with an outputSchema of an array, and `add`, whose outputSchema
  wants an integer `sum`;
- `add` answers `structuredContent` whose `sum` is a string;
- `late` answers, then sends progress on the request's token;
- `chatty` sends a `notifications/message` that carries an id;
- `forge` first answers id 999, which nobody asked;
- `slow` sleeps SLOPPY_SLOW_S seconds (2 unless set) before it answers;
- `ghost` is never answered.
"""

import json
import os
import sys
import time


def send(message):
    print(json.dumps(message), flush=True)


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def obj(props=None):
    return {"type": "object", "properties": props or {}}


TOOLS = [
    {"name": "add", "description": "Adds two integers.",
     "inputSchema": obj({"a": {"type": "integer"}, "b": {"type": "integer"}}),
     "outputSchema": {"type": "object", "properties": {"sum": {"type": "integer"}},
                      "required": ["sum"]}},
    {"name": "lookup", "description": "Looks a word up.", "inputSchema": obj()},
    {"name": "lookup", "description": "Looks a word up, again.", "inputSchema": obj()},
    {"name": "undescribed", "inputSchema": obj()},
    {"name": "shapeless", "description": "Takes anything.", "inputSchema": {"type": "objekt"}},
    {"name": "listy", "description": "Returns a list.", "inputSchema": obj(),
     "outputSchema": {"type": "array"}},
] + [{"name": n, "description": f"The {n} tool.", "inputSchema": obj()}
     for n in ["late", "chatty", "forge", "slow", "ghost"]]

print("sloppy-server 0.1 starting", flush=True)

for line in sys.stdin:
    m = json.loads(line)
    if "method" not in m or "id" not in m:
        continue
    rid, method = m["id"], m["method"]
    params = m.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "sloppy", "version": "0.1"}}})
        continue
    if method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        continue
    if method != "tools/call":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
        continue
    name = params.get("name")
    if name == "ghost":
        continue
    if name == "add":
        args = params.get("arguments") or {}
        total = args.get("a", 0) + args.get("b", 0)
        send({"jsonrpc": "2.0", "id": rid, "result": {
            **text(str(total)), "structuredContent": {"sum": str(total)}}})
    elif name == "late":
        token = params.get("_meta", {}).get("progressToken")
        send({"jsonrpc": "2.0", "id": rid, "result": text("done")})
        send({"jsonrpc": "2.0", "method": "notifications/progress",
              "params": {"progressToken": token, "progress": 1, "total": 1}})
    elif name == "chatty":
        send({"jsonrpc": "2.0", "id": "note-1", "method": "notifications/message",
              "params": {"level": "info", "data": "hello"}})
        send({"jsonrpc": "2.0", "id": rid, "result": text("said")})
    elif name == "forge":
        send({"jsonrpc": "2.0", "id": 999, "result": text("nobody asked")})
        send({"jsonrpc": "2.0", "id": rid, "result": text("forged")})
    elif name == "slow":
        time.sleep(float(os.environ.get("SLOPPY_SLOW_S", "2")))
        send({"jsonrpc": "2.0", "id": rid, "result": text("finally")})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": text(name or "")})
