"""An MCP-shaped HTTP endpoint that notes the order requests reach it, for
`reel mcp record --listen`'s ordering test (mcp_record_rules.rs). It is
single-threaded on purpose: it accepts one connection at a time and reads
its request before accepting the next, so what it notes is the order the
requests arrived on the wire. A GET is answered with an event stream
held open; a POST with `{}`, or, for method `order`, the order so far.
Standard library only.

    python3 order_http_server.py PORT
"""

import json
import socket
import sys

server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
order = []
streams = []
while True:
    conn, _ = server.accept()
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    if not data:
        # A connection that sent nothing (the test's probe): no request.
        conn.close()
        continue
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    method = lines[0].split(" ")[0]
    length = 0
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
    while len(body) < length:
        body += conn.recv(65536)
    if method == "GET":
        order.append("GET")
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        streams.append(conn)
        continue
    message = json.loads(body or b"{}")
    if message.get("method") == "order":
        result = {"order": order}
    else:
        order.append("POST")
        result = {}
    out = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result}).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                 + str(len(out)).encode() + b"\r\nconnection: close\r\n\r\n" + out)
    conn.close()
