//! Reading a run as views (`Facts::views`, what `reel runs` and the
//! console build timelines from) gives what reading it whole gives: the
//! same facts, the same gaps, the same timeline. Over a real archive the
//! recorder wrote (the demo runs: every kind, progress, artifacts, payloads
//! spilled into artifacts); damaged archives are `corruption.rs`'s (each of
//! its cases reads alike both ways too).

use reel::codec::{FactView, ViewSink};
use reel::fact::{Fact, FactKind};
use reel::gap::Gap;
use reel::marker::artifact_ref;
use reel_archive::{Archive, ArchiveConfig, ArchiveError};
use reel_recorder::RecorderConfig;
use reel_viewer::timeline::{Timeline, TimelineBuilder};

/// What a read gives, item by item: a fact, or a gap.
type Items = Vec<Result<Fact, Gap>>;

/// A sink keeping every view as the fact it stands for, and counting the
/// progress reports read in place.
#[derive(Default)]
struct Collect {
    items: Items,
    in_place: usize,
}

impl ViewSink for Collect {
    fn view(&mut self, fact: &FactView<'_>) {
        if matches!(fact, FactView::Progress(_)) {
            self.in_place += 1;
        }
        let seq = fact.seq();
        self.items
            .push(fact.clone().into_fact().map_err(|detail| Gap {
                first: seq,
                last: Some(seq),
                detail: format!("a view does not make its fact: {detail}"),
            }));
    }

    fn gap(&mut self, gap: &Gap) {
        self.items.push(Err(gap.clone()));
    }
}

/// The run read whole (the iterator), damage as gaps.
fn whole(archive: &Archive, run: &str) -> Items {
    archive
        .facts(run, ..)
        .expect("facts")
        .map(|item| match item {
            Ok(f) => Ok(f),
            Err(ArchiveError::Corrupt { gap, .. }) => Err(gap),
            Err(e) => panic!("reading {run} fails: {e}"),
        })
        .collect()
}

/// The run read as views.
fn viewed(archive: &Archive, run: &str) -> Collect {
    let mut sink = Collect::default();
    archive
        .facts(run, ..)
        .and_then(|f| f.views(&mut sink))
        .expect("views");
    sink
}

/// The run's timeline from whole facts, and from views.
fn timelines(archive: &Archive, run: &str) -> (Timeline, Timeline) {
    let record = archive.run(run).expect("record");
    let mut owned = TimelineBuilder::for_record(&record);
    for item in whole(archive, run) {
        match item {
            Ok(f) => owned.push(&f),
            Err(gap) => owned.push_gap(&gap),
        }
    }
    let mut views = TimelineBuilder::for_record(&record);
    archive
        .facts(run, ..)
        .and_then(|f| f.views(&mut views))
        .expect("views");
    (owned.finish(), views.finish())
}

#[test]
fn a_recorded_archive_reads_alike_as_views() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("open");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // A small inline limit: the demo's larger payloads (progress
        // reports' among them) are spilled into artifacts.
        let config = RecorderConfig {
            inline_limit: 48,
            serve_live: false,
            ..RecorderConfig::default()
        };
        let recorder =
            reel_recorder::Recorder::with_archive(archive.clone(), config).expect("recorder");
        reel_demo::record(&recorder).await.expect("demo");
        recorder.shutdown().await.expect("shutdown");
    });
    let runs: Vec<String> = archive
        .run_ids()
        .collect::<Result<_, _>>()
        .expect("run ids");
    assert!(runs.len() >= 5, "the demo records its runs: {runs:?}");
    let (mut in_place, mut spilled, mut artifacts) = (0, 0, 0);
    for run in &runs {
        let want = whole(&archive, run);
        let got = viewed(&archive, run);
        assert_eq!(got.items, want, "run {run} reads differently as views");
        in_place += got.in_place;
        for f in want.iter().flatten() {
            match &f.kind {
                FactKind::Progress(p) if artifact_ref(&p.payload).is_some() => spilled += 1,
                FactKind::ArtifactPut(_) | FactKind::ArtifactGet(_) => artifacts += 1,
                _ => {}
            }
        }
        let (owned, views) = timelines(&archive, run);
        assert_eq!(views, owned, "run {run}: the timelines differ");
        assert!(owned.facts > 0);
    }
    // What the test is about is there to read.
    assert!(in_place > 0, "no progress report was read in place");
    assert!(spilled > 0, "no progress payload was spilled");
    assert!(artifacts > 0, "no artifact was stored");
}
