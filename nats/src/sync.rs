//! The projection: the cluster's stream into a local archive (`reel sync`),
//! and its check against the stream (`reel verify --nats`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt as _;

use reel_archive::wire::open_block;
use reel_archive::{Archive, ArchiveError, Digest};
use reel_core::run::RunRecord;

use crate::store::Cluster;
use crate::subject::{stream_of_subject, subject_token, tenant_token_of_subject};
use crate::{NatsConfig, NatsError};

/// The projection's own state, beside the archive's database: the head of
/// each stream's chain as the stream holds it (the archive seals its own
/// blocks), so a block delivered after a restart is checked against the
/// block before it.
const STATE_FILE: &str = "nats-sync.json";

/// What one [`sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Messages read from the stream.
    pub messages: u64,
    /// Facts appended to the archive.
    pub facts: u64,
    /// Blocks already in the archive (delivered again after a restart).
    pub already: u64,
    /// Artifacts copied into the archive.
    pub artifacts: u64,
    /// Streams touched.
    pub streams: u64,
    /// Messages refused: damaged, or breaking their run's chain, rules or
    /// tenant (each said by a warning), and the later messages of a run
    /// refused so ([`Refused`]). Every other run is projected.
    pub refused: u64,
}

/// Where a subject of the stream stopped being projected: the first
/// message refused on it, and why. Its run stays as projected up to there;
/// the subject's later messages are refused too (a run's chain cannot go
/// on past a block it does not have). Refusals are by subject, tenant and
/// run: a message another tenant's writer published for a run stops that
/// writer's subject, not the run's own. Kept with the projection's state,
/// so a later sync keeps refusing them, and listed by
/// [`verify_projection`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refused {
    /// The stream sequence of the first message refused.
    pub seq: u64,
    /// The run (or call outside any run) its subject names.
    pub run: String,
    /// Why.
    pub reason: String,
}

/// Projects the cluster's stream into `archive`, up to the stream's last
/// message when the sync began, through a durable consumer (named
/// `consumer`, or by default `reel-sync-<id>` after the projection's own
/// id, kept beside its database: one consumer per projection, which
/// remembers how far the projection got, so a restarted sync resumes
/// there).
///
/// Each block is checked as it lands: its checksum, its link to the
/// stream's previous block (the hash chain), the seqs and the stream rules
/// (the archive's own append checks). A block the archive has already (a
/// redelivery after a crash between the archive's flush and the
/// consumer's ack) is recognised by its seqs and skipped, so a sync is
/// idempotent. A message that fails those checks (damaged, breaking its
/// run's chain or rules, or published on another tenant's subject than its
/// run's) is refused, with a warning naming it, and so are its run's later
/// messages ([`Refused`], counted in [`SyncReport::refused`]); every other
/// run goes on being projected, so one writer's bad message does not stop
/// the others'. A failure of the archive itself (its disk) stops the sync
/// with [`NatsError::Projection`]; nothing after it is acknowledged.
pub fn sync(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
) -> Result<SyncReport, NatsError> {
    let rt = runtime(config)?;
    rt.block_on(project(config, archive, consumer, None))
}

/// Projects the stream into `archive` as [`sync`] does, then keeps
/// following it: each block is landed (checked, appended, flushed, and
/// acknowledged to the durable consumer) within a fetch's wait of its
/// publish, and the artifacts its facts refer to are copied as they land.
/// Returns once `stop` completes (after the batch in hand is landed and
/// acknowledged, so the next sync resumes right after it), with what was
/// projected.
///
/// While following, an unreachable cluster (when the follower starts, or
/// later) is waited out, said once per outage (a `tracing` warning), not
/// an error: the projection resumes when the cluster returns. A refused
/// message is refused as by [`sync`], and the follower goes on. Runs on the caller's tokio runtime;
/// whoever holds the archive meanwhile can serve it live
/// (`reel_recorder::live::LiveServer`), which is how `reel tail` follows
/// the stream through the projection.
pub async fn follow(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
    stop: impl std::future::Future<Output = ()> + Send,
) -> Result<SyncReport, NatsError> {
    let stop: Stop<'_> = Box::pin(stop);
    project(config, archive, consumer, Some(stop)).await
}

