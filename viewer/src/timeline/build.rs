//! [`TimelineBuilder`]: a [`Timeline`] built one fact at a time, a step
//! per kind of fact that changes it.

use super::*;

/// Builds a [`Timeline`] one fact at a time.
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    t: Option<Timeline>,
    index: HashMap<String, usize>,
    teardown_index: HashMap<(TeardownScope, String), usize>,
    next_seq: u64,
    /// The core's numberer, observing: a report stored without a count
    /// (0) is numbered there, and drops are counted there.
    sequencer: Sequencer,
    templates: ProgressTemplates,
    live: bool,
    /// Per call (by node index), its last report when it was read as a
    /// view: the encoding and the count it was shown with, its line
    /// rendered once, by [`TimelineBuilder::finish`].
    unrendered: Vec<Unrendered>,
}

/// The last progress report of a call, read as a view and not rendered yet.
#[derive(Debug, Default)]
struct Unrendered {
    /// The report's encoding (the buffer is reused report after report).
    encoded: Vec<u8>,
    /// The count the line shows.
    progress: u64,
    /// Whether `encoded` holds the call's last report.
    pending: bool,
}

/// Whether a fact [`TimelineBuilder::envelope`] folds in starts its call
/// (a fact of a call not started yet is an anomaly otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opens {
    Call,
    NoCall,
}

impl TimelineBuilder {
    /// A builder whose calls' `last_progress` is in the wording of
    /// `templates` (the default builder uses seed 000's).
    pub fn with_templates(mut self, templates: ProgressTemplates) -> TimelineBuilder {
        self.templates = templates;
        self
    }

    /// A builder for the run `record` describes. While that run is live
    /// (`running`: its recorder is still writing), a call that has not
    /// ended yet, a cleanup that has not run yet and the run's own end not
    /// seen yet are not anomalies: they are what a live run looks like. Once the run is closed they
    /// are (a run left `incomplete`, a call its writer never ended).
    pub fn for_record(record: &RunRecord) -> TimelineBuilder {
        TimelineBuilder {
            live: record.state == RunState::Running,
            ..TimelineBuilder::default()
        }
    }

    fn t(&mut self) -> &mut Timeline {
        self.t.get_or_insert_with(|| Timeline {
            run: None,
            ended: None,
            calls: Vec::new(),
            credentials: Vec::new(),
            artifacts: Vec::new(),
            teardowns: Vec::new(),
            anomalies: Vec::new(),
            facts: 0,
            kinds: BTreeMap::new(),
            last_offset: 0,
        })
    }

    /// The call's node index, if it started.
    pub fn call_index(&self, call_id: &str) -> Option<usize> {
        self.index.get(call_id).copied()
    }

    /// The tool and depth of a call, for renderers that stream.
    pub fn call_info(&self, call_id: &str) -> Option<(&str, usize)> {
        let i = self.call_index(call_id)?;
        let c = &self.t.as_ref()?.calls[i];
        Some((&c.tool, c.depth))
    }

    /// Progress reports of a call so far.
    pub fn progress_count(&self, call_id: &str) -> u64 {
        self.call_index(call_id)
            .and_then(|i| self.t.as_ref().map(|t| t.calls[i].progress))
            .unwrap_or(0)
    }

    /// Records facts that could not be read.
    pub fn push_gap(&mut self, gap: &Gap) {
        self.t().anomalies.push(Anomaly::Gap(gap.clone()));
        if let Some(l) = gap.last {
            self.next_seq = self.next_seq.max(l + 1);
        }
    }

    /// Folds one fact read as a view in: the same timeline as
    /// [`TimelineBuilder::push`] of the whole fact, without building a
    /// progress report's payload (a call's last report is rendered once,
    /// by [`TimelineBuilder::finish`]).
    pub fn push_view(&mut self, fact: &FactView<'_>) {
        let p = match fact {
            FactView::Whole(fact) => return self.push(fact),
            FactView::Progress(p) => p,
        };
        let count = self
            .sequencer
            .observe_report(p.seq, p.call.unwrap_or_default(), p.count);
        let (call_idx, ended) = self.envelope(p.seq, p.offset, p.call, "progress", Opens::NoCall);
        if let Some(i) = call_idx {
            self.t().calls[i].progress = count;
            if self.unrendered.len() <= i {
                self.unrendered.resize_with(i + 1, Unrendered::default);
            }
            let last = &mut self.unrendered[i];
            last.encoded.clear();
            last.encoded.extend_from_slice(p.encoded());
            last.progress = count;
            last.pending = true;
            if ended {
                self.progress_after_end(i, p.seq);
            }
        }
    }

