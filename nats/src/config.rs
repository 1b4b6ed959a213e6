//! How a host points at the cluster: configuration, not code.

use std::time::Duration;

use crate::NatsError;

/// The environment variable that switches a host to the cluster: a
/// comma-separated list of client URLs, as NATS clients take them.
pub const NATS_ENV: &str = "REEL_NATS";
/// How long calls wait for an unreachable cluster, in milliseconds (`0`:
/// fail at once). See [`OfflinePolicy`].
pub const OFFLINE_WAIT_ENV: &str = "REEL_NATS_OFFLINE_WAIT_MS";

/// What a call does while the cluster does not acknowledge its facts.
///
/// The default is [`OfflinePolicy::Wait`] of 30 s: a node restart or a
/// leader election takes seconds, and a call that waits through it loses
/// nothing and costs its tool only the wait (the wait reaches the tools'
/// await points as backpressure); a call that cannot be made durable in
/// 30 s fails with [`NatsError::Offline`] instead of hanging its agent.
/// Either way the host is told at once (a `tracing` warning on the first
/// failed attempt, an error when the wait runs out), and nothing is ever
/// dropped silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfflinePolicy {
    /// Retry (same message id, so never a duplicate) for up to this long.
    Wait(Duration),
    /// Fail after the first attempt's ack timeout.
    Fail,
}

impl Default for OfflinePolicy {
    fn default() -> OfflinePolicy {
        OfflinePolicy::Wait(Duration::from_secs(30))
    }
}

/// Where and how to record into JetStream.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// The cluster's client URLs.
    pub urls: Vec<String>,
    /// The first token of every subject.
    pub subject_prefix: String,
    /// The JetStream stream holding the blocks.
    pub stream: String,
    /// The KV bucket of run claims and records.
    pub runs_bucket: String,
    /// The object store bucket of artifacts.
    pub artifacts_bucket: String,
    /// Replicas of the stream and buckets (3: an acknowledged block is on
    /// a majority of three nodes, so it survives the loss of any one).
    pub replicas: usize,
    /// How long one publish waits for its ack before it is retried.
    pub ack_timeout: Duration,
    /// What calls do while the cluster does not acknowledge.
    pub offline: OfflinePolicy,
}

impl NatsConfig {
    /// The defaults for a comma-separated URL list (`nats://h1:4222,h2:4222`).
    pub fn from_urls(urls: &str) -> Result<NatsConfig, NatsError> {
        let list: Vec<String> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        let bad = |detail: String| NatsError::BadUrls {
            urls: shown_urls(urls),
            detail,
        };
        if list.is_empty() {
            return Err(bad("no URL given".into()));
        }
        for url in &list {
            url.parse::<async_nats::ServerAddr>()
                .map_err(|e| bad(format!("{}: {e}", shown_urls(url))))?;
        }
        Ok(NatsConfig {
            urls: list,
            subject_prefix: "reel".into(),
            stream: "REEL".into(),
            runs_bucket: "reel-runs".into(),
            artifacts_bucket: "reel-artifacts".into(),
            replicas: 3,
            ack_timeout: Duration::from_secs(2),
            offline: OfflinePolicy::default(),
        })
    }

    /// The configuration [`NATS_ENV`] asks for (and [`OFFLINE_WAIT_ENV`]),
    /// or `None` when it is unset: then the host records into its
    /// embedded archive.
    pub fn from_env() -> Result<Option<NatsConfig>, NatsError> {
        let Ok(urls) = std::env::var(NATS_ENV) else {
            return Ok(None);
        };
        let mut config = NatsConfig::from_urls(&urls)?;
        if let Ok(ms) = std::env::var(OFFLINE_WAIT_ENV) {
            let ms: u64 = ms.trim().parse().map_err(|_| NatsError::BadUrls {
                urls: format!("{OFFLINE_WAIT_ENV}={ms:?}"),
                detail: "not a number of milliseconds".into(),
            })?;
            config.offline = match ms {
                0 => OfflinePolicy::Fail,
                ms => OfflinePolicy::Wait(Duration::from_millis(ms)),
            };
        }
        Ok(Some(config))
    }

    /// The URLs as shown in messages: without user info.
    pub fn shown(&self) -> String {
        shown_urls(&self.urls.join(","))
    }
}

/// A URL list without user info (`nats://user:pass@h` shows as `nats://h`).
pub(crate) fn shown_urls(urls: &str) -> String {
    urls.split(',')
        .map(|u| match (u.find("://"), u.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}{}", &u[..s + 3], &u[at + 1..]),
            (None, Some(at)) => u[at + 1..].to_owned(),
            _ => u.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_list_is_parsed_and_shown_without_credentials() {
        let c = NatsConfig::from_urls("nats://u:secret@127.0.0.1:4222, 127.0.0.1:4223").unwrap();
        assert_eq!(c.urls.len(), 2);
        assert_eq!(c.shown(), "nats://127.0.0.1:4222,127.0.0.1:4223");
        let e = NatsConfig::from_urls(" , ").unwrap_err().to_string();
        assert!(e.contains("no URL given"), "{e}");
    }
}
