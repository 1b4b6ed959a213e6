//! The [`Index`] derived from a document's lines: its call tree, where
//! each seq, call and artifact stands, the faults the core's `TapeCheck`
//! finds, and the timeline.

use super::*;

/// An item of the call tree, in line order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A fact (or the header, or an artifact) on this line.
    Line(usize),
    /// A call (an index into [`Index::calls`]).
    Call(usize),
}

/// A call and the lines it stands on.
#[derive(Debug, Clone)]
pub struct CallSpan {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The parent call as recorded.
    pub parent_call: Option<String>,
    /// The line of `call.started`.
    pub started: usize,
    /// Offset of `call.started`, nanoseconds since the run started.
    pub started_offset: u64,
    /// The line of the first `call.ended` after the start.
    pub ended: Option<usize>,
    /// The last line of the call's facts and of its children's.
    pub last: usize,
    /// Depth in the tree (capped at [`MAX_NESTING`]).
    pub depth: usize,
    /// The call whose items hold this one (an index into
    /// [`Index::calls`]): the parent, when it started on an earlier line,
    /// or its ancestor where nesting is flattened; `None` at the top.
    pub holder: Option<usize>,
    /// The call's facts (its `call.started` first) and child calls, in
    /// line order.
    pub items: Vec<Item>,
}

/// A problem with the tape's structure (beyond one line's parse).
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The line (0-based).
    pub line: usize,
    /// A short code.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
}

/// What is derived from the parsed lines.
#[derive(Debug)]
pub struct Index {
    /// The timeline over the facts, in line order.
    pub timeline: Timeline,
    /// Calls, in line order of their `call.started`.
    pub calls: Vec<CallSpan>,
    /// Top-level items: run-level facts, top-level calls, the header,
    /// artifact lines, and facts of calls that had not started above them.
    pub top: Vec<Item>,
    /// Structural problems.
    pub problems: Vec<Problem>,
    /// The line of the header.
    pub header: Option<usize>,
    /// The line of `run.started`.
    pub run_started: Option<usize>,
    /// The last line that is not blank.
    pub last_line: usize,
    call_by_id: HashMap<String, usize>,
    timeline_call: HashMap<String, usize>,
    /// Line of each seq (the first holding it): dense, by seq, for seqs
    /// below the line count; a map for the others.
    seq_line: Vec<usize>,
    seq_line_far: HashMap<u64, usize>,
    gap_line: HashMap<u64, usize>,
    puts_by_digest: HashMap<String, Vec<usize>>,
    puts_by_id: HashMap<String, Vec<usize>>,
    artifact_line: HashMap<String, usize>,
    /// The call (index into `calls`) of each line, `NONE` for none.
    fact_call: Vec<usize>,
}

