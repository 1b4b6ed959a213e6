//! The JSON rendering: `{"run": <record>, "facts": [...], "timeline": {...}}`,
//! written as it streams (a run of any size renders in bounded memory).
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
        out.write_all(b"{\"run\":")?;
        serde_json::to_writer(&mut out, record)?;
        out.write_all(b",\"facts\":[")?;
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
        self.out.write_all(b"\n")?;
        serde_json::to_writer(&mut self.out, fact)?;
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
        self.out.write_all(b"\n],\"timeline\":")?;
        serde_json::to_writer(&mut self.out, &timeline)?;
        self.out.write_all(b"}\n")?;
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
