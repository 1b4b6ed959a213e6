//! sled's key layout. Only this module knows it.
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
//!
//! `started` is the run's start time (i64 unix nanos) with its sign bit
//! flipped, so that byte order is time order.

use reel::run::RunState;

pub(crate) const T_META: &str = "meta";
pub(crate) const T_RUN_IDS: &str = "run_ids";
pub(crate) const T_RUNS: &str = "runs";
pub(crate) const T_EVENTS: &str = "events";
pub(crate) const T_ARTIFACTS: &str = "artifacts";
pub(crate) const T_BY_TIME: &str = "by_time";
pub(crate) const T_BY_TENANT: &str = "by_tenant";
pub(crate) const T_BY_TOOL: &str = "by_tool";
pub(crate) const T_BY_STATUS: &str = "by_status";

pub(crate) const META_FORMAT: &[u8] = b"format";
/// Where older reels kept the fingerprint key; removed on open (the key
/// now lives outside the archive).
pub(crate) const META_KEY: &[u8] = b"key";

pub(crate) fn time_bytes(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

pub(crate) fn time_from(bytes: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

pub(crate) fn u64_from(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

pub(crate) fn event_key(ordinal: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&ordinal.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// Splits an `events` key into (ordinal, first seq).
pub(crate) fn split_event_key(key: &[u8]) -> Option<(u64, u64)> {
    if key.len() != 16 {
        return None;
    }
    Some((u64_from(&key[..8])?, u64_from(&key[8..])?))
}

pub(crate) fn state_byte(s: RunState) -> u8 {
    match s {
        RunState::Running => 0,
        RunState::Completed => 1,
        RunState::Failed => 2,
        RunState::Cancelled => 3,
        RunState::Incomplete => 4,
    }
}

/// A prefix for the named index entries of one string (tenant or tool).
pub(crate) fn name_prefix(name: &str) -> Vec<u8> {
    let len = name.len().min(u16::MAX as usize);
    let mut k = Vec::with_capacity(2 + len + 16);
    k.extend_from_slice(&(len as u16).to_be_bytes());
    k.extend_from_slice(&name.as_bytes()[..len]);
    k
}

/// `prefix ++ started ++ ordinal`.
pub(crate) fn index_key(prefix: &[u8], started: i64, ordinal: u64) -> Vec<u8> {
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