impl Index {
    pub(super) fn build(lines: &[Line]) -> Index {
        let mut b = TimelineBuilder::default();
        let mut ix = Index {
            timeline: Timeline::build([]),
            calls: Vec::new(),
            top: Vec::new(),
            problems: Vec::new(),
            header: None,
            run_started: None,
            last_line: 0,
            call_by_id: HashMap::new(),
            timeline_call: HashMap::new(),
            seq_line: vec![NONE; lines.len()],
            seq_line_far: HashMap::new(),
            gap_line: HashMap::new(),
            puts_by_digest: HashMap::new(),
            puts_by_id: HashMap::new(),
            artifact_line: HashMap::new(),
            fact_call: vec![NONE; lines.len()],
        };
        // What may stand where, and the stream rules, are the tape's
        // (`TapeCheck`): the editor shows what `reel import` and `verify`
        // refuse, at the same lines.
        let mut check = TapeCheck::default();
        let mut faults = Vec::new();
        for (n, line) in lines.iter().enumerate() {
            if line.parsed != Parsed::Blank {
                ix.last_line = n;
            }
            let seen = match &line.parsed {
                Parsed::Blank => Seen::Blank,
                Parsed::Invalid { .. } => Seen::Invalid,
                Parsed::Header(h) => Seen::Header(h),
                Parsed::Artifact { .. } => Seen::Artifact,
                Parsed::Fact(f) => Seen::Fact(f),
            };
            faults.clear();
            check.line(n + 1, seen, &mut faults);
            let mut out_of_range = false;
            for fault in faults.drain(..) {
                out_of_range |= fault.kind == FaultKind::SeqOutOfRange;
                ix.fault(fault);
            }
            let fact = match &line.parsed {
                Parsed::Blank | Parsed::Invalid { .. } => continue,
                Parsed::Header(_) => {
                    ix.header = Some(n);
                    ix.top.push(Item::Line(n));
                    continue;
                }
                Parsed::Artifact { digest, .. } => {
                    ix.artifact_line.entry(digest.clone()).or_insert(n);
                    ix.top.push(Item::Line(n));
                    continue;
                }
                Parsed::Fact(f) => f,
            };
            if out_of_range {
                ix.top.push(Item::Line(n));
                continue;
            }
            if let FactKind::Unknown { kind, .. } = &fact.kind {
                ix.problems.push(Problem {
                    line: n,
                    code: "unknown-kind",
                    message: format!(
                        "kind {kind:?} is not known to this reel (written by a newer one?): its fields are kept as they are"
                    ),
                });
            }
            match usize::try_from(fact.seq)
                .ok()
                .filter(|&s| s < ix.seq_line.len())
            {
                Some(s) if ix.seq_line[s] == NONE => ix.seq_line[s] = n,
                Some(_) => {}
                None => {
                    ix.seq_line_far.entry(fact.seq).or_insert(n);
                }
            }
            b.push(fact);
            ix.place_fact(n, fact);
        }
        // Children start after their parents: a reverse pass carries each
        // call's last line up to its parent.
        for i in (0..ix.calls.len()).rev() {
            let last = ix.calls[i].last;
            if let Some(p) = ix.calls[i].holder {
                ix.calls[p].last = ix.calls[p].last.max(last);
            }
        }
        check.finish(&mut faults);
        for fault in faults {
            ix.fault(fault);
        }
        ix.timeline = b.finish();
        ix.timeline_call = ix
            .timeline
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| (c.call_id.clone(), i))
            .collect();
        ix
    }

    /// A fault of the tape's structure or of the stream rules, as a problem
    /// at its line. A seq that skips ahead is also the timeline's gap:
    /// its line is kept for the gap's diagnostic.
    pub(super) fn fault(&mut self, fault: Fault) {
        let line = fault.line.saturating_sub(1);
        let code = match &fault.kind {
            FaultKind::NoHeader | FaultKind::Empty => "no-header",
            FaultKind::FactAfterArtifacts => "fact-after-artifacts",
            FaultKind::SeqOutOfRange => "seq-out-of-range",
            FaultKind::OtherStream { .. } => "other-stream",
            FaultKind::CutShort { .. } => "cut-short",
            FaultKind::NoFacts => "no-facts",
            FaultKind::Breaks(v) => match v.rule {
                Rule::Gapless { expected } if v.seq > expected => {
                    self.gap_line.entry(expected).or_insert(line);
                    GAP
                }
                Rule::Gapless { .. } => "seq-order",
                Rule::BeginsWithRunStarted | Rule::HeadNamesOtherCall | Rule::HeadOfOtherKind => {
                    "no-head"
                }
                Rule::RunStartedNamesRun { .. } | Rule::CallNamesStream { .. } => "other-stream",
                Rule::OneRunStarted | Rule::OneCallHead => "second-head",
                Rule::RunEndedOutsideRun => "run-ended-outside-run",
                Rule::NothingAfterRunEnded { .. } | Rule::NothingAfterCallEnded { .. } => {
                    "after-end"
                }
                Rule::OneStartPerCallId { .. } => "call-id-taken",
            },
        };
        self.problems.push(Problem {
            line,
            code,
            message: fault.kind.to_string(),
        });
    }

    pub(super) fn place_fact(&mut self, n: usize, fact: &Fact) {
        match &fact.kind {
            FactKind::RunStarted(_) if self.run_started.is_none() => self.run_started = Some(n),
            FactKind::ArtifactPut(p) => {
                self.puts_by_digest
                    .entry(p.meta.digest.clone())
                    .or_default()
                    .push(n);
                self.puts_by_id
                    .entry(p.meta.id.clone())
                    .or_default()
                    .push(n);
            }
            _ => {}
        }
        if let FactKind::CallStarted(c) = &fact.kind {
            if let Some(&first) = self.call_by_id.get(&c.call_id) {
                let line = self.calls[first].started + 1;
                self.problems.push(Problem {
                    line: n,
                    code: "call-restarted",
                    message: format!(
                        "call {} started again (it started on line {line})",
                        c.call_id
                    ),
                });
            }
            let parent = c
                .parent_call
                .as_deref()
                .and_then(|p| self.call_by_id.get(p).copied());
            // Below MAX_NESTING the call hangs from its parent; deeper, from
            // the parent's holder (so it stays at the deepest level).
            let holder = match parent {
                Some(p) if self.calls[p].depth + 1 >= MAX_NESTING => self.calls[p].holder,
                other => other,
            };
            let depth = holder.map_or(0, |p| self.calls[p].depth + 1);
            let i = self.calls.len();
            self.calls.push(CallSpan {
                call_id: c.call_id.clone(),
                tool: c.tool_name.clone(),
                parent_call: c.parent_call.clone(),
                started: n,
                started_offset: fact.offset,
                ended: None,
                last: n,
                depth,
                holder,
                items: vec![Item::Line(n)],
            });
            self.call_by_id.insert(c.call_id.clone(), i);
            self.fact_call[n] = i;
            match holder {
                Some(p) => self.calls[p].items.push(Item::Call(i)),
                None => self.top.push(Item::Call(i)),
            }
            return;
        }
        let call = fact
            .call
            .as_deref()
            .and_then(|c| self.call_by_id.get(c).copied());
        match call {
            Some(i) => {
                let span = &mut self.calls[i];
                span.items.push(Item::Line(n));
                span.last = n;
                if matches!(fact.kind, FactKind::CallEnded(_)) && span.ended.is_none() {
                    span.ended = Some(n);
                }
                self.fact_call[n] = i;
            }
            None => self.top.push(Item::Line(n)),
        }
    }

    /// The call a fact line belongs to (its own call for `call.started`).
    pub fn call_of_line(&self, line: usize) -> Option<&CallSpan> {
        self.fact_call
            .get(line)
            .filter(|&&i| i != NONE)
            .map(|&i| &self.calls[i])
    }

    /// The call with this id (the latest to start, if it started twice).
    pub fn call(&self, call_id: &str) -> Option<&CallSpan> {
        self.call_by_id.get(call_id).map(|&i| &self.calls[i])
    }

    /// The timeline's node for a call.
    pub fn timeline_call(&self, call_id: &str) -> Option<&reel_viewer::timeline::CallNode> {
        self.timeline_call
            .get(call_id)
            .map(|&i| &self.timeline.calls[i])
    }

    /// The first line holding a fact with this seq.
    pub fn line_of_seq(&self, seq: u64) -> Option<usize> {
        match usize::try_from(seq).ok().and_then(|s| self.seq_line.get(s)) {
            Some(&n) => (n != NONE).then_some(n),
            None => self.seq_line_far.get(&seq).copied(),
        }
    }

    /// The line where the seq numbers skip to after `first` is missing.
    pub fn line_of_gap(&self, first: u64) -> Option<usize> {
        self.gap_line.get(&first).copied()
    }

    /// Lines of `artifact.put` facts for this digest.
    pub fn puts_of_digest(&self, digest: &str) -> &[usize] {
        self.puts_by_digest.get(digest).map_or(&[], Vec::as_slice)
    }

    /// Lines of `artifact.put` facts for this artifact id.
    pub fn puts_of_id(&self, id: &str) -> &[usize] {
        self.puts_by_id.get(id).map_or(&[], Vec::as_slice)
    }

    /// The artifact line holding these bytes.
    pub fn artifact_line(&self, digest: &str) -> Option<usize> {
        self.artifact_line.get(digest).copied()
    }
}
