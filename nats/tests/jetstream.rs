//! Recording into a real 3-node JetStream cluster on loopback, and
//! projecting it into a local archive. One cluster for every scenario (in
//! this order, sharing one stream, each with its own run ids):
//!
//! 1. **A conflict:** two recorder processes start the same run id; the
//!    second gets a clear conflict error, the first's run is whole. A
//!    recorder that conflicts on one run keeps recording its other run.
//! 2. **A node dies, a recorder dies:** 8 recorder processes record
//!    concurrently into the R3 stream; a node is SIGKILLed mid-run and
//!    restarted; one recorder process is SIGKILLed mid-run. Every call
//!    whose result was returned is in the projection, every chain
//!    verifies, no fact is there twice, and the killed recorder's run is
//!    incomplete, not corrupt.
//! 3. **A retry:** every node is stopped (SIGSTOP) while a block is in
//!    flight, so its ack times out and it is published again; the block is
//!    stored once.
//! 4. **Offline and back:** every node is killed; a call waits (the
//!    default policy) and returns once the cluster is back, its facts in
//!    the stream; a store under the fail policy fails with a clear error.
//! 5. **Resume:** a second sync into the same projection reads only what
//!    is new; a third reads nothing.
//! 6. **A lost delivery:** the projection's consumer delivered a block that
//!    never arrived (a follower's connection went down with it in flight),
//!    so the blocks after it come first; the sync reads the missing one
//!    from the stream instead of calling the next one damage.
//!
//! 7. **Tenants apart:** a block published on one tenant's subject never
//!    lands in another tenant's run: neither one that goes on a run of
//!    another tenant (chained to its head, as a writer that can read the
//!    stream could), nor one that starts a run naming another tenant. The
//!    sync refuses each, naming it, and goes on: the victim's own later
//!    blocks and every other run land, the forged ones never do, and the
//!    check against the stream names both.
//! 8. **A busy subject:** another writer's messages are still in process
//!    on the stream leader when the store publishes to the same run's
//!    subject (the leader refuses that with error 10164, which the store
//!    sends again): the store still reports a conflict, never a success,
//!    and none of its facts is on the subject. Concurrent publishes
//!    expecting one subject sequence: one lands, and every refusal is a
//!    conflict (10071) or the in-process answer (10164), told apart. Then
//!    a sync of the whole stream refuses those foreign messages, each, and
//!    projects every run.
//!
//! Nothing here asserts on time: waits are for events (lines from the
//! recorders, a store's retry count), each with a generous guard that
//! fails with the nodes' logs instead of hanging.

mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use reel::context::{ContextError, ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel::run::RunState;
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_core::store::Store;
use reel_nats::{NatsConfig, NatsStore, OfflinePolicy};
use reel_recorder::{Durability, Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

use cluster::ClusterUnderTest;

const CHILD_ENV: &str = "REEL_NATS_TEST_CHILD";
/// Every host of a fleet shares the fingerprint key (here: a fixed one).
const KEY: &str = "4242424242424242424242424242424242424242424242424242424242424242";
/// The guard on any one wait: far above what any step takes.
const GUARD: Duration = Duration::from_secs(120);
const RECORDERS: usize = 8;

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        child();
        return;
    }
    let config_dir = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this process starts.
    unsafe { std::env::set_var(reel_archive::CONFIG_DIR_ENV, config_dir.path()) };
    let mut cluster = ClusterUnderTest::start();
    drop(cluster.ready());
    println!("cluster ready at {}", cluster.urls());
    let projection = tempfile::tempdir().unwrap();

    conflict(&cluster);
    println!("ok: a conflict of two writers of one run");
    let killed_run = node_and_recorder_die(&mut cluster, projection.path());
    println!("ok: a node dies, a recorder dies");
    retry_after_timeout(&cluster);
    println!("ok: a retried publish after a timeout does not duplicate");
    offline_and_back(&mut cluster);
    println!("ok: offline and back");
    resume(&cluster, projection.path(), &killed_run);
    println!("ok: resume");
    lost_delivery(&cluster);
    println!("ok: a lost delivery");
    lost_tail(&cluster);
    println!("ok: the stream's tail delivered and lost");
    coalesced(&cluster);
    println!("ok: batches appended while a block is in flight go out as one");
    tenants_apart(&cluster);
    println!("ok: tenants apart");
    // Last: it leaves foreign messages on a run's subject of the stream.
    busy_subject(&cluster);
    println!("ok: a busy subject");
}

// ---------------------------------------------------------------------------
// Recorder processes
// ---------------------------------------------------------------------------

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
        std::process::exit(0);
    }
}