/// What ends a [`follow`].
type Stop<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// How long a fetch waits for the stream's next block while following:
/// the latency a live reader sees, and how long a stop can take.
const FOLLOW_WAIT: Duration = Duration::from_millis(250);

/// How many landed batches a referenced artifact may stay missing from the
/// cluster's object store before the follower stops asking for it (a
/// `sha256:` string in a fact that names no artifact), until the final
/// full copy.
const ARTIFACT_TRIES: u32 = 40;

pub(crate) fn runtime(config: &NatsConfig) -> Result<tokio::runtime::Runtime, NatsError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| NatsError::Cluster {
            urls: config.shown(),
            what: "starting the client's runtime",
            detail: e.to_string(),
        })
}

fn state_path(archive: &Archive) -> PathBuf {
    archive.dir().join(STATE_FILE)
}

/// The projection's state: its own id (naming its durable consumer) and
/// the chain heads.
struct State {
    id: String,
    heads: HashMap<String, (u64, Digest)>,
    /// By subject.
    refused: BTreeMap<String, Refused>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredState {
    id: String,
    heads: BTreeMap<String, (u64, String)>,
    /// Subjects refused from a message on (absent in a projection's state
    /// from before refusals were kept).
    #[serde(default)]
    refused: BTreeMap<String, Refused>,
}

fn new_id(archive: &Archive) -> String {
    let seed = format!(
        "{:?}{}{}",
        std::time::SystemTime::now(),
        std::process::id(),
        archive.dir().display()
    );
    hex::encode(&Sha256::digest(seed.as_bytes())[..8])
}

fn load_state(archive: &Archive) -> Result<State, NatsError> {
    let path = state_path(archive);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(State {
                id: new_id(archive),
                heads: HashMap::new(),
                refused: BTreeMap::new(),
            })
        }
        Err(e) => return Err(NatsError::Projection(format!("{}: {e}", path.display()))),
    };
    let damaged = |detail: String| {
        NatsError::Projection(format!(
            "{}: {detail}; remove the projection's directory and sync again",
            path.display()
        ))
    };
    let stored: StoredState = serde_json::from_str(&text).map_err(|e| damaged(e.to_string()))?;
    if stored.id.is_empty() || !stored.id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(damaged("the projection's id is not alphanumeric".into()));
    }
    let heads = stored
        .heads
        .into_iter()
        .map(|(k, (seq, v))| {
            let d = reel_archive::parse_digest(&format!("sha256:{v}"))
                .ok_or_else(|| damaged(format!("the head of {k:?} is not a digest")))?;
            Ok((k, (seq, d)))
        })
        .collect::<Result<_, NatsError>>()?;
    Ok(State {
        id: stored.id,
        heads,
        refused: stored.refused,
    })
}

fn save_state(archive: &Archive, state: &State) -> Result<(), NatsError> {
    let map = StoredState {
        id: state.id.clone(),
        heads: state
            .heads
            .iter()
            .map(|(k, (seq, d))| (k.clone(), (*seq, hex::encode(d))))
            .collect(),
        refused: state.refused.clone(),
    };
    let path = state_path(archive);
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        let f = std::fs::File::create(&tmp)?;
        serde_json::to_writer(&f, &map)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| NatsError::Projection(format!("{}: {e}", path.display())))
}

