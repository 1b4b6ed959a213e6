//! One fact of a run's page: its anchor (`seq-N`, the CLI's seq), its
//! line as `reel show` words it, and the inspector: its fields, its raw
//! JSON, and the `reel show` command that shows it, to copy.

use super::*;

/// What a `reel show` command of this console names: the archive (an
/// absolute path) and the run, each quoted for a POSIX shell.
pub(super) struct ShowCommand {
    prefix: String,
}

impl ShowCommand {
    pub(super) fn new(archive: &std::path::Path, run_id: &str) -> ShowCommand {
        let archive = std::path::absolute(archive).unwrap_or_else(|_| archive.to_path_buf());
        ShowCommand {
            prefix: format!(
                "reel show --archive {} {}",
                sh_quote(&archive.to_string_lossy()),
                sh_quote(run_id)
            ),
        }
    }

    /// The whole run.
    pub(super) fn run(&self) -> String {
        format!("{} --color never", self.prefix)
    }

    /// A fact: the facts of its kind (and call), which list it by its seq.
    pub(super) fn fact(&self, fact: &Fact) -> String {
        let mut cmd = format!(
            "{} --color never --kind {}",
            self.prefix,
            sh_quote(fact.kind.name())
        );
        if let Some(call) = &fact.call {
            let _ = write!(cmd, " --call {}", sh_quote(call));
        }
        cmd
    }
}

/// `text` as one word of a POSIX shell: as is when it holds only
/// characters no shell treats specially, else in single quotes.
pub(super) fn sh_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// A command shown with its copy button (`run.js` copies the `<code>`'s
/// text).
pub(super) fn command(out: &mut String, cmd: &str, what: &str) {
    let _ = write!(
        out,
        "<span class=\"show-cmd\"><code class=\"cmd\">{}</code> <button type=\"button\" \
         class=\"copy\" data-what=\"{what}\">copy as a <code>reel show</code> command</button></span>",
        escape(cmd)
    );
}

/// One fact: its anchor, its line, the inspector (fields, raw JSON, the
/// command).
pub(super) fn fact_item(
    out: &mut String,
    fact: &Fact,
    tool: &str,
    line: &str,
    show: &ShowCommand,
    run_href: &str,
) {
    let json = serde_json::to_value(fact).unwrap_or_default();
    let kind = json["kind"].as_str().unwrap_or("").to_owned();
    let call = fact.call.as_deref().unwrap_or("");
    let _ = write!(
        out,
        "<li class=\"fact\" id=\"seq-{seq}\" data-seq=\"{seq}\" data-kind=\"{k}\" data-call=\"{c}\">\
         <div class=\"fact-head\"><a class=\"mono anchor\" href=\"#seq-{seq}\">#{seq}</a> \
         <span class=\"mono muted\">+{t}</span> <span class=\"kind\">{k}</span> ",
        seq = fact.seq,
        k = escape(&kind),
        c = escape(call),
        t = escape(&duration(fact.offset)),
    );
    if !call.is_empty() {
        let _ = write!(
            out,
            "<span class=\"mono\">{}</span> <b>{}</b> ",
            escape(call),
            escape(tool)
        );
    }
    let _ = write!(
        out,
        "<span class=\"fact-line\">{}</span></div><details class=\"inspect\"><summary>fields</summary>\
         <table class=\"fields\"><tr><th>seq</th><td>{}</td></tr><tr><th>at</th><td>{}</td></tr>\
         <tr><th>offset</th><td>+{}</td></tr><tr><th>kind</th><td>{}</td></tr>",
        escape(line),
        fact.seq,
        escape(&timestamp(fact.at)),
        escape(&duration(fact.offset)),
        escape(&kind),
    );
    if !call.is_empty() {
        let _ = write!(
            out,
            "<tr><th>call</th><td class=\"mono\">{}</td></tr>",
            escape(call)
        );
    }
    let fields: BTreeMap<String, serde_json::Value> = match &json["data"] {
        serde_json::Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => BTreeMap::new(),
    };
    for (name, value) in &fields {
        let shown = match value {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let _ = write!(
            out,
            "<tr><th>{}</th><td class=\"mono\">{}</td></tr>",
            escape(name),
            escape(&shown)
        );
    }
    out.push_str("</table>");
    if super::artifact::names_artifact(fact) {
        let _ = write!(
            out,
            "<p><a class=\"open-artifact\" href=\"{}/artifacts/{}\">open the artifact</a></p>",
            escape(run_href),
            fact.seq
        );
    }
    out.push_str("<p class=\"fact-cmd\">");
    command(out, &show.fact(fact), "fact");
    out.push_str("</p>");
    let raw = serde_json::to_string_pretty(&json).unwrap_or_default();
    let _ = writeln!(
        out,
        "<pre class=\"raw\">{}</pre></details></li>",
        escape(&raw)
    );
}

#[cfg(test)]
mod tests {
    use super::sh_quote;

    #[test]
    fn shell_words() {
        for (text, word) in [
            ("demo-deploy", "demo-deploy"),
            ("/tmp/a b", "'/tmp/a b'"),
            ("it's", "'it'\\''s'"),
            ("", "''"),
            ("$(rm -rf /)", "'$(rm -rf /)'"),
            ("a\nb", "'a\nb'"),
        ] {
            assert_eq!(sh_quote(text), word, "{text:?}");
        }
    }
}
