"""A small MCP server on the official Python SDK's high-level server
(FastMCP, named `MCPServer` since mcp 2.x), for the tests of
`reel mcp record` (mcp_record.rs): tools that report progress, log,
elicit, fail, and one that waits until it is cancelled.

    python3 fastmcp_server.py            # on stdio
    python3 fastmcp_server.py http PORT  # streamable HTTP, 127.0.0.1:PORT/mcp
"""

import os
import sys

import anyio
from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer(name="reel-test-fastmcp", version="0.1.0")


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Counts to `steps`, reporting progress at each step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"counted to {steps}"


@server.tool()
async def shout(text: str, ctx: Context) -> str:
    """Logs the text at two levels, then returns it in capitals."""
    await ctx.log("info", f"shouting {text}", logger_name="shouter")
    await ctx.log("warning", {"loud": True, "length": len(text)}, logger_name="shouter")
    return text.upper()


class Confirmation(BaseModel):
    confirmed: bool


@server.tool()
async def confirm(action: str, ctx: Context) -> str:
    """Asks the user to confirm `action`."""
    answer = await ctx.elicit(f"Really {action}?", Confirmation)
    if answer.action == "accept":
        return f"{action}: confirmed={answer.data.confirmed}"
    return f"{action}: {answer.action}"


@server.tool()
def echo(text: str, note: str = "") -> dict:
    """Returns its arguments."""
    return {"text": text, "note": note}


@server.tool()
def token() -> str:
    """Returns the PLANTED_TOKEN of the server's environment (a secret the
    proxy must keep out of the archive)."""
    return f"the token is {os.environ.get('PLANTED_TOKEN', '')}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"failed on purpose: {reason}")


@server.tool()
async def wait(ctx: Context) -> str:
    """Reports progress once, then waits (a minute) to be cancelled."""
    await ctx.report_progress(0, 1, "waiting")
    await anyio.sleep(60)
    return "waited"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
