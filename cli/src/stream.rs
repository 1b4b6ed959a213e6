//! Finding a run, and the one loop that drives a run's fact stream from a
//! [`Source`] into any [`RunSink`] (text, JSON, HTML).

use reel::codec::{FactView, ViewSink};
use reel::fact::FactKind;
use reel::gap::Gap;
use reel::{Fact, RunRecord, RunState};
use reel_archive::RunFilter;
use reel_viewer::render::sink::RunSink;
use reel_viewer::timeline::{Timeline, TimelineBuilder};

use crate::failure::Failure;
use reel_archive::live::{Item, Source};

/// Which facts a verb lists (`--call`, `--kind`). Facts it leaves out still
/// reach the sink, unlisted: they shape the timeline.
#[derive(Debug, Default)]
pub struct ShowFilter {
    /// Only facts of this call (and run-level facts).
    pub call: Option<String>,
    /// Only facts of these kinds (none: every kind).
    pub kinds: Vec<String>,
}

impl ShowFilter {
    /// Whether `f` is listed.
    pub fn keeps(&self, f: &Fact) -> bool {
        let call_ok = match (&self.call, &f.call) {
            (None, _) | (Some(_), None) => true,
            (Some(want), Some(c)) => want == c,
        };
        call_ok && (self.kinds.is_empty() || self.kinds.iter().any(|k| k == f.kind.name()))
    }
}

impl ShowFilter {
    /// Refuses a filter that cannot match in `run_id`, by name, listing
    /// what would: a kind no fact is (exit 64: the catalogue is fixed), a
    /// call the run does not have (exit 1, as an unknown run). The run's
    /// facts are read once more only for `--call`, or for a kind this reel
    /// does not know (a newer reel's kind may be in the run).
    pub fn check(&self, source: &Source, run_id: &str) -> Result<(), Failure> {
        let unknown_kinds: Vec<&String> = self
            .kinds
            .iter()
            .filter(|k| !FactKind::KNOWN.contains(&k.as_str()))
            .collect();
        if self.call.is_none() && unknown_kinds.is_empty() {
            return Ok(());
        }
        // Calls in start order (with their tool), and the kinds seen.
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut kinds: Vec<String> = Vec::new();
        for item in source.facts(run_id, 0..u64::MAX, false)? {
            let Item::Fact(f) = item? else { continue };
            if let FactKind::CallStarted(c) = &f.kind {
                calls.push((c.call_id.clone(), c.tool_name.clone()));
            }
            if !unknown_kinds.is_empty() && !kinds.iter().any(|k| k == f.kind.name()) {
                kinds.push(f.kind.name().to_owned());
            }
        }
        if let Some(kind) = unknown_kinds.iter().find(|k| !kinds.contains(k)) {
            let near = FactKind::KNOWN
                .iter()
                .map(|known| (strsim::jaro_winkler(kind, known), *known))
                .filter(|(score, _)| *score > 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| format!("did you mean {k}? "))
                .unwrap_or_default();
            return Err(Failure::usage(format!(
                "--kind {kind}: no fact is of that kind: {near}the kinds are {}",
                FactKind::KNOWN.join(", ")
            )));
        }
        if let Some(call) = &self.call {
            if !calls.iter().any(|(id, _)| id == call) {
                const SHOWN: usize = 20;
                let mut listed = calls
                    .iter()
                    .take(SHOWN)
                    .map(|(id, tool)| format!("{id} ({tool})"))
                    .collect::<Vec<_>>()
                    .join(", ");
                if calls.len() > SHOWN {
                    listed.push_str(&format!(" and {} more", calls.len() - SHOWN));
                }
                return Err(Failure::msg(if calls.is_empty() {
                    format!("--call {call}: run {run_id} has no calls")
                } else {
                    format!("--call {call}: run {run_id} has no such call; its calls are {listed}")
                }));
            }
        }
        Ok(())
    }
}

/// How a stream went: the sink's timeline, and whether facts could not be
/// read (the verb then exits 2).
pub struct Streamed {
    /// The run's timeline, as the sink built it.
    pub timeline: Timeline,
    /// True when the stream had a gap.
    pub damaged: bool,
}

/// Whether a stream stops at the last fact read or goes on as facts land
/// (a live source only: a closed archive has no more to give).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Stop after the facts there are now.
    No,
    /// Go on as a live recorder files facts, until the run ends.
    AsFactsLand,
}

