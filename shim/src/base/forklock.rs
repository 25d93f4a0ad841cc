//! The shim's one lock, for state that gpuspy's threads and the program's threads share off
//! the hot path: the blocks being folded (`record`), the call-site table (`pystack`), the
//! timeline's windows and event history. A spin lock rather than a `Mutex`: a child forked
//! while a parent thread held it must be able to take it over (`reset_in_child`), and a
//! caller that must not wait (a call-site capture inside the program's call) can `try_lock`
//! and skip.
//!
//! `ForkLock` adds state that starts afresh in a fork child (the child starts from zero,
//! like the arena): its value is made at the first lock, and again after a fork.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock if it is free now; never waits.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Lazily: a guard made and dropped on failure would unlock the holder's lock.
        self.locked
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
            .then(|| SpinGuard { lock: self })
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            std::thread::yield_now();
        }
    }

    /// The lock, unless it stays held for longer than `patience` (a signal's dump must
    /// not wait forever on a thread the signal interrupted).
    pub fn lock_within(&self, patience: Duration) -> Option<SpinGuard<'_, T>> {
        let deadline = Instant::now() + patience;
        loop {
            if let Some(guard) = self.try_lock() {
                return Some(guard);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// Fork child: whichever parent thread held the lock does not exist here.
    /// Async-signal-safe (one store).
    pub fn reset_in_child(&self) {
        self.locked.store(false, Release);
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no mutable reference exists elsewhere.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Release);
    }
}

/// A `SpinLock` whose value a fork child does not inherit.
pub struct ForkLock<T> {
    lock: SpinLock<Option<T>>,
    /// Set in a fork child: the next holder starts from `T::default()`.
    stale: AtomicBool,
}

pub struct Guard<'a, T> {
    inner: SpinGuard<'a, Option<T>>,
}

impl<T: Default> ForkLock<T> {
    pub const fn new() -> Self {
        ForkLock {
            lock: SpinLock::new(None),
            stale: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) -> Guard<'_, T> {
        self.fresh(self.lock.lock())
    }

    /// As `SpinLock::lock_within`.
    pub fn lock_within(&self, patience: Duration) -> Option<Guard<'_, T>> {
        self.lock.lock_within(patience).map(|g| self.fresh(g))
    }

    /// Fork child: the lock is free and its value the parent's, made afresh at the next
    /// lock. Async-signal-safe (two stores).
    pub fn reset_in_child(&self) {
        self.stale.store(true, Relaxed);
        self.lock.reset_in_child();
    }

    fn fresh<'a>(&self, mut inner: SpinGuard<'a, Option<T>>) -> Guard<'a, T> {
        if self.stale.swap(false, Relaxed) || inner.is_none() {
            *inner = Some(T::default());
        }
        Guard { inner }
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `fresh` made the value before handing out the guard.
        unsafe { self.inner.as_ref().unwrap_unchecked() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above.
        unsafe { self.inner.as_mut().unwrap_unchecked() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_not_taken_by_try_lock() {
        let lock = SpinLock::new(1u32);
        let held = lock.try_lock().unwrap();
        assert!(lock.try_lock().is_none());
        assert!(lock.lock_within(Duration::from_millis(1)).is_none());
        drop(held);
        *lock.try_lock().unwrap() += 1;
        assert_eq!(*lock.lock(), 2);
    }

    #[test]
    fn a_child_takes_over_a_held_spin_lock_with_its_value() {
        let lock = SpinLock::new(7u32);
        std::mem::forget(lock.lock());
        assert!(lock.try_lock().is_none());
        lock.reset_in_child();
        assert_eq!(*lock.try_lock().unwrap(), 7);
    }

    #[test]
    fn a_child_takes_over_a_held_fork_lock_with_fresh_state() {
        let lock: ForkLock<Vec<u32>> = ForkLock::new();
        let mut held = lock.lock();
        held.push(7);
        std::mem::forget(held);
        assert!(lock.lock_within(Duration::from_millis(5)).is_none());
        lock.reset_in_child();
        assert!(lock.lock().is_empty());
    }
}
