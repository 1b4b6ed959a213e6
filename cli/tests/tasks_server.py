"""A sessionless 2026-07-28 MCP server over streamable HTTP that speaks the
Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`), for the
tests of tasks through `reel mcp record --listen` and `reel mcp mock`
(mcp_tasks.rs). Written by hand from the conformance suite's task
scenarios (0.2.0-alpha.12): no framework on the registry speaks this wire.
Standard library only.

    python3 tasks_server.py PORT
    python3 tasks_server.py --stdio

Every POST is one JSON-RPC request answered with one JSON response (with
`--stdio`, every line on stdin one request, answered with one line on
stdout: the same server for `reel mcp verify`, which drives stdio).

The tools are the suite's fixtures: `greet` (sync), `slow_compute` (a task
that sleeps `seconds`, cancellable), `failing_job` (a task, required,
ending in a tool error), `protocol_error_job` (a task that fails),
`confirm_delete` and `multi_input` (tasks that wait for input through
`tasks/update`), `test_tool_with_task` (an input-required round, then a
task).
"""

import datetime
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TASKS = "io.modelcontextprotocol/tasks"
TTL_MS = 60000
POLL_MS = 100

# A "new build" for `reel mcp verify` to catch: set, slow_compute's answer
# ends with it.
SUFFIX = os.environ.get("TASKS_SERVER_SUFFIX", "")

LOCK = threading.Lock()
# taskId -> {"task": {...}, "result"/"error"/"inputRequests", "answers"}
STORE = {}


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def text(t, error=False):
    result = {"resultType": "complete", "content": [{"type": "text", "text": t}]}
    if error:
        result["isError"] = True
    return result


def ask(message, prop):
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {prop: {"type": "boolean" if prop == "confirm" else "string"}}},
        },
    }


