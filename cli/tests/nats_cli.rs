//! `reel demo --nats`, `reel sync` and `reel verify --nats` against a real
//! 3-node JetStream cluster on loopback (nats-server 2.15, installed by
//! `.ci/run`): the demo records into the cluster while one node of three
//! is down, a fresh projection is synced from the cluster, and every
//! reader works on it; a following projection (`reel sync --follow`) lets
//! `reel tail` follow a run live, as the cluster receives it.

#[path = "../../nats/tests/cluster/mod.rs"]
mod cluster;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn reel(config: &Path, args: &[&str]) -> Output {
    command(config, args)
        .output()
        .expect("the reel binary runs")
}

fn command(config: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_reel"));
    command
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("REEL_NATS")
        // Every host of a fleet shares the fingerprint key.
        .env(
            "REEL_FINGERPRINT_KEY",
            "1717171717171717171717171717171717171717171717171717171717171717",
        )
        .env("REEL_CONFIG_DIR", config);
    command
}

/// Each line `child`'s stdout prints, sent as it arrives.
fn lines_of(out: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
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
fn the_demo_records_into_the_cluster_with_a_node_down_sync_projects_it_and_tail_follows_it_live() {
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

    // A following projection, and `reel tail` on it while a slow run is
    // recorded into the cluster.
    let live = tempfile::tempdir().unwrap();
    let live = live.path().join("live");
    let live = live.to_str().unwrap();
    let mut follower = command(
        config.path(),
        &["sync", "--follow", "--nats", &urls, "--archive", live],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let said = lines_of(follower.stderr.take().unwrap());
    let first = said
        .recv_timeout(Duration::from_secs(60))
        .expect("the follower says it follows");
    assert!(first.starts_with("following "), "{first}");
    let hops = 12;
    let mut demo = command(
        config.path(),
        &[
            "demo",
            "--nats",
            &urls,
            "--archive",
            host,
            "--live-hops",
            &hops.to_string(),
            "--live-pause-ms",
            "250",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // The run appears in the projection while it is recorded: `reel runs`
    // reads it through the follower's live socket.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = reel(config.path(), &["runs", "--archive", live]);
        let text = String::from_utf8_lossy(&runs.stdout).to_string();
        if runs.status.success() && text.contains("demo-live ") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the live run never reached the projection: {text}{}",
            String::from_utf8_lossy(&runs.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut tail = command(config.path(), &["tail", "demo-live", "--archive", live])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let shown = lines_of(tail.stdout.take().unwrap());
    let mut seen = Vec::new();
    let mut while_recording = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match shown.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                // A hop shown before the demo has ended is shown live.
                if line.contains("Patrol hop") && demo.try_wait().unwrap().is_none() {
                    while_recording += 1;
                }
                seen.push(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                assert!(Instant::now() < deadline, "tail never ended: {seen:#?}");
            }
        }
    }
    let status = tail.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut tail.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        status.success(),
        "reel tail: {status:?}\n{seen:#?}\n{stderr}"
    );
    assert!(demo.wait().unwrap().success(), "the live demo");
    let text = seen.join("\n");
    for hop in 1..=hops {
        assert!(
            text.contains(&format!("Patrol hop {hop} of {hops}")),
            "hop {hop} missing from the tail: {text}"
        );
    }
    assert!(
        while_recording >= 2,
        "tail showed {while_recording} hops while the run was recorded (it must follow, not wait for the end): {text}"
    );
    // The run's end is the last fact shown (the summary follows it).
    let ended = seen.iter().position(|l| l.contains("run.ended completed"));
    let last_hop = seen
        .iter()
        .position(|l| l.contains(&format!("Patrol hop {hops} of {hops}")));
    assert!(
        ended.is_some() && ended > last_hop,
        "the tail shows the run's end after its last hop: {text}"
    );
    // Stopped, the follower has acknowledged what it landed: it exits 0,
    // and the projection matches the cluster.
    let pid = follower.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = follower.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "the follower on SIGTERM: {:?} {stdout}",
        out.status
    );
    assert!(stdout.starts_with("synced "), "{stdout}");
    let out = ok(
        &reel(
            config.path(),
            &["verify", "--nats", &urls, "--archive", live],
        ),
        "reel verify --nats on the followed projection",
    );
    assert!(out.contains("ok: no problem found"), "{out}");
}
