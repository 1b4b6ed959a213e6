//! [`CallBackend`]: what a context asks of its host (the recorder's
//! providers, or the replayer's record) and where its facts go.

use super::*;

/// The answers a context needs and the sink for the facts it files: one per
/// call. Implemented by the recorder (live) and the replayer (from the log).
///
/// Contract: [`CallBackend::emit`] is called for every fact the tool causes,
/// in order, and must neither block nor fail. A progress report comes as a
/// [`Progress`] fact whose `count` is 0: the backend has it numbered by
/// its stream's [`Sequencer`](crate::sequence::Sequencer) in the order it
/// was filed (it is the hot path: a tool calls it in loops, so a live
/// backend may send it in a compact form, as the recorder does). An answering method is called
/// right after the context filed the fact that asks (e.g.
/// `credential.requested`) and before it files the answer.
pub trait CallBackend: Send + Sync {
    /// Files one fact of this call.
    fn emit(&self, kind: FactKind);
    /// Files one progress report of this call (a [`Progress`] fact of
    /// count 0, numbered by the backend) and answers whether a client was
    /// sent it (the fact's `delivered`; a replay answers from the record).
    /// A report the backend dropped (the recorder's queue over its
    /// progress bound; counted in `progress.dropped`) was sent to none.
    /// The default files it with [`CallBackend::emit`] and answers false:
    /// nothing listens.
    fn progress(&self, payload: Value) -> bool {
        self.emit(FactKind::Progress(Progress {
            payload,
            count: 0,
            delivered: false,
        }));
        false
    }
    /// An await point: waits while the write queue is over its bound.
    fn ready(&self) -> BoxFuture<'_, ()>;
    /// True when a credential provider is attached.
    fn has_credentials(&self) -> bool;
    /// Resolves a credential; `Err` is the provider's reason.
    fn credential<'a>(
        &'a self,
        need: &'a CredentialNeed,
        mode: CredentialMode,
    ) -> BoxFuture<'a, Result<Credential, String>>;
    /// True when an artifact store is attached.
    fn has_artifacts(&self) -> bool;
    /// Stores bytes under the run's scope; returns the origin-stamped ticket.
    fn put_artifact<'a>(
        &'a self,
        media_type: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<ArtifactMeta, String>>;
    /// Fetches an artifact of the run's scope by id.
    fn get_artifact<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>>;
    /// True when an elicitor is attached.
    fn has_elicitor(&self) -> bool;
    /// Asks the user.
    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>>;
    /// Runs (live) or looks up (replay) a journaled effect.
    fn effect<'a>(
        &'a self,
        name: &'a str,
        request: &'a Value,
        run: EffectFn,
    ) -> BoxFuture<'a, EffectOutcome>;
    /// Reads the clock, unix nanoseconds.
    fn clock(&self) -> i64;
    /// Draws randomness.
    fn random(&self) -> u64;
    /// Registers a cleanup with the holder of `scope` named by `holder`
    /// (the call, the run, or the (tenant, principal, session) of
    /// [`TeardownKey`]: the same key [`ToolContext::teardown_key`] gives the
    /// tool). A repeat under the same (tool, scope, key) in that holder
    /// keeps the first cleanup and refreshes its liveness: the holder counts
    /// the registrations and keeps the time of the last one (the backend's
    /// clock), which its `teardown.ran` reports.
    fn register_teardown(
        &self,
        scope: TeardownScope,
        holder: &TeardownKey,
        key_hash: &str,
        cleanup: Cleanup,
    ) -> Registration;
    /// The hash recorded in place of a teardown key (in `teardown.*`
    /// facts, and the name its holder keeps the cleanup under). The
    /// default is the unkeyed [`teardown_key_hash`]; the recorder keys it
    /// under the fingerprint key ([`keyed_teardown_key_hash`]), and the
    /// replayer gives back the recorded hash a key was bound to.
    fn teardown_key_hash(&self, tool: &str, scope: TeardownScope, key: &str) -> String {
        teardown_key_hash(tool, scope, key)
    }
    /// True when nested tool dispatch is available.
    fn can_dispatch(&self) -> bool;
    /// The tools this call can dispatch to, sorted: `None` when it has no
    /// dispatch, `Some([])` for a dispatch with no tools. The default,
    /// for backends that do not know, is `None` without dispatch and
    /// `Some([])` with it; the recorder and the replayer override it.
    fn dispatch_tools(&self) -> Option<Vec<String>> {
        self.can_dispatch().then(Vec::new)
    }
    /// Runs another tool as a child of this call.
    fn dispatch<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
    /// Delivers a log line to a listening client; false when none listens.
    fn deliver_log(&self, level: Level, data: &Value) -> bool;
    /// [`CallBackend::deliver_log`] with the logger's name (MCP's
    /// `logger`), what the context calls. The default drops the name and
    /// delivers with `deliver_log`.
    fn deliver_log_from(&self, level: Level, logger: Option<&str>, data: &Value) -> bool {
        let _ = logger;
        self.deliver_log(level, data)
    }
    /// Whether `report` payloads are kept (content logging).
    fn content_logging(&self) -> bool;
    /// A use of `capability` the context refused because its call had
    /// ended ([`ToolContext::close`]): nothing of it was filed. The host
    /// counts it, so that the record says what was refused (the recorder
    /// files the counts at the run's end: a `warning` log of logger
    /// [`AFTER_END_LOGGER`]). The default forgets it (a replay records
    /// nothing).
    fn refused_after_end(&self, capability: &str) {
        let _ = capability;
    }
}

/// What a holder answers to [`CallBackend::register_teardown`]: seed 000's
/// "registering twice under one (tool, scope, key) is a no-op that keeps the
/// FIRST cleanup (it holds the live handle) and refreshes liveness", as
/// numbers. `teardown.registered` records all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// True for the first registration under the key (its cleanup is the
    /// one kept); false for a repeat.
    pub first: bool,
    /// Registrations under the key in this holder so far, this one included.
    pub registrations: u64,
    /// When this one was made, unix nanoseconds from the backend's clock.
    pub at: i64,
}
