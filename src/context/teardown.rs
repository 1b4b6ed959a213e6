//! Teardown: cleanups registered per composed [`TeardownKey`], and the
//! key's recorded hash.

use super::*;

/// The unkeyed hash of a teardown key: sha-256 over tool, scope and key,
/// first 16 bytes, hex, `sha256:...`. What archives written before keyed
/// hashes hold (a replay of one still matches them), and what a backend
/// that holds no key records. Anyone can compute it: a guessable key (a
/// PIN) is found from it by trying every guess. The recorder records
/// [`keyed_teardown_key_hash`] instead.
pub fn teardown_key_hash(tool: &str, scope: TeardownScope, key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"reel.teardown.v1\0");
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(scope.to_string().as_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    let out = h.finalize();
    format!("sha256:{}", hex::encode(&out[..16]))
}

/// The purpose a keyed teardown key hash is MACed under (the recorder's
/// `Archive::keyed_mac`, under the fingerprint key, which never lives in
/// the archive).
pub const TEARDOWN_KEY_PURPOSE: &str = "reel/teardown-key";

/// The keyed hash of a teardown key, `hmac-sha256:...` (first 16 bytes,
/// hex), given `mac`: a keyed MAC (HMAC-SHA256 under a key kept outside
/// the archive) of the bytes it is handed. The bytes are tool, scope and
/// key, each framed by its byte length, so no two triples share them.
/// Without the key a recorded hash tells nothing about the key, and a
/// guess cannot be tested against it.
///
/// ```
/// use reel::context::{keyed_teardown_key_hash, teardown_key_hash};
/// use reel::fact::TeardownScope;
/// let mac = |bytes: &[u8]| {
///     // Stands in for `Archive::keyed_mac(TEARDOWN_KEY_PURPOSE, bytes)`.
///     let mut out = [0u8; 32];
///     out[..bytes.len().min(32)].copy_from_slice(&bytes[..bytes.len().min(32)]);
///     out
/// };
/// let h = keyed_teardown_key_hash(mac, "walk", TeardownScope::Call, "4711");
/// assert!(h.starts_with("hmac-sha256:"));
/// assert_ne!(h, teardown_key_hash("walk", TeardownScope::Call, "4711"));
/// ```
pub fn keyed_teardown_key_hash(
    mac: impl FnOnce(&[u8]) -> [u8; 32],
    tool: &str,
    scope: TeardownScope,
    key: &str,
) -> String {
    let scope = scope.to_string();
    let mut bytes = Vec::with_capacity(tool.len() + scope.len() + key.len() + 24);
    for part in [tool, scope.as_str(), key] {
        bytes.extend_from_slice(part.len().to_string().as_bytes());
        bytes.push(b':');
        bytes.extend_from_slice(part.as_bytes());
    }
    let out = mac(&bytes);
    zeroize::Zeroize::zeroize(&mut bytes);
    format!("hmac-sha256:{}", hex::encode(&out[..16]))
}

/// The isolation key of a teardown scope's holder (see
/// [`ToolContext::teardown_key`]): the scope and the parts that say whose it
/// is, in one canonical string. Each part is `-` when absent or
/// `<byte length>:<bytes>` when present, so an absent tenant differs from an
/// empty one and `a:b` + `c` never meets `a` + `b:c`:
///
/// ```
/// use reel::context::TeardownKey;
/// use reel::fact::Identity;
/// let acme = Identity {
///     tenant: Some("acme".into()),
///     principal: Some("ann".into()),
///     conversation: None,
/// };
/// let key = TeardownKey::session(Some(&acme), Some("s-1")).unwrap();
/// assert_eq!(key.as_str(), "session;tenant=4:acme;principal=3:ann;session=3:s-1");
/// // Another tenant with the same session string is another session.
/// let other = Identity { tenant: Some("globex".into()), ..acme.clone() };
/// assert_ne!(TeardownKey::session(Some(&other), Some("s-1")).unwrap(), key);
/// // No session id: refused, never filed under "".
/// assert!(TeardownKey::session(Some(&acme), None).is_err());
/// assert!(TeardownKey::session(Some(&acme), Some("")).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TeardownKey {
    scope: TeardownScope,
    key: String,
}

