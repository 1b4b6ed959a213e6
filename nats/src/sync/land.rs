//! Landing one block of the stream in the projection: its checks (chain,
//! seqs, rules, tenant), a refusal, and the gap a lost delivery left.

use std::collections::HashMap;

use async_nats::jetstream;

use reel_archive::wire::open_block;
use reel_archive::{Archive, ArchiveError};
use reel_core::codec::Digest;
use reel_core::run::RunRecord;

use super::state::State;
use super::{Refused, SyncReport};
use crate::store::Cluster;
use crate::subject::{subject_token, tenant_token_of_subject};
use crate::NatsError;

/// Lands one block (stream message `seq` on `subject`) in the archive:
/// the digests its facts refer to, or, with `ahead_ok`, `None` for a block
/// past the projection's head of its stream (the blocks between are
/// missing); without it, that is damage. Damage, a broken chain or rule,
/// or another tenant's subject is [`Landing::Refused`]; the archive's own
/// failure is [`Landing::Failed`].
#[allow(clippy::too_many_arguments)]
pub(super) fn land(
    archive: &Archive,
    heads: &mut HashMap<String, (u64, Digest)>,
    next: &mut HashMap<String, Landed>,
    stream: &str,
    subject: &str,
    seq: u64,
    payload: &[u8],
    report: &mut SyncReport,
    ahead_ok: bool,
) -> Result<Option<Vec<String>>, Landing> {
    // The message's own fault: it is refused, the sync goes on.
    let damage = |reason: String| Landing::Refused { seq, reason };
    // The projection's: the sync stops.
    let failed = |detail: String| {
        Landing::Failed(NatsError::Projection(format!(
            "stream message {seq} ({subject}, run {stream:?}): {detail}"
        )))
    };
    let block = open_block(payload).map_err(|e| damage(format!("damaged block: {e}")))?;
    let Some(first) = block.facts.first().map(|f| f.seq) else {
        return Err(damage("empty block".into()));
    };
    let end = first + block.facts.len() as u64;
    // Where the run stands, and its tenant's subject token: known from an
    // earlier block of this sync, else read from the projection once.
    let (have, token) = match next.get(stream) {
        Some(l) => (l.next, Some(l.token.clone())),
        None => match archive.run(stream) {
            Ok(r) => (r.facts, Some(subject_token(r.tenant().unwrap_or("")))),
            Err(ArchiveError::UnknownRun { .. }) => (0, None),
            Err(e) => return Err(failed(e.to_string())),
        },
    };
    // A run's blocks come on its own tenant's subjects only: a cluster that
    // lets each tenant's recorders publish under their own tenant's
    // subjects keeps tenants apart in the projection too (a block on one
    // tenant's subject never starts, or goes on, another tenant's run).
    let tenant = if first == 0 {
        block
            .facts
            .first()
            .and_then(RunRecord::from_first)
            .map(|r| r.tenant().map(str::to_owned))
    } else {
        None
    };
    let token = match &tenant {
        Some(t) => Some(subject_token(t.as_deref().unwrap_or(""))),
        None => token,
    };
    if let Some(token) = &token {
        if tenant_token_of_subject(subject) != Some(token.as_str()) {
            let owner = match (&tenant, token.as_str()) {
                (Some(Some(t)), _) => format!("tenant {t:?}"),
                (Some(None), _) | (None, "_") => "no tenant".to_owned(),
                (None, token) => match crate::subject::token_of(token) {
                    Some(t) => format!("tenant {t:?}"),
                    None => format!("tenant token {token:?}"),
                },
            };
            return Err(damage(format!(
                "the run belongs to {owner}, not to the tenant of the subject it was published on: \
                 a writer published into another tenant's run"
            )));
        }
    }
    // The chain's head as the projection knows it: the seq the next block
    // starts at, and the digest that block must name as its previous.
    let head = if first == 0 {
        Some((0, [0; 32]))
    } else {
        heads.get(stream).copied()
    };
    let links = head == Some((first, block.prev));
    let mut refers = Vec::new();
    if end <= have {
        // Landed before (a redelivery, or another consumer's): the chain
        // was checked then; a head left behind by a crash catches up.
        report.already += 1;
        if links {
            heads.insert(stream.to_owned(), (end, block.digest));
        }
    } else if first == have {
        if !links {
            return Err(damage(match head {
                Some((at, _)) if at == first => format!(
                    "the block's previous digest does not match the block before it (hash chain broken at seq {first})"
                ),
                _ => format!("the projection does not know the block before seq {first}"),
            }));
        }
        let n = block.facts.len() as u64;
        refers = reel_core::tape::referenced_digests(&block.facts)
            .into_iter()
            .collect();
        archive
            .append_projected(stream, block.facts)
            .map_err(|e| match e {
                // The block's facts break the run's rules.
                ArchiveError::InvalidFacts { .. }
                | ArchiveError::RunExists { .. }
                | ArchiveError::RunClosed { .. }
                | ArchiveError::Encode { .. } => damage(e.to_string()),
                e => failed(e.to_string()),
            })?;
        report.facts += n;
        heads.insert(stream.to_owned(), (end, block.digest));
    } else if ahead_ok && first > have {
        return Ok(None);
    } else {
        return Err(damage(format!(
            "the block holds seqs {first}..{end} where the projection stands at {have}"
        )));
    }
    if let Some(token) = token {
        next.insert(
            stream.to_owned(),
            Landed {
                next: have.max(end),
                token,
            },
        );
    }
    Ok(Some(refers))
}

