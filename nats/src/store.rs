//! [`NatsStore`]: the write pipeline's store over JetStream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::header::{NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, NATS_MESSAGE_ID};
use async_nats::jetstream::{self, context::PublishErrorKind, kv, object_store, stream};
use async_nats::HeaderMap;
use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use reel_archive::{Digest, Store, StoreError, StreamFailure};
use reel_core::fact::{Fact, FactKind};
use reel_core::rules::StreamRules;
use reel_core::run::RunRecord;

use crate::config::{NatsConfig, OfflinePolicy};
use crate::subject::{kv_key, subject_of, subject_token};
use crate::NatsError;

/// The largest block one message carries (the server's default
/// `max_payload` is 1 MiB); a larger batch goes as several blocks, each
/// its own message, chained.
const MAX_BLOCK: usize = 512 * 1024;

/// How long a publish keeps retrying while the server says the subject's
/// previous message is still in process (see [`subject_in_flight`])
/// before it is treated as any other failed attempt (the offline policy,
/// with its warning).
const IN_FLIGHT_GRACE: Duration = Duration::from_secs(1);

/// Whether a publish failed only because the stream leader had not yet
/// applied the subject's previous message (JetStream error 10164, "wrong
/// last sequence" without a sequence). A clustered leader refuses an
/// expected-last-subject-sequence check while an earlier message of the
/// subject is in process, and the earlier message's ack can reach the
/// client before the leader has cleared it: a writer that publishes its
/// next block as soon as the previous one is acknowledged meets this in
/// about one block in a few thousand. It is no conflict: the same publish
/// sent again settles as landed, or as a real conflict (10071, which
/// names the subject's last sequence) when another writer's message was
/// the one in process.
pub fn subject_in_flight(e: &jetstream::context::PublishError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<jetstream::Error>())
        .is_some_and(|e| {
            e.error_code() == jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE_CONSTANT
        })
}

/// What a store did, for tests and the host's diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Blocks the cluster acknowledged.
    pub blocks: u64,
    /// Publishes sent again after a failed or timed-out attempt.
    pub retries: u64,
    /// Acks the server marked duplicate (a retry of a block it had).
    pub duplicates: u64,
    /// Of `retries`: publishes sent again because the subject's previous
    /// message was still in process on the leader ([`subject_in_flight`]).
    pub in_flight: u64,
}

#[derive(Default)]
struct Counters {
    blocks: AtomicU64,
    retries: AtomicU64,
    duplicates: AtomicU64,
    in_flight: AtomicU64,
}

/// The cluster handles, shared by the store's calls.
pub(crate) struct Cluster {
    pub(crate) config: NatsConfig,
    pub(crate) js: jetstream::Context,
    pub(crate) stream: stream::Stream,
    pub(crate) runs: kv::Store,
    pub(crate) artifacts: object_store::ObjectStore,
}

/// Where a stream's chain stands once every block published so far is
/// acknowledged.
#[derive(Debug, Clone, Copy)]
struct Head {
    /// The digest of the stream's last block (its chain's head).
    digest: Digest,
    /// The stream sequence of the subject's last message (0: none yet):
    /// the next publish expects it (optimistic append).
    last: u64,
}

/// The stream's chain of publishing tasks: each waits for the one before
/// (its ack gives the expected sequence and its block the previous
/// digest), so the writer never waits for an ack to hand over a batch.
type Tail = tokio::task::JoinHandle<Result<Head, NatsError>>;

/// One stream this store writes.
struct StreamState {
    subject: String,
    /// The head once `tail` (if any) has settled.
    head: Head,
    rules: StreamRules,
    record: RunRecord,
    outside: bool,
    ended: bool,
    /// The last publishing task of the stream: it resolves to the head once
    /// every block handed over so far is acknowledged.
    tail: Option<Tail>,
    /// Why the stream takes nothing more, after a block failed (the error
    /// itself is reported once, by the append or flush that met it).
    broken: Option<String>,
    /// Whether a flush has reported `broken`: a failure an append met is
    /// reported by the next flush too, so a flush that began after that
    /// append never answers for the stream as if it were whole.
    flush_told: bool,
    /// The writer is done with it: its record is stored after its last
    /// block, and it is forgotten at the next flush.
    closed: bool,
}

