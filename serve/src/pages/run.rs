//! `/runs/{id}`: a run's page. Its header and anomalies, then the
//! controls (focus, collapse, collapse-below-a-duration, the filter),
//! the waterfall of calls (the viewer's), its lanes (`lanes.rs`), one
//! page of its facts (`fact.rs`) and its ledgers. The page's script
//! (`run.js`) folds and focuses the call tree (in the URL, so a view can
//! be shared) and, while the run is being recorded, replaces `#run-head`
//! and `#run-body` with the page as it stands when `/runs/{id}/events`
//! says the run changed.

use reel_archive::live::Item;

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
    access: Access,
    Path(run_id): Path<String>,
    Query(query): Query<RunQuery>,
) -> Response {
    let from = query.from.unwrap_or(0) / FACTS_PER_PAGE * FACTS_PER_PAGE;
    let show = ShowCommand::new(access.console.dir(), &run_id);
    let reading = access.clone();
    let rendered = blocking(move || {
        let record = reading.run(&run_id).map_err(read_error)?;
        let cached = reading
            .timeline(&record)
            .zip(reading.console.view::<Lanes>("lanes", &run_id));
        let (title, body, kept) =
            render_run(&reading, &record, from, cached, &show).map_err(read_error)?;
        // A closed run's timeline no longer changes: later pages read only
        // their own facts. (A big run's partial first look keeps nothing:
        // its whole timeline and lanes are being built beside it.)
        if let Some(kept) = kept {
            keep(&reading, &record, kept);
        }
        Ok((title, body))
    })
    .await;
    match rendered {
        Ok((title, body)) => Html(page(&title, "run", access.stale(), &body)).into_response(),
        Err(r) => r.into_response(),
    }
}

/// Keeps a closed run's timeline and lanes read from the archive.
fn keep(access: &Access, record: &Admitted, (timeline, lanes): Kept) {
    if record.state.is_closed() && !access.is_live() {
        access.keep_timeline(record, timeline);
        access.console.keep_view("lanes", &record.run_id, lanes);
    }
}

/// How much of the run a page reads.
enum Reading {
    /// What the first read kept: the page's facts only.
    Kept(Kept),
    /// The whole run, into its timeline and lanes.
    Whole,
    /// A big run's first look: the page's facts only, folded as a live
    /// run's are (a call whose end is past the page is no anomaly).
    Page,
}

/// Reads the facts `from..from + FACTS_PER_PAGE` into `list` (and the
/// timeline and lanes as `reading` says).
fn read_run(
    access: &Access,
    record: &Admitted,
    from: u64,
    reading: Reading,
    mut listed: impl FnMut(&Fact, &str),
) -> Result<(Kept, Vec<reel_core::gap::Gap>), ReadError> {
    let until = from + FACTS_PER_PAGE;
    let mut gaps = Vec::new();
    let (start, end, folded) = match reading {
        Reading::Kept((timeline, lanes)) => {
            access.facts(record, from, Some(until), |item| match item {
                Item::Fact(fact) => {
                    let tool = fact
                        .call
                        .as_deref()
                        .and_then(|c| timeline.call(c))
                        .map_or("", |c| c.tool.as_str());
                    listed(&fact, tool);
                }
                Item::Gap(gap) => gaps.push(gap),
            })?;
            return Ok(((timeline, lanes), gaps));
        }
        Reading::Whole => (0, None, (**record).clone()),
        Reading::Page => (
            from,
            Some(until),
            RunRecord {
                state: RunState::Running,
                ..(**record).clone()
            },
        ),
    };
    let text = TextRenderer::new(Color::Plain);
    let mut builder = TimelineBuilder::for_record(&folded);
    let mut lanes = Lanes::default();
    access.facts(record, start, end, |item| match item {
        Item::Fact(fact) => {
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
        Item::Gap(gap) => {
            builder.push_gap(&gap);
            gaps.push(gap);
        }
    })?;
    Ok(((Arc::new(builder.finish()), Arc::new(lanes)), gaps))
}

/// Builds a big run's whole timeline and lanes on a thread of its own
/// and keeps them, once per run at a time: the next look shows all of it.
fn build_later(access: &Access, record: &Admitted) {
    access.build_later(record, |access, record| {
        let whole = read_run(access, record, 0, Reading::Whole, |_, _| {});
        if let Ok((kept, _)) = whole {
            keep(access, record, kept);
        }
    });
}

/// The run's page body: the whole run folds into the timeline and lanes
/// (the waterfall describes all of it), unless `cached` holds them, or the
/// run is big and this is its first look (then its page only, said so);
/// facts `from..from + FACTS_PER_PAGE` are listed. Returns what to keep
/// (`None` for a partial look).
fn render_run(
    access: &Access,
    record: &Admitted,
    from: u64,
    cached: Option<Kept>,
    show: &ShowCommand,
) -> Result<(String, String, Option<Kept>), ReadError> {
    let text = TextRenderer::new(Color::Plain);
    let href = run_href(&record.run_id);
    let mut list = String::new();
    let mut listed = 0u64;
    let partial = cached.is_none() && record.facts > BIG_RUN_FACTS;
    let reading = match cached {
        Some(kept) => Reading::Kept(kept),
        None if partial => {
            build_later(access, record);
            Reading::Page
        }
        None => Reading::Whole,
    };
    let ((timeline, lanes), gaps) = read_run(access, record, from, reading, |fact, tool| {
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
    // A partial timeline knows its page's facts only: the run's count is
    // the record's.
    let total = timeline.facts.max(record.facts);
    let mut body = String::new();
    let _ = write!(
        body,
        "<div id=\"run-head\" data-run=\"{}\" data-state=\"{}\" data-facts=\"{}\">",
        escape(&record.run_id),
        escape(record.state.as_str()),
        total
    );
    sections::header(&mut body, record, &timeline, listed);
    if partial {
        let _ = writeln!(
            body,
            "<p id=\"partial\" class=\"stale\" role=\"status\">This run has {} facts: the waterfall, \
             lanes, anomalies and ledgers below are those of facts {from}–{} only. The whole run's are \
             being read: reload in a moment.</p>",
            record.facts,
            until_shown(from, record.facts)
        );
    }
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
        total,
        if listed == 0 { 0 } else { from },
        if listed == 0 { 0 } else { from + listed - 1 },
        total
    );
    let pager = pager(&fragment(&record.run_id), from, total);
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
        (!partial).then_some((timeline, lanes)),
    ))
}

/// The last seq a page from `from` shows of a run of `facts` facts.
fn until_shown(from: u64, facts: u64) -> u64 {
    (from + FACTS_PER_PAGE).min(facts).saturating_sub(1)
}

/// The run's links: its tape, its wire view (a proxy recording), the run
/// its late spans came after (`reel collect`'s `reel.late_of`), two runs
/// compared, the `reel show` command.
fn actions(body: &mut String, record: &RunRecord, href: &str, show: &ShowCommand) {
    let _ = write!(
        body,
        "<div class=\"actions\"><a href=\"{h}/tape\" download>Download tape</a> · ",
        h = escape(href)
    );
    if let Some(first) = record.labels.get("reel.late_of") {
        let _ = write!(
            body,
            "<a id=\"late-of-link\" href=\"{}\">the run these late spans came after</a> · ",
            escape(&run_href(first))
        );
    }
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
