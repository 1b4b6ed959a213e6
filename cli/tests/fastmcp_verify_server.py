"""A Python MCP server (the official SDK's FastMCP, named `MCPServer` in
mcp 2.x) that `reel mcp verify` is checked against (mcp_cassette.rs).

    python3 fastmcp_verify_server.py

With REEL_TEST_BREAK=add set, `add` is off by one; with
REEL_TEST_BREAK=count, `count`'s progress messages say more: a behaviour
changed on purpose, which verify must name.
"""

import os
import warnings

warnings.filterwarnings("ignore", message="The logging capability is deprecated")

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("fastmcp-verify", instructions="adds, counts and asks")
BROKEN = os.environ.get("REEL_TEST_BREAK", "")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b + (1 if BROKEN == "add" else 0)


@mcp.tool()
async def count(steps: int, ctx: Context) -> str:
    """Counts, reporting progress and logging each step."""
    for i in range(1, steps + 1):
        message = f"step {i} of {steps}" if BROKEN == "count" else f"step {i}"
        await ctx.report_progress(i, steps, message)
        await ctx.info(f"counted {i}")
    return f"counted to {steps}"


class Confirm(BaseModel):
    confirmed: bool


@mcp.tool()
async def confirm(action: str, ctx: Context) -> str:
    """Asks the user before acting."""
    answer = await ctx.elicit(f"Really {action}?", Confirm)
    if answer.action == "accept" and answer.data.confirmed:
        return f"{action}: done"
    return f"{action}: not done ({answer.action})"


if __name__ == "__main__":
    mcp.run()
