//! The projection's check against the cluster's stream (`reel verify
//! --nats`).

use futures::StreamExt as _;

use reel_archive::wire::open_block;
use reel_archive::Archive;

use super::runtime;
use super::state::load_state;
use crate::store::Cluster;
use crate::subject::stream_of_subject;
use crate::{NatsConfig, NatsError};

/// What [`verify_projection`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyProjection {
    /// Streams the cluster holds.
    pub streams: u64,
    /// Streams whose last block's facts the projection holds, identical.
    pub matching: u64,
    /// What differs, one line each (a stream behind, a fact that differs,
    /// the archive's own damage).
    pub problems: Vec<String>,
}

impl VerifyProjection {
    /// True when the projection holds every stream up to its last block.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the projection in `archive` against the cluster's stream: every
/// subject's last block is in the projection, fact for fact, and the
/// archive's own chains verify. A subject the sync refused ([`Refused`])
/// is a problem, named with the message and why.
pub fn verify_projection(
    config: &NatsConfig,
    archive: &Archive,
) -> Result<VerifyProjection, NatsError> {
    let rt = runtime(config)?;
    rt.block_on(async {
        let cluster = Cluster::connect(config.clone()).await?;
        let mut out = VerifyProjection::default();
        let mut subjects = Vec::new();
        {
            let mut info = cluster
                .stream
                .info_with_subjects(format!("{}.>", config.subject_prefix))
                .await
                .map_err(|e| cluster.error("listing the stream's subjects", e))?;
            while let Some(s) = info.next().await {
                let (subject, _) =
                    s.map_err(|e| cluster.error("listing the stream's subjects", e))?;
                subjects.push(subject);
            }
        }
        subjects.sort();
        let refused = load_state(archive)?.refused;
        for subject in subjects {
            let Some((stream, _)) = stream_of_subject(&config.subject_prefix, &subject) else {
                continue;
            };
            out.streams += 1;
            if let Some(r) = refused.get(&subject) {
                out.problems.push(format!(
                    "{stream:?}: the sync refused stream message {} on {subject}, and everything after it there: {}",
                    r.seq, r.reason
                ));
                continue;
            }
            let msg = cluster
                .stream
                .get_last_raw_message_by_subject(&subject)
                .await
                .map_err(|e| cluster.error("reading a subject's last block", e))?;
            let block = match open_block(&msg.payload) {
                Ok(b) => b,
                Err(e) => {
                    out.problems.push(format!(
                        "{stream:?}: the stream's last block is damaged: {e}"
                    ));
                    continue;
                }
            };
            let Some(first) = block.facts.first().map(|f| f.seq) else {
                continue;
            };
            let end = first + block.facts.len() as u64;
            let have: Result<Vec<_>, _> = match archive.facts(&stream, first..end) {
                Ok(f) => f.collect(),
                Err(e) => Err(e),
            };
            match have {
                Ok(have) if have.len() as u64 == end - first => {
                    let same = have.iter().zip(&block.facts).all(|(a, b)| {
                        let (mut x, mut y) = (Vec::new(), Vec::new());
                        reel_core::codec::encode_fact(a, &mut x).is_ok()
                            && reel_core::codec::encode_fact(b, &mut y).is_ok()
                            && x == y
                    });
                    if same {
                        out.matching += 1;
                    } else {
                        out.problems.push(format!(
                            "{stream:?}: facts {first}..{end} differ from the stream's"
                        ));
                    }
                }
                Ok(have) => out.problems.push(format!(
                    "{stream:?}: the projection holds {} of facts {first}..{end}: run `reel sync`",
                    have.len()
                )),
                Err(e) => out.problems.push(format!(
                    "{stream:?}: not in the projection ({e}): run `reel sync`"
                )),
            }
        }
        let report = archive
            .verify()
            .map_err(|e| NatsError::Projection(e.to_string()))?;
        if !report.is_ok() {
            out.problems.push(format!(
                "the projection's archive does not verify: {report:?}"
            ));
        }
        Ok(out)
    })
}
