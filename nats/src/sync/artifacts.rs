//! Copying the artifacts the projected facts refer to from the cluster's
//! object store into the archive.

use std::collections::HashMap;

use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt as _;

use reel_archive::Archive;

use super::ARTIFACT_TRIES;
use crate::store::Cluster;
use crate::NatsError;

/// Copies the artifacts in `wanted` that the cluster's object store has
/// and the archive lacks; those it does not have yet stay wanted, for up
/// to [`ARTIFACT_TRIES`] batches.
pub(super) async fn copy_wanted(
    cluster: &mut Cluster,
    archive: &Archive,
    wanted: &mut HashMap<String, u32>,
) -> Result<u64, NatsError> {
    let mut copied = 0;
    let digests: Vec<String> = wanted.keys().cloned().collect();
    for digest in digests {
        let have = archive
            .artifact(&digest)
            .map_err(|e| NatsError::Projection(e.to_string()))?
            .is_some();
        if have || copy_one(cluster, archive, &digest).await? {
            copied += u64::from(!have);
            wanted.remove(&digest);
        } else if let Some(tries) = wanted.get_mut(&digest) {
            *tries += 1;
            if *tries >= ARTIFACT_TRIES {
                wanted.remove(&digest);
            }
        }
    }
    Ok(copied)
}

/// Copies one artifact from the cluster's object store, checking its
/// digest; false when the store does not have it (or did not answer).
async fn copy_one(
    cluster: &mut Cluster,
    archive: &Archive,
    digest: &str,
) -> Result<bool, NatsError> {
    let Some(name) = digest.strip_prefix("sha256:") else {
        return Ok(false);
    };
    let Ok(mut object) = cluster.artifacts.get(name).await else {
        return Ok(false);
    };
    let mut bytes = Vec::new();
    if object.read_to_end(&mut bytes).await.is_err() {
        return Ok(false);
    }
    if hex::encode(Sha256::digest(&bytes)) != name {
        return Err(NatsError::Projection(format!(
            "artifact {digest}: its bytes do not have that digest"
        )));
    }
    archive
        .put_artifact(&bytes)
        .map_err(|e| NatsError::Projection(e.to_string()))?;
    Ok(true)
}

/// Copies every artifact of the cluster's object store the archive lacks,
/// counting them in `copied` (idempotent: tried again, it copies the rest).
pub(super) async fn copy_artifacts(
    cluster: &mut Cluster,
    archive: &Archive,
    copied: &mut u64,
) -> Result<(), NatsError> {
    let mut list = cluster
        .artifacts
        .list()
        .await
        .map_err(|e| cluster.error("listing the artifacts", e))?;
    let mut names = Vec::new();
    while let Some(info) = list.next().await {
        let info = info.map_err(|e| cluster.error("listing the artifacts", e))?;
        if !info.deleted {
            names.push(info.name);
        }
    }
    for name in names {
        let digest = format!("sha256:{name}");
        if archive
            .artifact(&digest)
            .map_err(|e| NatsError::Projection(e.to_string()))?
            .is_some()
        {
            continue;
        }
        let mut object = cluster
            .artifacts
            .get(&name)
            .await
            .map_err(|e| cluster.error("reading an artifact", e))?;
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| cluster.error("reading an artifact", e))?;
        if hex::encode(Sha256::digest(&bytes)) != name {
            return Err(NatsError::Projection(format!(
                "artifact {digest}: its bytes do not have that digest"
            )));
        }
        archive
            .put_artifact(&bytes)
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        *copied += 1;
    }
    Ok(())
}
