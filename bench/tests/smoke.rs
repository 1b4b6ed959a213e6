//! The benchmark suite at tiny sizes inside `cargo test`: every row is
//! produced and its figures are positive and finite. Timing ratios are
//! never asserted here (benchmarks, never timed tests).

#[path = "../../nats/tests/cluster/mod.rs"]
mod cluster;

use reel_bench::{run, summary_table, Options, Sizes, Target, ROWS};

#[test]
fn every_row_runs_at_tiny_sizes() {
    let mut log = Vec::new();
    // The nats row records into a real 3-node cluster on loopback.
    let cluster = cluster::ClusterUnderTest::start();
    drop(cluster.ready());
    let mut opts = Options::new(Sizes::smoke());
    opts.nats = Some(cluster.urls());
    // The MCP rows spawn this package's binary as their servers, and as
    // the recording proxy (`--mcp-record`, the library entry point
    // `reel mcp record` calls): a `reel` binary in target/ may be stale.
    opts.bench_exe = Some(env!("CARGO_BIN_EXE_reel-bench").into());
    let rows = run(&opts, &mut log).expect("the suite runs");
    let log = String::from_utf8(log).expect("the log is UTF-8");
    for key in ROWS {
        assert!(
            rows.iter().any(|r| r.key == *key),
            "row {key} is missing from the summary; log:\n{log}"
        );
    }
    // progress and latency have a median (p50) and a p99 row; replay has
    // replay() alone and end to end; viewer has `reel show` and `reel runs`;
    // console has the runs table, a run's first screen and peak RSS;
    // mcp-record has p50, p99 and calls/s; mcp-serve calls/s in flight,
    // the same buffered, and one after the other; mcp-http has p50, p50
    // against a bare relay, p99 and calls/s.
    assert_eq!(rows.len(), ROWS.len() + 13, "{log}");
    for r in &rows {
        for (name, v) in [
            ("reel", r.reel),
            ("baseline", r.baseline),
            ("ratio", r.ratio),
        ] {
            assert!(
                v.is_finite() && v >= 0.0,
                "row {} ({}): {name} figure {v} is not a finite, non-negative number; log:\n{log}",
                r.key,
                r.what
            );
        }
        // Rates and sizes are strictly positive; a progress() cost may round
        // to zero after the timer's overhead is subtracted.
        if r.key != "progress" {
            assert!(r.reel > 0.0 && r.baseline > 0.0, "row {}: {r:?}", r.key);
        }
        assert_eq!(r.rounds, Sizes::smoke().rounds, "row {}", r.key);
        assert!(r.holds().is_some() || r.target == Target::Reported);
    }
    let table = summary_table(&rows);
    assert_eq!(table.lines().count(), rows.len() + 2, "{table}");
    assert!(table.starts_with("| row | reel | baseline | ratio | target | holds |"));
}
