//! The workload every recording row shares: concurrent runs whose calls file
//! progress reports, and the same facts built by hand for the baselines.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use reel::context::{ToolContext, ToolError};
use reel::fact::*;
use reel::Fact;
use serde_json::{json, Value};

/// The shape of the recording workload.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Runs recorded concurrently (one task each).
    pub runs: usize,
    /// Calls per run, one after the other.
    pub calls: usize,
    /// Progress reports per call.
    pub progress: usize,
}

impl Shape {
    /// Facts one run records: run.started, per call call.started + the
    /// progress reports + call.ended, run.ended.
    pub fn facts_per_run(&self) -> usize {
        2 + self.calls * (self.progress + 2)
    }

    /// Facts the whole workload records.
    pub fn facts(&self) -> usize {
        self.runs * self.facts_per_run()
    }
}

/// How often a tool yields to the runtime (an await point), in reports.
pub const YIELD_EVERY: usize = 64;

/// The tool's name in every row.
pub const TOOL: &str = "busy";

/// The `i`th progress payload of a call filing `n` of them: what a tool
/// typically reports (a message for people, counters for machines).
pub fn payload(i: usize, n: usize) -> Value {
    json!({ "message": format!("step {i} of {n}"), "done": i, "total": n })
}

/// The arguments of call `c` of run `r`.
pub fn args(r: usize, c: usize, progress: usize) -> Value {
    json!({ "run": r, "call": c, "progress": progress })
}

/// The result of a call.
pub fn result(progress: usize) -> Value {
    json!({ "done": progress })
}

/// The benchmarked tool: files `args.progress` progress reports, yielding
/// every [`YIELD_EVERY`].
pub async fn busy(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let n = args["progress"].as_u64().unwrap_or(0) as usize;
    for i in 0..n {
        ctx.progress(payload(i, n));
        if i % YIELD_EVERY == YIELD_EVERY - 1 {
            tokio::task::yield_now().await;
        }
    }
    Ok(result(n))
}

/// Wall-clock unix nanoseconds, as the recorder stamps them.
pub fn unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Builds the facts of one run by hand, batch by batch, exactly as the
/// recorder files them for [`busy`] (same kinds, fields and payloads), and
/// hands each batch to `sink`: run.started alone, then per call
/// call.started + progress + call.ended, then run.ended alone.
pub fn run_facts(r: usize, shape: &Shape, mut sink: impl FnMut(&[Fact])) {
    let started = Instant::now();
    let mut seq = 0u64;
    let mut batch: Vec<Fact> = Vec::with_capacity(shape.progress + 2);
    let mut fact = |batch: &mut Vec<Fact>, call: Option<&str>, kind: FactKind| {
        batch.push(Fact {
            seq,
            at: unix_nanos(),
            offset: started.elapsed().as_nanos() as u64,
            call: call.map(str::to_owned),
            kind,
        });
        seq += 1;
    };
    fact(&mut batch, None, run_started(run_id(r)));
    sink(&batch);
    batch.clear();
    for c in 0..shape.calls {
        let call_id = format!("c{}", c + 1);
        let call_started = Instant::now();
        fact(
            &mut batch,
            Some(&call_id),
            self::call_started(&call_id, TOOL, args(r, c, shape.progress)),
        );
        for i in 0..shape.progress {
            fact(
                &mut batch,
                Some(&call_id),
                FactKind::Progress(Progress {
                    payload: payload(i, shape.progress),
                    count: i as u64 + 1,
                    delivered: false,
                }),
            );
        }
        fact(
            &mut batch,
            Some(&call_id),
            FactKind::CallEnded(CallEnded {
                outcome: CallOutcome::Ok {
                    result: result(shape.progress),
                },
                duration_ns: call_started.elapsed().as_nanos() as u64,
                invocation_id: None,
            }),
        );
        sink(&batch);
        batch.clear();
    }
    fact(
        &mut batch,
        None,
        FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        }),
    );
    sink(&batch);
}

/// The id of run `r`.
pub fn run_id(r: usize) -> String {
    format!("bench-{r}")
}

/// `run.started` of a run as the recorder files it for the benchmarks'
/// runs (the baselines build the same facts by hand).
pub fn run_started(run_id: String) -> FactKind {
    FactKind::RunStarted(RunStarted {
        run_id,
        session_id: None,
        identity: None,
        producer: Producer {
            name: "reel-recorder".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        labels: Default::default(),
        teardown_scopes: vec![TeardownScope::Call, TeardownScope::Run],
    })
}

/// `call.started` of a top-level call of `tool` with `args`, as the
/// recorder files it.
pub fn call_started(call_id: &str, tool: &str, args: Value) -> FactKind {
    FactKind::CallStarted(CallStarted {
        call_id: call_id.into(),
        tool_name: tool.into(),
        tool_id: None,
        parent_call: None,
        iteration: 0,
        invocation_id: None,
        mode: CallMode::Async,
        protocol: None,
        platform: None,
        client_info: None,
        args,
        wanted: None,
        attached: Some(Attached::default()),
        spec: None,
        dispatch_tools: None,
        outside_run: None,
    })
}

/// Appends `facts` to `buf`, each encoded with
/// [`reel::codec::encode_fact`] behind its `u32` little-endian length: the
/// plain file's framing, and a block's payload before compression.
pub fn encode_batch(facts: &[Fact], buf: &mut Vec<u8>) -> std::io::Result<()> {
    for fact in facts {
        let at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        reel::codec::encode_fact(fact, buf).map_err(std::io::Error::other)?;
        let len = (buf.len() - at - 4) as u32;
        buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    Ok(())
}
