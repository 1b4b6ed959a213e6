//! `reel demo`: record the demo runs (and, on request, a slow live one)
//! with the recorder, then show the first.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_recorder::{Recorder, RecorderConfig};
use reel_viewer::render::terminal::escape;
use reel_viewer::render::text::TextRenderer;

use crate::failure::{shown, Failure};
use crate::stream::{Follow, ShowFilter};
use crate::templates::TemplateArgs;
use reel_archive::live::Source;

/// `reel demo`'s arguments.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Afterwards, record a slow live run of this many hops.
    #[arg(long)]
    live_hops: Option<u32>,
    /// Pause between live hops, in milliseconds.
    #[arg(long, default_value_t = 100)]
    live_pause_ms: u64,
    /// Record into this NATS JetStream cluster (comma-separated client
    /// URLs) instead of the archive: the archive is then the cluster's
    /// projection, synced before (so that demo run ids already taken in the
    /// cluster get a suffix; the ids are then claimed in the cluster, so a
    /// demo started at once on another host picks others) and after (to
    /// show the first run).
    #[arg(long, env = reel_nats::NATS_ENV)]
    nats: Option<String>,
    #[command(flatten)]
    templates: TemplateArgs,
}

/// Records the demo into `dir` and shows its first run.
pub fn run(dir: &Path, args: DemoArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let text = text.with_templates(args.templates.load()?);
    let rt = super::runtime()?;
    // Into the cluster: the store and the projection are opened, and the
    // projection synced, outside the runtime (both drive their own).
    let cluster = match &args.nats {
        Some(urls) => {
            let config = super::sync::nats_config(urls)?;
            let archive = super::sync::open_projection(dir)?;
            reel_nats::sync(&config, &archive, None)?;
            let store = reel_nats::NatsStore::connect(config.clone())?;
            let suffix = claim_suffix(&archive, &store)?;
            Some((config, archive, std::sync::Arc::new(store), suffix))
        }
        None => None,
    };
    let (archive, ids) = rt.block_on(async {
        let recorder = match &cluster {
            Some((_, archive, store, _)) => {
                Recorder::with_archive_and_store(archive.clone(), store.clone(), RecorderConfig::default())?
            }
            None => Recorder::open(dir, RecorderConfig::default()).await?,
        };
        let ids = match &cluster {
            Some((.., suffix)) => reel_demo::record_as(&recorder, suffix).await?,
            None => reel_demo::record(&recorder).await?,
        };
        if let Some(hops) = args.live_hops {
            match &args.nats {
                // The facts go to the cluster: a following projection shows
                // them as they land.
                Some(_) => eprintln!(
                    "recording a live run of {hops} hops into the cluster; watch it with: \
                     reel sync --follow --nats URLS --archive PROJECTION, then reel tail --archive PROJECTION"
                ),
                None => eprintln!(
                    "recording a live run of {hops} hops; watch it with: reel tail --archive {}",
                    shown(dir)
                ),
            }
            let id = reel_demo::record_live(&recorder, hops, args.live_pause_ms).await?;
            eprintln!("recorded live run {}", escape(&id));
        }
        let archive = recorder.archive().clone();
        recorder.shutdown().await?;
        Ok::<_, Failure>((archive, ids))
    })?;
    if let Some((config, archive, ..)) = &cluster {
        reel_nats::sync(config, archive, None)?;
    }
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "recorded {} into {}: {}",
        reel_viewer::render::text::counted(ids.len() as u64, "demo run"),
        shown(dir),
        escape(&ids.join(", "))
    )?;
    writeln!(out)?;
    super::show::text(
        &Source::Archive(archive),
        &ids[0],
        &ShowFilter::default(),
        Follow::No,
        text,
        &mut out,
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "next: reel runs --archive {dir}   |   reel show {} --archive {dir}   |   reel show {} --html run.html --archive {dir}",
        escape(&ids[2]),
        escape(&ids[1]),
        dir = shown(dir)
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The suffix of the demo's run ids in a cluster: the first the projection
/// does not hold whose every id this writer could claim in the cluster
/// (another demo writer may have picked the same one from the same
/// projection a moment ago: its claims win, and this one moves on). At
/// most a hundred tries.
fn claim_suffix(
    archive: &reel_archive::Archive,
    store: &reel_nats::NatsStore,
) -> Result<String, Failure> {
    let mut suffix = reel_demo::free_suffix(archive, "");
    for _ in 0..100 {
        let mut all = true;
        for (id, name) in reel_demo::run_ids(&suffix).iter().zip(reel_demo::RUN_NAMES) {
            if !store.reserve(id, reel_demo::tenant_of(name))? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(suffix);
        }
        suffix = reel_demo::free_suffix(archive, &reel_demo::next_suffix(&suffix));
    }
    Err(Failure::msg(format!(
        "no free demo run ids in the cluster after {suffix}: sync the projection (`reel sync`) and try again"
    )))
}
