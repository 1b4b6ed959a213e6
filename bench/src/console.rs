//! The `console` rows: the real `reel serve`, timed and weighed as an
//! operator's browser meets it.
//!
//! - The runs table's first page (`GET /`, the whole answer read) on an
//!   archive of 100,000 runs, the first request a fresh `reel serve`
//!   answers, against `reel runs --json` (its first page of 50) on the same
//!   archive until it exits.
//! - A 1,000,000-fact run's first screen (`GET /runs/big`, the whole answer
//!   read), the first look of a fresh `reel serve`, against `reel show big`
//!   until its first line reaches the pipe.
//! - Peak RSS (VmHWM) of `reel serve` while 50 clients at once each read
//!   the runs table, a filtered view and run pages, against the same
//!   requests from one client to a server of its own.
//!
//! Starting `reel serve` (it opens a scratch copy of the archive) is never
//! timed: each side's server prints its address before the clock starts.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `reel serve` child on a free loopback port; killed on drop.
pub struct Served {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _out: BufReader<std::process::ChildStdout>,
}

impl Served {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `reel serve` over `archive` and waits for the address it prints.
pub fn serve(bin: &Path, archive: &Path, config: &Path) -> io::Result<Served> {
    let mut child = Command::new(bin)
        .arg("--archive")
        .arg(archive)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env(reel_archive::CONFIG_DIR_ENV, config)
        .env_remove(reel_archive::KEY_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line)?;
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .map(|a| a.trim_end_matches('/').to_owned())
        .ok_or_else(|| {
            io::Error::other(format!(
                "`{} serve` printed no address: {line:?}",
                bin.display()
            ))
        })?;
    Ok(Served {
        child,
        addr,
        _out: out,
    })
}

/// `GET path` to the console at `addr`, the whole answer read: the time
/// and the answer's length; an answer other than 200 is an error.
pub fn get(addr: &str, path: &str) -> io::Result<(Duration, usize)> {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(300)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let took = started.elapsed();
    if !answer.starts_with(b"HTTP/1.1 200") {
        let head = String::from_utf8_lossy(&answer[..answer.len().min(200)]).into_owned();
        return Err(io::Error::other(format!("GET {path}: {head}")));
    }
    Ok((took, answer.len()))
}

/// Runs `reel runs --json` (its first page of 50) to its end: the time.
pub fn runs_json(bin: &Path, archive: &Path, config: &Path) -> io::Result<Duration> {
    let started = Instant::now();
    let out = Command::new(bin)
        .arg("--archive")
        .arg(archive)
        .args(["runs", "--json"])
        .env(reel_archive::CONFIG_DIR_ENV, config)
        .env_remove(reel_archive::KEY_ENV)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()?;
    let took = started.elapsed();
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`reel runs --json` failed: {}",
            out.status
        )));
    }
    Ok(took)
}

/// The requests each client makes, in turn: the runs table, a view
/// filtered beyond the indexes, its older page, and run pages.
pub fn client_paths(runs: usize, client: usize, requests: usize) -> Vec<String> {
    (0..requests)
        .map(|k| match k % 4 {
            0 => "/".to_owned(),
            1 => format!("/?principal=user-{}", (client + k) % 97),
            2 => "/?status=failed&q=deploy".to_owned(),
            _ => format!(
                "/runs/run-{:07}",
                (client * 7919 + k * 104_729) % runs.max(1)
            ),
        })
        .collect()
}

/// Peak resident memory (VmHWM) of process `pid`, in bytes.
pub fn peak_rss(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| io::Error::other(format!("no VmHWM in /proc/{pid}/status")))
}

/// Starts a server over `archive`, has `clients` clients (threads) make
/// their requests at once, and returns its peak RSS and the requests
/// answered.
pub fn weigh(
    bin: &Path,
    archive: &Path,
    config: &Path,
    runs: usize,
    clients: usize,
    requests: usize,
) -> io::Result<(u64, usize)> {
    let served = serve(bin, archive, config)?;
    let answered = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let addr = served.addr.clone();
                scope.spawn(move || -> io::Result<usize> {
                    for path in client_paths(runs, c, requests) {
                        get(&addr, &path)?;
                    }
                    Ok(requests)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a client panicked")))
            })
            .sum::<io::Result<usize>>()
    })?;
    Ok((peak_rss(served.pid())?, answered))
}
