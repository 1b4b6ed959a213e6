//! The storage seam of the write pipeline: what the recorder's writer needs
//! of a store. It belongs to no backend: the sled archive (`reel-archive`)
//! implements it, and so does a replicated log (`reel-nats`), not a fork
//! of the writer.
//!
//! Blocking, called from the writer's own thread: the tools' threads never
//! reach it (they only send to the writer), so a blocking call costs them
//! nothing, and an async store (a network log) drives its own runtime
//! behind these calls instead of making every store pay for one.

use crate::fact::Fact;

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
    /// Streams failed, each on its own: the store takes nothing more of
    /// each named stream (from the batch that failed on), and every other
    /// stream goes on. A store that keeps its streams apart (a replicated
    /// log: one writer's conflict on one run, a block of one run the
    /// cluster did not take in time) says so with this variant, and the
    /// recorder fails only the runs named (see `reel-recorder`'s writer);
    /// every other variant fails the whole store. Never empty.
    #[error("{}", StreamFailure::list(.0))]
    Streams(Vec<StreamFailure>),
    /// The store failed as a whole (the backend's own error, e.g. the
    /// archive's `ArchiveError`: a disk error fails every stream).
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// One stream failed, on its own (see [`StoreError::Streams`]).
    pub fn stream(
        stream: impl Into<String>,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        StoreError::Streams(vec![StreamFailure {
            stream: stream.into(),
            error: error.into(),
        }])
    }
}

/// One stream's failure in [`StoreError::Streams`].
#[derive(Debug)]
pub struct StreamFailure {
    /// The stream's key (a run id, or the key of a call outside any run).
    pub stream: String,
    /// What the store said.
    pub error: Box<dyn std::error::Error + Send + Sync>,
}

impl StreamFailure {
    fn list(failures: &[StreamFailure]) -> String {
        match failures {
            [] => "a store failed without naming a stream".into(),
            [one] => one.error.to_string(),
            many => many
                .iter()
                .map(|f| format!("stream {:?}: {}", f.stream, f.error))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }
}

/// Where the write pipeline puts facts.
///
/// Contract (what the writer relies on, and what the archive does):
/// - [`Store::append_batch`] gets one stream's facts, numbered by the
///   writer's [`Sequencer`](crate::sequence::Sequencer) (gapless seqs from
///   where the stream stands, progress counts), redacted and timed. A batch
///   is stored whole or not at all, and held to the stream rules
///   ([`crate::rules`]); a batch after the stream's end is refused with
///   [`StoreError::StreamClosed`].
/// - [`Store::put_artifact`] keeps bytes once per sha-256 digest and
///   answers `sha256:<hex>`; the writer calls it through
///   [`Store::put_artifact_of`], which says which stream the bytes are for.
/// - Failures: [`StoreError::Streams`] fails the streams it names and no
///   other; any other error fails the whole store (the archive's disk
///   errors: one device holds every run: [`StoreError::Other`]).
/// - [`Store::flush`] returns once everything appended before is durable.
/// - [`Store::close_stream`] says the writer will send the stream nothing
///   more (after its end fact was appended).
/// - [`Store::has_stream`] is what a recorder reads back, beyond
///   appending: whether a run id is taken. The default (nothing is known
///   taken) suits a store that cannot tell; the recorder still refuses an
///   id it is recording itself.
///
/// What the recorder needs besides is not the store's: the fingerprint
/// key comes from the recorder's configuration (the archive's is read
/// from outside the archive too), and live inspection is the archive's own
/// (it serves from the archive's directory), so a recorder over another
/// store serves none.
pub trait Store: Send + Sync + 'static {
    /// Appends one numbered batch of a stream.
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError>;
    /// Stores artifact bytes; returns their digest as `sha256:<hex>`.
    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError>;
    /// Stores artifact bytes a fact of `stream` refers to (a spilled
    /// payload, an artifact a call stored). The default is
    /// [`Store::put_artifact`], whose failure fails the whole store; a
    /// store that keeps streams apart answers a failure with
    /// [`StoreError::Streams`] naming `stream`.
    fn put_artifact_of(&self, stream: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let _ = stream;
        self.put_artifact(bytes)
    }
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

    /// Whether `stream` holds facts already, so that a recorder refuses a
    /// run id taken before it started (the archive: a run it holds).
    /// Default: `Ok(false)`, for a store that cannot tell (a write-only
    /// sink); run ids are then unique only among the recorder's own runs.
    /// An error fails only the run being started.
    fn has_stream(&self, stream: &str) -> Result<bool, StoreError> {
        let _ = stream;
        Ok(false)
    }
}
