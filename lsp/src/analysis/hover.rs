//! Hovers (a fact's kind, seq, call, timing, its data and what it
//! points at) and go-to-definition (an artifact get to its put).

use super::symbols::call_summary;
use super::*;

/// The hover of a line: for a fact, its kind, call and tool, offset from
/// the run's start, the call's duration, the progress display line and
/// the payload pretty-printed (with what was redacted when recorded).
pub fn hover(view: View<'_>, pos: Position, enc: Encoding) -> Option<Hover> {
    let n = line_at(view, pos, enc)?;
    let text = match view.lines[n].parsed() {
        Parsed::Fact(f) => fact_hover(view, n, f),
        Parsed::Header(h) => {
            let t = &view.index.timeline;
            let what = match &h.run.outside_run {
                None => format!("run {}", code(&h.run.run_id)),
                Some(call) => format!(
                    "no run · call {} (kept as {})",
                    code(call),
                    code(&h.run.run_id)
                ),
            };
            let mut s = format!(
                "**tape** {} · {what} · {}\n\n",
                code(&h.format),
                escape(h.run.state.as_str())
            );
            let _ = writeln!(
                s,
                "The header says {} facts and {} calls; this document holds {} facts and {} calls.",
                h.run.facts,
                h.run.calls,
                t.facts,
                t.calls.len()
            );
            let _ = write!(s, "\nStarted {}", timestamp(h.run.started_at));
            if let Some(end) = h.run.ended_at {
                let _ = write!(
                    s,
                    ", took {}",
                    duration(end.saturating_sub(h.run.started_at).max(0) as u64)
                );
            }
            s.push('.');
            s
        }
        Parsed::Artifact { digest, size } => {
            let mut s = format!("**artifact** {} · {size} B", code(digest));
            let puts = view.index.puts_of_digest(digest);
            if let Some(&p) = puts.first() {
                let _ = write!(s, "\n\nPut on line {}", p + 1);
                if let Some(FactKind::ArtifactPut(a)) = view.lines[p].fact().map(|f| &f.kind) {
                    let _ = write!(
                        s,
                        " as {} ({})",
                        code(&a.meta.id),
                        escape(&a.meta.media_type)
                    );
                }
                s.push('.');
            }
            s
        }
        Parsed::Blank | Parsed::Invalid { .. } => return None,
    };
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: Some(line_range(view, n, enc)),
    })
}

