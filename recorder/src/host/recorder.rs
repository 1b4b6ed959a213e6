//! [`Recorder`]: opens the archive and the writer, starts runs and calls
//! outside any run, flushes and shuts down.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reel::context::*;
use reel::fact::*;
use reel::lock::write;
use reel::store::Store;
use reel_archive::{Archive, ArchiveConfig, Keyring};
use serde::Serialize;

use crate::config::{Durability, RecorderConfig};
use crate::writer::Queue;

use super::call::CallBuilder;
use super::inner::RecorderInner;
use super::lock;
use super::run::{Caller, Run, RunStart};
use super::RecorderError;

/// Records runs into an archive, or into any [`Store`]. Cheap to clone. Dropping the last clone
/// (and every [`Run`]) flushes and stops the writer, like a guard;
/// [`Recorder::shutdown`] does the same and says when everything is durable.
#[derive(Clone)]
pub struct Recorder {
    pub(super) inner: Arc<RecorderInner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("archive", &self.inner.archive.as_ref().map(Archive::dir))
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Opens (or creates) the archive in `dir` and starts the writer.
    pub async fn open(
        dir: impl AsRef<Path>,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        let dir = dir.as_ref().to_path_buf();
        let archive_config = ArchiveConfig {
            fingerprint_key: config.fingerprint_key.clone(),
            ..ArchiveConfig::default()
        };
        let archive = tokio::task::spawn_blocking(move || {
            // The facts' clock calibrates once per process (well under
            // a millisecond on this machine), off the runtime's threads.
            drop(quanta::Clock::new());
            Archive::open(dir, archive_config)
        })
        .await
        .map_err(|e| RecorderError::Panicked {
            what: "opening the archive",
            detail: e.to_string(),
        })??;
        Recorder::with_archive(archive, config)
    }

    /// Records into an archive already open.
    pub fn with_archive(
        archive: Archive,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        Recorder::with_archive_and_store(archive.clone(), Arc::new(archive), config)
    }

    /// Records into `store`, any [`Store`] (the archive is one; this one
    /// need not be), numbered, redacted and timed by the recorder's writer
    /// as for the archive. Run ids are checked with [`Store::has_stream`],
    /// credentials are fingerprinted under
    /// [`RecorderConfig::fingerprint_key`], and there is no live
    /// inspection (it serves an archive's directory):
    /// [`Recorder::archive`] has none to give.
    pub fn with_store(
        store: Arc<dyn Store>,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        let keys = Keyring::new(&config.fingerprint_key).map_err(RecorderError::FingerprintKey)?;
        Recorder::start(None, store.clone(), store, keys, config)
    }

    /// Records into `store`, reading from `archive`: whether a run id is
    /// taken, the fingerprint key, and live inspection. For a store that
    /// feeds the archive, as a replicated log projected into a local
    /// archive (`reel-nats`), or a store in front of the archive (otlp's
    /// live exporter).
    pub fn with_archive_and_store(
        archive: Archive,
        store: Arc<dyn Store>,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        let keys = archive.keyring();
        let reads: Arc<dyn Store> = Arc::new(archive.clone());
        Recorder::start(Some(archive), reads, store, keys, config)
    }

    fn start(
        archive: Option<Archive>,
        reads: Arc<dyn Store>,
        store: Arc<dyn Store>,
        keys: Keyring,
        config: RecorderConfig,
    ) -> Result<Recorder, RecorderError> {
        let queue = Queue::start(store, &config, &keys)?;
        // Live inspection needs a tokio runtime to serve on.
        let live = match (
            &archive,
            config.serve_live,
            tokio::runtime::Handle::try_current(),
        ) {
            (Some(archive), true, Ok(_)) => {
                Some(reel_archive::live::LiveServer::start(archive.clone())?)
            }
            _ => None,
        };
        Ok(Recorder {
            inner: Arc::new(RecorderInner {
                archive,
                reads,
                keys,
                queue,
                live: Mutex::new(live),
                config,
                live_runs: Mutex::new(HashSet::new()),
                sessions: Mutex::new(HashMap::new()),
                services: std::sync::RwLock::new(Services::default()),
            }),
        })
    }

    /// The archive recorded into (for reads).
    ///
    /// # Panics
    ///
    /// When the recorder records into a store without an archive
    /// ([`Recorder::with_store`]): see [`Recorder::try_archive`].
    pub fn archive(&self) -> &Archive {
        self.try_archive().expect(
            "this recorder records into a store without an archive (Recorder::with_store): \
             read the store itself, or use Recorder::try_archive",
        )
    }

    /// The archive recorded into, if any: `None` for a recorder made with
    /// [`Recorder::with_store`].
    pub fn try_archive(&self) -> Option<&Archive> {
        self.inner.archive.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &RecorderConfig {
        &self.inner.config
    }

    /// Registers a typed service every call gets with `ctx.get::<T>()`:
    /// every call of every run invoked from now on (one per type; a later
    /// one of the same type replaces it), and the children they dispatch.
    /// A call's own [`CallBuilder::service`] of the same type wins for that
    /// call. Services are not recorded: a replay registers its own with
    /// `ReplayOptions::service`.
    pub fn service<T: Send + Sync + 'static>(&self, service: Arc<T>) -> &Recorder {
        write(&self.inner.services).insert(service);
        self
    }

    /// How many session-scoped cleanups wait under `key` (the
    /// [`TeardownKey::session`] of a tenant, principal and session) for a
    /// run of that session to call [`Run::end_session`].
    pub fn session_cleanups(&self, key: &TeardownKey) -> usize {
        lock(&self.inner.sessions)
            .get(key)
            .map_or(0, |t| t.order.len())
    }

