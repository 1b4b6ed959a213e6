//! A run's lanes, under its waterfall on the same time axis: progress
//! ticks, logs, effects, elicitations, artifacts, teardown and
//! cancellation, each fact a mark at its offset that links to it (an
//! artifact's to its preview). Built in the one pass that folds the run
//! into its timeline; a lane of more than [`MAX_MARKS`] facts keeps every
//! second mark, then every fourth, and says how many it shows.
//!
//! Also the call index the page's script reads: each call's parent and
//! duration, for collapse, collapse-below-a-duration and focus.

use reel_core::fact::FactKind;

use super::*;

/// The most marks a lane keeps.
pub(super) const MAX_MARKS: usize = 600;

/// The lanes, in the order shown: (name, what goes in it).
const LANES: [(&str, &str); 7] = [
    ("progress", "progress ticks"),
    ("logs", "log messages"),
    ("effects", "journaled side effects"),
    ("elicitations", "questions to the user and their answers"),
    ("artifacts", "artifacts stored and fetched"),
    ("teardown", "cleanups registered and run"),
    ("cancellation", "cancellation requests"),
];

fn lane_of(kind: &FactKind) -> Option<usize> {
    Some(match kind {
        FactKind::Progress(_) | FactKind::ProgressDropped(_) => 0,
        FactKind::Log(_) => 1,
        FactKind::Effect(_) => 2,
        FactKind::ElicitRequested(_) | FactKind::ElicitAnswered(_) | FactKind::ElicitRefused(_) => {
            3
        }
        FactKind::ArtifactPut(_) | FactKind::ArtifactGet(_) | FactKind::ArtifactRefused(_) => 4,
        FactKind::TeardownRegistered(_)
        | FactKind::TeardownRefused(_)
        | FactKind::TeardownRan(_) => 5,
        FactKind::CancelRequested(_) => 6,
        _ => return None,
    })
}

/// One mark.
#[derive(Debug, Clone)]
struct Mark {
    seq: u64,
    offset: u64,
    call: Option<String>,
    kind: String,
    line: String,
}

#[derive(Debug, Clone, Default)]
struct Lane {
    marks: Vec<Mark>,
    /// Facts of this lane seen.
    seen: u64,
    /// One mark kept per this many facts.
    stride: u64,
}

/// The lanes of a run, built fact by fact.
#[derive(Debug, Clone)]
pub(super) struct Lanes {
    lanes: Vec<Lane>,
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes {
            lanes: vec![
                Lane {
                    stride: 1,
                    ..Lane::default()
                };
                LANES.len()
            ],
        }
    }
}

impl Lanes {
    /// Files `fact` in its lane (when it has one); `tool` names its call's
    /// tool for the mark's line.
    pub(super) fn push(&mut self, fact: &Fact, tool: &str, text: &TextRenderer) {
        let Some(i) = lane_of(&fact.kind) else {
            return;
        };
        let lane = &mut self.lanes[i];
        lane.seen += 1;
        if !(lane.seen - 1).is_multiple_of(lane.stride) {
            return;
        }
        let mut line = text.detail_text(fact, tool);
        if line.chars().count() > 200 {
            line = line.chars().take(199).chain(['…']).collect();
        }
        lane.marks.push(Mark {
            seq: fact.seq,
            offset: fact.offset,
            call: fact.call.clone(),
            kind: fact.kind.name().to_owned(),
            line,
        });
        if lane.marks.len() >= MAX_MARKS {
            let mut n = 0;
            lane.marks.retain(|_| {
                n += 1;
                n % 2 == 1
            });
            lane.stride *= 2;
        }
    }

