//! The raw driver's receive timestamps (`RawConfig::rx_timestamps`, used by
//! the conformance harness to time a frame when the kernel received it):
//! a frame sent on the loopback interface comes back with the kernel's
//! arrival time, between the moments before the send and after the
//! receive.
//!
//! Network rule: one frame on `lo` (EtherType 0x88B5, IEEE local
//! experimental, to a locally administered MAC: no stack answers it).
//! Needs root (AF_PACKET); without it the test prints `SKIP: ...` and
//! passes, unless `CI=true`, where it fails.
#![cfg(all(feature = "raw", target_os = "linux"))]

use metaroce_ref::drivers::raw::{RawConfig, RawPort};
use metaroce_test_support::netns::skip;
use std::time::{Duration, SystemTime};

#[test]
fn a_frame_received_with_timestamps_carries_the_kernels_arrival_time() {
    let what = "raw receive timestamps on lo";
    let config = RawConfig {
        rx_timestamps: true,
        promiscuous: false,
        ..RawConfig::default()
    };
    let mut port = match RawPort::open("lo", config) {
        Ok(p) => p,
        Err(e) => {
            skip(what, &e.to_string());
            return;
        }
    };
    let to = [0x02, 0x99, 0x5e, 0x00, 0x00, 0x07];
    let mut frame = vec![0u8; 60];
    frame[..6].copy_from_slice(&to);
    frame[6..12].copy_from_slice(&[0x02, 0x99, 0x5e, 0x00, 0x00, 0x08]);
    frame[12..14].copy_from_slice(&[0x88, 0xB5]);
    frame[14..20].copy_from_slice(b"stamps");
    let before = SystemTime::now();
    port.send(&frame);
    // Bounded: at most 16 frames or 2 s (other traffic on lo is skipped).
    let mut got = None;
    for _ in 0..16 {
        match port.recv_frame_stamped(to, Duration::from_secs(2)) {
            Ok(Some(f)) if f.bytes.get(14..20) == Some(&b"stamps"[..]) => {
                got = Some(f);
                break;
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => panic!("{what}: {e}"),
        }
    }
    let after = SystemTime::now();
    let got = got.expect("the frame sent on lo comes back");
    let at = got
        .at
        .expect("a frame received with timestamps carries one");
    assert!(
        before <= at && at <= after,
        "{before:?} <= {at:?} <= {after:?}"
    );
}
