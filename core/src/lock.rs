//! The poison-ignoring locks of the workspace: one function per `std`
//! primitive ([`lock`] a `Mutex`, [`read`] and [`write`] an `RwLock`,
//! [`wait`] on a `Condvar`), and no copy elsewhere.
//!
//! A `std` lock is poisoned when a thread panics while holding it, and
//! every later `lock()` (`read()`, `write()`, and a `Condvar` wait that
//! takes the lock back) then fails. reel ignores poisoning, in one place:
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
//! update that a panic could leave half done) must not use these.

use std::sync::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

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
/// *reel_core::lock::lock(&m) += 1;
/// assert_eq!(*reel_core::lock::lock(&m), 2);
/// ```
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks `l` for reading, ignoring poisoning.
///
/// ```
/// use std::sync::RwLock;
/// let l = RwLock::new(1);
/// let _ = std::panic::catch_unwind(|| {
///     let _guard = l.write().unwrap();
///     panic!("a writer panics");
/// });
/// assert!(l.is_poisoned());
/// assert_eq!(*reel_core::lock::read(&l), 1);
/// ```
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks `l` for writing, ignoring poisoning.
///
/// ```
/// use std::sync::RwLock;
/// let l = RwLock::new(1);
/// let _ = std::panic::catch_unwind(|| {
///     let _guard = l.write().unwrap();
///     panic!("a writer panics");
/// });
/// *reel_core::lock::write(&l) += 1;
/// assert_eq!(*reel_core::lock::read(&l), 2);
/// ```
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `cv` with `guard` (the lock of the mutex `cv` is used with),
/// and hands the lock back when woken, ignoring poisoning. Like
/// [`Condvar::wait`], it may wake spuriously: call it in a loop that
/// checks the condition.
///
/// ```
/// use std::sync::{Condvar, Mutex};
/// let (m, cv) = (Mutex::new(false), Condvar::new());
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         *reel_core::lock::lock(&m) = true;
///         cv.notify_all();
///     });
///     let mut ready = reel_core::lock::lock(&m);
///     while !*ready {
///         ready = reel_core::lock::wait(&cv, ready);
///     }
/// });
/// ```
pub fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
