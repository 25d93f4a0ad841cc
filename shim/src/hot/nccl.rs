//! NCCL interposition through NCCL's profiling interface: every public function is a weak
//! `ncclX` with a strong alias `pncclX`, so the shim defines `ncclX` and forwards to `pncclX`
//! (`resolve::real_fn` looks up the `p` name in the loaded libnccl). It records what the
//! process asked NCCL to do: per-call enqueue latency (the usual per-hook histograms), calls
//! and bytes per collective and datatype, and for each communicator a key that is equal on
//! all its ranks and the number of operations issued on it. The GPU time of the collectives
//! needs CUPTI and is not measured.
//!
//! NCCL calls are orders of magnitude rarer than driver calls, so the tables here are global
//! and updated with atomic read-modify-writes; they never allocate or lock.

use crate::effect::Effect;
use crate::hooks::Ptr;
use gpuspy_format::{Communicator, Nccl, NcclOps};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

/// `ncclResult_t`.
pub type NcclResult = c_int;
/// `ncclInternalError`: what a wrapper returns when the loaded NCCL lacks the function.
pub const NCCL_INTERNAL_ERROR: NcclResult = 3;

/// `ncclUniqueId`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId(pub [u8; 128]);

/// The operations counted per datatype, named as in the dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    Send,
    Recv,
}

impl Op {
    const ALL: [Op; 7] = [
        Op::AllReduce,
        Op::Broadcast,
        Op::Reduce,
        Op::AllGather,
        Op::ReduceScatter,
        Op::Send,
        Op::Recv,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "AllReduce",
            Op::Broadcast => "Broadcast",
            Op::Reduce => "Reduce",
            Op::AllGather => "AllGather",
            Op::ReduceScatter => "ReduceScatter",
            Op::Send => "Send",
            Op::Recv => "Recv",
        }
    }
}

/// `ncclDataType_t` values 0..=11 and their sizes.
const DATATYPES: [(&str, u64); 12] = [
    ("int8", 1),
    ("uint8", 1),
    ("int32", 4),
    ("uint32", 4),
    ("int64", 8),
    ("uint64", 8),
    ("float16", 2),
    ("float32", 4),
    ("float64", 8),
    ("bfloat16", 2),
    ("float8e4m3", 1),
    ("float8e5m2", 1),
];
const UNKNOWN_TYPE: usize = DATATYPES.len();

struct Cell {
    calls: AtomicU64,
    bytes: AtomicU64,
}
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_CELL: Cell = Cell {
    calls: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
};
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_ROW: [Cell; DATATYPES.len() + 1] = [EMPTY_CELL; DATATYPES.len() + 1];
static OP_TABLE: [[Cell; DATATYPES.len() + 1]; Op::ALL.len()] = [EMPTY_ROW; Op::ALL.len()];
static GROUPS: AtomicU64 = AtomicU64::new(0);
/// The program made a communicator.
static USED: AtomicBool = AtomicBool::new(false);

/// Communicators by handle, claimed by CAS on `comm`.
struct CommSlot {
    comm: AtomicUsize,
    key: AtomicU64,
    rank: AtomicI32,
    nranks: AtomicI32,
    operations: AtomicU64,
    bytes: AtomicU64,
    splits: AtomicU64,
    /// The last operation issued on it, as `Op` index plus one (0: none yet).
    last_op: AtomicU8,
}
const COMM_SLOTS: usize = 256;
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_COMM: CommSlot = CommSlot {
    comm: AtomicUsize::new(0),
    key: AtomicU64::new(0),
    rank: AtomicI32::new(0),
    nranks: AtomicI32::new(0),
    operations: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    splits: AtomicU64::new(0),
    last_op: AtomicU8::new(0),
};
static COMMS: [CommSlot; COMM_SLOTS] = [EMPTY_COMM; COMM_SLOTS];

/// Each thread's latest operation (by its statistics block): which communicator and its
/// sequence number there, for the hang watchdog to say which collective a thread stuck in
/// NCCL is in. Written before the call, by the thread itself.
struct ThreadOp {
    block: AtomicUsize,
    /// Index into `COMMS` plus one (0: a communicator the shim does not know).
    comm: AtomicUsize,
    sequence: AtomicU64,
}
const THREAD_OPS: usize = 64;
#[allow(clippy::declare_interior_mutable_const)]
const NO_THREAD_OP: ThreadOp = ThreadOp {
    block: AtomicUsize::new(0),
    comm: AtomicUsize::new(0),
    sequence: AtomicU64::new(0),
};
static THREAD_OP: [ThreadOp; THREAD_OPS] = [NO_THREAD_OP; THREAD_OPS];

