"""Drives an MCP server on stdio with the official Python MCP client, for
the tests of `reel mcp record` (mcp_record.rs). The same script runs once
against the server directly and once through the proxy; the test compares
the two reports.

    python3 mcp_proxy_client.py SCENARIO SECRET CMD ARGS...
    python3 mcp_proxy_client.py SCENARIO SECRET http://HOST:PORT/mcp

SCENARIO is `fastmcp` (fastmcp_server.py) or `everything`
(@modelcontextprotocol/server-everything); a URL instead of a command
line is a streamable HTTP endpoint. SECRET is planted in a tool's
arguments; the environment variable PLANTED_TOKEN (holding the same value)
is passed on to the command. MCP_MODE is the client's mode: `legacy` (the
initialize handshake, 2025-11-25; the default) or a protocol version it
adopts without a handshake (`2026-07-28`). Prints one JSON report on
standard output.
"""

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
            event = self.progress_seen.pop(json.dumps(d["params"]["progressToken"]), None)
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


async def call(client, name, args, **kw):
    try:
        return dump(await client.call_tool(name, args, **kw))
    except MCPError as e:
        return {"json_rpc_error": {"code": e.error.code, "message": e.error.message}}


async def cancel_after_progress(client, obs, name, args, token):
    """Starts `name`, cancels it once its first progress arrived."""
    seen = obs.wait_for_progress(token)
    outcome = {}

    async def run():
        outcome["result"] = await call(client, name, args, meta={"progressToken": token})

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await seen.wait()
        tg.cancel_scope.cancel()
    return "result" if "result" in outcome else "cancelled"


async def fastmcp(client, obs, secret):
    r = {}
    r["count"] = await call(client, "count", {"steps": 3}, meta={"progressToken": 0})
    r["count_progress"] = obs.progress(0)
    r["shout"] = await call(client, "shout", {"text": "hello"})
    obs.plan = [("accept", {"confirmed": True}), ("decline", None)]
    r["confirm"] = [
        await call(client, "confirm", {"action": "deploy"}),
        await call(client, "confirm", {"action": "delete"}),
    ]
    r["echo"] = await call(client, "echo", {"text": f"use {secret} here", "note": secret})
    # The server's environment holds PLANTED_TOKEN: only --secret-env keeps it out.
    r["token"] = await call(client, "token", {})
    r["fail"] = await call(client, "fail", {"reason": "test"})
    r["cancel"] = await cancel_after_progress(client, obs, "wait", {}, "wait-1")
    r["after_cancel"] = await call(client, "echo", {"text": "after"})
    return r


async def everything(client, obs, secret):
    r = {}
    r["echo"] = await call(client, "echo", {"message": f"token {secret}"})
    r["add"] = await call(client, "get-sum", {"a": 2, "b": 40})
    # The server's environment holds PLANTED_TOKEN: only --secret-env keeps it out.
    r["env"] = await call(client, "get-env", {})
    r["long"] = await call(
        client, "trigger-long-running-operation", {"duration": 1, "steps": 2}, meta={"progressToken": "long-1"}
    )
    r["long_progress"] = obs.progress("long-1")
    return r


async def main():
    scenario, secret, command, *args = sys.argv[1:]
    env = {k: os.environ[k] for k in ("PATH", "HOME", "REEL_CONFIG_DIR", "PLANTED_TOKEN") if k in os.environ}
    if command.startswith("http://"):
        server = command
    else:
        server = StdioServerParameters(command=command, args=args, env=env)
    obs = Observer()
    async with Client(
        server,
        mode=os.environ.get("MCP_MODE", "legacy"),
        client_info=types.Implementation(name="reel-proxy-test", version="1.0.0"),
        message_handler=obs.on_message,
        logging_callback=obs.on_log,
        log_level="debug",
        elicitation_callback=obs.on_elicit,
        cache=None,
    ) as client:
        report = {"protocol": client.protocol_version}
        tools = await client.list_tools()
        report["tools"] = sorted(t.name for t in tools.tools)
        report.update(await (fastmcp if scenario == "fastmcp" else everything)(client, obs, secret))
        # A last call: every log message of the calls before has arrived.
        report["logs"] = list(obs.logs)
        report["questions"] = obs.questions
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
