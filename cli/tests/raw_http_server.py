"""A bare stateless MCP endpoint over HTTP for `reel mcp record --listen`'s
tests (mcp_record_rules.rs): every POST is answered with one JSON
response, no session. `tools/call` answers `hello NAME`, the name the
client gave in the request's `_meta` (2026-07-28). Standard library only.

    python3 raw_http_server.py PORT [HEADERS_FILE]

With HEADERS_FILE, the `Mcp-*` headers of each POST are appended to it as
one JSON object per line (what the proxy forwarded).
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if len(sys.argv) > 2:
            seen = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("mcp-")}
            with open(sys.argv[2], "a") as f:
                f.write(json.dumps(seen) + "\n")
        m = json.loads(body)
        params = m.get("params") or {}
        who = params.get("_meta", {}).get("io.modelcontextprotocol/clientInfo", {})
        if m.get("method") == "tools/call":
            result = {"content": [{"type": "text", "text": f"hello {who.get('name')}"}]}
        else:
            result = {}
        out = json.dumps({"jsonrpc": "2.0", "id": m.get("id"), "result": result}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
