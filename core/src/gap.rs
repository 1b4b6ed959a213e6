//! A gap: facts of a stream that could not be read (a damaged or missing
//! block). One type for every reader: the archive's reads, the live
//! socket, the CLI and the timeline.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Facts `first..=last` of a stream could not be read, and why. `last` is
/// `None` when the damage hides where the missing facts end.
///
/// ```
/// use reel_core::gap::Gap;
/// let gap = Gap { first: 3, last: Some(5), detail: "checksum mismatch".into() };
/// assert_eq!(gap.to_string(), "facts #3 to #5 could not be read: checksum mismatch");
/// assert_eq!(Gap { first: 3, last: None, detail: "x".into() }.seqs(), "facts from #3 on");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// The first seq missing.
    pub first: u64,
    /// The last seq missing, when known.
    pub last: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

impl Gap {
    /// `fact #7`, `facts #7 to #9`, or `facts from #7 on` (end unknown).
    pub fn seqs(&self) -> String {
        seq_range(self.first, self.last)
    }
}

/// `fact #7`, `facts #7 to #9`, or `facts from #7 on` (end unknown).
pub fn seq_range(first: u64, last: Option<u64>) -> String {
    match last {
        Some(l) if l == first => format!("fact #{first}"),
        Some(l) => format!("facts #{first} to #{l}"),
        None => format!("facts from #{first} on"),
    }
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} could not be read: {}", self.seqs(), self.detail)
    }
}