    /// What every fact does to the timeline: the seqs, the counts, its
    /// call's facts, a fact of a call never started. Returns the call's
    /// node index and whether that call has ended.
    fn envelope(
        &mut self,
        seq: u64,
        offset: u64,
        call: Option<&str>,
        kind: &str,
        opens: Opens,
    ) -> (Option<usize>, bool) {
        self.note_gap(seq);
        self.next_seq = self.next_seq.max(seq.saturating_add(1));
        let t = self.t();
        t.facts += 1;
        t.last_offset = t.last_offset.max(offset);
        match t.kinds.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                t.kinds.insert(kind.to_owned(), 1);
            }
        }
        let call_idx = call.and_then(|c| self.index.get(c).copied());
        if let (Some(call_id), None, Opens::NoCall) = (call, call_idx, opens) {
            self.t().anomalies.push(Anomaly::UnknownCall {
                call_id: call_id.to_owned(),
                seq,
            });
        }
        if let Some(i) = call_idx {
            self.t().calls[i].facts += 1;
        }
        let ended = call_idx.is_some_and(|i| {
            self.t
                .as_ref()
                .is_some_and(|t| t.calls[i].ended_seq.is_some())
        });
        (call_idx, ended)
    }

    /// Folds one fact in.
    pub fn push(&mut self, fact: &Fact) {
        let count = self.sequencer.observe_count(fact);
        let (call_idx, ended) = self.envelope(
            fact.seq,
            fact.offset,
            fact.call.as_deref(),
            fact.kind.name(),
            if matches!(fact.kind, FactKind::CallStarted(_)) {
                Opens::Call
            } else {
                Opens::NoCall
            },
        );

        match &fact.kind {
            FactKind::RunStarted(r) => {
                self.t().run = Some(RunHeader {
                    run_id: r.run_id.clone(),
                    outside_run: None,
                    started_at: fact.at,
                    session_id: r.session_id.clone(),
                    identity: r.identity.clone(),
                    producer: r.producer.clone(),
                    labels: r.labels.clone(),
                    teardown_scopes: r.teardown_scopes.clone(),
                });
            }
            FactKind::CallStarted(c) => self.call_started(fact, c),
            FactKind::Progress(p) => {
                if let Some(i) = call_idx {
                    self.progress(fact, p, i, count, ended);
                }
            }
            // Reports the recorder dropped are counted (the next report's
            // count includes them; trailing drops have no next report):
            // by the `Sequencer`, which counts them where it numbers.
            FactKind::ProgressDropped(_) => {
                if let Some(i) = call_idx {
                    let so_far = self
                        .sequencer
                        .progress_so_far(fact.call.as_deref().unwrap_or_default());
                    self.t().calls[i].progress = so_far;
                }
            }
            FactKind::CredentialResolved(c) => self.t().credentials.push(CredentialEntry {
                seq: fact.seq,
                call: fact.call.clone(),
                need: c.need.clone(),
                mode: c.mode,
                outcome: "resolved".into(),
                fingerprint: Some(c.fingerprint.0.clone()),
                reason: None,
            }),
            FactKind::CredentialFailed(c) => {
                let t = self.t();
                t.credentials.push(CredentialEntry {
                    seq: fact.seq,
                    call: fact.call.clone(),
                    need: c.need.clone(),
                    mode: c.mode,
                    outcome: "failed".into(),
                    fingerprint: None,
                    reason: Some(c.reason.clone()),
                });
                t.anomalies.push(Anomaly::CredentialFailed {
                    call_id: fact.call.clone(),
                    need: c.need.clone(),
                    seq: fact.seq,
                });
            }
            FactKind::CredentialRefused(c) => self.t().credentials.push(CredentialEntry {
                seq: fact.seq,
                call: fact.call.clone(),
                need: c.need.clone(),
                mode: c.mode,
                outcome: "refused".into(),
                fingerprint: None,
                reason: Some(c.reason.clone()),
            }),
            FactKind::ArtifactPut(a) => self.t().artifacts.push(artifact(fact, "put", &a.meta)),
            FactKind::ArtifactGet(a) => {
                let entry = match &a.meta {
                    Some(meta) => artifact(fact, "get", meta),
                    None => ArtifactEntry {
                        seq: fact.seq,
                        call: fact.call.clone(),
                        op: "get (missing)".into(),
                        id: Some(a.id.clone()),
                        digest: None,
                        size: None,
                    },
                };
                self.t().artifacts.push(entry);
            }
            FactKind::ArtifactRefused(a) => self.t().artifacts.push(ArtifactEntry {
                seq: fact.seq,
                call: fact.call.clone(),
                op: "refused".into(),
                id: a.id.clone(),
                digest: None,
                size: None,
            }),
            FactKind::TeardownRegistered(r) => self.teardown_registered(fact, r),
            FactKind::TeardownRan(r) => self.teardown_ran(fact, r),
            FactKind::CancelRequested(_) => {
                if let (true, Some(call_id)) = (ended, &fact.call) {
                    let call_id = call_id.clone();
                    self.t().anomalies.push(Anomaly::CancelAfterEnd {
                        call_id,
                        seq: fact.seq,
                    });
                }
            }
            FactKind::CallEnded(e) => self.call_ended(fact, e, call_idx),
            FactKind::RunEnded(e) => self.t().ended = Some((e.status, fact.offset)),
            _ => {}
        }
    }

    /// A seq past the next expected one: the seqs between are a gap.
    fn note_gap(&mut self, seq: u64) {
        if seq > self.next_seq {
            let (first, last) = (self.next_seq, seq - 1);
            let t = self.t();
            match t.anomalies.last_mut() {
                // A gap of unknown extent just reported (`push_gap` with no
                // last seq): this fact tells where it ends. One gap, not two.
                Some(Anomaly::Gap(Gap {
                    first: f,
                    last: l @ None,
                    ..
                })) if *f == first => *l = Some(last),
                _ => t.anomalies.push(Anomaly::Gap(Gap {
                    first,
                    last: Some(last),
                    detail: "the seq numbers skip".into(),
                })),
            }
        }
    }

    /// A call starts: its node, under its parent; the first fact of a call
    /// outside any run heads the stream.
    fn call_started(&mut self, fact: &Fact, c: &CallStarted) {
        if let (Some(o), 0) = (&c.outside_run, fact.seq) {
            self.t().run = Some(RunHeader {
                run_id: o.key.clone(),
                outside_run: Some(c.call_id.clone()),
                started_at: fact.at,
                session_id: o.session_id.clone(),
                identity: o.identity.clone(),
                producer: o.producer.clone(),
                labels: o.labels.clone(),
                teardown_scopes: o.teardown_scopes.clone(),
            });
        }
        let parent_idx = c
            .parent_call
            .as_deref()
            .and_then(|p| self.index.get(p).copied());
        let depth = parent_idx
            .map(|p| self.t.as_ref().map_or(0, |t| t.calls[p].depth) + 1)
            .unwrap_or(0);
        let t = self.t();
        let idx = t.calls.len();
        t.calls.push(CallNode {
            call_id: c.call_id.clone(),
            tool: c.tool_name.clone(),
            parent: c.parent_call.clone(),
            children: Vec::new(),
            started_seq: fact.seq,
            started_offset: fact.offset,
            ended_seq: None,
            ended_offset: None,
            duration_ns: None,
            status: None,
            error: None,
            facts: 1,
            progress: 0,
            last_progress: None,
            depth,
        });
        if let Some(p) = parent_idx {
            t.calls[p].children.push(c.call_id.clone());
        }
        if c.tool_name == UNMATCHED_TOOL && c.protocol.as_deref() == Some("mcp") {
            t.anomalies.push(Anomaly::Unmatched {
                call_id: c.call_id.clone(),
                from: c.args["from"].as_str().unwrap_or("peer").to_owned(),
                not_json: c.args["message"].is_string(),
                seq: fact.seq,
            });
        }
        self.index.insert(c.call_id.clone(), idx);
    }

    /// A progress report of call `i`, its `count` as the `Sequencer` has it.
    fn progress(&mut self, fact: &Fact, p: &Progress, i: usize, count: Option<u64>, ended: bool) {
        self.t();
        // The timeline and the templates, borrowed apart.
        let t = self.t.as_mut().expect("made just above");
        let node = &mut t.calls[i];
        // The writer's count is the authority (it numbered
        // the report; reports lost in a gap were counted
        // there): so the fact line, which prints the stored
        // count, and the summary agree. A report stored
        // without one (count 0) is numbered by the core's
        // `Sequencer`, as the writer would have.
        node.progress = count.unwrap_or(p.count);
        node.last_progress = Some(self.templates.line(&node.tool, &p.payload, node.progress));
        if let Some(last) = self.unrendered.get_mut(i) {
            last.pending = false;
        }
        if ended {
            self.progress_after_end(i, fact.seq);
        }
    }

    /// A report of call `i` after its end.
    fn progress_after_end(&mut self, i: usize, seq: u64) {
        let t = self.t();
        let call_id = t.calls[i].call_id.clone();
        t.anomalies.push(Anomaly::ProgressAfterEnd { call_id, seq });
    }

    /// Renders the last report of each call read as a view.
    fn render_unrendered(&mut self) {
        let Some(t) = self.t.as_mut() else {
            return;
        };
        for (node, last) in t.calls.iter_mut().zip(&mut self.unrendered) {
            if !std::mem::take(&mut last.pending) {
                continue;
            }
            // The view was read from these bytes only once they were
            // checked to decode as this report: they do.
            if let Ok(Fact {
                kind: FactKind::Progress(p),
                ..
            }) = decode_fact(&last.encoded)
            {
                node.last_progress =
                    Some(self.templates.line(&node.tool, &p.payload, last.progress));
            }
        }
    }

    /// A cleanup registered: a ledger entry, or a repeat of one.
    fn teardown_registered(&mut self, fact: &Fact, r: &TeardownRegistered) {
        let key = (r.scope, r.key_hash.clone());
        match self.teardown_index.get(&key) {
            Some(&i) => self.t().teardowns[i].repeats += 1,
            None => {
                let t = self.t();
                t.teardowns.push(TeardownEntry {
                    scope: r.scope,
                    key_hash: r.key_hash.clone(),
                    call: fact.call.clone(),
                    registered_seq: fact.seq,
                    repeats: 0,
                    ran_seq: None,
                    outcome: None,
                });
                let i = t.teardowns.len() - 1;
                self.teardown_index.insert(key, i);
            }
        }
    }

    /// A cleanup ran: its ledger entry, and an anomaly when it failed.
    fn teardown_ran(&mut self, fact: &Fact, r: &TeardownRan) {
        if let Some(&i) = self.teardown_index.get(&(r.scope, r.key_hash.clone())) {
            let entry = &mut self.t().teardowns[i];
            entry.ran_seq = Some(fact.seq);
            entry.outcome = Some(r.outcome.clone());
        }
        let reason = match &r.outcome {
            TeardownOutcome::Ok => None,
            TeardownOutcome::Error { message } => Some(message.clone()),
            TeardownOutcome::TimedOut => Some("timed out".to_owned()),
        };
        if let Some(reason) = reason {
            self.t().anomalies.push(Anomaly::TeardownFailed {
                scope: r.scope,
                key_hash: r.key_hash.clone(),
                seq: fact.seq,
                reason,
            });
        }
    }

    /// A call ends: its node; the end of a call outside any run is its
    /// stream's end.
    fn call_ended(&mut self, fact: &Fact, e: &CallEnded, call_idx: Option<usize>) {
        if let Some(i) = call_idx {
            let node = &mut self.t().calls[i];
            node.ended_seq = Some(fact.seq);
            node.ended_offset = Some(fact.offset);
            node.duration_ns = Some(e.duration_ns);
            node.status = Some(e.status());
            if let CallOutcome::Error { error, .. } = &e.outcome {
                node.error = Some(error.clone());
            }
        }
        // The end of a call outside any run is its stream's end.
        let t = self.t();
        let root = t.run.as_ref().and_then(|r| r.outside_run.as_deref());
        if root.is_some() && root == fact.call.as_deref() && t.ended.is_none() {
            t.ended = Some((
                match e.outcome {
                    CallOutcome::Ok { .. } => RunStatus::Completed,
                    CallOutcome::Error { .. } => RunStatus::Failed,
                    CallOutcome::Aborted { .. } => RunStatus::Cancelled,
                },
                fact.offset,
            ));
        }
    }

    /// The timeline so far, with end-of-stream anomalies (unended calls,
    /// cleanups that never ran, an unended run), none of them while the
    /// run is live ([`TimelineBuilder::for_record`]).
    pub fn finish(mut self) -> Timeline {
        self.render_unrendered();
        self.t();
        let Some(mut t) = self.t.take() else {
            unreachable!("t() initialised the timeline")
        };
        // A live run that has not ended: its open calls are still running.
        let live = self.live && t.ended.is_none();
        for c in &t.calls {
            if c.ended_seq.is_none() && !live {
                t.anomalies.push(Anomaly::UnendedCall {
                    call_id: c.call_id.clone(),
                    seq: c.started_seq,
                });
            }
        }
        for d in &t.teardowns {
            if d.ran_seq.is_none() && !live {
                t.anomalies.push(Anomaly::TeardownNeverRan {
                    scope: d.scope,
                    key_hash: d.key_hash.clone(),
                    seq: d.registered_seq,
                });
            }
        }
        if t.ended.is_none() && !live {
            t.anomalies.push(Anomaly::UnendedRun);
        }
        t
    }
}

fn artifact(fact: &Fact, op: &str, meta: &ArtifactMeta) -> ArtifactEntry {
    ArtifactEntry {
        seq: fact.seq,
        call: fact.call.clone(),
        op: op.into(),
        id: Some(meta.id.clone()),
        digest: Some(meta.digest.clone()),
        size: Some(meta.size),
    }
}

/// The sink of a stream read as views: only the timeline.
impl ViewSink for TimelineBuilder {
    fn view(&mut self, fact: &FactView<'_>) {
        self.push_view(fact);
    }

    fn gap(&mut self, gap: &Gap) {
        self.push_gap(gap);
    }
}
