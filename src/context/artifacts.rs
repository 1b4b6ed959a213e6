//! Artifacts: put and get in the run's composed artifact scope.

use super::*;

/// The scope a run's artifacts are stored under, composed as seed 000
/// composes it: the caller's tenant and principal as supplied (absent stays
/// absent, empty stays empty), and a conversation that is always present:
///
/// - `conversation:<id>` when the caller named a (non-empty) conversation;
/// - else `session:<id>` when the run is bound to a (non-empty) session;
/// - else `run:<id>`: the run alone; for a call outside any run,
///   `call:<key>`: that call alone (with the calls it dispatches).
///
/// The source is part of the value, so a session string never aliases a
/// conversation or a run of the same name. This is what stores key on and
/// what `artifact.*` facts record as `scope`; the tool's
/// [`ToolContext::identity`] stays what the caller supplied.
///
/// ```
/// use reel::context::artifact_scope;
/// use reel::context::Home;
/// let run = Home::Run("run-1".into());
/// let scope = artifact_scope(&run, Some("s-1"), None);
/// assert_eq!((scope.tenant, scope.conversation.as_deref()), (None, Some("session:s-1")));
/// assert_eq!(artifact_scope(&run, None, None).conversation.as_deref(), Some("run:run-1"));
/// let outside = Home::OutsideRun { key: "call-1f".into() };
/// assert_eq!(artifact_scope(&outside, None, None).conversation.as_deref(), Some("call:call-1f"));
/// ```
pub fn artifact_scope(
    home: &Home,
    session_id: Option<&str>,
    identity: Option<&Identity>,
) -> Identity {
    let named = identity
        .and_then(|i| i.conversation.as_deref())
        .filter(|c| !c.is_empty());
    let session = session_id.filter(|s| !s.is_empty());
    let conversation = match (named, session) {
        (Some(c), _) => format!("conversation:{c}"),
        (None, Some(s)) => format!("session:{s}"),
        (None, None) => match home {
            Home::Run(run_id) => format!("run:{run_id}"),
            Home::OutsideRun { key } => format!("call:{key}"),
        },
    };
    Identity {
        tenant: identity.and_then(|i| i.tenant.clone()),
        principal: identity.and_then(|i| i.principal.clone()),
        conversation: Some(conversation),
    }
}

/// The claim-check store of a call, bound to the run's scope.
pub struct Artifacts<'a> {
    ctx: &'a ToolContext,
}

impl Artifacts<'_> {
    /// Stores bytes; the ticket's origin names this run and call.
    pub async fn put(
        &self,
        media_type: &str,
        bytes: impl Into<Vec<u8>>,
    ) -> Result<ArtifactMeta, ContextError> {
        let ctx = self.ctx;
        ctx.after_respond("artifacts.put")?;
        ctx.until_cancelled(ctx.inner.backend.ready()).await?;
        if !ctx.has_artifacts() {
            return Err(self.refuse(ArtifactOp::Put, None, ContextError::NoArtifactStore));
        }
        match ctx
            .until_cancelled(ctx.inner.backend.put_artifact(media_type, bytes.into()))
            .await?
        {
            Ok(meta) => {
                ctx.emit(FactKind::ArtifactPut(ArtifactPut { meta: meta.clone() }));
                Ok(meta)
            }
            Err(e) => Err(self.refuse(ArtifactOp::Put, None, ContextError::ArtifactStore(e))),
        }
    }

    /// Fetches an artifact of this run's scope; `None` when there is none.
    pub async fn get(&self, id: &str) -> Result<Option<FoundArtifact>, ContextError> {
        let ctx = self.ctx;
        ctx.after_respond("artifacts.get")?;
        ctx.until_cancelled(ctx.inner.backend.ready()).await?;
        if !ctx.has_artifacts() {
            return Err(self.refuse(ArtifactOp::Get, Some(id), ContextError::NoArtifactStore));
        }
        match ctx
            .until_cancelled(ctx.inner.backend.get_artifact(id))
            .await?
        {
            Ok(found) => {
                ctx.emit(FactKind::ArtifactGet(ArtifactGet {
                    id: id.into(),
                    meta: found.as_ref().map(|(m, _)| m.clone()),
                }));
                Ok(found)
            }
            Err(e) => Err(self.refuse(ArtifactOp::Get, Some(id), ContextError::ArtifactStore(e))),
        }
    }

    fn refuse(&self, op: ArtifactOp, id: Option<&str>, err: ContextError) -> ContextError {
        self.ctx.emit(FactKind::ArtifactRefused(ArtifactRefused {
            op,
            id: id.map(str::to_owned),
            reason: err.to_string(),
        }));
        err
    }
}

impl ToolContext {
    /// True when an artifact store is attached.
    pub fn has_artifacts(&self) -> bool {
        self.inner.backend.has_artifacts()
    }

    /// The claim-check store, bound to this run's scope (composed by the
    /// host from the run's identity, session and id: see
    /// [`artifact_scope`]; the tool cannot name, widen or replace it).
    /// Always present: without a store every method refuses, saying how to
    /// attach one.
    pub fn artifacts(&self) -> Artifacts<'_> {
        Artifacts { ctx: self }
    }

    // ---- elicitation ----------------------------------------------------------
}
