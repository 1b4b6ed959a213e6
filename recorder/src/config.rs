//! How a recorder behaves.

use std::time::Duration;

use reel::fact::Producer;
use reel_archive::FingerprintKey;

/// When recorded facts are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The archive's journal syncs what was written within 200 ms (its
    /// `sync_within`; sled's background flush, the bound before the
    /// journal, ran every 500 ms): fastest; a power cut may lose the last
    /// moments (a killed process loses nothing written). The writer gathers what is filed for up
    /// to 1 ms between drains (none of its callers waits on it), so a
    /// reader of the archive sees a fact up to that much later.
    Buffered,
    /// A call's facts are durable before its result is handed back to the
    /// host, and a run's before `end` returns: one `fdatasync` of the
    /// archive's journal, shared by concurrent calls (group commit).
    #[default]
    CallBoundary,
    /// The writer flushes after every batch it writes, and each await point
    /// of a tool waits until everything it filed before is durable.
    EveryFact,
}

/// Configuration of a [`crate::Recorder`].
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// When facts become durable.
    pub durability: Durability,
    /// How many facts may wait for the writer before a tool's await points
    /// wait for room (backpressure; `progress` itself never waits).
    pub queue_bound: usize,
    /// How many facts may wait for the writer before a progress report is
    /// dropped instead of queued (`progress` never waits, so this is what
    /// bounds its memory; seed 000: "with nothing listening it is a no-op
    /// that drops the report"). The drops are recorded, in call order, as
    /// `progress.dropped { count }`. Every other fact is kept.
    pub progress_bound: usize,
    /// The tripwire ([`reel::tripwire`]): every block is searched, before
    /// it is appended, for the run's resolved credentials and declared
    /// secrets in raw and encoded forms; a hit is scrubbed and recorded as
    /// `redaction.tripped`. On by default; the bench turns it off to
    /// price it.
    pub tripwire: bool,
    /// Extra key names to redact, beside reel's defaults (password, token,
    /// secret, authorization, api_key, ...).
    pub redact_keys: Vec<String>,
    /// The largest encoded fact stored inline, in bytes; a larger JSON
    /// payload is stored as an artifact and referenced, never cut.
    pub inline_limit: usize,
    /// Whether agent-core style `report` payloads are kept.
    pub content_logging: bool,
    /// How long one cleanup may run before it is recorded as timed out.
    pub teardown_timeout: Duration,
    /// What is recording (stamped on `run.started`).
    pub producer: Producer,
    /// Where the key of credential fingerprints comes from when the recorder
    /// opens its archive ([`crate::Recorder::open`]; an archive passed to
    /// [`crate::Recorder::with_archive`] keeps its own). Never from the
    /// archive: by default `REEL_FINGERPRINT_KEY`, else the user's key file
    /// (see [`FingerprintKey`]). Give every host the same key to compare
    /// fingerprints across hosts.
    pub fingerprint_key: FingerprintKey,
    /// Serve live inspection on `<archive>/reel.sock` (owner-only), so that
    /// `reel runs`, `reel show` and `reel tail` work while this process
    /// holds the archive. Needs a tokio runtime when the recorder opens.
    pub serve_live: bool,
}

impl Default for RecorderConfig {
    fn default() -> RecorderConfig {
        RecorderConfig {
            durability: Durability::default(),
            queue_bound: 65_536,
            progress_bound: 65_536,
            tripwire: true,
            redact_keys: Vec::new(),
            inline_limit: 256 * 1024,
            content_logging: false,
            teardown_timeout: Duration::from_secs(10),
            producer: Producer {
                name: "reel-recorder".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            fingerprint_key: FingerprintKey::default(),
            serve_live: true,
        }
    }
}
