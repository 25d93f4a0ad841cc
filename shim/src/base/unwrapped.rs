//! Names of driver entry points the program looked up but gpuspy does not wrap: they pass
//! through untouched and are remembered once each, so a report can say what it could not
//! see. Fixed slots claimed by CAS; lookups are rare (a few hundred per process).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, Ordering::*};

const SLOTS: usize = 1024;
const NAME_BYTES: usize = 64;

struct Slot {
    /// 0 free, 1 being written, 2 published.
    state: AtomicU8,
    name: [AtomicU8; NAME_BYTES],
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU8 = AtomicU8::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    state: AtomicU8::new(0),
    name: [ZERO; NAME_BYTES],
};
static NAMES: [Slot; SLOTS] = [FREE; SLOTS];

fn matches(slot: &Slot, name: &[u8]) -> bool {
    slot.name
        .iter()
        .zip(name.iter().chain(std::iter::repeat(&0)))
        .all(|(a, &b)| a.load(Relaxed) == b)
}

pub fn note(name: &CStr) {
    let name = name.to_bytes();
    let name = name.get(..NAME_BYTES - 1).unwrap_or(name);
    for slot in &NAMES {
        match slot.state.compare_exchange(0, 1, AcqRel, Acquire) {
            Ok(_) => {
                for (dst, &b) in slot.name.iter().zip(name) {
                    dst.store(b, Relaxed);
                }
                slot.state.store(2, Release);
                return;
            }
            Err(2) if matches(slot, name) => return,
            Err(_) => {}
        }
    }
}

/// The names noted so far, sorted and unique.
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = NAMES
        .iter()
        .filter(|s| s.state.load(Acquire) == 2)
        .map(|s| {
            let bytes: Vec<u8> = s
                .name
                .iter()
                .map(|b| b.load(Relaxed))
                .take_while(|&b| b != 0)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Forgets every name (fork child).
pub fn reset() {
    for slot in &NAMES {
        slot.state.store(0, Relaxed);
        slot.name.iter().for_each(|b| b.store(0, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_once() {
        note(c"cuDeviceGetAttribute");
        note(c"cuDeviceGetAttribute");
        note(c"cuCtxGetCurrent");
        let names = names();
        assert_eq!(
            names
                .iter()
                .filter(|n| *n == "cuDeviceGetAttribute")
                .count(),
            1
        );
        assert!(names.contains(&"cuCtxGetCurrent".to_string()));
    }
}
