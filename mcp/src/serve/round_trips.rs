//! Multi round-trip requests (MCP 2026-07-28, SEP-2322): a call that asks
//! a question is suspended, its `tools/call` answered with an
//! input-required result whose sealed `requestState` names it; the
//! client's next round brings the answer and resumes it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use reel::context::{ElicitAnswer, ToolError};
use reel::spec::ToolSpec;
use reel_recorder::Canceller;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitResult, ErrorData, InputRequest,
    InputRequiredResult,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::elicit::{Question, RoundElicitor};
use super::notify::{LogGate, Notifier};
use super::{convert, lock, McpHost, ReelServer, Request};

/// What [`reel_archive::Archive::keyed_mac`] seals request states for.
const PURPOSE: &str = "reel-mcp/request-state/v1";

/// Calls waiting for their client's next round, by the call's archive key.
#[derive(Clone, Default)]
pub(crate) struct Suspended {
    calls: Arc<Mutex<HashMap<String, Waiting>>>,
}

/// A running call, as its rounds see it.
struct Running {
    questions: mpsc::UnboundedReceiver<Question>,
    asking: bool,
    done: oneshot::Receiver<Result<Value, ToolError>>,
    notifier: Arc<Notifier>,
    canceller: Canceller,
    spec: Option<ToolSpec>,
}

/// A call suspended at a question.
struct Waiting {
    round: u32,
    /// The key of the question in `inputRequests`.
    key: String,
    answer: oneshot::Sender<Result<ElicitAnswer, String>>,
    run: Running,
}

/// The request state, before sealing: which call, of which tool, waits at
/// which round.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct State {
    call: String,
    tool: String,
    round: u32,
}

fn seal(host: &McpHost, state: &State) -> String {
    let json = serde_json::to_vec(state).expect("a state serialises");
    let mac = host.recorder.archive().keyed_mac(PURPOSE, &json);
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&json),
        URL_SAFE_NO_PAD.encode(mac)
    )
}

fn refused(why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("requestState refused: {why}; start the call again without one"),
        None,
    )
}

/// Opens a sealed state; `Err` unless the seal holds.
fn open(host: &McpHost, sealed: &str) -> Result<State, ErrorData> {
    let (body, tag) = sealed
        .split_once('.')
        .ok_or_else(|| refused("it is not a state this server sealed"))?;
    let json = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| refused("it is not a state this server sealed"))?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| refused("it is not a state this server sealed"))?;
    let mac = host.recorder.archive().keyed_mac(PURPOSE, &json);
    // Constant time: how much of a forged tag matched says nothing.
    let same =
        tag.len() == mac.len() && tag.iter().zip(mac).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
    if !same {
        return Err(refused(
            "its seal does not hold (it was changed, or sealed under another key)",
        ));
    }
    serde_json::from_slice(&json).map_err(|_| refused("it is not a state this server sealed"))
}

/// Serves one round of a `tools/call` on 2026-07-28.
pub(crate) async fn call(
    server: &ReelServer,
    req: Request,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
    gate: LogGate,
) -> Result<CallToolResponse, ErrorData> {
    let host = &server.host;
    let name = request.name.to_string();
    let token = context.meta.get_progress_token();
    let (run, id, round) = match &request.request_state {
        None => {
            let args = Value::Object(request.arguments.clone().unwrap_or_default());
            let notifier = Notifier::start(context.peer.clone(), token, gate);
            let mut call = server.prepare(&req, &name, args, &notifier)?;
            let (questions_tx, questions) = mpsc::unbounded_channel();
            let asking = req.elicitation;
            if asking {
                call = call.elicitor(Arc::new(RoundElicitor {
                    questions: questions_tx,
                }));
            }
            let canceller = call.canceller();
            let id = call.key().to_owned();
            let tools = host.tools.clone();
            let (done_tx, done) = oneshot::channel();
            // The call runs on its own task: it outlives this round.
            tokio::spawn(async move {
                let _ = done_tx.send(call.invoke_tool(&tools).await);
            });
            let spec = host.tools.get(&name).and_then(|t| t.spec()).cloned();
            let run = Running {
                questions,
                asking,
                done,
                notifier,
                canceller,
                spec,
            };
            (run, id, 0)
        }
        Some(sealed) => {
            let state = open(host, sealed)?;
            if state.tool != name {
                return Err(refused("it belongs to a call of another tool"));
            }
            let waiting = {
                let mut calls = lock(&host.suspended.calls);
                match calls.get(&state.call) {
                    Some(w) if w.round == state.round => calls.remove(&state.call),
                    Some(_) => return Err(refused("the call it names is at another round")),
                    None => {
                        return Err(refused(
                            "the call it names is not waiting (it ended, or was abandoned)",
                        ))
                    }
                }
            }
            .expect("checked above");
            let answer = match request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(&waiting.key))
            {
                Some(response) => ElicitResult::deserialize(response)
                    .map(convert::answer)
                    .map_err(|e| format!("the client's answer is no elicitation result: {e}")),
                None => Err(format!(
                    "the client's next round carried no answer to {:?}",
                    waiting.key
                )),
            };
            waiting
                .run
                .notifier
                .retarget(context.peer.clone(), token, gate);
            let _ = waiting.answer.send(answer);
            (waiting.run, state.call, state.round)
        }
    };
    next(host, run, id, round, name, context).await
}

