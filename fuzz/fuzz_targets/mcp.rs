//! The MCP message mapping on arbitrary input: a session of JSON-RPC lines
//! (`>` client to server, `<` server to client) linked by the recording
//! proxy's linker and recorded (the facts checked against the stream
//! rules), then loaded and matched as `reel mcp mock` does; the streamable
//! HTTP proxy's SSE and request readers and the mock's `requestState`
//! opener on the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    reel_mcp::fuzzing::link_and_mock(data);
    reel_mcp::fuzzing::http_readers(data);
    reel_mcp::fuzzing::open_request_state(data);
});
