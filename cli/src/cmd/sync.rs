//! `reel sync --nats URLS`: the cluster's stream projected into the local
//! archive, where every other verb reads it.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_archive::{Archive, ArchiveConfig};
use reel_nats::NatsConfig;

use crate::failure::{shown, Failure};
use reel_viewer::render::text::counted;

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
    /// Keep following the stream after catching up, serving the projection
    /// live (so `reel tail`, `runs` and `show` read it meanwhile), until
    /// interrupted (Ctrl-C or SIGTERM).
    #[arg(long)]
    follow: bool,
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
    // A projection this sync creates is removed again when the sync fails
    // (the cluster unreachable, say): a failed first sync leaves nothing.
    let fresh =
        !dir.exists() || std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    let archive = open_projection(dir)?;
    let synced = if args.follow {
        follow(&config, &archive, args.consumer.as_deref(), dir)
    } else {
        reel_nats::sync(&config, &archive, args.consumer.as_deref()).map_err(Failure::from)
    };
    let report = match synced {
        Ok(report) => report,
        Err(e) => {
            if fresh {
                drop(archive);
                if std::fs::remove_dir_all(dir).is_ok() {
                    eprintln!(
                        "reel: removed the projection this sync had created at {}",
                        shown(dir)
                    );
                }
            }
            return Err(e);
        }
    };
    writeln!(
        io::stdout().lock(),
        "synced {} ({}, {}, {}) from {} into {}",
        counted(report.messages as u64, "block"),
        counted(report.facts as u64, "fact"),
        counted(report.streams as u64, "run"),
        counted(report.artifacts as u64, "artifact"),
        config.shown(),
        shown(dir)
    )?;
    if report.refused > 0 {
        // Each said by a warning as it was refused; every other run is in.
        eprintln!(
            "reel: refused {} stream {} (damaged, or breaking their run's chain, rules or tenant; see the warnings above); \
             `reel verify --nats` lists them",
            report.refused,
            if report.refused == 1 { "message" } else { "messages" }
        );
        // Damage in the stream, as `verify` says of damage: exit 2.
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--follow`: the projection served live while the stream is followed,
/// until Ctrl-C or SIGTERM.
fn follow(
    config: &NatsConfig,
    archive: &Archive,
    consumer: Option<&str>,
    dir: &Path,
) -> Result<reel_nats::SyncReport, Failure> {
    let rt = super::runtime()?;
    rt.block_on(async {
        let live = reel_archive::live::LiveServer::start(archive.clone()).map_err(|e| {
            Failure::msg(format!(
                "cannot serve the projection live on {}: {e}",
                shown(&dir.join(reel_archive::live::SOCKET_NAME))
            ))
        })?;
        eprintln!(
            "following {} into {}; stop with Ctrl-C",
            config.shown(),
            shown(dir)
        );
        let report = reel_nats::follow(config, archive, consumer, interrupted()).await;
        // A follower of a run gets the last facts landed before it ends.
        live.stop(std::time::Duration::from_secs(1)).await;
        Ok(report?)
    })
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
