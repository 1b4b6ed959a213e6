//! The projection's loop: reach the cluster, keep the durable consumer,
//! land what it delivers, acknowledge it, copy the artifacts.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use futures::future::BoxFuture;
use futures::StreamExt as _;

use reel_archive::Archive;

use super::artifacts::{copy_artifacts, copy_wanted};
use super::land::{fill_gap, land, refuse, Landed, Landing};
use super::state::{load_state, save_state, State};
use super::{Stop, SyncReport, FOLLOW_WAIT};
use crate::store::Cluster;
use crate::subject::stream_of_subject;
use crate::{NatsConfig, NatsError};

/// How long a stopped follower's final artifact copy may wait for the
/// cluster.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// How often [`retry`] asks again within its budget.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Projects the stream (see [`super::sync`]); with `stop`, keeps following
/// it until `stop` completes (see [`super::follow`]).
pub(super) async fn project(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
    stop: Option<Stop<'_>>,
) -> Result<SyncReport, NatsError> {
    let mut follow = Follow {
        stop,
        warned: false,
    };
    let state = load_state(archive)?;
    // A follower started while the cluster is unreachable waits for it,
    // as it waits for one that goes away later (one warning).
    let mut from = config;
    let reached = retry(
        &mut from,
        follow.if_following(),
        Duration::ZERO,
        |config, warned| {
            Box::pin(async move {
                // Once the follower said it waits, the setup's own retries
                // are part of that wait.
                let mut cluster = Cluster::connect_saying((*config).clone(), !warned).await?;
                let info = cluster.stream.info().await.map(|i| i.state.last_sequence);
                let last = info.map_err(|e| cluster.error("reading the stream's state", e))?;
                Ok((cluster, last))
            })
        },
    )
    .await?;
    let Some((cluster, last)) = reached else {
        return Ok(SyncReport::default());
    };
    let consumer_name = match consumer {
        Some(name) => name.to_owned(),
        None => format!("reel-sync-{}", state.id),
    };
    // Right after a node or the cluster restarts, the consumer's leader may
    // still be elected: waited out as the store waits (the offline policy).
    let budget = match config.offline {
        crate::OfflinePolicy::Wait(d) => d,
        crate::OfflinePolicy::Fail => Duration::ZERO,
    };
    let mut asked = (&cluster, consumer_name.as_str(), config);
    let made = retry(&mut asked, follow.if_following(), budget, |asked, _| {
        let (cluster, name, config) = *asked;
        Box::pin(async move {
            let made = cluster
                .stream
                .get_or_create_consumer(
                    name,
                    pull::Config {
                        durable_name: Some(name.to_owned()),
                        ack_policy: AckPolicy::All,
                        deliver_policy: DeliverPolicy::All,
                        filter_subject: format!("{}.>", config.subject_prefix),
                        ..Default::default()
                    },
                )
                .await;
            made.map_err(|e| cluster.error("creating the projection's consumer", e))
        })
    })
    .await?;
    let Some(consumer) = made else {
        return Ok(SyncReport::default());
    };
    // The id is kept from the first sync on, with its consumer.
    save_state(archive, &state)?;
    let seen = consumer_floor(&consumer).await;
    follow.answered();
    let projection = Projection {
        config,
        archive,
        cluster,
        consumer,
        state,
        report: SyncReport::default(),
        follow,
        next: HashMap::new(),
        touched: HashSet::new(),
        seen,
        wanted: HashMap::new(),
        redelivery_said: false,
    };
    projection.run(last, budget).await
}

/// One projection under way: what its loop reads and updates.
struct Projection<'p, 's> {
    config: &'p NatsConfig,
    archive: &'p Archive,
    cluster: Cluster,
    consumer: PullConsumer,
    state: State,
    report: SyncReport,
    follow: Follow<'s>,
    /// The runs this projection has landed blocks of.
    next: HashMap<String, Landed>,
    /// The streams it touched.
    touched: HashSet<String>,
    /// The highest stream sequence delivered so far.
    seen: u64,
    /// Artifacts the landed facts refer to that the archive lacks, with the
    /// batches they have been asked for (following only).
    wanted: HashMap<String, u32>,
    /// Whether the wait for a redelivery was said.
    redelivery_said: bool,
}

