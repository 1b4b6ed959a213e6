//! `verify`: checks every block, every chain link, every seq and every index.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::record::decode_record;
use crate::{block, keys, Archive, Result};
use reel_core::fact::Fact;
use reel_core::rules::StreamRules;
use reel_core::run::RunRecord;

/// One thing wrong with the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The run concerned, when one is.
    pub run_id: Option<String>,
    /// The seq range affected, when known: (first, last).
    pub seqs: Option<(u64, Option<u64>)>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.run_id {
            Some(run) => write!(f, "run {run}")?,
            None => f.write_str("archive")?,
        }
        match self.seqs {
            Some((a, Some(b))) => write!(f, ", seq {a}..={b}")?,
            Some((a, None)) => write!(f, ", seq {a}..")?,
            None => {}
        }
        write!(f, ": {}", self.what)
    }
}

/// What `verify` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Runs checked.
    pub runs: u64,
    /// Blocks checked.
    pub blocks: u64,
    /// Facts decoded.
    pub facts: u64,
    /// Artifacts checked.
    pub artifacts: u64,
    /// Everything wrong; empty when the archive is sound.
    pub problems: Vec<Problem>,
    /// Facts the archive knows it lost, which are not damage: the seqs
    /// `reel salvage` could not recover, recorded beside the run it
    /// recovered.
    #[serde(default)]
    pub known_losses: Vec<Problem>,
    /// Runs `reel prune` deleted (their tombstones), which are not damage.
    #[serde(default)]
    pub pruned: u64,
    /// After a crash, the journal's tail written past the last
    /// acknowledged flush and where it was cut ([`Archive::torn_tail`]):
    /// not damage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torn_tail: Option<String>,
}

impl VerifyReport {
    /// True when nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Archive {
    /// Checks the whole archive: every block decodes and matches its
    /// checksum, each run's hash chain is unbroken, seqs are gapless from 0,
    /// each run's facts keep the stream rules that `append` and import
    /// apply ([`reel_core::rules`]), run records agree with their facts,
    /// indexes agree with run records, and artifacts match their digests.
    /// Never stops at the first problem.
    pub fn verify(&self) -> Result<VerifyReport> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let mut report = VerifyReport {
            torn_tail: self.torn_tail().map(str::to_owned),
            ..VerifyReport::default()
        };
        let mut records: HashMap<u64, RunRecord> = HashMap::new();

        for item in t.runs.iter() {
            let (key, value) = item.map_err(s)?;
            report.runs += 1;
            let Some(ordinal) = keys::ordinal_from(&key) else {
                report
                    .problems
                    .push(problem(None, None, "a run record has a damaged key"));
                continue;
            };
            let record = match decode_record(&value) {
                Ok(r) => r,
                Err(e) => {
                    report
                        .problems
                        .push(problem(Some(format!("#{ordinal}")), None, &e));
                    continue;
                }
            };
            match t.run_ids.get(&record.run_id).map_err(s)? {
                Some(o) if keys::ordinal_from(&o) == Some(ordinal) => {}
                _ => report.problems.push(problem(
                    Some(record.run_id.clone()),
                    None,
                    "the run id index does not point at this run",
                )),
            }
            self.verify_run(ordinal, &record, &mut report)?;
            records.insert(ordinal, record);
        }

        for item in t.run_ids.iter() {
            let (key, value) = item.map_err(s)?;
            let known = keys::ordinal_from(&value).is_some_and(|o| records.contains_key(&o));
            if !known {
                report.problems.push(problem(
                    Some(String::from_utf8_lossy(&key).into_owned()),
                    None,
                    "the run id index points at no run record",
                ));
            }
        }

