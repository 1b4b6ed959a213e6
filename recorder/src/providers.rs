//! What a host attaches to calls: credential providers, artifact stores,
//! elicitors and log listeners; with in-memory implementations for tests,
//! the demo and small hosts.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use reel::context::{BoxFuture, CredentialNeed, ElicitAnswer, Elicitation, FoundArtifact, Secret};
use reel::fact::{ArtifactMeta, ElicitOutcome, Identity, Level};
use reel::lock::lock;
use serde_json::Value;

/// A resolved secret, before the recorder fingerprints it.
#[derive(Debug, Clone)]
pub struct ResolvedSecret {
    /// The secret.
    pub secret: Secret,
    /// Its kind, when known (e.g. `"oauth"`).
    pub kind: Option<String>,
    /// Expiry, unix nanoseconds.
    pub expires_at: Option<i64>,
}

/// Resolves credentials for the run's identity.
pub trait CredentialProvider: Send + Sync {
    /// Resolves `need` for the caller; `Err` is a reason that must not
    /// contain the secret.
    fn resolve<'a>(
        &'a self,
        identity: Option<&'a Identity>,
        need: &'a CredentialNeed,
    ) -> BoxFuture<'a, Result<ResolvedSecret, String>>;
}

/// A claim-check store, scoped by tenant/principal/conversation.
///
/// The scope is composed by the recorder ([`reel::context::artifact_scope`]:
/// the run's tenant and principal, and its conversation, else its session,
/// else the run) and handed to every call; a tool cannot name or widen it.
/// A store must enforce it:
///
/// - `put` keeps the scope it is given in the ticket it returns, and files
///   the bytes under (scope, id);
/// - `get` returns only an artifact filed under the very scope asked for:
///   one of another scope is `None`, exactly as if there were none (the
///   recorder files `artifact.get` with no ticket);
/// - ids are unguessable (at least 128 bits from a CSPRNG), so knowing one
///   artifact's id says nothing about another's.
///
/// The recorder checks the first two on every answer and refuses a ticket
/// of another scope (`artifact.refused`), so a store that breaks the
/// contract fails loudly instead of leaking.
pub trait ArtifactStore: Send + Sync {
    /// Stores bytes with their ticket (all filled in but `id`, which the
    /// store assigns, unguessable); returns the ticket with its id and the
    /// scope it was given.
    fn put(
        &self,
        meta: ArtifactMeta,
        bytes: Vec<u8>,
    ) -> BoxFuture<'_, Result<ArtifactMeta, String>>;
    /// Fetches an artifact of `scope` by id, or `None`. An artifact of
    /// another scope is `None`: a scope is never widened.
    fn get<'a>(
        &'a self,
        scope: &'a Identity,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>>;
}

/// Asks the user.
pub trait Elicitor: Send + Sync {
    /// Asks `question`; the recorder bounds the wait by its ttl.
    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>>;
}

/// Receives log notifications for a client (MCP `notifications/message`).
pub trait LogListener: Send + Sync {
    /// Delivers one line; false when no client received it.
    fn deliver(&self, call_id: &str, level: Level, data: &Value) -> bool;

    /// [`LogListener::deliver`] with the logger's name (MCP's `logger`,
    /// set by `ToolContext::set_logger`), what the recorder calls. The
    /// default drops the name and calls `deliver`.
    fn deliver_from(
        &self,
        call_id: &str,
        level: Level,
        logger: Option<&str>,
        data: &Value,
    ) -> bool {
        let _ = logger;
        self.deliver(call_id, level, data)
    }
}

/// Receives each progress report of a call as it is filed (MCP
/// `notifications/progress`), before it is recorded. Called on the tool's
/// thread: it must neither block nor fail (queue the report and send it
/// elsewhere). Only a call with a listener attached pays for it.
pub trait ProgressListener: Send + Sync {
    /// One report of `call_id` (the call, or a call it dispatched), its
    /// payload as the tool gave it (before redaction). True when it was
    /// handed on for a client (over MCP: the request carried a
    /// `progressToken`), recorded as the report's `delivered` and what
    /// `ctx.progress_mcp` answers.
    fn progress(&self, call_id: &str, payload: &Value) -> bool;
}

