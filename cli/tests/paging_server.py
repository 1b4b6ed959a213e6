"""A bare newline-delimited JSON-RPC MCP server for `reel mcp record`'s
tests (mcp_record.rs): `tools/list` in two pages (cursor pagination), and a
`tools/call` that answers with the client identity it was sent in `_meta`
(2026-07-28 has no initialize). Standard library only.
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
    elif m["method"] == "tools/call":
        who = params.get("_meta", {}).get("io.modelcontextprotocol/clientInfo", {})
        result = {"content": [{"type": "text", "text": f"hello {who.get('name')}"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
