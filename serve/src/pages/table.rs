//! `/`: the runs table, newest first, a page at a time: the filters the
//! archive's indexes answer (status, tenant, tool, time range), those
//! checked on each run (principal, session, has-anomaly) and a search
//! over tool names, labels, messages and errors, all in the URL; counts
//! per status under the filters. Searched through [`Access`]
//! (`source/runs.rs`).

use super::*;
use crate::source::{Access, Counts, Listed, RunQuery};

/// The runs table's query: every filter, as the URL carries it.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub(crate) struct RunsQuery {
    status: Option<String>,
    tenant: Option<String>,
    tool: Option<String>,
    principal: Option<String>,
    session: Option<String>,
    since: Option<String>,
    until: Option<String>,
    anomaly: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
}

fn some(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(Into::into)
}

/// A time in the URL: RFC 3339 (`2026-11-30T08:00:00Z`, the zone may be
/// left out: UTC), a date (`2026-11-30`, midnight UTC) or an age (`2h`,
/// `3days`), as `reel runs --since` reads it; unix nanoseconds.
pub(crate) fn parse_time(name: &str, s: &str) -> Result<i64, String> {
    let nanos = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    };
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Ok(nanos(t));
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(&format!("{s}T00:00:00Z")) {
        return Ok(nanos(t));
    }
    match humantime::parse_duration(s) {
        Ok(age) => Ok(nanos(
            std::time::SystemTime::now()
                .checked_sub(age)
                .unwrap_or(std::time::UNIX_EPOCH),
        )),
        Err(_) => Err(format!(
            "{name}={s:?} is neither a time (2026-11-30T08:00:00Z), a date (2026-11-30) \
             nor an age (2h, 30min, 3days)"
        )),
    }
}

impl RunsQuery {
    fn query(&self) -> Result<RunQuery, String> {
        let status = match some(&self.status) {
            None => None,
            Some(s) => Some(s.parse::<RunState>().map_err(|_| {
                format!(
                    "unknown status {s:?}: use one of {}",
                    RunState::ALL.map(|s| s.as_str()).join(", ")
                )
            })?),
        };
        let time = |name, v: &Option<String>| some(v).map(|s| parse_time(name, &s)).transpose();
        Ok(RunQuery {
            filter: RunFilter {
                tenant: some(&self.tenant),
                tool: some(&self.tool),
                status,
                since: time("since", &self.since)?,
                until: time("until", &self.until)?,
                limit: Some(RUNS_PER_PAGE),
                cursor: some(&self.cursor).map(Cursor),
            },
            principal: some(&self.principal),
            session: some(&self.session),
            anomalous: self.anomalous(),
            text: some(&self.q),
        })
    }

    /// The filters the archive's indexes and the runs' summaries answer
    /// (status, tenant, tool, time range), for the charts and the tools
    /// overview.
    pub(crate) fn summary_filter(&self) -> Result<RunFilter, String> {
        let q = self.query()?;
        Ok(RunFilter {
            limit: None,
            cursor: None,
            ..q.filter
        })
    }

    /// Whether a filter the charts do not apply is set (principal,
    /// session, anomalies, search).
    pub(crate) fn beyond_summaries(&self) -> bool {
        some(&self.principal).is_some()
            || some(&self.session).is_some()
            || self.anomalous()
            || some(&self.q).is_some()
    }

    /// The value of a filter, trimmed (`None` when empty).
    pub(crate) fn value(&self, name: &str) -> Option<String> {
        some(match name {
            "status" => &self.status,
            "tenant" => &self.tenant,
            "tool" => &self.tool,
            "since" => &self.since,
            "until" => &self.until,
            _ => return None,
        })
    }

    fn anomalous(&self) -> bool {
        some(&self.anomaly).is_some_and(|a| a != "0" && a != "false")
    }