async fn stepper(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let n = args["steps"].as_u64().unwrap_or(3);
    for i in 0..n {
        ctx.progress(json!({ "step": i }));
    }
    Ok(json!({ "steps": n }))
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn recorder_config() -> RecorderConfig {
    RecorderConfig {
        durability: Durability::CallBoundary,
        fingerprint_key: FingerprintKey::from_hex(KEY).unwrap(),
        serve_live: false,
        ..RecorderConfig::default()
    }
}

/// A recorder process: records `RUNS` runs of `CALLS` calls each, under
/// run ids `<PREFIX>-<i>`, saying each call whose result it got back. With
/// `HOLD`, it waits for a line on stdin after its first call.
fn child() {
    let urls = env("REEL_NATS");
    let prefix = env("REEL_CHILD_PREFIX");
    let runs: usize = env("REEL_CHILD_RUNS").parse().unwrap();
    let calls: usize = env("REEL_CHILD_CALLS").parse().unwrap();
    let hold = !env("REEL_CHILD_HOLD").is_empty();
    let scratch = tempfile::tempdir().unwrap();
    let config = NatsConfig::from_urls(&urls).unwrap();
    let store = Arc::new(NatsStore::connect(config).unwrap());
    let archive = Archive::open(
        scratch.path(),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::from_hex(KEY).unwrap(),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let recorder = Recorder::with_archive_and_store(archive, store, recorder_config()).unwrap();
        for r in 0..runs {
            let id = format!("{prefix}-{r}");
            let run = match recorder.start_run(RunStart::new(id.clone())).await {
                Ok(run) => run,
                Err(e) => {
                    say(&format!("error {e}"));
                    std::process::exit(3);
                }
            };
            say(&format!("started {id}"));
            for c in 0..calls {
                let call = run.call("stepper", json!({ "steps": 1 + c % 4 }));
                let call_id = call.id().to_owned();
                call.invoke(stepper).await.unwrap();
                say(&format!("returned {id} {call_id}"));
                if hold && r == 0 && c == 0 {
                    say("holding");
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).unwrap();
                }
            }
            run.end(RunStatus::Completed).await.unwrap();
            say(&format!("ended {id}"));
        }
        recorder.shutdown().await.unwrap();
    });
}

struct Recorders {
    children: Vec<(
        Child,
        Option<ChildStdin>,
        Option<std::thread::JoinHandle<()>>,
    )>,
    rx: mpsc::Receiver<(usize, String)>,
    tx: mpsc::Sender<(usize, String)>,
    /// Every line said, by child.
    lines: Vec<Vec<String>>,
}

impl Recorders {
    fn new() -> Recorders {
        let (tx, rx) = mpsc::channel();
        Recorders {
            children: Vec::new(),
            rx,
            tx,
            lines: Vec::new(),
        }
    }

