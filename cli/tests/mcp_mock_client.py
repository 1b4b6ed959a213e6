"""Drives `reel mcp mock TAPE` with the official Python MCP client.

    python3 mcp_mock_client.py REEL_BINARY TAPE
    python3 mcp_mock_client.py http://HOST:PORT/mcp

(a URL: `reel mcp mock TAPE --listen ADDR` serving it over streamable HTTP).

MCP_MODE is the client's mode: `legacy` (the initialize handshake,
2025-11-25; the default) or `2026-07-28` (no handshake; a question comes
as an input-required round, which the client answers and resumes).

Prints one JSON report of what the client saw; mcp_cassette.rs asserts it.
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
        self.questions = []

    async def on_message(self, message):
        if isinstance(message, Exception):
            self.notifications.append({"exception": repr(message)})
            return
        self.notifications.append(dump(message))

    async def on_log(self, params):
        pass

    async def on_elicit(self, _context, params):
        self.questions.append(dump(params))
        return types.ElicitResult(action="accept", content={"confirmed": True})


def result(r):
    d = dump(r)
    return {
        "isError": d.get("isError", False),
        "text": [c.get("text") for c in d.get("content", [])],
        "structured": d.get("structuredContent"),
    }


async def error_of(client, name, args):
    try:
        r = await client.call_tool(name, args)
        return {"unexpected_result": result(r)}
    except MCPError as e:
        return {"code": e.error.code, "message": e.error.message, "data": e.error.data}


async def rounds_by_hand(client):
    """Drives the input-required rounds of one call by hand (2026-07-28):
    the first round, a forged state (refused), the genuine state with the
    answer (the result), the same state again (refused)."""
    args = {"action": "rollback"}
    first = dump(await client.session.call_tool("confirm", args, allow_input_required=True))
    key, question = next(iter(first["inputRequests"].items()))
    out = {
        "first": {
            "resultType": first.get("resultType"),
            "message": question.get("params", question).get("message"),
        }
    }
    state = first["requestState"]
    answer = {key: types.ElicitResult(action="accept", content={"confirmed": False})}

    async def refused(request_state):
        try:
            await client.session.call_tool(
                "confirm", args, input_responses=answer, request_state=request_state, allow_input_required=True
            )
            return None
        except MCPError as e:
            return {"code": e.error.code, "message": e.error.message}

    body, tag = state.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["round"] += 1
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    out["forged"] = await refused(f"{forged}.{tag}")
    out["final"] = result(
        await client.session.call_tool(
            "confirm", args, input_responses=answer, request_state=state, allow_input_required=True
        )
    )
    out["replayed"] = await refused(state)
    return out


async def scenario(client, obs):
    report = {"server": dump(client.server_info), "protocol": client.protocol_version}
    tools = await client.list_tools()
    report["tools"] = [t.name for t in tools.tools]
    report["add"] = result(await client.call_tool("add", {"a": 2, "b": 3}))
    before = len(obs.notifications)
    report["count"] = result(await client.call_tool("count", {"steps": 2}, meta={"progressToken": "tok-1"}))
    # A call after `count` makes sure its notifications all arrived.
    report["next"] = [result(await client.call_tool("next", {}))["text"] for _ in range(2)]
    report["count_notifications"] = [
        n for n in obs.notifications[before:] if n.get("method") in ("notifications/progress", "notifications/message")
    ]
    report["next_again"] = await error_of(client, "next", {})
    report["confirm"] = result(await client.call_tool("confirm", {"action": "deploy"}))
    report["questions"] = obs.questions
    report["changed"] = await error_of(client, "add", {"a": 2, "b": 4})
    report["unknown"] = await error_of(client, "ad", {"a": 2, "b": 3})
    if client.protocol_version == "2026-07-28":
        report["rounds"] = await rounds_by_hand(client)
    return report


async def main():
    if sys.argv[1].startswith("http://"):
        server = sys.argv[1]
    else:
        server = StdioServerParameters(command=sys.argv[1], args=["mcp", "mock", sys.argv[2]])
    obs = Observer()
    async with Client(
        server,
        mode=os.environ.get("MCP_MODE", "legacy"),
        client_info=types.Implementation(name="mock-test-client", version="0.1"),
        message_handler=obs.on_message,
        logging_callback=obs.on_log,
        elicitation_callback=obs.on_elicit,
        cache=None,
    ) as client:
        report = await scenario(client, obs)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
