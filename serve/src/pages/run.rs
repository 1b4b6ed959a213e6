//! `/runs/{id}`: a run's page. Its header and anomalies, then the
//! controls (focus, collapse, collapse-below-a-duration, the filter),
//! the waterfall of calls (the viewer's), its lanes (`lanes.rs`), one
//! page of its facts (`fact.rs`) and its ledgers. The page's script
//! (`run.js`) folds and focuses the call tree (in the URL, so a view can
//! be shared) and, while the run is being recorded, replaces `#run-head`
//! and `#run-body` with the page as it stands when `/runs/{id}/events`
//! says the run changed.

use super::fact::{command, fact_item, ShowCommand};
use super::lanes::{call_index, Lanes};
use super::*;

/// A run page's query.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RunQuery {
    /// The first seq listed (rounded down to a page boundary).
    from: Option<u64>,
}

/// What a closed run's first read leaves for its later pages.
type Kept = (Arc<Timeline>, Arc<Lanes>);

/// `/runs/{id}`.
pub(crate) async fn run(
    State(console): State<Arc<Console>>,
    Path(run_id): Path<String>,
    Query(query): Query<RunQuery>,
) -> Response {
    let reader = console.reader();
    let from = query.from.unwrap_or(0) / FACTS_PER_PAGE * FACTS_PER_PAGE;
    let cached = console
        .timeline(&run_id)
        .zip(console.view::<Lanes>("lanes", &run_id));
    let kept = console.clone();
    let show = ShowCommand::new(console.dir(), &run_id);
    let rendered = blocking(move || {
        let record = reader.run(&run_id).map_err(read_error)?;
        let (title, body, (timeline, lanes)) =
            render_run(&reader, &record, from, cached, &show).map_err(read_error)?;
        // A closed run's timeline no longer changes: later pages read only
        // their own facts.
        if record.state.is_closed() && matches!(reader, Reader::Archive(_)) {
            kept.keep_timeline(&run_id, timeline);
            kept.keep_view("lanes", &run_id, lanes);
        }
        Ok((title, body))
    })
    .await;
    match rendered {
        Ok((title, body)) => Html(page(&title, "run", console.stale(), &body)).into_response(),
        Err(r) => r.into_response(),
    }
}

/// Reads the facts `from..from + FACTS_PER_PAGE` into `list` (and, unless
/// `cached` holds them, the whole run into its timeline and lanes).
fn read_run(
    reader: &Reader,
    record: &RunRecord,
    from: u64,
    cached: Option<Kept>,
    mut listed: impl FnMut(&Fact, &str),
) -> Result<(Kept, Vec<reel::gap::Gap>), ReadError> {
    let until = from + FACTS_PER_PAGE;
    let mut gaps = Vec::new();
    if let Some((timeline, lanes)) = cached {
        reader.facts(&record.run_id, from, Some(until), |item| match item {
            FactItem::Fact(fact) => {
                let tool = fact
                    .call
                    .as_deref()
                    .and_then(|c| timeline.call(c))
                    .map_or("", |c| c.tool.as_str());
                listed(&fact, tool);
            }
            FactItem::Gap(gap) => gaps.push(gap),
        })?;
        return Ok(((timeline, lanes), gaps));
    }
    let text = TextRenderer::new(false);
    let mut builder = TimelineBuilder::for_record(record);
    let mut lanes = Lanes::default();
    reader.facts(&record.run_id, 0, None, |item| match item {
        FactItem::Fact(fact) => {
            builder.push(&fact);
            let tool = fact
                .call
                .as_deref()
                .and_then(|c| builder.call_info(c))
                .map_or("", |(t, _)| t)
                .to_owned();
            lanes.push(&fact, &tool, &text);
            if (from..until).contains(&fact.seq) {
                listed(&fact, &tool);
            }
        }
        FactItem::Gap(gap) => {
            builder.push_gap(&gap);
            gaps.push(gap);
        }
    })?;
    Ok(((Arc::new(builder.finish()), Arc::new(lanes)), gaps))
}