    fn spawn(&mut self, urls: &str, prefix: &str, runs: usize, calls: usize, hold: bool) -> usize {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, "1")
            .env("REEL_NATS", urls)
            .env("REEL_CHILD_PREFIX", prefix)
            .env("REEL_CHILD_RUNS", runs.to_string())
            .env("REEL_CHILD_CALLS", calls.to_string())
            .env("REEL_CHILD_HOLD", if hold { "1" } else { "" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let index = self.children.len();
        let out = child.stdout.take().unwrap();
        let tx = self.tx.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send((index, line)).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        self.children.push((child, stdin, Some(reader)));
        self.lines.push(Vec::new());
        index
    }

    /// Waits for the next line of any child.
    fn next(&mut self, cluster: &ClusterUnderTest) -> (usize, String) {
        let (i, line) = self
            .rx
            .recv_timeout(GUARD)
            .unwrap_or_else(|_| panic!("no recorder said anything\n{}", cluster.logs()));
        self.lines[i].push(line.clone());
        (i, line)
    }

    /// Waits until `until` holds of the lines said so far.
    fn wait(&mut self, cluster: &ClusterUnderTest, until: impl Fn(&Recorders) -> bool) {
        while !until(self) {
            self.next(cluster);
        }
    }

    fn count(&self, prefix: &str) -> usize {
        self.lines
            .iter()
            .flatten()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// Waits for child `i` to exit; returns whether it succeeded. Its
    /// remaining lines are kept.
    fn finish(&mut self, i: usize) -> bool {
        drop(self.children[i].1.take());
        let ok = self.children[i].0.wait().unwrap().success();
        // The reader thread ends with the pipe: then all it read is sent.
        if let Some(reader) = self.children[i].2.take() {
            reader.join().unwrap();
        }
        while let Ok((j, line)) = self.rx.try_recv() {
            self.lines[j].push(line);
        }
        ok
    }

    /// (run, call) of every call whose result was returned.
    fn returned(&self) -> BTreeSet<(String, String)> {
        self.lines
            .iter()
            .flatten()
            .filter_map(|l| {
                let mut p = l.strip_prefix("returned ")?.split(' ');
                Some((p.next()?.to_owned(), p.next()?.to_owned()))
            })
            .collect()
    }

    fn ended(&self) -> BTreeSet<String> {
        self.lines
            .iter()
            .flatten()
            .filter_map(|l| Some(l.strip_prefix("ended ")?.to_owned()))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// Checks on a projection
// ---------------------------------------------------------------------------

fn open_projection(dir: &Path) -> Archive {
    Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::from_hex(KEY).unwrap(),
            ..ArchiveConfig::default()
        },
    )
    .unwrap()
}

/// A sync that must refuse nothing (every scenario but the forgeries):
/// a refusal fails with what the check against the stream says of it.
fn sync_clean(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
) -> reel_nats::SyncReport {
    let report = reel_nats::sync(config, archive, consumer).unwrap();
    if report.refused > 0 {
        let checked = reel_nats::verify_projection(config, archive).unwrap();
        panic!(
            "the sync refused {} messages: {:#?}",
            report.refused, checked.problems
        );
    }
    report
}

fn config(cluster: &ClusterUnderTest) -> NatsConfig {
    NatsConfig::from_urls(&cluster.urls()).unwrap()
}

/// Every returned call's `call.ended` is in the projection, every ended
/// run is completed there, and the projection matches the stream.
fn check_projection(
    cluster: &ClusterUnderTest,
    archive: &Archive,
    returned: &BTreeSet<(String, String)>,
    ended: &BTreeSet<String>,
) {
    let mut ended_calls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for run in returned.iter().map(|(r, _)| r).collect::<BTreeSet<_>>() {
        let facts: Vec<_> = archive
            .facts(run, ..)
            .unwrap_or_else(|e| panic!("run {run} is not in the projection: {e}"))
            .collect::<Result<_, _>>()
            .unwrap();
        for (i, f) in facts.iter().enumerate() {
            assert_eq!(f.seq, i as u64, "run {run}: seqs are gapless, none twice");
            if let FactKind::CallEnded(_) = f.kind {
                let call = f.call.clone().unwrap();
                assert!(
                    ended_calls
                        .entry(run.clone())
                        .or_default()
                        .insert(call.clone()),
                    "run {run}: call {call} ended twice"
                );
            }
        }
    }
    for (run, call) in returned {
        assert!(
            ended_calls.get(run).is_some_and(|c| c.contains(call)),
            "run {run}: the returned call {call} is not in the projection"
        );
    }
    for run in ended {
        assert_eq!(
            archive.run(run).unwrap().state,
            RunState::Completed,
            "{run}"
        );
    }
    let report = archive.verify().unwrap();
    assert!(report.is_ok(), "the projection verifies: {report:?}");
    let against = reel_nats::verify_projection(&config(cluster), archive).unwrap();
    assert!(
        against.is_ok(),
        "the projection matches the stream: {against:?}"
    );
    assert!(against.matching > 0);
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

fn conflict(cluster: &ClusterUnderTest) {
    let urls = cluster.urls();
    let mut r = Recorders::new();
    let a = r.spawn(&urls, "dup", 1, 3, true);
    r.wait(cluster, |r| r.lines[a].iter().any(|l| l == "holding"));
    let b = r.spawn(&urls, "dup", 1, 3, false);
    assert!(!r.finish(b), "the second writer of run dup-0 fails");
    let said = r.lines[b].join("\n");
    assert!(
        said.contains("error") && said.contains("\"dup-0\" is being written by another recorder"),
        "the second writer is told why: {said}"
    );
    // A recorder with a run of its own that then starts the taken run id:
    // the conflict fails that run alone. Its other run keeps recording,
    // its calls return their results, and their facts are in the stream.
    let returned = conflicting_recorder_goes_on(cluster);
    // The first writer goes on undisturbed.
    writeln!(r.children[a].1.as_mut().unwrap()).unwrap();
    assert!(r.finish(a), "the first writer of run dup-0 completes");
    assert_eq!(r.ended(), BTreeSet::from(["dup-0".to_owned()]));
    // Both writers' runs are whole in a projection: dup-0 the first
    // writer's alone, solo-1 with every call whose result was returned.
    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    sync_clean(&config(cluster), &archive, None);
    let mut all = r.returned();
    all.extend(returned);
    let ended = BTreeSet::from(["dup-0".to_owned(), "solo-1".to_owned()]);
    check_projection(cluster, &archive, &all, &ended);
    let calls = |run: &str| {
        archive
            .facts(run, ..)
            .unwrap()
            .filter(|f| matches!(f.as_ref().map(|f| &f.kind), Ok(FactKind::CallEnded(_))))
            .count()
    };
    assert_eq!(
        calls("dup-0"),
        3,
        "dup-0 holds the first writer's calls only"
    );
    assert_eq!(calls("solo-1"), 4);

    // In one store, a conflict fails the run concerned only: it is
    // reported once, that run takes nothing more, and a run written
    // alongside it goes on.
    let store = NatsStore::connect(config(cluster)).unwrap();
    store.append_batch("dup-0", vec![started("dup-0")]).unwrap();
    store
        .append_batch("solo-0", vec![started("solo-0")])
        .unwrap();
    let err = store.flush().unwrap_err().to_string();
    assert!(
        err.contains("\"dup-0\" is being written by another recorder"),
        "{err}"
    );
    let refused = store
        .append_batch("dup-0", vec![progress(1)])
        .unwrap_err()
        .to_string();
    assert!(refused.contains("was not stored"), "{refused}");
    let end = reel::fact::Fact {
        kind: FactKind::RunEnded(reel::fact::RunEnded {
            status: RunStatus::Completed,
        }),
        ..progress(2)
    };
    store
        .append_batch("solo-0", vec![progress(1), end])
        .unwrap();
    store.close_stream("solo-0").unwrap();
    store.flush().unwrap();
    assert_eq!(
        store.stats().blocks,
        2,
        "solo-0's two blocks, none of dup-0's"
    );
}

/// While another process holds run `dup-0`: a recorder records run
/// `solo-1`, then starts `dup-0` and is refused (the conflict names the
/// run); `solo-1`'s calls go on returning results, it ends, and the
/// shutdown reports the failed run. Returns `solo-1`'s returned calls.
fn conflicting_recorder_goes_on(cluster: &ClusterUnderTest) -> BTreeSet<(String, String)> {
    let store = Arc::new(NatsStore::connect(config(cluster)).unwrap());
    let scratch = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let recorder = rt.block_on(async {
        Recorder::with_archive_and_store(open_projection(scratch.path()), store, recorder_config())
            .unwrap()
    });
    let mut returned = BTreeSet::new();
    let mut call = |run: &reel_recorder::Run, steps: u64| {
        let call = run.call("stepper", json!({ "steps": steps }));
        let id = call.id().to_owned();
        let out = rt.block_on(call.invoke(stepper));
        assert_eq!(
            out.unwrap(),
            json!({ "steps": steps }),
            "solo-1's call returns"
        );
        returned.insert((run.id().to_owned(), id));
    };
    let solo = rt
        .block_on(recorder.start_run(RunStart::new("solo-1")))
        .unwrap();
    call(&solo, 2);
    let err = rt
        .block_on(recorder.start_run(RunStart::new("dup-0")))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("run \"dup-0\" is being written by another recorder"),
        "the conflict names the run: {err}"
    );
    for steps in [1, 3, 2] {
        call(&solo, steps);
    }
    rt.block_on(solo.end(RunStatus::Completed)).unwrap();
    let shut = rt.block_on(recorder.shutdown()).unwrap_err().to_string();
    assert!(
        shut.contains("\"dup-0\"") && !shut.contains("solo-1"),
        "the shutdown reports the failed run, and only it: {shut}"
    );
    returned
}

/// Returns the id of the run whose recorder was killed.
fn node_and_recorder_die(cluster: &mut ClusterUnderTest, projection: &Path) -> String {
    let urls = cluster.urls();
    let mut r = Recorders::new();
    // Recorder 0 records one long run and is killed part way.
    let doomed = r.spawn(&urls, "doomed", 1, 100_000, false);
    for p in 1..RECORDERS {
        r.spawn(&urls, &format!("fleet{p}"), 3, 6, false);
    }
    let before = RECORDERS * 2;
    r.wait(cluster, |r| r.count("returned") >= before);
    cluster.kill_node(1);
    println!(
        "node n2 killed after {} returned calls",
        r.count("returned")
    );
    // The fleet goes on with two nodes of three.
    let during = r.count("returned") + RECORDERS * 2;
    r.wait(cluster, |r| r.count("returned") >= during);
    cluster.start_node(1);
    println!(
        "node n2 restarted after {} returned calls",
        r.count("returned")
    );
    r.wait(cluster, |r| r.count("returned doomed-0") >= 20);
    r.children[doomed].0.kill().unwrap();
    assert!(!r.finish(doomed));
    for p in 1..RECORDERS {
        assert!(r.finish(p), "recorder {p} completes: {:?}", r.lines[p]);
    }
    assert_eq!(r.ended().len(), (RECORDERS - 1) * 3);

    let archive = open_projection(projection);
    let report = sync_clean(&config(cluster), &archive, None);
    println!("sync: {report:?}");
    assert_eq!(report.already, 0, "no block is in the stream twice");
    check_projection(cluster, &archive, &r.returned(), &r.ended());
    drop(archive);
    // Reopened, the killed recorder's run is incomplete, not corrupt.
    let archive = open_projection(projection);
    assert_eq!(archive.run("doomed-0").unwrap().state, RunState::Incomplete);
    assert!(archive.verify().unwrap().is_ok());
    "doomed-0".into()
}

fn started(run: &str) -> reel::fact::Fact {
    reel::fact::Fact {
        seq: 0,
        at: 1,
        offset: 0,
        call: None,
        kind: FactKind::RunStarted(reel::fact::RunStarted {
            run_id: run.into(),
            session_id: None,
            identity: None,
            producer: reel::fact::Producer {
                name: "test".into(),
                version: "1".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }),
    }
}

fn progress(seq: u64) -> reel::fact::Fact {
    reel::fact::Fact {
        seq,
        at: 2,
        offset: 1,
        call: None,
        kind: FactKind::Progress(reel::fact::Progress {
            payload: json!({ "seq": seq }),
            count: seq,
            delivered: false,
        }),
    }
}

fn wait_for(cluster: &ClusterUnderTest, what: &str, until: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !until() {
        assert!(
            start.elapsed() < GUARD,
            "{what} never happened\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn retry_after_timeout(cluster: &ClusterUnderTest) {
    let mut config = config(cluster);
    config.ack_timeout = Duration::from_millis(300);
    config.offline = OfflinePolicy::Wait(GUARD);
    let store = Arc::new(NatsStore::connect(config).unwrap());
    // A batch that breaks the stream rules is refused whole, and leaves
    // nothing behind: the same stream starts right afterwards.
    let late = reel::fact::Fact {
        seq: 5,
        ..started("retry-0")
    };
    let refused = store
        .append_batch("retry-0", vec![late])
        .unwrap_err()
        .to_string();
    assert!(refused.contains("breaks a stream rule"), "{refused}");
    store
        .append_batch("retry-0", vec![started("retry-0")])
        .unwrap();
    store.flush().unwrap();
    cluster.signal_all("STOP");
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            store.append_batch("retry-0", vec![progress(1), progress(2)])?;
            store.flush()
        })
    };
    // The block is in flight, unacknowledged: it times out and goes again.
    wait_for(cluster, "a retry", || store.stats().retries >= 2);
    cluster.signal_all("CONT");
    writer.join().unwrap().unwrap();
    // Which attempt's ack comes back (the original's, a duplicate's) is
    // the server's business; that the block is stored once is ours.
    println!("retry: {:?}", store.stats());
    let end = reel::fact::Fact {
        kind: FactKind::RunEnded(reel::fact::RunEnded {
            status: RunStatus::Completed,
        }),
        ..progress(3)
    };
    store.append_batch("retry-0", vec![end]).unwrap();
    store.close_stream("retry-0").unwrap();

    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    let report = sync_clean(&config_of(cluster), &archive, None);
    assert_eq!(report.already, 0, "the retried block is in the stream once");
    let facts: Vec<_> = archive
        .facts("retry-0", ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        facts.iter().map(|f| f.seq).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(archive.run("retry-0").unwrap().state, RunState::Completed);
}

/// A live run's writer appends a fact at a time: the batches handed over
/// while the stream's block is in flight go out as one message, not one
/// each, and the stream holds every fact once, in order, chained (the
/// projection verifies against it).
fn coalesced(cluster: &ClusterUnderTest) {
    const FACTS: u64 = 400;
    let store = NatsStore::connect(config(cluster)).unwrap();
    store
        .append_batch("coalesced-0", vec![started("coalesced-0")])
        .unwrap();
    for seq in 1..FACTS {
        store
            .append_batch("coalesced-0", vec![progress(seq)])
            .unwrap();
    }
    let end = reel::fact::Fact {
        kind: FactKind::RunEnded(reel::fact::RunEnded {
            status: RunStatus::Completed,
        }),
        ..progress(FACTS)
    };
    store.append_batch("coalesced-0", vec![end]).unwrap();
    store.close_stream("coalesced-0").unwrap();
    store.flush().unwrap();
    let stats = store.stats();
    println!("coalesced: {} batches as {stats:?}", FACTS + 1);
    assert!(
        stats.blocks < FACTS / 4,
        "{} single-fact batches went out as {} messages",
        FACTS + 1,
        stats.blocks
    );

    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    sync_clean(&config(cluster), &archive, None);
    let seqs: Vec<u64> = archive
        .facts("coalesced-0", ..)
        .unwrap()
        .map(|f| f.unwrap().seq)
        .collect();
    assert_eq!(seqs, (0..=FACTS).collect::<Vec<_>>());
    assert_eq!(
        archive.run("coalesced-0").unwrap().state,
        RunState::Completed
    );
    let against = reel_nats::verify_projection(&config(cluster), &archive).unwrap();
    assert!(against.is_ok(), "{against:?}");
}

fn config_of(cluster: &ClusterUnderTest) -> NatsConfig {
    config(cluster)
}

fn offline_and_back(cluster: &mut ClusterUnderTest) {
    // The fail policy: a store that fails as soon as an ack times out.
    let mut failing = config(cluster);
    failing.offline = OfflinePolicy::Fail;
    failing.ack_timeout = Duration::from_millis(500);
    let failing = NatsStore::connect(failing).unwrap();
    failing
        .append_batch("offline-fail", vec![started("offline-fail")])
        .unwrap();
    failing.flush().unwrap();

    // The default policy, through a recorder: the call waits.
    let store = Arc::new(NatsStore::connect(config(cluster)).unwrap());
    assert_eq!(store.config().offline, OfflinePolicy::default());
    let scratch = tempfile::tempdir().unwrap();
    let archive = open_projection(scratch.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let recorder = rt.block_on(async {
        Recorder::with_archive_and_store(archive, store.clone(), recorder_config()).unwrap()
    });
    let run = rt
        .block_on(recorder.start_run(RunStart::new("offline-0")))
        .unwrap();
    // The fail policy through a recorder: its run started while the
    // cluster was up.
    let mut fail_config = config(cluster);
    fail_config.offline = OfflinePolicy::Fail;
    fail_config.ack_timeout = Duration::from_millis(500);
    let fail_store = Arc::new(NatsStore::connect(fail_config).unwrap());
    let fail_scratch = tempfile::tempdir().unwrap();
    let fail_recorder = rt.block_on(async {
        Recorder::with_archive_and_store(
            open_projection(fail_scratch.path()),
            fail_store,
            recorder_config(),
        )
        .unwrap()
    });
    let fail_run = rt
        .block_on(fail_recorder.start_run(RunStart::new("offline-fail-call")))
        .unwrap();
    for i in 0..3 {
        cluster.kill_node(i);
    }
    let err = failing
        .append_batch("offline-fail", vec![progress(1)])
        .and_then(|()| failing.flush())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("did not acknowledge"),
        "the fail policy fails, saying why: {err}"
    );
    // A call under the fail policy does not hand back a result nothing
    // says is recorded: the host gets an error naming why.
    let err = rt
        .block_on(
            fail_run
                .call("stepper", json!({ "steps": 1 }))
                .invoke(stepper),
        )
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Context(ContextError::NotRecorded { .. })),
        "the fail policy fails the call: {err}"
    );
    assert!(err.to_string().contains("did not acknowledge"), "{err}");
    let _ = rt.block_on(fail_recorder.shutdown());
    let call = run.call("stepper", json!({ "steps": 2 }));
    let call_id = call.id().to_owned();
    let pending = rt.spawn(call.invoke(stepper));
    wait_for(cluster, "the call's block waiting", || {
        store.stats().retries >= 1
    });
    assert!(!pending.is_finished(), "the call waits for the cluster");
    for i in 0..3 {
        cluster.start_node(i);
    }
    let result = rt.block_on(pending).unwrap().unwrap();
    assert_eq!(result, json!({ "steps": 2 }));
    rt.block_on(run.end(RunStatus::Completed)).unwrap();
    rt.block_on(recorder.shutdown()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    sync_clean(&config(cluster), &archive, None);
    let ended = BTreeSet::from(["offline-0".to_owned()]);
    let returned = BTreeSet::from([("offline-0".to_owned(), call_id)]);
    check_projection(cluster, &archive, &returned, &ended);
}

fn resume(cluster: &ClusterUnderTest, projection: &Path, killed: &str) {
    let archive = open_projection(projection);
    let before = archive.run_ids().count();
    let report = sync_clean(&config(cluster), &archive, None);
    println!("second sync: {report:?}");
    // Only what came after the first sync: the retry, offline and failed
    // runs, and the start of the run whose call failed.
    assert!(report.messages > 0 && report.facts > 0);
    assert_eq!(report.already, 0);
    assert_eq!(archive.run_ids().count(), before + 4);
    assert_eq!(archive.run(killed).unwrap().state, RunState::Incomplete);
    let against = reel_nats::verify_projection(&config(cluster), &archive).unwrap();
    assert!(against.is_ok(), "{against:?}");
    let again = sync_clean(&config(cluster), &archive, None);
    assert_eq!(again.messages, 0, "a caught-up projection reads nothing");
}

fn lost_delivery(cluster: &ClusterUnderTest) {
    let config = config(cluster);
    let name = "reel-sync-lost-delivery";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The consumer a projection makes, delivering the stream's first block
    // to a reader that never acknowledges it: it is delivered again only
    // after the consumer's ack wait.
    rt.block_on(async {
        let (_, consumer) = projection_consumer(&config, name, None).await;
        let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
        let lost = futures::StreamExt::next(&mut batch).await.unwrap().unwrap();
        assert_eq!(lost.info().unwrap().stream_sequence, 1);
    });
    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    let report = sync_clean(&config, &archive, Some(name));
    println!("sync after a lost delivery: {report:?}");
    assert!(report.messages > 1, "{report:?}");
    assert!(archive.verify().unwrap().is_ok());
    let against = reel_nats::verify_projection(&config, &archive).unwrap();
    assert!(
        against.is_ok(),
        "the projection matches the stream: {against:?}"
    );
    assert!(against.matching > 0);
}

/// Every message of the stream delivered to a reader that never
/// acknowledged them (a sync killed with its batch in hand): the consumer
/// has nothing left to deliver until its ack wait passes. A sync through it
/// must not take "nothing pending" for "caught up": it waits for the
/// redelivery and projects the whole stream.
fn lost_tail(cluster: &ClusterUnderTest) {
    let config = config(cluster);
    let name = "reel-sync-lost-tail";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let last = rt.block_on(async {
        let (mut stream, consumer) =
            projection_consumer(&config, name, Some(Duration::from_secs(3))).await;
        let last = stream.info().await.unwrap().state.last_sequence;
        // A consumer just made may not answer its first pulls yet (a 503
        // while its leader is placed): pulled again until every message
        // was delivered once.
        let mut delivered = 0u64;
        let start = std::time::Instant::now();
        while delivered < last {
            assert!(
                start.elapsed() < GUARD,
                "the stream never delivered up to {last}: {delivered}"
            );
            let fetched = consumer
                .fetch()
                .max_messages(1000)
                .expires(Duration::from_secs(2))
                .messages()
                .await;
            let mut batch = match fetched {
                Ok(batch) => batch,
                Err(e) => {
                    println!("lost tail: a pull failed ({e}); pulled again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            while let Some(m) = futures::StreamExt::next(&mut batch).await {
                match m {
                    Ok(m) => delivered = delivered.max(m.info().unwrap().stream_sequence),
                    Err(e) => {
                        println!("lost tail: a pull failed ({e}); pulled again");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        break;
                    }
                }
            }
        }
        let mut consumer = consumer;
        let info = consumer.info().await.unwrap();
        assert_eq!(info.num_pending, 0, "every message delivered, none acked");
        assert!(info.num_ack_pending > 0);
        last
    });
    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    let report = sync_clean(&config, &archive, Some(name));
    println!("sync after the tail was lost: {report:?} (stream up to {last})");
    assert!(report.facts > 0, "{report:?}");
    let against = reel_nats::verify_projection(&config, &archive).unwrap();
    assert!(
        against.is_ok(),
        "the projection matches the whole stream: {against:?}"
    );
    let again = sync_clean(&config, &archive, Some(name));
    assert_eq!(again.messages, 0, "{again:?}");
}

/// The durable consumer a projection named `name` makes (its ack wait the
/// server's default unless given), made ahead by a test that plays an
/// earlier reader of it; with the stream.
async fn projection_consumer(
    config: &NatsConfig,
    name: &str,
    ack_wait: Option<Duration>,
) -> (
    async_nats::jetstream::stream::Stream,
    async_nats::jetstream::consumer::PullConsumer,
) {
    use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
    let url = config.urls[0].clone();
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let stream = js.get_stream(&config.stream).await.unwrap();
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some(name.to_owned()),
            ack_policy: AckPolicy::All,
            deliver_policy: DeliverPolicy::All,
            filter_subject: format!("{}.>", config.subject_prefix),
            ack_wait: ack_wait.unwrap_or_default(),
            ..Default::default()
        })
        .await
        .unwrap();
    (stream, consumer)
}

fn busy_subject(cluster: &ClusterUnderTest) {
    use async_nats::header::{NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, NATS_MESSAGE_ID};
    use async_nats::jetstream::context::PublishErrorKind;

    let config = config(cluster);
    let store = NatsStore::connect(config.clone()).unwrap();
    let subject = reel_nats::subject_of(&config.subject_prefix, None, "busy-0", false);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let js = rt.block_on(async {
        async_nats::jetstream::new(async_nats::connect(config.urls[0].clone()).await.unwrap())
    });
    // The foreign writer: one message landed, then a burst kept in flight
    // (acks not awaited) while the store publishes.
    rt.block_on(async {
        js.publish(subject.clone(), "foreign".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    let burst = {
        let (js, subject) = (js.clone(), subject.clone());
        rt.spawn(async move {
            let mut acks = Vec::new();
            for _ in 0..200 {
                acks.push(js.publish(subject.clone(), "foreign".into()).await.unwrap());
            }
            for ack in acks {
                ack.await.unwrap();
            }
        })
    };
    let failed = store
        .append_batch("busy-0", vec![started("busy-0")])
        .and_then(|()| store.flush())
        .unwrap_err()
        .to_string();
    rt.block_on(burst).unwrap();
    assert!(
        failed.contains("being written by another recorder"),
        "a conflict, not an outage: {failed}"
    );
    println!("busy subject: {failed}; {:?}", store.stats());
    let on_subject = rt.block_on(async {
        let stream = js.get_stream(&config.stream).await.unwrap();
        let mut counts = stream.info_with_subjects(&subject).await.unwrap();
        let mut n = 0;
        while let Some(entry) = futures::StreamExt::next(&mut counts).await {
            n += entry.unwrap().1;
        }
        n
    });
    assert_eq!(
        on_subject, 201,
        "the subject holds the foreign writer's 201 messages, none of the store's"
    );

    // Eight publishes expecting the same (empty) subject at once.
    let subject = reel_nats::subject_of(&config.subject_prefix, None, "busy-1", false);
    let outcomes = rt.block_on(async {
        let mut acks = Vec::new();
        for i in 0..8 {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(NATS_MESSAGE_ID, format!("busy-1:{i}").as_str());
            headers.insert(NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, "0");
            acks.push(
                js.publish_with_headers(subject.clone(), headers, "x".into())
                    .await
                    .unwrap(),
            );
        }
        let mut out = Vec::new();
        for ack in acks {
            out.push(ack.await);
        }
        out
    });
    let landed = outcomes.iter().filter(|o| o.is_ok()).count();
    let (mut conflicts, mut in_flight) = (0, 0);
    for e in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        match (
            e.kind() == PublishErrorKind::WrongLastSequence,
            reel_nats::subject_in_flight(e),
        ) {
            (true, false) => conflicts += 1,
            (false, true) => in_flight += 1,
            _ => panic!("a refusal that is neither a conflict nor in process: {e}"),
        }
    }
    println!("eight at once: {landed} landed, {conflicts} conflicts, {in_flight} in process");
    assert_eq!(landed, 1, "exactly one of the eight lands");

    // The foreign messages are no blocks: a fresh projection refuses each
    // (201 on busy-0's subject, the one that landed on busy-1's, and the
    // three forged by "tenants apart") and projects every other run of
    // the stream.
    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    let report = reel_nats::sync(&config, &archive, None).unwrap();
    println!("sync of the whole stream: {report:?}");
    assert_eq!(report.refused, 201 + 1 + 3, "{report:?}");
    assert_eq!(archive.run("victim-0").unwrap().facts, 3);
    assert!(archive.verify().unwrap().is_ok());
}

fn started_for(run: &str, tenant: &str) -> reel::fact::Fact {
    let mut fact = started(run);
    if let FactKind::RunStarted(s) = &mut fact.kind {
        s.identity = Some(reel::fact::Identity {
            tenant: Some(tenant.into()),
            principal: None,
            conversation: None,
        });
    }
    fact
}

fn tenants_apart(cluster: &ClusterUnderTest) {
    let config = config(cluster);
    let store = NatsStore::connect(config.clone()).unwrap();
    store
        .append_batch(
            "victim-0",
            vec![started_for("victim-0", "globex"), progress(1)],
        )
        .unwrap();
    store.flush().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let archive = open_projection(dir.path());
    reel_nats::sync(&config, &archive, None).unwrap();
    assert_eq!(archive.run("victim-0").unwrap().facts, 2);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let js = rt.block_on(async {
        async_nats::jetstream::new(async_nats::connect(config.urls[0].clone()).await.unwrap())
    });
    let prefix = &config.subject_prefix;
    let publish = |subject: &str, block: Vec<u8>| {
        rt.block_on(async {
            js.publish(subject.to_owned(), block.into())
                .await
                .unwrap()
                .await
                .unwrap();
        })
    };

    // Tenant acme's writer goes on globex's run, on acme's own subject,
    // chained to the run's head as read from the stream.
    let victim = reel_nats::subject_of(prefix, Some("globex"), "victim-0", false);
    let head = rt.block_on(async {
        let stream = js.get_stream(&config.stream).await.unwrap();
        let last = stream
            .get_last_raw_message_by_subject(&victim)
            .await
            .unwrap();
        reel_archive::wire::open_block(&last.payload)
            .unwrap()
            .digest
    });
    let (block, _) = reel_archive::wire::seal_block(&[progress(2)], &head).unwrap();
    let onto = reel_nats::subject_of(prefix, Some("acme"), "victim-0", false);
    publish(&onto, block.clone());
    // globex's own writer goes on after it.
    store.append_batch("victim-0", vec![progress(2)]).unwrap();
    store.flush().unwrap();
    // A run started on acme's subject, naming globex as its tenant.
    let (forged_block, _) =
        reel_archive::wire::seal_block(&[started_for("forged-0", "globex")], &[0; 32]).unwrap();
    let forged = reel_nats::subject_of(prefix, Some("acme"), "forged-0", false);
    publish(&forged, forged_block);
    // And a run of acme's own, after both.
    store
        .append_batch("after-0", vec![started_for("after-0", "acme")])
        .unwrap();
    store.flush().unwrap();

    // One sync: both forgeries refused, every other run projected.
    let report = reel_nats::sync(&config, &archive, None).unwrap();
    assert_eq!(report.refused, 2, "{report:?}");
    let victim_facts: Vec<u64> = archive
        .facts("victim-0", ..)
        .unwrap()
        .map(|f| f.unwrap().seq)
        .collect();
    assert_eq!(
        victim_facts,
        vec![0, 1, 2],
        "globex's run has its own three facts, once: acme's block is not in it"
    );
    assert!(
        archive.run("forged-0").is_err(),
        "the forged run is not in the projection"
    );
    assert_eq!(
        archive.run("after-0").unwrap().facts,
        1,
        "acme's own run is in"
    );
    // Both named by the check against the stream.
    let checked = reel_nats::verify_projection(&config, &archive).unwrap();
    let named = |subject: &str, why: &str| {
        checked
            .problems
            .iter()
            .any(|p| p.contains(subject) && p.contains(why))
    };
    assert!(
        named(
            &onto,
            "belongs to tenant \"globex\", not to the tenant of the subject"
        ) && named(&forged, "belongs to tenant \"globex\""),
        "{:#?}",
        checked.problems
    );
    // A refused subject stays refused; the next sync reads only what is new.
    publish(&onto, block);
    let report = reel_nats::sync(&config, &archive, None).unwrap();
    assert_eq!((report.messages, report.refused, report.facts), (1, 1, 0));
    assert_eq!(archive.run("victim-0").unwrap().facts, 3);
}
