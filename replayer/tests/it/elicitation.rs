//! Elicitation as seed 004 and MCP 2025-11-25 have it, each rule recorded
//! through a real recorder into a real archive, exported as a tape and
//! replayed from that tape with no divergence: URL mode carries its url and
//! elicitation id; without an elicitor the question is refused and the
//! refusal recorded; an elicitor's failure is an error, not a cancel; an
//! answer is validated against the question's full JSON Schema, by JSON
//! pointer; a ttl runs out as `timeout` (tokio's paused clock).

use crate::support::{record, result_of};

use std::sync::Arc;

use reel::context::*;
use reel::fact::*;
use reel::report::ReplayReport;
use reel::tools::Tools;
use reel_recorder::{Elicitor, ScriptedElicitor};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

async fn replays_clean(recording: &Recording, tools: &Tools) -> ReplayReport {
    let report = replay(recording, tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    assert_eq!(report.calls.len(), recording.calls.len(), "{report}");
    report
}

fn facts<'a>(recording: &'a Recording, call: &str) -> Vec<&'a FactKind> {
    recording.calls[call]
        .facts
        .iter()
        .map(|f| &f.kind)
        .collect()
}

/// Asks `question` and returns what came back, as the call's result.
fn asking(question: Elicitation) -> Tools {
    Tools::new().register("ask", move |ctx: ToolContext, _: Value| {
        let question = question.clone();
        async move {
            let has = ctx.has_elicitor();
            let answer = match ctx.elicit(question).await {
                Ok(a) => json!({
                    "outcome": a.outcome,
                    "invalid": a.validation_errors,
                }),
                Err(ContextError::NoElicitor) => {
                    json!({ "refused": ContextError::NoElicitor.to_string() })
                }
                Err(ContextError::Elicit(reason)) => json!({ "elicitor_failed": reason }),
                Err(other) => json!({ "other": other.to_string() }),
            };
            Ok::<_, ToolError>(json!({ "has_elicitor": has, "answer": answer }))
        }
    })
}

