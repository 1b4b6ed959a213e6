//! `--template` / `--templates`: the wording of progress lines (seed 000's
//! template keys), for every verb that shows facts.

use std::path::PathBuf;

use clap::Args;
use reel_viewer::display::ProgressTemplates;

use crate::failure::Failure;

/// The wording of progress lines (seed 000's template keys).
#[derive(Args, Debug, Default, Clone)]
pub struct TemplateArgs {
    /// Word progress lines with a template (repeatable; after --templates,
    /// so it wins). KEY is tool.progress (a report with a message),
    /// tool.progress.generic (one without), or either followed by
    /// .TOOL for one tool; TEXT may use {tool}, {count} and {message}
    /// (not in generic lines), {{ and }} for braces.
    /// Example: --template 'tool.progress={tool}: {message}'
    #[arg(long = "template", value_name = "KEY=TEXT")]
    template: Vec<String>,
    /// Read templates from a JSON object of KEY to TEXT, e.g.
    /// {"tool.progress.generic": "{tool} is working ({count})"}.
    #[arg(long = "templates", value_name = "FILE")]
    templates: Option<PathBuf>,
}

impl TemplateArgs {
    /// The templates asked for: the file's, then each --template in order.
    /// Bad input is refused before anything is read or shown.
    pub fn load(&self) -> Result<ProgressTemplates, Failure> {
        let mut t = ProgressTemplates::default();
        if let Some(path) = &self.templates {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::msg(format!(
                    "--templates {}: cannot read it: {e}; give a JSON file of template key to text",
                    path.display()
                ))
            })?;
            t.set_json(&text)
                .map_err(|e| Failure::msg(format!("--templates {}: {e}", path.display())))?;
        }
        for arg in &self.template {
            let Some((key, text)) = arg.split_once('=') else {
                return Err(Failure::msg(format!(
                    "--template {arg:?}: expected KEY=TEXT, e.g. --template 'tool.progress={{tool}}: {{message}}'"
                )));
            };
            t.set(key, text)
                .map_err(|e| Failure::msg(format!("--template {arg:?}: {e}")))?;
        }
        Ok(t)
    }
}