TOOLS = [
    {"name": "greet", "description": "Says hello.", "execution": {"taskSupport": "forbidden"},
     "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
    {"name": "slow_compute", "description": "Sleeps, then answers.", "execution": {"taskSupport": "optional"},
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}},
    {"name": "failing_job", "description": "Ends in a tool error.", "execution": {"taskSupport": "required"},
     "inputSchema": {"type": "object"}},
    {"name": "protocol_error_job", "description": "Fails.", "execution": {"taskSupport": "required"},
     "inputSchema": {"type": "object"}},
    {"name": "confirm_delete", "description": "Asks before deleting.", "execution": {"taskSupport": "required"},
     "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}}},
    {"name": "multi_input", "description": "Asks two things at once.", "execution": {"taskSupport": "required"},
     "inputSchema": {"type": "object"}},
    {"name": "test_tool_with_task", "description": "Asks a name, then works on it.",
     "execution": {"taskSupport": "required"}, "inputSchema": {"type": "object"}},
]


class Rpc(Exception):
    def __init__(self, code, message, data=None, status=200):
        self.code, self.message, self.data, self.status = code, message, data, status


def settle(task_id, status, **payload):
    """Moves a task to `status` unless it already ended."""
    with LOCK:
        entry = STORE[task_id]
        if entry["task"]["status"] in ("completed", "failed", "cancelled"):
            return
        entry["task"]["status"] = status
        entry["task"]["lastUpdatedAt"] = now()
        entry.pop("inputRequests", None)
        entry.update(payload)


def create(run, **payload):
    task_id = str(uuid.uuid4())
    stamp = now()
    task = {"taskId": task_id, "status": "working", "createdAt": stamp, "lastUpdatedAt": stamp,
            "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS}
    with LOCK:
        STORE[task_id] = {"task": task, "answers": {}, **payload}
    if payload.get("inputRequests"):
        task["status"] = "input_required"
    if run:
        threading.Thread(target=run, args=(task_id,), daemon=True).start()
    return {"resultType": "task", **task}


def later(seconds, status, **payload):
    def run(task_id):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with LOCK:
                if STORE[task_id]["task"]["status"] == "cancelled":
                    return
            time.sleep(0.02)
        settle(task_id, status, **payload)
    return run


def call(params, tasks_ok):
    name = params.get("name")
    args = params.get("arguments") or {}
    tool = next((t for t in TOOLS if t["name"] == name), None)
    if tool is None:
        raise Rpc(-32602, f"no tool {name!r}")
    support = tool["execution"]["taskSupport"]
    if support == "required" and not tasks_ok:
        raise Rpc(-32021, f"{name} runs only as a task: declare {TASKS}",
                  {"requiredCapabilities": {"extensions": {TASKS: {}}}})
    if name == "greet":
        return text(f"Hello, {args.get('name')}!")
    if name == "slow_compute":
        seconds = float(args.get("seconds", 0))
        answer = text(f"computed {args.get('label')} in {seconds:g}s{SUFFIX}")
        if not tasks_ok:
            time.sleep(seconds)
            return answer
        return create(later(seconds, "completed", result=answer))
    if name == "failing_job":
        return create(later(0.5, "completed", result=text("the job failed", error=True)))
    if name == "protocol_error_job":
        return create(later(0.3, "failed", error={"code": -32603, "message": "the job crashed"}))
    if name == "confirm_delete":
        return create(None, inputRequests={"confirm": ask(f"Delete {args.get('filename')}?", "confirm")},
                      done=lambda a: text(f"deleted {args.get('filename')}" if a["confirm"].get("action") == "accept"
                                          else f"kept {args.get('filename')}"))
    if name == "multi_input":
        return create(None, inputRequests={"first": ask("First name?", "name"), "second": ask("Second name?", "name")},
                      done=lambda a: text("got " + ", ".join(str(a[k].get("content", {}).get("name")) for k in sorted(a))))
    if name == "test_tool_with_task":
        answer = (params.get("inputResponses") or {}).get("user_name")
        if answer is None:
            return {"resultType": "input_required", "inputRequests": {"user_name": ask("Your name?", "name")},
                    "requestState": "round-1"}
        who = (answer.get("content") or {}).get("name")
        return create(later(0.2, "completed", result=text(f"Hello, {who}, from a task")))
    raise Rpc(-32602, f"no tool {name!r}")


def detailed(task_id):
    with LOCK:
        entry = STORE.get(task_id)
        if entry is None:
            raise Rpc(-32602, f"no task {task_id!r}")
        out = {"resultType": "complete", **entry["task"]}
        for k in ("result", "error", "inputRequests"):
            if k in entry:
                out[k] = entry[k]
        return out


def update(task_id, responses):
    with LOCK:
        entry = STORE.get(task_id)
        if entry is None:
            raise Rpc(-32602, f"no task {task_id!r}")
        pending = entry.get("inputRequests") or {}
        for k, v in (responses or {}).items():
            if k in pending:
                entry["answers"][k] = v
                del pending[k]
        ready = entry["task"]["status"] == "input_required" and not pending and "done" in entry
        if ready:
            result = entry.pop("done")(entry["answers"])
    if ready:
        settle(task_id, "completed", result=result)
    return {"resultType": "complete"}


def answer(m):
    method = m.get("method")
    params = m.get("params") or {}
    caps = (params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") or {}
    tasks_ok = TASKS in (caps.get("extensions") or {})
    if method == "server/discover":
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "private",
                "capabilities": {"tools": {}, "extensions": {TASKS: {}}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks-server", "version": "1.0.0"}}}
    if method == "tools/list":
        return {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": TOOLS}
    if method == "tools/call":
        return call(params, tasks_ok)
    if method in ("tasks/get", "tasks/update", "tasks/cancel"):
        if not tasks_ok:
            raise Rpc(-32021, f"{method} needs {TASKS}", {"requiredCapabilities": {"extensions": {TASKS: {}}}})
        task_id = params.get("taskId")
        if method == "tasks/get":
            return detailed(task_id)
        if method == "tasks/update":
            return update(task_id, params.get("inputResponses"))
        with LOCK:
            if task_id not in STORE:
                raise Rpc(-32602, f"no task {task_id!r}")
        settle(task_id, "cancelled")
        return {"resultType": "complete"}
    if method == "ping":
        return {"resultType": "complete"}
    raise Rpc(-32601, f"method not found: {method}")


def header_name(method, params):
    if method == "tools/call" or method == "prompts/get":
        return params.get("name")
    if method == "resources/read":
        return params.get("uri")
    if method in ("tasks/get", "tasks/update", "tasks/cancel"):
        return params.get("taskId")
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send(self, status, body):
        out = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            m = json.loads(body)
        except ValueError:
            return self.send(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
        if not isinstance(m, dict):
            return self.send(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no batches"}})
        if "id" not in m:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        params = m.get("params") or {}
        try:
            method = self.headers.get("mcp-method")
            if method is not None and method != m.get("method"):
                raise Rpc(-32020, f"Mcp-Method {method!r} is not the body's {m.get('method')!r}", status=400)
            name = self.headers.get("mcp-name")
            want = header_name(m.get("method"), params)
            if name is not None and want is not None and name.strip() != str(want):
                raise Rpc(-32020, f"Mcp-Name {name!r} is not the body's {want!r}", status=400)
            self.send(200, {"jsonrpc": "2.0", "id": m["id"], "result": answer(m)})
        except Rpc as e:
            error = {"code": e.code, "message": e.message}
            if e.data is not None:
                error["data"] = e.data
            self.send(e.status, {"jsonrpc": "2.0", "id": m["id"], "error": error})

    def do_GET(self):
        self.send_response(405)
        self.send_header("allow", "POST")
        self.send_header("content-length", "0")
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, *args):
        pass


def stdio():
    for line in sys.stdin:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if not isinstance(m, dict) or "id" not in m or "method" not in m:
            continue
        try:
            out = {"jsonrpc": "2.0", "id": m["id"], "result": answer(m)}
        except Rpc as e:
            error = {"code": e.code, "message": e.message}
            if e.data is not None:
                error["data"] = e.data
            out = {"jsonrpc": "2.0", "id": m["id"], "error": error}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if sys.argv[1] == "--stdio":
    stdio()
else:
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