        // Orphan blocks: events of an ordinal with no run record.
        let mut orphans = BTreeSet::new();
        for key in t.events.iter().keys() {
            let key = key.map_err(s)?;
            if let Some((ord, _)) = keys::split_event_key(&key) {
                if !records.contains_key(&ord) && !orphans.contains(&ord) {
                    orphans.insert(ord);
                    report.problems.push(problem(
                        Some(format!("#{ord}")),
                        None,
                        "blocks of facts belong to no run record",
                    ));
                }
            }
        }

        self.verify_indexes(&records, &mut report)?;
        report.pruned = self.pruned_runs()?;

        // What the control record says was durable (see `control`): fewer
        // facts or runs than it counts, in a store where nothing else is
        // wrong, is a loss no block or record shows (damage elsewhere is
        // already reported, and may account for it).
        let whole_so_far = report.problems.is_empty();
        if let (true, Ok(crate::control::Found::Record(_, c))) =
            (whole_so_far, crate::control::read(self.dir()))
        {
            let accounted = report.facts
                + report
                    .known_losses
                    .iter()
                    .filter_map(|p| p.seqs)
                    .map(|(a, b)| b.map_or(1, |b| (b + 1).saturating_sub(a)))
                    .sum::<u64>();
            if accounted < c.facts {
                report.problems.push(problem(
                    None,
                    None,
                    &format!(
                        "the store holds {} facts, but its control record counts {} acknowledged durable: {} lost; recover what is intact with `reel salvage`",
                        report.facts,
                        c.facts,
                        c.facts - accounted
                    ),
                ));
            }
            if report.runs + report.pruned < c.runs {
                report.problems.push(problem(
                    None,
                    None,
                    &format!(
                        "the store holds {} runs ({} pruned), but {} were created: {} lost; recover what is intact with `reel salvage`",
                        report.runs,
                        report.pruned,
                        c.runs,
                        c.runs - report.runs - report.pruned
                    ),
                ));
            }
        }