/// A run this sync has landed blocks of: the seq its next block starts
/// at, and its tenant's subject token (see [`subject_token`]).
pub(super) struct Landed {
    next: u64,
    token: String,
}

/// Why a message did not land.
pub(super) enum Landing {
    /// The message is at fault (see [`Refused`]): its run takes nothing
    /// from it on; the sync goes on.
    Refused {
        /// The message's stream sequence.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// The projection or the cluster failed: the sync stops (or, for a
    /// cluster a follower cannot reach, waits).
    Failed(NatsError),
}

/// Refuses stream message `seq` and every later one on `subject`, saying
/// so once.
pub(super) fn refuse(
    state: &mut State,
    report: &mut SyncReport,
    stream: &str,
    subject: &str,
    seq: u64,
    reason: String,
) {
    report.refused += 1;
    tracing::warn!(
        "reel-nats: refused stream message {seq} ({subject}, run {stream:?}): {reason}; \
         nothing from it on that subject is projected, every other subject goes on \
         (`reel verify --nats` lists it; once the message is removed from the stream, \
         e.g. with `nats stream rmm`, a fresh projection takes the subject whole)"
    );
    state.refused.insert(
        subject.to_owned(),
        Refused {
            seq,
            run: stream.to_owned(),
            reason,
        },
    );
}

/// Lands the blocks on `subject` from past the consumer's ack floor up to
/// (not including) stream message `before`, read from the stream itself
/// (from its leader): the blocks of a stream the consumer delivered and
/// lost, which it would deliver again only after its ack wait. A block
/// landed already is skipped. Every block the consumer has not had
/// acknowledged is past its ack floor, and acknowledged ones are landed.
pub(super) async fn fill_gap(
    cluster: &Cluster,
    archive: &Archive,
    heads: &mut HashMap<String, (u64, Digest)>,
    next: &mut HashMap<String, Landed>,
    (stream, subject): (&str, &str),
    (floor, before): (u64, u64),
    report: &mut SyncReport,
) -> Result<Vec<String>, Landing> {
    let mut refers = Vec::new();
    let mut from = floor + 1;
    while from < before {
        let found = cluster
            .stream
            .get_first_raw_message_by_subject(subject, from)
            .await;
        let msg = match found {
            Ok(msg) => msg,
            Err(e)
                if matches!(
                    e.kind(),
                    jetstream::stream::LastRawMessageErrorKind::NoMessageFound
                ) =>
            {
                break
            }
            Err(e) => {
                return Err(Landing::Failed(
                    cluster.error("reading blocks the consumer did not deliver", e),
                ))
            }
        };
        if msg.sequence >= before {
            break;
        }
        report.messages += 1;
        let landed = land(
            archive,
            heads,
            next,
            stream,
            subject,
            msg.sequence,
            &msg.payload,
            report,
            false,
        )?;
        refers.extend(landed.unwrap_or_default());
        from = msg.sequence + 1;
    }
    Ok(refers)
}
