//! The one poison-ignoring lock of the workspace.
//!
//! A `std` mutex is poisoned when a thread panics while holding it, and
//! every later `lock()` then fails. reel ignores poisoning, in one place:
//! every critical section in reel mutates its data in single steps (an
//! insert, a remove, a `take`, a swap of a whole value, a counter), so a
//! holder that panics leaves data that is still consistent, only without
//! the step it did not finish; and the panic itself is caught or reported
//! where it happened (a tool's panic is its call's error, the language
//! server's handler is `guarded`, a writer thread's end is a writer
//! failure). Propagating the poison would turn one panicking tool or
//! thread into a failure of every later call on the same recorder, store
//! or connection: other runs would stop being recorded, the writer could
//! no longer report what failed, and a server would stop answering.
//!
//! A new critical section that cannot keep this promise (a multi-step
//! update that a panic could leave half done) must not use [`lock`].

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning (see the module docs for why that is
/// right here).
///
/// ```
/// use std::sync::Mutex;
/// let m = Mutex::new(1);
/// let _ = std::panic::catch_unwind(|| {
///     let _guard = m.lock().unwrap();
///     panic!("a holder panics");
/// });
/// assert!(m.is_poisoned());
/// *reel_core::sync::lock(&m) += 1;
/// assert_eq!(*reel_core::sync::lock(&m), 2);
/// ```
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
