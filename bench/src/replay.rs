//! Replay: facts matched per second when replaying a recorded run from its
//! tape, against decoding the same tape.

use std::hint::black_box;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use reel::context::{ToolContext, ToolError};
use reel::fact::{Level, RunStatus};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RunStart};
use reel_replayer::{replay, ReplayInput, ReplayOptions};
use serde_json::{json, Value};

use crate::record::recorder_config;
use crate::workload;

/// The replayed tool: per step a progress report, every 8th step a
/// journaled effect, every 16th a log line.
pub async fn stepper(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let n = args["steps"].as_u64().unwrap_or(0) as usize;
    let mut fetched = 0u64;
    for i in 0..n {
        ctx.progress(workload::payload(i, n));
        if i % 8 == 7 {
            let v: u64 = ctx
                .effect("store.fetch", &json!({ "page": i }), move || async move {
                    Ok::<_, String>(i as u64 * 3)
                })
                .await?;
            fetched += v;
        }
        if i % 16 == 15 {
            ctx.log(Level::Info, json!({ "note": "checkpoint", "at": i }));
        }
    }
    Ok(json!({ "steps": n, "fetched": fetched }))
}

/// The registry replay re-drives.
pub fn tools() -> Tools {
    Tools::new().register("stepper", stepper)
}

/// Records one run of `calls` calls of [`stepper`] with `steps` steps each
/// into a new archive in `dir`, and returns its tape as bytes.
pub async fn record_tape(dir: &Path, calls: usize, steps: usize) -> io::Result<Vec<u8>> {
    let recorder = Recorder::open(dir, recorder_config())
        .await
        .map_err(io::Error::other)?;
    let run = recorder
        .start_run(RunStart::new("replayed"))
        .await
        .map_err(io::Error::other)?;
    for _ in 0..calls {
        run.call("stepper", json!({ "steps": steps }))
            .invoke(stepper)
            .await
            .map_err(io::Error::other)?;
    }
    run.end(RunStatus::Completed)
        .await
        .map_err(io::Error::other)?;
    let archive = recorder.archive().clone();
    recorder.shutdown().await.map_err(io::Error::other)?;
    let tape = Tape::export(&archive, "replayed").map_err(io::Error::other)?;
    let mut bytes = Vec::new();
    tape.write(&mut bytes).map_err(io::Error::other)?;
    Ok(bytes)
}

/// One replay from the tape's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    /// Facts the replay matched against the record.
    pub matched: u64,
    /// Reading the tape and indexing it (`Tape::read`, `ReplayInput::from_tape`).
    pub load: Duration,
    /// `reel_replayer::replay` itself.
    pub replay: Duration,
}

/// Reads the tape, indexes it, and replays it against [`tools`]; the replay
/// must match.
pub async fn replay_tape(bytes: &[u8], tools: &Tools) -> io::Result<Replayed> {
    let started = Instant::now();
    let tape = Tape::read(bytes).map_err(io::Error::other)?;
    // Indexed for this one replay, its facts moved, not copied, as a
    // one-shot replay of a tape just read does.
    let input = ReplayInput::from_tape("bench", tape).map_err(io::Error::other)?;
    let load = started.elapsed();
    let started = Instant::now();
    let report = replay(input, tools, &ReplayOptions::default()).await;
    let replay = started.elapsed();
    if !report.is_match() {
        return Err(io::Error::other(format!(
            "the benchmark's replay diverged: {:?}",
            report.problems()
        )));
    }
    Ok(Replayed {
        matched: report.matched_facts,
        load,
        replay,
    })
}

/// Decodes the tape (`Tape::read`) and frees it: returns the facts and the
/// time. The free is timed because `replay()` frees the facts it was given
/// inside its own time (the tape's, moved in): each side pays for freeing
/// what it read.
pub fn decode_tape(bytes: &[u8]) -> io::Result<(usize, Duration)> {
    let started = Instant::now();
    let tape = Tape::read(bytes).map_err(io::Error::other)?;
    let n = tape.facts.len();
    drop(black_box(tape));
    Ok((n, started.elapsed()))
}
