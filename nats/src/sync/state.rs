//! The projection's own state beside its archive: its id, each stream's
//! chain head, the subjects it refused.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use sha2::{Digest as _, Sha256};

use reel_archive::Archive;
use reel_core::codec::Digest;

use super::Refused;
use crate::NatsError;

/// The projection's own state, beside the archive's database: the head of
/// each stream's chain as the stream holds it (the archive seals its own
/// blocks), so a block delivered after a restart is checked against the
/// block before it.
const STATE_FILE: &str = "nats-sync.json";

fn state_path(archive: &Archive) -> PathBuf {
    archive.dir().join(STATE_FILE)
}

/// The projection's state: its own id (naming its durable consumer) and
/// the chain heads.
pub(super) struct State {
    pub(super) id: String,
    pub(super) heads: HashMap<String, (u64, Digest)>,
    /// By subject.
    pub(super) refused: BTreeMap<String, Refused>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredState {
    id: String,
    heads: BTreeMap<String, (u64, String)>,
    /// Subjects refused from a message on (absent in a projection's state
    /// from before refusals were kept).
    #[serde(default)]
    refused: BTreeMap<String, Refused>,
}

fn new_id(archive: &Archive) -> String {
    let seed = format!(
        "{:?}{}{}",
        std::time::SystemTime::now(),
        std::process::id(),
        archive.dir().display()
    );
    hex::encode(&Sha256::digest(seed.as_bytes())[..8])
}

pub(super) fn load_state(archive: &Archive) -> Result<State, NatsError> {
    let path = state_path(archive);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(State {
                id: new_id(archive),
                heads: HashMap::new(),
                refused: BTreeMap::new(),
            })
        }
        Err(e) => return Err(NatsError::Projection(format!("{}: {e}", path.display()))),
    };
    let damaged = |detail: String| {
        NatsError::Projection(format!(
            "{}: {detail}; remove the projection's directory and sync again",
            path.display()
        ))
    };
    let stored: StoredState = serde_json::from_str(&text).map_err(|e| damaged(e.to_string()))?;
    if stored.id.is_empty() || !stored.id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(damaged("the projection's id is not alphanumeric".into()));
    }
    let heads = stored
        .heads
        .into_iter()
        .map(|(k, (seq, v))| {
            let d = reel_core::codec::parse_digest(&format!("sha256:{v}"))
                .ok_or_else(|| damaged(format!("the head of {k:?} is not a digest")))?;
            Ok((k, (seq, d)))
        })
        .collect::<Result<_, NatsError>>()?;
    Ok(State {
        id: stored.id,
        heads,
        refused: stored.refused,
    })
}

pub(super) fn save_state(archive: &Archive, state: &State) -> Result<(), NatsError> {
    let map = StoredState {
        id: state.id.clone(),
        heads: state
            .heads
            .iter()
            .map(|(k, (seq, d))| (k.clone(), (*seq, hex::encode(d))))
            .collect(),
        refused: state.refused.clone(),
    };
    let path = state_path(archive);
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        let f = std::fs::File::create(&tmp)?;
        serde_json::to_writer(&f, &map)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| NatsError::Projection(format!("{}: {e}", path.display())))
}