impl Projection<'_, '_> {
    /// Fetches, lands and acknowledges batches until the stream's `last`
    /// message (or, following, the stop), then copies the artifacts.
    async fn run(mut self, last: u64, budget: Duration) -> Result<SyncReport, NatsError> {
        let following = self.follow.following();
        // Since when fetches have failed in a row (not following).
        let mut failing: Option<Instant> = None;
        loop {
            let done = if following {
                self.follow.stopped()
            } else {
                self.seen >= last
            };
            if done {
                break;
            }
            let wait = if following {
                FOLLOW_WAIT
            } else {
                Duration::from_secs(2)
            };
            let fetched = self
                .consumer
                .fetch()
                .max_messages(256)
                .expires(wait)
                .messages()
                .await;
            let mut batch = match fetched {
                Ok(b) => b,
                Err(e) if following => {
                    self.follow.unreachable(&e).await;
                    continue;
                }
                Err(e) => {
                    self.fetch_failed(&mut failing, budget, &e).await?;
                    continue;
                }
            };
            let mut last_msg = None;
            let mut broke = None;
            while let Some(msg) = batch.next().await {
                let msg = match msg {
                    Ok(m) => m,
                    Err(e) if following => {
                        self.follow.unreachable(&e).await;
                        break;
                    }
                    Err(e) => {
                        broke = Some(e);
                        break;
                    }
                };
                failing = None;
                self.follow.answered();
                if !self.take(&msg).await? {
                    break;
                }
                last_msg = Some(msg);
            }
            let Some(msg) = last_msg else {
                if following {
                    // A fetch sent while the connection is down does not fail:
                    // it comes back empty when its wait is over, as it does
                    // from a quiet stream. The connection tells them apart.
                    let state = self.cluster.js.client().connection_state();
                    if state != async_nats::connection::State::Connected {
                        let why = "no connection to any of its nodes (reconnecting)";
                        self.follow.unreachable(&why).await;
                    }
                    continue;
                }
                if let Some(e) = broke {
                    self.fetch_failed(&mut failing, budget, &e).await?;
                    continue;
                }
                // Nothing came within the wait: asked of the consumer itself.
                if self.caught_up(last, budget).await? {
                    break;
                }
                continue;
            };
            self.acknowledge(msg).await?;
            if let Some(e) = broke {
                self.fetch_failed(&mut failing, budget, &e).await?;
            }
        }
        self.finish(budget).await
    }

    /// A fetch that failed while syncing (a consumer whose leader is being
    /// placed answers 503 for a moment, as the cluster does right after a
    /// node restarts): asked again every [`RETRY_PAUSE`] while the offline
    /// policy's budget lasts since the first failure in a row (said once),
    /// then the error. What was landed before it is acknowledged first.
    async fn fetch_failed(
        &self,
        failing: &mut Option<Instant>,
        budget: Duration,
        e: &dyn std::fmt::Display,
    ) -> Result<(), NatsError> {
        let first = failing.is_none();
        let since = *failing.get_or_insert_with(Instant::now);
        if since.elapsed() >= budget {
            return Err(self.cluster.error("fetching from the stream", e));
        }
        if first {
            tracing::warn!("reel-nats: fetching from the stream: {e}; trying again");
        }
        tokio::time::sleep(RETRY_PAUSE).await;
        Ok(())
    }

    /// Takes one delivered message: lands it, or refuses or skips it. True
    /// when it is done with (the batch's ack covers it); false when the
    /// cluster went away while following (not acknowledged: delivered
    /// again).
    async fn take(&mut self, msg: &jetstream::Message) -> Result<bool, NatsError> {
        let following = self.follow.following();
        let seq = msg.info().map(|i| i.stream_sequence).unwrap_or(0);
        self.report.messages += 1;
        let subject = msg.subject.to_string();
        let Some((stream, _)) = stream_of_subject(&self.config.subject_prefix, &subject) else {
            tracing::warn!(
                "reel-nats: sync skips message {seq} on {subject}: not a reel stream's subject"
            );
            self.seen = self.seen.max(seq);
            return Ok(true);
        };
        if self.state.refused.contains_key(&subject) {
            // The subject stopped being projected at an earlier message.
            self.report.refused += 1;
            self.seen = self.seen.max(seq);
            return Ok(true);
        }
        let refers = match self.land_with_gap(&stream, &subject, seq, msg).await {
            Ok(refers) => refers,
            Err(Landing::Failed(e @ NatsError::Cluster { .. })) if following => {
                // Not landed, not acknowledged: delivered again.
                self.follow.unreachable(&e).await;
                return Ok(false);
            }
            Err(Landing::Failed(e)) => return Err(e),
            // This message, or one of the subject's before it that the
            // gap was filled with (refused at its own sequence): this
            // one cannot follow it.
            Err(Landing::Refused { seq: at, reason }) => {
                refuse(
                    &mut self.state,
                    &mut self.report,
                    &stream,
                    &subject,
                    at,
                    reason,
                );
                self.seen = self.seen.max(seq);
                return Ok(true);
            }
        };
        if following {
            for digest in refers {
                self.wanted.entry(digest).or_insert(0);
            }
        }
        self.touched.insert(stream);
        self.seen = self.seen.max(seq);
        Ok(true)
    }

