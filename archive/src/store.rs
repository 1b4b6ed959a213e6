//! The storage seam of the write pipeline: what the recorder's writer needs
//! of a store. [`Archive`] is one implementation; a replicated log (the
//! next backend) is another, not a fork of the writer.
//!
//! Blocking, called from the writer's own thread: the tools' threads never
//! reach it (they only send to the writer), so a blocking call costs them
//! nothing, and an async store (a network log) drives its own runtime
//! behind these calls instead of making every store pay for one.

use reel::fact::Fact;

use crate::{Archive, ArchiveError};

/// Why a store did not take what it was given.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The stream is closed (it ended, or was closed by recovery): the
    /// batch came late and was not stored.
    #[error("stream {stream:?} is closed: it takes no more facts")]
    StreamClosed {
        /// The stream's key.
        stream: String,
    },
    /// The archive refused or failed.
    #[error(transparent)]
    Archive(ArchiveError),
    /// Another store failed.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl From<ArchiveError> for StoreError {
    fn from(e: ArchiveError) -> StoreError {
        match e {
            ArchiveError::RunClosed { run_id, .. } => StoreError::StreamClosed { stream: run_id },
            e => StoreError::Archive(e),
        }
    }
}

/// Where the write pipeline puts facts.
///
/// Contract (what the writer relies on, and what [`Archive`] does):
/// - [`Store::append_batch`] gets one stream's facts, numbered by the
///   writer's [`Sequencer`](reel::sequence::Sequencer) (gapless seqs from
///   where the stream stands, progress counts), redacted and timed. A batch
///   is stored whole or not at all, and held to the stream rules
///   ([`reel::rules`]); a batch after the stream's end is refused with
///   [`StoreError::StreamClosed`].
/// - [`Store::put_artifact`] keeps bytes once per sha-256 digest and
///   answers `sha256:<hex>`.
/// - [`Store::flush`] returns once everything appended before is durable.
/// - [`Store::close_stream`] says the writer will send the stream nothing
///   more (after its end fact was appended).
pub trait Store: Send + Sync + 'static {
    /// Appends one numbered batch of a stream.
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError>;
    /// Stores artifact bytes; returns their digest as `sha256:<hex>`.
    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError>;
    /// Makes everything appended so far durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// The writer is done with `stream`.
    fn close_stream(&self, stream: &str) -> Result<(), StoreError>;

    /// Whether [`Store::flush`] may run on a thread of its own while the
    /// writer goes on appending (false unless a store says so): a flush
    /// must then make durable at least everything appended before it was
    /// called, whatever is appended meanwhile. The writer then overlaps
    /// the flush's device round trips with encoding the next drain.
    fn flushes_concurrently(&self) -> bool {
        false
    }
}

impl Store for Archive {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        self.append_numbered(stream, facts)?;
        Ok(())
    }

    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        Ok(Archive::put_artifact(self, bytes)?)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Archive::flush(self)?;
        Ok(())
    }

    /// The archive closes a stream when it appends its end fact.
    fn close_stream(&self, _stream: &str) -> Result<(), StoreError> {
        Ok(())
    }

    /// sled's flush makes durable every write made before it was called,
    /// and sled takes inserts from other threads meanwhile; the syncs that
    /// follow it (`durable.rs`) take their own lock.
    fn flushes_concurrently(&self) -> bool {
        true
    }
}
