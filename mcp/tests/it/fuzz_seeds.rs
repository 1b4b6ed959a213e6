//! The `mcp` fuzz target's entry points (`reel_mcp::fuzzing`) on its
//! committed seeds (fuzz/seeds/mcp/: real sessions captured between the
//! official Python client and FastMCP or server-everything), so the normal
//! test command runs what the fuzzer starts from, and any crash input kept
//! there as a regression seed.

use std::path::Path;

use reel::fact::FactKind;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/mcp");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 3, "the captured sessions are there");
    seeds
}

#[test]
fn every_seed_goes_through_every_entry_point() {
    for (_, bytes) in seeds() {
        reel_mcp::fuzzing::link_and_mock(&bytes);
        reel_mcp::fuzzing::http_readers(&bytes);
        reel_mcp::fuzzing::open_request_state(&bytes);
    }
}

/// The linker over a captured FastMCP session (2025-11-25) files what the
/// proxy records: the exchanges, each tools/call, the progress of `count`,
/// both answered elicitations and the cancellation of `wait`.
#[test]
fn a_captured_session_links_to_its_calls() {
    let (_, bytes) = seeds()
        .into_iter()
        .find(|(n, _)| n == "fastmcp-2025-11-25")
        .unwrap();
    let facts = reel_mcp::fuzzing::link_session(&bytes);
    let tools: Vec<&str> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c) => Some(c.tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools,
        [
            "mcp:initialize",
            "mcp:tools/list",
            "count",
            "shout",
            "confirm",
            "confirm",
            "echo",
            "token",
            "fail",
            "wait",
            "echo"
        ]
    );
    let count = |kind: &str| facts.iter().filter(|f| f.kind.name() == kind).count();
    assert_eq!(count("progress"), 4, "count's 3 and wait's 1");
    assert_eq!(count("log"), 2);
    assert_eq!(count("elicit.answered"), 2);
    assert_eq!(count("cancel.requested"), 1);
}
