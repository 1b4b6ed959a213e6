//! The `memory` row.

use crate::*;

/// The `memory` row (see [`memory`]).
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        s,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let n = s.memory_reports;
    let progress_bound = RecorderConfig::default().progress_bound;
    writeln!(
        log,
        "\n[memory] a tool filing {n} progress reports without an await, each side in a child process \
         (peak RSS = VmHWM, read when the recording has shut down); baseline: the same recorder and call \
         filing no report; progress_bound {progress_bound}"
    )?;
    let mb = |b: u64| b as f64 / 1e6;
    let bare = memory::measure(memory::Mode::Bare, n, tmp("reel-bench-memory-")?.path())?;
    writeln!(
        log,
        "  (for information: the same loop with no recorder peaks at {:.1} MB)",
        mb(bare.hwm)
    )?;
    let mut pairs = Pairs::default();
    let mut stored = 0;
    for round in 0..rounds {
        let (mut storm, mut idle) = (None, None);
        for side in [round % 2, 1 - round % 2] {
            let dir = tmp("reel-bench-memory-")?;
            if side == 0 {
                storm = Some(memory::measure(memory::Mode::Storm, n, dir.path())?);
            } else {
                idle = Some(memory::measure(memory::Mode::Idle, 0, dir.path())?);
            }
        }
        let (st, id) = (storm.expect("ran"), idle.expect("ran"));
        if st.kept + st.dropped != n {
            return Err(io::Error::other(format!(
                "the record counts {} kept + {} dropped reports of {n}",
                st.kept, st.dropped
            )));
        }
        stored = stored.max(st.stored);
        let bound = memory::bound(id.hwm, progress_bound, st.stored);
        writeln!(
            log,
            "  round {}: storm peak {:.1} MB ({} reports kept, {} dropped, {:.1} MB stored); idle peak {:.1} MB; \
             bound {:.1} MB ({})",
            round + 1,
            mb(st.hwm),
            st.kept,
            st.dropped,
            mb(st.stored),
            mb(id.hwm),
            mb(bound),
            if st.hwm < bound { "holds" } else { "over" }
        )?;
        pairs.push(mb(st.hwm), mb(id.hwm));
    }
    let idle = median(&pairs.base);
    let bound = mb(memory::bound((idle * 1e6) as u64, progress_bound, stored));
    writeln!(
        log,
        "  bound = idle peak {idle:.1} MB + progress_bound {progress_bound} x {} B (a queued report) \
         + the writer's drain {:.1} MB + {}/{} x the bytes stored (sled keeps what it wrote resident; at most {:.1} MB here) = {bound:.1} MB",
        memory::QUEUE_BYTES_PER_REPORT,
        mb(memory::DRAIN_BYTES),
        memory::STORED_RESIDENT.0,
        memory::STORED_RESIDENT.1,
        mb(stored),
    )?;
    rows.push(pairs.row(
        "memory",
        &format!("memory: peak RSS of a tool filing {n} progress reports without an await"),
        "the same call filing none",
        Unit::Megabytes,
        Target::Under(bound),
    ));
    Ok(())
}
