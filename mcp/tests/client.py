"""Drives reel-mcp-example with the official Python MCP client.

    python3 client.py stdio BINARY ARCHIVE MODE
    python3 client.py http URL MODE

MODE is `legacy` (the initialize handshake, 2025-11-25) or a protocol
version the client adopts without a handshake (`2026-07-28`). Prints one
JSON report of what the client saw on standard output; the Rust test
(python_client.rs) asserts it and the archive.
"""

import base64
import json
import os
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters, types


def dump(model):
    if model is None:
        return None
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Observer:
    def __init__(self):
        self.notifications = []
        self.logs = []
        self.questions = []
        self.plan = []
        self.progress_seen = {}

    async def on_message(self, message):
        if isinstance(message, Exception):
            self.notifications.append({"exception": repr(message)})
            return
        d = dump(message)
        self.notifications.append(d)
        if d.get("method") == "notifications/progress":
            token = d["params"]["progressToken"]
            event = self.progress_seen.get(json.dumps(token))
            if event is not None:
                event.set()

    async def on_log(self, params):
        self.logs.append(dump(params))

    async def on_elicit(self, _context, params):
        self.questions.append(dump(params))
        action, content = self.plan.pop(0)
        return types.ElicitResult(action=action, content=content)

    def progress(self, token):
        return [
            n["params"]
            for n in self.notifications
            if n.get("method") == "notifications/progress" and n["params"]["progressToken"] == token
        ]

    def wait_for_progress(self, token):
        event = anyio.Event()
        self.progress_seen[json.dumps(token)] = event
        return event


def result(r):
    d = dump(r)
    return {
        "isError": d.get("isError", False),
        "text": [c.get("text") for c in d.get("content", [])],
        "structured": d.get("structuredContent"),
    }


async def cancel_while_waiting(client, obs, token, args):
    """Starts `wait`, cancels it once its first progress arrived; says
    whether the client got a result before the cancel took."""
    seen = obs.wait_for_progress(token)
    outcome = {}

    async def call():
        outcome["result"] = result(
            await client.call_tool("wait", args, meta={"progressToken": token})
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await seen.wait()
        tg.cancel_scope.cancel()
    return "result" if "result" in outcome else "cancelled"


async def rounds_by_hand(client):
    """Drives the input-required rounds of one call by hand (2026-07-28):
    the first round's result, a forged state (refused), the genuine state
    with the answer (the result), the same state again (refused)."""
    out = {}
    args = {"action": "rotate keys"}
    first = dump(await client.session.call_tool("confirm", args, allow_input_required=True))
    out["first"] = {
        "resultType": first.get("resultType"),
        "inputRequests": first.get("inputRequests"),
        "has_request_state": "requestState" in first,
    }
    state = first["requestState"]
    key = next(iter(first["inputRequests"]))
    answer = {key: types.ElicitResult(action="accept", content={"confirmed": False})}

    body, tag = state.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["round"] += 1
    forged_body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()

    async def refused(request_state):
        try:
            await client.session.call_tool(
                "confirm", args, input_responses=answer, request_state=request_state, allow_input_required=True
            )
            return None
        except MCPError as e:
            return {"code": e.error.code, "message": e.error.message}

    out["forged"] = await refused(f"{forged_body}.{tag}")
    out["final"] = result(
        await client.session.call_tool(
            "confirm", args, input_responses=answer, request_state=state, allow_input_required=True
        )
    )
    out["replayed"] = await refused(state)
    return out


async def scenario(client, obs):
    report = {"protocol": client.protocol_version}
    tools = await client.list_tools()
    report["tools"] = {t["name"]: t for t in (dump(t) for t in tools.tools)}

    report["count0"] = result(await client.call_tool("count", {"steps": 2}, meta={"progressToken": 0}))
    report["progress0"] = obs.progress(0)
    report["count_str"] = result(
        await client.call_tool("count", {"steps": 1}, meta={"progressToken": "tok-\u03b1"})
    )
    report["progress_str"] = obs.progress("tok-\u03b1")

    callback = []

    async def on_progress(progress, total, message):
        callback.append([progress, total, message])

    await client.call_tool("count", {"steps": 1}, progress_callback=on_progress)
    report["progress_callback"] = callback
    # No token: the reports are only recorded.
    before = len(obs.notifications)
    await client.call_tool("count", {"steps": 1})
    report["silent"] = [n for n in obs.notifications[before:] if n.get("method") == "notifications/progress"]

    report["levels"] = result(await client.call_tool("levels", {}))
    # Log messages ride the connection's own stream: a call after `levels`
    # finished makes sure they all arrived.
    report["whoami"] = result(
        await client.call_tool(
            "whoami",
            {},
            meta={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        )
    )
    report["logs"] = list(obs.logs)

    obs.plan = [("accept", {"confirmed": True}), ("decline", None), ("cancel", None), ("accept", None)]
    report["confirm"] = [
        result(
            await client.call_tool("confirm", {"action": f"deploy {i}"}, meta={"progressToken": f"confirm-{i}"})
        )
        for i in range(3)
    ]
    report["confirm_progress"] = [obs.progress(f"confirm-{i}") for i in range(3)]
    report["sign_in"] = result(await client.call_tool("sign_in", {}))
    report["questions"] = obs.questions

    report["fail"] = result(await client.call_tool("fail", {}))
    report["echo"] = result(await client.call_tool("echo", {"x": 1}))
    report["bad_input"] = result(await client.call_tool("count", {"steps": "three"}))
    try:
        await client.call_tool("nope", {})
        report["unknown"] = None
    except MCPError as e:
        report["unknown"] = {"code": e.error.code, "message": e.error.message}

    if client.protocol_version == "2026-07-28":
        report["mrtr"] = await rounds_by_hand(client)

    report["cancel"] = await cancel_while_waiting(client, obs, "wait-1", {})
    report["race"] = await cancel_while_waiting(client, obs, "race-1", {"ms": 1})
    # A call after the cancellations: the server has seen them.
    report["after_cancel"] = result(await client.call_tool("echo", {"after": "cancel"}))
    # The completion of the URL question. Over streamable HTTP it rides the
    # session's standalone stream (rmcp routes only progress to a request's
    # own), so it is collected here, calls after `sign_in`, as the logs are.
    report["elicit_complete"] = [
        n for n in obs.notifications if n.get("method") == "notifications/elicitation/complete"
    ]
    return report


async def main():
    kind = sys.argv[1]
    if kind == "stdio":
        # The client passes the server only a safe subset of its
        # environment: the archive's key settings are passed on by name.
        env = {k: os.environ[k] for k in ("REEL_CONFIG_DIR", "REEL_FINGERPRINT_KEY") if k in os.environ}
        server = StdioServerParameters(command=sys.argv[2], args=["--archive", sys.argv[3]], env=env)
        mode = sys.argv[4]
    else:
        server = sys.argv[2]
        mode = sys.argv[3]
    obs = Observer()
    async with Client(
        server,
        mode=mode,
        client_info=types.Implementation(name="claude-code-test", version="1.2.3"),
        message_handler=obs.on_message,
        logging_callback=obs.on_log,
        log_level="debug",
        elicitation_callback=obs.on_elicit,
        cache=None,
    ) as client:
        report = await scenario(client, obs)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
