//! The live listeners a host attaches to a call: a progress listener sees
//! each report as it is filed (what an MCP server sends as
//! `notifications/progress`), a log listener gets each line with its
//! logger's name (`notifications/message`'s `logger`).

use std::sync::{Arc, Mutex};

use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, Level};
use reel::tools::Tools;
use reel_archive::FingerprintKey;
use reel_recorder::{LogListener, ProgressListener, Recorder, RecorderConfig};
use serde_json::{json, Value};

#[derive(Default)]
struct Seen {
    progress: Mutex<Vec<(String, Value)>>,
    logs: Mutex<Vec<(Level, Option<String>, Value)>>,
}

impl ProgressListener for Seen {
    fn progress(&self, call_id: &str, payload: &Value) -> bool {
        self.progress
            .lock()
            .unwrap()
            .push((call_id.to_owned(), payload.clone()));
        true
    }
}

impl LogListener for Seen {
    fn deliver(&self, _call_id: &str, _level: Level, _data: &Value) -> bool {
        unreachable!("the recorder calls deliver_from")
    }
    fn deliver_from(
        &self,
        _call_id: &str,
        level: Level,
        logger: Option<&str>,
        data: &Value,
    ) -> bool {
        self.logs
            .lock()
            .unwrap()
            .push((level, logger.map(str::to_owned), data.clone()));
        level != Level::Debug
    }
}

/// A listener written before loggers had names: `deliver` only.
struct Plain(Mutex<Vec<Value>>);

impl LogListener for Plain {
    fn deliver(&self, _call_id: &str, _level: Level, data: &Value) -> bool {
        self.0.lock().unwrap().push(data.clone());
        true
    }
}

async fn recorder(dir: &std::path::Path) -> Recorder {
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([9; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    Recorder::open(dir, config).await.unwrap()
}

async fn work(ctx: ToolContext, _args: Value) -> Result<u32, ToolError> {
    ctx.progress(json!({ "progress": 1, "total": 2 }));
    ctx.set_logger("worker");
    ctx.log(Level::Debug, "quiet");
    ctx.notify("loud");
    ctx.dispatch("child", json!({})).await?;
    ctx.progress(json!({ "progress": 2, "total": 2, "message": "done" }));
    Ok(2)
}

async fn child(ctx: ToolContext, _args: Value) -> Result<(), ToolError> {
    ctx.progress(json!({ "step": "child" }));
    Ok(())
}

/// A recorded log line: level, logger, delivered.
type LogLine = (Level, Option<String>, bool);

fn recorded(recorder: &Recorder, key: &str) -> (Vec<Value>, Vec<LogLine>) {
    let mut progress = Vec::new();
    let mut logs = Vec::new();
    for fact in recorder.archive().facts(key, ..).unwrap() {
        match fact.unwrap().kind {
            FactKind::Progress(p) => progress.push(p.payload),
            FactKind::Log(l) => logs.push((l.level, l.logger, l.delivered)),
            _ => {}
        }
    }
    (progress, logs)
}

#[tokio::test]
async fn a_progress_listener_sees_every_report_in_order_and_a_log_listener_the_logger() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = recorder(dir.path()).await;
    let tools = Tools::new().register("work", work).register("child", child);
    let seen = Arc::new(Seen::default());
    let call = recorder
        .call("work", json!({}))
        .dispatcher(tools.clone())
        .progress_listener(seen.clone())
        .listener(seen.clone());
    let key = call.key().to_owned();
    let parent = call.id().to_owned();
    assert_eq!(call.invoke_tool(&tools).await.unwrap(), json!(2));
    recorder.flush().await.unwrap();

    let progress = seen.progress.lock().unwrap().clone();
    let ids: Vec<&str> = progress.iter().map(|(id, _)| id.as_str()).collect();
    // The dispatched child's report reaches the listener too, under its id.
    assert_eq!(ids.len(), 3);
    assert_eq!((ids[0], ids[2]), (parent.as_str(), parent.as_str()));
    assert_ne!(ids[1], parent);
    let payloads: Vec<Value> = progress.into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        payloads,
        [
            json!({ "progress": 1, "total": 2 }),
            json!({ "step": "child" }),
            json!({ "progress": 2, "total": 2, "message": "done" }),
        ]
    );

    let logs = seen.logs.lock().unwrap().clone();
    assert_eq!(
        logs,
        [
            (Level::Debug, Some("worker".into()), json!("quiet")),
            (Level::Info, Some("worker".into()), json!("loud")),
        ]
    );
    // What the listener returned is what the log facts say was delivered.
    let (recorded_progress, recorded_logs) = recorded(&recorder, &key);
    assert_eq!(
        recorded_logs,
        [
            (Level::Debug, Some("worker".into()), false),
            (Level::Info, Some("worker".into()), true),
        ]
    );
    assert_eq!(recorded_progress, payloads);
    recorder.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_a_progress_listener_reports_are_only_recorded_and_a_plain_listener_still_delivers()
{
    let dir = tempfile::tempdir().unwrap();
    let recorder = recorder(dir.path()).await;
    let tools = Tools::new().register("work", work).register("child", child);
    let plain = Arc::new(Plain(Mutex::new(Vec::new())));
    let call = recorder
        .call("work", json!({}))
        .dispatcher(tools.clone())
        .listener(plain.clone());
    let key = call.key().to_owned();
    call.invoke_tool(&tools).await.unwrap();
    recorder.flush().await.unwrap();
    assert_eq!(*plain.0.lock().unwrap(), [json!("quiet"), json!("loud")]);
    let (progress, logs) = recorded(&recorder, &key);
    // The parent's two reports and its child's one, in the same stream.
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(logs
        .iter()
        .all(|(_, logger, delivered)| *delivered && logger.as_deref() == Some("worker")));
    recorder.shutdown().await.unwrap();
}
