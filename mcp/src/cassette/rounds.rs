//! Input-required rounds of the mock (MCP 2026-07-28, SEP-2322): a
//! recorded call that asked a question is answered with an input-required
//! result whose sealed `requestState` names where its replay waits; the
//! client's next round (the state echoed, an answer in `inputResponses`)
//! resumes it there.
//!
//! As `serve` seals its states (HMAC-SHA256), the mock seals them under a
//! key of its own, drawn at random when it starts: a state is valid only
//! for the mock process that issued it, is opened only when its seal holds,
//! names the same tool and the round the call waits at, and is used once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use reel::lock::lock;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ErrorData, InputRequest, InputRequiredResult,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

/// The request state, before sealing.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct State {
    /// The recorded call's index in the session.
    call: usize,
    tool: String,
    round: u32,
}

/// Where a suspended replay waits.
struct Waiting {
    round: u32,
    /// The event to resume at.
    at: usize,
    /// The key of the question in `inputRequests`.
    key: String,
}

/// The mock's suspended replays and its sealing key.
#[derive(Clone)]
pub(crate) struct Rounds {
    key: Arc<[u8; 32]>,
    waiting: Arc<Mutex<HashMap<usize, Waiting>>>,
}

fn refused(why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("reel mock: requestState refused: {why}; start the call again without one"),
        None,
    )
}

impl Rounds {
    pub(crate) fn new() -> Rounds {
        Rounds {
            key: Arc::new(rand::random()),
            waiting: Arc::default(),
        }
    }

    fn mac(&self, data: &[u8]) -> [u8; 32] {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.key[..]).expect("HMAC takes any key size");
        mac.update(b"reel-mcp/mock-request-state/v1\0");
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    fn seal(&self, state: &State) -> String {
        let json = serde_json::to_vec(state).expect("a state serialises");
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&json),
            URL_SAFE_NO_PAD.encode(self.mac(&json))
        )
    }

    fn open(&self, sealed: &str) -> Result<State, ErrorData> {
        let not_ours = || refused("it is not a state this mock sealed");
        let (body, tag) = sealed.split_once('.').ok_or_else(not_ours)?;
        let json = URL_SAFE_NO_PAD.decode(body).map_err(|_| not_ours())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| not_ours())?;
        let mac = self.mac(&json);
        // Constant time: how much of a forged tag matched says nothing.
        let same =
            tag.len() == mac.len() && tag.iter().zip(mac).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
        if !same {
            return Err(refused(
                "its seal does not hold (it was changed, or issued by another mock)",
            ));
        }
        serde_json::from_slice(&json).map_err(|_| not_ours())
    }

    /// Suspends recorded call `call` (of `tool`) at a question: the
    /// input-required result to answer with, its replay to resume at event
    /// `at` in round `round`.
    pub(super) fn suspend(
        &self,
        call: usize,
        tool: &str,
        round: u32,
        at: usize,
        question: ElicitRequestParams,
    ) -> InputRequiredResult {
        let key = format!("elicit-{round}");
        let sealed = self.seal(&State {
            call,
            tool: tool.to_owned(),
            round,
        });
        let mut requests = BTreeMap::new();
        requests.insert(
            key.clone(),
            InputRequest::Elicitation(ElicitRequest::new(question)),
        );
        lock(&self.waiting).insert(call, Waiting { round, at, key });
        InputRequiredResult::new(Some(requests), Some(sealed))
    }

    /// Opens the state of a client's next round of `tool`: the recorded
    /// call, the event its replay resumes at, and the round. The client's
    /// answer must be there (it is not compared with the record: the
    /// record's answer is what the recorded result followed).
    pub(crate) fn resume(
        &self,
        sealed: &str,
        tool: &str,
        responses: Option<&BTreeMap<String, Value>>,
    ) -> Result<(usize, usize, u32), ErrorData> {
        let state = self.open(sealed)?;
        if state.tool != tool {
            return Err(refused("it belongs to a call of another tool"));
        }
        let mut waiting = lock(&self.waiting);
        let w = match waiting.get(&state.call) {
            Some(w) if w.round == state.round => w,
            Some(_) => return Err(refused("the call it names is at another round")),
            None => return Err(refused("the call it names is not waiting")),
        };
        if !responses.is_some_and(|r| r.contains_key(&w.key)) {
            return Err(ErrorData::invalid_params(
                format!(
                    "reel mock: the next round carried no answer to {:?} (inputResponses)",
                    w.key
                ),
                None,
            ));
        }
        let w = waiting.remove(&state.call).expect("checked above");
        Ok((state.call, w.at, state.round))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question() -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form",
            "message": "Really?",
            "requestedSchema": {"type": "object", "properties": {}}
        }))
        .unwrap()
    }

    #[test]
    fn a_round_resumes_once_and_only_under_its_seal() {
        let rounds = Rounds::new();
        let result = rounds.suspend(3, "confirm", 1, 2, question());
        let v = serde_json::to_value(&result).unwrap();
        assert!(v["inputRequests"]["elicit-1"].is_object(), "{v}");
        let sealed = v["requestState"].as_str().unwrap().to_owned();
        let answer: BTreeMap<String, Value> = [(
            "elicit-1".to_owned(),
            json!({"action": "accept", "content": {}}),
        )]
        .into();

        // Another tool, no answer, a forged round: refused, the call still waits.
        assert!(rounds.resume(&sealed, "other", Some(&answer)).is_err());
        assert!(rounds.resume(&sealed, "confirm", None).is_err());
        let (body, tag) = sealed.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(
            serde_json::to_vec(&State {
                call: 3,
                tool: "confirm".into(),
                round: 2,
            })
            .unwrap(),
        );
        let err = rounds
            .resume(&format!("{forged}.{tag}"), "confirm", Some(&answer))
            .unwrap_err();
        assert!(
            err.message.contains("seal does not hold"),
            "{}",
            err.message
        );
        assert!(rounds.resume(body, "confirm", Some(&answer)).is_err());
        // Another mock's state: refused.
        assert!(Rounds::new()
            .resume(&sealed, "confirm", Some(&answer))
            .is_err());

        assert_eq!(
            rounds.resume(&sealed, "confirm", Some(&answer)).unwrap(),
            (3, 2, 1)
        );
        // Used once.
        assert!(rounds.resume(&sealed, "confirm", Some(&answer)).is_err());
    }
}
