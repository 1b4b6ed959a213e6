"""A FastMCP 4 server with the Tasks extension (SEP-2663, `fastmcp-tasks`),
the suite's task fixtures as FastMCP declares them, for
cli/tests/it/mcp_tasks.rs: a server framework we did not write on the
other side of `reel mcp record --listen`.

    python fastmcp_tasks_server.py PORT

Tasks run in process (Docket's `memory://` backend). The tools:
`greet` (sync), `slow_compute` (a task that sleeps `seconds`),
`failing_job` (a task ending in a tool error), `protocol_error_job` (a
task whose body raises).
"""

import asyncio
import sys

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp_tasks import TasksExtension

mcp = FastMCP("fastmcp-tasks-server")
mcp.add_extension(TasksExtension(url="memory://"))


@mcp.tool
def greet(name: str) -> str:
    """Says hello."""
    return f"Hello, {name}!"


@mcp.tool(task=True)
async def slow_compute(seconds: float = 0, label: str = "") -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return f"computed {label} in {seconds:g}s"


@mcp.tool(task=True)
async def failing_job() -> str:
    """Ends in a tool error."""
    await asyncio.sleep(0.5)
    raise ToolError("the job failed")


@mcp.tool(task=True)
async def protocol_error_job() -> str:
    """Raises."""
    await asyncio.sleep(0.3)
    raise RuntimeError("the job crashed")


mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True,
        show_banner=False, log_level="WARNING")
