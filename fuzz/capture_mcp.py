"""Captures an MCP stdio session as a seed of the `mcp` fuzz target.

    python3 capture_mcp.py OUT -- CMD ARGS...

Sits between a client (its own stdin and stdout) and the server CMD,
forwarding every line unchanged, and writes each line to OUT in the order
forwarded, prefixed `>` (client to server) or `<` (server to client): the
input format of `reel_mcp::fuzzing::link_session`. The committed seeds
(seeds/mcp/) were captured with cli/tests/mcp_proxy_client.py as the client
(see fuzz/run.sh).
"""

import subprocess
import sys
import threading

out = open(sys.argv[1], "wb")
command = sys.argv[sys.argv.index("--") + 1 :]
child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
lock = threading.Lock()


def pump(source, sink, mark):
    for line in iter(source.readline, b""):
        with lock:
            out.write(mark + line)
            out.flush()
            sink.write(line)
            sink.flush()
    sink.close()


up = threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin, b">"))
down = threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, b"<"))
up.start()
down.start()
up.join()
down.join()
sys.exit(child.wait())
