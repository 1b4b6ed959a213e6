//! `reel demo --nats`, `reel sync` and `reel verify --nats` against a real
//! 3-node JetStream cluster on loopback (nats-server 2.15, installed by
//! `.ci/run`): the demo records into the cluster while one node of three
//! is down, a fresh projection is synced from the cluster, and every
//! reader works on it.

#[path = "../../nats/tests/cluster/mod.rs"]
mod cluster;

use std::path::Path;
use std::process::{Command, Output};

fn reel(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("REEL_NATS")
        // Every host of a fleet shares the fingerprint key.
        .env(
            "REEL_FINGERPRINT_KEY",
            "1717171717171717171717171717171717171717171717171717171717171717",
        )
        .env("REEL_CONFIG_DIR", config)
        .output()
        .expect("the reel binary runs")
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_demo_records_into_the_cluster_with_a_node_down_and_sync_projects_it() {
    let config = tempfile::tempdir().unwrap();
    let mut cluster = cluster::ClusterUnderTest::start();
    drop(cluster.ready());
    let urls = cluster.urls();
    let host = tempfile::tempdir().unwrap();
    let host = host.path().join("host");
    let host = host.to_str().unwrap();

    cluster.kill_node(2);
    let out = ok(
        &reel(config.path(), &["demo", "--nats", &urls, "--archive", host]),
        "reel demo --nats with a node down",
    );
    assert!(out.contains("demo-deploy"), "{out}");
    // The host's projection knows the cluster's runs: a second demo's ids
    // get a suffix instead of conflicting with the first's.
    let out = ok(
        &reel(config.path(), &["demo", "--nats", &urls, "--archive", host]),
        "a second reel demo --nats",
    );
    assert!(out.contains("demo-deploy-2"), "{out}");
    cluster.start_node(2);

    let fleet = tempfile::tempdir().unwrap();
    let fleet = fleet.path().join("fleet");
    let fleet = fleet.to_str().unwrap();
    let out = ok(
        &reel(
            config.path(),
            &["sync", "--nats", &urls, "--archive", fleet],
        ),
        "reel sync",
    );
    assert!(out.starts_with("synced "), "{out}");
    let out = ok(
        &reel(
            config.path(),
            &["verify", "--nats", &urls, "--archive", fleet],
        ),
        "reel verify --nats",
    );
    assert!(out.contains("ok: no problem found"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("against the cluster:"))
        .unwrap_or_else(|| panic!("{out}"));
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(words[3], words[5], "every run is up to date: {line}");
    let runs = ok(
        &reel(config.path(), &["runs", "--archive", fleet]),
        "reel runs on the projection",
    );
    assert!(
        runs.contains("demo-deploy-2") && runs.contains("demo-deploy "),
        "{runs}"
    );
    let shown = ok(
        &reel(config.path(), &["show", "demo-deploy", "--archive", fleet]),
        "reel show on the projection",
    );
    assert!(
        shown.contains("run.ended") || shown.contains("completed"),
        "{shown}"
    );
    // Synced again: nothing new, and still whole.
    let out = ok(
        &reel(
            config.path(),
            &["sync", "--nats", &urls, "--archive", fleet],
        ),
        "a second reel sync",
    );
    assert!(out.starts_with("synced 0 blocks"), "{out}");
}