    /// The lanes section, on the waterfall's axis (`span` nanoseconds);
    /// `run_href` is the run page's address.
    pub(super) fn render(&self, out: &mut String, span: u64, run_href: &str) {
        let span = span.max(1);
        let pct = |ns: u64| ns.min(span) as f64 * 100.0 / span as f64;
        out.push_str(
            "<section id=\"lanes\" class=\"panel\"><h2>Lanes</h2>\
             <p class=\"muted\">Each mark is a fact at its time on the waterfall's axis; \
             click one to inspect it.</p>\n",
        );
        for ((name, what), lane) in LANES.iter().zip(&self.lanes) {
            let shown = if lane.seen as usize > lane.marks.len() {
                format!("{} of {} shown", lane.marks.len(), lane.seen)
            } else {
                lane.seen.to_string()
            };
            let _ = write!(
                out,
                "<div class=\"lane\" data-lane=\"{name}\" data-facts=\"{}\"><div class=\"lane-label\" \
                 title=\"{what}\">{name} <span class=\"muted\">{shown}</span></div>\
                 <div class=\"lane-track\">",
                lane.seen
            );
            if lane.marks.is_empty() {
                out.push_str("<span class=\"muted lane-none\">none</span>");
            }
            for m in &lane.marks {
                let href = if *name == "artifacts" && m.kind != "artifact.refused" {
                    format!("{run_href}/artifacts/{}", m.seq)
                } else {
                    format!("#seq-{}", m.seq)
                };
                let label = format!("#{} +{} {} {}", m.seq, duration(m.offset), m.kind, m.line);
                let _ = write!(
                    out,
                    "<a class=\"mark mk-{name}\" href=\"{}\" data-seq=\"{}\" data-call=\"{}\" \
                     style=\"left:{:.3}%\" title=\"{l}\" aria-label=\"{l}\"></a>",
                    escape(&href),
                    m.seq,
                    escape(m.call.as_deref().unwrap_or("")),
                    pct(m.offset),
                    l = escape(&label),
                );
            }
            out.push_str("</div></div>\n");
        }
        out.push_str("</section>\n");
    }
}

/// The calls' tree and durations for the page's script: one hidden
/// element per call (`data-call`, `data-parent`, `data-ns`, the duration
/// so far for a call still open, `data-open`).
pub(super) fn call_index(out: &mut String, t: &Timeline) {
    out.push_str("<div id=\"call-index\" hidden>");
    for c in &t.calls {
        let ns = c
            .duration_ns
            .unwrap_or_else(|| t.duration_ns().saturating_sub(c.started_offset));
        let _ = write!(
            out,
            "<i data-call=\"{}\" data-parent=\"{}\" data-ns=\"{ns}\" data-open=\"{}\"></i>",
            escape(&c.call_id),
            escape(c.parent.as_deref().unwrap_or("")),
            c.ended_seq.is_none()
        );
    }
    out.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::fact::{Progress, RunEnded, RunStatus};
    use serde_json::json;

    fn progress(seq: u64) -> Fact {
        Fact {
            seq,
            at: 0,
            offset: seq,
            call: Some("c".into()),
            kind: FactKind::Progress(Progress {
                payload: json!({ "message": format!("hop {seq}") }),
                count: seq,
                delivered: false,
            }),
        }
    }

    #[test]
    fn a_lane_keeps_at_most_max_marks_spread_over_the_run() {
        let text = TextRenderer::new(Color::Plain);
        let mut lanes = Lanes::default();
        let n = 100_000u64;
        for seq in 0..n {
            lanes.push(&progress(seq), "walk", &text);
        }
        let lane = &lanes.lanes[0];
        assert_eq!(lane.seen, n);
        assert!(lane.marks.len() < MAX_MARKS, "{}", lane.marks.len());
        assert!(lane.marks.len() > MAX_MARKS / 4, "{}", lane.marks.len());
        // Spread evenly: the first fact is kept, the last kept is near the end.
        assert_eq!(lane.marks[0].seq, 0);
        let last = lane.marks.last().unwrap().seq;
        assert!(last >= n - lane.stride, "{last}");
        let steps: Vec<u64> = lane.marks.windows(2).map(|w| w[1].seq - w[0].seq).collect();
        assert!(steps.iter().all(|s| *s == lane.stride), "{steps:?}");
        let mut page = String::new();
        lanes.render(&mut page, n, "/runs/r");
        assert!(page.contains(&format!("{} of {n} shown", lane.marks.len())));
    }

    #[test]
    fn facts_without_a_lane_are_not_marked() {
        let text = TextRenderer::new(Color::Plain);
        let mut lanes = Lanes::default();
        lanes.push(
            &Fact {
                seq: 0,
                at: 0,
                offset: 0,
                call: None,
                kind: FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }),
            },
            "",
            &text,
        );
        assert!(lanes.lanes.iter().all(|l| l.seen == 0));
    }
}
