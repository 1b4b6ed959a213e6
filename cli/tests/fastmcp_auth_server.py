"""A FastMCP (the standalone package, 4.x) server protected by a bearer
token, for the auth test of `reel mcp record --listen` (mcp_auth.rs):
a static token verifier behind FastMCP's RemoteAuthProvider, which
answers 401 with a `WWW-Authenticate` challenge to a request without a
valid token, and serves the RFC 9728 protected-resource metadata that
names this server's URL and its authorization server.

    python3 fastmcp_auth_server.py PORT TOKEN   # 127.0.0.1:PORT/mcp
"""

import sys

from fastmcp import FastMCP
from fastmcp.server.auth import RemoteAuthProvider
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier

port, token = int(sys.argv[1]), sys.argv[2]
verifier = StaticTokenVerifier(
    tokens={token: {"client_id": "reel-test", "scopes": ["mcp"]}},
)
auth = RemoteAuthProvider(
    token_verifier=verifier,
    authorization_servers=["https://auth.example.com"],
    base_url=f"http://127.0.0.1:{port}",
)
server = FastMCP(name="reel-test-fastmcp-auth", auth=auth)


@server.tool()
def echo(text: str) -> str:
    """Returns the text."""
    return text


if __name__ == "__main__":
    server.run(transport="http", host="127.0.0.1", port=port, show_banner=False)
