//! Finding blocks and artifacts in sled's raw files, byte by byte: the
//! files, sled's varints, the block scan, the artifacts the facts name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::block;
use reel_core::codec::Digest;

use super::*;

/// Every regular file under `dir` (sled's `db`, `blobs/`, snapshots).
pub(super) fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                // Artifact files hold artifact bytes, never sled's: they
                // are read by their digest (see `files`), not scanned.
                if d == dir && entry.file_name() == crate::files::DIR {
                    continue;
                }
                todo.push(entry.path());
            } else if kind.is_file()
                && entry
                    .metadata()
                    .map(|m| m.len() <= MAX_FILE)
                    .unwrap_or(false)
            {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// The sled varint that ends right before `at`, as (value, its length):
/// each length sled's encoding would use for that value.
fn varints_before(bytes: &[u8], at: usize) -> impl Iterator<Item = u64> + '_ {
    (1..=5usize).filter_map(move |k| {
        let start = at.checked_sub(k)?;
        let b = &bytes[start..at];
        match (k, b[0]) {
            (1, 0..=240) => Some(u64::from(b[0])),
            (2, 241..=248) => Some(240 + 256 * (u64::from(b[0]) - 241) + u64::from(b[1])),
            (3, 249) => Some(2288 + 256 * u64::from(b[1]) + u64::from(b[2])),
            (4, 250) | (5, 251) => {
                let mut le = [0u8; 8];
                le[..k - 1].copy_from_slice(&b[1..]);
                Some(u64::from_le_bytes(le))
            }
            _ => None,
        }
    })
}

/// `n` as sled writes a length.
fn varint_bytes(n: u64) -> Vec<u8> {
    if n <= 240 {
        vec![n as u8]
    } else if n <= 2287 {
        vec![((n - 240) / 256 + 241) as u8, ((n - 240) % 256) as u8]
    } else if n <= 67823 {
        vec![249, ((n - 2288) / 256) as u8, ((n - 2288) % 256) as u8]
    } else {
        // 250 + k - 4: the value in k - 1 little-endian bytes.
        let le = n.to_le_bytes();
        let k = (1..=8)
            .find(|&k| k == 8 || n >> (8 * k) == 0)
            .unwrap_or(8)
            .max(3);
        let mut out = vec![(247 + k) as u8];
        out.extend_from_slice(&le[..k]);
        out
    }
}

/// The sled varint starting at `at`: (value, bytes it takes).
fn varint_at(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let b = bytes.get(at..)?;
    let first = *b.first()?;
    Some(match first {
        0..=240 => (u64::from(first), 1),
        241..=248 => (
            240 + 256 * (u64::from(first) - 241) + u64::from(*b.get(1)?),
            2,
        ),
        249 => (
            2288 + 256 * u64::from(*b.get(1)?) + u64::from(*b.get(2)?),
            3,
        ),
        other => {
            let sz = other as usize - 247;
            let mut le = [0u8; 8];
            le[..sz].copy_from_slice(b.get(1..=sz)?);
            (u64::from_le_bytes(le), sz + 1)
        }
    })
}

/// Finds every intact block in raw bytes: a block version byte right after
/// a sled length, a plausible fact count, and a digest that matches.
pub(super) fn scan_blocks(bytes: &[u8], pool: &mut Pool) {
    for at in 1..bytes.len() {
        if !block::known_version(bytes[at]) {
            continue;
        }
        let Some(header) = bytes.get(at..at + block::HEADER_LEN) else {
            break;
        };
        let count = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        // Each fact takes at least 5 bytes of what is left of the file.
        if count == 0 || count as usize > (bytes.len() - at) / 5 {
            continue;
        }
        for len in varints_before(bytes, at) {
            let Ok(len) = usize::try_from(len) else {
                continue;
            };
            // Each fact takes at least its 4-byte length and a byte (a
            // compressed payload holds at least its 4-byte size).
            if len < block::HEADER_LEN + 4 || (count as usize) > len {
                continue;
            }
            let Some(value) = bytes.get(at..at + len) else {
                continue;
            };
            if block::digest_of(value)[..] == value[37..block::HEADER_LEN] {
                pool.offer(value, None);
            }
        }
    }
}