    /// Lands stream message `seq`; when it is ahead of the projection, the
    /// subject's blocks before it first (see [`fill_gap`]).
    async fn land_with_gap(
        &mut self,
        stream: &str,
        subject: &str,
        seq: u64,
        msg: &jetstream::Message,
    ) -> Result<Vec<String>, Landing> {
        let landed = land(
            self.archive,
            &mut self.state.heads,
            &mut self.next,
            stream,
            subject,
            seq,
            &msg.payload,
            &mut self.report,
            true,
        )?;
        if let Some(refers) = landed {
            return Ok(refers);
        }
        // Ahead of the projection: the stream's blocks before it were
        // delivered and lost (the cluster went away with them in flight),
        // and the consumer delivers them again only after its ack wait.
        // They are read from the stream, then this one lands.
        let floor = consumer_floor(&self.consumer).await;
        let mut refers = fill_gap(
            &self.cluster,
            self.archive,
            &mut self.state.heads,
            &mut self.next,
            (stream, subject),
            (floor, seq),
            &mut self.report,
        )
        .await?;
        let landed = land(
            self.archive,
            &mut self.state.heads,
            &mut self.next,
            stream,
            subject,
            seq,
            &msg.payload,
            &mut self.report,
            false,
        )?;
        refers.extend(landed.unwrap_or_default());
        Ok(refers)
    }

    /// Makes what was landed durable, then acknowledges it up to `msg`, and
    /// copies the artifacts wanted so far.
    async fn acknowledge(&mut self, msg: jetstream::Message) -> Result<(), NatsError> {
        self.archive
            .flush()
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        save_state(self.archive, &self.state)?;
        let acked = msg.double_ack().await;
        match acked {
            Ok(()) => {}
            // Unacknowledged blocks are delivered again, and recognised.
            Err(e) if self.follow.following() => self.follow.unreachable(&e).await,
            Err(e) => return Err(self.cluster.error("acknowledging the projected blocks", e)),
        }
        if !self.wanted.is_empty() {
            self.report.artifacts +=
                copy_wanted(&mut self.cluster, self.archive, &mut self.wanted).await?;
        }
        Ok(())
    }

    /// After a fetch that brought nothing: whether the projection has all
    /// the stream held when the sync began. Only the consumer's own answer
    /// ends a sync: one it cannot give right now (its leader being elected
    /// after a node restarts) is asked again within the offline wait, then
    /// an error, never taken as "nothing left". Caught up when its
    /// acknowledged floor reached the stream's `last` message, or when it
    /// has nothing left to deliver and nothing delivered unacknowledged (a
    /// stream that lost its last messages to its limits). Messages
    /// delivered earlier and never acknowledged (a reader killed with them
    /// in hand, or a batch lost on its way) are delivered again after the
    /// consumer's ack wait: waited for, said once.
    async fn caught_up(&mut self, last: u64, budget: Duration) -> Result<bool, NatsError> {
        let mut asked = (&self.cluster, self.consumer.clone());
        let info = retry(&mut asked, None, budget, |asked, _| {
            let (cluster, consumer) = asked;
            Box::pin(async move {
                let info = consumer.info().await.cloned();
                info.map_err(|e| cluster.error("reading the projection's consumer", e))
            })
        })
        .await?;
        let Some(info) = info else {
            return Ok(false);
        };
        if info.ack_floor.stream_sequence >= last {
            return Ok(true);
        }
        if info.num_pending > 0 {
            return Ok(false);
        }
        if info.num_ack_pending == 0 {
            return Ok(true);
        }
        if !self.redelivery_said {
            tracing::warn!(
                "reel-nats: {} messages of the stream were delivered to an earlier reader \
                 and never acknowledged; the sync waits for their redelivery (the consumer's \
                 ack wait, {} s)",
                info.num_ack_pending,
                info.config.ack_wait.as_secs()
            );
            self.redelivery_said = true;
        }
        Ok(false)
    }