/// Runs the call until it ends (its result) or asks (an input-required
/// result), or the request is cancelled.
async fn next(
    host: &McpHost,
    mut run: Running,
    id: String,
    round: u32,
    tool: String,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let ct = context.ct.clone();
    let mut cancelled = false;
    loop {
        tokio::select! {
            done = &mut run.done => {
                run.notifier.flush().await;
                let result = done.unwrap_or_else(|_| Err(ToolError::msg("the call's task stopped before it ended")));
                return convert::response(run.spec.as_ref(), result).map(CallToolResponse::from);
            }
            question = run.questions.recv(), if run.asking => {
                let Some(question) = question else {
                    run.asking = false;
                    continue;
                };
                let params = match convert::elicit_params(&question.question) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = question.answer.send(Err(e));
                        continue;
                    }
                };
                run.notifier.flush().await;
                let round = round + 1;
                // The question's id names it, when it has one.
                let key = question
                    .question
                    .elicitation_id
                    .clone()
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("elicit-{round}"));
                let sealed = seal(host, &State { call: id.clone(), tool, round });
                let mut requests = BTreeMap::new();
                requests.insert(key.clone(), InputRequest::Elicitation(ElicitRequest::new(params)));
                let canceller = run.canceller.clone();
                lock(&host.suspended.calls).insert(
                    id.clone(),
                    Waiting { round, key, answer: question.answer, run },
                );
                abandon(host, id, round, canceller);
                return Ok(InputRequiredResult::new(Some(requests), Some(sealed)).into());
            }
            _ = ct.cancelled(), if !cancelled => {
                cancelled = true;
                run.canceller.cancel(Some(convert::CANCELLED));
            }
        }
    }
}

/// Cancels a suspended call whose client does not come back in time.
fn abandon(host: &McpHost, id: String, round: u32, canceller: Canceller) {
    let suspended = host.suspended.clone();
    let wait = host.abandon_after;
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let gone = {
            let mut calls = lock(&suspended.calls);
            match calls.get(&id) {
                Some(w) if w.round == round => calls.remove(&id),
                _ => None,
            }
        };
        if let Some(waiting) = gone {
            canceller.cancel(Some(
                "the MCP client did not come back with an answer (input-required round abandoned)",
            ));
            drop(waiting);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel::tools::Tools;
    use reel_recorder::{Recorder, RecorderConfig};

    #[tokio::test]
    async fn a_state_opens_only_with_its_seal_intact() {
        let dir = tempfile::tempdir().unwrap();
        let config = RecorderConfig {
            fingerprint_key: reel_archive::FingerprintKey::Key([3; 32]),
            ..RecorderConfig::default()
        };
        let recorder = Recorder::open(dir.path().join("a"), config).await.unwrap();
        let host = McpHost::new(recorder.clone(), Tools::new());
        let state = State {
            call: "call-1".into(),
            tool: "t".into(),
            round: 1,
        };
        let sealed = seal(&host, &state);
        assert_eq!(open(&host, &sealed).unwrap(), state);

        // Another round under the old tag: refused.
        let (_, tag) = sealed.split_once('.').unwrap();
        let forged = State { round: 2, ..state };
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        let err = open(&host, &format!("{body}.{tag}")).unwrap_err();
        assert!(
            err.message.contains("seal does not hold"),
            "{}",
            err.message
        );
        assert!(open(&host, "garbage").is_err());
        // A body without its tag: refused.
        assert!(open(&host, &body).is_err());

        // Another archive key: refused.
        let other_dir = tempfile::tempdir().unwrap();
        let other = Recorder::open(
            other_dir.path().join("a"),
            RecorderConfig {
                fingerprint_key: reel_archive::FingerprintKey::Key([4; 32]),
                ..RecorderConfig::default()
            },
        )
        .await
        .unwrap();
        let other_host = McpHost::new(other.clone(), Tools::new());
        assert!(open(&other_host, &sealed).is_err());
        recorder.shutdown().await.unwrap();
        other.shutdown().await.unwrap();
    }
}
