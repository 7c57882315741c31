//! CNP format: MR-CNP-3.

use super::{assert_clean, assert_only, ctx};
use metaroce_codec::{Opcode, PacketBuilder};

fn cnp() -> PacketBuilder {
    PacketBuilder::new(Opcode::CNP).traffic_class(0xC2)
}

#[test]
fn mr_cnp_3_cnp_format() {
    assert_clean(&cnp(), &ctx());
    let cases = [
        cnp().bth(|b| b.becn = false),
        cnp().psn(5),
        cnp().ack_req(true),
        cnp().bth(|b| b.se = true),
        cnp().bth(|b| b.fecn = true),
        cnp().bth(|b| b.tver = 2),
        cnp().ext(|e| e.cnp.as_mut().unwrap().reserved[15] = 1),
        cnp().payload([0; 4]),
        cnp().pad_count(2),
    ];
    for b in &cases {
        let f = assert_only(b, &ctx(), "MR-CNP-3");
        assert_eq!(f.len(), 1, "{f:?}");
    }
}
