//! `/runs/{id}/events`: one run, followed. A `run` event (data: the
//! run's fact count and state, `"42 running"`) each time either changed,
//! looked at whenever the archive is opened again and every poll (a
//! recorder's live socket announces no change of its own); the stream
//! ends after the event that says the run closed. The page says what it
//! shows (`?facts=N`): a change between its render and the stream's start
//! is told at once. The run's page
//! (`run.js`) then fetches itself again and swaps its parts in.

use std::time::Duration;

use super::*;

/// `/runs/{id}/events`.
pub(crate) async fn run_events(
    access: Access,
    Path(run_id): Path<String>,
    Query(shown): Query<Shown>,
) -> Response {
    // An unknown run (or another tenant's) is a 404 now, not an empty
    // stream.
    let (gate, id) = (access.clone(), run_id.clone());
    if let Err(r) = blocking(move || gate.run(&id).map(|_| ()).map_err(read_error)).await {
        return r.into_response();
    }
    let poll = access.console.poll().max(Duration::from_millis(100));
    let rx = access.subscribe();
    let state = Follow {
        access,
        run_id,
        rx,
        poll,
        last: shown.facts.map(|n| (n, RunState::Running.as_str())),
        over: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        if st.over {
            return None;
        }
        loop {
            let seen = st.look().await;
            if let Some(now) = seen {
                if st.last.as_ref() != Some(&now) {
                    let closed = now.1 != RunState::Running.as_str();
                    // Without `?facts`, the first look sets where the page
                    // stands.
                    let first = st.last.is_none();
                    st.last = Some(now);
                    if closed {
                        st.over = true;
                    }
                    if !first || closed {
                        let event = Event::default()
                            .event("run")
                            .data(format!("{} {}", now.0, now.1));
                        return Some((Ok::<_, Infallible>(event), st));
                    }
                }
            }
            tokio::select! {
                _ = st.rx.changed() => {}
                _ = tokio::time::sleep(st.poll) => {}
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// What the page shows.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct Shown {
    /// Its fact count.
    facts: Option<u64>,
}

struct Follow {
    access: Access,
    run_id: String,
    rx: tokio::sync::watch::Receiver<u64>,
    poll: Duration,
    /// The fact count and state last told.
    last: Option<(u64, &'static str)>,
    over: bool,
}

impl Follow {
    /// The run's fact count and state now (`None` when it cannot be read
    /// this time: the recorder is closing, the archive is reopening).
    async fn look(&mut self) -> Option<(u64, &'static str)> {
        let now = self.access.fresh();
        let id = self.run_id.clone();
        let record = tokio::task::spawn_blocking(move || now.run(&id).ok())
            .await
            .ok()
            .flatten()?;
        Some((record.facts, record.state.as_str()))
    }
}
