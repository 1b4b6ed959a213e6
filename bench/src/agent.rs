//! The agent workload: what real tool calls look like, not a progress storm.
//!
//! Per call: arguments of about 2 KiB, three journaled effects whose
//! responses are 4 KiB JSON bodies, two progress reports, one log line, and
//! a result of about 8 KiB; one call in [`AgentShape::big_every`] returns a
//! 256 KiB payload instead, which is above the recorder's inline limit and
//! spills to an artifact. Its baseline writes the same facts, built by hand
//! as the recorder builds them, as JSON Lines with the same group commit
//! (what a team would write by hand).
//!
//! The latency row lives here too: what one call pays, on its own, for
//! call-boundary durability, against one fsync of the same bytes.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use reel::context::{ToolContext, ToolError};
use reel::fact::*;
use reel::Fact;
use reel_archive::{Archive, ArchiveConfig};
use reel_recorder::{Recorder, RunStart};
use serde_json::{json, Value};

use crate::record::{recorder_config, Recorded};
use crate::workload::unix_nanos;

/// The shape of the agent workload.
#[derive(Debug, Clone, Copy)]
pub struct AgentShape {
    /// Runs recorded concurrently (one task each).
    pub runs: usize,
    /// Calls per run, one after the other.
    pub calls: usize,
    /// One call in this many returns the 256 KiB payload.
    pub big_every: usize,
}

impl AgentShape {
    /// Facts one call records: call.started, 3 effects, 2 progress reports,
    /// 1 log, call.ended.
    pub const FACTS_PER_CALL: usize = 8;

    /// Facts one run records.
    pub fn facts_per_run(&self) -> usize {
        2 + self.calls * Self::FACTS_PER_CALL
    }

    /// Facts the whole workload records.
    pub fn facts(&self) -> usize {
        self.runs * self.facts_per_run()
    }

    fn big(&self, call: usize) -> bool {
        self.big_every > 0 && call % self.big_every == self.big_every - 1
    }
}

/// The tool's name.
pub const TOOL: &str = "research.step";

/// `len` bytes of text that compress as prose does (words from a small
/// vocabulary, picked by a fixed generator seeded by `seed`).
pub fn text(len: usize, seed: u64) -> String {
    const WORDS: &[&str] = &[
        "the",
        "agent",
        "tool",
        "call",
        "returned",
        "a",
        "result",
        "with",
        "several",
        "fields",
        "repository",
        "issue",
        "pull",
        "request",
        "review",
        "comment",
        "status",
        "open",
        "closed",
        "merged",
        "branch",
        "commit",
        "author",
        "date",
        "summary",
        "of",
        "changes",
        "in",
        "file",
        "line",
        "error",
        "warning",
        "test",
        "passed",
        "failed",
        "build",
        "deploy",
        "service",
    ];
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let word = WORDS[(state >> 33) as usize % WORDS.len()];
        out.push_str(word);
        // Now and then a number, as real payloads carry ids and counts.
        if (state >> 20).is_multiple_of(7) {
            out.push_str(&format!(" {}", (state >> 40) % 100_000));
        }
        out.push(' ');
    }
    out.truncate(len);
    out
}

/// The arguments of call `c` of run `r` (about 2 KiB).
pub fn args(r: usize, c: usize, big: bool) -> Value {
    json!({
        "run": r,
        "call": c,
        "big": big,
        "query": text(2048, (r * 7919 + c) as u64),
    })
}

/// The request of effect `e` of a call.
pub fn effect_request(r: usize, c: usize, e: usize) -> Value {
    json!({ "method": "GET", "url": format!("https://api.example.com/v1/items?run={r}&call={c}&page={e}") })
}

/// The response of effect `e` of a call: a 4 KiB JSON body.
pub fn effect_body(r: usize, c: usize, e: usize) -> Value {
    json!({
        "status": 200,
        "page": e,
        "items": (0..8).map(|i| json!({ "id": format!("item-{r}-{c}-{e}-{i}"), "score": i * 13 % 100 })).collect::<Vec<_>>(),
        "body": text(3584, (r * 104729 + c * 31 + e) as u64),
    })
}

/// The result of call `c` of run `r`: about 8 KiB, or 256 KiB for the big
/// ones (above the inline limit: it spills to an artifact).
pub fn result(r: usize, c: usize, big: bool) -> Value {
    let len = if big { 256 * 1024 } else { 8 * 1024 };
    json!({ "summary": text(len, (r * 15485863 + c) as u64), "sources": 3 })
}