impl TeardownKey {
    /// The key of one call's cleanups: (tenant, principal, run, call), or
    /// for a call outside any run (tenant, principal, the key its stream is
    /// kept under, call).
    pub fn call(identity: Option<&Identity>, home: &Home, call_id: &str) -> TeardownKey {
        let home = match home {
            Home::Run(run_id) => ("run", run_id.as_str()),
            Home::OutsideRun { key } => ("outside-run", key.as_str()),
        };
        TeardownKey::compose(TeardownScope::Call, identity, &[home, ("call", call_id)])
    }

    /// The key of one run's cleanups: (tenant, principal, run).
    pub fn run(identity: Option<&Identity>, run_id: &str) -> TeardownKey {
        TeardownKey::compose(TeardownScope::Run, identity, &[("run", run_id)])
    }

    /// The key of a hosting session's cleanups: (tenant, principal,
    /// session). [`ContextError::NoSession`] when there is no session id,
    /// or it is empty: nothing is ever keyed on an empty session.
    pub fn session(
        identity: Option<&Identity>,
        session_id: Option<&str>,
    ) -> Result<TeardownKey, ContextError> {
        match session_id {
            Some(session) if !session.is_empty() => Ok(TeardownKey::compose(
                TeardownScope::Session,
                identity,
                &[("session", session)],
            )),
            _ => Err(ContextError::NoSession),
        }
    }

    /// The key of `scope` for the call `info` describes.
    pub fn of(info: &CallInfo, scope: TeardownScope) -> Result<TeardownKey, ContextError> {
        let identity = info.identity.as_ref();
        match scope {
            TeardownScope::Call => Ok(TeardownKey::call(
                identity,
                &info.home,
                &info.started.call_id,
            )),
            TeardownScope::Run => match info.home.run_id() {
                Some(run_id) => Ok(TeardownKey::run(identity, run_id)),
                None => Err(ContextError::ScopeNotHonoured {
                    scope,
                    door: door(info),
                    honoured: info.teardown_scopes.clone(),
                }),
            },
            TeardownScope::Session => TeardownKey::session(identity, info.session_id.as_deref()),
        }
    }

    fn compose(
        scope: TeardownScope,
        identity: Option<&Identity>,
        ids: &[(&str, &str)],
    ) -> TeardownKey {
        fn part(out: &mut String, name: &str, value: Option<&str>) {
            out.push(';');
            out.push_str(name);
            out.push('=');
            match value {
                None => out.push('-'),
                Some(v) => {
                    out.push_str(&v.len().to_string());
                    out.push(':');
                    out.push_str(v);
                }
            }
        }
        let mut key = scope.to_string();
        part(
            &mut key,
            "tenant",
            identity.and_then(|i| i.tenant.as_deref()),
        );
        part(
            &mut key,
            "principal",
            identity.and_then(|i| i.principal.as_deref()),
        );
        for (name, value) in ids {
            part(&mut key, name, Some(value));
        }
        TeardownKey { scope, key }
    }

    /// The scope this key is of.
    pub fn scope(&self) -> TeardownScope {
        self.scope
    }