/// Streams `run_id`'s facts from `source` into `sink`, keeping
/// [`RunSink`]'s contract: every fact in order (listed as `filter` says),
/// every gap at its place, `finish` once at the end, nothing after an
/// error. With [`Follow::AsFactsLand`] (a live source) the stream goes on
/// as facts land.
pub fn stream<S: RunSink>(
    source: &Source,
    run_id: &str,
    filter: &ShowFilter,
    follow: Follow,
    mut sink: S,
) -> Result<Streamed, Failure> {
    let mut damaged = false;
    for item in source.facts(run_id, 0..u64::MAX, follow == Follow::AsFactsLand)? {
        match item? {
            Item::Fact(fact) => sink.fact(&fact, filter.keeps(&fact))?,
            Item::Gap(gap) => {
                damaged = true;
                sink.gap(&gap)?;
            }
        }
    }
    Ok(Streamed {
        timeline: sink.finish()?,
        damaged,
    })
}

/// `record`'s run through the timeline, writing nothing: its anomalies are
/// the one definition `show`, its JSON and its HTML page count by (a gap
/// is one, and makes the run damaged; a live run's open calls are not).
pub fn anomalies(source: &Source, record: &RunRecord) -> Result<Streamed, Failure> {
    let mut builder = TimelineBuilder::for_record(record);
    if let Source::Archive(archive) = source {
        // The timeline alone: the archive's facts read as views, a progress
        // report's payload never built (`Facts::views`).
        let mut sink = Damage {
            builder: &mut builder,
            damaged: false,
        };
        archive.facts(&record.run_id, ..)?.views(&mut sink)?;
        let damaged = sink.damaged;
        return Ok(Streamed {
            timeline: builder.finish(),
            damaged,
        });
    }
    let streamed = stream(
        source,
        &record.run_id,
        &ShowFilter::default(),
        Follow::No,
        builder,
    )?;
    Ok(streamed)
}

/// Resolves a run id, suggesting near matches for an unknown one.
pub fn resolve_run(source: &Source, run: &str) -> Result<RunRecord, Failure> {
    match source.run(run) {
        Ok(r) => return Ok(r),
        Err(e) if e.is_unknown_run() => {}
        Err(e) => return Err(e.into()),
    }
    let mut near: Vec<(f64, String)> = source
        .run_ids()?
        .into_iter()
        .map(|id| (strsim::jaro_winkler(run, &id), id))
        .filter(|(score, _)| *score > 0.75)
        .collect();
    near.sort_by(|a, b| b.0.total_cmp(&a.0));
    let hint = if near.is_empty() {
        "list runs with `reel runs`".to_owned()
    } else {
        format!(
            "did you mean {}?",
            near.iter()
                .take(3)
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Err(Failure::msg(format!(
        "no run \"{run}\" in {}: {hint}",
        source.dir().display()
    )))
}

/// Which run [`newest_run`] picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Newest {
    /// The newest run, whatever its state.
    Any,
    /// The newest run still running, else the newest.
    RunningFirst,
}

/// The newest run, as `which` says.
pub fn newest_run(source: &Source, which: Newest) -> Result<String, Failure> {
    let running_first = which == Newest::RunningFirst;
    let newest = |status| {
        source.list_runs(&RunFilter {
            status,
            limit: Some(1),
            ..RunFilter::default()
        })
    };
    let mut page = if running_first {
        newest(Some(RunState::Running))?
    } else {
        newest(None)?
    };
    if page.runs.is_empty() && running_first {
        page = newest(None)?;
    }
    page.runs
        .into_iter()
        .next()
        .map(|r| r.run_id)
        .ok_or_else(|| {
            Failure::msg(format!(
                "the archive {} has no runs yet",
                source.dir().display()
            ))
        })
}

/// A timeline's view sink that notes whether the stream had a gap.
struct Damage<'a> {
    builder: &'a mut TimelineBuilder,
    damaged: bool,
}

impl ViewSink for Damage<'_> {
    fn view(&mut self, fact: &FactView<'_>) {
        self.builder.push_view(fact);
    }

    fn gap(&mut self, gap: &Gap) {
        self.damaged = true;
        self.builder.push_gap(gap);
    }
}