    /// Starts a run: files `run.started`. Refuses an id already used and an
    /// empty session id ([`RecorderError::EmptySession`]).
    pub async fn start_run(&self, start: RunStart) -> Result<Run, RecorderError> {
        let id = start.run_id.clone();
        if start.session_id.as_deref() == Some("") {
            return Err(RecorderError::EmptySession(id));
        }
        {
            let mut live = lock(&self.inner.live_runs);
            let exists = self.inner.reads.has_stream(&id)?;
            if exists || !live.insert(id.clone()) {
                return Err(RecorderError::RunExists(id));
            }
        }
        let mut teardown_scopes = start.teardown_scopes.unwrap_or_else(|| {
            vec![
                TeardownScope::Call,
                TeardownScope::Run,
                TeardownScope::Session,
            ]
        });
        // Seed 000: the scopes are what the door "can actually honour"; a
        // run with no session id has no session whose end would run a
        // session-scoped cleanup, whatever the host listed.
        if start.session_id.is_none() {
            teardown_scopes.retain(|s| *s != TeardownScope::Session);
        }
        let run = Run::open(
            self.inner.clone(),
            &id,
            false,
            start.session_id.clone(),
            start.identity.clone(),
            teardown_scopes.clone(),
            // A child of the host's: the host's cancel reaches the run,
            // the run's own cancel never trips a token the host shares.
            start
                .cancellation
                .as_ref()
                .map(tokio_util::sync::CancellationToken::child_token)
                .unwrap_or_default(),
        );
        // Known secrets reach the writer before the first fact they scrub.
        for secret in start.secrets {
            self.inner.queue.secret(&run.inner.id, secret, None);
        }
        run.emit(
            None,
            FactKind::RunStarted(RunStarted {
                run_id: id,
                session_id: start.session_id,
                identity: start.identity,
                producer: self.inner.config.producer.clone(),
                labels: start.labels,
                teardown_scopes,
            }),
        );
        run.watch(run.cancellation_token());
        if self.inner.config.durability != Durability::Buffered {
            // This run's facts: another run's failure is not this one's.
            if let Err(e) = self.inner.queue.flush(Some(&run.inner.id)).await {
                // The run is not handed out: the writer forgets it (the
                // recorder goes on; the id stays taken).
                self.inner.queue.run_closed(&run.inner.id);
                return Err(e.into());
            }
        }
        Ok(run)
    }

    /// Prepares a call outside any run (seed 000: a call served where
    /// there is no run, as over MCP, has no run id): the tool sees
    /// `ctx.run_id() == None`, and the archive keeps the call (with the
    /// calls it dispatches) as a stream of its own under a key the recorder
    /// assigns ([`CallBuilder::key`]), never under an invented run id. Its
    /// first fact is its `call.started`, its last its `call.ended`; only
    /// the call teardown scope is honoured (there is no run to end, and no
    /// session end to wait for). See [`Recorder::call_from`] to say who
    /// calls.
    pub fn call(&self, tool: &str, args: impl Serialize) -> CallBuilder {
        self.outside_run(Caller::default(), tool, args)
    }

    /// [`Recorder::call`], with the caller's identity, session and labels.
    /// Refuses an empty session id ([`RecorderError::EmptySession`]).
    pub fn call_from(
        &self,
        caller: Caller,
        tool: &str,
        args: impl Serialize,
    ) -> Result<CallBuilder, RecorderError> {
        if caller.session_id.as_deref() == Some("") {
            return Err(RecorderError::EmptySession(format!(
                "(a call of {tool} outside any run)"
            )));
        }
        Ok(self.outside_run(caller, tool, args))
    }

    pub(super) fn outside_run(
        &self,
        caller: Caller,
        tool: &str,
        args: impl Serialize,
    ) -> CallBuilder {
        let key = format!("call-{:032x}", rand::random::<u128>());
        let stream = Run::open(
            self.inner.clone(),
            &key,
            true,
            caller.session_id.clone(),
            caller.identity.clone(),
            vec![TeardownScope::Call],
            Default::default(),
        );
        let mut builder = stream.call(tool, args);
        builder.outside = Some(caller);
        builder
    }

    /// Waits until everything filed so far is durable. Fails when
    /// anything failed so far: the store as a whole, or any run's stream
    /// ([`WriteError::Run`](crate::WriteError::Run): a flush of one run, as
    /// a call's end, fails only for that run's).
    pub async fn flush(&self) -> Result<(), RecorderError> {
        Ok(self.inner.queue.flush(None).await?)
    }

    /// Facts filed but not yet written (a gauge of the queue).
    pub fn queued(&self) -> usize {
        self.inner.queue.in_flight()
    }

    /// Flushes everything, stops the writer and returns once all that was
    /// filed is durable. Facts filed afterwards are not recorded.
    pub async fn shutdown(self) -> Result<(), RecorderError> {
        // Everything filed is written first, so that followers of ended runs
        // get their last facts before the socket goes.
        let flushed = self.flush().await;
        let live = lock(&self.inner.live).take();
        if let Some(live) = live {
            live.stop(Duration::from_secs(2)).await;
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.queue.close())
            .await
            .map_err(|e| RecorderError::Panicked {
                what: "stopping the writer",
                detail: e.to_string(),
            })?;
        flushed?;
        match self.inner.queue.failure() {
            Some(f) => Err(RecorderError::Writer(f)),
            None => Ok(()),
        }
    }
}
