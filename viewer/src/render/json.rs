//! The JSON rendering: `{"run": <record>, "facts": [...], "timeline": {...}}`,
//! written as it streams (a run of any size renders in bounded memory),
//! indented two spaces a level as every other `--json` of the CLI is (each
//! part is pretty-printed on its own and indented to its depth: a JSON
//! string holds no raw line break, so indenting after each one is safe).
//! Recorded strings keep every character, but C1 and bidi controls and the
//! line separators are written as `\uXXXX` escapes ([`JsonSafe`]), so the
//! document is safe to print on a terminal. The timeline at the end
//! describes every fact of the run, listed or not ([`RunSink`]).

use std::io::{self, Write};

use reel_core::gap::Gap;
use reel_core::{Fact, RunRecord};

use crate::render::sink::RunSink;
use crate::render::terminal::JsonSafe;
use crate::timeline::{Timeline, TimelineBuilder};

/// Writes a run as one JSON document, streaming its facts.
pub struct JsonWriter<W: Write> {
    out: JsonSafe<W>,
    first: bool,
    builder: TimelineBuilder,
}

impl<W: Write> JsonWriter<W> {
    /// Starts the document with the run record.
    pub fn start(out: W, record: &RunRecord) -> io::Result<JsonWriter<W>> {
        let mut out = JsonSafe::new(out);
        out.write_all(b"{\n  \"run\": ")?;
        pretty(&mut out, record, b"\n  ")?;
        out.write_all(b",\n  \"facts\": [")?;
        Ok(JsonWriter {
            out,
            first: true,
            builder: TimelineBuilder::for_record(record),
        })
    }

    /// Writes one fact.
    pub fn fact(&mut self, fact: &Fact) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",")?;
        }
        self.first = false;
        self.out.write_all(b"\n    ")?;
        pretty(&mut self.out, fact, b"\n    ")?;
        self.builder.push(fact);
        Ok(())
    }

    /// Notes facts that could not be read.
    pub fn gap(&mut self, gap: &Gap) {
        self.builder.push_gap(gap);
    }

    /// Ends the document with the timeline; returns the timeline.
    pub fn finish(mut self) -> io::Result<Timeline> {
        let timeline = self.builder.finish();
        let close = if self.first { "]" } else { "\n  ]" };
        self.out.write_all(close.as_bytes())?;
        self.out.write_all(b",\n  \"timeline\": ")?;
        pretty(&mut self.out, &timeline, b"\n  ")?;
        self.out.write_all(b"\n}\n")?;
        self.out.flush()?;
        Ok(timeline)
    }
}

impl<W: Write> RunSink for JsonWriter<W> {
    fn fact(&mut self, fact: &Fact, listed: bool) -> io::Result<()> {
        if listed {
            JsonWriter::fact(self, fact)
        } else {
            self.builder.push(fact);
            Ok(())
        }
    }

    fn gap(&mut self, gap: &Gap) -> io::Result<()> {
        JsonWriter::gap(self, gap);
        Ok(())
    }

    fn finish(self) -> io::Result<Timeline> {
        JsonWriter::finish(self)
    }
}

/// Writes `value` pretty-printed, every line after its first starting with
/// `newline` (a line break and the indent of the depth it is written at).
fn pretty<W: Write>(out: &mut W, value: &impl serde::Serialize, newline: &[u8]) -> io::Result<()> {
    let mut indented = Indented { out, newline };
    serde_json::to_writer_pretty(&mut indented, value)?;
    Ok(())
}

/// A writer that writes `newline` for each line break.
struct Indented<'a, W: Write> {
    out: &'a mut W,
    newline: &'a [u8],
}

impl<W: Write> Write for Indented<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.out.write_all(&rest[..at])?;
            self.out.write_all(self.newline)?;
            rest = &rest[at + 1..];
        }
        self.out.write_all(rest)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// A whole run as a JSON string.
pub fn run<'a>(record: &RunRecord, facts: impl IntoIterator<Item = &'a Fact>) -> String {
    let mut buf = Vec::new();
    let mut w = JsonWriter::start(&mut buf, record).expect("writing to memory");
    for f in facts {
        w.fact(f).expect("writing to memory");
    }
    w.finish().expect("writing to memory");
    String::from_utf8(buf).expect("JSON is UTF-8")
}