fn fact_hover(view: View<'_>, n: usize, f: &Fact) -> String {
    let ix = view.index;
    let call = ix.call_of_line(n);
    let mut s = format!("**{}** #{}", escape(f.kind.name()), f.seq);
    match (&f.call, call) {
        (Some(id), Some(c)) => {
            let _ = write!(s, " · call {} · tool {}", code(id), code(&c.tool));
            if let Some(p) = &c.parent_call {
                let _ = write!(s, " · dispatched by {}", code(p));
            }
        }
        (Some(id), None) => {
            let _ = write!(s, " · call {} (which has not started above)", code(id));
        }
        (None, _) => s.push_str(" · run-level"),
    }
    let _ = write!(s, "\n\n+{} from the run's start", duration(f.offset));
    if let Some(c) = call.filter(|c| c.started != n) {
        let _ = write!(
            s,
            " (+{} into the call)",
            duration(f.offset.saturating_sub(c.started_offset))
        );
    }
    let _ = write!(s, " · {}", timestamp(f.at));

    match &f.kind {
        FactKind::CallStarted(c) => {
            let _ = write!(
                s,
                "\n\nCall {}: {}",
                code(&c.call_id),
                escape(&call_summary(ix.timeline_call(&c.call_id)))
            );
            if let Some(inv) = &c.invocation_id {
                let _ = write!(s, " · invocation {}", code(inv));
            }
            match &c.spec {
                Some(spec) => spec_hover(&mut s, spec),
                None => {
                    let _ = write!(
                        s,
                        "\n\nNo tool spec: the tool declared nothing about itself"
                    );
                }
            }
        }
        FactKind::CallEnded(e) => {
            let how = match &e.outcome {
                CallOutcome::Ok { .. } => "ok".to_owned(),
                CallOutcome::Error { error, .. } => format!("with an error: {}", cut(error, 200)),
                CallOutcome::Aborted { reason } => match reason {
                    Some(r) => format!("aborted: {}", cut(r, 200)),
                    None => "aborted".to_owned(),
                },
            };
            let _ = write!(
                s,
                "\n\nThe call took {} and ended {}",
                duration(e.duration_ns),
                escape(&how)
            );
        }
        FactKind::ArtifactGet(g) => {
            let made = source_of_get(view, n, g).map(|l| (l, view.lines[l].fact()));
            let _ = match made {
                Some((l, Some(put))) => write!(
                    s,
                    "\n\nMade by the {} on line {}",
                    escape(put.kind.name()),
                    l + 1
                ),
                Some((l, None)) => write!(s, "\n\nIts bytes are on line {}", l + 1),
                None if g.meta.is_none() => write!(s, "\n\nThe store had no such artifact"),
                None => write!(s, "\n\nNot put in this tape"),
            };
        }
        FactKind::Progress(p) => {
            let tool = call.map_or("", |c| c.tool.as_str());
            let _ = write!(
                s,
                "\n\nShown as: {}",
                escape(&progress_line(tool, &p.payload, p.count))
            );
        }
        FactKind::Unknown { .. } => {
            s.push_str("\n\nA kind this reel does not know (written by a newer reel): its fields are kept as they are.");
        }
        _ => {}
    }

    let data = serde_json::to_value(f)
        .ok()
        .and_then(|mut v| v.get_mut("data").map(Value::take))
        .unwrap_or(Value::Null);
    let mut marks = Marks::default();
    marks.walk(&data, &mut String::new());
    if !marks.redacted.is_empty() {
        let _ = write!(
            s,
            "\n\nRedacted when recorded (the secret was never stored), shown as {}: {}",
            code(MARKER),
            list(&marks.redacted)
        );
    }
    if !marks.artifacts.is_empty() {
        let _ = write!(
            s,
            "\n\nStored as artifacts (too large to keep inline): {}",
            list(&marks.artifacts)
        );
    }
    if !marks.nested.is_empty() {
        let _ = write!(
            s,
            "\n\nNested too deep to keep as JSON, kept as JSON text: {}",
            list(&marks.nested)
        );
    }
    let pretty = serde_json::to_string_pretty(&data).unwrap_or_default();
    let pretty = cut(&pretty, HOVER_PAYLOAD_LIMIT);
    let fence = "`".repeat(longest_run(&pretty, '`').max(2) + 1);
    let _ = write!(s, "\n\n{fence}json\n{pretty}\n{fence}");
    s
}

/// Where a payload holds redaction markers, artifact references and
/// capped subtrees (as JSON pointers).
#[derive(Default)]
struct Marks {
    redacted: Vec<String>,
    artifacts: Vec<String>,
    nested: Vec<String>,
}

impl Marks {
    const MAX: usize = 20;

