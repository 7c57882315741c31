//! ICRC: MR-ICRC-1, MR-ICRC-2.

use super::{assert_clean, assert_only, ctx, send_only};
use metaroce_codec::icrc;

#[test]
fn mr_icrc_1_the_icrc_must_be_right() {
    assert_clean(&send_only(), &ctx());
    let f = assert_only(&send_only().corrupt_icrc(), &ctx(), "MR-ICRC-1");
    assert!(f[0].message.contains("0x"), "{f:?}");
}

#[test]
fn mr_icrc_2_least_significant_byte_first() {
    let b = send_only();
    let right = icrc::expected(&b.frame()).unwrap();
    assert_only(&b.icrc(right.swap_bytes()), &ctx(), "MR-ICRC-2");
}
