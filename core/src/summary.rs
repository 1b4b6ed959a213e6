//! A run's summary: what the overviews of many runs need from it (its
//! start, duration and state, and per tool the calls, errors, progress
//! reports and a mergeable histogram of call durations), derived from its
//! facts as [`RunRecord`] is, so that an archive can keep it beside the
//! record and an overview of many runs reads summaries, never facts.
//!
//! Summaries merge: counts add, and [`Histogram`]s add bucket by bucket,
//! so percentiles over any set of runs come from their summaries alone.
//! [`Overview`] (`summary/overview.rs`) is such a merge over a time
//! window, per tool and per time bucket.
//!
//! ```
//! use reel_core::summary::Histogram;
//! let mut h = Histogram::default();
//! for ms in 1..=100u64 {
//!     h.record(ms * 1_000_000);
//! }
//! let p50 = h.quantile(0.5).unwrap();
//! // Within the buckets' relative error (1/16) of the exact 50 ms.
//! assert!((47_000_000..=53_000_000).contains(&p50), "{p50}");
//! assert_eq!(h.count(), 100);
//! ```

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::fact::{CallOutcome, Fact, FactKind};
use crate::run::{RunRecord, RunState};

mod overview;
pub use overview::{Overview, OverviewQuery, ToolOverview};

/// Values below this are a bucket each.
const EXACT: u64 = 16;
/// Sub-buckets per power of two (3 bits: a relative error under 1/16 at
/// a bucket's middle).
const SUB_BITS: u32 = 3;

/// A log-linear histogram of durations (nanoseconds): values under 16
/// exactly, then 8 buckets per power of two. Sparse, and mergeable by
/// adding counts; the smallest and largest values are kept exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    /// (bucket, count), by bucket, counts above zero.
    #[serde(default)]
    buckets: Vec<(u16, u64)>,
    /// The smallest value recorded.
    #[serde(default)]
    min: u64,
    /// The largest value recorded.
    #[serde(default)]
    max: u64,
}

fn bucket_of(v: u64) -> u16 {
    if v < EXACT {
        return v as u16;
    }
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    (EXACT as u32 + (e - 4) * (1 << SUB_BITS) + sub as u32) as u16
}

/// The lowest and highest values of bucket `b`.
fn bounds_of(b: u16) -> (u64, u64) {
    let b = u64::from(b);
    if b < EXACT {
        return (b, b);
    }
    let e = (b - EXACT) / (1 << SUB_BITS) + 4;
    let sub = (b - EXACT) % (1 << SUB_BITS);
    let low = ((1 << SUB_BITS) + sub) << (e - u64::from(SUB_BITS));
    let width = 1u64 << (e - u64::from(SUB_BITS));
    (low, low.saturating_add(width - 1))
}

impl Histogram {
    /// Counts one value.
    pub fn record(&mut self, v: u64) {
        self.add(bucket_of(v), 1);
        if self.count() == 1 {
            (self.min, self.max) = (v, v);
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
    }

    fn add(&mut self, bucket: u16, n: u64) {
        match self.buckets.binary_search_by_key(&bucket, |(b, _)| *b) {
            Ok(i) => self.buckets[i].1 += n,
            Err(i) => self.buckets.insert(i, (bucket, n)),
        }
    }

    /// Adds `other`'s values to these.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count() == 0 {
            return;
        }
        let (min, max) = if self.count() == 0 {
            (other.min, other.max)
        } else {
            (self.min.min(other.min), self.max.max(other.max))
        };
        for &(b, n) in &other.buckets {
            self.add(b, n);
        }
        (self.min, self.max) = (min, max);
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|(_, n)| n).sum()
    }

    /// The value at quantile `q` (0 to 1): the middle of the bucket that
    /// holds it, within the smallest and largest values recorded; `None`
    /// when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for &(b, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                let (low, high) = bounds_of(b);
                let middle = low + (high - low) / 2;
                return Some(middle.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

/// One tool's figures in a run (or merged over runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// Calls started.
    pub calls: u64,
    /// Calls that ended with an error.
    #[serde(default)]
    pub errors: u64,
    /// Calls that were cancelled.
    #[serde(default)]
    pub aborted: u64,
    /// Progress reports recorded.
    #[serde(default)]
    pub progress: u64,
    /// The durations of the calls that ended.
    #[serde(default)]
    pub durations: Histogram,
}

