//! Reading: run records, run ids, artifacts, and a run's facts by seq
//! range ([`Facts`], one block at a time).

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use reel_core::codec::{FactView, ViewSink};
use reel_core::fact::Fact;
use reel_core::gap::Gap;
use reel_core::run::RunRecord;

use crate::block::Decode;
use crate::record::decode_record;
use crate::{block, keys, lock, Archive, ArchiveError, Result};
use reel_core::codec::parse_digest;

impl Archive {
    pub(crate) fn ordinal(&self, run_id: &str) -> Result<u64> {
        let ord = self
            .trees()
            .run_ids
            .get(run_id)
            .map_err(|e| self.storage(e))?
            .ok_or_else(|| ArchiveError::UnknownRun {
                run_id: run_id.into(),
            })?;
        keys::ordinal_from(&ord).ok_or_else(|| ArchiveError::DamagedRecord {
            run: run_id.into(),
            detail: "its run id entry is damaged".into(),
        })
    }

    /// The record of the run `ordinal`: `None` when there is none, a
    /// storage error as such, and a record that does not decode as
    /// [`ArchiveError::DamagedRecord`] naming the ordinal (`#7`).
    pub(crate) fn record_by_ordinal(&self, ordinal: u64) -> Result<Option<RunRecord>> {
        let bytes = self
            .trees()
            .runs
            .get(keys::run_key(ordinal))
            .map_err(|e| self.storage(e))?;
        let Some(bytes) = bytes else { return Ok(None) };
        let record = decode_record(&bytes).map_err(|detail| ArchiveError::DamagedRecord {
            run: format!("#{ordinal}"),
            detail,
        })?;
        // A run this process is writing has a fresher count in memory.
        if !record.state.is_closed() {
            let live = lock(&self.inner.live).get(&record.run_id).cloned();
            if let Some(live) = live {
                return Ok(Some(lock(&live).record.clone()));
            }
        }
        Ok(Some(record))
    }

    /// The record of one run.
    pub fn run(&self, run_id: &str) -> Result<RunRecord> {
        let ordinal = self.ordinal(run_id)?;
        self.record_by_ordinal(ordinal)
            .map_err(|e| match e {
                // Named by the id asked for.
                ArchiveError::DamagedRecord { detail, .. } => ArchiveError::DamagedRecord {
                    run: run_id.into(),
                    detail,
                },
                e => e,
            })?
            .ok_or_else(|| ArchiveError::UnknownRun {
                run_id: run_id.into(),
            })
    }

    /// Every run id, by start time (ties in creation order).
    pub fn run_ids(&self) -> impl Iterator<Item = Result<String>> + '_ {
        self.trees().by_time.iter().map(move |item| {
            let (key, _) = item.map_err(|e| self.storage(e))?;
            let (_, ordinal) = keys::split_index_tail(&key).unwrap_or((0, u64::MAX));
            match self.record_by_ordinal(ordinal)? {
                Some(r) => Ok(r.run_id),
                None => Err(ArchiveError::DamagedRecord {
                    run: format!("#{ordinal}"),
                    detail: "the time index points at a missing run record".into(),
                }),
            }
        })
    }

    /// The facts of a run whose seq lies in `range`, in seq order. A damaged
    /// block yields one [`ArchiveError::Corrupt`] naming its seq range, and
    /// iteration goes on after it.
    pub fn facts(&self, run_id: &str, range: impl RangeBounds<u64>) -> Result<Facts> {
        let ordinal = self.ordinal(run_id)?;
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => Some(e),
            Bound::Excluded(&0) => return Ok(Facts::empty(self.clone(), run_id)),
            Bound::Excluded(&e) => Some(e - 1),
            Bound::Unbounded => None,
        };
        let events = &self.trees().events;
        // The block holding `start` is the one with the greatest first seq <= start.
        let holding = events
            .range(keys::events_range(ordinal, 0, start))
            .next_back()
            .transpose()
            .map_err(|e| self.storage(e))?
            .and_then(|(k, _)| keys::split_event_key(&k).map(|(_, s)| s));
        let from = holding.unwrap_or(start);
        Ok(Facts {
            archive: self.clone(),
            run_id: run_id.into(),
            ordinal,
            current: None,
            spare: Vec::new(),
            cursor: Some(BlockCursor {
                from,
                upto: end.unwrap_or(u64::MAX),
                done: from > end.unwrap_or(u64::MAX),
            }),
            pending: VecDeque::new(),
            start,
            end,
            // Without a block at or before `start`, every seq from 0 is lost.
            expect: Some(holding.unwrap_or(0)),
        })
    }

    /// The bytes stored under a `sha256:<hex>` digest, checked against it:
    /// an artifact whose file is gone or does not hold its bytes is damage
    /// ([`ArchiveError::Damaged`]), never other bytes or silence.
    pub fn artifact(&self, digest: &str) -> Result<Option<Vec<u8>>> {
        let Some(raw) = parse_digest(digest) else {
            return Ok(None);
        };
        let t = self.trees();
        let s = |e| self.storage(e);
        if t.artifact_files.contains_key(raw).map_err(s)? {
            let damaged = |detail: String| ArchiveError::Damaged {
                dir: self.inner.dir.clone(),
                detail,
            };
            return match self
                .inner
                .files
                .read(&raw)
                .map_err(|e| self.artifact_io("reading", &raw, e))?
            {
                Ok(Some(bytes)) => Ok(Some(bytes)),
                Ok(None) => Err(damaged(format!(
                    "the file of artifact {digest} is missing ({})",
                    self.inner.files.path(&raw).display()
                ))),
                Err(detail) => Err(damaged(detail)),
            };
        }
        // Kept in sled by an older reel.
        Ok(t.artifacts.get(raw).map_err(s)?.map(|v| v.to_vec()))
    }
}

