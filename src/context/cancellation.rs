//! Cancellation: the call's token, and every await of a capability raced
//! against it (cancellation polled first).

use super::*;
use reel_core::lock::lock;

/// The host's handle on a call's cancellation.
#[derive(Clone, Debug)]
pub struct CancelHandle {
    pub(super) token: CancellationToken,
    pub(super) reason: Arc<Mutex<Option<String>>>,
}

impl Default for CancelHandle {
    fn default() -> CancelHandle {
        CancelHandle::new()
    }
}

impl CancelHandle {
    /// A fresh, untripped handle.
    pub fn new() -> CancelHandle {
        CancelHandle {
            token: CancellationToken::new(),
            reason: Arc::new(Mutex::new(None)),
        }
    }

    /// Trips the token (the host files `cancel.requested` itself). The
    /// first reason given is kept.
    pub fn cancel(&self, reason: Option<String>) {
        let mut r = lock(&self.reason);
        if r.is_none() {
            *r = reason;
        }
        drop(r);
        self.token.cancel();
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// A handle for a child call: cancelled with this one, and on its own.
    pub fn child(&self) -> CancelHandle {
        CancelHandle {
            token: self.token.child_token(),
            reason: self.reason.clone(),
        }
    }

    /// The reason given to the first [`CancelHandle::cancel`].
    pub fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }
}

impl ToolContext {
    /// True once cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Completes when cancellation is requested.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// Runs `fut` unless the call is cancelled first: every await of the
    /// context goes through here. Cancellation wins a tie (it is polled
    /// first), so a replay, which trips the token at the recorded point,
    /// ends the same await the same way. On cancellation `fut` is dropped
    /// and nothing of it is filed: `cancel.requested` (the host's) already
    /// marks the point, and the call ends `aborted` unless the tool goes on.
    pub(super) async fn until_cancelled<T>(
        &self,
        fut: impl Future<Output = T>,
    ) -> Result<T, ContextError> {
        self.check_cancel()?;
        let cancelled = self.inner.cancel.cancelled();
        futures::pin_mut!(cancelled);
        futures::pin_mut!(fut);
        match futures::future::select(cancelled, fut).await {
            futures::future::Either::Left(_) => Err(self.cancelled_error()),
            futures::future::Either::Right((value, _)) => Ok(value),
        }
    }

    pub(super) fn cancelled_error(&self) -> ContextError {
        ContextError::Cancelled {
            reason: lock(&self.inner.cancel_reason).clone(),
        }
    }

    /// `Err(Cancelled)` once cancellation was requested: `ctx.check_cancel()?`.
    pub fn check_cancel(&self) -> Result<(), ContextError> {
        if self.is_cancelled() {
            Err(ContextError::Cancelled {
                reason: lock(&self.inner.cancel_reason).clone(),
            })
        } else {
            Ok(())
        }
    }

    /// The cancellation token, to pass on to other code.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    // ---- progress -----------------------------------------------------------
}
