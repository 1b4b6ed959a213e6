//! The projection: the cluster's stream into a local archive (`reel sync`),
//! and its check against the stream (`reel verify --nats`).

use std::time::Duration;

use reel_archive::Archive;

use crate::{NatsConfig, NatsError};

mod artifacts;
mod land;
mod project;
mod state;
mod verify;

pub use verify::{verify_projection, VerifyProjection};

use project::project;

/// What one [`sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Messages read from the stream.
    pub messages: u64,
    /// Facts appended to the archive.
    pub facts: u64,
    /// Blocks already in the archive (delivered again after a restart).
    pub already: u64,
    /// Artifacts copied into the archive.
    pub artifacts: u64,
    /// Streams touched.
    pub streams: u64,
    /// Messages refused: damaged, or breaking their run's chain, rules or
    /// tenant (each said by a warning), and the later messages of a run
    /// refused so ([`Refused`]). Every other run is projected.
    pub refused: u64,
}

/// Where a subject of the stream stopped being projected: the first
/// message refused on it, and why. Its run stays as projected up to there;
/// the subject's later messages are refused too (a run's chain cannot go
/// on past a block it does not have). Refusals are by subject, tenant and
/// run: a message another tenant's writer published for a run stops that
/// writer's subject, not the run's own. Kept with the projection's state,
/// so a later sync keeps refusing them, and listed by
/// [`verify_projection`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refused {
    /// The stream sequence of the first message refused.
    pub seq: u64,
    /// The run (or call outside any run) its subject names.
    pub run: String,
    /// Why.
    pub reason: String,
}

/// Projects the cluster's stream into `archive`, up to the stream's last
/// message when the sync began, through a durable consumer (named
/// `consumer`, or by default `reel-sync-<id>` after the projection's own
/// id, kept beside its database: one consumer per projection, which
/// remembers how far the projection got, so a restarted sync resumes
/// there).
///
/// Each block is checked as it lands: its checksum, its link to the
/// stream's previous block (the hash chain), the seqs and the stream rules
/// (the archive's own append checks). A block the archive has already (a
/// redelivery after a crash between the archive's flush and the
/// consumer's ack) is recognised by its seqs and skipped, so a sync is
/// idempotent. A message that fails those checks (damaged, breaking its
/// run's chain or rules, or published on another tenant's subject than its
/// run's) is refused, with a warning naming it, and so are its run's later
/// messages ([`Refused`], counted in [`SyncReport::refused`]); every other
/// run goes on being projected, so one writer's bad message does not stop
/// the others'. A failure of the archive itself (its disk) stops the sync
/// with [`NatsError::Projection`]; nothing after it is acknowledged.
pub fn sync(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
) -> Result<SyncReport, NatsError> {
    let rt = runtime(config)?;
    rt.block_on(project(config, archive, consumer, None))
}

/// Projects the stream into `archive` as [`sync`] does, then keeps
/// following it: each block is landed (checked, appended, flushed, and
/// acknowledged to the durable consumer) within a fetch's wait of its
/// publish, and the artifacts its facts refer to are copied as they land.
/// Returns once `stop` completes (after the batch in hand is landed and
/// acknowledged, so the next sync resumes right after it), with what was
/// projected.
///
/// While following, an unreachable cluster (when the follower starts, or
/// later) is waited out, said once per outage (a `tracing` warning), not
/// an error: the projection resumes when the cluster returns. A refused
/// message is refused as by [`sync`], and the follower goes on. Runs on the caller's tokio runtime;
/// whoever holds the archive meanwhile can serve it live
/// (`reel_archive::live::LiveServer`), which is how `reel tail` follows
/// the stream through the projection.
pub async fn follow(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
    stop: impl std::future::Future<Output = ()> + Send,
) -> Result<SyncReport, NatsError> {
    let stop: Stop<'_> = Box::pin(stop);
    project(config, archive, consumer, Some(stop)).await
}

/// What ends a [`follow`].
type Stop<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// How long a fetch waits for the stream's next block while following:
/// the latency a live reader sees, and how long a stop can take.
const FOLLOW_WAIT: Duration = Duration::from_millis(250);

/// How many landed batches a referenced artifact may stay missing from the
/// cluster's object store before the follower stops asking for it (a
/// `sha256:` string in a fact that names no artifact), until the final
/// full copy.
const ARTIFACT_TRIES: u32 = 40;

pub(crate) fn runtime(config: &NatsConfig) -> Result<tokio::runtime::Runtime, NatsError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| NatsError::Cluster {
            urls: config.shown(),
            what: "starting the client's runtime",
            detail: e.to_string(),
        })
}
