"""Drives `reel mcp mock TAPE` with the official Python MCP client.

    python3 mcp_mock_client.py REEL_BINARY TAPE

Prints one JSON report of what the client saw; mcp_cassette.rs asserts it.
"""

import json
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


async def scenario(client, obs):
    report = {"server": dump(client.server_info)}
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
    return report


async def main():
    server = StdioServerParameters(command=sys.argv[1], args=["mcp", "mock", sys.argv[2]])
    obs = Observer()
    async with Client(
        server,
        mode="legacy",
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
