//! Server-sent events: the data of each complete event of a stream fed in
//! chunks, none over its limit.

use super::DEFAULT_MAX_BODY;

/// A server-sent events parser: the data of each complete event, none
/// over its limit (an event that grows past it is skipped to its end).
pub(crate) struct Sse {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    limit: usize,
    /// The current event went over the limit: skipped to its end.
    skipping: bool,
    /// While skipping: the current line is not blank (a line cut short
    /// counts), so its end is not the event's.
    skipped_line: bool,
    /// An event was skipped since the last [`Sse::take_oversized`].
    oversized: bool,
}

impl Default for Sse {
    fn default() -> Sse {
        Sse::with_limit(DEFAULT_MAX_BODY)
    }
}

impl Sse {
    /// A parser holding at most `limit` bytes of one event.
    pub(crate) fn with_limit(limit: usize) -> Sse {
        Sse {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            limit,
            skipping: false,
            skipped_line: false,
            oversized: false,
        }
    }

    /// Whether an event was skipped for its size since the last call.
    pub(crate) fn take_oversized(&mut self) -> bool {
        std::mem::take(&mut self.oversized)
    }

    /// Feeds a chunk; returns the data of the events it completed.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        let mut events = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                if self.skipping {
                    // A lone `\r` before the `\n` is no content.
                    self.skipped_line |= b != b'\r';
                } else {
                    self.line.push(b);
                    if self.line.len() + self.data.len() > self.limit {
                        self.skip();
                    }
                }
                continue;
            }
            if self.skipping {
                // A blank line ends the skipped event.
                self.skipping = std::mem::take(&mut self.skipped_line);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.data));
                }
                self.has_data = false;
                continue;
            }
            if let Some(value) = line.strip_prefix(b"data") {
                let value = match value {
                    [b':', b' ', rest @ ..] | [b':', rest @ ..] => rest,
                    [] => &[][..],
                    _ => continue,
                };
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
        }
        events
    }

    fn skip(&mut self) {
        self.line = Vec::new();
        self.data = Vec::new();
        self.has_data = false;
        self.skipping = true;
        self.skipped_line = true;
        self.oversized = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks_are_whole() {
        let mut sse = Sse::default();
        assert!(sse.feed(b"id: 1\nevent: message\ndata: {\"a\"").is_empty());
        assert!(sse.feed(b":1}\r\n").is_empty());
        assert_eq!(
            sse.feed(b"\r\n: ping\n\ndata:x\ndata: y\n\n"),
            vec![b"{\"a\":1}".to_vec(), b"x\ny".to_vec()]
        );
        // A priming event with no data is no message.
        assert!(sse.feed(b"id: 7\nretry: 100\n\n").is_empty());
    }

    #[test]
    fn an_sse_event_over_the_limit_is_skipped_and_the_next_is_whole() {
        let mut sse = Sse::with_limit(16);
        // One line that never ends within the limit, fed in pieces: the
        // parser holds no more than its limit.
        for _ in 0..1000 {
            assert!(sse.feed(b"data: xxxxxxxxxxxxxxxxxxxxxxxx").is_empty());
            assert!(sse.line.len() + sse.data.len() <= 16);
        }
        // The cut line's end is not the event's; the blank line is.
        assert!(sse.feed(b"\r\ndata: more of it\r\n").is_empty());
        assert_eq!(
            sse.feed(b"\r\ndata: {\"ok\":1}\n\n"),
            vec![b"{\"ok\":1}".to_vec()]
        );
        assert!(sse.take_oversized());
        assert!(!sse.take_oversized());
        // Short lines adding up past it are one event over it, too.
        let mut sse = Sse::with_limit(16);
        assert!(sse
            .feed(b"data: 1234567\ndata: 1234567\ndata: 12\n\n")
            .is_empty());
        assert!(sse.take_oversized());
        assert_eq!(sse.feed(b"data: 12345\n\n"), vec![b"12345".to_vec()]);
        assert!(!sse.take_oversized());
    }
}
