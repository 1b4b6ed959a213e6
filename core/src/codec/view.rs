//! [`FactView`]: a fact read from its stored encoding only as far as a
//! reader of timelines needs it, and [`ViewSink`], where a reader hands a
//! stream of them.
//!
//! A recording is mostly progress reports, and a timeline needs of each one
//! its seq, offset, call and count: its payload only for the call's last
//! report. [`decode_fact_view`] reads a progress report's envelope in place
//! (the call id borrowed from the bytes), checks its payload without
//! building it (what [`decode_fact`] would refuse, it does not accept), and
//! leaves the payload encoded; every other fact, and any progress report
//! not encoded exactly as [`super::encode_fact`] writes it, is decoded whole
//! by [`decode_fact`]. So a view never disagrees with the fact
//! [`decode_fact`] reads from the same bytes, nor with its error.

use crate::fact::Fact;
use crate::gap::Gap;

use super::{decode_fact, FACT_VERSION, MAX_DECODE_DEPTH};

/// One fact read from its encoding ([`decode_fact_view`]).
// A whole fact is not boxed: a view lives on the stack for one fold, and
// a box would cost the archive's whole reads an allocation per fact.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum FactView<'a> {
    /// A progress report, its payload left encoded.
    Progress(ProgressView<'a>),
    /// Any other fact, decoded whole.
    Whole(Fact),
}

impl FactView<'_> {
    /// The fact's seq.
    pub fn seq(&self) -> u64 {
        match self {
            FactView::Progress(p) => p.seq,
            FactView::Whole(f) => f.seq,
        }
    }

    /// The whole fact: the one [`decode_fact`] reads from the same bytes.
    pub fn into_fact(self) -> Result<Fact, String> {
        match self {
            FactView::Progress(p) => p.to_fact(),
            FactView::Whole(f) => Ok(f),
        }
    }
}

/// A `progress` fact read in place: its envelope and count, the call id
/// borrowed from the encoding, the payload checked but not built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressView<'a> {
    /// The fact's seq.
    pub seq: u64,
    /// Unix nanoseconds.
    pub at: i64,
    /// Nanoseconds since the stream started.
    pub offset: u64,
    /// The call the report belongs to.
    pub call: Option<&'a str>,
    /// The stored count (0: stored without one).
    pub count: u64,
    /// The fact's whole encoding (version byte included).
    encoded: &'a [u8],
}

impl<'a> ProgressView<'a> {
    /// The fact's whole encoding, as [`decode_fact`] reads it.
    pub fn encoded(&self) -> &'a [u8] {
        self.encoded
    }

    /// The whole fact, payload built: what [`decode_fact`] reads from
    /// [`ProgressView::encoded`] (which cannot fail for bytes a view was read
    /// from, since the view checked what decoding checks).
    pub fn to_fact(&self) -> Result<Fact, String> {
        decode_fact(self.encoded)
    }
}

/// Where a reader hands one stream as views: every fact in seq order, and
/// where facts could not be read, a gap at its place (the contract of
/// `RunSink` in the viewer, for views). The archive's `Facts::views` feeds
/// one; the viewer's `TimelineBuilder` is one.
pub trait ViewSink {
    /// One fact, in stream order.
    fn view(&mut self, fact: &FactView<'_>);
    /// Facts that could not be read, at their place in the stream.
    fn gap(&mut self, gap: &Gap);
}

/// Reads one fact written by [`super::encode_fact`] as a [`FactView`]: a
/// progress report in place, anything else through [`decode_fact`] (whose
/// error is the error here).
///
/// ```
/// use reel_core::codec::{decode_fact, decode_fact_view, encode_fact, FactView};
/// use reel_core::fact::{Fact, FactKind, Progress};
///
/// let fact = Fact { seq: 7, at: 1, offset: 2, call: Some("c1".into()),
///     kind: FactKind::Progress(Progress { payload: "half way".into(), count: 3, delivered: false }) };
/// let mut bytes = Vec::new();
/// encode_fact(&fact, &mut bytes).unwrap();
/// let FactView::Progress(p) = decode_fact_view(&bytes).unwrap() else { unreachable!() };
/// assert_eq!((p.seq, p.call, p.count), (7, Some("c1"), 3));
/// assert_eq!(p.to_fact().unwrap(), decode_fact(&bytes).unwrap());
/// ```
pub fn decode_fact_view(bytes: &[u8]) -> Result<FactView<'_>, String> {
    match progress(bytes) {
        Some(p) => Ok(FactView::Progress(p)),
        None => decode_fact(bytes).map(FactView::Whole),
    }
}

/// The deepest payload nesting read in place; deeper ones are decoded whole
/// (the fact's own map and its `data` map come first, and [`decode_fact`]
/// refuses past [`MAX_DECODE_DEPTH`]: this stays well inside it).
const PAYLOAD_DEPTH: usize = MAX_DECODE_DEPTH - 10;

