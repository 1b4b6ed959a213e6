//! The value types facts share: who called, what recorded, which client,
//! an artifact's ticket and origin, a credential's fingerprint.

use serde::{Deserialize, Serialize};

/// The identity the caller supplied. Never synthesised: a run without caller
/// identity has `identity: None`, and each part is absent unless supplied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Identity {
    /// Tenant the run belongs to.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Principal (user or service) on whose behalf the run acts.
    #[serde(default)]
    pub principal: Option<String>,
    /// Conversation the run is part of.
    #[serde(default)]
    pub conversation: Option<String>,
}

/// What wrote the run: a program name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    /// Program name, e.g. `"my-agent"`.
    pub name: String,
    /// Program version.
    pub version: String,
}

/// The client that made the request (MCP `clientInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// Client name.
    pub name: String,
    /// Client version, when given.
    #[serde(default)]
    pub version: Option<String>,
    /// Client title (MCP `clientInfo.title`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The claim ticket of a stored artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    /// Artifact id as the tool sees it.
    pub id: String,
    /// `sha256:<hex>` of the bytes; the archive stores bytes under it.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Media type, e.g. `text/markdown`.
    pub media_type: String,
    /// The scope the artifact is stored under.
    pub scope: Identity,
    /// Which run and call put it.
    pub origin: Origin,
}

/// Where an artifact came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The run that put it; `None` for a call outside any run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The call that put it.
    pub call_id: String,
}

/// A keyed fingerprint (HMAC-SHA256 with the fingerprint key, kept outside
/// the archive: see `Archive::fingerprint`) of a secret: tells "same
/// credential" apart without keeping it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(pub String);
