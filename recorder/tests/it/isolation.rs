//! Isolation (issue 11, section 1): one tenant's action never reaches
//! another tenant. Each case records real runs with a real recorder into a
//! fresh temporary archive, and reads the facts back from the archive after
//! shutdown. The cases are written as an attacker would try them: the same
//! session string, the same tool and key, the same artifact id, strings
//! built to collide when joined, absent against empty.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use reel::context::{
    artifact_scope, BoxFuture, ContextError, FoundArtifact, Home, TeardownKey, ToolContext,
    ToolError,
};
use reel::fact::*;
use reel_archive::{Archive, ArchiveError};
use reel_recorder::{
    ArtifactStore, MemoryArtifactStore, Recorder, RecorderConfig, RecorderError, Run, RunStart,
};
use serde_json::{json, Value};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Every `FactKind::$variant` payload of `facts`, in order.
macro_rules! all {
    ($facts:expr, $variant:ident) => {
        $facts
            .iter()
            .filter_map(|f| match &f.kind {
                FactKind::$variant(x) => Some(x),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

/// A recorder on a fresh temporary archive.
struct Lab {
    dir: TempDir,
    recorder: Recorder,
}

/// The archive after shutdown, for reading.
struct Book {
    archive: Archive,
    _dir: TempDir,
}

impl Lab {
    async fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::open(dir.path(), RecorderConfig::default())
            .await
            .unwrap();
        Lab { dir, recorder }
    }

    async fn run(&self, start: RunStart) -> Run {
        self.recorder.start_run(start).await.unwrap()
    }

    async fn done(self) -> Book {
        let archive = self.recorder.archive().clone();
        self.recorder.shutdown().await.expect("shutdown succeeds");
        let report = archive.verify().unwrap();
        assert!(report.is_ok(), "archive verifies: {:?}", report.problems);
        Book {
            archive,
            _dir: self.dir,
        }
    }
}

impl Book {
    fn facts(&self, run_id: &str) -> Vec<Fact> {
        self.archive
            .facts(run_id, ..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

fn who(tenant: Option<&str>, principal: Option<&str>) -> Identity {
    Identity {
        tenant: tenant.map(str::to_owned),
        principal: principal.map(str::to_owned),
        conversation: None,
    }
}

fn start(id: &str, identity: Option<Identity>, session: Option<&str>) -> RunStart {
    let mut s = RunStart::new(id);
    if let Some(i) = identity {
        s = s.identity(i);
    }
    if let Some(sess) = session {
        s = s.session(sess);
    }
    s
}

/// Which cleanups ran, in order, by label.
type Ran = Arc<Mutex<Vec<String>>>;

/// Calls tool `browser` in `run`: it registers a session-scoped cleanup
/// under the key `"browser"` (the same tool and key for every tenant) that
/// logs `label`; returns whether it was the first, and the session key the
/// tool's context gave it.
async fn register_session(run: &Run, ran: &Ran, label: &str) -> (bool, String) {
    let ran = ran.clone();
    let label = label.to_owned();
    run.call("browser", json!({}))
        .invoke(move |ctx: ToolContext, _: Value| async move {
            let first = ctx.on_teardown(TeardownScope::Session, "browser", move || async move {
                ran.lock().unwrap().push(label);
                Ok::<_, String>(())
            })?;
            Ok::<_, ToolError>((first, ctx.teardown_key(TeardownScope::Session)?.to_string()))
        })
        .await
        .unwrap()
}

fn ran(log: &Ran) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// The session cleanups that ran in a run, as recorded.
fn session_ran(facts: &[Fact]) -> usize {
    all!(facts, TeardownRan)
        .iter()
        .filter(|t| t.scope == TeardownScope::Session)
        .count()
}

// ---------------------------------------------------------------------------
// Session teardown: keyed on (tenant, principal, session)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn two_tenants_with_one_session_string_each_run_only_their_own_cleanup() {
    let acme = who(Some("acme"), Some("ann"));
    let globex = who(Some("globex"), Some("ann"));
    // Both orders of registration, both orders of ending the session.
    for (a_registers_first, a_ends_first) in
        [(true, true), (true, false), (false, true), (false, false)]
    {
        let lab = Lab::new().await;
        let a = lab.run(start("a", Some(acme.clone()), Some("s"))).await;
        let b = lab.run(start("b", Some(globex.clone()), Some("s"))).await;
        let log = Ran::default();
        let (first_a, first_b) = if a_registers_first {
            let fa = register_session(&a, &log, "acme's").await;
            let fb = register_session(&b, &log, "globex's").await;
            (fa, fb)
        } else {
            let fb = register_session(&b, &log, "globex's").await;
            let fa = register_session(&a, &log, "acme's").await;
            (fa, fb)
        };
        assert!(first_a.0, "acme's registration is its session's first");
        assert!(
            first_b.0,
            "globex's registration is its own session's first, not a repeat of acme's"
        );
        assert_ne!(first_a.1, first_b.1, "two tenants, two session keys");

        let (first, second, first_label, second_label) = if a_ends_first {
            (&a, &b, "acme's", "globex's")
        } else {
            (&b, &a, "globex's", "acme's")
        };
        first.end_session().await.unwrap();
        assert_eq!(
            ran(&log),
            [first_label],
            "ending one tenant's session runs its cleanup only"
        );
        second.end_session().await.unwrap();
        assert_eq!(ran(&log), [first_label, second_label]);
        a.end(RunStatus::Completed).await.unwrap();
        b.end(RunStatus::Completed).await.unwrap();

        let book = lab.done().await;
        for id in ["a", "b"] {
            let facts = book.facts(id);
            assert_eq!(
                session_ran(&facts),
                1,
                "run {id}: its own cleanup ran in it"
            );
            let regs = all!(facts, TeardownRegistered);
            assert_eq!(regs.len(), 1);
            assert!(regs[0].first);
            let ran_fact = all!(facts, TeardownRan)[0];
            assert_eq!(ran_fact.key_hash, regs[0].key_hash);
            assert_eq!(ran_fact.outcome, TeardownOutcome::Ok);
        }
    }
}

#[tokio::test]
async fn another_tenant_ending_the_same_session_string_runs_nothing_of_a_finished_run() {
    let lab = Lab::new().await;
    let acme = who(Some("acme"), Some("ann"));
    let log = Ran::default();
    // Tenant A registers and ends its run; its session lives on.
    let a = lab.run(start("a", Some(acme.clone()), Some("s"))).await;
    register_session(&a, &log, "acme's").await;
    a.end(RunStatus::Completed).await.unwrap();
    // Tenant B, same session string, ends "its" session.
    let b = lab
        .run(start(
            "b",
            Some(who(Some("globex"), Some("ann"))),
            Some("s"),
        ))
        .await;
    b.end_session().await.unwrap();
    b.end(RunStatus::Completed).await.unwrap();
    assert!(
        ran(&log).is_empty(),
        "B reached A's cleanup: {:?}",
        ran(&log)
    );
    let key = TeardownKey::session(Some(&acme), Some("s")).unwrap();
    assert_eq!(
        lab.recorder.session_cleanups(&key),
        1,
        "A's cleanup still waits"
    );
    // A's next run of the same session ends it: A's cleanup runs there.
    let a2 = lab.run(start("a2", Some(acme.clone()), Some("s"))).await;
    a2.end_session().await.unwrap();
    a2.end(RunStatus::Completed).await.unwrap();
    assert_eq!(ran(&log), ["acme's"]);
    assert_eq!(lab.recorder.session_cleanups(&key), 0);

    let book = lab.done().await;
    assert_eq!(session_ran(&book.facts("b")), 0, "nothing ran in B's run");
    assert_eq!(session_ran(&book.facts("a")), 0);
    let a2_facts = book.facts("a2");
    assert_eq!(
        session_ran(&a2_facts),
        1,
        "A's cleanup is recorded in A's run"
    );
    let reg = all!(book.facts("a"), TeardownRegistered)[0].clone();
    assert_eq!(all!(a2_facts, TeardownRan)[0].key_hash, reg.key_hash);
}

/// Pairs of callers who must never share a session, with one session
/// string: a different tenant or principal, an absent part against an
/// empty one, and parts built so that a joined string would collide.
fn distinct_callers() -> Vec<(&'static str, Option<Identity>, Option<Identity>)> {
    vec![
        (
            "two tenants",
            Some(who(Some("acme"), Some("ann"))),
            Some(who(Some("globex"), Some("ann"))),
        ),
        (
            "one tenant, two principals",
            Some(who(Some("acme"), Some("ann"))),
            Some(who(Some("acme"), Some("bob"))),
        ),
        (
            "absent tenant against empty tenant",
            Some(who(None, Some("ann"))),
            Some(who(Some(""), Some("ann"))),
        ),
        (
            "absent principal against empty principal",
            Some(who(Some("acme"), None)),
            Some(who(Some("acme"), Some(""))),
        ),
        (
            "no identity against an all-empty one",
            None,
            Some(Identity {
                tenant: Some(String::new()),
                principal: Some(String::new()),
                conversation: Some(String::new()),
            }),
        ),
        (
            "`a:b` + `c` against `a` + `b:c`",
            Some(who(Some("a:b"), Some("c"))),
            Some(who(Some("a"), Some("b:c"))),
        ),
        (
            "a tenant spelling out another's length prefix",
            Some(who(Some("acme"), Some("ann"))),
            Some(who(Some("acme;principal=3:ann"), None)),
        ),
    ]
}

#[tokio::test]
async fn absent_empty_and_colliding_identity_parts_are_different_sessions() {
    for (case, x, y) in distinct_callers() {
        let lab = Lab::new().await;
        let rx = lab.run(start("x", x.clone(), Some("s"))).await;
        let ry = lab.run(start("y", y.clone(), Some("s"))).await;
        let log = Ran::default();
        let (fx, kx) = register_session(&rx, &log, "x").await;
        let (fy, ky) = register_session(&ry, &log, "y").await;
        assert!(fx && fy, "{case}: both registrations are firsts");
        assert_ne!(kx, ky, "{case}: the session keys differ");
        ry.end_session().await.unwrap();
        assert_eq!(ran(&log), ["y"], "{case}");
        rx.end_session().await.unwrap();
        assert_eq!(ran(&log), ["y", "x"], "{case}");
        rx.end(RunStatus::Completed).await.unwrap();
        ry.end(RunStatus::Completed).await.unwrap();
        let book = lab.done().await;
        assert_eq!(session_ran(&book.facts("x")), 1, "{case}");
        assert_eq!(session_ran(&book.facts("y")), 1, "{case}");
    }
}

#[tokio::test]
async fn the_same_caller_in_the_same_session_shares_it_across_runs() {
    // The intended sharing: a session outlives a run. The second run's
    // registration is a repeat that keeps the first cleanup.
    let lab = Lab::new().await;
    let acme = who(Some("acme"), Some("ann"));
    let log = Ran::default();
    let a1 = lab.run(start("a1", Some(acme.clone()), Some("s"))).await;
    let (first1, k1) = register_session(&a1, &log, "first").await;
    a1.end(RunStatus::Completed).await.unwrap();
    let a2 = lab.run(start("a2", Some(acme.clone()), Some("s"))).await;
    let (first2, k2) = register_session(&a2, &log, "repeat").await;
    assert!(
        first1 && !first2,
        "the second run's registration is a repeat"
    );
    assert_eq!(k1, k2);
    a2.end_session().await.unwrap();
    a2.end(RunStatus::Completed).await.unwrap();
    assert_eq!(
        ran(&log),
        ["first"],
        "the first cleanup is kept and runs once"
    );
    let book = lab.done().await;
    let a2_facts = book.facts("a2");
    let regs = all!(a2_facts, TeardownRegistered);
    assert_eq!(regs.len(), 1);
    assert!(!regs[0].first);
    assert_eq!(session_ran(&a2_facts), 1);
}

#[tokio::test]
async fn the_teardown_key_a_tool_gets_is_the_key_its_cleanups_are_held_under() {
    let lab = Lab::new().await;
    let acme = who(Some("acme"), Some("ann"));
    let globex = who(Some("globex"), Some("ann"));
    let a = lab.run(start("r-a", Some(acme.clone()), Some("s"))).await;
    let b = lab.run(start("r-b", Some(globex.clone()), Some("s"))).await;
    let log = Ran::default();
    let (_, key_a) = register_session(&a, &log, "a").await;
    let want_a = TeardownKey::session(Some(&acme), Some("s")).unwrap();
    assert_eq!(key_a, want_a.as_str());
    assert_eq!(
        lab.recorder.session_cleanups(&want_a),
        1,
        "registration used the key the tool was given"
    );
    let want_b = TeardownKey::session(Some(&globex), Some("s")).unwrap();
    assert_eq!(lab.recorder.session_cleanups(&want_b), 0);
    let (_, key_b) = register_session(&b, &log, "b").await;
    assert_eq!(key_b, want_b.as_str());
    assert_ne!(key_a, key_b, "the key differs across tenants");
    assert_eq!(lab.recorder.session_cleanups(&want_a), 1);
    assert_eq!(lab.recorder.session_cleanups(&want_b), 1);

    // Call and run keys: composed the same way, per call and per run.
    let keys = |run: Run| async move {
        run.call("keys", json!({}))
            .invoke(|ctx: ToolContext, _: Value| async move {
                let key = |s| ctx.teardown_key(s).map(|k| k.to_string());
                Ok::<_, ToolError>((
                    key(TeardownScope::Call)?,
                    key(TeardownScope::Run)?,
                    ctx.call_id().to_owned(),
                ))
            })
            .await
            .unwrap()
    };
    let (call_a, run_a, call_id) = keys(a.clone()).await;
    assert_eq!(run_a, TeardownKey::run(Some(&acme), "r-a").as_str());
    assert_eq!(
        call_a,
        TeardownKey::call(Some(&acme), &Home::Run("r-a".into()), &call_id).as_str()
    );
    let (call_a2, run_a2, _) = keys(a.clone()).await;
    assert_eq!(run_a2, run_a, "one run, one run key");
    assert_ne!(call_a2, call_a, "each call its own call key");
    a.end(RunStatus::Completed).await.unwrap();
    b.end(RunStatus::Completed).await.unwrap();
    lab.done().await;

    // The same run id in another archive, for another tenant: another key
    // (a tool's resources may outlive one archive).
    let lab = Lab::new().await;
    let other = lab.run(start("r-a", Some(globex.clone()), None)).await;
    let (_, run_other, _) = keys(other.clone()).await;
    assert_ne!(run_other, run_a);
    other.end(RunStatus::Completed).await.unwrap();
    lab.done().await;
}

// ---------------------------------------------------------------------------
// A session scope with no session id
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_session_registration_on_a_run_without_a_session_id_is_refused() {
    use TeardownScope::*;
    let lab = Lab::new().await;
    let log = Ran::default();
    let run = lab
        .run(RunStart::new("no-session").teardown_scopes([Call, Run, Session]))
        .await;
    let l = log.clone();
    let seen = Arc::new(Mutex::new(None));
    let out = seen.clone();
    run.call("browser", json!({}))
        .invoke(move |ctx: ToolContext, _: Value| async move {
            // Seed 000: the scopes are what the door can honour, and a run
            // with no session id honours no session scope, listed or not.
            assert!(!ctx.teardown_scopes().contains(&Session));
            let err = ctx
                .on_teardown(Session, "browser", move || async move {
                    l.lock().unwrap().push("orphan".into());
                    Ok::<_, String>(())
                })
                .unwrap_err();
            let key_err = ctx.teardown_key(Session).unwrap_err();
            *out.lock().unwrap() = Some((err, key_err));
            Ok::<_, ToolError>(())
        })
        .await
        .unwrap();
    let (err, key_err) = seen.lock().unwrap().take().unwrap();
    // Seed 000: refused "naming the door", as any scope it does not
    // honour (the message stays what records hold); the session's key
    // says what to do.
    assert!(
        matches!(err, ContextError::ScopeNotHonoured { .. }),
        "{err:?}"
    );
    assert_eq!(key_err, ContextError::NoSession);
    let message = err.to_string();
    assert!(message.contains("which honours: call, run;"), "{message}");
    let key_message = key_err.to_string();
    assert!(
        key_message.contains(".session(id)"),
        "says what to do: {key_message}"
    );
    run.end_session().await.unwrap();
    run.end(RunStatus::Completed).await.unwrap();

    // A later run passing "" does not get the cleanup: it is refused.
    let empty = lab
        .recorder
        .start_run(RunStart::new("empty").session(""))
        .await;
    assert!(matches!(empty, Err(RecorderError::EmptySession(ref id)) if id == "empty"));
    assert!(ran(&log).is_empty(), "the refused cleanup never runs");

    let book = lab.done().await;
    let facts = book.facts("no-session");
    let refused = all!(facts, TeardownRefused);
    assert_eq!(refused.len(), 1, "teardown.refused is recorded");
    assert_eq!(refused[0].scope, Session);
    assert_eq!(refused[0].reason, message);
    assert_eq!(refused[0].honoured, [Call, Run]);
    assert_eq!(
        refused[0].key_hash,
        reel_recorder::teardown_key_hash(&book.archive, "browser", Session, "browser")
    );
    assert!(all!(facts, TeardownRegistered).is_empty());
    assert!(all!(facts, TeardownRan).is_empty());
}

#[tokio::test]
async fn an_empty_session_id_is_refused_at_start_and_the_run_id_stays_free() {
    let lab = Lab::new().await;
    let err = lab
        .recorder
        .start_run(
            RunStart::new("r")
                .identity(who(Some("acme"), None))
                .session(""),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RecorderError::EmptySession(ref id) if id == "r"));
    let message = err.to_string();
    assert!(message.contains("session id is empty"), "{message}");
    assert!(message.contains("non-empty `.session(id)`"), "{message}");
    assert!(
        matches!(
            lab.recorder.archive().run("r"),
            Err(ArchiveError::UnknownRun { .. })
        ),
        "nothing was recorded"
    );
    // The refusal reserved nothing: the id can be used.
    let run = lab.run(RunStart::new("r").session("s-1")).await;
    run.end(RunStatus::Completed).await.unwrap();
    let book = lab.done().await;
    let facts = book.facts("r");
    let started = all!(facts, RunStarted)[0].clone();
    assert_eq!(started.session_id.as_deref(), Some("s-1"));
}

// ---------------------------------------------------------------------------
// Artifacts: the scope is composed, enforced, and ids are unguessable
// ---------------------------------------------------------------------------

/// Puts `bytes` from a call of `writer` in `run`; returns the ticket and
/// what the tool saw as its identity.
async fn put(
    run: &Run,
    store: &Arc<dyn ArtifactStore>,
    bytes: &[u8],
) -> (ArtifactMeta, Option<Identity>) {
    let bytes = bytes.to_vec();
    run.call("writer", json!({}))
        .artifacts(store.clone())
        .invoke(move |ctx: ToolContext, _: Value| async move {
            let meta = ctx.artifacts().put("text/plain", bytes).await?;
            Ok::<_, ToolError>((meta, ctx.identity().cloned()))
        })
        .await
        .unwrap()
}

/// Gets `id` from a call of `reader` in `run`.
async fn get(
    run: &Run,
    store: &Arc<dyn ArtifactStore>,
    id: &str,
) -> Result<Option<FoundArtifact>, ToolError> {
    let id = id.to_owned();
    run.call("reader", json!({}))
        .artifacts(store.clone())
        .invoke(move |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(ctx.artifacts().get(&id).await?)
        })
        .await
}

fn memory_store() -> Arc<dyn ArtifactStore> {
    Arc::new(MemoryArtifactStore::new())
}

#[tokio::test]
async fn runs_of_other_scopes_cannot_read_an_artifact_even_knowing_its_id() {
    let ann = who(Some("acme"), Some("ann"));
    let empty = Identity {
        tenant: Some(String::new()),
        principal: Some(String::new()),
        conversation: Some(String::new()),
    };
    let in_conv = |tenant: &str, principal: &str| Identity {
        conversation: Some("conv-1".into()),
        ..who(Some(tenant), Some(principal))
    };
    // (case, writer identity, writer session, reader identity, reader
    // session, reader run id)
    type Side = (Option<Identity>, Option<&'static str>);
    let cases: Vec<(&str, Side, Side, &str)> = vec![
        (
            "no identity, no session: two runs",
            (None, None),
            (None, None),
            "reader",
        ),
        (
            "no identity, two sessions",
            (None, Some("s1")),
            (None, Some("s2")),
            "reader",
        ),
        (
            "all-empty identity, two sessions",
            (Some(empty.clone()), Some("s1")),
            (Some(empty.clone()), Some("s2")),
            "reader",
        ),
        (
            "one tenant and principal, two sessions",
            (Some(ann.clone()), Some("s1")),
            (Some(ann.clone()), Some("s2")),
            "reader",
        ),
        (
            "two tenants, one conversation",
            (Some(in_conv("acme", "ann")), None),
            (Some(in_conv("globex", "ann")), None),
            "reader",
        ),
        (
            "one tenant, two principals, one conversation",
            (Some(in_conv("acme", "ann")), None),
            (Some(in_conv("acme", "bob")), None),
            "reader",
        ),
        (
            "absent tenant against empty tenant, one session",
            (Some(who(None, Some("ann"))), Some("s1")),
            (Some(who(Some(""), Some("ann"))), Some("s1")),
            "reader",
        ),
        (
            "a session named after the writer's run",
            (None, None),
            (None, Some("writer")),
            "reader",
        ),
        (
            "a session named after the writer's conversation",
            (Some(in_conv("acme", "ann")), None),
            (Some(ann.clone()), Some("conv-1")),
            "reader",
        ),
    ];
    for (case, (wi, ws), (ri, rs), reader_id) in cases {
        let lab = Lab::new().await;
        let store = memory_store();
        let writer = lab.run(start("writer", wi.clone(), ws)).await;
        let (meta, _) = put(&writer, &store, b"the writer's report").await;
        writer.end(RunStatus::Completed).await.unwrap();
        let reader = lab.run(start(reader_id, ri.clone(), rs)).await;
        let got = get(&reader, &store, &meta.id).await.unwrap();
        // The reader's own put is under its own scope.
        let (own, _) = put(&reader, &store, b"the reader's").await;
        reader.end(RunStatus::Completed).await.unwrap();
        assert_eq!(got, None, "{case}: read another scope's artifact");
        assert_ne!(own.scope, meta.scope, "{case}: the scopes differ");
        let book = lab.done().await;
        let facts = book.facts(reader_id);
        let gets = all!(facts, ArtifactGet);
        assert_eq!(gets.len(), 1, "{case}");
        assert_eq!(
            (gets[0].id.as_str(), &gets[0].meta),
            (meta.id.as_str(), &None),
            "{case}: the get is recorded, found nothing"
        );
        assert!(all!(facts, ArtifactRefused).is_empty(), "{case}");
    }
}

#[tokio::test]
async fn the_same_caller_in_the_same_conversation_reads_its_artifacts() {
    let ann = who(Some("acme"), Some("ann"));
    let named = Identity {
        conversation: Some("conv-1".into()),
        ..ann.clone()
    };
    type Side = (Option<Identity>, Option<&'static str>);
    let cases: Vec<(&str, Side, Side)> = vec![
        (
            "same identity, same session",
            (Some(ann.clone()), Some("s1")),
            (Some(ann.clone()), Some("s1")),
        ),
        (
            "no identity, same session",
            (None, Some("s1")),
            (None, Some("s1")),
        ),
        (
            "a named conversation, across sessions",
            (Some(named.clone()), Some("s1")),
            (Some(named.clone()), Some("s2")),
        ),
    ];
    for (case, (wi, ws), (ri, rs)) in cases {
        let lab = Lab::new().await;
        let store = memory_store();
        let writer = lab.run(start("writer", wi, ws)).await;
        let (meta, _) = put(&writer, &store, b"shared notes").await;
        writer.end(RunStatus::Completed).await.unwrap();
        let reader = lab.run(start("reader", ri, rs)).await;
        let got = get(&reader, &store, &meta.id).await.unwrap();
        reader.end(RunStatus::Completed).await.unwrap();
        let (found, bytes) = got.unwrap_or_else(|| panic!("{case}: the same scope reads it"));
        assert_eq!(
            (found, bytes.as_slice()),
            (meta.clone(), &b"shared notes"[..]),
            "{case}"
        );
        let book = lab.done().await;
        let facts = book.facts("reader");
        assert_eq!(
            all!(facts, ArtifactGet)[0].meta.as_ref(),
            Some(&meta),
            "{case}"
        );
    }
}

#[tokio::test]
async fn the_composed_scope_is_recorded_and_the_tool_still_sees_the_callers_identity() {
    let ann = who(Some("acme"), Some("ann"));
    let named = Identity {
        conversation: Some("conv-1".into()),
        ..ann.clone()
    };
    let empty_conv = Identity {
        conversation: Some(String::new()),
        ..ann.clone()
    };
    let scope = |t: Option<&str>, p: Option<&str>, c: &str| Identity {
        tenant: t.map(str::to_owned),
        principal: p.map(str::to_owned),
        conversation: Some(c.to_owned()),
    };
    let cases = [
        (None, None, scope(None, None, "run:r")),
        (None, Some("s1"), scope(None, None, "session:s1")),
        (
            Some(ann.clone()),
            Some("s1"),
            scope(Some("acme"), Some("ann"), "session:s1"),
        ),
        (
            Some(named.clone()),
            Some("s1"),
            scope(Some("acme"), Some("ann"), "conversation:conv-1"),
        ),
        // An empty conversation names none: the session stands in.
        (
            Some(empty_conv.clone()),
            Some("s1"),
            scope(Some("acme"), Some("ann"), "session:s1"),
        ),
        (
            Some(empty_conv.clone()),
            None,
            scope(Some("acme"), Some("ann"), "run:r"),
        ),
    ];
    for (identity, session, want) in cases {
        let lab = Lab::new().await;
        let store = memory_store();
        let run = lab.run(start("r", identity.clone(), session)).await;
        let (meta, seen) = put(&run, &store, b"x").await;
        run.end(RunStatus::Completed).await.unwrap();
        assert_eq!(meta.scope, want, "{identity:?} {session:?}");
        assert_eq!(
            meta.scope,
            artifact_scope(&Home::Run("r".into()), session, identity.as_ref())
        );
        assert_eq!(seen, identity, "ctx.identity() is what the caller supplied");
        let book = lab.done().await;
        let facts = book.facts("r");
        assert_eq!(
            all!(facts, ArtifactPut)[0].meta.scope,
            want,
            "the scope is on the record"
        );
        assert_eq!(
            all!(facts, RunStarted)[0].identity,
            identity,
            "never synthesised"
        );
        assert_eq!(book.archive.run("r").unwrap().identity, identity);
    }
}

#[tokio::test]
async fn artifact_ids_are_unguessable_128_bit_values() {
    const N: usize = 1000;
    let lab = Lab::new().await;
    let store = memory_store();
    let run = lab.run(RunStart::new("many")).await;
    let s = store.clone();
    let ids: Vec<String> = run
        .call("writer", json!({}))
        .artifacts(store.clone())
        .invoke(move |ctx: ToolContext, _: Value| async move {
            let mut ids = Vec::new();
            for i in 0..N {
                ids.push(ctx.artifacts().put("text/plain", i.to_string()).await?.id);
            }
            drop(s);
            Ok::<_, ToolError>(ids)
        })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();

    let distinct: HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), N, "every id is distinct");
    let values: Vec<u128> = ids
        .iter()
        .map(|id| {
            let hex = id.strip_prefix("art-").unwrap_or_else(|| panic!("{id}"));
            assert_eq!(hex.len(), 32, "{id}: 32 hex digits");
            u128::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{id}: {e}"))
        })
        .collect();
    // Not sequential: no id follows from the previous one, and the ids do
    // not grow in put order.
    assert!(
        values.windows(2).all(|w| w[1].abs_diff(w[0]) > 1 << 64),
        "neighbouring ids are close: a counter, not random"
    );
    assert!(
        !values.windows(2).all(|w| w[0] < w[1]),
        "ids grow in put order"
    );
    // Every one of the 32 hex places varies (a counter, or fewer random
    // bits padded out, leaves places fixed).
    for place in 0..32 {
        let seen: HashSet<u8> = ids.iter().map(|id| id.as_bytes()[4 + place]).collect();
        assert!(
            seen.len() >= 12,
            "hex place {place} takes only {} values",
            seen.len()
        );
    }
    let book = lab.done().await;
    let recorded: Vec<String> = all!(book.facts("many"), ArtifactPut)
        .iter()
        .map(|p| p.meta.id.clone())
        .collect();
    assert_eq!(recorded, ids);
}

/// A store that breaks the contract: it files by id alone, and can be told
/// to rewrite the scope of what it returns from `put`.
#[derive(Default)]
struct LeakyStore {
    items: Mutex<HashMap<String, FoundArtifact>>,
    rewrite_put_scope: bool,
}

impl ArtifactStore for LeakyStore {
    fn put(
        &self,
        mut meta: ArtifactMeta,
        bytes: Vec<u8>,
    ) -> BoxFuture<'_, Result<ArtifactMeta, String>> {
        meta.id = format!("leak-{}", self.items.lock().unwrap().len() + 1);
        self.items
            .lock()
            .unwrap()
            .insert(meta.id.clone(), (meta.clone(), bytes));
        if self.rewrite_put_scope {
            meta.scope = Identity::default();
        }
        Box::pin(async move { Ok(meta) })
    }

    fn get<'a>(
        &'a self,
        _scope: &'a Identity,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        let found = self.items.lock().unwrap().get(id).cloned();
        Box::pin(async move { Ok(found) })
    }
}

#[tokio::test]
async fn a_store_that_ignores_the_scope_is_refused_instead_of_leaking() {
    let lab = Lab::new().await;
    let store: Arc<dyn ArtifactStore> = Arc::new(LeakyStore::default());
    let a = lab
        .run(start("a", Some(who(Some("acme"), Some("ann"))), Some("s")))
        .await;
    let (meta, _) = put(&a, &store, b"acme's secret plan").await;
    a.end(RunStatus::Completed).await.unwrap();
    let b = lab
        .run(start(
            "b",
            Some(who(Some("globex"), Some("ann"))),
            Some("s"),
        ))
        .await;
    let err = get(&b, &store, &meta.id).await.unwrap_err();
    b.end(RunStatus::Completed).await.unwrap();
    let message = err.to_string();
    assert!(message.contains("broke its contract"), "{message}");
    assert!(!message.contains("secret plan"), "{message}");

    let rewriting: Arc<dyn ArtifactStore> = Arc::new(LeakyStore {
        rewrite_put_scope: true,
        ..LeakyStore::default()
    });
    let c = lab.run(start("c", None, None)).await;
    let put_err = c
        .call("writer", json!({}))
        .artifacts(rewriting)
        .invoke(|ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(ctx.artifacts().put("text/plain", b"x".to_vec()).await?)
        })
        .await
        .unwrap_err();
    c.end(RunStatus::Completed).await.unwrap();
    assert!(
        put_err.to_string().contains("must keep the scope"),
        "{put_err}"
    );

    let book = lab.done().await;
    let b_facts = book.facts("b");
    assert!(
        all!(b_facts, ArtifactGet).is_empty(),
        "no ticket of acme reached globex's record"
    );
    let refused = all!(b_facts, ArtifactRefused);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].op, ArtifactOp::Get);
    assert_eq!(refused[0].id.as_deref(), Some(meta.id.as_str()));
    assert!(
        !serde_json::to_string(&b_facts).unwrap().contains("acme"),
        "acme's scope is not in globex's run"
    );
    let c_facts = book.facts("c");
    assert!(all!(c_facts, ArtifactPut).is_empty());
    assert_eq!(all!(c_facts, ArtifactRefused)[0].op, ArtifactOp::Put);
}
