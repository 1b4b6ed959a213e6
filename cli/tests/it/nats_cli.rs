//! `reel demo --nats`, `reel sync` and `reel verify --nats` against a real
//! 3-node JetStream cluster on loopback (nats-server 2.15, installed by
//! `.ci/run`): the demo records into the cluster while one node of three
//! is down, a fresh projection is synced from the cluster, and every
//! reader works on it; a following projection (`reel sync --follow`) lets
//! `reel tail` follow a run live, as the cluster receives it.

#[path = "../../../nats/tests/cluster/mod.rs"]
mod cluster;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support;

fn reel(config: &Path, args: &[&str]) -> Output {
    command(config, args)
        .output()
        .expect("the reel binary runs")
}

fn command(config: &Path, args: &[&str]) -> Command {
    let mut command = support::reel_command(config);
    command
        .args(args)
        .env_remove("REEL_NATS")
        // Every host of a fleet shares the fingerprint key.
        .env(
            "REEL_FINGERPRINT_KEY",
            "1717171717171717171717171717171717171717171717171717171717171717",
        );
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

/// The tests of this file each run a 3-node cluster: one at a time, so
/// that two clusters and their recorders do not share the machine's cores
/// (their timeouts are the cluster's, not the test's).
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_cluster() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed holding it failed on its own.
    reel::lock::lock(&ONE_CLUSTER)
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

/// `reel sync` into `fleet`, then `reel verify --nats`: no problem, and
/// every run of the cluster up to date in the projection.
fn sync_and_verify(config: &Path, urls: &str, fleet: &str) {
    let out = ok(
        &reel(config, &["sync", "--nats", urls, "--archive", fleet]),
        "reel sync",
    );
    assert!(out.starts_with("synced "), "{out}");
    let out = ok(
        &reel(config, &["verify", "--nats", urls, "--archive", fleet]),
        "reel verify --nats",
    );
    assert!(out.contains("ok: no problem found"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("against the cluster:"))
        .unwrap_or_else(|| panic!("{out}"));
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(words[3], words[5], "every run is up to date: {line}");
}

#[test]
fn the_demo_records_into_the_cluster_with_a_node_down_sync_projects_it_and_tail_follows_it_live() {
    let _one = one_cluster();
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
    sync_and_verify(config.path(), &urls, fleet);
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

    // A message that is no block, on a run's subject: `reel sync` refuses
    // it by name, exits 2 (damage), and lands what came after it; `reel
    // verify --nats` names it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let addrs: Vec<async_nats::ServerAddr> =
            urls.split(',').map(|u| u.parse().unwrap()).collect();
        let js = async_nats::jetstream::new(async_nats::connect(addrs).await.unwrap());
        js.publish("reel._.run.garbage-0", "not a block".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    let out = ok(
        &reel(config.path(), &["demo", "--nats", &urls, "--archive", host]),
        "a demo after the garbage",
    );
    let after = out
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    let synced = reel(
        config.path(),
        &["sync", "--nats", &urls, "--archive", fleet],
    );
    let stderr = String::from_utf8_lossy(&synced.stderr);
    assert_eq!(synced.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refused stream message")
            && stderr.contains("reel._.run.garbage-0")
            && stderr.contains("refused 1 stream message"),
        "{stderr}"
    );
    let runs = ok(
        &reel(config.path(), &["runs", "--archive", fleet]),
        "reel runs after a refused message",
    );
    assert!(
        runs.contains(&format!("{after} ")),
        "what came after it ({after}) landed: {runs}"
    );
    let checked = reel(
        config.path(),
        &["verify", "--nats", &urls, "--archive", fleet],
    );
    let text = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(2), "{text}");
    assert!(
        text.contains("refused stream message")
            && text.contains("garbage-0")
            && !text.contains("ok: no problem found")
            && text.contains("the archive itself: no problem found"),
        "{text}"
    );
    let json = reel(
        config.path(),
        &["verify", "--nats", &urls, "--archive", fleet, "--json"],
    );
    assert_eq!(json.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let problems = json["cluster"]["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("garbage-0")),
        "{json}"
    );
    assert!(
        json["archive"]["problems"].as_array().unwrap().is_empty(),
        "{json}"
    );
}

const KEY: &str = "1717171717171717171717171717171717171717171717171717171717171717";
const GUARD: Duration = Duration::from_secs(90);

/// A recorder in this process, into the cluster (the default offline
/// policy: a call waits for the cluster).
struct Host {
    rt: tokio::runtime::Runtime,
    recorder: reel_recorder::Recorder,
    store: std::sync::Arc<reel_nats::NatsStore>,
    _scratch: tempfile::TempDir,
}

impl Host {
    fn connect(urls: &str) -> Host {
        let config = reel_nats::NatsConfig::from_urls(urls).unwrap();
        let store = std::sync::Arc::new(reel_nats::NatsStore::connect(config).unwrap());
        let scratch = tempfile::tempdir().unwrap();
        let key = || reel_archive::FingerprintKey::from_hex(KEY).unwrap();
        let archive = reel_archive::Archive::open(
            scratch.path(),
            reel_archive::ArchiveConfig {
                fingerprint_key: key(),
                ..Default::default()
            },
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let config = reel_recorder::RecorderConfig {
            durability: reel_recorder::Durability::CallBoundary,
            fingerprint_key: key(),
            serve_live: false,
            ..Default::default()
        };
        let recorder = rt.block_on(async {
            reel_recorder::Recorder::with_archive_and_store(archive, store.clone(), config).unwrap()
        });
        Host {
            rt,
            recorder,
            store,
            _scratch: scratch,
        }
    }

    fn start(&self, id: &str) -> reel_recorder::Run {
        self.rt
            .block_on(self.recorder.start_run(reel_recorder::RunStart::new(id)))
            .unwrap()
    }
}

/// A tool that logs `args` bytes of payload (over the recorder's inline
/// limit, it is spilled into an artifact) behind a marker.
async fn blob(
    ctx: reel::context::ToolContext,
    size: usize,
) -> Result<usize, reel::context::ToolError> {
    ctx.log(
        reel::fact::Level::Info,
        serde_json::json!({ "blob": format!("needle-{}", "x".repeat(size)) }),
    );
    Ok(size)
}

/// A `reel sync --follow` process, and every line its stderr said so far.
struct Follower {
    child: std::process::Child,
    said: mpsc::Receiver<String>,
    kept: Vec<String>,
}

impl Follower {
    fn start(config: &Path, urls: &str, dir: &str) -> Follower {
        let mut child = command(
            config,
            &["sync", "--follow", "--nats", urls, "--archive", dir],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let said = lines_of(child.stderr.take().unwrap());
        Follower {
            child,
            said,
            kept: Vec::new(),
        }
    }

    /// Takes what stderr said meanwhile; fails, with it, if the follower
    /// has exited.
    fn check(&mut self) {
        self.kept.extend(self.said.try_iter());
        if let Some(status) = self.child.try_wait().unwrap() {
            std::thread::sleep(Duration::from_millis(100));
            self.kept.extend(self.said.try_iter());
            panic!("the follower exited ({status:?}): {:#?}", self.kept);
        }
    }

    /// Waits for a line of its stderr containing `what`.
    fn wait_line(&mut self, what: &str) {
        let deadline = Instant::now() + GUARD;
        while !self.kept.iter().any(|l| l.contains(what)) {
            match self.said.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => self.kept.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(e) => panic!("no line saying {what:?} ({e:?}); said: {:#?}", self.kept),
            }
        }
    }

    /// Polls `reel ARGS` until its stdout holds `what`, the follower
    /// running meanwhile.
    fn wait_output(&mut self, config: &Path, args: &[&str], what: &str) {
        let deadline = Instant::now() + GUARD;
        loop {
            let out = reel(config, args);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if out.status.success() && text.contains(what) {
                return;
            }
            self.check();
            assert!(
                Instant::now() < deadline,
                "reel {args:?} never said {what:?}: {text}{}\nthe follower said: {:#?}",
                String::from_utf8_lossy(&out.stderr),
                self.kept
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERMs it; returns its stdout and every line its stderr said.
    fn stop(mut self) -> (String, Vec<String>) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            std::io::Read::read_to_string(&mut out, &mut stdout).unwrap();
        }
        let status = self.child.wait().unwrap();
        self.kept.extend(self.said.iter());
        assert!(
            status.success(),
            "the follower on SIGTERM: {status:?} {stdout}\n{:#?}",
            self.kept
        );
        (stdout, std::mem::take(&mut self.kept))
    }
}

impl Drop for Follower {
    /// A test that fails leaves no follower behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `reel sync --follow`, the two parts the other test leaves alone: the
/// artifact a landed fact refers to (a payload spilled above the inline
/// limit) is copied into the projection with its batch, while following,
/// not only by the final copy when the follower stops; and a cluster that
/// goes away is waited out, said once, and what it takes once it is back
/// (a call that waited meanwhile) lands before the follower stops cleanly.
/// A follower started while the cluster is down waits for it too.
#[test]
fn a_follower_copies_artifacts_as_they_land_and_waits_out_the_cluster() {
    let _one = one_cluster();
    let config = tempfile::tempdir().unwrap();
    let mut cluster = cluster::ClusterUnderTest::start();
    drop(cluster.ready());
    let urls = cluster.urls();
    let dirs = tempfile::tempdir().unwrap();
    let live = dirs.path().join("live");
    let live = live.to_str().unwrap();
    let mut follower1 = Follower::start(config.path(), &urls, live);
    follower1.wait_line("following ");
    // One more, to be stopped during the outage.
    let stopped = dirs.path().join("stopped");
    let stopped = stopped.to_str().unwrap();
    let mut follower3 = Follower::start(config.path(), &urls, stopped);
    follower3.wait_line("following ");

    // A spilled artifact, recorded while the follower runs: in the
    // projection (its figures, read through the follower's live socket)
    // before the follower stops.
    let host = Host::connect(&urls);
    let big = host.start("big-0");
    let size = 300 * 1024;
    let out = host
        .rt
        .block_on(big.call("blob", size).invoke(blob))
        .unwrap();
    assert_eq!(out, size);
    host.rt
        .block_on(big.end(reel::fact::RunStatus::Completed))
        .unwrap();
    follower1.wait_output(
        config.path(),
        &["show", "big-0", "--archive", live],
        "run.ended completed",
    );
    follower1.wait_output(
        config.path(),
        &["stats", "--json", "--archive", live],
        "\"artifacts\": 1,",
    );

    // The cluster goes away while a run is open; a call waits for it.
    let back = host.start("back-0");
    for i in 0..3 {
        cluster.kill_node(i);
    }
    let call = back.call("blob", 10usize);
    let pending = host.rt.spawn(call.invoke(blob));
    follower1.wait_line("waiting for the cluster");
    // A follower stopped during the outage exits cleanly, its projection
    // flushed, and says the next sync copies what it could not (it does
    // not wait the offline wait out for the artifacts).
    follower3.wait_line("waiting for the cluster");
    let (stdout, said) = follower3.stop();
    assert!(stdout.starts_with("synced "), "{stdout}");
    assert!(
        said.iter()
            .any(|l| l.contains("the next `reel sync` copies them")),
        "{said:#?}"
    );
    // A follower started while the cluster is down.
    let late = dirs.path().join("late");
    let late = late.to_str().unwrap();
    let mut follower2 = Follower::start(config.path(), &urls, late);
    follower2.wait_line("waiting for the cluster");
    // Both followers keep trying meanwhile: the call's store retries with
    // a growing pause (50 ms << attempt), several of the followers' waits.
    let store = host.store.clone();
    let deadline = Instant::now() + GUARD;
    while store.stats().retries < 4 {
        assert!(Instant::now() < deadline, "the call's block never retried");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pending.is_finished(), "the call waits for the cluster");
    for i in 0..3 {
        cluster.start_node(i);
    }
    assert_eq!(host.rt.block_on(pending).unwrap().unwrap(), 10);
    host.rt
        .block_on(back.end(reel::fact::RunStatus::Completed))
        .unwrap();
    let Host { rt, recorder, .. } = host;
    rt.block_on(recorder.shutdown()).unwrap();
    for (follower, dir) in [(&mut follower1, live), (&mut follower2, late)] {
        follower.wait_output(
            config.path(),
            &["show", "back-0", "--archive", dir],
            "run.ended completed",
        );
        // The late follower copies big-0's artifact as its batch lands
        // too, not only at its stop (whose copy waits a moment at most).
        follower.wait_output(
            config.path(),
            &["stats", "--json", "--archive", dir],
            "\"artifacts\": 1,",
        );
    }

    // One outage, said once by each follower (not at every reconnect
    // attempt or retry of the setup), and said over once it is.
    for follower in [follower1, follower2] {
        let (stdout, said) = follower.stop();
        assert!(stdout.starts_with("synced "), "{stdout}");
        let warnings: Vec<&String> = said
            .iter()
            .filter(|l| {
                l.contains("waiting for the cluster") || l.contains("following the stream again")
            })
            .collect();
        assert!(
            warnings.len() == 2
                && warnings[0].contains("waiting for the cluster")
                && warnings[1].contains("following the stream again"),
            "{warnings:#?}"
        );
    }

    // The artifact is the one the fact refers to, readable through the
    // archive API; both projections match the cluster.
    for dir in [live, late] {
        let archive = reel_archive::Archive::open(
            Path::new(dir),
            reel_archive::ArchiveConfig {
                fingerprint_key: reel_archive::FingerprintKey::from_hex(KEY).unwrap(),
                ..Default::default()
            },
        )
        .unwrap();
        let facts: Vec<_> = archive
            .facts("big-0", ..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let digests = reel::tape::referenced_digests(&facts);
        assert_eq!(digests.len(), 1, "{dir}: one spilled payload");
        let digest = digests.into_iter().next().unwrap();
        let bytes = archive
            .artifact(&digest)
            .unwrap()
            .unwrap_or_else(|| panic!("{dir}: artifact {digest} is not in the projection"));
        assert!(
            String::from_utf8_lossy(&bytes).contains("needle-xxxx"),
            "{dir}"
        );
        drop(archive);
        let out = ok(
            &reel(
                config.path(),
                &["verify", "--nats", &urls, "--archive", dir],
            ),
            "reel verify --nats on a followed projection",
        );
        assert!(out.contains("ok: no problem found"), "{out}");
    }
}

/// Five hosts start `reel demo --nats` at the same moment, each with its
/// own (empty) projection, so each first picks the same ids: every one
/// exits 0 with five runs of its own, no id is recorded twice, and a
/// projection of the cluster holds all twenty-five, verified.
#[test]
fn five_demos_started_at_once_into_one_cluster_pick_ids_that_do_not_collide() {
    let _one = one_cluster();
    let config = tempfile::tempdir().unwrap();
    let cluster = cluster::ClusterUnderTest::start();
    drop(cluster.ready());
    let urls = cluster.urls();
    let hosts = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..5)
        .map(|i| {
            let host = hosts.path().join(format!("host{i}"));
            command(
                config.path(),
                &["demo", "--nats", &urls, "--archive", host.to_str().unwrap()],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for (i, child) in children.into_iter().enumerate() {
        let out = ok(&child.wait_with_output().unwrap(), &format!("demo {i}"));
        let line = out
            .lines()
            .find(|l| l.starts_with("recorded 5 demo runs into "))
            .unwrap_or_else(|| panic!("demo {i} says what it recorded: {out}"));
        let recorded = line.rsplit(": ").next().unwrap();
        for id in recorded.split(", ") {
            assert!(ids.insert(id.to_owned()), "{id} recorded twice: {line}");
        }
    }
    assert_eq!(ids.len(), 25, "{ids:?}");

    let fleet = hosts.path().join("fleet");
    let fleet = fleet.to_str().unwrap();
    sync_and_verify(config.path(), &urls, fleet);
    let runs = ok(
        &reel(config.path(), &["runs", "--json", "--archive", fleet]),
        "reel runs --json",
    );
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    let listed: std::collections::BTreeSet<String> = runs["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("{runs}"))
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ids, "the projection holds every demo's runs");
}
