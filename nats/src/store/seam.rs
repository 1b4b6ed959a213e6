//! [`Store`] for [`NatsStore`]: the write pipeline's calls (append, artifacts,
//! flush, close) and how a failure stays with its stream.

use reel_core::fact::Fact;
use reel_core::store::{Store, StoreError, StreamFailure};

use crate::NatsError;

use super::*;

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
            if let Err(e) = self.settle(state) {
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
