//! Salvage: every intact frame in a journal's files, past damaged places
//! too (`reel salvage` after [`JournalError::Damaged`]). Never writes.

use std::path::{Path, PathBuf};

use super::frame::{self, Frame, Header, FRAME_HEAD, HEADER_LEN};
use super::scan::{self, Batch};
use super::{JournalError, Position};

/// An intact frame found by [`salvage()`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvaged {
    /// The file it is in.
    pub file: PathBuf,
    /// Its byte offset there.
    pub offset: u64,
    /// Its batch.
    pub batch: Batch,
}

/// What [`salvage()`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Every intact frame, file by file in sequence order, each file's in
    /// offset order. Positions may repeat across files: a writer that
    /// reopened after a crash wrote from the cut on, and frames of the
    /// old file past its damaged place hold the same positions (the newer
    /// file's are the ones the journal went on with).
    pub frames: Vec<Salvaged>,
    /// Bytes skipped because they were not part of an intact frame.
    pub damaged_bytes: u64,
    /// Files neither whose header nor whose first frame reads: their first
    /// position is unknown, so no frame in them can be placed.
    pub unreadable: Vec<PathBuf>,
}

/// Reads every intact frame of the journal in `dir`. In a file whose
/// header (or first frame) reads, a frame is found at any offset where the
/// bytes are an intact frame naming the position that belongs there, so a
/// damaged frame costs only itself.
pub fn salvage(dir: &Path) -> Result<SalvageReport, JournalError> {
    let mut report = SalvageReport::default();
    for (seq, path) in scan::list(dir)? {
        let bytes = std::fs::read(&path).map_err(|e| JournalError::io(&path, e))?;
        let Some(base) = file_base(seq, &bytes) else {
            // A file cut while being created holds nothing.
            if bytes.len() <= HEADER_LEN {
                report.damaged_bytes += bytes.len() as u64;
            } else {
                report.unreadable.push(path);
            }
            continue;
        };
        report.damaged_bytes += intact_frames(&bytes, base, HEADER_LEN, |offset, position, f| {
            report.frames.push(Salvaged {
                file: path.clone(),
                offset: offset as u64,
                batch: Batch {
                    position,
                    end: position.saturating_add(f.len as u64),
                    synced_before: f.synced_before,
                    records: f.records,
                },
            })
        });
    }
    Ok(report)
}

/// The first position of segment `seq` whose bytes are `bytes`: from its
/// header, or else from its first frame.
pub(crate) fn file_base(seq: u64, bytes: &[u8]) -> Option<Position> {
    match Header::decode(bytes) {
        Ok(h) if h.seq == seq => Some(h.base),
        _ => bytes
            .get(HEADER_LEN + 8..HEADER_LEN + 16)
            .map(|p| u64::from_le_bytes(p.try_into().expect("8 bytes")))
            .filter(|&p| frame::read_frame(&bytes[HEADER_LEN..], p).is_ok()),
    }
}

/// Calls `found` with every intact frame in a segment file's `bytes` (its
/// first position `base`) from offset `from` on, in order; returns how many
/// bytes were not part of one.
pub(crate) fn intact_frames(
    bytes: &[u8],
    base: Position,
    from: usize,
    mut found: impl FnMut(usize, Position, Frame),
) -> u64 {
    let mut offset = from.max(HEADER_LEN);
    let mut skipped = 0u64;
    while offset + FRAME_HEAD <= bytes.len() {
        // A first position from the disk near the end of the range
        // places no frame past it.
        let Some(position) = base.checked_add((offset - HEADER_LEN) as u64) else {
            break;
        };
        let named = u64::from_le_bytes(bytes[offset + 8..offset + 16].try_into().expect("8"));
        // The position first: a cheap filter before the checksum.
        let intact = if named == position {
            frame::read_frame(&bytes[offset..], position).ok()
        } else {
            None
        };
        match intact {
            Some(f) => {
                let len = f.len;
                found(offset, position, f);
                offset += len;
            }
            None => {
                offset += 1;
                skipped += 1;
            }
        }
    }
    skipped + bytes.len().saturating_sub(offset) as u64
}