    /// This query's address with `cursor` in place of its own (and
    /// `status` when given).
    fn href(&self, cursor: Option<&str>, status: Option<Option<&str>>) -> String {
        let status = match status {
            Some(s) => s.map(Into::into),
            None => some(&self.status),
        };
        let mut parts = Vec::new();
        for (name, value) in [
            ("status", status),
            ("tenant", some(&self.tenant)),
            ("tool", some(&self.tool)),
            ("principal", some(&self.principal)),
            ("session", some(&self.session)),
            ("since", some(&self.since)),
            ("until", some(&self.until)),
            ("anomaly", self.anomalous().then(|| "1".to_owned())),
            ("q", some(&self.q)),
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
pub(crate) async fn runs(access: Access, Query(query): Query<RunsQuery>) -> Response {
    let asked = match query.query() {
        Ok(q) => q,
        Err(why) => return error_page(StatusCode::BAD_REQUEST, &why),
    };
    let charted = match query.summary_filter() {
        Ok(f) => f,
        Err(why) => return error_page(StatusCode::BAD_REQUEST, &why),
    };
    let reading = access.clone();
    let found = blocking(move || {
        let listed = reading.find_runs(&asked).map_err(read_error)?;
        let counts = reading.counts(&asked);
        let overview = reading
            .runs_over_time(&charted, super::tools::BUCKETS)
            .map_err(read_error)?;
        Ok((listed, counts, overview))
    })
    .await;
    let (listed, counts, overview) = match found {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    let mut body = String::new();
    body.push_str("<header class=\"panel\"><h1>Runs</h1>\n");
    let _ = writeln!(
        body,
        "<p class=\"muted mono\">{}{}</p>",
        escape(&access.console.dir().display().to_string()),
        access
            .tenant()
            .map(|t| format!(" · tenant {}", escape(t)))
            .unwrap_or_default()
    );
    filters(&mut body, &query);
    status_counts(&mut body, &query, &counts);
    let first_page = some(&query.cursor).is_none();
    let _ = write!(
        body,
        "<p id=\"live\" class=\"live\" data-first-page=\"{first_page}\">\
         <span id=\"live-state\">live: new runs appear here</span> \
         <button id=\"pause\" type=\"button\">Pause</button></p></header>"
    );
    trend(&mut body, &query, &overview);
    table(&mut body, &query, &listed, first_page);
    Html(page("reel: runs", "runs", access.stale(), &body)).into_response()
}

/// The filter form: every field named as the URL names it.
fn filters(body: &mut String, query: &RunsQuery) {
    body.push_str(
        "<form class=\"filters\" method=\"get\" action=\"/\" role=\"search\">\
         <label>search <input name=\"q\" type=\"search\" \
         placeholder=\"tool, label, message, error\" value=\"",
    );
    body.push_str(&escape(&some(&query.q).unwrap_or_default()));
    body.push_str(
        "\"></label> <label>status <select name=\"status\"><option value=\"\">any</option>",
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
    body.push_str("</select></label>");
    for (name, value, hint) in [
        ("tenant", &query.tenant, ""),
        ("tool", &query.tool, ""),
        ("principal", &query.principal, ""),
        ("session", &query.session, ""),
        ("since", &query.since, "2h, 2026-11-30, RFC 3339"),
        ("until", &query.until, "2026-12-01T08:00:00Z"),
    ] {
        let _ = write!(
            body,
            " <label>{name} <input name=\"{name}\" value=\"{}\"{}></label>",
            escape(&some(value).unwrap_or_default()),
            if hint.is_empty() {
                String::new()
            } else {
                format!(" placeholder=\"{hint}\"")
            }
        );
    }
    let _ = write!(
        body,
        " <label><input type=\"checkbox\" name=\"anomaly\" value=\"1\"{}> has anomalies</label> \
         <button>Filter</button> <a href=\"/\">clear</a></form>",
        if query.anomalous() { " checked" } else { "" }
    );
}

/// Runs per status under the filters, each a link to its own view.
fn status_counts(body: &mut String, query: &RunsQuery, counts: &Counts) {
    body.push_str("<p id=\"counts\" class=\"counts\">");
    let at_least = if counts.partial { "≥" } else { "" };
    for (state, n) in &counts.by_state {
        let _ = write!(
            body,
            "<a class=\"count\" data-status=\"{s}\" data-count=\"{n}\" href=\"{}\">\
             <span class=\"pill {}\">{s}</span> {at_least}{n}</a> ",
            escape(&query.href(None, Some(Some(state.as_str())))),
            state_class(*state),
            s = state.as_str(),
        );
    }
    let _ = write!(
        body,
        "<span class=\"muted\">runs {}{}</span></p>",
        if query.href(None, Some(None)) == "/" {
            "in the archive"
        } else {
            "under these filters"
        },
        if counts.partial {
            " (counted for a while, then stopped: at least these)"
        } else {
            ""
        }
    );
}

/// The runs-over-time chart, filtered as the table is (but for the
/// filters the runs' summaries do not answer, which it says).
fn trend(body: &mut String, query: &RunsQuery, overview: &reel_core::summary::Overview) {
    body.push_str("<section id=\"trend\" class=\"panel\" aria-label=\"runs over time\">");
    body.push_str(&super::tools::runs_chart(overview));
    if query.beyond_summaries() {
        body.push_str(
            "<p class=\"muted\">The chart counts the runs of this status, tenant, tool and \
             time range; principal, session, anomalies and search narrow the table only.</p>",
        );
    }
    body.push_str("</section>\n");
}

/// The table's columns and their classes: the stylesheet hides the less
/// needed ones (principal, session, facts, calls) in narrower windows, and
/// keeps values (a status, a time, a duration, a count) on one line.
const COLUMNS: [(&str, &str); 11] = [
    ("status", "nowrap"),
    ("run", "c-run"),
    ("started", "nowrap"),
    ("tenant", "c-tenant"),
    ("principal", "c-principal"),
    ("session", "c-session"),
    ("tools", "c-tools"),
    ("duration", "nowrap"),
    ("calls", "num c-calls"),
    ("facts", "num c-facts"),
    ("anomalies", "num"),
];

/// The table and its pager.
fn table(body: &mut String, query: &RunsQuery, listed: &Listed, first_page: bool) {
    body.push_str("<section id=\"runs\" class=\"panel\" aria-label=\"runs\">\n");
    if listed.damaged > 0 {
        let _ = write!(
            body,
            "<p class=\"bad\">{} run record(s) are damaged and not listed: run <code>reel verify</code>.</p>",
            listed.damaged
        );
    }
    body.push_str("<div class=\"table-wrap\"><table class=\"runs\"><thead><tr>");
    for (name, class) in COLUMNS {
        let _ = write!(body, "<th scope=\"col\" class=\"{class}\">{name}</th>");
    }
    body.push_str("</tr></thead><tbody>\n");
    for row in &listed.rows {
        let r = &row.record;
        let identity = r.identity.as_ref();
        let cell = |v: Option<&String>| v.map(|v| escape(v)).unwrap_or_default();
        let tools: Vec<String> = r.tools.iter().map(|t| escape(t)).collect();
        let anomalies = match row.anomalies {
            Some(0) => "<td class=\"muted num\">0</td>".to_owned(),
            Some(n) => format!("<td class=\"bad num\">{n}</td>"),
            None => "<td class=\"bad num\" title=\"its facts could not be read\">?</td>".to_owned(),
        };
        let started = escape(&timestamp(r.started_at));
        // `2026-12-05T11:22:10.389Z`: the milliseconds in a span of their
        // own, which narrow windows hide (the whole value is the title).
        let shown = match started.rsplit_once('.') {
            Some((secs, ms)) => format!("{secs}<span class=\"ms\">.{ms}</span>"),
            None => started.clone(),
        };
        let _ = writeln!(
            body,
            "<tr class=\"run\" data-run=\"{id}\" data-status=\"{st}\" data-anomalies=\"{an}\">\
             <td class=\"nowrap\"><span class=\"pill {cls}\">{st}</span></td>\
             <td class=\"c-run\"><a class=\"mono\" href=\"{href}\">{id}</a>{outside}</td>\
             <td class=\"muted nowrap\"><time datetime=\"{started}\" title=\"{started}\">{shown}</time></td>\
             <td class=\"c-tenant\">{tenant}</td><td class=\"c-principal\">{principal}</td>\
             <td class=\"mono c-session\">{session}</td><td class=\"c-tools\">{tools}</td>\
             <td class=\"nowrap\">{took}</td><td class=\"num c-calls\">{calls}</td>\
             <td class=\"num c-facts\">{facts}</td>{anomalies}</tr>",
            id = escape(&r.run_id),
            st = r.state.as_str(),
            an = row.anomalies.map_or("?".into(), |n| n.to_string()),
            cls = state_class(r.state),
            href = escape(&run_href(&r.run_id)),
            outside = if r.outside_run.is_some() {
                " <span class=\"muted\">(no run)</span>"
            } else {
                ""
            },
            tenant = cell(identity.and_then(|i| i.tenant.as_ref())),
            principal = cell(identity.and_then(|i| i.principal.as_ref())),
            session = cell(r.session_id.as_ref()),
            tools = tools.join(", "),
            took = escape(&took(r)),
            calls = r.calls,
            facts = r.facts,
        );
    }
    body.push_str("</tbody></table></div>\n");
    if listed.rows.is_empty() && listed.cut_short.is_none() {
        body.push_str("<p class=\"muted\">No runs match.</p>\n");
    }
    if let Some(looked) = listed.cut_short {
        let _ = write!(
            body,
            "<p id=\"cut-short\" class=\"muted\">Looked at {looked} runs for this page and stopped \
             for now: the next page searches on from there.</p>"
        );
    }
    body.push_str("<p class=\"pager\">");
    if !first_page {
        let _ = write!(
            body,
            "<a href=\"{}\">newest</a> ",
            escape(&query.href(None, None))
        );
    }
    if let Some(next) = &listed.next {
        let _ = write!(
            body,
            "<a id=\"older\" href=\"{}\">{} →</a>",
            escape(&query.href(Some(&next.0), None)),
            if listed.cut_short.is_some() {
                "search older runs"
            } else {
                "older runs"
            }
        );
    }
    body.push_str("</p></section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(given: &str, want: Result<i64, &str>) {
        match (parse_time("since", given), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{given}"),
            (Err(got), Err(want)) => assert!(got.contains(want), "{given}: {got}"),
            (got, want) => panic!("{given}: {got:?}, wanted {want:?}"),
        }
    }

    #[test]
    fn times_in_the_url() {
        let day = 1_767_225_600_000_000_000;
        check("2026-01-01", Ok(day));
        check("2026-01-01T00:00:00Z", Ok(day));
        check("2026-01-01T01:00:00", Ok(day + 3_600_000_000_000));
        check("2026-01-01 00:00:01Z", Ok(day + 1_000_000_000));
        check("soon", Err("since=\"soon\" is neither a time"));
        check("2026-13-01", Err("neither a time"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        let two_hours_ago = parse_time("since", "2h").unwrap();
        assert!((now - two_hours_ago - 7_200_000_000_000).abs() < 60_000_000_000);
        // An age past the epoch is the epoch, not a panic.
        assert_eq!(parse_time("since", "100000years").unwrap(), 0);
    }

    #[test]
    fn every_filter_is_in_the_address() {
        let q = RunsQuery {
            status: Some("failed".into()),
            tenant: Some("a b".into()),
            principal: Some("ann".into()),
            session: Some("s&1".into()),
            since: Some("2h".into()),
            until: Some(" ".into()),
            anomaly: Some("on".into()),
            q: Some("team=blue".into()),
            cursor: Some("c1".into()),
            ..RunsQuery::default()
        };
        assert_eq!(
            q.href(Some("c2"), None),
            "/?status=failed&tenant=a%20b&principal=ann&session=s%261&since=2h&anomaly=1&q=team%3Dblue&cursor=c2"
        );
        assert_eq!(q.href(None, Some(None)).find("status"), None);
        assert!(RunsQuery::default()
            .query()
            .unwrap()
            .filter
            .cursor
            .is_none());
        let bad = RunsQuery {
            status: Some("done".into()),
            ..RunsQuery::default()
        };
        assert!(bad.query().unwrap_err().contains("unknown status \"done\""));
    }
}
