//! A call's notifications to its client: progress and log messages, sent
//! in the order the tool made them, by one task per call, started with the
//! call's first notification (most calls send none: they then cost no task
//! and no flush round trip).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use reel::fact::Level;
use reel_recorder::{LogListener, ProgressListener};
use rmcp::model::{
    LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam,
    ProgressNotification, ProgressNotificationParam, ProgressToken, ServerNotification,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::convert;

/// Which log messages reach the client.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LogGate {
    /// All (2025-11-25 before any `logging/setLevel`).
    Open,
    /// At or above the level (set by `logging/setLevel`, or the request's
    /// `_meta` opt-in on 2026-07-28).
    AtLeast(LoggingLevel),
    /// None (a 2026-07-28 request that did not opt in).
    Closed,
}

impl LogGate {
    fn passes(self, level: LoggingLevel) -> bool {
        match self {
            LogGate::Open => true,
            LogGate::AtLeast(min) => convert::rank(level) >= convert::rank(min),
            LogGate::Closed => false,
        }
    }
}

/// Where the notifications of a call go: the request the call answers
/// (a call suspended in input-required rounds answers a new request each
/// round).
struct Target {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    gate: LogGate,
}

enum Msg {
    Send(Peer<RoleServer>, Box<ServerNotification>),
    Flush(oneshot::Sender<()>),
}

/// The progress and log listener of one served call.
pub(crate) struct Notifier {
    tx: mpsc::UnboundedSender<Msg>,
    /// The queue's receiving end until the first notification starts the
    /// sender task with it (`None` from then on).
    idle: Mutex<Option<mpsc::UnboundedReceiver<Msg>>>,
    /// Set once the sender task runs: the tool's thread then skips the
    /// `idle` lock.
    started: AtomicBool,
    /// Where the sender task runs: the call's runtime (a tool may notify
    /// from a thread of its own).
    runtime: tokio::runtime::Handle,
    target: Mutex<Target>,
    reports: AtomicU64,
}

use reel::lock::lock;

impl Notifier {
    /// Starts the call's sender task; it sends to `peer` until
    /// [`Notifier::retarget`].
    pub(crate) fn start(
        peer: Peer<RoleServer>,
        token: Option<ProgressToken>,
        gate: LogGate,
    ) -> Arc<Notifier> {
        let (tx, rx) = mpsc::unbounded_channel::<Msg>();
        Arc::new(Notifier {
            tx,
            idle: Mutex::new(Some(rx)),
            started: AtomicBool::new(false),
            runtime: tokio::runtime::Handle::current(),
            target: Mutex::new(Target { peer, token, gate }),
            reports: AtomicU64::new(0),
        })
    }

    /// Queues a notification, starting the sender task with the first.
    /// False once the queue is closed.
    fn queue(&self, peer: Peer<RoleServer>, n: ServerNotification) -> bool {
        if !self.started.load(Ordering::Acquire) {
            self.start_sender();
        }
        self.tx.send(Msg::Send(peer, Box::new(n))).is_ok()
    }

    /// Starts the sender task, once.
    fn start_sender(&self) {
        if let Some(mut rx) = lock(&self.idle).take() {
            self.runtime.spawn(async move {
                while let Some(msg) = rx.recv().await {
                    match msg {
                        // A client gone is no failure of the call: its
                        // facts are recorded all the same.
                        Msg::Send(peer, n) => drop(peer.send_notification(*n).await),
                        Msg::Flush(done) => drop(done.send(())),
                    }
                }
            });
        }
        self.started.store(true, Ordering::Release);
    }

    /// The request the next notifications belong to (over stateless
    /// HTTP each round has a peer of its own).
    pub(crate) fn retarget(
        &self,
        peer: Peer<RoleServer>,
        token: Option<ProgressToken>,
        gate: LogGate,
    ) {
        *lock(&self.target) = Target { peer, token, gate };
    }

    /// Waits until everything queued so far was handed to the transport:
    /// a call's notifications go out before its result.
    pub(crate) async fn flush(&self) {
        if !self.started.load(Ordering::Acquire) && lock(&self.idle).is_some() {
            // Nothing was ever queued (the first notification takes the
            // receiver before it is queued).
            return;
        }
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

impl ProgressListener for Notifier {
    fn progress(&self, _call_id: &str, payload: &Value) -> bool {
        let n = self.reports.fetch_add(1, Ordering::Relaxed) + 1;
        let (peer, token) = {
            let target = lock(&self.target);
            match &target.token {
                Some(token) => (target.peer.clone(), token.clone()),
                None => return false,
            }
        };
        let number = |key: &str| payload.get(key).and_then(Value::as_f64);
        let mut params =
            ProgressNotificationParam::new(token, number("progress").unwrap_or(n as f64));
        if let Some(total) = number("total") {
            params = params.with_total(total);
        }
        if let Some(message) = payload.get("message").and_then(Value::as_str) {
            params = params.with_message(message);
        }
        self.queue(
            peer,
            ServerNotification::ProgressNotification(ProgressNotification::new(params)),
        )
    }
}

impl LogListener for Notifier {
    fn deliver(&self, call_id: &str, level: Level, data: &Value) -> bool {
        self.deliver_from(call_id, level, None, data)
    }

    fn deliver_from(
        &self,
        _call_id: &str,
        level: Level,
        logger: Option<&str>,
        data: &Value,
    ) -> bool {
        let level = convert::level(level);
        let peer = {
            let target = lock(&self.target);
            if !target.gate.passes(level) {
                return false;
            }
            target.peer.clone()
        };
        let mut params = LoggingMessageNotificationParam::new(level, data.clone());
        if let Some(logger) = logger {
            params = params.with_logger(logger);
        }
        self.queue(
            peer,
            ServerNotification::LoggingMessageNotification(LoggingMessageNotification::new(params)),
        )
    }
}