/// Files the calling thread's operation number `sequence` on communicator slot `comm`.
fn file_thread_op(comm: usize, sequence: u64) {
    let Some(block) = crate::tls::local().map(|l| l.slot.get() as usize) else {
        return;
    };
    if block == 0 {
        return;
    }
    let mine = THREAD_OP.iter().find(|t| {
        let owner = t.block.load(Acquire);
        owner == block
            || (owner == 0 && t.block.compare_exchange(0, block, AcqRel, Acquire).is_ok())
    });
    if let Some(t) = mine {
        t.comm.store(comm, Relaxed);
        t.sequence.store(sequence, Relaxed);
    }
}

/// The communicator key and sequence number of the latest operation of the thread whose
/// block is `block`, if it issued one on a known communicator.
pub fn thread_op(block: *const crate::record::ThreadStats) -> Option<(String, u64)> {
    let t = THREAD_OP
        .iter()
        .find(|t| t.block.load(Acquire) == block as usize)?;
    let slot = COMMS.get(t.comm.load(Relaxed).checked_sub(1)?)?;
    Some((
        format!("{:016x}", slot.key.load(Relaxed)),
        t.sequence.load(Relaxed),
    ))
}

/// FNV-1a, 64 bits: stable across processes and builds.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn find_comm(comm: Ptr) -> Option<&'static CommSlot> {
    find_comm_and_index(comm).map(|(_, slot)| slot)
}

/// The communicator's slot and its index in `COMMS`.
fn find_comm_and_index(comm: Ptr) -> Option<(usize, &'static CommSlot)> {
    let key = comm as usize;
    COMMS
        .iter()
        .enumerate()
        .find(|(_, s)| key != 0 && s.comm.load(Acquire) == key)
}

fn register_comm(comm: Ptr, key: u64, rank: c_int, nranks: c_int) {
    if comm.is_null() {
        return;
    }
    USED.store(true, Relaxed);
    for slot in &COMMS {
        if slot
            .comm
            .compare_exchange(0, comm as usize, AcqRel, Relaxed)
            .is_ok()
        {
            slot.key.store(key, Relaxed);
            slot.rank.store(rank, Relaxed);
            slot.nranks.store(nranks, Relaxed);
            return;
        }
    }
}

/// What a communicator call does to the communicator table once NCCL has answered. Built
/// from the arguments before the call, like an `Effect`, and run after it.
#[derive(Clone, Copy)]
pub enum After {
    /// `ncclCommInitRank[Config]`: NCCL writes the new communicator to `out` on success.
    Registers {
        out: *mut Ptr,
        key: u64,
        rank: c_int,
        nranks: c_int,
    },
    /// `ncclCommSplit`. A split's key: its parent's key, the parent's split count and the
    /// color, which all ranks of the new communicator share. Ranks and sizes come from the
    /// new communicator's members' own `key`/`color` arguments, which NCCL does not hand
    /// back here.
    Splits {
        parent: Ptr,
        color: c_int,
        key: c_int,
        out: *mut Ptr,
    },
    /// `ncclCommDestroy`/`ncclCommAbort`: the handle is forgotten whatever they return.
    Forgets(Ptr),
}

/// The communicator an init call creates from `id`.
pub fn registers(out: *mut Ptr, id: &UniqueId, rank: c_int, nranks: c_int) -> After {
    After::Registers {
        out,
        key: fnv1a(&id.0),
        rank,
        nranks,
    }
}

/// The communicator `ncclCommSplit` derives from `parent`.
pub fn splits(parent: Ptr, color: c_int, key: c_int, out: *mut Ptr) -> After {
    After::Splits {
        parent,
        color,
        key,
        out,
    }
}

pub fn forgets(comm: Ptr) -> After {
    After::Forgets(comm)
}

impl crate::hooks::Then<NcclResult> for After {
    fn then(self, result: NcclResult) {
        match self {
            After::Registers {
                out,
                key,
                rank,
                nranks,
            } if result == 0 && !out.is_null() => {
                // SAFETY: the init call's out-pointer, which NCCL wrote on success.
                register_comm(unsafe { *out }, key, rank, nranks);
            }
            After::Splits {
                parent,
                color,
                key,
                out,
            } if result == 0 && !out.is_null() => {
                if let Some(parent) = find_comm(parent) {
                    let split = parent.splits.fetch_add(1, Relaxed);
                    let mut seed = [0u8; 20];
                    seed[..8].copy_from_slice(&parent.key.load(Relaxed).to_le_bytes());
                    seed[8..16].copy_from_slice(&split.to_le_bytes());
                    seed[16..].copy_from_slice(&color.to_le_bytes());
                    // SAFETY: NCCL wrote the new communicator on success (null for color
                    // NCCL_SPLIT_NOCOLOR).
                    register_comm(unsafe { *out }, fnv1a(&seed), key, -1);
                }
            }
            After::Forgets(comm) => forget_comm(comm),
            _ => {}
        }
    }
}

/// Before `ncclGroupStart`.
pub fn group_started() -> Effect {
    GROUPS.fetch_add(1, Relaxed);
    Effect::None
}

