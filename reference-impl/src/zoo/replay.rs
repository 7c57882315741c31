//! Mutants that act again on a duplicate request: bodies too long for
//! their hooks in the duplicate paths of the Base and MP responders.

use crate::mr::{Memory, PdHandle};
use crate::rx::RxPacket;
use metaroce_codec::Opcode;

/// `atomic-replay-reexecutes`: executes the atomic of a duplicate request
/// again and returns the value it found, or `None` when the request names
/// no memory the atomic may touch (the mutant then falls back to the kept
/// value).
pub(crate) fn atomic_again(mem: &mut Memory, pd: PdHandle, pkt: &RxPacket<'_>) -> Option<u64> {
    let a = pkt.ext.atomic_eth?;
    let cas = pkt.bth.opcode == Opcode::RC_CMP_SWAP;
    mem.remote_atomic(pd, a.rkey, a.va, |old| {
        if cas {
            if old == a.compare { a.swap_add } else { old }
        } else {
            old.wrapping_add(a.swap_add)
        }
    })
    .ok()
}

/// `mp-replace-after-complete`: places the payload of a duplicate MP WRITE
/// packet again, at RETH VA + MPETH offset (with the correct checks, so
/// only the bytes the WRITE was allowed to write change).
pub(crate) fn place_again(mem: &mut Memory, pd: PdHandle, pkt: &RxPacket<'_>) {
    if !matches!(pkt.bth.opcode, Opcode::MP_WRITE | Opcode::MP_WRITE_IMM) {
        return;
    }
    if let (Some(r), Some(m)) = (pkt.ext.reth, pkt.ext.mpeth) {
        let va = r.va.wrapping_add(u64::from(m.offset));
        let _ = mem.remote_write(pd, r.rkey, va, pkt.payload);
    }
}
