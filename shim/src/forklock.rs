//! A lock for state that gpuspy's threads and the program's threads share off the hot path
//! (the timeline's windows and event history). A spin lock rather than a `Mutex`: a child
//! forked while a parent thread held it must be able to take it over, and its state is
//! stale there (the child starts from zero, like the arena).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::Duration;

pub struct ForkLock<T> {
    locked: AtomicBool,
    /// Set in a fork child: the next holder starts from `T::default()`.
    stale: AtomicBool,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for ForkLock<T> {}

pub struct Guard<'a, T: Default> {
    lock: &'a ForkLock<T>,
}

impl<T: Default> ForkLock<T> {
    pub const fn new() -> Self {
        ForkLock {
            locked: AtomicBool::new(false),
            stale: AtomicBool::new(false),
            value: UnsafeCell::new(None),
        }
    }

    pub fn lock(&self) -> Guard<'_, T> {
        while !self.try_take() {
            std::thread::yield_now();
        }
        self.guard()
    }

    /// The lock, unless it stays held for longer than `patience` (a signal's dump must
    /// not wait forever on a thread the signal interrupted).
    pub fn lock_within(&self, patience: Duration) -> Option<Guard<'_, T>> {
        let deadline = std::time::Instant::now() + patience;
        while !self.try_take() {
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::yield_now();
        }
        Some(self.guard())
    }

    /// Fork child: whichever parent thread held the lock does not exist here.
    /// Async-signal-safe (two stores).
    pub fn reset_in_child(&self) {
        self.stale.store(true, Relaxed);
        self.locked.store(false, Release);
    }

    fn try_take(&self) -> bool {
        self.locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_ok()
    }

    fn guard(&self) -> Guard<'_, T> {
        // SAFETY: we hold the lock, so no other reference to the value exists.
        let value = unsafe { &mut *self.value.get() };
        if self.stale.swap(false, Relaxed) || value.is_none() {
            *value = Some(T::default());
        }
        Guard { lock: self }
    }
}

impl<T: Default> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, and `guard` made the value.
        unsafe { (*self.lock.value.get()).as_ref().unwrap_unchecked() }
    }
}

impl<T: Default> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed mutably.
        unsafe { (*self.lock.value.get()).as_mut().unwrap_unchecked() }
    }
}

impl<T: Default> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_takes_over_a_held_lock_with_fresh_state() {
        let lock: ForkLock<Vec<u32>> = ForkLock::new();
        let mut held = lock.lock();
        held.push(7);
        std::mem::forget(held);
        assert!(lock.lock_within(Duration::from_millis(5)).is_none());
        lock.reset_in_child();
        assert!(lock.lock().is_empty());
    }
}
