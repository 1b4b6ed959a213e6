//! sled's key layout. Only this module knows it: every key, prefix, range
//! bound and cursor of the archive is built here (the root package's tidy
//! rule `tests/it/tidy/key_layout.rs` fails when another file builds one),
//! so that the layout can change in
//! one place and a second storage backend has one page to read.
//!
//! | tree         | key                                             | value                  |
//! |--------------|-------------------------------------------------|------------------------|
//! | `meta`       | `format` (`key`: older reels, removed on open)  | u32 BE                 |
//! | `run_ids`    | run id (UTF-8)                                  | ordinal u64 BE         |
//! | `runs`       | ordinal u64 BE                                  | stored run record      |
//! | `events`     | ordinal u64 BE ++ first seq u64 BE              | block (see `block`)    |
//! | `artifacts`  | sha-256 digest (32 bytes)                       | the bytes              |
//! | `by_time`    | started u64 BE ++ ordinal                       | empty                  |
//! | `by_tenant`  | len u16 BE ++ tenant ++ started ++ ordinal      | empty                  |
//! | `by_tool`    | len u16 BE ++ tool ++ started ++ ordinal        | empty                  |
//! | `by_status`  | state u8 ++ started ++ ordinal                  | empty                  |
//! | `salvaged`   | ordinal u64 BE                                  | seqs salvage lost      |
//! | `pruned`     | ordinal u64 BE                                  | tombstone of a run     |
//! | `summaries`  | ordinal u64 BE                                  | stored run summary     |
//!
//! `started` is the run's start time (i64 unix nanos) with its sign bit
//! flipped, so that byte order is time order. A listing cursor is the hex
//! of an index key's `started ++ ordinal` tail.

use std::ops::{Range, RangeInclusive};

use reel_core::run::{RunRecord, RunState};

pub(crate) const T_META: &str = "meta";
pub(crate) const T_RUN_IDS: &str = "run_ids";
pub(crate) const T_RUNS: &str = "runs";
pub(crate) const T_EVENTS: &str = "events";
pub(crate) const T_ARTIFACTS: &str = "artifacts";
pub(crate) const T_ARTIFACT_FILES: &str = "artifact_files";
pub(crate) const T_BY_TIME: &str = "by_time";
pub(crate) const T_BY_TENANT: &str = "by_tenant";
pub(crate) const T_BY_TOOL: &str = "by_tool";
pub(crate) const T_BY_STATUS: &str = "by_status";
/// Runs `reel salvage` recovered with facts lost: which seqs (see `salvage`).
pub(crate) const T_SALVAGED: &str = "salvaged";
/// Tombstones of pruned runs (see `prune`).
pub(crate) const T_PRUNED: &str = "pruned";
/// Summaries of ended runs, under their run key (see `summary`; format 6).
pub(crate) const T_SUMMARIES: &str = "summaries";

pub(crate) const META_FORMAT: &[u8] = b"format";
/// Where older reels kept the fingerprint key; removed on open (the key
/// now lives outside the archive).
pub(crate) const META_KEY: &[u8] = b"key";
/// `meta` key of the control record's epoch and run count as of the last
/// flush (see `control`).
pub(crate) const META_CONTROL: &[u8] = b"control";

/// The value of [`META_CONTROL`]: epoch, runs and facts, u64 BE each.
pub(crate) fn control_value(epoch: u64, runs: u64, facts: u64) -> [u8; 24] {
    let mut v = [0; 24];
    v[..8].copy_from_slice(&epoch.to_be_bytes());
    v[8..16].copy_from_slice(&runs.to_be_bytes());
    v[16..].copy_from_slice(&facts.to_be_bytes());
    v
}

/// Reads [`control_value`]; `None` when damaged.
pub(crate) fn control_from(bytes: &[u8]) -> Option<(u64, u64, u64)> {
    let bytes: &[u8; 24] = bytes.try_into().ok()?;
    Some((
        u64::from_be_bytes(bytes[..8].try_into().ok()?),
        u64::from_be_bytes(bytes[8..16].try_into().ok()?),
        u64::from_be_bytes(bytes[16..].try_into().ok()?),
    ))
}

/// The value of a `salvaged` entry: version 1, then the lost seqs as
/// (first, last) pairs of u64 BE.
pub(crate) fn lost_value(lost: &[(u64, u64)]) -> Vec<u8> {
    let mut out = vec![1u8];
    for (first, last) in lost {
        out.extend_from_slice(&first.to_be_bytes());
        out.extend_from_slice(&last.to_be_bytes());
    }
    out
}

