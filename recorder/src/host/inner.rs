//! What every handle of one recorder shares: its store and archive, its key, its write
//! queue, its configuration, its sessions' cleanups and its services.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use reel::context::*;
use std::sync::Arc;

use reel::store::Store;
use reel_archive::{Archive, Keyring};

use crate::config::RecorderConfig;
use crate::writer::Queue;

use super::teardown::Teardowns;

/// The state behind a [`super::Recorder`] and each of its runs.
pub(super) struct RecorderInner {
    /// The archive recorded into, when there is one (reads, live
    /// inspection).
    pub(super) archive: Option<Archive>,
    /// What the recorder reads run ids from ([`Store::has_stream`]): the
    /// archive when there is one, else the store recorded into.
    pub(super) reads: Arc<dyn Store>,
    /// The fingerprint key: the archive's, else the configuration's.
    pub(super) keys: Keyring,
    pub(super) queue: Queue,
    pub(super) live: Mutex<Option<reel_archive::live::LiveServer>>,
    pub(super) config: RecorderConfig,
    pub(super) live_runs: Mutex<HashSet<String>>,
    /// Session-scoped cleanups by (tenant, principal, session): never by
    /// the session string alone.
    pub(super) sessions: Mutex<HashMap<TeardownKey, Teardowns>>,
    /// Services every call gets ([`Recorder::service`]).
    pub(super) services: std::sync::RwLock<Services>,
}
