//! Effects, the clock and randomness: journaled while recording, answered
//! from the record in replay.

use super::*;
use reel_core::lock::lock;

impl ToolContext {
    /// Runs a side effect through the journal: live, `run` is called once and
    /// its outcome recorded; in replay the recorded outcome is returned and
    /// `run` is never called.
    ///
    /// An error of `run` comes back live as [`ToolError::Source`], the error
    /// itself (`err.downcast_ref::<MyError>()`, or
    /// [`ToolError::downcast_value`] for a non-`Error` type such as
    /// `String`); in replay the record holds only its message, which comes
    /// back as [`ToolError::Failed`] with the same `Display`.
    pub async fn effect<Req, T, E, F, Fut>(
        &self,
        name: &str,
        request: &Req,
        run: F,
    ) -> Result<T, ToolError>
    where
        Req: Serialize + ?Sized,
        T: Serialize + DeserializeOwned,
        E: fmt::Display + Send + Sync + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        self.after_respond("effect")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        let request = serde_json::to_value(request).map_err(|e| ContextError::Effect {
            name: name.into(),
            detail: format!("its request does not serialise: {e}"),
        })?;
        // Live, the closure's error itself is kept for the tool (typed);
        // the record keeps its message, which is all replay has.
        let typed: Arc<Mutex<Option<ErrorSource>>> = Arc::default();
        let slot = typed.clone();
        let run: EffectFn = Box::new(move || {
            Box::pin(async move {
                match run().await {
                    Ok(v) => serde_json::to_value(v)
                        .map_err(|e| format!("its result does not serialise: {e}")),
                    Err(e) => {
                        let source = ErrorSource::of_display(e);
                        let message = source.message.clone();
                        *lock(&slot) = Some(source);
                        Err(message)
                    }
                }
            })
        });
        let outcome = self
            .until_cancelled(self.inner.backend.effect(name, &request, run))
            .await?;
        self.emit(FactKind::Effect(Effect {
            name: name.into(),
            request,
            outcome: outcome.clone(),
        }));
        match outcome {
            EffectOutcome::Ok(v) => serde_json::from_value(v).map_err(|e| {
                ToolError::from(ContextError::Effect {
                    name: name.into(),
                    detail: format!("the recorded result does not fit the expected type: {e}"),
                })
            }),
            EffectOutcome::Err(e) => {
                let typed = lock(&typed).take();
                match typed {
                    Some(source) if source.message == e => Err(ToolError::Source(source)),
                    _ => Err(ToolError::Failed(e)),
                }
            }
        }
    }

    /// Reads the clock (unix nanoseconds), journaled.
    /// After the call ended it still answers, and files nothing (counted as
    /// refused, see [`ToolContext::close`]).
    pub fn now(&self) -> i64 {
        let unix_nanos = self.inner.backend.clock();
        if self.refused_after_end("clock") {
            return unix_nanos;
        }
        self.emit(FactKind::Clock(Clock { unix_nanos }));
        unix_nanos
    }

    /// Draws 64 random bits, journaled.
    /// After the call ended it still answers, and files nothing (counted as
    /// refused, see [`ToolContext::close`]).
    pub fn random(&self) -> u64 {
        let value = self.inner.backend.random();
        if self.refused_after_end("random") {
            return value;
        }
        self.emit(FactKind::Random(Random { value }));
        value
    }

    // ---- output ---------------------------------------------------------------------
}