/// A fixed map of need -> secret.
#[derive(Default)]
pub struct MemoryVault {
    secrets: HashMap<String, Result<ResolvedSecret, String>>,
}

impl MemoryVault {
    /// An empty vault (every need fails).
    pub fn new() -> MemoryVault {
        MemoryVault::default()
    }

    /// Adds a secret for `need`.
    pub fn with(mut self, need: &str, secret: &str) -> MemoryVault {
        self.secrets.insert(
            need.into(),
            Ok(ResolvedSecret {
                secret: Secret::new(secret),
                kind: None,
                expires_at: None,
            }),
        );
        self
    }

    /// Makes `need` fail with `reason`.
    pub fn failing(mut self, need: &str, reason: &str) -> MemoryVault {
        self.secrets.insert(need.into(), Err(reason.into()));
        self
    }
}

impl CredentialProvider for MemoryVault {
    fn resolve<'a>(
        &'a self,
        _identity: Option<&'a Identity>,
        need: &'a CredentialNeed,
    ) -> BoxFuture<'a, Result<ResolvedSecret, String>> {
        let out = self
            .secrets
            .get(&need.need)
            .cloned()
            .unwrap_or_else(|| Err(format!("the vault has no credential for {:?}", need.need)));
        Box::pin(async move { out })
    }
}

/// An in-memory artifact store keyed by (scope, id), with ids `art-` and
/// 32 hex digits (128 bits from the thread's CSPRNG).
#[derive(Default)]
pub struct MemoryArtifactStore {
    items: Mutex<HashMap<(Identity, String), FoundArtifact>>,
}

impl MemoryArtifactStore {
    /// An empty store.
    pub fn new() -> MemoryArtifactStore {
        MemoryArtifactStore::default()
    }
}

impl ArtifactStore for MemoryArtifactStore {
    fn put(
        &self,
        mut meta: ArtifactMeta,
        bytes: Vec<u8>,
    ) -> BoxFuture<'_, Result<ArtifactMeta, String>> {
        let mut items = lock(&self.items);
        // `rand::random` draws from `ThreadRng`, a CSPRNG seeded from the
        // operating system. A repeat of 128 random bits does not happen;
        // drawing again keeps the store right even if it did.
        meta.id = loop {
            let id = format!("art-{}", hex::encode(rand::random::<[u8; 16]>()));
            if !items.contains_key(&(meta.scope.clone(), id.clone())) {
                break id;
            }
        };
        items.insert((meta.scope.clone(), meta.id.clone()), (meta.clone(), bytes));
        drop(items);
        Box::pin(async move { Ok(meta) })
    }

    fn get<'a>(
        &'a self,
        scope: &'a Identity,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        let found = lock(&self.items)
            .get(&(scope.clone(), id.to_owned()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }
}

/// Answers questions from a script, in order; when the script runs out it
/// answers `cancel`.
#[derive(Default)]
pub struct ScriptedElicitor {
    answers: Mutex<VecDeque<ElicitOutcome>>,
}

impl ScriptedElicitor {
    /// Answers with these outcomes, in order.
    pub fn new(answers: impl IntoIterator<Item = ElicitOutcome>) -> ScriptedElicitor {
        ScriptedElicitor {
            answers: Mutex::new(answers.into_iter().collect()),
        }
    }
}

impl Elicitor for ScriptedElicitor {
    fn elicit<'a>(
        &'a self,
        _question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        let outcome = lock(&self.answers)
            .pop_front()
            .unwrap_or(ElicitOutcome::Cancel);
        Box::pin(async move {
            Ok(ElicitAnswer {
                outcome,
                validation_errors: Vec::new(),
                pre_resolved: false,
            })
        })
    }
}

/// Checks an answer against the full JSON Schema of the question: one
/// `"<JSON pointer>: <message>"` per failing place (the recorder's context
/// does this for every accepted answer: [`reel::context::validate_answer`]).
pub fn validate(schema: &Value, content: &Value) -> Vec<String> {
    reel::context::validate_answer(schema, content)
}
