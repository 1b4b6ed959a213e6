//! Reading a journal after a crash (or after a clean close): the valid
//! batches from a checkpoint on, told apart from a torn tail and from
//! damage. Never writes.

use std::fmt;
use std::path::{Path, PathBuf};

use super::frame::{self, BadFrame, BadHeader, Header, HEADER_LEN};
use super::salvage;
use super::{JournalError, Position};

/// One batch read back from the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Where the batch starts.
    pub position: Position,
    /// Where it ends: the position a writer was given for it.
    pub end: Position,
    /// The position the journal had synced before this batch was written.
    pub synced_before: Position,
    /// Its records, as appended.
    pub records: Vec<Vec<u8>>,
}

/// Why the journal's valid part ends where it does, when not at the clean
/// end of its last file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutReason {
    /// The file ends inside a frame (a write cut short).
    Short,
    /// A frame's checksum does not match its bytes.
    BadChecksum,
    /// An intact frame that names another position than the one it sits
    /// at (stale bytes, or a frame out of place).
    WrongPosition,
    /// An intact frame whose records do not parse.
    Malformed,
    /// The next segment file's header is short or damaged.
    BadHeader,
    /// The next segment file does not continue where this one ends (its
    /// first position is not where this one's valid part ends).
    Gap,
    /// No segment file holds the position the scan starts from.
    Missing,
}

impl fmt::Display for CutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutReason::Short => "a frame cut short by the end of its file",
            CutReason::BadChecksum => "a bad checksum",
            CutReason::WrongPosition => "a frame that names another position",
            CutReason::Malformed => "a frame whose records do not parse",
            CutReason::BadHeader => "a segment file whose header is damaged",
            CutReason::Gap => "a segment file that does not continue the one before",
            CutReason::Missing => "a missing segment file",
        })
    }
}

/// Where the journal's valid part stops, when it does not stop at the
/// clean end of its last file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The file in which it stops (the journal's directory for
    /// [`CutReason::Missing`]).
    pub file: PathBuf,
    /// The byte offset in that file.
    pub offset: u64,
    /// The journal position there.
    pub position: Position,
    /// Why.
    pub reason: CutReason,
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at offset {} of {} (journal position {})",
            self.reason,
            self.offset,
            self.file.display(),
            self.position
        )
    }
}

/// What a scan found: every valid batch from the checkpoint on, and how the
/// journal ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The valid batches from the checkpoint on, in order: those up to the
    /// acknowledged position, then the tail written after it.
    pub batches: Vec<Batch>,
    /// Where the valid part ends: the position a writer continues from.
    pub end: Position,
    /// How far acknowledged data reaches: the position the scan was
    /// given, or further when the journal's own frames say more was synced
    /// (a caller's record that lagged).
    pub acknowledged: Position,
    /// How many of [`Recovered::batches`] (the last ones) lie past the
    /// acknowledged position: written, never acknowledged.
    pub unacknowledged: usize,
    /// Where the valid part stops, when not at the clean end of the last
    /// file: after a crash, the torn tail.
    pub cut: Option<Cut>,
    /// Earlier crashes' torn tails that a writer reopening at their cut
    /// left behind (each cut is followed by a segment file starting at its
    /// position): the journal continues past them.
    pub earlier_cuts: Vec<Cut>,
    /// The sequence number of the newest segment file (0 when none).
    pub last_seq: u64,
}

impl Recovered {
    /// The tail written after the last acknowledged sync, as a sentence for
    /// a reader after a crash ("3 batches (1420 bytes) written after the
    /// last acknowledged sync, ending at a bad checksum at offset ..."),
    /// or `None` when the journal ends cleanly at the acknowledged position.
    pub fn tail(&self) -> Option<String> {
        if self.unacknowledged == 0 && self.cut.is_none() {
            return None;
        }
        let bytes = self.end.saturating_sub(self.acknowledged);
        let written = format!(
            "{} batch{} ({bytes} bytes) written after the last acknowledged sync (journal \
             position {}) and never acknowledged",
            self.unacknowledged,
            if self.unacknowledged == 1 { "" } else { "es" },
            self.acknowledged,
        );
        Some(match &self.cut {
            Some(cut) => format!("{written}, ending at {cut}"),
            None => format!("{written}, ending cleanly at position {}", self.end),
        })
    }
}