/// Before a collective or point-to-point call: counts it at once, whatever it returns.
pub fn operation(op: Op, n: usize, datatype: c_int, comm: Ptr) -> Effect {
    count(op, n, datatype, comm);
    Effect::Collective
}

fn forget_comm(comm: Ptr) {
    if let Some(slot) = find_comm(comm) {
        // Keep its counts for the dump: only the handle is released, so a new communicator
        // at the same address gets its own slot.
        slot.comm.store(usize::MAX, Release);
    }
}

/// Counts one operation of `op` on `comm`.
fn count(op: Op, count: usize, datatype: c_int, comm: Ptr) {
    let dt = usize::try_from(datatype)
        .ok()
        .filter(|&d| d < DATATYPES.len())
        .unwrap_or(UNKNOWN_TYPE);
    let size = DATATYPES.get(dt).map_or(0, |&(_, s)| s);
    let bytes = (count as u64).saturating_mul(size);
    if let Some(cell) = OP_TABLE.get(op as usize).and_then(|row| row.get(dt)) {
        cell.calls.fetch_add(1, Relaxed);
        cell.bytes.fetch_add(bytes, Relaxed);
    }
    if let Some((index, slot)) = find_comm_and_index(comm) {
        let sequence = slot.operations.fetch_add(1, Relaxed);
        slot.bytes.fetch_add(bytes, Relaxed);
        slot.last_op.store(op as u8 + 1, Relaxed);
        file_thread_op(index + 1, sequence);
    }
}

/// Whether the program has made an NCCL communicator.
pub fn used() -> bool {
    USED.load(Relaxed)
}

/// The NCCL section of the dump, or None if the process never used NCCL.
pub fn snapshot() -> Option<Nccl> {
    let mut ops = Vec::new();
    for (op, row) in Op::ALL.iter().zip(&OP_TABLE) {
        for (d, cell) in row.iter().enumerate() {
            let calls = cell.calls.load(Relaxed);
            if calls > 0 {
                ops.push(NcclOps {
                    op: op.name().to_string(),
                    datatype: DATATYPES.get(d).map_or("unknown", |&(n, _)| n).to_string(),
                    calls,
                    bytes: cell.bytes.load(Relaxed),
                });
            }
        }
    }
    let communicators: Vec<Communicator> = COMMS
        .iter()
        .filter(|s| s.comm.load(Acquire) != 0)
        .map(|s| Communicator {
            key: format!("{:016x}", s.key.load(Relaxed)),
            rank: s.rank.load(Relaxed),
            nranks: s.nranks.load(Relaxed),
            operations: s.operations.load(Relaxed),
            bytes: s.bytes.load(Relaxed),
            last_op: (s.last_op.load(Relaxed) as usize)
                .checked_sub(1)
                .and_then(|i| Op::ALL.get(i))
                .map(|op| op.name().to_string()),
        })
        .collect();
    let groups = GROUPS.load(Relaxed);
    (!ops.is_empty() || !communicators.is_empty() || groups > 0).then_some(Nccl {
        ops,
        communicators,
        groups,
    })
}

/// Forgets everything (fork child).
pub fn reset() {
    USED.store(false, Relaxed);
    for row in &OP_TABLE {
        for cell in row {
            cell.calls.store(0, Relaxed);
            cell.bytes.store(0, Relaxed);
        }
    }
    for slot in &COMMS {
        slot.comm.store(0, Relaxed);
        slot.operations.store(0, Relaxed);
        slot.bytes.store(0, Relaxed);
        slot.splits.store(0, Relaxed);
        slot.last_op.store(0, Relaxed);
    }
    for t in &THREAD_OP {
        t.block.store(0, Relaxed);
    }
    GROUPS.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_hashes_of_the_unique_id() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(&[7; 128]), fnv1a(&[7; 128]));
        assert_ne!(fnv1a(&[7; 128]), fnv1a(&[8; 128]));
    }

    #[test]
    fn bytes_follow_the_datatype() {
        let comm = 0x1234 as Ptr;
        register_comm(comm, 42, 0, 2);
        count(Op::AllReduce, 1000, 7, comm); // float32
        count(Op::AllReduce, 1000, 9, comm); // bfloat16
        count(Op::AllReduce, 10, 99, comm); // unknown type: counted, no bytes
        let n = snapshot().unwrap();
        let find = |dt: &str| {
            n.ops
                .iter()
                .find(|o| o.op == "AllReduce" && o.datatype == dt)
                .map(|o| (o.calls, o.bytes))
        };
        assert_eq!(find("float32"), Some((1, 4000)));
        assert_eq!(find("bfloat16"), Some((1, 2000)));
        assert_eq!(find("unknown"), Some((1, 0)));
        let c = n
            .communicators
            .iter()
            .find(|c| c.key == format!("{:016x}", 42))
            .unwrap();
        assert_eq!((c.operations, c.bytes, c.nranks), (3, 6000, 2));
    }
}