/// The facts of one run, in seq order (see [`Archive::facts`]).
pub struct Facts {
    archive: Archive,
    run_id: String,
    ordinal: u64,
    cursor: Option<BlockCursor>,
    /// The block being read, its facts decoded one at a time.
    current: Option<OpenBlock>,
    /// The buffer compressed blocks are decompressed into, kept from one
    /// block to the next (one allocation per read, not one per block).
    spare: Vec<u8>,
    /// Damage found ahead of the next fact, reported first.
    pending: VecDeque<ArchiveError>,
    start: u64,
    end: Option<u64>,
    /// The first seq the next block should hold; `None` after a damaged
    /// block of unknown extent.
    expect: Option<u64>,
}

/// A block whose checksum was checked, read one fact at a time (so that a
/// reader never holds a block's facts decoded all at once).
struct OpenBlock {
    payload: BlockPayload,
    /// Byte position of the next fact in the payload.
    pos: usize,
    /// Seq of the next fact.
    seq: u64,
    /// Seq of the block's last fact.
    last: u64,
}

/// Where an [`OpenBlock`]'s plain payload is.
enum BlockPayload {
    /// In the stored block, after its header (a plain block: no copy).
    Stored(sled::IVec),
    /// Decompressed from a compressed block.
    Decompressed(Vec<u8>),
}

impl BlockPayload {
    fn bytes(&self) -> &[u8] {
        match self {
            BlockPayload::Stored(value) => value.get(block::HEADER_LEN..).unwrap_or_default(),
            BlockPayload::Decompressed(plain) => plain,
        }
    }
}

impl OpenBlock {
    /// The next fact, decoded as `decode` says; `None` at the block's end.
    fn next_fact(&mut self, decode: Decode) -> Option<Result<FactView<'_>, String>> {
        let payload = self.payload.bytes();
        if self.seq > self.last {
            return (self.pos != payload.len())
                .then(|| Err("the block holds more bytes than its header counts facts".into()));
        }
        let (fact, next) = match block::fact_at(payload, self.pos, decode) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        if fact.seq() != self.seq {
            return Some(Err(format!(
                "fact has seq {} where {} was expected",
                fact.seq(),
                self.seq
            )));
        }
        self.pos = next;
        self.seq += 1;
        Some(Ok(fact))
    }
}

/// Which blocks remain to read: keys `from..=upto` of the run (first seqs).
///
/// Each block is looked up afresh instead of holding one sled iterator for
/// the whole run: a live sled iterator pins memory that sled cannot reclaim
/// until it is dropped, so a long run read through one grows without bound.
struct BlockCursor {
    from: u64,
    upto: u64,
    /// No block is left in range.
    done: bool,
}