impl ToolSummary {
    /// Adds `other`'s figures to these.
    pub fn merge(&mut self, other: &ToolSummary) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.aborted += other.aborted;
        self.progress += other.progress;
        self.durations.merge(&other.durations);
    }

    /// Errors per call started (0 without calls).
    pub fn error_rate(&self) -> f64 {
        ratio(self.errors, self.calls)
    }

    /// Progress reports per call started (0 without calls).
    pub fn progress_per_call(&self) -> f64 {
        ratio(self.progress, self.calls)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A run's summary (see the module's docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Wall-clock start, unix nanoseconds.
    pub started_at: i64,
    /// From start to end, once ended.
    #[serde(default)]
    pub duration_ns: Option<u64>,
    /// Where the run stood when summarized.
    pub state: RunState,
    /// The caller's tenant, when named.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Per tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolSummary>,
}

/// Builds a [`RunSummary`] one fact at a time, in seq order.
#[derive(Debug, Clone, Default)]
pub struct SummaryBuilder {
    /// The tool of each call started (by call id).
    calls: HashMap<String, String>,
    tools: BTreeMap<String, ToolSummary>,
}

impl SummaryBuilder {
    /// Takes one fact into account.
    pub fn observe(&mut self, fact: &Fact) {
        fn tool<'a>(this: &'a mut SummaryBuilder, fact: &Fact) -> Option<&'a mut ToolSummary> {
            let name = fact.call.as_ref().and_then(|c| this.calls.get(c))?;
            this.tools.get_mut(name)
        }
        match &fact.kind {
            FactKind::CallStarted(c) => {
                self.calls.insert(c.call_id.clone(), c.tool_name.clone());
                self.tools.entry(c.tool_name.clone()).or_default().calls += 1;
            }
            FactKind::CallEnded(e) => {
                if let Some(t) = tool(self, fact) {
                    match e.outcome {
                        CallOutcome::Ok { .. } => {}
                        CallOutcome::Error { .. } => t.errors += 1,
                        CallOutcome::Aborted { .. } => t.aborted += 1,
                    }
                    t.durations.record(e.duration_ns);
                }
            }
            FactKind::Progress(_) => {
                if let Some(t) = tool(self, fact) {
                    t.progress += 1;
                }
            }
            _ => {}
        }
    }

    /// The summary of the facts observed, for the run of `record`.
    pub fn finish(&self, record: &RunRecord) -> RunSummary {
        RunSummary {
            started_at: record.started_at,
            duration_ns: record.duration_ns(),
            state: record.state,
            tenant: record.tenant().map(Into::into),
            tools: self.tools.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values() {
        for v in (0..5000).chain([u64::MAX, u64::MAX / 3, 1 << 40, (1 << 40) - 1]) {
            let (low, high) = bounds_of(bucket_of(v));
            assert!(low <= v && v <= high, "{v}: {low}..={high}");
        }
        assert!(bucket_of(u64::MAX) < 500);
        for b in 0..bucket_of(u64::MAX) {
            assert_eq!(bounds_of(b).1 + 1, bounds_of(b + 1).0, "bucket {b}");
        }
    }

    #[test]
    fn merged_quantiles_are_those_of_all_values() {
        let (mut a, mut b, mut all) = Default::default();
        for v in 0..10_000u64 {
            let v = v * 997 % 10_007 * 1000;
            let h: &mut Histogram = if v % 3 == 0 { &mut a } else { &mut b };
            h.record(v);
            Histogram::record(&mut all, v);
        }
        a.merge(&b);
        assert_eq!(a, all);
        for q in [0.5, 0.95, 0.99] {
            let got = a.quantile(q).unwrap() as f64;
            let exact = q * 10_007_000.0;
            assert!((got - exact).abs() / exact < 0.07, "{q}: {got} vs {exact}");
        }
        assert_eq!(Histogram::default().quantile(0.5), None);
        let mut one = Histogram::default();
        one.record(123_456);
        assert_eq!(one.quantile(0.99), Some(123_456));
    }
}
