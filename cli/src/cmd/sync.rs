//! `reel sync --nats URLS`: the cluster's stream projected into the local
//! archive, where every other verb reads it.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_archive::{Archive, ArchiveConfig};
use reel_nats::NatsConfig;

use crate::failure::{shown, Failure};

/// `reel sync`'s arguments.
#[derive(Args, Debug)]
pub struct SyncArgs {
    /// The cluster's client URLs, comma-separated (nats://h1:4222,nats://h2:4222).
    #[arg(long, env = reel_nats::NATS_ENV)]
    nats: String,
    /// The durable consumer that remembers how far this projection got
    /// (default: `reel-sync-<id>`, after the projection's own id, which
    /// the first sync keeps beside the archive's database).
    #[arg(long)]
    consumer: Option<String>,
}

/// The cluster named by `--nats` / `REEL_NATS`.
pub fn nats_config(urls: &str) -> Result<NatsConfig, Failure> {
    Ok(NatsConfig::from_urls(urls)?)
}

/// Opens (or creates) the projection's archive.
pub fn open_projection(dir: &Path) -> Result<Archive, Failure> {
    Ok(Archive::open(dir, ArchiveConfig::default())?)
}

/// Projects the stream into `dir`, up to where the stream stood when the
/// sync began; a later sync resumes there.
pub fn run(dir: &Path, args: SyncArgs) -> Result<ExitCode, Failure> {
    let config = nats_config(&args.nats)?;
    let archive = open_projection(dir)?;
    let report = reel_nats::sync(&config, &archive, args.consumer.as_deref())?;
    writeln!(
        io::stdout().lock(),
        "synced {} blocks ({} facts, {} runs, {} artifacts) from {} into {}",
        report.messages,
        report.facts,
        report.streams,
        report.artifacts,
        config.shown(),
        shown(dir)
    )?;
    Ok(ExitCode::SUCCESS)
}