    /// Copies every artifact the archive lacks, flushes, and reports.
    async fn finish(mut self, budget: Duration) -> Result<SyncReport, NatsError> {
        let following = self.follow.following();
        // Waited for as the consumer is (a node just gone may hold the
        // bucket's leader): every artifact is there before the sync says so.
        // A follower told to stop waits a moment at most: in an outage it
        // would wait the whole offline wait for the artifacts, which the next
        // sync copies anyway (it copies every one the projection lacks).
        let budget = if following {
            budget.min(STOP_GRACE)
        } else {
            budget
        };
        let mut copying = (&mut self.cluster, self.archive, &mut self.report.artifacts);
        let copied = retry(&mut copying, None, budget, |copying, _| {
            let (cluster, archive, copied) = copying;
            Box::pin(copy_artifacts(cluster, archive, copied))
        })
        .await;
        match copied {
            Ok(_) => {}
            Err(e @ NatsError::Cluster { .. }) if following => {
                tracing::warn!(
                    "reel-nats: stopping with artifacts not copied yet ({e}); the next `reel sync` copies them"
                );
            }
            Err(e) => return Err(e),
        }
        self.archive
            .flush()
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        self.report.streams = self.touched.len() as u64;
        Ok(self.report)
    }
}

/// A follower's stop, and whether it said the cluster is unreachable (said
/// again only after it answered). A sync has no stop.
struct Follow<'s> {
    stop: Option<Stop<'s>>,
    warned: bool,
}

impl<'s> Follow<'s> {
    fn following(&self) -> bool {
        self.stop.is_some()
    }

    /// Itself while following, for [`retry`].
    fn if_following(&mut self) -> Option<&mut Follow<'s>> {
        self.stop.is_some().then_some(self)
    }

    /// Whether the stop has come.
    fn stopped(&mut self) -> bool {
        self.stop
            .as_mut()
            .is_some_and(|stop| futures::FutureExt::now_or_never(stop.as_mut()).is_some())
    }

    /// Says (once per outage) that the cluster did not answer, and waits a
    /// little before it asks again (the client reconnects meanwhile).
    async fn unreachable(&mut self, e: &dyn std::fmt::Display) {
        if !self.warned {
            tracing::warn!("reel-nats: following the stream: {e}; waiting for the cluster");
            self.warned = true;
        }
        tokio::time::sleep(FOLLOW_WAIT).await;
    }

    /// The cluster answered: an outage said is over.
    fn answered(&mut self) {
        if self.warned {
            tracing::warn!("reel-nats: following the stream again");
            self.warned = false;
        }
    }
}

/// The projection's one retry loop: runs `attempt` (given `state` and
/// whether the follower said it waits) until it succeeds.
///
/// While following (`follow`), every failure is waited out, said once per
/// outage, until the follower's stop comes: then `Ok(None)`. Otherwise a
/// cluster that does not answer ([`NatsError::Cluster`]) is asked again
/// every [`RETRY_PAUSE`] while `budget` lasts (said once), and any other
/// failure, or one past the budget, is returned.
async fn retry<S, T>(
    state: &mut S,
    mut follow: Option<&mut Follow<'_>>,
    budget: Duration,
    mut attempt: impl for<'a> FnMut(&'a mut S, bool) -> BoxFuture<'a, Result<T, NatsError>>,
) -> Result<Option<T>, NatsError> {
    let start = Instant::now();
    let mut said = false;
    loop {
        let warned = follow.as_ref().is_some_and(|f| f.warned);
        let e = match attempt(state, warned).await {
            Ok(done) => return Ok(Some(done)),
            Err(e) => e,
        };
        match follow.as_deref_mut() {
            Some(follow) => {
                if follow.stopped() {
                    return Ok(None);
                }
                follow.unreachable(&e).await;
            }
            None if matches!(e, NatsError::Cluster { .. }) && start.elapsed() < budget => {
                if !said {
                    tracing::warn!("reel-nats: {e}; trying again");
                    said = true;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            None => return Err(e),
        }
    }
}

/// The stream sequence up to which the consumer has every message
/// acknowledged.
async fn consumer_floor(consumer: &PullConsumer) -> u64 {
    let mut c = consumer.clone();
    c.info()
        .await
        .map(|i| i.ack_floor.stream_sequence)
        .unwrap_or(0)
}
