//! The runs of clients without a session (2026-07-28, stateless
//! servers): one per client and burst of activity, ended once the client
//! has been idle for the proxy's bound ([`super::HttpProxy::idle_close`]).

use std::sync::Arc;

use reel::fact::RunStatus;
use reel_recorder::Run;

use super::Shared;

/// A client's sessionless run: when it last saw an exchange begin or
/// end, and how many of its exchanges are open.
pub(super) struct ClientRun {
    pub(super) run: Option<Run>,
    pub(super) last: std::time::Instant,
    pub(super) open: usize,
}

impl ClientRun {
    pub(super) fn idle(&self, bound: std::time::Duration) -> bool {
        self.open == 0 && self.last.elapsed() >= bound
    }
}

/// Ends the sessionless runs whose clients have been idle for the
/// proxy's bound, checking a few times per bound (at most every 30 s).
pub(super) async fn sweep_idle(shared: Arc<Shared>) {
    let bound = shared.proxy.idle_close;
    let every = (bound / 4).clamp(
        std::time::Duration::from_millis(50),
        std::time::Duration::from_secs(30),
    );
    loop {
        tokio::time::sleep(every).await;
        let idle: Vec<Run> = {
            let mut runs = shared.sessionless.lock().await;
            let keys: Vec<String> = runs
                .iter()
                .filter(|(_, c)| c.idle(bound))
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter()
                .filter_map(|k| runs.remove(k).and_then(|c| c.run))
                .collect()
        };
        for run in idle {
            end_idle(run).await;
        }
    }
}

pub(super) async fn end_idle(run: Run) {
    if let Err(e) = run.end(RunStatus::Completed).await {
        tracing::warn!("the idle sessionless MCP run did not end cleanly: {e}");
    }
}
