"""A bare newline-delimited JSON-RPC MCP server for `reel mcp record`'s
tests (mcp_record.rs): `tools/list` in two pages (cursor pagination), and a
`tools/call` of `first` that answers with the client identity it was sent
in `_meta` (2026-07-28 has no initialize), and `confirm`, which asks by an
input-required round (2026-07-28 multi round-trip requests) and answers
the next round. Standard library only.
"""

import json
import sys

PAGES = {None: (["first"], "page-2"), "page-2": (["second"], None)}

for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    params = m.get("params") or {}
    if m["method"] == "tools/list":
        names, cursor = PAGES[params.get("cursor")]
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}
        if cursor:
            result["nextCursor"] = cursor
    elif m["method"] == "tools/call" and params.get("name") == "confirm":
        if params.get("requestState") == "state-1":
            answer = params["inputResponses"]["ask"]
            result = {"content": [{"type": "text", "text": f"answered {answer['action']}"}]}
        else:
            question = {"mode": "form", "message": "Really?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}
            result = {
                "resultType": "input_required",
                "inputRequests": {"ask": {"method": "elicitation/create", "params": question}},
                "requestState": "state-1",
            }
    elif m["method"] == "tools/call":
        who = params.get("_meta", {}).get("io.modelcontextprotocol/clientInfo", {})
        result = {"content": [{"type": "text", "text": f"hello {who.get('name')}"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
