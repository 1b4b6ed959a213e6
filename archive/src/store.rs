//! The archive as a [`Store`], the core's storage seam
//! ([`reel_core::store`]): the recorder's writer appends into it like into
//! any other store.

use reel_core::fact::Fact;
use reel_core::store::{Store, StoreError};

use crate::{Archive, ArchiveError};

/// The archive's errors as a store's (`?` in a store built on the
/// archive): a closed run is the seam's closed
/// stream; every other error fails the whole store (one device holds
/// every run).
impl From<ArchiveError> for StoreError {
    fn from(e: ArchiveError) -> StoreError {
        match e {
            ArchiveError::RunClosed { run_id, .. } => StoreError::StreamClosed { stream: run_id },
            e => StoreError::Other(Box::new(e)),
        }
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

    /// A run the archive holds (an unknown one is not an error).
    fn has_stream(&self, stream: &str) -> Result<bool, StoreError> {
        match self.run(stream) {
            Ok(_) => Ok(true),
            Err(ArchiveError::UnknownRun { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