    /// The canonical string, e.g. to pass to [`ToolContext::on_teardown`]
    /// or to name a live resource by.
    pub fn as_str(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for TeardownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl ToolContext {
    /// The isolation key of `scope` for this call: who a cleanup
    /// registered under `scope` belongs to, composed from the caller's
    /// tenant and principal and the host's ids, never from a caller string
    /// alone (seed 000's `toolSessionKey`). It is the key the host files
    /// this call's `scope` cleanups under, and the key to give a live
    /// resource the tool opens for that lifetime.
    ///
    /// - [`TeardownScope::Call`]: (tenant, principal, run, call);
    /// - [`TeardownScope::Run`]: (tenant, principal, run);
    /// - [`TeardownScope::Session`]: (tenant, principal, session), or
    ///   [`ContextError::NoSession`] when the run has no session id.
    ///
    /// An absent tenant or principal differs from an empty one, and parts
    /// are length-prefixed, so no two different compositions give the same
    /// key. The key works whether or not the host honours `scope`
    /// ([`ToolContext::teardown_scopes`] says that).
    ///
    /// ```no_run
    /// use reel::context::{ToolContext, ToolError};
    /// use reel::fact::TeardownScope;
    /// # struct Browser;
    /// # impl Browser { async fn close(self) -> Result<(), String> { Ok(()) } }
    /// # async fn open_browser(_key: &str) -> Browser { Browser }
    /// async fn browse(ctx: ToolContext, url: String) -> Result<String, ToolError> {
    ///     // One browser per (tenant, principal, run): another tenant's run
    ///     // never gets this one, whatever its ids are.
    ///     let key = ctx.teardown_key(TeardownScope::Run)?;
    ///     let browser = open_browser(key.as_str()).await;
    ///     ctx.on_teardown(TeardownScope::Run, key.as_str(), move || browser.close())?;
    ///     Ok(url)
    /// }
    /// ```
    pub fn teardown_key(&self, scope: TeardownScope) -> Result<TeardownKey, ContextError> {
        TeardownKey::of(&self.inner.info, scope)
    }

    /// Registers a cleanup for `key` under `scope`. The first registration
    /// under (tool, scope, key) wins; a repeat keeps the first cleanup,
    /// refreshes its liveness and is recorded as a repeat: seed 000's
    /// "registering twice under one (tool, scope, key) is a no-op that keeps
    /// the FIRST cleanup (it holds the live handle) and refreshes liveness,
    /// so calling this on every execute is the intended shape for a reused
    /// session". `teardown.registered` records the count of registrations
    /// so far and this one's time; the cleanup's `teardown.ran` records the
    /// count and the time of the last one, so the record shows how many
    /// executes kept a session's resource alive and when it was last used.
    /// Returns whether this was the first registration.
    ///
    /// A scope the host does not honour is refused;
    /// so is the session scope on a run with no session id. Cleanups are
    /// held per [`ToolContext::teardown_key`] of the scope, so another
    /// tenant, principal, session or run never runs, nor repeats, this one.
    /// Only a hash of the key is recorded: the recorder's is keyed under
    /// the fingerprint key (see [`keyed_teardown_key_hash`]), so a copy of
    /// the archive cannot test guessed keys.
    pub fn on_teardown<F, Fut, E>(
        &self,
        scope: TeardownScope,
        key: &str,
        cleanup: F,
    ) -> Result<bool, ContextError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        self.after_respond("on_teardown")?;
        let key_hash = self
            .inner
            .backend
            .teardown_key_hash(self.tool_name(), scope, key);
        let holder = if self.inner.info.teardown_scopes.contains(&scope) {
            self.teardown_key(scope)
        } else {
            Err(ContextError::ScopeNotHonoured {
                scope,
                door: door(&self.inner.info),
                honoured: self.inner.info.teardown_scopes.clone(),
            })
        };
        let holder = match holder {
            Ok(holder) => holder,
            Err(err) => {
                self.emit(FactKind::TeardownRefused(TeardownRefused {
                    scope,
                    key_hash,
                    honoured: self.inner.info.teardown_scopes.clone(),
                    reason: err.to_string(),
                }));
                return Err(err);
            }
        };
        let cleanup: Cleanup =
            Box::new(move || Box::pin(async move { cleanup().await.map_err(|e| e.to_string()) }));
        let registration = self
            .inner
            .backend
            .register_teardown(scope, &holder, &key_hash, cleanup);
        self.emit(FactKind::TeardownRegistered(TeardownRegistered {
            scope,
            key_hash,
            first: registration.first,
            registrations: registration.registrations,
            registered_at: registration.at,
        }));
        Ok(registration.first)
    }

    // ---- effects, clock, randomness ------------------------------------------------
}