/// Records into a NATS JetStream cluster: see the crate docs for the
/// layout.
///
/// - **Same blocks, same chain:** each batch is sealed as the archive
///   seals it ([`reel_archive::wire::seal_block`]), chained to the
///   stream's previous block, and published as one message to the
///   stream's subject.
/// - **One writer per run:** a new stream is claimed in the KV bucket
///   (`create`, which fails when the key exists), and every publish
///   carries `Nats-Expected-Last-Subject-Sequence` (the subject's last
///   sequence this writer saw), so a second writer of a run gets
///   [`NatsError::Conflict`] and the two never interleave.
/// - **Idempotent retries:** every publish carries `Nats-Msg-Id` = the
///   stream's token and the block's first seq, so a retry of a block the
///   server has is acknowledged as a duplicate, never stored twice.
/// - **Durability:** `append_batch` checks the batch against the stream
///   rules and hands it to a task of the store's runtime, which seals it
///   and publishes it (one block in flight per subject: a stream's next
///   task waits for its previous block's ack, which gives the expected
///   sequence, without the writer waiting; different runs go out
///   concurrently), and `flush` returns once every block is acknowledged
///   by the R3 stream (a majority of its replicas has it; with
///   `sync_interval: always`, on their disks), so a call's result, handed
///   back after the writer's flush, is never ahead of its facts.
/// - **Failures stay with their stream:** a conflict or an expired
///   offline wait breaks only the stream whose block it was: the error is
///   returned by the append that meets it and by the next flush (as
///   [`StoreError::Streams`] naming the stream, so the recorder fails that
///   run alone), that stream's later batches are refused, and every other
///   stream goes on. An artifact the cluster did not take in time fails
///   the stream it was for ([`Store::put_artifact_of`]).
/// - **Offline:** see [`OfflinePolicy`]. The client reconnects on its own
///   (backoff capped at 1 s); each call's wait is bounded by the policy.
///
/// Blocking: the store drives async-nats on a runtime of its own (two
/// worker threads: sealing a block and the connection's I/O overlap), so it must be called from a plain thread (the
/// recorder's writer), not from inside an async task.
pub struct NatsStore {
    rt: Option<tokio::runtime::Runtime>,
    shared: Shared,
    streams: Mutex<HashMap<String, StreamState>>,
}

/// What the store's tasks share.
#[derive(Clone)]
struct Shared {
    cluster: Arc<Cluster>,
    /// Tells this store's claims from another writer's.
    writer: String,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for NatsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsStore")
            .field("urls", &self.shared.cluster.config.shown())
            .finish_non_exhaustive()
    }
}

impl Drop for NatsStore {
    fn drop(&mut self) {
        // Dropped wherever the last handle goes, perhaps inside a host's
        // async task, where a blocking runtime shutdown would panic.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn other(e: NatsError) -> StoreError {
    StoreError::Other(Box::new(e))
}

impl NatsStore {
    /// Connects to the cluster and makes sure the stream and the buckets
    /// exist (creating them with `config.replicas` replicas).
    pub fn connect(config: NatsConfig) -> Result<NatsStore, NatsError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("reel-nats")
            .enable_all()
            .build()
            .map_err(|e| NatsError::Cluster {
                urls: config.shown(),
                what: "starting the client's runtime",
                detail: e.to_string(),
            })?;
        let cluster = rt.block_on(Cluster::connect(config))?;
        let mut nonce = [0u8; 16];
        // A fresh claim id per store: time and address are enough to tell
        // two writers apart (it is no secret).
        let seed = format!("{:?}{:p}{}", Instant::now(), &nonce, std::process::id());
        nonce.copy_from_slice(&Sha256::digest(seed.as_bytes())[..16]);
        Ok(NatsStore {
            rt: Some(rt),
            shared: Shared {
                cluster: Arc::new(cluster),
                writer: hex::encode(nonce),
                counters: Arc::default(),
            },
            streams: Mutex::new(HashMap::new()),
        })
    }

