//! The session's log messages that the record could not tie to one call
//! (several calls in flight): verify takes each from any of the calls that
//! were in flight, once.

use reel::fact::{FactKind, Log};
use reel::matching::{diff_kinds, IgnoreRule};

use crate::cassette::{Event, Interaction, Session};

/// A log message of the session that the record could not tie to one
/// call, with the calls in flight when it came; `taken` once a live
/// message of one of those calls matched it.
pub(super) struct SessionLog {
    in_flight: Vec<String>,
    kind: FactKind,
    taken: bool,
}

/// Every recorded message of the session that names the calls in flight.
pub(super) fn session_logs(session: &Session) -> Vec<SessionLog> {
    let mut out = Vec::new();
    for call in &session.calls {
        for event in &call.events {
            if let Event::Log {
                level,
                logger,
                data,
                in_flight,
            } = event
            {
                if in_flight.is_empty() {
                    continue;
                }
                out.push(SessionLog {
                    in_flight: in_flight.clone(),
                    kind: FactKind::Log(Log {
                        level: *level,
                        logger: logger.clone(),
                        subflow: None,
                        data: data.clone(),
                        delivered: true,
                        in_flight: Vec::new(),
                    }),
                    taken: false,
                });
            }
        }
    }
    out
}

/// The live messages of `call` less those the record filed under the
/// session: a log that is not the next message the record expects of the
/// call, and matches a session message recorded while the call was in
/// flight, is that message (taken once).
pub(super) fn own_messages(
    call: &Interaction,
    expected: &[(Option<u64>, FactKind)],
    actual: Vec<FactKind>,
    pool: &mut [SessionLog],
    ignore: &[IgnoreRule],
) -> Vec<FactKind> {
    let mut kept = Vec::new();
    for a in actual {
        let next = expected.get(kept.len()).map(|(_, e)| e);
        if next.is_some_and(|e| diff_kinds(e, &a, ignore).is_empty()) {
            kept.push(a);
            continue;
        }
        let session = matches!(a, FactKind::Log(_))
            .then(|| {
                pool.iter_mut().find(|p| {
                    !p.taken
                        && p.in_flight.contains(&call.call_id)
                        && diff_kinds(&p.kind, &a, ignore).is_empty()
                })
            })
            .flatten();
        match session {
            Some(p) => p.taken = true,
            None => kept.push(a),
        }
    }
    kept
}