/// Collects the `sha256:<hex>` digests a fact refers to, with the size a
/// neighbouring `size` field gives (an artifact's ticket, a spilled
/// payload's marker).
pub(super) fn collect_artifacts(value: &serde_json::Value, out: &mut HashMap<Digest, Option<u64>>) {
    match value {
        serde_json::Value::String(s) => {
            if let Some(d) = reel_core::codec::parse_digest(s) {
                out.entry(d).or_insert(None);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_artifacts(v, out)),
        serde_json::Value::Object(map) => {
            let size = map.get("size").and_then(serde_json::Value::as_u64);
            for v in map.values() {
                if let (Some(size), Some(d)) =
                    (size, v.as_str().and_then(reel_core::codec::parse_digest))
                {
                    out.insert(d, Some(size));
                } else {
                    collect_artifacts(v, out);
                }
            }
        }
        _ => {}
    }
}

/// Looks for each wanted artifact not yet found in the raw bytes: a sled
/// value of its size (its length as sled writes it, then the bytes), or the
/// value right after its key (sled writes an insert as key, then value);
/// each candidate is kept only when its sha-256 is the digest.
pub(super) fn find_artifacts(
    pool: &Pool,
    wanted: &HashMap<Digest, Option<u64>>,
) -> HashMap<Digest, Vec<u8>> {
    let missing: Vec<(Digest, Option<u64>)> = wanted
        .iter()
        .filter(|(d, _)| !pool.artifacts.contains_key(*d))
        .map(|(d, s)| (*d, *s))
        .collect();
    let mut found = HashMap::new();
    for bytes in &pool.files {
        for (digest, size) in &missing {
            if found.contains_key(digest) {
                continue;
            }
            // After the key: its last 16 bytes (sled may drop a prefix
            // the key shares with its neighbours), then the value.
            let mut hit = None;
            for i in memchr::memmem::find_iter(bytes, &digest[16..]) {
                if let Some((len, k)) = varint_at(bytes, i + 16) {
                    let start = i + 16 + k;
                    if let Some(v) = usize::try_from(len)
                        .ok()
                        .and_then(|len| bytes.get(start..start.checked_add(len)?))
                    {
                        if Sha256::digest(v)[..] == digest[..] {
                            hit = Some(v.to_vec());
                            break;
                        }
                    }
                }
            }
            // A value of the size the facts give, after that size as sled
            // writes it.
            if hit.is_none() {
                if let Some(size) = *size {
                    let length = varint_bytes(size);
                    for i in memchr::memmem::find_iter(bytes, &length) {
                        let at = i + length.len();
                        let v = usize::try_from(size)
                            .ok()
                            .and_then(|n| bytes.get(at..at.checked_add(n)?));
                        if let Some(v) = v {
                            if Sha256::digest(v)[..] == digest[..] {
                                hit = Some(v.to_vec());
                                break;
                            }
                        }
                    }
                }
            }
            if let Some(v) = hit {
                found.insert(*digest, v);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys;

    #[test]
    fn varints_read_as_sled_writes_them() {
        // sled's encoding of 100, 1000 and 10_000, then a byte.
        let cases: [(&[u8], u64); 3] =
            [(&[100], 100), (&[243, 248], 1000), (&[249, 30, 32], 10_000)];
        for (enc, want) in cases {
            let mut bytes = enc.to_vec();
            bytes.push(7);
            assert!(
                varints_before(&bytes, enc.len()).any(|v| v == want),
                "{want}"
            );
            assert_eq!(varint_at(&bytes, 0), Some((want, enc.len())));
            assert_eq!(varint_bytes(want), enc);
        }
        let lost = [(3, 9), (12, 12)];
        assert_eq!(keys::lost_from(&keys::lost_value(&lost)), lost);
    }
}
