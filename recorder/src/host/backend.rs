//! `LiveBackend`: the live answers to one call's context (providers,
//! clock, randomness, effects run once, cleanups held per scope).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reel::context::*;
use reel::fact::*;
use reel::tools::Tools;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::config::Durability;
use crate::providers::{
    ArtifactStore, CredentialProvider, Elicitor, LogListener, ProgressListener,
};
use crate::writer::unix_nanos;

use super::lock;
use super::run::Run;
use super::teardown::Teardowns;

/// The host's providers a call's live answers come from.
#[derive(Clone, Default)]
pub(super) struct Providers {
    pub(super) credentials: Option<Arc<dyn CredentialProvider>>,
    pub(super) artifacts: Option<Arc<dyn ArtifactStore>>,
    pub(super) elicitor: Option<Arc<dyn Elicitor>>,
    pub(super) dispatcher: Option<Tools>,
    pub(super) listener: Option<Arc<dyn LogListener>>,
    pub(super) progress: Option<Arc<dyn ProgressListener>>,
}

/// The live answers to one call's context.
pub(super) struct LiveBackend {
    pub(super) run: Run,
    /// The key the call's progress reports name it by.
    pub(super) progress_key: u64,
    pub(super) call_id: String,
    pub(super) invocation_id: Option<String>,
    /// What a dispatched child inherits: iteration, protocol, platform and
    /// client info.
    pub(super) inherited: (u32, Option<String>, Option<String>, Option<ClientInfo>),
    pub(super) providers: Providers,
    /// The call's services, which a dispatched child gets too.
    pub(super) services: Services,
    pub(super) teardowns: Mutex<Teardowns>,
    pub(super) cancel: CancelHandle,
    /// Progress reports dropped since the call's last filed fact (the
    /// queue was over its progress bound): filed as `progress.dropped`
    /// before the call's next fact, so the record keeps call order.
    pub(super) dropped: AtomicU64,
}

impl LiveBackend {
    /// Runs the call's cleanups, files `call.ended` and waits for
    /// durability as configured.
    /// Files the call's end and, unless durability is buffered, waits for
    /// its facts to be durable: `Err` (what the store said) when they could
    /// not be made so.
    pub(super) async fn finish(
        &self,
        started_at: Instant,
        result: &Result<Value, ToolError>,
    ) -> Result<(), String> {
        self.file_dropped();
        let teardowns = std::mem::take(&mut *lock(&self.teardowns));
        self.run
            .run_teardowns(Some(&self.call_id), TeardownScope::Call, teardowns)
            .await;
        let outcome = match result {
            Ok(v) => CallOutcome::Ok { result: v.clone() },
            Err(e) if e.is_cancelled() => CallOutcome::Aborted {
                reason: self.cancel.reason(),
            },
            Err(e) => CallOutcome::Error {
                error: e.to_string(),
                result: e.result().cloned(),
            },
        };
        let ended = FactKind::CallEnded(CallEnded {
            outcome,
            duration_ns: started_at.elapsed().as_nanos() as u64,
            invocation_id: self.invocation_id.clone(),
        });
        let run = &self.run.inner;
        let root = run
            .outside
            .as_ref()
            .is_some_and(|root| root.get() == Some(&self.call_id));
        if root {
            // The end of a call outside any run is its stream's end: the
            // count of refused context uses goes before it.
            self.run.file_refused_then(Some(&self.call_id), ended);
        } else {
            self.run.emit(Some(&self.call_id), ended);
        }
        if let Some(root) = &run.outside {
            if root.get() == Some(&self.call_id) {
                // The call outside any run ended: so did its stream.
                run.ended.store(true, Ordering::SeqCst);
                run.rec.queue.run_closed(&run.id);
                lock(&run.rec.live_runs).remove(&*run.id);
            }
        }
        if self.run.inner.rec.config.durability != Durability::Buffered {
            if let Err(e) = self
                .run
                .inner
                .rec
                .queue
                .flush(Some(&self.run.inner.id))
                .await
            {
                tracing::warn!(
                    call = %self.call_id,
                    run = %self.run.id(),
                    "reel-recorder: call {} of run {}: {e}",
                    self.call_id,
                    self.run.id()
                );
                return Err(e.to_string());
            }
        }
        Ok(())
    }

    /// Files `progress.dropped` for the reports dropped since the call's
    /// last filed fact, if any.
    fn file_dropped(&self) {
        if self.dropped.load(Ordering::Relaxed) == 0 {
            return;
        }
        let count = self.dropped.swap(0, Ordering::Relaxed);
        if count > 0 {
            self.run.emit(
                Some(&self.call_id),
                FactKind::ProgressDropped(ProgressDropped { count }),
            );
        }
    }

