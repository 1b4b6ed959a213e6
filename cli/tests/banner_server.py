"""An MCP server on the official Python SDK (MCPServer) that, as many
servers do by mistake, prints a banner on its standard output before it
serves: the line is no MCP message. The banner quotes the token the
server was given (PLANTED_TOKEN), and a terminal escape. For the tests of
`reel mcp record` (mcp_record_banner.rs).

    python3 banner_server.py
"""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="reel-test-banner", version="0.1.0")


@server.tool()
def greet(name: str) -> str:
    """Greets `name`."""
    return f"hello {name}"


if __name__ == "__main__":
    token = os.environ.get("PLANTED_TOKEN", "")
    print(f"banner-server 0.1 ready \x1b[31m(token {token})\x1b[0m", flush=True)
    server.run("stdio")
