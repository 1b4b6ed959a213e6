//! Elicitors that ask the MCP client.

use reel::context::{BoxFuture, ElicitAnswer, Elicitation};
use reel::fact::{ElicitMode, ElicitOutcome};
use reel_recorder::Elicitor;
use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::convert;

/// The notification that a URL-mode elicitation's interaction completed.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// Asks with `elicitation/create` (2025-11-25); after an accepted URL-mode
/// question, sends `notifications/elicitation/complete` with its
/// `elicitationId`. Awaited on the request's
/// own task, so that over streamable HTTP the question rides the
/// request's response stream.
pub(crate) struct PeerElicitor {
    peer: Peer<RoleServer>,
}

impl PeerElicitor {
    pub(crate) fn new(peer: Peer<RoleServer>) -> PeerElicitor {
        PeerElicitor { peer }
    }
}

impl Elicitor for PeerElicitor {
    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(async move {
            let params = convert::elicit_params(question)?;
            let result = self
                .peer
                .create_elicitation(params)
                .await
                .map_err(|e| format!("elicitation/create failed: {e}"))?;
            let answer = convert::answer(result);
            if let (ElicitMode::Url, Some(id), ElicitOutcome::Accept { .. }) =
                (question.mode, &question.elicitation_id, &answer.outcome)
            {
                // MCP 2025-11-25: "servers SHOULD send a
                // notifications/elicitation/complete notification when an
                // out-of-band interaction started by URL mode elicitation
                // is completed". The tool has the answer it waited for:
                // the interaction is complete. On stdio the client hears so
                // before the call's result; over streamable HTTP it rides
                // the session's standalone stream (rmcp routes only
                // progress to a request's own). A client that cannot take
                // it changes nothing for the call.
                let _ = self
                    .peer
                    .send_notification(ServerNotification::CustomNotification(
                        CustomNotification::new(
                            ELICITATION_COMPLETE,
                            Some(json!({ "elicitationId": id })),
                        ),
                    ))
                    .await;
            }
            Ok(answer)
        })
    }
}

/// A question of a call suspended in input-required rounds, with where
/// its answer goes.
pub(crate) struct Question {
    pub(crate) question: Elicitation,
    pub(crate) answer: oneshot::Sender<Result<ElicitAnswer, String>>,
}

/// Asks by suspending the call: the question goes to the request's
/// handler, which answers the `tools/call` with an input-required result
/// (2026-07-28), and the answer comes with the client's next round.
pub(crate) struct RoundElicitor {
    pub(crate) questions: mpsc::UnboundedSender<Question>,
}

impl Elicitor for RoundElicitor {
    fn elicit<'a>(
        &'a self,
        question: &'a Elicitation,
    ) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(async move {
            // Checked before the round: a question MCP cannot carry is the
            // tool's error now, not the client's later.
            convert::elicit_params(question)?;
            let (answer, wait) = oneshot::channel();
            self.questions
                .send(Question {
                    question: question.clone(),
                    answer,
                })
                .map_err(|_| "the MCP request that would carry the question is gone".to_string())?;
            wait.await
                .map_err(|_| "the client did not come back with an answer".to_string())?
        })
    }
}