    /// What the store did so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            blocks: self.shared.counters.blocks.load(Ordering::Relaxed),
            retries: self.shared.counters.retries.load(Ordering::Relaxed),
            duplicates: self.shared.counters.duplicates.load(Ordering::Relaxed),
            in_flight: self.shared.counters.in_flight.load(Ordering::Relaxed),
        }
    }

    /// The configuration the store runs with.
    pub fn config(&self) -> &NatsConfig {
        &self.shared.cluster.config
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime().block_on(f)
    }

    /// Whether a run id (or outside call key) is claimed in the cluster.
    pub fn is_taken(&self, stream: &str, outside: bool) -> Result<bool, NatsError> {
        let key = kv_key(stream, outside);
        self.block_on(async {
            self.shared
                .cluster
                .runs
                .entry(key)
                .await
                .map(|e| e.is_some_and(|e| e.operation == kv::Operation::Put))
                .map_err(|e| self.shared.cluster.error("reading the run claims", e))
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.rt
            .as_ref()
            .expect("the runtime lives as long as the store")
    }

    /// Takes the stream's tail when it has settled (or, with `wait`,
    /// waits for it): its head becomes the stream's; an error breaks the
    /// stream and is returned (once: the tail is gone afterwards).
    fn settle(&self, state: &mut StreamState, wait: bool) -> Result<(), NatsError> {
        let ready = state.tail.as_ref().is_some_and(|t| wait || t.is_finished());
        if !ready {
            return Ok(());
        }
        let tail = state.tail.take().expect("checked above");
        if state.broken.is_some() {
            // Its failure was reported already (by the flush that met it).
            return Ok(());
        }
        let error = match self.block_on(tail) {
            Ok(Ok(head)) => {
                state.head = head;
                return Ok(());
            }
            Ok(Err(e)) => e,
            Err(e) => NatsError::Refused {
                stream: state.record.run_id.clone(),
                detail: format!("the publishing task failed: {e}"),
            },
        };
        state.broken = Some(error.to_string());
        Err(error)
    }

    fn append(&self, stream: &str, facts: Vec<Fact>) -> Result<(), NatsError> {
        let refused = |detail: String| NatsError::Refused {
            stream: stream.into(),
            detail,
        };
        let mut streams = lock(&self.streams);
        let fresh = !streams.contains_key(stream);
        if fresh {
            let first = &facts[0];
            let record = RunRecord::from_first(first).ok_or_else(|| {
                refused(format!(
                    "a new stream must begin with run.started or the call.started of a call outside any run, not {}",
                    first.kind.name()
                ))
            })?;
            let outside = record.outside_run.is_some();
            streams.insert(
                stream.to_owned(),
                StreamState {
                    subject: subject_of(
                        &self.shared.cluster.config.subject_prefix,
                        record.tenant(),
                        stream,
                        outside,
                    ),
                    head: Head {
                        digest: [0; 32],
                        last: 0,
                    },
                    rules: StreamRules::new(stream),
                    record,
                    outside,
                    ended: false,
                    tail: None,
                    broken: None,
                    flush_told: false,
                    closed: false,
                },
            );
        }
        let state = streams.get_mut(stream).expect("inserted above");
        // A block that failed meanwhile is said now (without waiting for
        // one in flight).
        self.settle(state, false)?;
        if let Some(why) = &state.broken {
            return Err(refused(format!(
                "an earlier block of this stream was not stored ({why}); nothing more of it is"
            )));
        }
        // Checked whole before anything is published.
        let mut rules = state.rules.clone();
        for (i, fact) in facts.iter().enumerate() {
            if let Err(v) = rules.check(fact) {
                // A refused first batch leaves no stream behind (nor a
                // claim: none was made).
                if fresh {
                    streams.remove(stream);
                }
                return Err(refused(format!(
                    "fact {i} of the batch breaks a stream rule: {v}; nothing of the batch was stored"
                )));
            }
        }
        for fact in &facts {
            state.record.observe(fact);
        }
        state.rules = rules;
        state.ended |= facts.iter().any(|f| {
            matches!(f.kind, FactKind::RunEnded(_))
                || (state.outside
                    && matches!(f.kind, FactKind::CallEnded(_))
                    && f.call.as_deref() == state.record.outside_run.as_deref())
        });
        // Sealed, published and dropped by a task of the store's runtime:
        // the writer goes on to the next stream's batch meanwhile, and its
        // flush waits for the ack. The task waits for the stream's previous
        // one: its ack is the subject's last sequence, its digest the chain.
        let shared = self.shared.clone();
        let (name, subject, outside) = (stream.to_owned(), state.subject.clone(), state.outside);
        let prev = state.tail.take();
        let head = state.head;
        let task = async move {
            let mut head = match prev {
                Some(prev) => prev.await.map_err(|e| NatsError::Refused {
                    stream: name.clone(),
                    detail: format!("the publishing task failed: {e}"),
                })??,
                None => head,
            };
            if fresh {
                shared.claim(&name, outside, &subject).await?;
            }
            let token = subject_token(&name);
            for (block, digest, first) in seal_all(&name, &facts, &head.digest)? {
                let mut headers = HeaderMap::new();
                headers.insert(NATS_MESSAGE_ID, format!("{token}:{first}").as_str());
                headers.insert(
                    NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
                    head.last.to_string().as_str(),
                );
                let last = shared
                    .publish(&name, &subject, headers, block.into())
                    .await?;
                head = Head { digest, last };
            }
            drop(facts);
            Ok(head)
        };
        state.tail = Some(self.runtime().spawn(task));
        Ok(())
    }
}

/// Seals a batch as one block, or, when that is over [`MAX_BLOCK`], as
/// several chained ones: `(block, digest, first seq)` each.
fn seal_all(
    stream: &str,
    facts: &[Fact],
    prev: &Digest,
) -> Result<Vec<(Vec<u8>, Digest, u64)>, NatsError> {
    let seal = |chunk: &[Fact], prev: &Digest| {
        reel_archive::wire::seal_block(chunk, prev).map_err(|e| NatsError::Refused {
            stream: stream.into(),
            detail: format!("a fact does not encode: {e}"),
        })
    };
    // One encoding in the common case: the whole batch fits.
    let (block, digest) = seal(facts, prev)?;
    if block.len() <= MAX_BLOCK || facts.len() == 1 {
        return Ok(vec![(block, digest, facts[0].seq)]);
    }
    let mut out = Vec::new();
    let mut prev = *prev;
    for chunk in chunks(facts) {
        let (block, digest) = seal(chunk, &prev)?;
        out.push((block, digest, chunk[0].seq));
        prev = digest;
    }
    Ok(out)
}

impl Shared {
    /// Claims a new stream in the KV bucket: `create` fails when the key
    /// exists, and a claim this writer made itself (a retry after a lost
    /// ack) is told apart by its writer id.
    async fn claim(&self, stream: &str, outside: bool, subject: &str) -> Result<(), NatsError> {
        let key = kv_key(stream, outside);
        let value = serde_json::json!({ "writer": self.writer, "subject": subject }).to_string();
        let value = Bytes::from(value);
        let start = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.cluster.runs.create(&key, value.clone()).await {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                    let entry = self.cluster.runs.get(&key).await.ok().flatten();
                    if entry.as_deref() == Some(&value[..]) {
                        return Ok(());
                    }
                    return Err(NatsError::Conflict {
                        stream: stream.into(),
                        detail: "its id is claimed in the cluster's run bucket".into(),
                    });
                }
                Err(e) => self.wait_or_fail(stream, start, attempt, &e).await?,
            }
        }
    }

    /// Publishes one block and waits for its ack, retrying (same message
    /// id) under the offline policy; returns the message's stream sequence.
    async fn publish(
        &self,
        stream: &str,
        subject: &str,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<u64, NatsError> {
        let start = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let sent = async {
                self.cluster
                    .js
                    .publish_with_headers(subject.to_owned(), headers.clone(), payload.clone())
                    .await?
                    .await
            }
            .await;
            match sent {
                Ok(ack) => {
                    self.counters.blocks.fetch_add(1, Ordering::Relaxed);
                    if ack.duplicate {
                        self.counters.duplicates.fetch_add(1, Ordering::Relaxed);
                    }
                    if attempt > 1 {
                        tracing::info!(
                            stream,
                            attempt,
                            "reel-nats: the cluster acknowledged the block again"
                        );
                    }
                    return Ok(ack.sequence);
                }
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    // After a lost ack, an earlier attempt of this very
                    // block may be the subject's last message: that is ours.
                    if attempt > 1 {
                        if let Some(seq) = self.landed(subject, &headers).await {
                            self.counters.blocks.fetch_add(1, Ordering::Relaxed);
                            self.counters.duplicates.fetch_add(1, Ordering::Relaxed);
                            return Ok(seq);
                        }
                    }
                    return Err(NatsError::Conflict {
                        stream: stream.into(),
                        // The server's words ("wrong last sequence: N"),
                        // not the client's kind before them again.
                        detail: format!(
                            "the subject {subject} moved on under this writer: {}",
                            std::error::Error::source(&e)
                                .map_or_else(|| e.to_string(), ToString::to_string)
                        ),
                    });
                }
                Err(e) if subject_in_flight(&e) && start.elapsed() < IN_FLIGHT_GRACE => {
                    // The previous block's ack outran the leader's
                    // bookkeeping: send it again at once, quietly.
                    self.counters.retries.fetch_add(1, Ordering::Relaxed);
                    self.counters.in_flight.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(1 << (attempt - 1).min(5))).await;
                }
                Err(e) => self.wait_or_fail(stream, start, attempt, &e).await?,
            }
        }
    }

    /// The sequence of the subject's last message when it carries the
    /// message id in `headers`.
    async fn landed(&self, subject: &str, headers: &HeaderMap) -> Option<u64> {
        let want = headers.get(NATS_MESSAGE_ID)?;
        let last = self
            .cluster
            .stream
            .get_last_raw_message_by_subject(subject)
            .await
            .ok()?;
        (last.headers.get(NATS_MESSAGE_ID) == Some(want)).then_some(last.sequence)
    }

    /// After a failed attempt: waits before the next one, or fails when the
    /// offline policy's wait has run out. Tells the host either way.
    async fn wait_or_fail(
        &self,
        stream: &str,
        start: Instant,
        attempt: u32,
        error: &(dyn std::fmt::Display + Sync),
    ) -> Result<(), NatsError> {
        let waited = start.elapsed();
        let budget = match self.cluster.config.offline {
            OfflinePolicy::Wait(d) => d,
            OfflinePolicy::Fail => Duration::ZERO,
        };
        if waited >= budget {
            let e = NatsError::Offline {
                stream: stream.into(),
                waited_ms: waited.as_millis() as u64,
                detail: error.to_string(),
            };
            tracing::error!("reel-nats: {e}");
            return Err(e);
        }
        if attempt == 1 {
            tracing::warn!(
                stream,
                urls = %self.cluster.config.shown(),
                "reel-nats: the cluster did not take a block ({error}); retrying for up to {} ms, calls wait meanwhile",
                budget.as_millis()
            );
        }
        self.counters.retries.fetch_add(1, Ordering::Relaxed);
        let pause = Duration::from_millis(50u64 << attempt.min(4)).min(budget - waited);
        tokio::time::sleep(pause).await;
        Ok(())
    }

    async fn put_artifact_async(&self, bytes: &[u8]) -> Result<String, NatsError> {
        let hex = hex::encode(Sha256::digest(bytes));
        let start = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            if self.cluster.artifacts.info(&hex).await.is_ok() {
                return Ok(format!("sha256:{hex}"));
            }
            match self
                .cluster
                .artifacts
                .put(hex.as_str(), &mut &bytes[..])
                .await
            {
                Ok(_) => return Ok(format!("sha256:{hex}")),
                Err(e) => self.wait_or_fail("artifacts", start, attempt, &e).await?,
            }
        }
    }

    /// Stores the stream's final record in the KV bucket (the index a
    /// listing reads); its claim stays: the id stays taken.
    async fn store_record(
        &self,
        stream: &str,
        outside: bool,
        subject: &str,
        record: &RunRecord,
    ) -> Result<(), NatsError> {
        let key = kv_key(stream, outside);
        let value = serde_json::json!({
            "writer": self.writer,
            "subject": subject,
            "record": record,
        })
        .to_string();
        let start = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.cluster.runs.put(&key, value.clone().into()).await {
                Ok(_) => return Ok(()),
                Err(e) => self.wait_or_fail(stream, start, attempt, &e).await?,
            }
        }
    }
}