/// The benchmarked tool.
pub async fn tool(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let r = args["run"].as_u64().unwrap_or(0) as usize;
    let c = args["call"].as_u64().unwrap_or(0) as usize;
    let big = args["big"].as_bool().unwrap_or(false);
    let mut items = 0;
    for e in 0..3 {
        let body: Value = ctx
            .effect("http.get", &effect_request(r, c, e), move || async move {
                Ok::<_, String>(effect_body(r, c, e))
            })
            .await?;
        items += body["items"].as_array().map_or(0, Vec::len);
    }
    ctx.progress(json!({ "message": "fetched 3 pages", "done": 3, "total": 4 }));
    ctx.progress(json!({ "message": "summarising", "done": 4, "total": 4 }));
    ctx.log(
        Level::Info,
        json!({ "note": "summary ready", "items": items }),
    );
    Ok(result(r, c, big))
}

/// The id of run `r`.
pub fn run_id(r: usize) -> String {
    format!("agent-{r}")
}

/// Records the workload into a new archive in `dir` through
/// `reel_recorder` with call-boundary durability: `shape.runs` concurrent
/// runs, each calling [`tool`] `shape.calls` times in a row. Timed until
/// `shutdown` returns.
pub async fn reel(dir: &Path, shape: AgentShape) -> io::Result<(Recorded, Archive)> {
    let archive = Archive::open(dir, ArchiveConfig::default()).map_err(io::Error::other)?;
    let recorder =
        Recorder::with_archive(archive.clone(), recorder_config()).map_err(io::Error::other)?;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(shape.runs);
    for r in 0..shape.runs {
        let recorder = recorder.clone();
        tasks.push(tokio::spawn(async move {
            let run = recorder
                .start_run(RunStart::new(run_id(r)))
                .await
                .map_err(io::Error::other)?;
            for c in 0..shape.calls {
                run.call(TOOL, args(r, c, shape.big(c)))
                    .invoke(tool)
                    .await
                    .map_err(|e| io::Error::other(e.to_string()))?;
            }
            run.end(RunStatus::Completed)
                .await
                .map_err(io::Error::other)
        }));
    }
    for task in tasks {
        task.await.map_err(io::Error::other)??;
    }
    recorder.shutdown().await.map_err(io::Error::other)?;
    Ok((
        Recorded {
            facts: shape.facts(),
            elapsed: started.elapsed(),
        },
        archive,
    ))
}

/// The facts of run `r`, batch by batch as the recorder files them (run.started,
/// then one batch per call, then run.ended), built by hand with the same
/// kinds, fields and payloads (the big result inline: a hand-written log
/// has no artifact store).
pub fn run_batches(r: usize, shape: &AgentShape) -> Vec<Vec<Fact>> {
    let started = Instant::now();
    let mut seq = 0u64;
    let mut fact = |call: Option<&str>, kind: FactKind| {
        let f = Fact {
            seq,
            at: unix_nanos(),
            offset: started.elapsed().as_nanos() as u64,
            call: call.map(str::to_owned),
            kind,
        };
        seq += 1;
        f
    };
    let mut batches = Vec::with_capacity(shape.calls + 2);
    batches.push(vec![fact(None, crate::workload::run_started(run_id(r)))]);
    for c in 0..shape.calls {
        let call_id = format!("c{}", c + 1);
        let id = Some(call_id.as_str());
        let call_started = Instant::now();
        let big = shape.big(c);
        let mut batch = Vec::with_capacity(AgentShape::FACTS_PER_CALL);
        batch.push(fact(
            id,
            crate::workload::call_started(&call_id, TOOL, args(r, c, big)),
        ));
        for e in 0..3 {
            batch.push(fact(
                id,
                FactKind::Effect(Effect {
                    name: "http.get".into(),
                    request: effect_request(r, c, e),
                    outcome: EffectOutcome::Ok(effect_body(r, c, e)),
                }),
            ));
        }
        for (n, message) in [(3, "fetched 3 pages"), (4, "summarising")] {
            batch.push(fact(
                id,
                FactKind::Progress(Progress {
                    payload: json!({ "message": message, "done": n, "total": 4 }),
                    count: n as u64 - 2,
                    delivered: false,
                }),
            ));
        }
        batch.push(fact(
            id,
            FactKind::Log(Log {
                level: Level::Info,
                logger: None,
                subflow: None,
                data: json!({ "note": "summary ready", "items": 24 }),
                delivered: false,
                in_flight: Vec::new(),
            }),
        ));
        batch.push(fact(
            id,
            FactKind::CallEnded(CallEnded {
                outcome: CallOutcome::Ok {
                    result: result(r, c, big),
                },
                duration_ns: call_started.elapsed().as_nanos() as u64,
                invocation_id: None,
            }),
        ));
        batches.push(batch);
    }
    batches.push(vec![fact(
        None,
        FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        }),
    )]);
    batches
}

