"""Drives `reel mcp mock RUN` (a run `reel collect` took in) with the
official Python MCP client: lists the tools, then makes each call of the
JSON list on standard input ({"name", "arguments"}) in order.

    python3 otel_mock_client.py REEL_BINARY ARCHIVE RUN < calls.json

Prints one JSON report: the tools listed and each call's answer.
"""

import json
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters, types


async def main():
    calls = json.load(sys.stdin)
    server = StdioServerParameters(
        command=sys.argv[1], args=["--archive", sys.argv[2], "mcp", "mock", sys.argv[3]]
    )
    report = {"tools": [], "answers": []}
    async with Client(
        server,
        client_info=types.Implementation(name="otel-mock-client", version="0.1"),
        cache=None,
    ) as client:
        listed = await client.list_tools()
        for tool in listed.tools:
            report["tools"].append(tool.model_dump(mode="json", by_alias=True, exclude_none=True))
        for call in calls:
            try:
                r = await client.call_tool(call["name"], call["arguments"])
                d = r.model_dump(mode="json", by_alias=True, exclude_none=True)
                report["answers"].append(
                    {
                        "isError": d.get("isError", False),
                        "text": [c.get("text") for c in d.get("content", [])],
                    }
                )
            except MCPError as e:
                report["answers"].append({"code": e.error.code, "message": e.error.message})
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