/// A segment file found in the journal's directory.
struct Segment {
    seq: u64,
    path: PathBuf,
}

/// The segment files in `dir`, by sequence number (names that are not a
/// segment's are left alone). A missing directory holds none.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, JournalError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(JournalError::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| JournalError::io(dir, e))?;
        let name = entry.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".wal"))
            .filter(|n| n.len() == 12 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((seq, entry.path()));
    }
    out.sort();
    Ok(out)
}

/// The file name of segment `seq`.
pub(crate) fn file_name(seq: u64) -> String {
    format!("{seq:012}.wal")
}

/// Reads the journal in `dir` from the checkpoint `from` on (see
/// [`crate::journal`] for what `acknowledged` means and what is damage).
pub fn scan(dir: &Path, from: Position, acknowledged: Position) -> Result<Recovered, JournalError> {
    let segments: Vec<Segment> = list(dir)?
        .into_iter()
        .map(|(seq, path)| Segment { seq, path })
        .collect();
    let last_seq = segments.last().map_or(0, |s| s.seq);
    let mut found = Recovered {
        batches: vec![],
        end: from,
        acknowledged,
        unacknowledged: 0,
        cut: None,
        earlier_cuts: vec![],
        last_seq,
    };
    // The segment holding `from`: the newest whose header reads and whose
    // first position is at most `from`.
    let mut start = None;
    for (i, s) in segments.iter().enumerate() {
        if let Some(h) = header_of(s)? {
            if h.base <= from {
                start = Some((i, h));
            }
        }
    }
    let Some((mut i, mut header)) = start else {
        if !segments.is_empty() || from < acknowledged {
            found.cut = Some(Cut {
                file: dir.to_path_buf(),
                offset: 0,
                position: from,
                reason: CutReason::Missing,
            });
        }
        look_past(&segments, 0, 0, &mut found)?;
        return judge(dir, found);
    };
    let mut position = from;
    loop {
        let s = &segments[i];
        let bytes = std::fs::read(&s.path).map_err(|e| JournalError::io(&s.path, e))?;
        let mut offset = HEADER_LEN.saturating_add((position - header.base) as usize);
        // Walk the frames; stop at the clean end or at the first bad one.
        let stop = loop {
            let Some(rest) = bytes.get(offset..) else {
                break Some(CutReason::Short);
            };
            if rest.is_empty() {
                break None;
            }
            match frame::read_frame(rest, position) {
                Ok(f) => {
                    // Positions near the end of the range (a first
                    // position from the disk) are not a frame's.
                    let Some(end) = position.checked_add(f.len as u64) else {
                        break Some(CutReason::WrongPosition);
                    };
                    found.acknowledged = found.acknowledged.max(f.synced_before);
                    found.batches.push(Batch {
                        position,
                        end,
                        synced_before: f.synced_before,
                        records: f.records,
                    });
                    position = end;
                    offset += f.len;
                }
                Err(bad) => {
                    break Some(match bad {
                        BadFrame::Short => CutReason::Short,
                        BadFrame::Checksum => CutReason::BadChecksum,
                        BadFrame::Position => CutReason::WrongPosition,
                        BadFrame::Malformed => CutReason::Malformed,
                    })
                }
            }
        };
        found.end = position;
        let cut_here = stop.map(|reason| Cut {
            file: s.path.clone(),
            offset: offset as u64,
            position,
            reason,
        });
        // The next file whose header reads continues the journal when it
        // starts where this one's valid part ends: after a clean end, or
        // after a torn tail that a writer reopening here left behind. Files
        // in between whose header does not read were cut while being
        // created (a header is synced before any frame goes in): when one
        // held frames, the next file starts past them, a gap.
        let (next, unreadable) = next_file(&segments, i, position)?;
        // Where the journal stops for good: the first place past which
        // its own frames may still say more was synced.
        let stop_here = (i, offset);
        let first_unreadable = unreadable.first().map(|(j, _)| (*j, 0));
        let unreadable: Vec<Cut> = unreadable.into_iter().map(|(_, c)| c).collect();
        match next {
            Some((j, h)) if h.base == position => {
                found.earlier_cuts.extend(cut_here);
                found.earlier_cuts.extend(unreadable);
                i = j;
                header = h;
            }
            Some((j, _)) => {
                let (at, off) = match (&cut_here, first_unreadable) {
                    (Some(_), _) => stop_here,
                    (None, Some(u)) => u,
                    (None, None) => (j, 0),
                };
                found.cut = cut_here.or(unreadable.into_iter().next()).or(Some(Cut {
                    file: segments[j].path.clone(),
                    offset: 0,
                    position,
                    reason: CutReason::Gap,
                }));
                look_past(&segments, at, off, &mut found)?;
                break;
            }
            None => {
                let (at, off) = match (&cut_here, first_unreadable) {
                    (Some(_), _) => stop_here,
                    (None, Some(u)) => u,
                    // The clean end of the last file: nothing past it.
                    (None, None) => (segments.len(), 0),
                };
                found.cut = cut_here.or(unreadable.into_iter().next());
                look_past(&segments, at, off, &mut found)?;
                break;
            }
        }
    }
    judge(dir, found)
}