        self.verify_artifacts(&mut report)?;
        Ok(report)
    }

    /// Every artifact: those an older reel kept in sled match their
    /// digest; every indexed file (see `files`) is there, of its size,
    /// holding the bytes it is named by.
    fn verify_artifacts(&self, report: &mut VerifyReport) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        for item in t.artifacts.iter() {
            let (key, value) = item.map_err(s)?;
            report.artifacts += 1;
            let digest: [u8; 32] = Sha256::digest(&value).into();
            if digest.as_slice() != key.as_ref() {
                report.problems.push(problem(
                    None,
                    None,
                    &format!(
                        "artifact sha256:{} does not match its bytes",
                        hex::encode(&key)
                    ),
                ));
            }
        }
        // Artifact files (see `files`): each indexed one is there, of its
        // size, holding the bytes it is named by.
        for item in t.artifact_files.iter() {
            let (key, value) = item.map_err(s)?;
            report.artifacts += 1;
            let shown = format!("artifact sha256:{}", hex::encode(&key));
            let Ok(digest) = <[u8; 32]>::try_from(&key[..]) else {
                report.problems.push(problem(
                    None,
                    None,
                    &format!("{shown}: a damaged index key"),
                ));
                continue;
            };
            let size = crate::keys::artifact_file_size(&value);
            let found = match self.inner.files.read(&digest) {
                Ok(Ok(Some(bytes))) if Some(bytes.len() as u64) == size => continue,
                Ok(Ok(Some(bytes))) => format!(
                    "its file holds {} bytes, the index says {}",
                    bytes.len(),
                    size.map_or("nothing readable".into(), |n| n.to_string())
                ),
                Ok(Ok(None)) => format!(
                    "its file {} is missing",
                    self.inner.files.path(&digest).display()
                ),
                Ok(Err(detail)) => detail,
                Err(e) => format!(
                    "its file {} cannot be read: {e}",
                    self.inner.files.path(&digest).display()
                ),
            };
            report
                .problems
                .push(problem(None, None, &format!("{shown}: {found}")));
        }
        Ok(())
    }

    fn verify_run(
        &self,
        ordinal: u64,
        record: &RunRecord,
        report: &mut VerifyReport,
    ) -> Result<()> {
        let run = Some(record.run_id.clone());
        let mut expect_seq = 0u64;
        // What the next block's previous digest may be: the previous block's
        // stored digest or the digest of its bytes (either may be the one a
        // single damaged byte hit); `None` when its header is unreadable.
        let mut prev_digests: Option<[[u8; 32]; 2]> = Some([[0u8; 32]; 2]);
        let mut derived: Option<RunRecord> = None;
        // The stream rules append and import apply, over the facts that
        // decode; lost facts (reported per block) are skipped over.
        let mut rules = StreamRules::of(record);
        // Every block so far decoded and followed the previous one without a
        // gap: only then must the facts agree with the record's calls and
        // tools.
        let mut complete = true;
        // The last block decoded, so `expect_seq` is the number of facts.
        let mut tail_known = true;
        let mut decoded = 0u64;
        // Seqs salvage recorded as lost: a gap there is known, not damage.
        let known_lost = self.salvage_lost(ordinal)?;
        let blocks: Vec<_> = self
            .trees()
            .events
            .scan_prefix(keys::events_prefix(ordinal))
            .collect::<Result<_, _>>()
            .map_err(|e| self.storage(e))?;
        for (i, (key, value)) in blocks.iter().enumerate() {
            report.blocks += 1;
            let Some((_, first)) = keys::split_event_key(key) else {
                report
                    .problems
                    .push(problem(run.clone(), None, "a block has a damaged key"));
                continue;
            };
            let next_first = blocks
                .get(i + 1)
                .and_then(|(k, _)| keys::split_event_key(k))
                .map(|(_, s)| s);
            let last_guess = next_first
                .map(|n| n.saturating_sub(1))
                .or_else(|| record.facts.checked_sub(1).filter(|&l| l >= first));
            let known = first > expect_seq
                && known_lost
                    .iter()
                    .any(|l| l.first == expect_seq && l.last + 1 == first);
            if known {
                report.known_losses.push(problem(
                    run.clone(),
                    Some((expect_seq, Some(first - 1))),
                    "lost to damage before `reel salvage` recovered this run",
                ));
            } else if first != expect_seq {
                complete = false;
                report.problems.push(problem(
                    run.clone(),
                    Some((expect_seq.min(first), Some(expect_seq.max(first).saturating_sub(1)))),
                    &format!(
                        "seqs are not gapless: a block starts at {first} where {expect_seq} was expected (a block is missing or misplaced)"
                    ),
                ));
            }
            // The header's own digest, even if the payload is damaged, so a
            // single flipped byte does not also break the next link.
            let (header_prev, header_digest) = block::header_digests(value);
            if let (Some(p), Some(want), false) = (header_prev, prev_digests, known) {
                if !want.contains(&p) {
                    report.problems.push(problem(
                        run.clone(),
                        Some((first, last_guess)),
                        "the hash chain is broken: this block does not follow the run's previous block (history rewritten or a block lost)",
                    ));
                }
            }
            match block::open(value).and_then(|b| {
                let facts = block::decode_facts(&b, first)?;
                Ok((b.count, facts))
            }) {
                Ok((count, facts)) => {
                    report.facts += facts.len() as u64;
                    // A gap before this block is a lost or damaged block,
                    // already reported as such.
                    if rules.next_seq() != first {
                        rules.lost_until(first);
                    }
                    check_facts(&facts, &mut rules, &mut derived, &run, report);
                    expect_seq = first + count as u64;
                    decoded += 1;
                    tail_known = true;
                }
                Err(what) => {
                    report
                        .problems
                        .push(problem(run.clone(), Some((first, last_guess)), &what));
                    expect_seq = next_first.unwrap_or(first + 1).max(first + 1);
                    complete = false;
                    tail_known = false;
                }
            }
            // The digest of the stored bytes (compressed or not), as the
            // next block's link was computed from them.
            prev_digests = header_digest.map(|stored| [stored, block::digest_of(value)]);
        }
        if tail_known && expect_seq != record.facts && record.state.is_closed() {
            // Facts the record counts beyond the last block: lost blocks.
            let lost = (expect_seq < record.facts).then(|| (expect_seq, Some(record.facts - 1)));
            report.problems.push(problem(
                run.clone(),
                lost,
                &format!(
                    "the run record counts {} facts but the blocks hold {expect_seq}",
                    record.facts
                ),
            ));
        }
        // Facts lost at the end also leave the record's calls and tools
        // unchecked.
        let complete = complete && expect_seq >= record.facts;
        if let Some(d) = derived {
            if complete
                && record.state.is_closed()
                && (d.calls != record.calls
                    || d.ended_calls != record.ended_calls
                    || d.failed_credentials != record.failed_credentials
                    || d.tools != record.tools)
            {
                report.problems.push(problem(
                    run.clone(),
                    None,
                    "the run record's calls or tools disagree with its facts",
                ));
            }
        } else if record.facts > 0 && decoded == 0 {
            report.problems.push(problem(
                run,
                None,
                "the run record counts facts but no block decodes",
            ));
        }
        Ok(())
    }

    fn verify_indexes(
        &self,
        records: &HashMap<u64, RunRecord>,
        report: &mut VerifyReport,
    ) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        // What each index should hold, from the records.
        let mut want_time = BTreeSet::new();
        let mut want_tenant = BTreeSet::new();
        let mut want_tool = BTreeSet::new();
        let mut want_status = BTreeSet::new();
        for (&ord, r) in records {
            let entries = keys::index_entries(ord, r);
            want_time.insert(entries.time);
            want_tenant.extend(entries.tenant);
            want_tool.extend(entries.tools);
            want_status.insert(entries.status);
        }
        for (name, tree, want) in [
            ("start-time", &t.by_time, want_time),
            ("tenant", &t.by_tenant, want_tenant),
            ("tool", &t.by_tool, want_tool),
            ("status", &t.by_status, want_status),
        ] {
            let mut have = BTreeSet::new();
            for key in tree.iter().keys() {
                have.insert(key.map_err(s)?.to_vec());
            }
            for missing in want.difference(&have) {
                let ord = keys::split_index_tail(missing).map(|(_, o)| o);
                report.problems.push(problem(
                    ord.and_then(|o| records.get(&o)).map(|r| r.run_id.clone()),
                    None,
                    &format!("the {name} index lacks an entry for this run"),
                ));
            }
            for extra in have.difference(&want) {
                let ord = keys::split_index_tail(extra).map(|(_, o)| o);
                report.problems.push(problem(
                    ord.and_then(|o| records.get(&o))
                        .map(|r| r.run_id.clone())
                        .or_else(|| ord.map(|o| format!("#{o}"))),
                    None,
                    &format!("the {name} index has an entry that no run record agrees with"),
                ));
            }
        }
        Ok(())
    }
}

