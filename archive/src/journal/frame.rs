//! The journal's bytes: the segment header and the batch frame (the layout
//! is in the module docs of [`crate::journal`]). Known only here.

use super::Position;

/// The first bytes of every segment file.
pub(crate) const MAGIC: &[u8; 8] = b"REELJNL\0";
/// The format this build writes and the only one it reads.
pub(crate) const VERSION: u32 = 1;
/// The segment header: magic, version, seq, base, checksum.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 8 + 8 + 4;
/// A frame's fixed part: checksum, payload length, position, and the
/// position synced before the frame was written.
pub(crate) const FRAME_HEAD: usize = 4 + 4 + 8 + 8;
/// The largest payload a frame carries (a batch is refused past it): the
/// length field's range, kept well inside memory a reader can allocate.
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;

/// A segment's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The segment's sequence number (its file name).
    pub seq: u64,
    /// The position of its first frame.
    pub base: Position,
}

/// Why a header does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadHeader {
    /// Fewer bytes than a header.
    Short,
    /// Not a journal file, or a checksum that does not match.
    Damaged,
    /// A journal of another format version.
    Version(u32),
}

impl Header {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..20].copy_from_slice(&self.seq.to_le_bytes());
        h[20..28].copy_from_slice(&self.base.to_le_bytes());
        let crc = crc32c::crc32c(&h[..28]);
        h[28..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Header, BadHeader> {
        let h = bytes.get(..HEADER_LEN).ok_or(BadHeader::Short)?;
        if crc32c::crc32c(&h[..28]) != u32_at(h, 28) || &h[..8] != MAGIC {
            return Err(BadHeader::Damaged);
        }
        let version = u32_at(h, 8);
        if version != VERSION {
            return Err(BadHeader::Version(version));
        }
        Ok(Header {
            seq: u64_at(h, 12),
            base: u64_at(h, 20),
        })
    }
}

/// A batch's records as a frame payload: count, then each record's length
/// and bytes. `None` when the batch is too large for one frame.
pub(crate) fn payload(records: &[&[u8]]) -> Option<Vec<u8>> {
    let len = 4 + records.iter().map(|r| 4 + r.len()).sum::<usize>();
    if len > MAX_PAYLOAD {
        return None;
    }
    let mut p = Vec::with_capacity(FRAME_HEAD + len);
    p.resize(FRAME_HEAD, 0);
    p.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for r in records {
        p.extend_from_slice(&(r.len() as u32).to_le_bytes());
        p.extend_from_slice(r);
    }
    Some(p)
}

/// A frame being built: its bytes (the fixed part still blank) and its
/// payload's checksum, computed outside the journal's lock.
pub(crate) struct Unplaced {
    bytes: Vec<u8>,
    payload_crc: u32,
}

impl Unplaced {
    /// A frame around `records`; `None` when too large.
    pub(crate) fn new(records: &[&[u8]]) -> Option<Unplaced> {
        let bytes = payload(records)?;
        let payload_crc = crc32c::crc32c(&bytes[FRAME_HEAD..]);
        Some(Unplaced { bytes, payload_crc })
    }

    /// The frame's whole length on disk.
    pub(crate) fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The frame's bytes, placed at `position`, with everything before
    /// `synced` known durable: the fixed part and the checksum are filled
    /// in (a few bytes of work, under the lock).
    pub(crate) fn place(mut self, position: Position, synced: Position) -> Vec<u8> {
        let len = (self.bytes.len() - FRAME_HEAD) as u32;
        self.bytes[4..8].copy_from_slice(&len.to_le_bytes());
        self.bytes[8..16].copy_from_slice(&position.to_le_bytes());
        self.bytes[16..24].copy_from_slice(&synced.to_le_bytes());
        let crc = crc32c::crc32c_append(self.payload_crc, &self.bytes[4..FRAME_HEAD]);
        self.bytes[..4].copy_from_slice(&crc.to_le_bytes());
        self.bytes
    }
}

/// Why the bytes at a frame's place are not an intact frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadFrame {
    /// The file ends inside the frame (or its fixed part).
    Short,
    /// The checksum does not match.
    Checksum,
    /// An intact frame that names another position: stale bytes, or a
    /// frame out of place.
    Position,
    /// An intact frame whose payload does not parse.
    Malformed,
}

/// A frame read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Its batch's records.
    pub records: Vec<Vec<u8>>,
    /// Its whole length on disk.
    pub len: usize,
    /// The position synced before it was written: the journal's own
    /// record of how far acknowledged data reached.
    pub synced_before: Position,
}