/// The run's page body: the whole run folds into the timeline and lanes
/// (the waterfall describes all of it), unless `cached` holds them; facts
/// `from..from + FACTS_PER_PAGE` are listed.
fn render_run(
    reader: &Reader,
    record: &RunRecord,
    from: u64,
    cached: Option<Kept>,
    show: &ShowCommand,
) -> Result<(String, String, Kept), ReadError> {
    let text = TextRenderer::new(false);
    let href = run_href(&record.run_id);
    let mut list = String::new();
    let mut listed = 0u64;
    let ((timeline, lanes), gaps) = read_run(reader, record, from, cached, |fact, tool| {
        fact_item(
            &mut list,
            fact,
            tool,
            &text.detail_text(fact, tool),
            show,
            &href,
        );
        listed += 1;
    })?;
    let mut body = String::new();
    let _ = write!(
        body,
        "<div id=\"run-head\" data-run=\"{}\" data-state=\"{}\" data-facts=\"{}\">",
        escape(&record.run_id),
        escape(record.state.as_str()),
        timeline.facts
    );
    sections::header(&mut body, record, &timeline, listed);
    actions(&mut body, record, &href, show);
    sections::anomalies(&mut body, &timeline);
    body.push_str("</div>\n");
    controls(&mut body, &timeline, show);
    body.push_str("<div id=\"run-body\">\n");
    sections::waterfall(&mut body, &timeline);
    call_index(&mut body, &timeline);
    lanes.render(
        &mut body,
        timeline.duration_ns().max(timeline.last_offset),
        &href,
    );
    // The facts: the pager, the list.
    let _ = writeln!(
        body,
        "<section id=\"facts\" class=\"panel\" data-from=\"{from}\" data-per-page=\"{FACTS_PER_PAGE}\" \
         data-total=\"{}\"><h2>Facts {}–{} of {}</h2>",
        timeline.facts,
        if listed == 0 { 0 } else { from },
        if listed == 0 { 0 } else { from + listed - 1 },
        timeline.facts
    );
    let pager = pager(&fragment(&record.run_id), from, timeline.facts);
    body.push_str(&pager);
    for gap in &gaps {
        let _ = writeln!(body, "<p class=\"bad\">⚠ {}</p>", escape(&gap.to_string()));
    }
    body.push_str("<ol class=\"fact-list\">\n");
    body.push_str(&list);
    body.push_str("</ol>\n");
    body.push_str(&pager);
    body.push_str("</section>\n");
    sections::ledgers(&mut body, &timeline);
    body.push_str("</div>\n");
    Ok((
        format!("reel: {}", record.describe()),
        body,
        (timeline, lanes),
    ))
}

/// The run's links: its tape, its wire view (a proxy recording), two runs
/// compared, the `reel show` command.
fn actions(body: &mut String, record: &RunRecord, href: &str, show: &ShowCommand) {
    let _ = write!(
        body,
        "<div class=\"actions\"><a href=\"{h}/tape\" download>Download tape</a> · ",
        h = escape(href)
    );
    if record.labels.contains_key("mcp.transport") {
        let _ = write!(
            body,
            "<a id=\"wire-link\" href=\"{}/wire\">MCP wire view</a> · ",
            escape(href)
        );
    }
    let _ = write!(
        body,
        "<form class=\"compare-form\" action=\"/compare\" method=\"get\">\
         <input type=\"hidden\" name=\"a\" value=\"{}\"><label>compare with run \
         <input name=\"b\" required size=\"18\" placeholder=\"run id\"></label> \
         <button type=\"submit\">compare</button></form><div class=\"run-cmd\">",
        escape(&record.run_id)
    );
    command(body, &show.run(), "run");
    body.push_str("</div></div>\n");
}

/// The controls outside the parts a live update replaces: focus, the call
/// tree's folding, the facts' filter.
fn controls(body: &mut String, timeline: &Timeline, show: &ShowCommand) {
    let _ = write!(
        body,
        "<section id=\"run-controls\" class=\"panel\" data-show-run=\"{}\">\
         <div id=\"focus-bar\" class=\"focus-bar\" hidden><span id=\"focus-text\"></span> \
         <span id=\"focus-cmd\"></span> <button id=\"unfocus\" type=\"button\">show the whole run</button></div>\
         <div class=\"filters\"><span class=\"muted\">calls</span> \
         <button id=\"expand-all\" type=\"button\">expand all</button> \
         <button id=\"collapse-all\" type=\"button\">collapse all</button> \
         <label>hide calls shorter than <input id=\"below\" type=\"number\" min=\"0\" step=\"any\" \
         size=\"6\" placeholder=\"ms\"> ms</label> <span id=\"tree-count\" class=\"muted\"></span></div>\
         <div class=\"filters\"><span class=\"muted\">facts</span> \
         <label>kind <select id=\"kind-filter\"><option value=\"\">any</option>",
        // run.js adds ` --call CALL` for a focused call.
        escape(&show.run())
    );
    for kind in timeline.kinds.keys() {
        let _ = write!(body, "<option>{}</option>", escape(kind));
    }
    body.push_str(
        "</select></label> <label>text <input id=\"text-filter\" type=\"search\" \
         placeholder=\"tool, call, message…\"></label> \
         <span id=\"call-filter\" class=\"tag\" hidden></span> \
         <button id=\"clear-filter\" type=\"button\">clear</button> \
         <span id=\"filter-count\" class=\"muted\"></span></div></section>\n",
    );
}

fn pager(id: &str, from: u64, total: u64) -> String {
    let mut out = String::from("<p class=\"pager\">");
    if from > 0 {
        let _ = write!(
            out,
            "<a class=\"prev\" href=\"/runs/{}?from={}\">← facts {}–{}</a> ",
            escape(id),
            from - FACTS_PER_PAGE,
            from - FACTS_PER_PAGE,
            from - 1
        );
    }
    if from + FACTS_PER_PAGE < total {
        let next = from + FACTS_PER_PAGE;
        let _ = write!(
            out,
            "<a class=\"next\" href=\"/runs/{}?from={next}\">facts {next}–{} →</a>",
            escape(id),
            (next + FACTS_PER_PAGE).min(total) - 1
        );
    }
    out.push_str("</p>\n");
    out
}
