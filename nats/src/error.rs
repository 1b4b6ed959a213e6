//! What can go wrong with the cluster.

/// Why the JetStream backend failed. Every message names what it was doing
/// and what to do; none holds a credential (URLs are shown without their
/// user info).
#[derive(Debug, Clone, thiserror::Error)]
pub enum NatsError {
    /// The URL list is not one NATS clients take.
    #[error("REEL_NATS / --nats {urls:?}: {detail}; give a comma-separated list of the cluster's client URLs, e.g. nats://10.0.0.1:4222,nats://10.0.0.2:4222")]
    BadUrls {
        /// The list as given (user info removed).
        urls: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The cluster could not be reached, or set up (stream and buckets).
    #[error("NATS cluster {urls}: {what}: {detail}")]
    Cluster {
        /// The cluster's URLs (user info removed).
        urls: String,
        /// What was being done.
        what: &'static str,
        /// The client's error.
        detail: String,
    },
    /// Another writer holds the stream: two recorders got the same run id.
    #[error("run {stream:?} is being written by another recorder ({detail}): run ids must be unique across hosts; nothing of this writer's batch was stored")]
    Conflict {
        /// The stream key.
        stream: String,
        /// What the cluster said.
        detail: String,
    },
    /// The cluster did not acknowledge within the configured wait.
    #[error("stream {stream:?}: the NATS cluster did not acknowledge a block within {waited_ms} ms ({detail}); the call's facts are not known to be durable (policy: REEL_NATS_OFFLINE_WAIT_MS)")]
    Offline {
        /// The stream key.
        stream: String,
        /// How long the store waited.
        waited_ms: u64,
        /// The last error.
        detail: String,
    },
    /// A batch breaks the stream rules, or does not encode.
    #[error("stream {stream:?}: {detail}")]
    Refused {
        /// The stream key.
        stream: String,
        /// Why.
        detail: String,
    },
    /// The projection could not be read or written (its disk, its state
    /// file). A damaged or forged message is not this: the sync refuses
    /// it and goes on (`SyncReport::refused`).
    #[error("projection: {0}")]
    Projection(String),
}
