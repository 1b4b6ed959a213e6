//! Connecting to the cluster and getting (or creating) the stream and the
//! buckets, waited for under the offline policy.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv, object_store, stream};

use crate::config::{NatsConfig, OfflinePolicy};
use crate::NatsError;

use super::*;

impl Cluster {
    pub(crate) async fn connect(config: NatsConfig) -> Result<Cluster, NatsError> {
        Cluster::connect_saying(config, true).await
    }

    /// [`Cluster::connect`]; with `say_setup` false, a setup that has to
    /// be tried again is not warned about (a follower already said it
    /// waits for the cluster: one warning per outage).
    pub(crate) async fn connect_saying(
        config: NatsConfig,
        say_setup: bool,
    ) -> Result<Cluster, NatsError> {
        let shown = config.shown();
        let addrs: Vec<async_nats::ServerAddr> = config
            .urls
            .iter()
            .map(|u| u.parse())
            .collect::<Result<_, _>>()
            .map_err(|e: std::io::Error| NatsError::BadUrls {
                urls: shown.clone(),
                detail: e.to_string(),
            })?;
        let events_urls = shown.clone();
        let client = async_nats::ConnectOptions::new()
            .name("reel")
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .reconnect_delay_callback(|n| Duration::from_millis((50 * n as u64).min(1000)))
            .event_callback(move |event| {
                let urls = events_urls.clone();
                async move {
                    use async_nats::Event;
                    // An outage is said by whoever waits on the cluster
                    // (a store's block, a follower), once: not by the
                    // client at every reconnect attempt, nor when nothing
                    // waits.
                    match event {
                        Event::Connected => {
                            tracing::info!(%urls, "reel-nats: connected to the cluster")
                        }
                        Event::Disconnected => {
                            tracing::info!(%urls, "reel-nats: disconnected; reconnecting")
                        }
                        Event::ClientError(_) | Event::Closed | Event::Draining => {
                            tracing::debug!(%urls, "reel-nats: {event}")
                        }
                        event => tracing::warn!(%urls, "reel-nats: {event}"),
                    }
                }
            })
            .connect(addrs)
            .await
            .map_err(|e| NatsError::Cluster {
                urls: shown.clone(),
                what: "connecting",
                detail: e.to_string(),
            })?;
        let js = jetstream::ContextBuilder::new()
            .timeout(config.ack_timeout)
            .build(client);
        // A node down or a leader election makes the first requests time
        // out: setting up waits as a call would (the offline policy).
        let budget = match config.offline {
            OfflinePolicy::Wait(d) => d,
            OfflinePolicy::Fail => Duration::ZERO,
        };
        let start = Instant::now();
        let mut said = !say_setup;
        let (stream, runs, artifacts) = loop {
            match setup(&js, &config).await {
                Ok(handles) => break handles,
                Err(e) if start.elapsed() < budget => {
                    // Said once; the attempts after it at debug level.
                    if said {
                        tracing::debug!("reel-nats: {e}; trying again");
                    } else {
                        tracing::warn!(
                            "reel-nats: {e}; trying again for up to {} ms",
                            budget.as_millis()
                        );
                        said = true;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        };
        Ok(Cluster {
            config,
            js,
            stream,
            runs,
            artifacts,
        })
    }

    pub(crate) fn error(&self, what: &'static str, e: impl std::fmt::Display) -> NatsError {
        NatsError::Cluster {
            urls: self.config.shown(),
            what,
            detail: e.to_string(),
        }
    }
}

/// Gets (or creates) the stream and the buckets.
async fn setup(
    js: &jetstream::Context,
    config: &NatsConfig,
) -> Result<(stream::Stream, kv::Store, object_store::ObjectStore), NatsError> {
    let shown = config.shown();
    let fail = |what: &'static str, e: &dyn std::fmt::Display| NatsError::Cluster {
        urls: shown.clone(),
        what,
        detail: e.to_string(),
    };
    let stream = js
        .get_or_create_stream(stream::Config {
            name: config.stream.clone(),
            subjects: vec![format!("{}.>", config.subject_prefix)],
            num_replicas: config.replicas,
            storage: stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            allow_direct: true,
            ..Default::default()
        })
        .await
        .map_err(|e| fail("creating the stream", &e))?;
    let runs = match js.get_key_value(&config.runs_bucket).await {
        Ok(kv) => kv,
        Err(_) => match js
            .create_key_value(kv::Config {
                bucket: config.runs_bucket.clone(),
                history: 1,
                num_replicas: config.replicas,
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
        {
            Ok(kv) => kv,
            // Created meanwhile by another host.
            Err(e) => js
                .get_key_value(&config.runs_bucket)
                .await
                .map_err(|_| fail("creating the run bucket", &e))?,
        },
    };
    let artifacts = match js.get_object_store(&config.artifacts_bucket).await {
        Ok(o) => o,
        Err(_) => match js
            .create_object_store(object_store::Config {
                bucket: config.artifacts_bucket.clone(),
                num_replicas: config.replicas,
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
        {
            Ok(o) => o,
            Err(e) => js
                .get_object_store(&config.artifacts_bucket)
                .await
                .map_err(|_| fail("creating the artifact bucket", &e))?,
        },
    };
    Ok((stream, runs, artifacts))
}
