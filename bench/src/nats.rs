//! The `nats` row: recording into a JetStream cluster with call-boundary
//! durability (reel's [`NatsStore`] under the recorder), against raw
//! `async-nats` publishes of the same bytes (the very blocks reel
//! published, read back from the stream untimed) with the same headers and
//! the same acks (each publish carries a message id and the subject's
//! expected last sequence, and its ack is awaited before the run's next
//! block, the runs concurrent: the round trips reel's one-block-in-flight
//! per run pays, with nothing else in between). Like reel's store, the
//! baseline sends a publish again when the stream leader answers that the
//! subject's previous message is still in process
//! ([`reel_nats::subject_in_flight`]: an ack can outrun the leader's
//! bookkeeping); without that it failed about one bench run in three.
//!
//! Each round also prints where the CPU went ([`Cpu`]): this process's and
//! the nats-servers', for reel's side and for the raw side's timed part,
//! the two sharing the machine's cores.
//!
//! What the baseline leaves out is reel's own work: building, redacting,
//! encoding and sealing the facts, the recorder's writer, each run's claim
//! and record in the KV bucket (two round trips per run), and the calls
//! waiting for their flush.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::{self, stream};
use reel_archive::{Archive, ArchiveConfig};
use reel_nats::{NatsConfig, NatsStore};
use reel_recorder::{Recorder, RunStart};

use crate::record::{recorder_config, Recorded};
use crate::workload::{self, Shape};

/// CPU seconds (user + system) used so far by this process and by every
/// `nats-server` process on the machine, read from `/proc` (Linux): how a
/// round's wall time splits between reel's own work and the cluster's, on
/// cores they share. `None` where `/proc` cannot be read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// This process.
    pub bench: f64,
    /// Every `nats-server` process.
    pub servers: f64,
}

impl Cpu {
    /// The figures now.
    pub fn now() -> Option<Cpu> {
        let tick = 100.0; // USER_HZ, 100 on every Linux ABI
        let used = |pid: &str| -> Option<f64> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields after the parenthesised command: state is field 3,
            // utime 14 and stime 15.
            let rest = &stat[stat.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            Some((f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?) as f64 / tick)
        };
        let mut servers = 0.0;
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let pid = e.file_name();
            let Some(pid) = pid
                .to_str()
                .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim_end() == "nats-server" {
                servers += used(pid).unwrap_or(0.0);
            }
        }
        Some(Cpu {
            bench: used("self")?,
            servers,
        })
    }

    /// What was used since `before`.
    pub fn since(self, before: Cpu) -> Cpu {
        Cpu {
            bench: self.bench - before.bench,
            servers: self.servers - before.servers,
        }
    }
}

/// What one reel round published: the stream sequences it took.
pub struct Published {
    /// The recording's figures.
    pub recorded: Recorded,
    /// Stream sequences of its blocks: `first..=last`.
    pub first: u64,
    /// See `first`.
    pub last: u64,
    /// Publishes the store sent again because the subject's previous
    /// block was still in process (see [`reel_nats::subject_in_flight`]).
    pub retries: u64,
}

fn runtime(workers: usize) -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
}

async fn connect(urls: &str) -> io::Result<async_nats::Client> {
    let addrs: Vec<async_nats::ServerAddr> = urls
        .split(',')
        .map(|u| u.trim().parse())
        .collect::<Result<_, _>>()?;
    async_nats::connect(addrs).await.map_err(io::Error::other)
}

async fn last_seq(urls: &str) -> io::Result<u64> {
    let client = connect(urls).await?;
    let js = jetstream::new(client);
    let mut s = js.get_stream("REEL").await.map_err(io::Error::other)?;
    Ok(s.info()
        .await
        .map_err(io::Error::other)?
        .state
        .last_sequence)
}

