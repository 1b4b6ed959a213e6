//! What every handle of one recorder shares: its archive, its write
//! queue, its configuration, its sessions' cleanups and its services.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use reel::context::*;
use reel_archive::Archive;

use crate::config::RecorderConfig;
use crate::writer::Queue;

use super::teardown::Teardowns;

/// The state behind a [`super::Recorder`] and each of its runs.
pub(super) struct RecorderInner {
    pub(super) archive: Archive,
    pub(super) queue: Queue,
    pub(super) live: Mutex<Option<crate::live::LiveServer>>,
    pub(super) config: RecorderConfig,
    pub(super) live_runs: Mutex<HashSet<String>>,
    /// Session-scoped cleanups by (tenant, principal, session): never by
    /// the session string alone.
    pub(super) sessions: Mutex<HashMap<TeardownKey, Teardowns>>,
    /// Services every call gets ([`Recorder::service`]).
    pub(super) services: std::sync::RwLock<Services>,
}