/// The first file after a segment whose header reads (its index and
/// header), and the files before it whose header does not (each as a cut).
type Next = (Option<(usize, Header)>, Vec<(usize, Cut)>);

/// [`Next`] after segment `i`, whose valid part ends at `position`.
fn next_file(segments: &[Segment], i: usize, position: Position) -> Result<Next, JournalError> {
    let mut unreadable = Vec::new();
    for (j, later) in segments.iter().enumerate().skip(i + 1) {
        match header_of(later)? {
            Some(h) => return Ok((Some((j, h)), unreadable)),
            None => unreadable.push((
                j,
                Cut {
                    file: later.path.clone(),
                    offset: 0,
                    position,
                    reason: CutReason::BadHeader,
                },
            )),
        }
    }
    Ok((None, unreadable))
}

/// Raises `found.acknowledged` to what intact frames past the place the
/// journal stops (segment `at`, byte `offset`, and the files after it) say
/// was synced before they were written.
fn look_past(
    segments: &[Segment],
    at: usize,
    offset: usize,
    found: &mut Recovered,
) -> Result<(), JournalError> {
    for (k, s) in segments.iter().enumerate().skip(at) {
        let bytes = std::fs::read(&s.path).map_err(|e| JournalError::io(&s.path, e))?;
        let Some(base) = salvage::file_base(s.seq, &bytes) else {
            continue;
        };
        let from = if k == at { offset } else { 0 };
        salvage::intact_frames(&bytes, base, from, |_, _, f| {
            found.acknowledged = found.acknowledged.max(f.synced_before);
        });
    }
    Ok(())
}

/// Counts the tail; damage when the valid part ends before the
/// acknowledged position.
fn judge(dir: &Path, mut found: Recovered) -> Result<Recovered, JournalError> {
    let acknowledged = found.acknowledged;
    found.unacknowledged = found
        .batches
        .iter()
        .filter(|b| b.end > acknowledged)
        .count();
    if found.end >= found.acknowledged {
        return Ok(found);
    }
    Err(JournalError::Damaged {
        dir: dir.to_path_buf(),
        acknowledged: found.acknowledged,
        end: found.end,
        cut: found.cut.map(Box::new),
    })
}

/// A segment file's header; `None` when it does not read (or names
/// another file). A newer format's file is an error, not damage.
fn header_of(s: &Segment) -> Result<Option<Header>, JournalError> {
    match Header::decode(&read_head(&s.path)?) {
        Ok(h) => Ok((h.seq == s.seq).then_some(h)),
        Err(BadHeader::Version(found)) => Err(JournalError::NewerFormat {
            file: s.path.clone(),
            found,
        }),
        Err(_) => Ok(None),
    }
}

/// The first bytes of a file, enough for its header.
fn read_head(path: &Path) -> Result<Vec<u8>, JournalError> {
    use std::io::Read as _;
    let mut bytes = Vec::with_capacity(HEADER_LEN);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEADER_LEN as u64).read_to_end(&mut bytes))
        .map_err(|e| JournalError::io(path, e))?;
    Ok(bytes)
}