/// Records the workload into the cluster at `urls` (run ids prefixed with
/// `tag`, unique per round: the cluster keeps every run), timed from the
/// first `start_run` until `shutdown` returns.
pub fn reel(urls: &str, tag: &str, shape: Shape, workers: usize) -> io::Result<Published> {
    let store = Arc::new(
        NatsStore::connect(NatsConfig::from_urls(urls).map_err(io::Error::other)?)
            .map_err(io::Error::other)?,
    );
    let scratch = tempfile::tempdir()?;
    let archive =
        Archive::open(scratch.path(), ArchiveConfig::default()).map_err(io::Error::other)?;
    let rt = runtime(workers)?;
    rt.block_on(async {
        let before = last_seq(urls).await?;
        let recorder = Recorder::with_archive_and_store(archive, store.clone(), recorder_config())
            .map_err(io::Error::other)?;
        let started = Instant::now();
        crate::record::drive(&recorder, shape, |r| {
            RunStart::new(format!("{tag}-{}", workload::run_id(r)))
        })
        .await?;
        recorder.shutdown().await.map_err(io::Error::other)?;
        let elapsed = started.elapsed();
        let last = last_seq(urls).await?;
        Ok(Published {
            recorded: Recorded {
                facts: shape.facts(),
                elapsed,
            },
            first: before + 1,
            last,
            retries: store.stats().in_flight,
        })
    })
}

/// Publishes the blocks of `published` again, raw, to a bench stream of
/// the same configuration (R3, file storage), subject by subject as reel
/// did: each run's blocks in order, each ack awaited before the next, the
/// runs concurrent. Timed from the first publish to the last ack.
/// Also returns the CPU the timed part used ([`Cpu`]).
pub fn raw(
    urls: &str,
    tag: &str,
    published: &Published,
    workers: usize,
) -> io::Result<(Recorded, Option<Cpu>)> {
    let rt = runtime(workers)?;
    rt.block_on(async {
        let js = jetstream::new(connect(urls).await?);
        let source = js.get_stream("REEL").await.map_err(io::Error::other)?;
        js.get_or_create_stream(stream::Config {
            name: "REELBENCH".into(),
            subjects: vec!["reelbench.>".into()],
            num_replicas: 3,
            storage: stream::StorageType::File,
            duplicate_window: std::time::Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(io::Error::other)?;
        // The same bytes, read back untimed, grouped by run in order.
        let mut by_subject: Vec<(String, Vec<bytes::Bytes>)> = Vec::new();
        for seq in published.first..=published.last {
            let msg = source
                .get_raw_message(seq)
                .await
                .map_err(io::Error::other)?;
            // Only the blocks (not the KV and object buckets' messages,
            // which live in their own streams anyway).
            let subject = format!("reelbench.{tag}.{}", msg.subject);
            match by_subject.iter_mut().find(|(s, _)| *s == subject) {
                Some((_, v)) => v.push(msg.payload),
                None => by_subject.push((subject, vec![msg.payload])),
            }
        }
        let facts: usize = by_subject
            .iter()
            .flat_map(|(_, v)| v)
            .map(|b| reel_archive::wire::open_block(b).map_or(0, |b| b.facts.len()))
            .sum();
        let cpu = Cpu::now();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (subject, blocks) in by_subject {
            let js = js.clone();
            tasks.push(tokio::spawn(async move {
                // As reel publishes: the subject's expected last sequence
                // is the previous block's ack (0: none yet).
                let mut last = 0;
                for (i, block) in blocks.into_iter().enumerate() {
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert(
                        async_nats::header::NATS_MESSAGE_ID,
                        format!("{subject}:{i}").as_str(),
                    );
                    headers.insert(
                        async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
                        last.to_string().as_str(),
                    );
                    // Sent again while the leader still holds the
                    // previous block in process (as reel's store does).
                    let mut attempt = 0;
                    last = loop {
                        let ack = js
                            .publish_with_headers(subject.clone(), headers.clone(), block.clone())
                            .await
                            .map_err(io::Error::other)?
                            .await;
                        match ack {
                            Ok(ack) => break ack.sequence,
                            Err(e) if reel_nats::subject_in_flight(&e) && attempt < 10 => {
                                tokio::time::sleep(std::time::Duration::from_millis(
                                    1 << attempt.min(5),
                                ))
                                .await;
                                attempt += 1;
                            }
                            Err(e) => return Err(io::Error::other(e)),
                        }
                    };
                }
                Ok::<_, io::Error>(())
            }));
        }
        for t in tasks {
            t.await.map_err(io::Error::other)??;
        }
        let elapsed = started.elapsed();
        let cpu = Cpu::now()
            .zip(cpu)
            .map(|(after, before)| after.since(before));
        Ok((Recorded { facts, elapsed }, cpu))
    })
}
