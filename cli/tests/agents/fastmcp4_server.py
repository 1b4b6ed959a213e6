"""A FastMCP 4 server (the `fastmcp` package, not the SDK's), as a new
user of reel writes one: tools that report progress, log, fail, and
return structured output. An agent calls them in parallel.

    python3 fastmcp4_server.py            # on stdio
    python3 fastmcp4_server.py http PORT  # streamable HTTP, 127.0.0.1:PORT/mcp

`REEL_TEST_CHANGED=1` changes what `weather` answers, for verify's test
against a changed server.
"""

import os
import sys

import anyio
from pydantic import BaseModel

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError

server = FastMCP(name="reel-agent-peer", version="4.0.0")


class Weather(BaseModel):
    city: str
    celsius: int
    sky: str


@server.tool
async def weather(city: str, ctx: Context) -> Weather:
    """The weather in `city`, as structured output."""
    await ctx.info(f"looking up {city}")
    await ctx.report_progress(1, 2, "asked the sky")
    # The parallel calls overlap: each is in flight while the others log.
    await anyio.sleep(0.2)
    await ctx.info(f"found {city}")
    await ctx.report_progress(2, 2, "done")
    sky = "hail" if os.environ.get("REEL_TEST_CHANGED") else "clear"
    return Weather(city=city, celsius=21, sky=sky)


@server.tool
async def slow_count(ctx: Context) -> str:
    """Counts to three, logging and reporting progress at each step."""
    steps = 3
    for i in range(1, steps + 1):
        await ctx.info(f"step {i}")
        await ctx.report_progress(i, steps)
        await anyio.sleep(0.05)
    return f"counted to {steps}"


@server.tool
async def broken(reason: str) -> str:
    """Always fails, with `reason`."""
    raise ToolError(f"broken on purpose: {reason}")


@server.resource("reel://motd")
def motd() -> str:
    """The message of the day."""
    return "all systems nominal"


@server.prompt
def review(code: str) -> str:
    """Asks for a review of `code`."""
    return f"Review this code: {code}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run(
            transport="http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            path="/mcp",
            show_banner=False,
            log_level="WARNING",
        )
    else:
        server.run(show_banner=False, log_level="WARNING")
