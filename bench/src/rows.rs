//! The rows of the suite as a table: each entry names the rows it measures
//! (what `--row` takes) and the function that measures them, one module per
//! row or group of rows sharing their measurements. [`crate::run`] calls,
//! in the table's order, each entry that the options ask for.

mod agent;
mod collect;
mod compression;
mod console;
mod crash_open;
mod crash_runs;
mod latency;
mod list;
mod mcp;
mod mcp_http;
mod memory;
mod nats;
mod open;
mod overview;
mod progress;
mod recording;
mod replay;
mod tripwire;
mod viewer;

use crate::*;

/// What a row's measuring function is given.
pub(crate) struct Bench<'a> {
    /// The options the suite runs with.
    pub(crate) opts: &'a Options,
    /// `opts`' sizes.
    pub(crate) s: &'a Sizes,
    /// Rounds per row (at least 1).
    pub(crate) rounds: usize,
    /// The runtime the workloads run on.
    pub(crate) rt: &'a tokio::runtime::Runtime,
    /// Fresh temporary directories.
    pub(crate) tmp: Tmp<'a>,
    /// Where progress and absolute figures are printed.
    pub(crate) log: &'a mut dyn Write,
    /// The summary's rows, in the order they are measured.
    pub(crate) rows: &'a mut Vec<Row>,
}

/// One entry of [`TABLE`].
pub(crate) struct Entry {
    /// The rows it measures (names of [`ROWS`]); it runs when any is asked
    /// for, and measures those asked for.
    pub(crate) rows: &'static [&'static str],
    /// Measures them, pushing their summary rows.
    pub(crate) measure: fn(Bench<'_>) -> io::Result<()>,
}

/// The suite, in the order it runs (the order of the printed figures and
/// of the summary).
pub(crate) const TABLE: &[Entry] = &[
    Entry {
        rows: &[
            "record",
            "record-fair",
            "record-limit",
            "tracing",
            "bytes",
            "timeline",
        ],
        measure: recording::measure,
    },
    Entry {
        rows: &["agent"],
        measure: agent::measure,
    },
    Entry {
        rows: &["latency"],
        measure: latency::measure,
    },
    Entry {
        rows: &["bytes"],
        measure: compression::print,
    },
    Entry {
        rows: &["tripwire"],
        measure: tripwire::measure,
    },
    Entry {
        rows: &["progress"],
        measure: progress::measure,
    },
    Entry {
        rows: &["list"],
        measure: list::measure,
    },
    Entry {
        rows: &["open"],
        measure: open::measure,
    },
    Entry {
        rows: &["open-after-crash"],
        measure: crash_open::measure,
    },
    Entry {
        rows: &["runs-after-crash"],
        measure: crash_runs::measure,
    },
    Entry {
        rows: &["overview"],
        measure: overview::measure,
    },
    Entry {
        rows: &["replay"],
        measure: replay::measure,
    },
    Entry {
        rows: &["nats"],
        measure: nats::measure,
    },
    Entry {
        rows: &["memory"],
        measure: memory::measure,
    },
    Entry {
        rows: &["viewer"],
        measure: viewer::measure,
    },
    Entry {
        rows: &["console"],
        measure: console::measure,
    },
    Entry {
        rows: &["mcp-record", "mcp-serve"],
        measure: mcp::measure,
    },
    Entry {
        rows: &["mcp-http"],
        measure: mcp_http::measure,
    },
    Entry {
        rows: &["collect"],
        measure: collect::measure,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_measures_every_row_and_no_other() {
        for name in ROWS {
            assert!(
                TABLE.iter().any(|e| e.rows.contains(name)),
                "no entry measures {name}"
            );
        }
        for e in TABLE {
            for name in e.rows {
                assert!(ROWS.contains(name), "{name} is not in ROWS");
            }
        }
    }
}
