//! MP (SPEC §7) behaviours, driving two devices frame by frame on virtual
//! time: regression tests for faults the 10,000-message simulator runs
//! found.

mod common;
use common::*;
use metaroce_codec::{Frame, Opcode, ParseOptions};
use metaroce_ref::*;

/// Two MP devices (A requester, B responder) with their ends.
fn mp_pair() -> (Device, Device, End, End) {
    let p = Params {
        pmtu: 4096,
        ..Params::default()
    };
    let mut a = device(MAC_A, IP_A, 1);
    let mut b = device(MAC_B, IP_B, 2);
    let ea = create_rc(&mut a, 0xFF_FFF0);
    let eb = create_rc(&mut b, 0x12_3456);
    let mp = |seed| MpAttrs {
        entropy: MpEntropy::Seeded { n: 16, seed },
        ..MpAttrs::default()
    };
    connect_mp(&mut a, ea, eb, IP_B, MAC_B, p, &mp(9));
    connect_mp(&mut b, eb, ea, IP_A, MAC_A, p, &mp(10));
    (a, b, ea, eb)
}

/// BTH opcode and MPETH R flag of a frame.
fn kind(frame: &[u8]) -> (Opcode, bool) {
    let f = Frame::parse(frame, &ParseOptions::default()).expect("a valid frame");
    let roce = f.roce.expect("a RoCEv2 frame");
    (
        roce.bth.opcode,
        roce.ext.mpeth.is_some_and(|m| m.retransmission),
    )
}

#[test]
fn a_read_held_back_by_cwnd_is_not_re_requested_before_it_is_sent() {
    // MR-MPR-6, MR-MPR-7, MR-MPC-1, MR-MPA-10: a READ that has PSNs but
    // waits behind a full cwnd has had no transmission, so no RTO runs for
    // it. Before the fix its RTO ran from time 0: it was "re-requested"
    // from offset 0 outside cwnd, the responder took that as the READ and
    // acknowledged PSNs beyond the requester's last PSN sent, and the
    // requester ignored every later ACK until the QP failed with
    // RETRY_EXC_ERR (found by the 10,000-message MP run at 10 % loss).
    let (mut a, mut b, ea, eb) = mp_pair();
    let len = 1u64 << 20;
    let src = a.reg_mr(ea.pd, len as usize, Access::LOCAL_WRITE).unwrap();
    let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    a.write_mr(src.lkey, src.addr, &bytes).unwrap();
    let wlen = len / 4;
    let rlen = len / 2;
    let land = a.reg_mr(ea.pd, rlen as usize, Access::LOCAL_WRITE).unwrap();
    let target = b.reg_mr(eb.pd, len as usize, Access::ALL).unwrap();
    let remote = RemoteAddr {
        va: target.addr,
        rkey: target.rkey,
    };
    let sge = |m: &MrInfo, len: u64| Sge {
        addr: m.addr,
        len: len as u32,
        lkey: m.lkey,
    };
    // A 256 KiB WRITE then a 512 KiB READ: the WRITE leaves at once (64
    // packets); the READ gets its PSNs but its response bytes (counted in
    // flight, §7.12) do not fit the 512 KiB initial cwnd beside it.
    a.post_send(
        ea.qpn,
        SendWr::new(1, WrOp::Write(remote), vec![sge(&src, wlen)]),
    )
    .unwrap();
    a.post_send(
        ea.qpn,
        SendWr::new(2, WrOp::Read(remote), vec![sge(&land, rlen)]),
    )
    .unwrap();
    // Nothing reaches B for 3 ms: A's RTO (1 ms before any sample) expires.
    let mut held: Vec<Vec<u8>> = drain(&mut a);
    let mut now = 0;
    while let Some(t) = a.poll_timeout().filter(|&t| t < 3_000_000) {
        now = t;
        a.handle_timeout(now);
        held.extend(drain(&mut a));
    }
    assert!(now >= 1_000_000, "the RTO expired at least once ({now} ns)");
    for f in &held {
        let (op, retx) = kind(f);
        assert!(
            op != Opcode::MP_READ_REQUEST || !retx,
            "MR-MPR-6: no re-request of a READ not yet sent"
        );
    }
    // Then everything is delivered: both complete, in order, byte-exact.
    for f in &held {
        b.handle_frame(now, f);
    }
    let mut wcs = Vec::new();
    for _ in 0..100_000 {
        shuttle(&mut a, &mut b, now);
        wcs.extend(a.poll_cq(ea.cq, 16).unwrap());
        if wcs.len() == 2 {
            break;
        }
        let t = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .expect("a timer while work is outstanding");
        now = now.max(t);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    let ids: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(1, WcStatus::Success), (2, WcStatus::Success)]);
    let mut image = bytes[..wlen as usize].to_vec();
    image.resize(rlen as usize, 0);
    assert!(b.read_mr(target.lkey, target.addr, rlen).unwrap() == &image[..]);
    assert!(a.read_mr(land.lkey, land.addr, rlen).unwrap() == &image[..]);
}