/// Reads the frame that should start at `bytes[0]` and hold `position`.
pub(crate) fn read_frame(bytes: &[u8], position: Position) -> Result<Frame, BadFrame> {
    let head = bytes.get(..FRAME_HEAD).ok_or(BadFrame::Short)?;
    let len = u32_at(head, 4) as usize;
    let payload = bytes
        .get(FRAME_HEAD..)
        .and_then(|rest| rest.get(..len))
        .ok_or(BadFrame::Short)?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(payload), &head[4..FRAME_HEAD]);
    if crc != u32_at(head, 0) {
        return Err(BadFrame::Checksum);
    }
    if u64_at(head, 8) != position {
        return Err(BadFrame::Position);
    }
    let records = records(payload).ok_or(BadFrame::Malformed)?;
    Ok(Frame {
        records,
        len: FRAME_HEAD + len,
        synced_before: u64_at(head, 16),
    })
}

fn records(payload: &[u8]) -> Option<Vec<Vec<u8>>> {
    let count = u32_at(payload.get(..4)?, 0) as usize;
    let mut rest = &payload[4..];
    // Each record takes at least its length field: a count past that is
    // malformed (and never allocates past the payload's size).
    if count > rest.len() / 4 {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u32_at(rest.get(..4)?, 0) as usize;
        let record = rest.get(4..4 + len)?;
        out.push(record.to_vec());
        rest = &rest[4 + len..];
    }
    rest.is_empty().then_some(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(records: &[&[u8]], at: Position) -> Vec<u8> {
        Unplaced::new(records).expect("small").place(at, at / 2)
    }

    #[test]
    fn a_frame_reads_back_at_its_position_only() {
        let f = frame(&[b"one", b"", b"three"], 77);
        let read = read_frame(&f, 77).expect("intact");
        assert_eq!((read.len, read.synced_before), (f.len(), 38));
        assert_eq!(
            read.records,
            vec![b"one".to_vec(), vec![], b"three".to_vec()]
        );
        assert_eq!(read_frame(&f, 78), Err(BadFrame::Position));
        let empty = frame(&[], 0);
        let read = read_frame(&empty, 0).expect("intact");
        assert_eq!((read.records, read.len), (vec![], FRAME_HEAD + 4));
    }

    /// Every flipped bit and every cut of a frame is caught: a checksum,
    /// a position or a short read, never a frame that reads.
    #[test]
    fn every_flip_and_every_cut_of_a_frame_is_caught() {
        let f = frame(&[b"alpha", b"beta"], 4096);
        for at in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[at] ^= 1 << bit;
                assert!(read_frame(&g, 4096).is_err(), "byte {at} bit {bit}");
            }
            assert_eq!(read_frame(&f[..at], 4096), Err(BadFrame::Short), "cut {at}");
        }
    }

    /// Zeroes (a preallocated or hole-punched tail) are not a frame.
    #[test]
    fn zeroes_are_not_a_frame() {
        for at in [0, 16, 4096] {
            assert!(read_frame(&[0u8; 64], at).is_err());
        }
    }

    #[test]
    fn a_header_reads_back_and_every_flip_is_caught() {
        let h = Header {
            seq: 3,
            base: 1 << 40,
        };
        let bytes = h.encode();
        assert_eq!(Header::decode(&bytes), Ok(h));
        for at in 0..HEADER_LEN {
            let mut b = bytes;
            b[at] ^= 0x10;
            assert!(Header::decode(&b).is_err(), "byte {at}");
            assert_eq!(Header::decode(&bytes[..at]), Err(BadHeader::Short));
        }
        let mut newer = bytes;
        newer[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32c::crc32c(&newer[..28]);
        newer[28..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Header::decode(&newer), Err(BadHeader::Version(2)));
    }

    /// A count or a record length that runs past the payload is refused
    /// without allocating for it.
    #[test]
    fn a_payload_that_lies_about_its_records_is_malformed() {
        assert_eq!(records(&[0, 0, 0, 0]), Some(vec![]));
        assert_eq!(records(&u32::MAX.to_le_bytes()), None);
        let mut p = 1u32.to_le_bytes().to_vec();
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(b"short");
        assert_eq!(records(&p), None);
        // Trailing bytes past the last record.
        let mut p = payload(&[b"x"]).expect("small")[FRAME_HEAD..].to_vec();
        p.push(0);
        assert_eq!(records(&p), None);
    }
}
