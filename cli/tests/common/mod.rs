//! Helpers shared by this crate's test binaries (each includes it with
//! `mod common;`); a binary that uses some of them leaves the others
//! unused.
#![allow(dead_code)]

use std::io::BufRead;
use std::path::Path;

/// Copies the directory `from` to `to`, recursively (an archive, say, to
/// damage the copy).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Reads the standard error of `reel mcp record --listen` up to the line
/// that says where it listens (`reel: recording MCP traffic to UPSTREAM at
/// http://ADDR/mcp (...)`); returns that URL, the last one on the line,
/// and everything said until then.
pub fn proxy_url(stderr: &mut impl BufRead) -> (String, String) {
    let mut said = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the proxy never said where it listens: {said}"
        );
        said.push_str(&line);
        if line.starts_with("reel: recording MCP traffic to ") {
            let url = line
                .split_whitespace()
                .rev()
                .find(|w| w.starts_with("http://"))
                .expect("an address")
                .to_owned();
            return (url, said);
        }
    }
}
