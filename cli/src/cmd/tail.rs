//! `reel tail`: follow a run's facts as they land, until it ends.

use std::io;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::text::TextRenderer;

use crate::failure::Failure;
use crate::stream::{newest_run, Follow, Newest, ShowFilter};
use crate::templates::TemplateArgs;
use reel_archive::live::Source;

/// `reel tail`'s arguments.
#[derive(Args, Debug)]
pub struct TailArgs {
    /// The run to follow.
    run: Option<String>,
    #[command(flatten)]
    templates: TemplateArgs,
}

/// Shows the run (the newest running one, else the newest), following it
/// while a live recorder can still add facts.
pub fn run(dir: &Path, args: TailArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let text = text.with_templates(args.templates.load()?);
    let source = crate::source::open(dir)?;
    let run_id = match args.run {
        Some(r) => r,
        None => newest_run(&source, Newest::RunningFirst)?,
    };
    // Only a live recorder can add facts: a closed archive shows what it has.
    let follow = if matches!(source, Source::Live { .. }) {
        Follow::AsFactsLand
    } else {
        Follow::No
    };
    super::show::text(
        &source,
        &run_id,
        &ShowFilter::default(),
        follow,
        text,
        io::stdout().lock(),
    )
}