    fn walk(&mut self, v: &Value, path: &mut String) {
        if self.redacted.len() + self.artifacts.len() + self.nested.len() > 3 * Self::MAX {
            return;
        }
        match v {
            Value::String(s) if reel_core::marker::holds_marker_str(s) => {
                push_max(&mut self.redacted, pointer(path))
            }
            Value::Object(map) => {
                if let Some(Value::String(d)) = map.get(ARTIFACT_REF) {
                    push_max(&mut self.artifacts, format!("{} → {}", pointer(path), d));
                }
                if map.contains_key(NESTED) {
                    push_max(&mut self.nested, pointer(path));
                }
                for (k, item) in map {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    self.walk(item, path);
                    path.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    let _ = write!(path, "/{i}");
                    self.walk(item, path);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
}

fn push_max(list: &mut Vec<String>, item: String) {
    if list.len() < Marks::MAX {
        list.push(item);
    }
}

fn pointer(path: &str) -> String {
    if path.is_empty() {
        "/".into()
    } else {
        path.into()
    }
}

/// The hover's section on a call's tool spec: title and name, the
/// description, the annotations, mode, needs, wants and the input's
/// members (the whole spec is in the payload below).
fn spec_hover(s: &mut String, spec: &reel_core::spec::ToolSpec) {
    let _ = write!(s, "\n\n**Tool spec** {}", code(&spec.name));
    if let Some(t) = &spec.title {
        let _ = write!(s, " · {}", escape(&cut(t, 200)));
    }
    if let Some(id) = &spec.id {
        let _ = write!(s, " · id {}", code(id));
    }
    if let Some(d) = &spec.description {
        let _ = write!(s, "\n\n{}", escape(&cut(d, 500)));
    }
    let mode = match spec.mode {
        CallMode::Sync => "sync",
        CallMode::Async => "async",
    };
    let _ = write!(s, "\n\nMode {mode}");
    match spec.annotations.map(|a| a.words()) {
        Some(words) if !words.is_empty() => {
            let _ = write!(s, " · {}", words.join(", "));
        }
        _ => s.push_str(" · no annotations"),
    }
    if !spec.needs.is_empty() {
        let _ = write!(s, " · needs {}", list(&spec.needs));
    }
    if !spec.wants.is_empty() {
        let _ = write!(s, " · wants {}", list(&spec.wants));
    }
    if let Some(props) = spec
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    {
        let names: Vec<String> = props.keys().cloned().collect();
        let _ = write!(s, "\n\nInput: {}", list(&names));
        if let Some(required) = spec.input_schema.get("required").and_then(Value::as_array) {
            let required: Vec<String> = required
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if !required.is_empty() {
                let _ = write!(s, " (required: {})", list(&required));
            }
        }
    }
}

fn list(items: &[String]) -> String {
    items.iter().map(|i| code(i)).collect::<Vec<_>>().join(", ")
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for ch in s.chars() {
        if ch == c {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// Inline code that holds any text (recorded strings are untrusted).
fn code(s: &str) -> String {
    let s = cut(&s.replace(['\n', '\r'], " "), 200);
    let fence = "`".repeat(longest_run(&s, '`') + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// Markdown text (never at the start of a line) with the characters that
/// could make markup escaped: emphasis, code, links, HTML, tables.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '<' | '>' | '~' | '&' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(ch),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Definition
// ---------------------------------------------------------------------------

/// Where a line's fact comes from: `artifact.get` → the `artifact.put` that
/// made it (by digest, else by id; the last one above, else the first
/// below); a child's `call.started` → its parent's `call.started` (the
/// dispatching call); every other fact of a call (`call.ended` included) →
/// its `call.started`; `run.ended` → `run.started`. Returns the target
/// line.
pub fn definition(view: View<'_>, pos: Position, enc: Encoding) -> Option<usize> {
    let n = line_at(view, pos, enc)?;
    let ix = view.index;
    let f = view.lines[n].fact()?;
    match &f.kind {
        FactKind::ArtifactGet(g) => {
            if let Some(line) = source_of_get(view, n, g) {
                return Some(line);
            }
        }
        FactKind::CallStarted(c) => {
            return ix.call(c.parent_call.as_deref()?).map(|p| p.started);
        }
        FactKind::RunEnded(_) => return ix.run_started,
        _ => {}
    }
    ix.call_of_line(n)
        .map(|c| c.started)
        .or_else(|| ix.call(f.call.as_deref()?).map(|c| c.started))
        .filter(|&l| l != n)
}

/// The line that made what an `artifact.get` on line `n` fetched: the
/// `artifact.put` of its digest (else of its id), the last one above `n`,
/// else the first below; failing that, the artifact line of its bytes.
fn source_of_get(view: View<'_>, n: usize, g: &ArtifactGet) -> Option<usize> {
    let ix = view.index;
    let pick = |lines: &[usize]| {
        lines
            .iter()
            .rev()
            .find(|&&l| l < n)
            .or_else(|| lines.first())
            .copied()
    };
    g.meta
        .as_ref()
        .and_then(|m| pick(ix.puts_of_digest(&m.digest)))
        .or_else(|| pick(ix.puts_of_id(&g.id)))
        .or_else(|| g.meta.as_ref().and_then(|m| ix.artifact_line(&m.digest)))
}

// ---------------------------------------------------------------------------
// Folding
// ---------------------------------------------------------------------------