fn problem(run_id: Option<String>, seqs: Option<(u64, Option<u64>)>, what: &str) -> Problem {
    Problem {
        run_id,
        seqs,
        what: what.to_owned(),
    }
}

/// Checks a block's facts against the stream rules, reporting each
/// violation, and derives the run's record from them.
fn check_facts(
    facts: &[Fact],
    rules: &mut StreamRules,
    derived: &mut Option<RunRecord>,
    run: &Option<String>,
    report: &mut VerifyReport,
) {
    for fact in facts {
        if let Err(violation) = rules.check(fact) {
            report.problems.push(problem(
                run.clone(),
                Some((fact.seq, Some(fact.seq))),
                &violation.to_string(),
            ));
        }
        match derived {
            None => {
                *derived = RunRecord::from_first(fact).map(|mut r| {
                    r.observe(fact);
                    r
                })
            }
            Some(r) => {
                r.observe(fact);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::record::encode_record;
    use crate::{block, keys, Archive, ArchiveConfig};
    use reel_core::fact::{
        Fact, FactKind, Log, NewFact, Producer, RunEnded, RunStarted, RunStatus,
    };

    fn new(kind: FactKind) -> NewFact {
        NewFact {
            at: 1,
            offset: 1,
            call: None,
            kind,
        }
    }

    fn started() -> FactKind {
        FactKind::RunStarted(RunStarted {
            run_id: "r".into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "verify".into(),
                version: "0".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        })
    }

    fn log() -> FactKind {
        FactKind::Log(Log {
            level: reel_core::fact::Level::Info,
            logger: None,
            subflow: None,
            data: serde_json::json!("forged"),
            delivered: true,
            in_flight: Vec::new(),
        })
    }

    /// What verify says of run "r" (run.started, and run.ended if `ended`,
    /// as appended) with one more block holding `extra`, sealed onto its
    /// hash chain and counted by its record: damage only the stream rules
    /// can see.
    fn problems_with_forged_block(ended: bool, extra: FactKind) -> Vec<String> {
        let mut facts = vec![new(started())];
        if ended {
            facts.push(new(FactKind::RunEnded(RunEnded {
                status: RunStatus::Completed,
            })));
        }
        problems_with_forged(facts, new(extra))
    }

    /// [`problems_with_forged_block`] after the appended `facts` (the
    /// first a run.started of "r"), the forged fact given whole.
    fn problems_with_forged(facts: Vec<NewFact>, extra: NewFact) -> Vec<String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("open");
        let seq = facts.len() as u64;
        archive.append("r", facts).expect("append");
        let ordinal = archive.ordinal("r").expect("ordinal");
        let t = archive.trees();
        let (_, last) = t
            .events
            .scan_prefix(keys::events_prefix(ordinal))
            .last()
            .expect("a block")
            .expect("read");
        let fact: Fact = extra.with_seq(seq);
        let mut payload = Vec::new();
        block::push_fact(&mut payload, &fact).expect("encodes");
        let (value, _) = block::seal(1, &block::digest_of(&last), &payload);
        t.events
            .insert(keys::event_key(ordinal, seq), value)
            .expect("insert");
        let mut record = archive.run("r").expect("record");
        record.facts = seq + 1;
        t.runs
            .insert(keys::run_key(ordinal), encode_record(&record))
            .expect("insert");
        let report = archive.verify().expect("verify");
        report.problems.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn verify_reports_what_the_stream_rules_refuse() {
        assert_eq!(
            problems_with_forged_block(true, log()),
            ["run r, seq 2..=2: log at seq 2: a fact after run.ended (seq 1): run.ended must be the run's last fact"]
        );
        assert_eq!(
            problems_with_forged_block(false, started()),
            ["run r, seq 1..=1: run.started at seq 1: a second run.started inside the run: only a run's first fact may be run.started"]
        );
        assert_eq!(
            problems_with_forged_block(false, log()),
            Vec::<String>::new()
        );
    }

    fn call(id: &str) -> NewFact {
        NewFact {
            call: Some(id.into()),
            ..new(FactKind::CallStarted(reel_core::fact::CallStarted {
                call_id: id.into(),
                tool_name: "t".into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: None,
                mode: reel_core::fact::CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args: serde_json::json!({}),
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            }))
        }
    }

    #[test]
    fn verify_reports_a_call_id_started_twice_as_damage() {
        let problems = problems_with_forged(vec![new(started()), call("c1")], call("c1"));
        assert_eq!(
            problems.first().map(String::as_str),
            Some("run r, seq 2..=2: call.started at seq 2: a second call.started for call id \"c1\" (first started at seq 1): a call id is unique within its run; give each call its own id"),
            "{problems:?}"
        );
        assert_eq!(
            problems_with_forged(vec![new(started()), call("c1")], call("c2")),
            Vec::<String>::new()
        );
    }
}
