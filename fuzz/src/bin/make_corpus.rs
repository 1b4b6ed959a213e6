//! Writes the seed corpus of every fuzz target (fuzz/seeds/, committed) from the committed demo
//! tapes (`tests/tapes/*.tape.jsonl`): whole tapes, their facts' stored
//! encodings, blocks sealed from them (format 3, zstd; the format-2 lz4 and plain seeds are kept as `*-format2`), their run records,
//! live-socket requests and replies, and the tapes as LSP documents.
//! Run from `fuzz/`: `cargo run --bin make-corpus` (fuzz/run.sh does).

use std::fs;
use std::path::Path;

use reel::tape::Tape;
use reel_archive::live::{Reply, Request};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("seeds").join(target);
    fs::create_dir_all(&dir).expect("corpus dir");
    fs::write(dir.join(name), bytes).expect("corpus file");
}

fn main() {
    let mut tapes: Vec<_> = fs::read_dir("../tests/tapes")
        .expect("run from fuzz/: ../tests/tapes holds the demo tapes")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".tape.jsonl"))
        .collect();
    tapes.sort();
    for path in tapes {
        let name = path.file_name().unwrap().to_string_lossy().replace(".tape.jsonl", "");
        let bytes = fs::read(&path).expect("tape");
        write("tape", &name, &bytes);
        write("lsp", &name, &bytes);
        let tape = Tape::read(&bytes[..]).expect("a committed tape reads");
        for fact in &tape.facts {
            let mut enc = Vec::new();
            reel::codec::encode_fact(fact, &mut enc).expect("encodes");
            write("fact", &format!("{name}-{}", fact.seq), &enc);
        }
        // One block of all the facts (compressible) and one of the first
        // fact alone (stored plain when compressing does not pay).
        write("block", &format!("{name}-all"), &reel_archive::fuzzing::seal_block(&tape.facts));
        write("block", &format!("{name}-one"), &reel_archive::fuzzing::seal_block(&tape.facts[..1]));
        write("record", &name, &reel_archive::fuzzing::encode_record(&tape.header.run));
        let run = tape.header.run.run_id.clone();
        let requests = [
            Request::Run { run_id: run.clone() },
            Request::Facts { run_id: run.clone(), from: 0, follow: false },
        ];
        for (i, r) in requests.iter().enumerate() {
            write("live", &format!("{name}-request-{i}"), serde_json::to_string(r).unwrap().as_bytes());
        }
        let replies = [Reply::Run(tape.header.run.clone()), Reply::Fact(tape.facts[0].clone())];
        for (i, r) in replies.iter().enumerate() {
            write("live", &format!("{name}-reply-{i}"), serde_json::to_string(r).unwrap().as_bytes());
        }
    }
}