fn accepting(content: Value) -> Arc<ScriptedElicitor> {
    Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept { content }]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_mode_records_its_url_and_elicitation_id() {
    let question = Elicitation::url(
        "Sign in to GitHub to continue",
        "https://github.test/login/device?code=AB12",
        "el-7f3a",
    );
    assert_eq!(
        question.to_mcp(),
        json!({
            "mode": "url",
            "message": "Sign in to GitHub to continue",
            "url": "https://github.test/login/device?code=AB12",
            "elicitationId": "el-7f3a",
        })
    );
    let tools = asking(question);
    let t = tools.clone();
    let recording = record("url-mode", RunStatus::Completed, |run| async move {
        run.call("ask", json!({}))
            .elicitor(accepting(json!({})))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let requested = facts(&recording, "c1")
        .into_iter()
        .find_map(|k| match k {
            FactKind::ElicitRequested(r) => Some(r.clone()),
            _ => None,
        })
        .expect("elicit.requested");
    assert_eq!(requested.mode, ElicitMode::Url);
    assert_eq!(
        requested.url.as_deref(),
        Some("https://github.test/login/device?code=AB12")
    );
    assert_eq!(requested.elicitation_id.as_deref(), Some("el-7f3a"));
    assert_eq!(requested.message, "Sign in to GitHub to continue");
    replays_clean(&recording, &tools).await;

    // A record made before URL mode carried them reads as absent.
    let old: ElicitRequested =
        serde_json::from_value(json!({ "message": "m", "schema": {}, "mode": "url" })).unwrap();
    assert_eq!((old.url, old.elicitation_id), (None, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_elicitor_the_question_is_refused_and_recorded() {
    let tools = asking(Elicitation::form(
        "Deploy?",
        json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } } }),
    ));
    let t = tools.clone();
    let recording = record("no-elicitor", RunStatus::Completed, |run| async move {
        run.call("ask", json!({})).invoke_tool(&t).await.unwrap();
    })
    .await;
    let result = result_of(&recording, "c1");
    assert_eq!(result["has_elicitor"], json!(false));
    let refused = facts(&recording, "c1")
        .into_iter()
        .find_map(|k| match k {
            FactKind::ElicitRefused(r) => Some(r.clone()),
            _ => None,
        })
        .expect("elicit.refused is on the record");
    assert_eq!(refused.message, "Deploy?");
    assert_eq!(refused.mode, ElicitMode::Form);
    assert!(
        refused
            .reason
            .contains("attach one on the host with `.elicitor(elicitor)`")
            && refused.reason.contains("ctx.has_elicitor()"),
        "{}",
        refused.reason
    );
    assert_eq!(result["answer"]["refused"], json!(refused.reason));
    assert!(
        !facts(&recording, "c1")
            .iter()
            .any(|k| matches!(k, FactKind::ElicitRequested(_))),
        "no one was asked"
    );
    replays_clean(&recording, &tools).await;
}

/// An elicitor whose transport fails.
struct Broken;

impl Elicitor for Broken {
    fn elicit<'a>(&'a self, _q: &'a Elicitation) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(async { Err("connection reset by the client".to_string()) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitor_error_is_an_error_not_a_cancel() {
    let tools = asking(Elicitation::form("Deploy?", json!({ "type": "object" })));
    let t = tools.clone();
    let recording = record("elicitor-error", RunStatus::Completed, |run| async move {
        run.call("ask", json!({}))
            .elicitor(Arc::new(Broken))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let answered = facts(&recording, "c1")
        .into_iter()
        .find_map(|k| match k {
            FactKind::ElicitAnswered(a) => Some(a.clone()),
            _ => None,
        })
        .expect("elicit.answered");
    assert_eq!(
        answered.outcome,
        ElicitOutcome::Error {
            message: "connection reset by the client".into()
        }
    );
    assert_eq!(
        result_of(&recording, "c1")["answer"],
        json!({ "elicitor_failed": "connection reset by the client" })
    );
    // Replay gives the tool the same typed error, from the record.
    replays_clean(&recording, &tools).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_validated_against_the_full_schema_by_pointer() {
    let schema = json!({
        "type": "object",
        "properties": {
            "replicas": { "type": "integer", "minimum": 1, "maximum": 10 },
            "env": { "enum": ["prod", "staging"] },
            "ticket": { "type": "string", "pattern": "^OPS-[0-9]+$" },
            "reviewers": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
        },
        "required": ["replicas", "env", "ticket"],
        "additionalProperties": false,
    });
    let tools = asking(Elicitation::form("Roll out how?", schema));
    let t = tools.clone();
    let bad = json!({ "replicas": 0, "env": "qa", "ticket": "ops 1", "reviewers": [], "extra": 1 });
    let good = json!({ "replicas": 3, "env": "prod", "ticket": "OPS-42", "reviewers": ["bo"] });
    let recording = record("validation", RunStatus::Completed, |run| async move {
        for content in [bad, good] {
            run.call("ask", json!({}))
                .elicitor(accepting(content))
                .invoke_tool(&t)
                .await
                .unwrap();
        }
    })
    .await;
    let invalid = |call: &str| -> Vec<String> {
        facts(&recording, call)
            .into_iter()
            .find_map(|k| match k {
                FactKind::ElicitAnswered(a) => Some(a.validation_errors.clone()),
                _ => None,
            })
            .expect("elicit.answered")
    };
    let mut errors = invalid("c1");
    errors.sort();
    // Keywords the old hand-written subset never checked: minimum, enum,
    // pattern, minItems, additionalProperties; each at its pointer.
    let pointers: Vec<&str> = errors
        .iter()
        .map(|e| e.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        pointers,
        ["(root)", "/env", "/replicas", "/reviewers", "/ticket"],
        "{errors:?}"
    );
    assert!(errors.contains(&"/replicas: 0 is less than the minimum of 1".to_string()));
    assert!(errors
        .iter()
        .any(|e| e.starts_with("(root): Additional properties")));
    assert_eq!(invalid("c2"), Vec::<String>::new());
    assert_eq!(
        result_of(&recording, "c1")["answer"]["invalid"],
        json!(invalid("c1"))
    );
    // Replay validates the recorded answer again and files the same errors.
    replays_clean(&recording, &tools).await;
}

/// An elicitor nobody ever answers.
struct Silent;

impl Elicitor for Silent {
    fn elicit<'a>(&'a self, _q: &'a Elicitation) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(futures::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn a_ttl_runs_out_as_timeout_and_replays_as_timeout() {
    let tools =
        asking(Elicitation::form("Still there?", json!({ "type": "object" })).ttl_ms(30_000));
    let t = tools.clone();
    let before = tokio::time::Instant::now();
    let recording = record("ttl", RunStatus::Completed, |run| async move {
        run.call("ask", json!({}))
            .elicitor(Arc::new(Silent))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    // The paused clock ran exactly through the ttl (it advances only when
    // every task waits), not a moment of wall time.
    assert!(before.elapsed() >= std::time::Duration::from_secs(30));
    let kinds: Vec<&FactKind> = facts(&recording, "c1");
    let requested = kinds.iter().find_map(|k| match k {
        FactKind::ElicitRequested(r) => Some(r.ttl_ms),
        _ => None,
    });
    assert_eq!(requested, Some(Some(30_000)));
    let outcome = kinds.iter().find_map(|k| match k {
        FactKind::ElicitAnswered(a) => Some(a.outcome.clone()),
        _ => None,
    });
    assert_eq!(outcome, Some(ElicitOutcome::Timeout));
    assert_eq!(
        result_of(&recording, "c1")["answer"]["outcome"],
        json!({ "outcome": "timeout" })
    );
    // Replay gives the timeout back at once, from the record.
    let at = tokio::time::Instant::now();
    replays_clean(&recording, &tools).await;
    assert!(at.elapsed() < std::time::Duration::from_secs(30));
}

#[reel::schema]
#[derive(Debug, PartialEq)]
enum Env {
    Staging,
    Production,
}

#[reel::schema]
#[derive(Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Region {
    Eu,
    Us,
}

/// A typed question: MCP's primitives, an enum, a multi-select list and
/// an optional field.
#[reel::schema]
#[derive(Debug, PartialEq)]
struct Ship {
    confirm: bool,
    env: Env,
    replicas: u8,
    regions: Vec<Region>,
    note: Option<String>,
}

/// Not askable over MCP: a nested object.
#[reel::schema]
#[derive(Debug)]
struct Nested {
    ship: Ship,
}

fn typed_tools() -> Tools {
    Tools::new()
        .register("ship", |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(match ctx.elicit_as::<Ship>("Ship it?").await {
                Ok(Elicited::Accepted(s)) => json!({
                    "confirm": s.confirm,
                    "env": format!("{:?}", s.env),
                    "replicas": s.replicas,
                    "regions": s.regions.len(),
                    "note": s.note,
                }),
                Ok(other) => json!(format!("{other:?}")),
                Err(e) => json!({ "error": e.to_string() }),
            })
        })
        .register("nested", |ctx: ToolContext, _: Value| async move {
            let err = ctx.elicit_as::<Nested>("Nested?").await.unwrap_err();
            Ok::<_, ToolError>(json!({ "error": err.to_string() }))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_question_asks_mcps_schema_and_answers_typed_or_names_the_misfit() {
    let tools = typed_tools();
    let t = tools.clone();
    let recording = record("typed-question", RunStatus::Completed, |run| async move {
        let answers = [
            ElicitOutcome::Accept {
                content: json!({ "confirm": true, "env": "Production", "replicas": 3, "regions": ["eu", "us"] }),
            },
            ElicitOutcome::Accept {
                content: json!({ "confirm": "yes", "env": "Moon", "replicas": 3, "regions": [] }),
            },
            ElicitOutcome::Decline,
        ];
        for answer in answers {
            run.call("ship", json!({}))
                .elicitor(Arc::new(ScriptedElicitor::new([answer])))
                .invoke_tool(&t)
                .await
                .unwrap();
        }
        run.call("nested", json!({}))
            .elicitor(accepting(json!({})))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;

    // The question on the record is MCP's flat schema.
    let schema = facts(&recording, "c1")
        .into_iter()
        .find_map(|k| match k {
            FactKind::ElicitRequested(r) => Some(r.schema.clone()),
            _ => None,
        })
        .expect("elicit.requested");
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "confirm": { "type": "boolean" },
                "env": { "type": "string", "enum": ["Staging", "Production"] },
                "replicas": { "type": "integer", "minimum": 0, "maximum": 255 },
                "regions": { "type": "array", "items": { "type": "string", "enum": ["eu", "us"] } },
                "note": { "type": "string" },
            },
            "required": ["confirm", "env", "replicas", "regions"],
        })
    );
    assert_eq!(
        result_of(&recording, "c1"),
        json!({ "confirm": true, "env": "Production", "replicas": 3, "regions": 2, "note": null })
    );
    let misfit = result_of(&recording, "c2")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        misfit.starts_with("the user's answer does not fit `")
            && misfit.contains("Ship`: /confirm: \"yes\" is not of type \"boolean\"")
            && misfit.contains("/env: \"Moon\" is not one of"),
        "{misfit}"
    );
    assert_eq!(result_of(&recording, "c3"), json!("Declined"));
    let refused = result_of(&recording, "c4")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        refused.contains("cannot ask the user for a `")
            && refused.contains("field `ship`: an object"),
        "{refused}"
    );
    assert!(facts(&recording, "c4")
        .iter()
        .any(|k| matches!(k, FactKind::ElicitRefused(r) if r.reason == refused)));
    let report = replays_clean(&recording, &tools).await;
    assert!(report.is_exact(), "{report}");
}