async fn project(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
    mut stop: Option<Stop<'_>>,
) -> Result<SyncReport, NatsError> {
    let following = stop.is_some();
    let mut report = SyncReport::default();
    let mut state = load_state(archive)?;
    // Whether the follower said the cluster is unreachable (said again only
    // after it answered).
    let mut warned = false;
    // A follower started while the cluster is unreachable waits for it,
    // as it waits for one that goes away later (one warning).
    let (mut cluster, last) = loop {
        let reached = async {
            // Once the follower said it waits, the setup's own retries
            // are part of that wait.
            let mut cluster = Cluster::connect_saying(config.clone(), !warned).await?;
            let info = cluster.stream.info().await.map(|i| i.state.last_sequence);
            let last = info.map_err(|e| cluster.error("reading the stream's state", e))?;
            Ok::<_, NatsError>((cluster, last))
        }
        .await;
        match reached {
            Ok(reached) => break reached,
            Err(e) if following => {
                if stopped(&mut stop) {
                    return Ok(report);
                }
                unreachable_while_following(&e, &mut warned).await;
            }
            Err(e) => return Err(e),
        }
    };
    let consumer_name = match consumer {
        Some(name) => name.to_owned(),
        None => format!("reel-sync-{}", state.id),
    };
    let consumer_name = consumer_name.as_str();
    // Right after a node or the cluster restarts, the consumer's leader may
    // still be elected: waited out as the store waits (the offline policy).
    let budget = match config.offline {
        crate::OfflinePolicy::Wait(d) => d,
        crate::OfflinePolicy::Fail => Duration::ZERO,
    };
    let start = std::time::Instant::now();
    let consumer: jetstream::consumer::PullConsumer = loop {
        let made = cluster
            .stream
            .get_or_create_consumer(
                consumer_name,
                pull::Config {
                    durable_name: Some(consumer_name.to_owned()),
                    ack_policy: AckPolicy::All,
                    deliver_policy: DeliverPolicy::All,
                    filter_subject: format!("{}.>", config.subject_prefix),
                    ..Default::default()
                },
            )
            .await;
        match made {
            Ok(c) => break c,
            Err(e) if following => {
                if stopped(&mut stop) {
                    return Ok(report);
                }
                unreachable_while_following(&e, &mut warned).await;
            }
            Err(e) if start.elapsed() < budget => {
                tracing::warn!("reel-nats: creating the projection's consumer: {e}; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(cluster.error("creating the projection's consumer", e)),
        }
    };
    // The id is kept from the first sync on, with its consumer.
    save_state(archive, &state)?;
    let mut next: HashMap<String, Landed> = HashMap::new();
    let mut touched = std::collections::HashSet::new();
    let mut seen = consumer_floor(&consumer).await;
    if warned {
        tracing::warn!("reel-nats: following the stream again");
        warned = false;
    }
    // Artifacts the landed facts refer to that the archive lacks, with the
    // batches they have been asked for (following only).
    let mut wanted: HashMap<String, u32> = HashMap::new();
    loop {
        let done = if following {
            stopped(&mut stop)
        } else {
            seen >= last
        };
        if done {
            break;
        }
        let wait = if following {
            FOLLOW_WAIT
        } else {
            Duration::from_secs(2)
        };
        let fetched = consumer
            .fetch()
            .max_messages(256)
            .expires(wait)
            .messages()
            .await;
        let mut batch = match fetched {
            Ok(b) => b,
            Err(e) if following => {
                unreachable_while_following(&e, &mut warned).await;
                continue;
            }
            Err(e) => return Err(cluster.error("fetching from the stream", e)),
        };
        let mut last_msg = None;
        while let Some(msg) = batch.next().await {
            let msg = match msg {
                Ok(m) => m,
                Err(e) if following => {
                    unreachable_while_following(&e, &mut warned).await;
                    break;
                }
                Err(e) => return Err(cluster.error("fetching from the stream", e)),
            };
            if warned {
                tracing::warn!("reel-nats: following the stream again");
                warned = false;
            }
            let seq = msg.info().map(|i| i.stream_sequence).unwrap_or(0);
            report.messages += 1;
            let subject = msg.subject.to_string();
            let Some((stream, _)) = stream_of_subject(&config.subject_prefix, &subject) else {
                tracing::warn!(
                    "reel-nats: sync skips message {seq} on {subject}: not a reel stream's subject"
                );
                seen = seen.max(seq);
                last_msg = Some(msg);
                continue;
            };
            if state.refused.contains_key(&subject) {
                // The subject stopped being projected at an earlier message.
                report.refused += 1;
                seen = seen.max(seq);
                last_msg = Some(msg);
                continue;
            }
            let landed = match land(
                archive,
                &mut state.heads,
                &mut next,
                &stream,
                &subject,
                seq,
                &msg.payload,
                &mut report,
                true,
            ) {
                Ok(Some(refers)) => Ok(refers),
                // Ahead of the projection: the stream's blocks before it
                // were delivered and lost (the cluster went away with them
                // in flight), and the consumer delivers them again only
                // after its ack wait. They are read from the stream, then
                // this one lands.
                Ok(None) => {
                    let floor = consumer_floor(&consumer).await;
                    let filled = fill_gap(
                        &cluster,
                        archive,
                        &mut state.heads,
                        &mut next,
                        (&stream, &subject),
                        (floor, seq),
                        &mut report,
                    )
                    .await;
                    filled.and_then(|mut refers| {
                        let landed = land(
                            archive,
                            &mut state.heads,
                            &mut next,
                            &stream,
                            &subject,
                            seq,
                            &msg.payload,
                            &mut report,
                            false,
                        )?;
                        refers.extend(landed.unwrap_or_default());
                        Ok(refers)
                    })
                }
                Err(e) => Err(e),
            };
            let refers = match landed {
                Ok(refers) => refers,
                Err(Landing::Failed(e @ NatsError::Cluster { .. })) if following => {
                    // Not landed, not acknowledged: delivered again.
                    unreachable_while_following(&e, &mut warned).await;
                    break;
                }
                Err(Landing::Failed(e)) => return Err(e),
                // This message, or one of the subject's before it that the
                // gap was filled with (refused at its own sequence): this
                // one cannot follow it.
                Err(Landing::Refused { seq: at, reason }) => {
                    refuse(&mut state, &mut report, &stream, &subject, at, reason);
                    seen = seen.max(seq);
                    last_msg = Some(msg);
                    continue;
                }
            };
            if following {
                for digest in refers {
                    wanted.entry(digest).or_insert(0);
                }
            }
            touched.insert(stream);
            seen = seen.max(seq);
            last_msg = Some(msg);
        }
        let Some(msg) = last_msg else {
            if following {
                // A fetch sent while the connection is down does not fail:
                // it comes back empty when its wait is over, as it does
                // from a quiet stream. The connection tells them apart.
                let state = cluster.js.client().connection_state();
                if state != async_nats::connection::State::Connected {
                    let why = "no connection to any of its nodes (reconnecting)";
                    unreachable_while_following(&why, &mut warned).await;
                }
                continue;
            }
            // Nothing came within the wait: the consumer may have caught up
            // with a stream that lost its last messages (limits).
            if consumer_floor(&consumer).await >= last || pending(&consumer).await == 0 {
                break;
            }
            continue;
        };
        archive
            .flush()
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        save_state(archive, &state)?;
        let acked = msg.double_ack().await;
        match acked {
            Ok(()) => {}
            // Unacknowledged blocks are delivered again, and recognised.
            Err(e) if following => unreachable_while_following(&e, &mut warned).await,
            Err(e) => return Err(cluster.error("acknowledging the projected blocks", e)),
        }
        if !wanted.is_empty() {
            report.artifacts += copy_wanted(&mut cluster, archive, &mut wanted).await?;
        }
    }
    // Waited for as the consumer is (a node just gone may hold the
    // bucket's leader): every artifact is there before the sync says so.
    // A follower told to stop waits a moment at most: in an outage it
    // would wait the whole offline wait for the artifacts, which the next
    // sync copies anyway (it copies every one the projection lacks).
    let start = std::time::Instant::now();
    let budget = if following {
        budget.min(STOP_GRACE)
    } else {
        budget
    };
    let mut said = false;
    loop {
        match copy_artifacts(&mut cluster, archive, &mut report.artifacts).await {
            Ok(()) => break,
            Err(e @ NatsError::Cluster { .. }) if following && start.elapsed() >= budget => {
                tracing::warn!(
                    "reel-nats: stopping with artifacts not copied yet ({e}); the next `reel sync` copies them"
                );
                break;
            }
            Err(e @ NatsError::Cluster { .. }) if start.elapsed() < budget => {
                if !said {
                    tracing::warn!("reel-nats: {e}; trying again");
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e),
        }
    }
    archive
        .flush()
        .map_err(|e| NatsError::Projection(e.to_string()))?;
    report.streams = touched.len() as u64;
    Ok(report)
}

/// How long a stopped follower's final artifact copy may wait for the
/// cluster.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Whether a follower's stop has come (a sync has none).
fn stopped(stop: &mut Option<Stop<'_>>) -> bool {
    stop.as_mut()
        .is_some_and(|stop| futures::FutureExt::now_or_never(stop.as_mut()).is_some())
}

async fn consumer_floor(consumer: &jetstream::consumer::PullConsumer) -> u64 {
    let mut c = consumer.clone();
    c.info()
        .await
        .map(|i| i.ack_floor.stream_sequence)
        .unwrap_or(0)
}

async fn pending(consumer: &jetstream::consumer::PullConsumer) -> u64 {
    let mut c = consumer.clone();
    c.info().await.map(|i| i.num_pending).unwrap_or(0)
}

/// Lands one block (stream message `seq` on `subject`) in the archive:
/// the digests its facts refer to, or, with `ahead_ok`, `None` for a block
/// past the projection's head of its stream (the blocks between are
/// missing); without it, that is damage. Damage, a broken chain or rule,
/// or another tenant's subject is [`Landing::Refused`]; the archive's own
/// failure is [`Landing::Failed`].
#[allow(clippy::too_many_arguments)]
fn land(
    archive: &Archive,
    heads: &mut HashMap<String, (u64, Digest)>,
    next: &mut HashMap<String, Landed>,
    stream: &str,
    subject: &str,
    seq: u64,
    payload: &[u8],
    report: &mut SyncReport,
    ahead_ok: bool,
) -> Result<Option<Vec<String>>, Landing> {
    // The message's own fault: it is refused, the sync goes on.
    let damage = |reason: String| Landing::Refused { seq, reason };
    // The projection's: the sync stops.
    let failed = |detail: String| {
        Landing::Failed(NatsError::Projection(format!(
            "stream message {seq} ({subject}, run {stream:?}): {detail}"
        )))
    };
    let block = open_block(payload).map_err(|e| damage(format!("damaged block: {e}")))?;
    let Some(first) = block.facts.first().map(|f| f.seq) else {
        return Err(damage("empty block".into()));
    };
    let end = first + block.facts.len() as u64;
    // Where the run stands, and its tenant's subject token: known from an
    // earlier block of this sync, else read from the projection once.
    let (have, token) = match next.get(stream) {
        Some(l) => (l.next, Some(l.token.clone())),
        None => match archive.run(stream) {
            Ok(r) => (r.facts, Some(subject_token(r.tenant().unwrap_or("")))),
            Err(ArchiveError::UnknownRun { .. }) => (0, None),
            Err(e) => return Err(failed(e.to_string())),
        },
    };
    // A run's blocks come on its own tenant's subjects only: a cluster that
    // lets each tenant's recorders publish under their own tenant's
    // subjects keeps tenants apart in the projection too (a block on one
    // tenant's subject never starts, or goes on, another tenant's run).
    let tenant = if first == 0 {
        block
            .facts
            .first()
            .and_then(RunRecord::from_first)
            .map(|r| r.tenant().map(str::to_owned))
    } else {
        None
    };
    let token = match &tenant {
        Some(t) => Some(subject_token(t.as_deref().unwrap_or(""))),
        None => token,
    };
    if let Some(token) = &token {
        if tenant_token_of_subject(subject) != Some(token.as_str()) {
            let owner = match (&tenant, token.as_str()) {
                (Some(Some(t)), _) => format!("tenant {t:?}"),
                (Some(None), _) | (None, "_") => "no tenant".to_owned(),
                (None, token) => match crate::subject::token_of(token) {
                    Some(t) => format!("tenant {t:?}"),
                    None => format!("tenant token {token:?}"),
                },
            };
            return Err(damage(format!(
                "the run belongs to {owner}, not to the tenant of the subject it was published on: \
                 a writer published into another tenant's run"
            )));
        }
    }
    // The chain's head as the projection knows it: the seq the next block
    // starts at, and the digest that block must name as its previous.
    let head = if first == 0 {
        Some((0, [0; 32]))
    } else {
        heads.get(stream).copied()
    };
    let links = head == Some((first, block.prev));
    let mut refers = Vec::new();
    if end <= have {
        // Landed before (a redelivery, or another consumer's): the chain
        // was checked then; a head left behind by a crash catches up.
        report.already += 1;
        if links {
            heads.insert(stream.to_owned(), (end, block.digest));
        }
    } else if first == have {
        if !links {
            return Err(damage(match head {
                Some((at, _)) if at == first => format!(
                    "the block's previous digest does not match the block before it (hash chain broken at seq {first})"
                ),
                _ => format!("the projection does not know the block before seq {first}"),
            }));
        }
        let n = block.facts.len() as u64;
        refers = reel_core::tape::referenced_digests(&block.facts)
            .into_iter()
            .collect();
        archive
            .append_projected(stream, block.facts)
            .map_err(|e| match e {
                // The block's facts break the run's rules.
                ArchiveError::InvalidFacts { .. }
                | ArchiveError::RunExists { .. }
                | ArchiveError::RunClosed { .. }
                | ArchiveError::Encode { .. } => damage(e.to_string()),
                e => failed(e.to_string()),
            })?;
        report.facts += n;
        heads.insert(stream.to_owned(), (end, block.digest));
    } else if ahead_ok && first > have {
        return Ok(None);
    } else {
        return Err(damage(format!(
            "the block holds seqs {first}..{end} where the projection stands at {have}"
        )));
    }
    if let Some(token) = token {
        next.insert(
            stream.to_owned(),
            Landed {
                next: have.max(end),
                token,
            },
        );
    }
    Ok(Some(refers))
}

/// A run this sync has landed blocks of: the seq its next block starts
/// at, and its tenant's subject token (see [`subject_token`]).
struct Landed {
    next: u64,
    token: String,
}

/// Why a message did not land.
enum Landing {
    /// The message is at fault (see [`Refused`]): its run takes nothing
    /// from it on; the sync goes on.
    Refused {
        /// The message's stream sequence.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// The projection or the cluster failed: the sync stops (or, for a
    /// cluster a follower cannot reach, waits).
    Failed(NatsError),
}

/// Refuses stream message `seq` and every later one on `subject`, saying
/// so once.
fn refuse(
    state: &mut State,
    report: &mut SyncReport,
    stream: &str,
    subject: &str,
    seq: u64,
    reason: String,
) {
    report.refused += 1;
    tracing::warn!(
        "reel-nats: refused stream message {seq} ({subject}, run {stream:?}): {reason}; \
         nothing from it on that subject is projected, every other subject goes on \
         (`reel verify --nats` lists it; once the message is removed from the stream, \
         e.g. with `nats stream rmm`, a fresh projection takes the subject whole)"
    );
    state.refused.insert(
        subject.to_owned(),
        Refused {
            seq,
            run: stream.to_owned(),
            reason,
        },
    );
}

/// Lands the blocks on `subject` from past the consumer's ack floor up to
/// (not including) stream message `before`, read from the stream itself
/// (from its leader): the blocks of a stream the consumer delivered and
/// lost, which it would deliver again only after its ack wait. A block
/// landed already is skipped. Every block the consumer has not had
/// acknowledged is past its ack floor, and acknowledged ones are landed.
async fn fill_gap(
    cluster: &Cluster,
    archive: &Archive,
    heads: &mut HashMap<String, (u64, Digest)>,
    next: &mut HashMap<String, Landed>,
    (stream, subject): (&str, &str),
    (floor, before): (u64, u64),
    report: &mut SyncReport,
) -> Result<Vec<String>, Landing> {
    let mut refers = Vec::new();
    let mut from = floor + 1;
    while from < before {
        let found = cluster
            .stream
            .get_first_raw_message_by_subject(subject, from)
            .await;
        let msg = match found {
            Ok(msg) => msg,
            Err(e)
                if matches!(
                    e.kind(),
                    jetstream::stream::LastRawMessageErrorKind::NoMessageFound
                ) =>
            {
                break
            }
            Err(e) => {
                return Err(Landing::Failed(
                    cluster.error("reading blocks the consumer did not deliver", e),
                ))
            }
        };
        if msg.sequence >= before {
            break;
        }
        report.messages += 1;
        let landed = land(
            archive,
            heads,
            next,
            stream,
            subject,
            msg.sequence,
            &msg.payload,
            report,
            false,
        )?;
        refers.extend(landed.unwrap_or_default());
        from = msg.sequence + 1;
    }
    Ok(refers)
}

/// Says (once per outage) that the cluster did not answer a follower, and
/// waits a little before it asks again (the client reconnects meanwhile).
async fn unreachable_while_following(e: &dyn std::fmt::Display, warned: &mut bool) {
    if !*warned {
        tracing::warn!("reel-nats: following the stream: {e}; waiting for the cluster");
        *warned = true;
    }
    tokio::time::sleep(FOLLOW_WAIT).await;
}

/// Copies the artifacts in `wanted` that the cluster's object store has
/// and the archive lacks; those it does not have yet stay wanted, for up
/// to [`ARTIFACT_TRIES`] batches.
async fn copy_wanted(
    cluster: &mut Cluster,
    archive: &Archive,
    wanted: &mut HashMap<String, u32>,
) -> Result<u64, NatsError> {
    let mut copied = 0;
    let digests: Vec<String> = wanted.keys().cloned().collect();
    for digest in digests {
        let have = archive
            .artifact(&digest)
            .map_err(|e| NatsError::Projection(e.to_string()))?
            .is_some();
        if have || copy_one(cluster, archive, &digest).await? {
            copied += u64::from(!have);
            wanted.remove(&digest);
        } else if let Some(tries) = wanted.get_mut(&digest) {
            *tries += 1;
            if *tries >= ARTIFACT_TRIES {
                wanted.remove(&digest);
            }
        }
    }
    Ok(copied)
}

/// Copies one artifact from the cluster's object store, checking its
/// digest; false when the store does not have it (or did not answer).
async fn copy_one(
    cluster: &mut Cluster,
    archive: &Archive,
    digest: &str,
) -> Result<bool, NatsError> {
    let Some(name) = digest.strip_prefix("sha256:") else {
        return Ok(false);
    };
    let Ok(mut object) = cluster.artifacts.get(name).await else {
        return Ok(false);
    };
    let mut bytes = Vec::new();
    if object.read_to_end(&mut bytes).await.is_err() {
        return Ok(false);
    }
    if hex::encode(Sha256::digest(&bytes)) != name {
        return Err(NatsError::Projection(format!(
            "artifact {digest}: its bytes do not have that digest"
        )));
    }
    archive
        .put_artifact(&bytes)
        .map_err(|e| NatsError::Projection(e.to_string()))?;
    Ok(true)
}

/// Copies every artifact of the cluster's object store the archive lacks,
/// counting them in `copied` (idempotent: tried again, it copies the rest).
async fn copy_artifacts(
    cluster: &mut Cluster,
    archive: &Archive,
    copied: &mut u64,
) -> Result<(), NatsError> {
    let mut list = cluster
        .artifacts
        .list()
        .await
        .map_err(|e| cluster.error("listing the artifacts", e))?;
    let mut names = Vec::new();
    while let Some(info) = list.next().await {
        let info = info.map_err(|e| cluster.error("listing the artifacts", e))?;
        if !info.deleted {
            names.push(info.name);
        }
    }
    for name in names {
        let digest = format!("sha256:{name}");
        if archive
            .artifact(&digest)
            .map_err(|e| NatsError::Projection(e.to_string()))?
            .is_some()
        {
            continue;
        }
        let mut object = cluster
            .artifacts
            .get(&name)
            .await
            .map_err(|e| cluster.error("reading an artifact", e))?;
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| cluster.error("reading an artifact", e))?;
        if hex::encode(Sha256::digest(&bytes)) != name {
            return Err(NatsError::Projection(format!(
                "artifact {digest}: its bytes do not have that digest"
            )));
        }
        archive
            .put_artifact(&bytes)
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        *copied += 1;
    }
    Ok(())
}

/// What [`verify_projection`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyProjection {
    /// Streams the cluster holds.
    pub streams: u64,
    /// Streams whose last block's facts the projection holds, identical.
    pub matching: u64,
    /// What differs, one line each (a stream behind, a fact that differs,
    /// the archive's own damage).
    pub problems: Vec<String>,
}

impl VerifyProjection {
    /// True when the projection holds every stream up to its last block.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the projection in `archive` against the cluster's stream: every
/// subject's last block is in the projection, fact for fact, and the
/// archive's own chains verify. A subject the sync refused ([`Refused`])
/// is a problem, named with the message and why.
pub fn verify_projection(
    config: &NatsConfig,
    archive: &Archive,
) -> Result<VerifyProjection, NatsError> {
    let rt = runtime(config)?;
    rt.block_on(async {
        let cluster = Cluster::connect(config.clone()).await?;
        let mut out = VerifyProjection::default();
        let mut subjects = Vec::new();
        {
            let mut info = cluster
                .stream
                .info_with_subjects(format!("{}.>", config.subject_prefix))
                .await
                .map_err(|e| cluster.error("listing the stream's subjects", e))?;
            while let Some(s) = info.next().await {
                let (subject, _) =
                    s.map_err(|e| cluster.error("listing the stream's subjects", e))?;
                subjects.push(subject);
            }
        }
        subjects.sort();
        let refused = load_state(archive)?.refused;
        for subject in subjects {
            let Some((stream, _)) = stream_of_subject(&config.subject_prefix, &subject) else {
                continue;
            };
            out.streams += 1;
            if let Some(r) = refused.get(&subject) {
                out.problems.push(format!(
                    "{stream:?}: the sync refused stream message {} on {subject}, and everything after it there: {}",
                    r.seq, r.reason
                ));
                continue;
            }
            let msg = cluster
                .stream
                .get_last_raw_message_by_subject(&subject)
                .await
                .map_err(|e| cluster.error("reading a subject's last block", e))?;
            let block = match open_block(&msg.payload) {
                Ok(b) => b,
                Err(e) => {
                    out.problems.push(format!(
                        "{stream:?}: the stream's last block is damaged: {e}"
                    ));
                    continue;
                }
            };
            let Some(first) = block.facts.first().map(|f| f.seq) else {
                continue;
            };
            let end = first + block.facts.len() as u64;
            let have: Result<Vec<_>, _> = match archive.facts(&stream, first..end) {
                Ok(f) => f.collect(),
                Err(e) => Err(e),
            };
            match have {
                Ok(have) if have.len() as u64 == end - first => {
                    let same = have.iter().zip(&block.facts).all(|(a, b)| {
                        let (mut x, mut y) = (Vec::new(), Vec::new());
                        reel_archive::encode_fact(a, &mut x).is_ok()
                            && reel_archive::encode_fact(b, &mut y).is_ok()
                            && x == y
                    });
                    if same {
                        out.matching += 1;
                    } else {
                        out.problems.push(format!(
                            "{stream:?}: facts {first}..{end} differ from the stream's"
                        ));
                    }
                }
                Ok(have) => out.problems.push(format!(
                    "{stream:?}: the projection holds {} of facts {first}..{end}: run `reel sync`",
                    have.len()
                )),
                Err(e) => out.problems.push(format!(
                    "{stream:?}: not in the projection ({e}): run `reel sync`"
                )),
            }
        }
        let report = archive
            .verify()
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        if !report.is_ok() {
            out.problems.push(format!(
                "the projection's archive does not verify: {report:?}"
            ));
        }
        Ok(out)
    })
}
