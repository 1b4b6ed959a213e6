"""Drives `reel mcp mock` with the official Python MCP client, for the
rules a mock keeps (mcp_mock_rules.rs): volatile `_meta` keys are not
matched, identical calls are answered in recorded order, and a miss is a
JSON-RPC error.

    python3 mcp_mock_rules_client.py SCENARIO CMD ARGS...    (a stdio server)
    python3 mcp_mock_rules_client.py SCENARIO http://HOST:PORT/mcp

SCENARIO `hit` calls only what the tape of mcp_cassette.rs's
`record_mock_session` holds; `miss` then calls `add` with arguments it
does not; `read-miss` reads a resource and gets a prompt it does not
hold. Prints one JSON report.
"""

import json
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters, types

VOLATILE = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "vendor=opaque",
    "baggage": "user=ann,tenant=blue",
    "io.modelcontextprotocol/clientInfo": {"name": "another-client", "version": "9.9"},
}


def text(r):
    return [c.text for c in r.content if getattr(c, "text", None) is not None]


async def scenario(client, name):
    report = {}
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    # Volatile keys, and a progress token, on a recorded call: answered.
    r = await client.call_tool("add", {"a": 2, "b": 3}, meta={"progressToken": "p-1", **VOLATILE})
    report["add"] = r.structured_content
    r = await client.call_tool("add", {"a": 10, "b": 20}, progress_callback=on_progress,
                               meta=dict(VOLATILE, traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    report["add_other"] = r.structured_content
    # Identical calls, with another call between them: recorded order.
    first = text(await client.call_tool("next", {}, meta={"baggage": "n=1"}))
    report["between"] = text(await client.call_tool("count", {"steps": 2}, progress_callback=on_progress))
    second = text(await client.call_tool("next", {}, meta={"baggage": "n=2"}))
    report["next"] = [first, second]
    report["count_progress"] = seen
    if name == "miss":
        try:
            await client.call_tool("add", {"a": 2, "b": 4})
            report["miss"] = "answered"
        except MCPError as e:
            report["miss"] = {"code": e.error.code, "message": e.error.message}
    if name == "read-miss":
        for key, ask in [("read_miss", lambda: client.read_resource("file:///never-recorded.txt")),
                         ("prompt_miss", lambda: client.get_prompt("never-recorded", {"topic": "x"}))]:
            try:
                await ask()
                report[key] = "answered"
            except MCPError as e:
                report[key] = {"code": e.error.code, "message": e.error.message}
    return report


async def main():
    name, target = sys.argv[1], sys.argv[2:]
    if target[0].startswith("http://"):
        server = target[0]
    else:
        server = StdioServerParameters(command=target[0], args=target[1:])
    async with Client(
        server,
        mode="legacy",
        client_info=types.Implementation(name="mock-rules-client", version="0.1"),
        cache=None,
    ) as client:
        report = await scenario(client, name)
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
