//! What a request opcode asks the responder to do (SPEC.md §4.3).

use super::config::Features;
use metaroce_codec::{Opcode, ServiceClass};

/// A packet's place in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pos {
    First,
    Middle,
    Last,
    Only,
}

impl Pos {
    /// The packet starts a message.
    pub(crate) const fn starts(self) -> bool {
        matches!(self, Pos::First | Pos::Only)
    }

    /// The packet ends a message.
    pub(crate) const fn ends(self) -> bool {
        matches!(self, Pos::Last | Pos::Only)
    }
}

/// The operation of a packet, for RC, UC and UD opcodes alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Send {
        pos: Pos,
        imm: bool,
        inv: bool,
    },
    Write {
        pos: Pos,
        imm: bool,
    },
    Read,
    CompareSwap,
    FetchAdd,
    Flush,
    AtomicWrite,
    /// A response opcode (0x0D–0x12): the requester's to process.
    Response,
    /// Reserved in its class.
    Reserved,
}

fn rc_op(operation: u8) -> Op {
    use Pos::*;
    let send = |pos, imm, inv| Op::Send { pos, imm, inv };
    let write = |pos, imm| Op::Write { pos, imm };
    match operation {
        0x00 => send(First, false, false),
        0x01 => send(Middle, false, false),
        0x02 => send(Last, false, false),
        0x03 => send(Last, true, false),
        0x04 => send(Only, false, false),
        0x05 => send(Only, true, false),
        0x06 => write(First, false),
        0x07 => write(Middle, false),
        0x08 => write(Last, false),
        0x09 => write(Last, true),
        0x0A => write(Only, false),
        0x0B => write(Only, true),
        0x0C => Op::Read,
        o if Opcode(o).is_rc_response() => Op::Response,
        0x13 => Op::CompareSwap,
        0x14 => Op::FetchAdd,
        0x16 => send(Last, false, true),
        0x17 => send(Only, false, true),
        0x1C => Op::Flush,
        0x1D => Op::AtomicWrite,
        _ => Op::Reserved,
    }
}

/// The operation of `opcode` in its own service class.
pub(crate) fn op_of(opcode: Opcode) -> Op {
    let operation = opcode.operation();
    match opcode.class() {
        ServiceClass::Rc => rc_op(operation),
        ServiceClass::Uc if operation <= 0x0B => rc_op(operation),
        ServiceClass::Ud if operation == 0x04 || operation == 0x05 => rc_op(operation),
        _ => Op::Reserved,
    }
}

impl Op {
    /// Whether the operation needs a feature the profile declares absent (MR-PICS-3).
    pub(crate) const fn feature_absent(self, f: &Features) -> bool {
        match self {
            Op::Send { imm, inv, .. } => (imm && !f.immediate) || (inv && !f.send_with_invalidate),
            Op::Write { imm, .. } => imm && !f.immediate,
            Op::CompareSwap | Op::FetchAdd => !f.atomics,
            Op::Flush => !f.flush,
            Op::AtomicWrite => !f.atomic_write,
            Op::Read | Op::Response | Op::Reserved => false,
        }
    }

    /// Whether the opcode carries payload (§4.3 "Payload" column).
    pub(crate) const fn has_payload(self) -> bool {
        matches!(self, Op::Send { .. } | Op::Write { .. } | Op::AtomicWrite)
    }
}