/// A progress report encoded exactly as the field-by-field encoder writes
/// it, read in place; `None` for anything else (decoded whole instead).
fn progress(bytes: &[u8]) -> Option<ProgressView<'_>> {
    let (&FACT_VERSION, rest) = bytes.split_first()? else {
        return None;
    };
    let mut r = Reader { b: rest };
    (r.map_len()? == 6).then_some(())?;
    r.key("seq")?;
    let seq = r.uint()?;
    r.key("at")?;
    let at = r.int()?;
    r.key("offset")?;
    let offset = r.uint()?;
    r.key("call")?;
    let call = r.opt_str()?;
    r.key("kind")?;
    r.key("progress")?;
    r.key("data")?;
    (r.map_len()? == 2).then_some(())?;
    r.key("payload")?;
    r.value(1)?;
    r.key("count")?;
    let count = r.uint()?;
    r.b.is_empty().then_some(ProgressView {
        seq,
        at,
        offset,
        call,
        count,
        encoded: bytes,
    })
}

/// MessagePack read in place, accepting only what `rmp_serde` decodes into
/// the fact's fields the same way (anything else: `None`).
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn be(&mut self, n: usize) -> Option<u64> {
        Some(
            self.take(n)?
                .iter()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        )
    }

    /// An unsigned integer marker (what `rmp` writes for a `u64`).
    fn uint(&mut self) -> Option<u64> {
        match self.byte()? {
            m @ 0x00..=0x7f => Some(u64::from(m)),
            0xcc => self.be(1),
            0xcd => self.be(2),
            0xce => self.be(4),
            0xcf => self.be(8),
            _ => None,
        }
    }

    /// Any integer marker whose value an `i64` holds.
    fn int(&mut self) -> Option<i64> {
        match self.byte()? {
            m @ 0x00..=0x7f => Some(i64::from(m)),
            m @ 0xe0..=0xff => Some(i64::from(m as i8)),
            0xcc => self.be(1).map(|v| v as i64),
            0xcd => self.be(2).map(|v| v as i64),
            0xce => self.be(4).map(|v| v as i64),
            0xcf => i64::try_from(self.be(8)?).ok(),
            0xd0 => self.be(1).map(|v| i64::from(v as u8 as i8)),
            0xd1 => self.be(2).map(|v| i64::from(v as u16 as i16)),
            0xd2 => self.be(4).map(|v| i64::from(v as u32 as i32)),
            0xd3 => self.be(8).map(|v| v as i64),
            _ => None,
        }
    }

    /// The length of a string whose marker is `m`, `None` if `m` is not one.
    fn str_len(&mut self, m: u8) -> Option<usize> {
        match m {
            0xa0..=0xbf => Some(usize::from(m & 0x1f)),
            0xd9 => self.be(1).map(|v| v as usize),
            0xda => self.be(2).map(|v| v as usize),
            0xdb => self.be(4).map(|v| v as usize),
            _ => None,
        }
    }

    /// A UTF-8 string.
    fn str(&mut self) -> Option<&'a str> {
        let m = self.byte()?;
        let len = self.str_len(m)?;
        std::str::from_utf8(self.take(len)?).ok()
    }

    /// The string `want` (bytes equal to a `&str` are UTF-8: compared
    /// without validating them first).
    fn key(&mut self, want: &str) -> Option<()> {
        let m = self.byte()?;
        let len = self.str_len(m)?;
        (self.take(len)? == want.as_bytes()).then_some(())
    }

    /// Nil or a UTF-8 string.
    fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.b.first() == Some(&0xc0) {
            self.b = &self.b[1..];
            return Some(None);
        }
        self.str().map(Some)
    }

    fn map_len(&mut self) -> Option<usize> {
        match self.byte()? {
            m @ 0x80..=0x8f => Some(usize::from(m & 0x0f)),
            0xde => self.be(2).map(|v| v as usize),
            0xdf => self.be(4).map(|v| v as usize),
            _ => None,
        }
    }

    /// Skips one JSON value as `rmp_serde` decodes it into a
    /// `serde_json::Value` without error: nil, booleans, integers, floats,
    /// UTF-8 strings, arrays and maps keyed by UTF-8 strings, nested at most
    /// [`PAYLOAD_DEPTH`] deep (`depth` is this value's). Binary, extension
    /// and reserved markers, other keys and deeper values are `None`.
    fn value(&mut self, depth: usize) -> Option<()> {
        let m = self.byte()?;
        let (items, map) = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => return Some(()),
            0xcc | 0xd0 => return self.take(1).map(drop),
            0xcd | 0xd1 => return self.take(2).map(drop),
            0xce | 0xd2 | 0xca => return self.take(4).map(drop),
            0xcf | 0xd3 | 0xcb => return self.take(8).map(drop),
            0xa0..=0xbf | 0xd9..=0xdb => {
                let len = self.str_len(m)?;
                return std::str::from_utf8(self.take(len)?).ok().map(drop);
            }
            0x90..=0x9f => (usize::from(m & 0x0f), false),
            0xdc => (self.be(2)? as usize, false),
            0xdd => (self.be(4)? as usize, false),
            0x80..=0x8f => (usize::from(m & 0x0f), true),
            0xde => (self.be(2)? as usize, true),
            0xdf => (self.be(4)? as usize, true),
            _ => return None,
        };
        if depth > PAYLOAD_DEPTH {
            return None;
        }
        // A declared length is never trusted beyond the bytes: each item
        // takes one at least, and running out ends the loop.
        for _ in 0..items {
            if map {
                self.str()?;
            }
            self.value(depth + 1)?;
        }
        Some(())
    }
}
