//! [`RunSink`]: where a run's fact stream goes, one item at a time.
//!
//! Every way `reel` shows a run (text on a terminal, one JSON document, an
//! HTML page) is a sink, and one loop (the CLI's) drives any of them from
//! any reader (an archive, a running recorder's socket). The reader owns
//! the order and the filter; the sink owns the document.

use std::io;

use reel_core::gap::Gap;
use reel_core::Fact;

use crate::timeline::Timeline;

/// Receives a run's fact stream and renders it.
///
/// # Contract
///
/// The caller (the stream's reader) promises:
///
/// - [`fact`](RunSink::fact) is called once for every fact read, in
///   stream (seq) order, including the facts a filter leaves out:
///   `listed` is `false` for those. A sink folds every fact into its
///   [`Timeline`] (so the summary, the waterfall and the ledgers describe
///   the whole run) and lists only the facts with `listed` set.
/// - [`gap`](RunSink::gap) is called where facts could not be read, at
///   their place in the order: facts after it have later seqs. A sink
///   shows the gap and records it as an anomaly; the run is damaged.
/// - [`finish`](RunSink::finish) is called once, after the last item, and
///   nothing after it. A sink dropped without `finish` may leave an
///   unfinished document (an unclosed JSON array, a page without its
///   header).
/// - After any method returns an error the caller stops: it calls
///   nothing more, not even `finish`.
///
/// The sink promises to write what it is given as it comes (a run of any
/// size renders in bounded memory: the timeline's state, never the run's
/// facts) and that `finish` returns the timeline of every fact and gap it
/// was given.
pub trait RunSink {
    /// One fact, in stream order; `listed` is false for a fact the
    /// reader's filter leaves out (it still shapes the timeline).
    fn fact(&mut self, fact: &Fact, listed: bool) -> io::Result<()>;

    /// Facts that could not be read, at their place in the stream.
    fn gap(&mut self, gap: &Gap) -> io::Result<()>;

    /// Ends the document after the last item; returns the run's timeline.
    fn finish(self) -> io::Result<Timeline>
    where
        Self: Sized;
}

/// The sink that writes nothing: only the timeline (`reel runs` counts a
/// run's anomalies with it, by the one definition every view uses).
impl RunSink for crate::timeline::TimelineBuilder {
    fn fact(&mut self, fact: &Fact, _listed: bool) -> io::Result<()> {
        self.push(fact);
        Ok(())
    }

    fn gap(&mut self, gap: &Gap) -> io::Result<()> {
        self.push_gap(gap);
        Ok(())
    }

    fn finish(self) -> io::Result<Timeline> {
        Ok(crate::timeline::TimelineBuilder::finish(self))
    }
}
