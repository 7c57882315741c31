//! Live capture through libpcap (feature `libpcap`): a clear error for an
//! interface that does not exist, and a RoCE datagram sent over loopback is
//! captured and decodes. Traffic goes to 127.0.0.1 only. Capturing needs root:
//! without it the loopback test prints SKIP, unless CI=true (CI runs as root).
#![cfg(feature = "libpcap")]

use metaroce_codec::{Frame, Opcode, PacketBuilder, ParseOptions};
use metaroce_conformance::capture::live::{LiveCapture, ROCE_FILTER};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

#[test]
fn a_missing_interface_is_a_clear_error() {
    let err = LiveCapture::open("no-such-if0", ROCE_FILTER, 100).unwrap_err();
    assert_eq!(err.interface, "no-such-if0");
    assert!(
        err.to_string().starts_with("live capture on no-such-if0: "),
        "{err}"
    );
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
    })
}

#[test]
fn a_roce_datagram_on_loopback_is_captured_and_decodes() {
    if !is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "live capture needs root, and CI runs as root"
        );
        eprintln!("SKIP: live capture: not root");
        return;
    }
    let mut capture = LiveCapture::open("lo", ROCE_FILTER, 100).expect("opens lo");
    // The UDP payload of a RoCE SEND (BTH to ICRC), sent to 127.0.0.1:4791.
    let built = PacketBuilder::new(Opcode::RC_SEND_ONLY)
        .psn(0x12_3456)
        .payload(*b"live")
        .build();
    let frame = Frame::parse(&built, &ParseOptions::default()).unwrap();
    let mut roce = vec![0; frame.roce.unwrap().buffer_len()];
    frame.roce.unwrap().emit(&mut roce).unwrap();
    let sink = UdpSocket::bind("127.0.0.1:4791").expect("binds 127.0.0.1:4791");
    let source = UdpSocket::bind("127.0.0.1:0").unwrap();
    source.send_to(&roce, "127.0.0.1:4791").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut psns = Vec::new();
    while Instant::now() < deadline && psns.is_empty() {
        if let Some(f) = capture.next_frame().expect("captures") {
            let decoded = Frame::parse(f.data, &ParseOptions::default()).expect("decodes");
            psns.extend(decoded.roce.map(|r| r.bth.psn.value()));
        }
    }
    drop(sink);
    assert_eq!(
        psns,
        vec![0x12_3456],
        "the datagram was captured once and decoded"
    );
    assert!(capture.packets() >= 1);
}