impl Facts {
    /// The next block in range: its first seq and its stored bytes.
    fn next_block(&mut self) -> Option<sled::Result<(u64, sled::IVec)>> {
        let cursor = self.cursor.as_mut()?;
        if cursor.done {
            return None;
        }
        let events = &self.archive.trees().events;
        let (key, value) = match events
            .range(keys::events_range(self.ordinal, cursor.from, cursor.upto))
            .next()?
        {
            Ok(kv) => kv,
            Err(e) => return Some(Err(e)),
        };
        let first = keys::split_event_key(&key).map_or(cursor.from, |(_, s)| s);
        match first.checked_add(1) {
            Some(f) if f <= cursor.upto => cursor.from = f,
            _ => cursor.done = true,
        }
        Some(Ok((first, value)))
    }

    /// The first seq of the block after the one starting at `first` (looked
    /// up only for a damaged block, whose extent its successor tells).
    fn block_after(&self, first: u64) -> Option<u64> {
        let upto = self.cursor.as_ref().map_or(u64::MAX, |c| c.upto);
        let from = first.checked_add(1)?;
        if from > upto {
            return None;
        }
        match self
            .archive
            .trees()
            .events
            .range(keys::events_range(self.ordinal, from, upto))
            .keys()
            .next()
        {
            Some(Ok(k)) => keys::split_event_key(&k).map(|(_, s)| s),
            _ => None,
        }
    }

    /// Done with the current block: its buffer is kept for the next.
    fn close_block(&mut self) {
        if let Some(OpenBlock {
            payload: BlockPayload::Decompressed(plain),
            ..
        }) = self.current.take()
        {
            self.spare = plain;
        }
    }

    fn empty(archive: Archive, run_id: &str) -> Facts {
        Facts {
            archive,
            run_id: run_id.into(),
            ordinal: 0,
            cursor: None,
            current: None,
            spare: Vec::new(),
            pending: VecDeque::new(),
            start: 0,
            end: None,
            expect: None,
        }
    }

    /// Seqs `first..=last` that no block holds.
    fn missing(&self, first: u64, last: u64) -> ArchiveError {
        let salvaged = self
            .archive
            .salvage_lost(self.ordinal)
            .is_ok_and(|lost| lost.iter().any(|l| l.first <= first && last <= l.last));
        ArchiveError::Corrupt {
            run_id: self.run_id.clone(),
            gap: Gap {
                first,
                last: Some(last),
                detail: if salvaged {
                    "lost to damage before `reel salvage` recovered this run".into()
                } else {
                    "no block holds these facts (a block is missing)".into()
                },
            },
        }
    }

    /// Once the blocks in range are read: the facts from `expect` up to the
    /// end of the range that no block holds (blocks lost at the end of the
    /// range or of the run).
    fn missing_at_end(&self) -> Option<ArchiveError> {
        let expect = self.expect?;
        if self.end.is_some_and(|e| expect > e) {
            return None;
        }
        // The record is read before the blocks: a writer stores a block
        // before the record that counts it, so a run seen closed here has
        // all its blocks in place for the lookup below (read the other way
        // round, a reader racing the last append would report the fact
        // just written as missing).
        let closed_count = match self.archive.run(&self.run_id) {
            Ok(r) if r.state.is_closed() => Some(r.facts),
            _ => None,
        };
        let next = self
            .archive
            .trees()
            .events
            .range(keys::events_range(self.ordinal, expect, u64::MAX))
            .keys()
            .next();
        let last = match next {
            Some(Ok(k)) => keys::split_event_key(&k)?.1.checked_sub(1)?,
            Some(Err(_)) => return None,
            // Only a closed run's count is final.
            None => closed_count?.checked_sub(1)?,
        };
        (last >= expect && last >= self.start).then(|| self.missing(expect, last))
    }
}

