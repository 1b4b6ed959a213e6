//! [`NatsStore`]: the write pipeline's store over JetStream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::header::{NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, NATS_MESSAGE_ID};
use async_nats::jetstream::{self, kv, object_store, stream};
use async_nats::HeaderMap;
use sha2::{Digest as _, Sha256};

use reel_core::codec::Digest;
use reel_core::fact::{Fact, FactKind};
use reel_core::rules::StreamRules;
use reel_core::run::RunRecord;
use reel_core::store::StoreError;

use crate::config::NatsConfig;
use crate::subject::{kv_key, subject_of, subject_token};
use crate::NatsError;

mod cluster;
mod publish;
mod seam;

use publish::seal_all;

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
    /// Batches handed over since the last publishing task took its facts.
    waiting: Arc<Mutex<Waiting>>,
}

/// The facts of a stream appended while its previous block is in flight:
/// the publishing task spawned for the first of them takes them all, once
/// that block's ack gives it the expected sequence, and publishes them as
/// one block (or as few as [`MAX_BLOCK`] allows). *Why:* the writer appends
/// once per drain, and a live run's drains are small (a progress report
/// each): published one message each, they were a round trip per fact.
#[derive(Default)]
struct Waiting {
    facts: Vec<Fact>,
    /// A task is spawned that has not taken `facts` yet.
    armed: bool,
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
///   sequence, without the writer waiting, and takes every batch handed
///   over meanwhile into its one block; different runs go out
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
///   the stream it was for ([`Store::put_artifact_of`](reel_core::store::Store::put_artifact_of)).
/// - **Offline:** see [`OfflinePolicy`](crate::OfflinePolicy). The client reconnects on its own
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

use reel_core::lock::lock;

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

    /// Claims a run id in the cluster ahead of its first block, as that
    /// block's publish would (under `tenant`, the run's identity's, which
    /// its subject carries): true when this store holds the claim (made
    /// now, or earlier by this store), false when another writer holds
    /// it. A host that picks ids from what it has seen (the demo's `-N`
    /// suffixes) claims them so, and two writers starting at once cannot
    /// both pick one: the first claim wins, the other moves on.
    pub fn reserve(&self, run_id: &str, tenant: Option<&str>) -> Result<bool, NatsError> {
        let subject = subject_of(
            &self.shared.cluster.config.subject_prefix,
            tenant,
            run_id,
            false,
        );
        match self.block_on(self.shared.claim(run_id, false, &subject)) {
            Ok(()) => Ok(true),
            Err(NatsError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.rt
            .as_ref()
            .expect("the runtime lives as long as the store")
    }

    /// Takes the stream's tail when it has settled: its head becomes the
    /// stream's; an error breaks the stream and is returned (once: the
    /// tail is gone afterwards).
    fn settle(&self, state: &mut StreamState) -> Result<(), NatsError> {
        let ready = state.tail.as_ref().is_some_and(|t| t.is_finished());
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
                    waiting: Arc::default(),
                },
            );
        }
        let state = streams.get_mut(stream).expect("inserted above");
        // A block that failed meanwhile is said now (without waiting for
        // one in flight).
        self.settle(state)?;
        if let Some(why) = &state.broken {
            return Err(refused(format!(
                "an earlier block of this stream was not stored ({why}); nothing more of it is"
            )));
        }
        // Checked whole before anything is published (a refused batch
        // leaves the rules where they stood).
        if let Err((i, v)) = state.rules.check_batch(&facts) {
            // A refused first batch leaves no stream behind (nor a
            // claim: none was made).
            if fresh {
                streams.remove(stream);
            }
            return Err(refused(format!(
                "fact {i} of the batch breaks a stream rule: {v}; nothing of the batch was stored"
            )));
        }
        for fact in &facts {
            state.record.observe(fact);
        }
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
        // While a task waits so, later batches join its facts (`Waiting`):
        // the stream's tail is that task, so a flush covers them.
        {
            let mut waiting = lock(&state.waiting);
            waiting.facts.extend(facts);
            if waiting.armed {
                return Ok(());
            }
            waiting.armed = true;
        }
        let waiting = state.waiting.clone();
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
            let facts = {
                let mut waiting = lock(&waiting);
                waiting.armed = false;
                std::mem::take(&mut waiting.facts)
            };
            if facts.is_empty() {
                return Ok(head);
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

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::context::PublishErrorKind;

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
