//! `reel stats --by tool`: per tool, the calls, errors, progress reports
//! and duration percentiles of the runs selected, as text and JSON, equal
//! to the figures computed from the facts of the recorded archive (the
//! demo's runs, runs of given shapes, and a run a writer left running,
//! which recovery marks incomplete).

use std::collections::BTreeMap;
use std::path::Path;

use crate::console::*;
use reel::fact::*;
use reel_archive::{Archive, ArchiveConfig};
use serde_json::Value;

/// Per tool from the facts: calls, errors, progress reports, durations.
#[derive(Debug, Default)]
pub(crate) struct Expected {
    pub calls: u64,
    pub errors: u64,
    pub progress: u64,
    pub durations: Vec<u64>,
}

pub(crate) fn from_facts(dir: &Path) -> BTreeMap<String, Expected> {
    let archive = Archive::open(
        dir,
        ArchiveConfig {
            read_only: true,
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let mut out: BTreeMap<String, Expected> = BTreeMap::new();
    let ids: Vec<String> = archive.run_ids().map(Result::unwrap).collect();
    for id in ids {
        let mut tools = BTreeMap::new();
        for fact in archive.facts(&id, ..).unwrap() {
            let fact = fact.unwrap();
            let tool = |tools: &BTreeMap<String, String>| {
                fact.call.as_ref().and_then(|c| tools.get(c)).cloned()
            };
            match &fact.kind {
                FactKind::CallStarted(c) => {
                    tools.insert(c.call_id.clone(), c.tool_name.clone());
                    out.entry(c.tool_name.clone()).or_default().calls += 1;
                }
                FactKind::CallEnded(e) => {
                    let t = out.get_mut(&tool(&tools).unwrap()).unwrap();
                    t.durations.push(e.duration_ns);
                    if matches!(e.outcome, CallOutcome::Error { .. }) {
                        t.errors += 1;
                    }
                }
                FactKind::Progress(_) => {
                    if let Some(t) = tool(&tools) {
                        out.get_mut(&t).unwrap().progress += 1;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// A run left running: one call of `probe`, never ended (recovery marks
/// the run incomplete when the writer lets go).
fn left_running(dir: &Path) {
    let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
    let at = 1_700_000_000_000_000_000;
    let fact = |call: Option<&str>, kind| NewFact {
        at,
        offset: 0,
        call: call.map(Into::into),
        kind,
    };
    let mut facts = vec![fact(
        None,
        FactKind::RunStarted(RunStarted {
            run_id: "left".into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "test".into(),
                version: "1".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }),
    )];
    let started = |id: &str| {
        fact(
            Some(id),
            FactKind::CallStarted(CallStarted {
                call_id: id.into(),
                tool_name: "probe".into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: None,
                mode: CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args: serde_json::json!({}),
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            }),
        )
    };
    facts.push(started("p1"));
    archive.append("left", facts).unwrap();
    archive.flush().unwrap();
}

fn stats(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = reel()
        .args(["stats", "--by", "tool", "--archive"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    out
}

/// The value at quantile `q` of sorted `v` (nearest rank).
pub(crate) fn exact(v: &[u64], q: f64) -> u64 {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

#[test]
fn stats_by_tool_are_the_figures_of_the_facts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let shapes: Vec<RunShape> = (0..6)
        .map(|i| RunShape {
            id: format!("shape-{i}"),
            tenant: Some("acme".into()),
            at: now + i,
            tool: "lookup".into(),
            message: (i % 2 == 0).then(|| "step".into()),
            error: (i % 3 == 0).then(|| "no".into()),
            ..RunShape::default()
        })
        .collect();
    record_runs(&dir, &shapes);
    left_running(&dir);
    let want = from_facts(&dir);
    let out = stats(&dir, &["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = got["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["tool"].as_str().unwrap()).collect();
    assert_eq!(names, want.keys().map(String::as_str).collect::<Vec<_>>());
    for t in tools {
        let name = t["tool"].as_str().unwrap();
        let w = &want[name];
        assert_eq!(t["calls"], w.calls, "{name}");
        assert_eq!(t["errors"], w.errors, "{name}");
        assert_eq!(t["progress"], w.progress, "{name}");
        let mut d = w.durations.clone();
        d.sort();
        for (q, key) in [(0.5, "p50_ns"), (0.95, "p95_ns"), (0.99, "p99_ns")] {
            if d.is_empty() {
                assert_eq!(t[key], Value::Null, "{name} {key}");
                continue;
            }
            let (got, exact) = (t[key].as_u64().unwrap() as f64, exact(&d, q) as f64);
            assert!(
                (got - exact).abs() <= exact / 16.0 + 1.0,
                "{name} {key}: {got} vs {exact}"
            );
        }
    }
    assert_eq!(got["runs"], 5 + 6 + 1);
    assert_eq!(got["from_facts"], 0, "every run has a stored summary");
    let lookup = tools.iter().find(|t| t["tool"] == "lookup").unwrap();
    assert_eq!(
        (lookup["calls"].as_u64(), lookup["errors"].as_u64()),
        (Some(6), Some(2))
    );

    // As text: a line per tool, escaped names, the same counts.
    let text = stats(&dir, &[]);
    let text = String::from_utf8(text.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("lookup ")).unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["6", "2", "33.3%"], "{text}");
    assert!(text.starts_with("runs 12, started "), "{text}");

    // A window: the last hour holds all but the run of 2023; a tenant.
    let hour: Value =
        serde_json::from_slice(&stats(&dir, &["--json", "--window", "1h"]).stdout).unwrap();
    assert_eq!(hour["runs"], 11);
    let acme: Value = serde_json::from_slice(
        &stats(&dir, &["--json", "--tenant", "acme", "--since", "1h"]).stdout,
    )
    .unwrap();
    assert!(acme["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["tool"] == "lookup"));
    let none: Value =
        serde_json::from_slice(&stats(&dir, &["--json", "--until", "2000-01-01"]).stdout).unwrap();
    assert_eq!(
        (
            none["runs"].as_u64(),
            none["tools"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0))
    );
    // The filters need --by.
    let plain = reel()
        .args(["stats", "--tenant", "acme", "--archive"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!plain.status.success());
    assert!(String::from_utf8_lossy(&plain.stderr).contains("--by"));
}

/// While a recorder holds the archive, the figures come through its live
/// socket, a run still being recorded among them (read from its facts).
#[test]
fn stats_by_tool_beside_a_recorder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    let mut recorder = recording_live(&dir, 200, 50);
    // The demo's first runs end before its live run starts: ask until the
    // live run is among the figures (its socket is up from the start).
    let started = std::time::Instant::now();
    let got = loop {
        let out = stats(&dir, &["--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        if got["from_facts"].as_u64().unwrap_or(0) >= 1
            || started.elapsed() > std::time::Duration::from_secs(60)
        {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = recorder.kill();
    let _ = recorder.wait();
    assert!(got["from_facts"].as_u64().unwrap() >= 1, "{got}");
    assert!(got["runs"].as_u64().unwrap() >= 1, "{got}");
    assert!(!got["tools"].as_array().unwrap().is_empty(), "{got}");
}