impl Facts {
    /// Hands every fact left to `sink` as a [`FactView`] (a progress report
    /// read in place, its payload not built: what a timeline needs), and
    /// every damaged or missing block as a gap at its place, as the
    /// iterator yields them ([`ArchiveError::Corrupt`]). Stops at the first
    /// other error (the store failing) and returns it. The facts and gaps
    /// are the iterator's: a view is the fact [`decode_fact`](reel_core::codec::decode_fact)
    /// reads, and a fact it cannot read is the same damage.
    pub fn views(mut self, sink: &mut dyn ViewSink) -> Result<()> {
        let mut failed = None;
        while self.step(Decode::View, &mut |item| match item {
            Ok(fact) => sink.view(&fact),
            Err(ArchiveError::Corrupt { gap, .. }) => sink.gap(&gap),
            Err(e) => failed = Some(e),
        }) {
            if let Some(e) = failed.take() {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Reads on until one item is handed to `emit` (true), or to the end
    /// (false). Facts are decoded as `decode` says.
    fn step(&mut self, decode: Decode, emit: &mut dyn FnMut(Result<FactView<'_>>)) -> bool {
        loop {
            if let Some(e) = self.pending.pop_front() {
                emit(Err(e));
                return true;
            }
            if let Some(b) = &mut self.current {
                match b.next_fact(decode) {
                    None => self.close_block(),
                    Some(Ok(f)) if f.seq() < self.start => {}
                    Some(Ok(f)) if self.end.is_some_and(|e| f.seq() > e) => self.close_block(),
                    Some(Ok(f)) => {
                        emit(Ok(f));
                        return true;
                    }
                    Some(Err(detail)) => {
                        let (first, last) = (b.seq.min(b.last), b.last);
                        self.close_block();
                        if last >= self.start && self.end.is_none_or(|e| first <= e) {
                            emit(Err(ArchiveError::Corrupt {
                                run_id: self.run_id.clone(),
                                gap: Gap {
                                    first,
                                    last: Some(last),
                                    detail,
                                },
                            }));
                            return true;
                        }
                    }
                }
                continue;
            }
            if self.cursor.is_none() {
                return false;
            }
            let (first, value) = match self.next_block() {
                Some(Ok(block)) => block,
                Some(Err(e)) => {
                    self.cursor = None;
                    emit(Err(self.archive.storage(e)));
                    return true;
                }
                None => {
                    self.cursor = None;
                    return match self.missing_at_end() {
                        Some(e) => {
                            emit(Err(e));
                            true
                        }
                        None => false,
                    };
                }
            };
            // Seqs between the previous block and this one: a lost block.
            if let Some(expect) = self.expect {
                if first > expect && first > self.start {
                    let missing = self.missing(expect, first - 1);
                    self.pending.push_back(missing);
                }
            }
            // A compressed block's payload is decompressed here, once, into
            // the buffer the previous block used; its facts are still
            // decoded one at a time.
            let mut plain = std::mem::take(&mut self.spare);
            let opened = block::open_into(&value, &mut plain)
                .map(|(count, compressed)| (count, compressed.then_some(plain)));
            match opened {
                Ok((0, plain)) => {
                    self.expect = Some(first);
                    self.spare = plain.unwrap_or_default();
                }
                Ok((count, plain)) => {
                    self.expect = Some(first + count as u64);
                    self.current = Some(OpenBlock {
                        payload: match plain {
                            Some(plain) => BlockPayload::Decompressed(plain),
                            None => BlockPayload::Stored(value),
                        },
                        pos: 0,
                        seq: first,
                        last: first + count as u64 - 1,
                    });
                }
                Err(detail) => {
                    let last_seq = match self.block_after(first) {
                        Some(n) => Some(n.saturating_sub(1)),
                        None => self
                            .archive
                            .run(&self.run_id)
                            .ok()
                            .map(|r| r.facts.saturating_sub(1))
                            .filter(|&l| l >= first),
                    };
                    self.expect = last_seq.map(|l| l + 1);
                    // A damaged block wholly before the range is not in it.
                    if last_seq.is_none_or(|l| l >= self.start) {
                        self.pending.push_back(ArchiveError::Corrupt {
                            run_id: self.run_id.clone(),
                            gap: Gap {
                                first,
                                last: last_seq,
                                detail,
                            },
                        });
                    }
                }
            }
        }
    }
}

impl Iterator for Facts {
    type Item = Result<Fact>;

    fn next(&mut self) -> Option<Result<Fact>> {
        let mut out = None;
        self.step(Decode::Whole, &mut |item| {
            out = Some(item.map(|fact| {
                let seq = fact.seq();
                fact.into_fact().map_err(|detail| (seq, detail))
            }))
        });
        Some(match out? {
            Ok(Ok(fact)) => Ok(fact),
            // Not reached: a fact read whole is whole already.
            Ok(Err((seq, detail))) => Err(ArchiveError::Corrupt {
                run_id: self.run_id.clone(),
                gap: Gap {
                    first: seq,
                    last: Some(seq),
                    detail,
                },
            }),
            Err(e) => Err(e),
        })
    }
}
