//! Opcodes: MR-OPC-5, MR-OPC-6.

use super::{assert_clean, assert_only, ctx, mp_send};
use crate::{Context, Profile};
use metaroce_codec::{Opcode, PacketBuilder};

#[test]
fn mr_opc_5_no_reserved_or_unused_opcode() {
    for op in [
        0x15u8, 0x18, 0x1E, 0x2C, 0x3F, 0x66, 0x80, 0x82, 0xCC, 0xDF, 0xE0, 0xFF,
    ] {
        let b = PacketBuilder::new(Opcode(op)).payload([1, 2, 3, 4]);
        let f = assert_only(&b, &ctx(), "MR-OPC-5");
        assert_eq!(f.len(), 1, "opcode {op:#04x}: {f:?}");
    }
}

#[test]
fn mr_opc_6_no_mp_opcode_from_a_base_implementation() {
    let base = Context {
        profile: Profile::Base,
        ..Context::default()
    };
    assert_clean(&mp_send(0, 13, 13), &ctx());
    assert_only(&mp_send(0, 13, 13), &base, "MR-OPC-6");
    assert_only(&PacketBuilder::new(Opcode(0xCC)), &base, "MR-OPC-5");
}