/// The baseline: the same facts built by hand, as JSON Lines
/// (`serde_json`), appended to one file with the same group commit as
/// reel's concurrent calls get: the n-th batch of every run is written, then
/// one fsync.
pub fn jsonl(path: &Path, shape: AgentShape) -> io::Result<Recorded> {
    let started = Instant::now();
    let runs: Vec<Vec<Vec<Fact>>> = (0..shape.runs).map(|r| run_batches(r, &shape)).collect();
    let mut file = File::create(path)?;
    let mut buf = Vec::with_capacity(1 << 20);
    for g in 0..shape.calls + 2 {
        buf.clear();
        for run in &runs {
            for fact in &run[g] {
                serde_json::to_writer(&mut buf, fact).map_err(io::Error::other)?;
                buf.push(b'\n');
            }
        }
        file.write_all(&buf)?;
        file.sync_data()?;
    }
    Ok(Recorded {
        facts: shape.facts(),
        elapsed: started.elapsed(),
    })
}

/// Per-call latencies of `n` calls of [`tool`] made one after the other in
/// one run, with call-boundary durability: from `invoke` until the result
/// is handed back (durable by then). Also returns the bytes one such call
/// encodes to, for the baseline.
pub async fn latency_reel(dir: &Path, n: usize) -> io::Result<(Vec<Duration>, usize)> {
    latency_reel_with(dir, n, recorder_config()).await
}

/// [`latency_reel`] with buffered durability: the same calls, none waiting
/// for a flush (what a call costs without durability, printed beside the
/// row for information).
pub async fn latency_buffered(dir: &Path, n: usize) -> io::Result<Vec<Duration>> {
    let config = reel_recorder::RecorderConfig {
        durability: reel_recorder::Durability::Buffered,
        ..recorder_config()
    };
    Ok(latency_reel_with(dir, n, config).await?.0)
}

async fn latency_reel_with(
    dir: &Path,
    n: usize,
    config: reel_recorder::RecorderConfig,
) -> io::Result<(Vec<Duration>, usize)> {
    let recorder = Recorder::open(dir, config)
        .await
        .map_err(io::Error::other)?;
    let run = recorder
        .start_run(RunStart::new("latency"))
        .await
        .map_err(io::Error::other)?;
    let mut out = Vec::with_capacity(n);
    for c in 0..n {
        let t = Instant::now();
        run.call(TOOL, args(0, c, false))
            .invoke(tool)
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
        out.push(t.elapsed());
    }
    run.end(RunStatus::Completed)
        .await
        .map_err(io::Error::other)?;
    recorder.shutdown().await.map_err(io::Error::other)?;
    Ok((out, call_bytes()?))
}

/// The baseline of the latency row: `n` times, `bytes` bytes appended to a
/// file and one fsync (`sync_data`), each timed.
pub fn latency_fsync(path: &Path, bytes: usize, n: usize) -> io::Result<Vec<Duration>> {
    let mut file = File::create(path)?;
    let block = vec![0x5au8; bytes];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// The `q` quantile (0..=1) of `d`, in microseconds.
pub fn quantile_us(d: &[Duration], q: f64) -> f64 {
    if d.is_empty() {
        return f64::NAN;
    }
    let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i]
}

/// The bytes one call of the latency row encodes to (its facts, built by
/// hand, encoded with [`reel::codec::encode_fact`]).
pub fn call_bytes() -> io::Result<usize> {
    let batch = &run_batches(
        0,
        &AgentShape {
            runs: 1,
            calls: 1,
            big_every: 0,
        },
    )[1];
    let mut bytes = Vec::new();
    crate::workload::encode_batch(batch, &mut bytes)?;
    Ok(bytes.len())
}

/// The agent workload's blocks as the recorder would seal them (see
/// [`crate::record::workload_blocks`]); the big results inline.
pub fn workload_blocks(shape: AgentShape) -> io::Result<Vec<Vec<u8>>> {
    let mut blocks = Vec::new();
    for r in 0..shape.runs {
        for batch in run_batches(r, &shape) {
            let mut buf = Vec::new();
            crate::workload::encode_batch(&batch, &mut buf)?;
            blocks.push(buf);
        }
    }
    Ok(blocks)
}