/// Splits a batch into chunks whose blocks stay under [`MAX_BLOCK`]
/// (estimated from the facts' encodings; one fact is always one chunk).
fn chunks(facts: &[Fact]) -> Vec<&[Fact]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, fact) in facts.iter().enumerate() {
        let mut buf = Vec::new();
        let len = reel_archive::encode_fact(fact, &mut buf).map_or(0, |_| buf.len() + 4);
        if i > start && size + len > MAX_BLOCK {
            out.push(&facts[start..i]);
            start = i;
            size = 0;
        }
        size += len;
    }
    if start < facts.len() {
        out.push(&facts[start..]);
    }
    out
}

impl Cluster {
    pub(crate) async fn connect(config: NatsConfig) -> Result<Cluster, NatsError> {
        Cluster::connect_saying(config, true).await
    }

    /// [`Cluster::connect`]; with `say_setup` false, a setup that has to
    /// be tried again is not warned about (a follower already said it
    /// waits for the cluster: one warning per outage).
    pub(crate) async fn connect_saying(
        config: NatsConfig,
        say_setup: bool,
    ) -> Result<Cluster, NatsError> {
        let shown = config.shown();
        let addrs: Vec<async_nats::ServerAddr> = config
            .urls
            .iter()
            .map(|u| u.parse())
            .collect::<Result<_, _>>()
            .map_err(|e: std::io::Error| NatsError::BadUrls {
                urls: shown.clone(),
                detail: e.to_string(),
            })?;
        let events_urls = shown.clone();
        let client = async_nats::ConnectOptions::new()
            .name("reel")
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .reconnect_delay_callback(|n| Duration::from_millis((50 * n as u64).min(1000)))
            .event_callback(move |event| {
                let urls = events_urls.clone();
                async move {
                    use async_nats::Event;
                    // An outage is said by whoever waits on the cluster
                    // (a store's block, a follower), once: not by the
                    // client at every reconnect attempt, nor when nothing
                    // waits.
                    match event {
                        Event::Connected => {
                            tracing::info!(%urls, "reel-nats: connected to the cluster")
                        }
                        Event::Disconnected => {
                            tracing::info!(%urls, "reel-nats: disconnected; reconnecting")
                        }
                        Event::ClientError(_) | Event::Closed | Event::Draining => {
                            tracing::debug!(%urls, "reel-nats: {event}")
                        }
                        event => tracing::warn!(%urls, "reel-nats: {event}"),
                    }
                }
            })
            .connect(addrs)
            .await
            .map_err(|e| NatsError::Cluster {
                urls: shown.clone(),
                what: "connecting",
                detail: e.to_string(),
            })?;
        let js = jetstream::ContextBuilder::new()
            .timeout(config.ack_timeout)
            .build(client);
        // A node down or a leader election makes the first requests time
        // out: setting up waits as a call would (the offline policy).
        let budget = match config.offline {
            OfflinePolicy::Wait(d) => d,
            OfflinePolicy::Fail => Duration::ZERO,
        };
        let start = Instant::now();
        let mut said = !say_setup;
        let (stream, runs, artifacts) = loop {
            match setup(&js, &config).await {
                Ok(handles) => break handles,
                Err(e) if start.elapsed() < budget => {
                    // Said once; the attempts after it at debug level.
                    if said {
                        tracing::debug!("reel-nats: {e}; trying again");
                    } else {
                        tracing::warn!(
                            "reel-nats: {e}; trying again for up to {} ms",
                            budget.as_millis()
                        );
                        said = true;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        };
        Ok(Cluster {
            config,
            js,
            stream,
            runs,
            artifacts,
        })
    }

    pub(crate) fn error(&self, what: &'static str, e: impl std::fmt::Display) -> NatsError {
        NatsError::Cluster {
            urls: self.config.shown(),
            what,
            detail: e.to_string(),
        }
    }
}

/// Gets (or creates) the stream and the buckets.
async fn setup(
    js: &jetstream::Context,
    config: &NatsConfig,
) -> Result<(stream::Stream, kv::Store, object_store::ObjectStore), NatsError> {
    let shown = config.shown();
    let fail = |what: &'static str, e: &dyn std::fmt::Display| NatsError::Cluster {
        urls: shown.clone(),
        what,
        detail: e.to_string(),
    };
    let stream = js
        .get_or_create_stream(stream::Config {
            name: config.stream.clone(),
            subjects: vec![format!("{}.>", config.subject_prefix)],
            num_replicas: config.replicas,
            storage: stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            allow_direct: true,
            ..Default::default()
        })
        .await
        .map_err(|e| fail("creating the stream", &e))?;
    let runs = match js.get_key_value(&config.runs_bucket).await {
        Ok(kv) => kv,
        Err(_) => match js
            .create_key_value(kv::Config {
                bucket: config.runs_bucket.clone(),
                history: 1,
                num_replicas: config.replicas,
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
        {
            Ok(kv) => kv,
            // Created meanwhile by another host.
            Err(e) => js
                .get_key_value(&config.runs_bucket)
                .await
                .map_err(|_| fail("creating the run bucket", &e))?,
        },
    };
    let artifacts = match js.get_object_store(&config.artifacts_bucket).await {
        Ok(o) => o,
        Err(_) => match js
            .create_object_store(object_store::Config {
                bucket: config.artifacts_bucket.clone(),
                num_replicas: config.replicas,
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
        {
            Ok(o) => o,
            Err(e) => js
                .get_object_store(&config.artifacts_bucket)
                .await
                .map_err(|_| fail("creating the artifact bucket", &e))?,
        },
    };
    Ok((stream, runs, artifacts))
}

impl Store for NatsStore {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        if facts.is_empty() {
            return Ok(());
        }
        if lock(&self.streams).get(stream).is_some_and(|s| s.ended) {
            return Err(StoreError::StreamClosed {
                stream: stream.into(),
            });
        }
        // Whatever went wrong concerns this stream alone.
        self.append(stream, facts)
            .map_err(|e| StoreError::stream(stream, e))
    }

    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.block_on(self.shared.put_artifact_async(bytes))
            .map_err(other)
    }

    /// An artifact the cluster did not take in time fails the stream it
    /// was for, not the store: the cluster may be back for the next.
    fn put_artifact_of(&self, stream: &str, bytes: &[u8]) -> Result<String, StoreError> {
        self.block_on(self.shared.put_artifact_async(bytes))
            .map_err(|e| StoreError::stream(stream, e))
    }

    /// Waits for the ack of every block handed over before it was called
    /// (their publishes went out concurrently, one in flight per stream),
    /// without holding the streams meanwhile: each stream's tail is relayed
    /// through a task that tells the flush when it settles, so the chain
    /// stays whole for blocks appended during the flush, which it does not
    /// wait for. Then forgets the closed streams that have settled. A
    /// stream whose block failed is reported by the first flush that
    /// meets or follows the failure (as well as by an append that met it),
    /// each failure named ([`StoreError::Streams`]); later flushes do not
    /// report it again.
    fn flush(&self) -> Result<(), StoreError> {
        let mut waits = Vec::new();
        {
            let mut streams = lock(&self.streams);
            for (name, state) in streams.iter_mut() {
                if state.broken.is_some() {
                    // Its failure was said already (its tail may still be
                    // the relay of the flush that said it, not finished
                    // yet: waited for again, it said the failure twice).
                    // A finished one is dropped, so a closed stream goes.
                    if state.tail.as_ref().is_some_and(|t| t.is_finished()) {
                        state.tail = None;
                    }
                    continue;
                }
                let Some(prev) = state.tail.take() else {
                    continue;
                };
                let (tx, rx) = tokio::sync::oneshot::channel();
                let stream = name.clone();
                state.tail = Some(self.runtime().spawn(async move {
                    let settled = prev.await.unwrap_or_else(|e| {
                        Err(NatsError::Refused {
                            stream,
                            detail: format!("the publishing task failed: {e}"),
                        })
                    });
                    let _ = tx.send(settled.clone().map(|_| ()));
                    settled
                }));
                waits.push((name.clone(), rx));
            }
        }
        let mut failures = Vec::new();
        let mut failed = Vec::new();
        for (name, rx) in waits {
            let error = match self.block_on(rx) {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                Err(_) => NatsError::Refused {
                    stream: name.clone(),
                    detail: "the publishing task was dropped".into(),
                },
            };
            failed.push((name.clone(), error.to_string()));
            failures.push(StreamFailure {
                stream: name,
                error: Box::new(error),
            });
        }
        let mut streams = lock(&self.streams);
        for (name, why) in failed {
            // Said by this flush: the stream takes nothing more, and its
            // settled tail is not reported again (see `settle`).
            if let Some(state) = streams.get_mut(&name) {
                state.broken.get_or_insert(why);
            }
        }
        for (name, state) in streams.iter_mut() {
            // A block appended during the flush that already failed is
            // reported now: its stream's tail is taken here, and no later
            // flush would see it.
            if let Err(e) = self.settle(state, false) {
                failures.push(StreamFailure {
                    stream: name.clone(),
                    error: Box::new(e),
                });
            }
        }
        for (name, state) in streams.iter_mut() {
            // A failure an append met since the last flush: the append's
            // caller may not have acted on it before this flush answers.
            let Some(why) = state.broken.as_ref().filter(|_| !state.flush_told) else {
                continue;
            };
            state.flush_told = true;
            if !failures.iter().any(|f| &f.stream == name) {
                failures.push(StreamFailure {
                    stream: name.clone(),
                    error: Box::new(NatsError::Refused {
                        stream: name.clone(),
                        detail: why.clone(),
                    }),
                });
            }
        }
        streams.retain(|_, s| !(s.closed && s.tail.is_none()));
        drop(streams);
        // Each failure is its stream's alone: the recorder fails those
        // runs and no other.
        if failures.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Streams(failures))
        }
    }

    /// True: see [`NatsStore::flush`](Store::flush); the recorder's writer
    /// then seals and hands over the next drain while a flush waits for
    /// the cluster's acks.
    fn flushes_concurrently(&self) -> bool {
        true
    }

    /// The stream's record goes to the KV bucket once its last block is
    /// acknowledged (chained after it, so other streams' acks are not
    /// held up); the next flush waits for it.
    fn close_stream(&self, stream: &str) -> Result<(), StoreError> {
        let mut streams = lock(&self.streams);
        let Some(state) = streams.get_mut(stream) else {
            return Ok(());
        };
        state.closed = true;
        if state.broken.is_some() {
            return Ok(());
        }
        let shared = self.shared.clone();
        let (name, subject, outside) = (stream.to_owned(), state.subject.clone(), state.outside);
        let record = state.record.clone();
        let prev = state.tail.take();
        let head = state.head;
        let task = async move {
            let head = match prev {
                Some(prev) => prev.await.map_err(|e| NatsError::Refused {
                    stream: name.clone(),
                    detail: format!("the publishing task failed: {e}"),
                })??,
                None => head,
            };
            // The facts are durable already; a record that does not make
            // it is an index entry short, said as a warning, not a lost
            // fact.
            if let Err(e) = shared.store_record(&name, outside, &subject, &record).await {
                tracing::warn!("reel-nats: the run record of {name:?} was not stored: {e}");
            }
            Ok(head)
        };
        state.tail = Some(self.runtime().spawn(task));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(reply: &str) -> jetstream::context::PublishError {
        let e: jetstream::Error = serde_json::from_str(reply).unwrap();
        jetstream::context::PublishError::with_source(PublishErrorKind::Other, e)
    }

    #[test]
    fn the_in_process_refusal_is_told_from_a_conflict() {
        // The replies as the server sends them (nats-server 2.15).
        assert!(subject_in_flight(&refused(
            r#"{"code":400,"err_code":10164,"description":"wrong last sequence"}"#
        )));
        assert!(!subject_in_flight(
            &jetstream::context::PublishError::with_source(
                PublishErrorKind::WrongLastSequence,
                serde_json::from_str::<jetstream::Error>(
                    r#"{"code":400,"err_code":10071,"description":"wrong last sequence: 7"}"#
                )
                .unwrap()
            )
        ));
        assert!(!subject_in_flight(&refused(
            r#"{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}"#
        )));
        assert!(!subject_in_flight(&jetstream::context::PublishError::new(
            PublishErrorKind::TimedOut
        )));
    }
}
