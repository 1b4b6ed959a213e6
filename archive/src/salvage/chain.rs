//! Reassembling runs from the blocks found: each run's chain by previous
//! digest, and the seqs it lost where the chain breaks.

use std::collections::{HashMap, HashSet};

use reel_core::run::RunRecord;

use crate::block;
use reel_core::codec::Digest;

use super::*;

/// A run as reassembled: its blocks in order, and the seqs lost between.
pub(super) struct Reassembled<'a> {
    pub(super) blocks: Vec<&'a Found>,
    pub(super) lost: Vec<LostSeqs>,
}

/// Chains the pool's blocks into runs (see the module docs).
pub(super) fn reassemble<'a>(pool: &'a Pool, report: &mut SalvageReport) -> Vec<Reassembled<'a>> {
    let mut by_prev: HashMap<Digest, Vec<(&Digest, &Found)>> = HashMap::new();
    for (digest, found) in &pool.blocks {
        by_prev.entry(found.prev).or_default().push((digest, found));
    }
    for list in by_prev.values_mut() {
        list.sort_by_key(|(d, f)| (f.first, **d));
    }
    // The block that follows `digest` ending at seq `end`.
    let next = |digest: &Digest, end: u64| {
        by_prev
            .get(digest)
            .and_then(|l| l.iter().find(|(_, f)| f.first == end))
    };
    // Segments: maximal chains, each from a block no found block leads to.
    let led_to: HashSet<&Digest> = pool
        .blocks
        .iter()
        .filter_map(|(d, f)| next(d, f.end()).map(|(d, _)| *d))
        .collect();
    let mut segments: Vec<Vec<(Digest, &Found)>> = Vec::new();
    let mut starts: Vec<(&Digest, &Found)> = pool
        .blocks
        .iter()
        .filter(|(d, _)| !led_to.contains(d))
        .collect();
    starts.sort_by_key(|(d, f)| (f.first, f.facts.first().map(|x| x.at), **d));
    for (digest, found) in starts {
        let mut seg = vec![(*digest, found)];
        let mut seen = HashSet::from([*digest]);
        while let Some((d, f)) = {
            let (d, f) = seg.last().expect("a segment has a block");
            next(d, f.end())
        } {
            if !seen.insert(**d) {
                break;
            }
            seg.push((**d, f));
        }
        segments.push(seg);
    }
    // Run starts, and the parts that follow a broken link.
    let zero: Digest = [0; 32];
    let mut runs: Vec<(String, Reassembled)> = Vec::new();
    let mut tails: Vec<Vec<(Digest, &Found)>> = Vec::new();
    for seg in segments {
        let head = seg[0].1;
        let record = (head.prev == zero && head.first == 0)
            .then(|| RunRecord::from_first(&head.facts[0]))
            .flatten();
        match record {
            // A pruned run's blocks, still in sled's files: gone on purpose.
            Some(r) if pool.pruned.contains(&r.run_id) => {}
            Some(r) if !runs.iter().any(|(id, _)| *id == r.run_id) => runs.push((
                r.run_id,
                Reassembled {
                    blocks: seg.iter().map(|(_, f)| *f).collect(),
                    lost: Vec::new(),
                },
            )),
            _ => tails.push(seg),
        }
    }
    // The ordinal sled gave each run, where it read one of its blocks.
    let ordinal_of = |run: &Reassembled| run.blocks.iter().find_map(|f| f.ordinal);
    loop {
        let mut attached = false;
        for (_, run) in runs.iter_mut() {
            let last = *run.blocks.last().expect("a run has a block");
            let end = last.end();
            let tail_digest = block::digest_of(&last.value);
            let ordinal = ordinal_of(run);
            let reached = bridges(&pool.files, &tail_digest);
            let pick = tails.iter().position(|seg| {
                let first = seg[0].1;
                first.first > end
                    && ((ordinal.is_some() && first.ordinal == ordinal)
                        || reached.contains(&first.prev))
            });
            if let Some(i) = pick {
                let seg = tails.remove(i);
                run.lost.push(LostSeqs {
                    first: end,
                    last: seg[0].1.first - 1,
                });
                run.blocks.extend(seg.iter().map(|(_, f)| *f));
                attached = true;
            }
        }
        if !attached {
            break;
        }
    }
    for seg in &tails {
        report.blocks_unplaced += seg.len() as u64;
        report.facts_lost += seg.iter().map(|(_, f)| f.facts.len() as u64).sum::<u64>();
    }
    runs.into_iter().map(|(_, r)| r).collect()
}

/// The digests damaged blocks found with their headers intact lead to
/// from the block with digest `from`: a header whose previous digest is
/// `from` (at offset 5) holds its own digest right after (at offset 37);
/// up to four damaged blocks in a row.
pub(super) fn bridges(files: &[Vec<u8>], from: &Digest) -> HashSet<Digest> {
    let mut reached = HashSet::new();
    let mut at = vec![*from];
    for _ in 0..4 {
        let mut next = Vec::new();
        for digest in &at {
            let finder = memchr::memmem::Finder::new(&digest[..]);
            for bytes in files {
                for i in finder.find_iter(bytes) {
                    let version = match i.checked_sub(5) {
                        Some(v) => bytes[v],
                        None => continue,
                    };
                    if !block::known_version(version) {
                        continue;
                    }
                    if let Some(own) = bytes
                        .get(i + 32..i + 64)
                        .and_then(|o| Digest::try_from(o).ok())
                    {
                        if own != *from && reached.insert(own) {
                            next.push(own);
                        }
                    }
                }
            }
        }
        if next.is_empty() {
            break;
        }
        at = next;
    }
    reached
}

pub(super) fn lost_pairs(lost: &[LostSeqs]) -> Vec<(u64, u64)> {
    lost.iter().map(|l| (l.first, l.last)).collect()
}
