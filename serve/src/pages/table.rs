//! `/`: the runs table, newest first, filtered as the archive's listing
//! answers, a page at a time.

use super::*;

/// The runs table's query: every filter the archive's listing answers.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RunsQuery {
    status: Option<String>,
    tenant: Option<String>,
    tool: Option<String>,
    cursor: Option<String>,
}

fn some(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(Into::into)
}

impl RunsQuery {
    fn filter(&self) -> Result<RunFilter, String> {
        let status = match some(&self.status) {
            None => None,
            Some(s) => Some(s.parse::<RunState>().map_err(|_| {
                format!(
                    "unknown status {s:?}: use one of {}",
                    RunState::ALL.map(|s| s.as_str()).join(", ")
                )
            })?),
        };
        Ok(RunFilter {
            tenant: some(&self.tenant),
            tool: some(&self.tool),
            status,
            limit: Some(RUNS_PER_PAGE),
            cursor: some(&self.cursor).map(Cursor),
            ..RunFilter::default()
        })
    }

    /// This query's address with `cursor` in place of its own.
    fn href(&self, cursor: Option<&str>) -> String {
        let mut parts = Vec::new();
        for (name, value) in [
            ("status", some(&self.status)),
            ("tenant", some(&self.tenant)),
            ("tool", some(&self.tool)),
            ("cursor", cursor.map(Into::into)),
        ] {
            if let Some(v) = value {
                parts.push(format!("{name}={}", fragment(&v)));
            }
        }
        if parts.is_empty() {
            "/".into()
        } else {
            format!("/?{}", parts.join("&"))
        }
    }
}

/// `/`: the runs, newest first, a page at a time.
pub(crate) async fn runs(
    State(console): State<Arc<Console>>,
    Query(query): Query<RunsQuery>,
) -> Response {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(why) => return error_page(StatusCode::BAD_REQUEST, &why),
    };
    let reader = console.reader();
    let listed = blocking(move || reader.list_runs(&filter).map_err(read_error)).await;
    let listed = match listed {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let mut body = String::new();
    body.push_str("<header class=\"panel\"><h1>Runs</h1>\n");
    let _ = write!(
        body,
        "<p class=\"muted mono\">{}</p>\n<form class=\"filters\" method=\"get\" action=\"/\">\
         <label>status <select name=\"status\"><option value=\"\">any</option>",
        escape(&console.dir().display().to_string())
    );
    let chosen = some(&query.status);
    for s in RunState::ALL {
        let _ = write!(
            body,
            "<option{}>{}</option>",
            if chosen.as_deref() == Some(s.as_str()) {
                " selected"
            } else {
                ""
            },
            s.as_str()
        );
    }
    let _ = write!(
        body,
        "</select></label> <label>tenant <input name=\"tenant\" value=\"{}\"></label> \
         <label>tool <input name=\"tool\" value=\"{}\"></label> <button>Filter</button> \
         <a href=\"/\">clear</a></form>",
        escape(&some(&query.tenant).unwrap_or_default()),
        escape(&some(&query.tool).unwrap_or_default()),
    );
    let counts = console.counts();
    if !counts.is_empty() {
        body.push_str("<p id=\"counts\" class=\"counts\">");
        for (state, n) in counts {
            let _ = write!(
                body,
                "<a class=\"count\" data-status=\"{s}\" href=\"/?status={s}\">\
                 <span class=\"pill {}\">{s}</span> {n}</a> ",
                state_class(state),
                s = state.as_str(),
            );
        }
        body.push_str("<span class=\"muted\">runs in the archive</span></p>");
    }
    let first_page = some(&query.cursor).is_none();
    let _ = write!(
        body,
        "<p id=\"live\" class=\"live\" data-first-page=\"{first_page}\">\
         <span id=\"live-state\">live: new runs appear here</span> \
         <button id=\"pause\" type=\"button\">Pause</button></p></header>"
    );
    body.push_str("<section id=\"runs\" class=\"panel\">\n");
    if !listed.damaged.is_empty() {
        let _ = write!(
            body,
            "<p class=\"bad\">{} run record(s) are damaged and not listed: run <code>reel verify</code>.</p>",
            listed.damaged.len()
        );
    }
    body.push_str(
        "<table class=\"runs\"><thead><tr><th>status</th><th>run</th><th>started</th>\
         <th>tenant</th><th>principal</th><th>session</th><th>tools</th><th>duration</th>\
         <th>calls</th><th>facts</th></tr></thead><tbody>\n",
    );
    for r in &listed.runs {
        let identity = r.identity.as_ref();
        let cell = |v: Option<&String>| v.map(|v| escape(v)).unwrap_or_default();
        let tools: Vec<String> = r.tools.iter().map(|t| escape(t)).collect();
        let _ = writeln!(
            body,
            "<tr class=\"run\" data-run=\"{id}\" data-status=\"{st}\"><td><span class=\"pill {cls}\">{st}</span></td>\
             <td><a class=\"mono\" href=\"{href}\">{id}</a>{outside}</td><td class=\"muted\">{started}</td>\
             <td>{tenant}</td><td>{principal}</td><td class=\"mono\">{session}</td><td>{tools}</td>\
             <td>{took}</td><td>{calls}</td><td>{facts}</td></tr>",
            id = escape(&r.run_id),
            st = r.state.as_str(),
            cls = state_class(r.state),
            href = escape(&run_href(&r.run_id)),
            outside = if r.outside_run.is_some() {
                " <span class=\"muted\">(no run)</span>"
            } else {
                ""
            },
            started = escape(&timestamp(r.started_at)),
            tenant = cell(identity.and_then(|i| i.tenant.as_ref())),
            principal = cell(identity.and_then(|i| i.principal.as_ref())),
            session = cell(r.session_id.as_ref()),
            tools = tools.join(", "),
            took = escape(&took(r)),
            calls = r.calls,
            facts = r.facts,
        );
    }
    body.push_str("</tbody></table>\n");
    if listed.runs.is_empty() {
        body.push_str("<p class=\"muted\">No runs match.</p>\n");
    }
    body.push_str("<p class=\"pager\">");
    if !first_page {
        let _ = write!(
            body,
            "<a href=\"{}\">newest</a> ",
            escape(&query.href(None))
        );
    }
    if let Some(next) = &listed.next {
        let _ = write!(
            body,
            "<a id=\"older\" href=\"{}\">older runs →</a>",
            escape(&query.href(Some(&next.0)))
        );
    }
    body.push_str("</p></section>\n");
    Html(page("reel: runs", "runs", console.stale(), &body)).into_response()
}
