//! Sealing a stream's batches into blocks and publishing them: the run's
//! claim, each block with its expected sequence and message id, retries
//! under the offline policy, artifacts and the run record.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::header::NATS_MESSAGE_ID;
use async_nats::jetstream::{context::PublishErrorKind, kv};
use async_nats::HeaderMap;
use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use reel_core::codec::Digest;
use reel_core::fact::Fact;
use reel_core::run::RunRecord;

use crate::config::OfflinePolicy;
use crate::subject::kv_key;
use crate::NatsError;

use super::*;

/// Seals a batch as one block, or, when that is over [`MAX_BLOCK`], as
/// several chained ones: `(block, digest, first seq)` each.
pub(super) fn seal_all(
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
    pub(super) async fn claim(
        &self,
        stream: &str,
        outside: bool,
        subject: &str,
    ) -> Result<(), NatsError> {
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
    pub(super) async fn publish(
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
    pub(super) async fn landed(&self, subject: &str, headers: &HeaderMap) -> Option<u64> {
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
    pub(super) async fn wait_or_fail(
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

    pub(super) async fn put_artifact_async(&self, bytes: &[u8]) -> Result<String, NatsError> {
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
    pub(super) async fn store_record(
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
        let len = reel_core::codec::encode_fact(fact, &mut buf).map_or(0, |_| buf.len() + 4);
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