/// Reads a `salvaged` entry; empty when it is damaged.
pub(crate) fn lost_from(bytes: &[u8]) -> Vec<(u64, u64)> {
    match bytes.split_first() {
        Some((1, rest)) => rest
            .chunks_exact(16)
            .filter_map(|c| Some((u64_from(&c[..8])?, u64_from(&c[8..])?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The value of a `pruned` entry (a tombstone): version 1, pending flag
/// u8, pruned at i64 BE, started at i64 BE, run id (UTF-8).
pub(crate) fn tombstone_value(
    pending: bool,
    pruned_at: i64,
    started_at: i64,
    run_id: &str,
) -> Vec<u8> {
    let mut out = vec![1u8, u8::from(pending)];
    out.extend_from_slice(&pruned_at.to_be_bytes());
    out.extend_from_slice(&started_at.to_be_bytes());
    out.extend_from_slice(run_id.as_bytes());
    out
}

/// Reads a tombstone: (pending, pruned at, started at, run id); `None`
/// when it is damaged.
pub(crate) fn tombstone_from(bytes: &[u8]) -> Option<(bool, i64, i64, String)> {
    if bytes.len() < 18 || bytes[0] != 1 {
        return None;
    }
    Some((
        bytes[1] != 0,
        u64_from(&bytes[2..10])? as i64,
        u64_from(&bytes[10..18])? as i64,
        String::from_utf8_lossy(&bytes[18..]).into_owned(),
    ))
}

/// The stored value of the `format` marker.
pub(crate) fn format_value(version: u32) -> [u8; 4] {
    version.to_be_bytes()
}

/// Reads the `format` marker; `None` when it is damaged.
pub(crate) fn format_from(bytes: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(bytes).ok().map(u32::from_be_bytes)
}

fn time_bytes(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

fn time_from(bytes: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

fn u64_from(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// A run's key in `runs`, and its value in `run_ids`.
pub(crate) fn run_key(ordinal: u64) -> [u8; 8] {
    ordinal.to_be_bytes()
}

/// One past the highest ordinal `runs` or `events` holds (0 when both
/// are empty): the least ordinal a new run may take.
pub(crate) fn next_ordinal(trees: &crate::Trees) -> sled::Result<u64> {
    let of_run = trees.runs.last()?.and_then(|(k, _)| ordinal_from(&k));
    let of_block = trees
        .events
        .last()?
        .and_then(|(k, _)| split_event_key(&k))
        .map(|(ordinal, _)| ordinal);
    Ok(of_run.max(of_block).map_or(0, |o| o.saturating_add(1)))
}

/// The ordinal a `runs` key or a `run_ids` value holds; `None` if damaged.
pub(crate) fn ordinal_from(bytes: &[u8]) -> Option<u64> {
    (bytes.len() == 8).then(|| u64_from(bytes)).flatten()
}

/// The `runs` (and `summaries`) keys of ordinals `low..=high`.
pub(crate) fn runs_range(low: u64, high: u64) -> RangeInclusive<[u8; 8]> {
    run_key(low)..=run_key(high)
}

/// The prefix of every `events` key of a run.
pub(crate) fn events_prefix(ordinal: u64) -> [u8; 8] {
    ordinal.to_be_bytes()
}

/// The `events` key of the block of a run whose first seq is `seq`.
pub(crate) fn event_key(ordinal: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&ordinal.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The `events` keys of a run's blocks whose first seq is in `from..=upto`.
pub(crate) fn events_range(ordinal: u64, from: u64, upto: u64) -> RangeInclusive<[u8; 16]> {
    event_key(ordinal, from)..=event_key(ordinal, upto)
}

/// Splits an `events` key into (ordinal, first seq).
pub(crate) fn split_event_key(key: &[u8]) -> Option<(u64, u64)> {
    if key.len() != 16 {
        return None;
    }
    Some((u64_from(&key[..8])?, u64_from(&key[8..])?))
}

fn state_byte(s: RunState) -> u8 {
    match s {
        RunState::Running => 0,
        RunState::Completed => 1,
        RunState::Failed => 2,
        RunState::Cancelled => 3,
        RunState::Incomplete => 4,
    }
}

/// The prefix of every `by_status` entry of runs in state `s`.
pub(crate) fn status_prefix(s: RunState) -> [u8; 1] {
    [state_byte(s)]
}

/// A prefix for the named index entries of one string (tenant or tool).
fn name_prefix(name: &str) -> Vec<u8> {
    let len = name.len().min(u16::MAX as usize);
    let mut k = Vec::with_capacity(2 + len + 16);
    k.extend_from_slice(&(len as u16).to_be_bytes());
    k.extend_from_slice(&name.as_bytes()[..len]);
    k
}

/// `prefix ++ started ++ ordinal`.
fn index_key(prefix: &[u8], started: i64, ordinal: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 16);
    k.extend_from_slice(prefix);
    k.extend_from_slice(&time_bytes(started));
    k.extend_from_slice(&ordinal.to_be_bytes());
    k
}

/// Splits the `started ++ ordinal` tail of an index key.
pub(crate) fn split_index_tail(key: &[u8]) -> Option<(i64, u64)> {
    if key.len() < 16 {
        return None;
    }
    let tail = &key[key.len() - 16..];
    Some((time_from(&tail[..8]), u64_from(&tail[8..])?))
}

/// Every index entry a run's record implies, one key per index tree. The
/// one statement of a run's entries: creating a run, recording a status
/// change or a new tool, recovery and `verify` all derive theirs here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexEntries {
    /// `by_time`.
    pub time: Vec<u8>,
    /// `by_tenant`, when the run's identity names a tenant.
    pub tenant: Option<Vec<u8>>,
    /// `by_tool`, one per tool the run called.
    pub tools: Vec<Vec<u8>>,
    /// `by_status`.
    pub status: Vec<u8>,
}

/// The index entries of the run `ordinal` as `record` describes it.
pub(crate) fn index_entries(ordinal: u64, record: &RunRecord) -> IndexEntries {
    let started = record.started_at;
    IndexEntries {
        time: index_key(&[], started, ordinal),
        tenant: record
            .tenant()
            .map(|tenant| index_key(&name_prefix(tenant), started, ordinal)),
        tools: record
            .tools
            .iter()
            .map(|tool| index_key(&name_prefix(tool), started, ordinal))
            .collect(),
        status: index_key(&status_prefix(record.state), started, ordinal),
    }
}

/// Which index a listing scans, with its key prefix.
pub(crate) enum Listing<'a> {
    /// Runs of one tenant.
    Tenant(&'a str),
    /// Runs that called one tool.
    Tool(&'a str),
    /// Runs in one state.
    Status(RunState),
    /// Every run, by start time.
    Time,
}

impl Listing<'_> {
    fn prefix(&self) -> Vec<u8> {
        match self {
            Listing::Tenant(name) | Listing::Tool(name) => name_prefix(name),
            Listing::Status(s) => status_prefix(*s).to_vec(),
            Listing::Time => Vec::new(),
        }
    }

    /// The keys of runs started in `since..until` (unbounded where
    /// `None`), and before `cursor` when one is given; `None` when that is
    /// empty.
    pub(crate) fn range(
        &self,
        since: Option<i64>,
        until: Option<i64>,
        cursor: Option<&ListCursor>,
    ) -> Option<Range<Vec<u8>>> {
        let prefix = self.prefix();
        let mut lo = prefix.clone();
        lo.extend_from_slice(&time_bytes(since.unwrap_or(i64::MIN)));
        let mut hi = prefix.clone();
        match until {
            Some(until) => hi.extend_from_slice(&time_bytes(until)),
            // Past every `started ++ ordinal` tail of this prefix.
            None => hi.extend_from_slice(&[0xff; 17]),
        }
        if let Some(ListCursor(tail)) = cursor {
            let mut at = prefix;
            at.extend_from_slice(tail);
            if at < hi {
                hi = at;
            }
        }
        (lo < hi).then_some(lo..hi)
    }
}

/// A decoded listing cursor: the `started ++ ordinal` tail of the last run
/// of a page.
pub(crate) struct ListCursor([u8; 16]);

impl ListCursor {
    /// The cursor after the run `ordinal` started at `started`, as text.
    pub(crate) fn encode(started: i64, ordinal: u64) -> String {
        format!(
            "{}{}",
            hex::encode(time_bytes(started)),
            hex::encode(ordinal.to_be_bytes())
        )
    }

    /// Reads a cursor handed out by [`ListCursor::encode`].
    pub(crate) fn decode(text: &str) -> Option<ListCursor> {
        let mut out = [0u8; 16];
        hex::decode_to_slice(text, &mut out).ok()?;
        Some(ListCursor(out))
    }
}

/// The value of an `artifact_files` index entry: the file's size.
pub(crate) fn artifact_file_value(size: u64) -> [u8; 8] {
    size.to_be_bytes()
}

/// The size an `artifact_files` index entry holds; `None` for a damaged one.
pub(crate) fn artifact_file_size(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_is_time_then_ordinal_order() {
        let mut r = RunRecord {
            run_id: "r".into(),
            outside_run: None,
            session_id: None,
            identity: None,
            labels: Default::default(),
            state: RunState::Running,
            started_at: -5,
            ended_at: None,
            facts: 0,
            calls: 0,
            ended_calls: 0,
            failed_credentials: 0,
            tools: Default::default(),
        };
        let a = index_entries(9, &r).time;
        r.started_at = 3;
        let b = index_entries(1, &r).time;
        let c = index_entries(2, &r).time;
        assert!(a < b && b < c);
        assert_eq!(split_index_tail(&c), Some((3, 2)));
        assert_eq!(split_event_key(&event_key(7, 11)), Some((7, 11)));
        assert_eq!(ordinal_from(&run_key(42)), Some(42));
        let cursor = ListCursor::decode(&ListCursor::encode(3, 2)).expect("decodes");
        let range = Listing::Time
            .range(None, None, Some(&cursor))
            .expect("non-empty");
        assert!(range.contains(&b) && !range.contains(&c));
    }
}