    /// The artifact scope of the run, composed (see [`artifact_scope`]):
    /// never the bare caller identity, which would let runs without one, or
    /// with the same one in different sessions, read each other's.
    pub(super) fn scope(&self) -> Identity {
        let run = &self.run.inner;
        artifact_scope(
            &self.run.home(),
            run.session_id.as_deref(),
            run.identity.as_ref(),
        )
    }
}

impl CallBackend for LiveBackend {
    fn emit(&self, kind: FactKind) {
        match kind {
            FactKind::Progress(Progress { payload, .. }) => {
                self.progress(payload);
            }
            kind => {
                self.file_dropped();
                self.run.emit(Some(&self.call_id), kind)
            }
        }
    }

    // The hot path: the context's progress fact travels as its payload,
    // under the call's key: no allocation, no lock (see `Msg::Progress`);
    // the writer's sequencer numbers it. A listener, when attached, sees
    // the report first. Over the queue's progress bound the report is
    // dropped and counted (false); the count is filed before the call's
    // next fact.
    //
    // Answers whether a client was sent the report. One that was travels
    // as a whole fact (it says `delivered`, and is never dropped: the
    // client has it); the writer numbers it in filing order all the same.
    fn progress(&self, payload: Value) -> bool {
        let sent = self
            .providers
            .progress
            .as_ref()
            .is_some_and(|listener| listener.progress(&self.call_id, &payload));
        if sent {
            self.file_dropped();
            self.run.emit(
                Some(&self.call_id),
                FactKind::Progress(Progress {
                    payload,
                    count: 0,
                    delivered: true,
                }),
            );
            return true;
        }
        if self.dropped.load(Ordering::Relaxed) != 0 {
            if !self.run.progress_room() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            self.file_dropped();
        }
        if !self.run.emit_progress(self.progress_key, payload) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        false
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let rec = &self.run.inner.rec;
            rec.queue.room().await;
            if rec.config.durability == Durability::EveryFact {
                if let Err(e) = rec.queue.flush(Some(&self.run.inner.id)).await {
                    tracing::warn!("reel-recorder: {e}");
                }
            }
        })
    }

    fn has_credentials(&self) -> bool {
        self.providers.credentials.is_some()
    }

    fn credential<'a>(
        &'a self,
        need: &'a CredentialNeed,
        _mode: CredentialMode,
    ) -> BoxFuture<'a, Result<Credential, String>> {
        Box::pin(async move {
            let provider = self
                .providers
                .credentials
                .as_ref()
                .ok_or("no credential provider")?;
            let resolved = provider
                .resolve(self.run.inner.identity.as_ref(), need)
                .await?;
            let fingerprint = self
                .run
                .inner
                .rec
                .keys
                .fingerprint(resolved.secret.expose().as_bytes());
            // Scrub this value from every later fact of the run.
            self.run.inner.rec.queue.secret(
                &self.run.inner.id,
                resolved.secret.clone(),
                Some(fingerprint.clone()),
            );
            let mut c = Credential::new(need.need.clone(), resolved.secret, fingerprint);
            c.kind = resolved.kind.or_else(|| need.kind.clone());
            c.expires_at = resolved.expires_at;
            Ok(c)
        })
    }

    fn has_artifacts(&self) -> bool {
        self.providers.artifacts.is_some()
    }

    fn put_artifact<'a>(
        &'a self,
        media_type: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<ArtifactMeta, String>> {
        Box::pin(async move {
            let store = self
                .providers
                .artifacts
                .as_ref()
                .ok_or("no artifact store")?;
            let meta = ArtifactMeta {
                id: String::new(),
                digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
                size: bytes.len() as u64,
                media_type: media_type.into(),
                scope: self.scope(),
                origin: Origin {
                    run_id: self.run.home().run_id().map(str::to_owned),
                    call_id: self.call_id.clone(),
                },
            };
            let scope = meta.scope.clone();
            let meta = store.put(meta, bytes.clone()).await?;
            // The store's contract, checked: a ticket comes back under the
            // scope it was given, with an id.
            if meta.scope != scope || meta.id.is_empty() {
                return Err(
                    "the artifact store broke its contract: the ticket it returned has another scope or no id; refused: a store must keep the scope it is given and assign a non-empty id (see `ArtifactStore`)"
                        .to_string(),
                );
            }
            self.run.inner.rec.queue.artifact(
                &self.run.inner.id,
                &self.call_id,
                &meta.digest,
                bytes,
            );
            Ok(meta)
        })
    }

    fn get_artifact<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        Box::pin(async move {
            let store = self
                .providers
                .artifacts
                .as_ref()
                .ok_or("no artifact store")?;
            let scope = self.scope();
            let found = store.get(&scope, id).await?;
            // The store's contract, checked: an artifact of another scope
            // never reaches the tool, whatever the store returns.
            if let Some((meta, _)) = &found {
                // Nothing of the other artifact (not even its scope) goes
                // into the message: it belongs to someone else.
                if meta.scope != scope || meta.id != id {
                    return Err(format!(
                        "the artifact store broke its contract: asked for {id:?} in this run's scope, it returned an artifact of another scope or id; refused: a store must return only artifacts of the scope asked for (see `ArtifactStore`)"
                    ));
                }
            }
            if let Some((meta, bytes)) = &found {
                self.run.inner.rec.queue.artifact(
                    &self.run.inner.id,
                    &self.call_id,
                    &meta.digest,
                    bytes.clone(),
                );
            }
            Ok(found)
        })
    }

    fn has_elicitor(&self) -> bool {
        self.providers.elicitor.is_some()
    }

    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(async move {
            let elicitor = self.providers.elicitor.as_ref().ok_or("no elicitor")?;
            let answer = match question.ttl_ms {
                Some(ttl) => match tokio::time::timeout(
                    Duration::from_millis(ttl),
                    elicitor.elicit(question),
                )
                .await
                {
                    Ok(answer) => answer,
                    Err(_) => Ok(ElicitAnswer {
                        outcome: ElicitOutcome::Timeout,
                        validation_errors: Vec::new(),
                        pre_resolved: false,
                    }),
                },
                None => elicitor.elicit(question).await,
            };
            // The context validates an accepted answer against the
            // question's schema, the same live and in replay.
            answer
        })
    }

    fn effect<'a>(
        &'a self,
        _name: &'a str,
        _request: &'a Value,
        run: EffectFn,
    ) -> BoxFuture<'a, EffectOutcome> {
        Box::pin(async move {
            match run().await {
                Ok(v) => EffectOutcome::Ok(v),
                Err(e) => EffectOutcome::Err(e),
            }
        })
    }

    fn clock(&self) -> i64 {
        unix_nanos()
    }

    fn random(&self) -> u64 {
        rand::random()
    }

    fn register_teardown(
        &self,
        scope: TeardownScope,
        holder: &TeardownKey,
        key_hash: &str,
        cleanup: Cleanup,
    ) -> Registration {
        // The call and the run hold their own cleanups (their keys name
        // them); sessions outlive runs, so the recorder holds theirs, per
        // (tenant, principal, session).
        let at = self.clock();
        match scope {
            TeardownScope::Call => lock(&self.teardowns).register(key_hash, cleanup, at),
            TeardownScope::Run => lock(&self.run.inner.teardowns).register(key_hash, cleanup, at),
            TeardownScope::Session => lock(&self.run.inner.rec.sessions)
                .entry(holder.clone())
                .or_default()
                .register(key_hash, cleanup, at),
        }
    }

    fn teardown_key_hash(&self, tool: &str, scope: TeardownScope, key: &str) -> String {
        crate::keyed_teardown_key_hash(&self.run.inner.rec.keys, tool, scope, key)
    }

    fn can_dispatch(&self) -> bool {
        self.providers.dispatcher.is_some()
    }

    fn dispatch_tools(&self) -> Option<Vec<String>> {
        self.providers
            .dispatcher
            .as_ref()
            .map(|tools| tools.names().map(str::to_owned).collect())
    }

    fn dispatch<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let tools =
                self.providers.dispatcher.clone().ok_or_else(|| {
                    ToolError::from(ContextError::NoDispatch { tool: tool.into() })
                })?;
            let mut child = self.run.call(tool, args);
            child.started.parent_call = Some(self.call_id.clone());
            // What the parent's caller said holds for the child too; the
            // child gets its own call id and invocation id.
            let (iteration, protocol, platform, client_info) = self.inherited.clone();
            child.started.iteration = iteration;
            child.started.protocol = protocol;
            child.started.platform = platform;
            child.started.client_info = client_info;
            child.providers = self.providers.clone();
            // The parent's services, the same `Arc`s.
            child.services = self.services.clone();
            child.cancel = self.cancel.child();
            child.invoke_tool(&tools).await
        })
    }

    fn deliver_log(&self, level: Level, data: &Value) -> bool {
        self.deliver_log_from(level, None, data)
    }

    fn deliver_log_from(&self, level: Level, logger: Option<&str>, data: &Value) -> bool {
        self.providers
            .listener
            .as_ref()
            .is_some_and(|l| l.deliver_from(&self.call_id, level, logger, data))
    }

    fn content_logging(&self) -> bool {
        self.run.inner.rec.config.content_logging
    }

    fn refused_after_end(&self, capability: &str) {
        self.run.refused_after_end(&self.call_id, capability);
    }
}
