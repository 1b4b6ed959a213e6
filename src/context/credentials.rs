//! Credentials: the needs a tool declares (resolved before it runs) and the
//! ones it pulls while running; a credential's secret never reaches a fact.

use super::*;

/// A resolved credential. Its secret never reaches a fact, a log line or an
/// error message: `Debug` and `Display` print only the fingerprint.
#[derive(Clone)]
pub struct Credential {
    /// The need it answers, e.g. `"github"`.
    pub need: String,
    /// The kind, when known.
    pub kind: Option<String>,
    /// The keyed fingerprint recorded in its place.
    pub fingerprint: Fingerprint,
    /// Expiry, unix nanoseconds.
    pub expires_at: Option<i64>,
    secret: Secret,
}

impl Credential {
    /// A credential; the recorder or replayer fills in the fingerprint.
    pub fn new(need: impl Into<String>, secret: Secret, fingerprint: Fingerprint) -> Credential {
        Credential {
            need: need.into(),
            kind: None,
            fingerprint,
            expires_at: None,
            secret,
        }
    }

    /// The secret, for the one place that needs it (an outgoing request).
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("need", &self.need)
            .field("kind", &self.kind)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// A credential the tool needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialNeed {
    /// The need or service name.
    pub need: String,
    /// The kind wanted, when it matters.
    pub kind: Option<String>,
}

impl CredentialNeed {
    /// A need by name.
    pub fn new(need: impl Into<String>) -> CredentialNeed {
        CredentialNeed {
            need: need.into(),
            kind: None,
        }
    }
}

/// Resolves a call's declared credential needs before its tool runs (the
/// host's side of declare-and-push), filing their facts through the call's
/// backend, in order. The resolved credentials become the tool's
/// [`ToolContext::declared_credentials`]; the first need that fails stops
/// the call: its tool must not run.
pub async fn resolve_declared(
    info: &CallInfo,
    backend: &Arc<dyn CallBackend>,
    needs: &[CredentialNeed],
    cancel: &CancelHandle,
) -> Result<Vec<Credential>, ToolError> {
    if needs.is_empty() {
        return Ok(Vec::new());
    }
    let pre = ToolContext::new(info.clone(), backend.clone(), None, cancel);
    let mut declared = Vec::with_capacity(needs.len());
    for need in needs {
        declared.push(pre.credential_for(need, CredentialMode::Declared).await?);
    }
    Ok(declared)
}

impl ToolContext {
    /// True when a credential provider is attached.
    pub fn has_credentials(&self) -> bool {
        self.inner.backend.has_credentials()
    }

    /// The credential resolved for the tool's first declared need, when it
    /// declared one (a tool whose declared need fails does not run at all).
    /// See [`ToolContext::declared`] for the others.
    pub fn declared_credential(&self) -> Option<&Credential> {
        self.inner.declared.first()
    }

    /// The credential resolved for the declared need `need` (declared in the
    /// tool's spec or by the host for this call); `None` when it was not
    /// declared.
    pub fn declared(&self, need: &str) -> Option<&Credential> {
        self.inner.declared.iter().find(|c| c.need == need)
    }

    /// Every credential resolved for a declared need, in declaration order
    /// (the spec's needs first, then the host's for this call).
    pub fn declared_credentials(&self) -> &[Credential] {
        &self.inner.declared
    }

    /// Pulls a credential on demand. Fails closed without a provider.
    pub async fn credential(&self, need: impl Into<String>) -> Result<Credential, ContextError> {
        self.credential_for(&CredentialNeed::new(need), CredentialMode::Pulled)
            .await
    }

    /// Resolves a need in the given mode (the host uses `Declared`).
    pub async fn credential_for(
        &self,
        need: &CredentialNeed,
        mode: CredentialMode,
    ) -> Result<Credential, ContextError> {
        self.after_respond("credential")?;
        self.until_cancelled(self.inner.backend.ready()).await?;
        if !self.has_credentials() {
            let err = ContextError::NoCredentialProvider {
                need: need.need.clone(),
            };
            self.emit(FactKind::CredentialRefused(CredentialRefused {
                need: need.need.clone(),
                mode,
                reason: err.to_string(),
            }));
            return Err(err);
        }
        self.emit(FactKind::CredentialRequested(CredentialRequested {
            need: need.need.clone(),
            mode,
            kind: need.kind.clone(),
        }));
        match self
            .until_cancelled(self.inner.backend.credential(need, mode))
            .await?
        {
            Ok(c) => {
                self.emit(FactKind::CredentialResolved(CredentialResolved {
                    need: need.need.clone(),
                    mode,
                    kind: c.kind.clone(),
                    fingerprint: c.fingerprint.clone(),
                    expires_at: c.expires_at,
                }));
                Ok(c)
            }
            Err(reason) => {
                self.emit(FactKind::CredentialFailed(CredentialFailed {
                    need: need.need.clone(),
                    mode,
                    reason: reason.clone(),
                }));
                Err(ContextError::CredentialFailed {
                    need: need.need.clone(),
                    reason,
                })
            }
        }
    }

    // ---- artifacts --------------------------------------------------------------
}
