//! Following a run: its facts as they land, until it is closed.

use std::collections::VecDeque;

use futures::Stream;

use reel_core::fact::Fact;
use reel_core::gap::Gap;

use crate::{Archive, ArchiveError, Result};

impl Archive {
    /// Follows a run: yields its facts from `from_seq` on, waiting for new
    /// ones as they land, and ends once the run is closed and all its facts
    /// were yielded. Only appends made through this process's [`Archive`]
    /// wake it (sled admits one process per archive).
    pub fn follow(
        &self,
        run_id: &str,
        from_seq: u64,
    ) -> impl Stream<Item = Result<Fact>> + Send + 'static {
        struct Follow {
            archive: Archive,
            run_id: String,
            next: u64,
            buf: VecDeque<Result<Fact>>,
            rx: tokio::sync::watch::Receiver<u64>,
            done: bool,
        }
        let state = Follow {
            archive: self.clone(),
            run_id: run_id.into(),
            next: from_seq,
            buf: VecDeque::new(),
            rx: self.inner.appended.subscribe(),
            done: false,
        };
        futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(item) = st.buf.pop_front() {
                    return Some((item, st));
                }
                if st.done {
                    return None;
                }
                st.rx.borrow_and_update();
                let closed = match st.archive.run(&st.run_id) {
                    Ok(r) => r.state.is_closed(),
                    Err(ArchiveError::UnknownRun { .. }) => false,
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                };
                match st.archive.facts(&st.run_id, st.next..) {
                    Ok(facts) => {
                        for item in facts {
                            match &item {
                                Ok(f) => st.next = f.seq + 1,
                                Err(ArchiveError::Corrupt {
                                    gap: Gap { last: Some(l), .. },
                                    ..
                                }) => st.next = l + 1,
                                Err(_) => st.done = true,
                            }
                            st.buf.push_back(item);
                            if st.done {
                                break;
                            }
                        }
                    }
                    Err(ArchiveError::UnknownRun { .. }) => {}
                    Err(e) => {
                        st.done = true;
                        st.buf.push_back(Err(e));
                    }
                }
                // Closed and nothing new: done. Otherwise wait for an append
                // (an error means the archive is gone: done too).
                if st.buf.is_empty() && (closed || st.rx.changed().await.is_err()) {
                    st.done = true;
                }
            }
        })
    }
}
