//! Scenarios of the Base responder mutants: device B runs the mutant and
//! answers requests from A (or built by hand as A's).

use super::common::Params;
use super::fixture::*;
use metaroce_codec::Opcode;
use metaroce_ref::zoo::Mutant;
use metaroce_ref::*;

/// One 8-byte SEND from A to B (a receive posted at B): the pair and B's
/// response frames.
fn send_once(m: Option<Mutant>) -> (Base, Vec<Vec<u8>>) {
    let mut x = base(None, m, Params::default(), 1);
    let (ea, eb) = (x.qa[0], x.qb[0]);
    let rbuf = mr(&mut x.b, eb.pd, 64, Access::ALL);
    recv(&mut x.b, eb, &rbuf, 7, 64);
    post(&mut x.a, ea, 1, WrOp::Send, &[5; 8]);
    let req = drain(&mut x.a);
    deliver(&mut x.b, 0, &req);
    let rsp = drain(&mut x.b);
    (x, rsp)
}

fn aeths(frames: &[Vec<u8>]) -> Vec<Option<(u8, u32)>> {
    frames.iter().map(|f| seen(f).aeth).collect()
}

pub fn msn_off_by_one() {
    check(
        Mutant::MsnOffByOne,
        "MR-ACK-2, MR-MSN-2: the ACK of the first SEND carries MSN 1",
        |m| aeths(&send_once(m).1),
        vec![Some((0x1F, 1))],
        vec![Some((0x1F, 2))],
    );
}

pub fn credit_code_zero() {
    check(
        Mutant::CreditCodeZero,
        "MR-CRD-1: a responder without credits sends credit code 31",
        |m| aeths(&send_once(m).1),
        vec![Some((0x1F, 1))],
        vec![Some((0x00, 1))],
    );
}

pub fn ack_psn_off_by_one() {
    check(
        Mutant::AckPsnOffByOne,
        "MR-ACK-2, MR-ACK-4: the ACK names the SEND's own PSN and completes it",
        |m| {
            let (mut x, rsp) = send_once(m);
            let ea = x.qa[0];
            let offset = seen(&rsp[0]).psn.wrapping_sub(ea.psn) & 0xFF_FFFF;
            deliver(&mut x.a, 1, &rsp);
            (offset, statuses(&mut x.a, ea))
        },
        (0, vec![WcStatus::Success]),
        (1, vec![]),
    );
}

pub fn seq_nak_every_packet() {
    check(
        Mutant::SeqNakEveryPacket,
        "MR-NAK-2: one sequence NAK per gap",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let dst = mr(&mut x.b, eb.pd, 4096, Access::ALL);
            post(&mut x.a, ea, 1, WrOp::Write(remote(&dst, 0)), &[1; 4096]);
            let frames = drain(&mut x.a);
            assert_eq!(frames.len(), 4);
            deliver(&mut x.b, 0, &frames[1..]); // the first is lost
            let naks: Vec<_> = aeths(&drain(&mut x.b));
            (x.b.counters().seq_naks_sent, naks)
        },
        (1, vec![Some((0x60, 0))]),
        (3, vec![Some((0x60, 0)); 3]),
    );
}

pub fn dup_read_ignored() {
    check(
        Mutant::DupReadIgnored,
        "MR-DUP-4: a duplicate READ is re-executed from memory read again",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let src = mr(&mut x.b, eb.pd, 2048, Access::ALL);
            x.b.write_mr(src.lkey, src.addr, &[1; 2048]).unwrap();
            let land = mr(&mut x.a, ea.pd, 2048, Access::ALL);
            x.a.post_send(
                ea.qpn,
                SendWr::new(1, WrOp::Read(remote(&src, 0)), vec![sge(&land, 0, 2048)]),
            )
            .unwrap();
            let req = drain(&mut x.a);
            deliver(&mut x.b, 0, &req);
            let first = drain(&mut x.b).len();
            x.b.write_mr(src.lkey, src.addr, &[2; 2048]).unwrap();
            deliver(&mut x.b, 1, &req); // the same READ again
            let again = drain(&mut x.b);
            let payload: Vec<u8> = again.iter().flat_map(|f| seen(f).payload).collect();
            (
                first,
                x.b.counters().duplicate_requests,
                again.len(),
                payload.iter().all(|&b| b == 2) && payload.len() == 2048,
            )
        },
        (2, 1, 2, true),
        (2, 1, 0, false),
    );
}

pub fn atomic_replay_reexecutes() {
    check(
        Mutant::AtomicReplayReexecutes,
        "MR-DUP-5, MR-ATOM-3: a duplicate atomic replays the kept value, executed once",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let word = mr(&mut x.b, eb.pd, 8, Access::ALL);
            x.b.write_mr(word.lkey, word.addr, &100u64.to_ne_bytes())
                .unwrap();
            let result = mr(&mut x.a, ea.pd, 8, Access::ALL);
            let op = WrOp::FetchAdd {
                remote: remote(&word, 0),
                add: 1,
            };
            x.a.post_send(ea.qpn, SendWr::new(1, op, vec![sge(&result, 0, 8)]))
                .unwrap();
            let req = drain(&mut x.a);
            deliver(&mut x.b, 0, &req);
            deliver(&mut x.b, 1, &req); // the duplicate
            let origs: Vec<_> = drain(&mut x.b).iter().map(|f| seen(f).orig).collect();
            let now = x.b.read_mr(word.lkey, word.addr, 8).unwrap();
            (u64::from_ne_bytes(now.try_into().unwrap()), origs)
        },
        (101, vec![Some(100), Some(100)]),
        (102, vec![Some(100), Some(101)]),
    );
}

/// A WRITE of `data` into B at `dst + off` with `dst`'s R_Key; B registers
/// `dst` (`len` bytes, `access`) and then a 64-byte `guard` region.
/// Returns A's completion, B's QP state, `dst` and `guard`.
fn write_into(
    m: Option<Mutant>,
    len: usize,
    access: Access,
    off: u64,
    data: &[u8],
) -> (Vec<WcStatus>, QpState, Vec<u8>, Vec<u8>) {
    let mut x = base(None, m, Params::default(), 1);
    let (ea, eb) = (x.qa[0], x.qb[0]);
    let dst = mr(&mut x.b, eb.pd, len, access);
    let guard = mr(&mut x.b, eb.pd, 64, Access::ALL);
    post(&mut x.a, ea, 1, WrOp::Write(remote(&dst, off)), data);
    shuttle(&mut x, 0);
    let state = x.b.query_qp(eb.qpn).unwrap().state;
    let dst_bytes =
        x.b.read_mr(dst.lkey, dst.addr, len as u64)
            .unwrap()
            .to_vec();
    let guard_bytes = x.b.read_mr(guard.lkey, guard.addr, 64).unwrap().to_vec();
    (statuses(&mut x.a, ea), state, dst_bytes, guard_bytes)
}

pub fn rkey_bounds_off_by_one() {
    let data: Vec<u8> = (1..=64).collect();
    let mut dst = vec![0u8; 64];
    dst[1..].copy_from_slice(&data[..63]);
    let mut guard = vec![0u8; 64];
    guard[0] = 64;
    check(
        Mutant::RkeyBoundsOffByOne,
        "MR-RSP-6, MR-SEC-4, MR-SEC-5: a WRITE one byte past the MR is NAKed 0x62, nothing written",
        |m| write_into(m, 64, Access::ALL, 1, &data),
        (
            vec![WcStatus::RemAccessErr],
            QpState::Err,
            vec![0; 64],
            vec![0; 64],
        ),
        (vec![WcStatus::Success], QpState::Rts, dst, guard),
    );
}

pub fn write_access_unchecked() {
    let no_remote_write = Access(Access::LOCAL_WRITE.0 | Access::REMOTE_READ.0);
    check(
        Mutant::WriteAccessUnchecked,
        "MR-RSP-6: a WRITE into an MR without remote write is NAKed 0x62",
        |m| write_into(m, 16, no_remote_write, 0, &[9; 16]),
        (
            vec![WcStatus::RemAccessErr],
            QpState::Err,
            vec![0; 16],
            vec![0; 64],
        ),
        (
            vec![WcStatus::Success],
            QpState::Rts,
            vec![9; 16],
            vec![0; 64],
        ),
    );
}

pub fn read_leak() {
    let window: Vec<u8> = (0..64).collect();
    let secret = *b"SECRET-0123456789-SECRET-0123456789-SECRET-0123456789-SECRET-012";
    let mut leaked = window[32..].to_vec();
    leaked.extend_from_slice(&secret[..32]);
    check(
        Mutant::ReadLeak,
        "MR-SEC-6, MR-SEC-4, MR-RSP-6: a READ past the MR end is NAKed 0x62 and leaks nothing",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let win = mr(&mut x.b, eb.pd, 64, Access::ALL);
            x.b.write_mr(win.lkey, win.addr, &window).unwrap();
            // Registered next: "the memory after" the window in the model.
            let hidden = mr(&mut x.b, eb.pd, 64, Access::LOCAL_WRITE);
            x.b.write_mr(hidden.lkey, hidden.addr, &secret).unwrap();
            let land = mr(&mut x.a, ea.pd, 64, Access::ALL);
            let read = WrOp::Read(remote(&win, 32));
            x.a.post_send(ea.qpn, SendWr::new(1, read, vec![sge(&land, 0, 64)]))
                .unwrap();
            shuttle(&mut x, 0);
            let got = x.a.read_mr(land.lkey, land.addr, 64).unwrap().to_vec();
            (statuses(&mut x.a, ea), got)
        },
        (vec![WcStatus::RemAccessErr], vec![0; 64]),
        (vec![WcStatus::Success], leaked),
    );
}

pub fn rnr_timer_code_zero() {
    check(
        Mutant::RnrTimerCodeZero,
        "MR-RNR-1: the RNR NAK carries 0x20 + min_rnr_timer (1)",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let ea = x.qa[0];
            post(&mut x.a, ea, 1, WrOp::Send, &[1; 8]); // no receive posted
            let req = drain(&mut x.a);
            deliver(&mut x.b, 0, &req);
            aeths(&drain(&mut x.b))
        },
        vec![Some((0x21, 0))],
        vec![Some((0x20, 0))],
    );
}

pub fn send_inv_ignored() {
    check(
        Mutant::SendInvIgnored,
        "MR-RSP-10, MR-SEC-8: SEND with Invalidate invalidates the R_Key; later use is NAKed 0x62",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let target = mr(&mut x.b, eb.pd, 64, Access::ALL);
            let rbuf = mr(&mut x.b, eb.pd, 64, Access::ALL);
            recv(&mut x.b, eb, &rbuf, 7, 64);
            post(&mut x.a, ea, 1, WrOp::SendInv(target.rkey), &[1; 8]);
            shuttle(&mut x, 0);
            let invalidated = x.b.poll_cq(eb.cq, 10).unwrap()[0].invalidated_rkey;
            post(&mut x.a, ea, 2, WrOp::Write(remote(&target, 0)), &[3; 8]);
            shuttle(&mut x, 1);
            (invalidated == Some(target.rkey), statuses(&mut x.a, ea))
        },
        (true, vec![WcStatus::Success, WcStatus::RemAccessErr]),
        (false, vec![WcStatus::Success, WcStatus::Success]),
    );
}

pub fn icrc_not_checked() {
    check(
        Mutant::IcrcNotChecked,
        "MR-ICRC-3, MR-ICRC-4: a packet with a wrong ICRC is dropped with no effect",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let dst = mr(&mut x.b, eb.pd, 16, Access::ALL);
            post(&mut x.a, ea, 1, WrOp::Write(remote(&dst, 0)), &[9; 16]);
            let mut f = drain(&mut x.a).remove(0);
            let n = f.len();
            f[n - 10] ^= 0xFF; // a payload byte
            x.b.handle_frame(0, &f);
            let placed = x.b.read_mr(dst.lkey, dst.addr, 16).unwrap() != [0; 16];
            (x.b.counters().icrc_errors, drain(&mut x.b).len(), placed)
        },
        (1, 0, false),
        (0, 1, true),
    );
}

/// A hand-built SEND Only with AckReq to B's QP `qpn` at PSN `psn`; B's
/// (response frames, receive completions).
fn hand_send(
    x: &mut Base,
    qpn: u32,
    psn: u32,
    edit: impl FnOnce(metaroce_codec::PacketBuilder) -> metaroce_codec::PacketBuilder,
) -> (usize, usize) {
    let eb = x.qb[0];
    let rbuf = mr(&mut x.b, eb.pd, 64, Access::ALL);
    recv(&mut x.b, eb, &rbuf, 7, 64);
    let frame = edit(
        to_b(Opcode::RC_SEND_ONLY, qpn, psn)
            .ack_req(true)
            .payload(vec![4; 8]),
    )
    .build();
    x.b.handle_frame(0, &frame);
    let rsp = drain(&mut x.b).len();
    (rsp, x.b.poll_cq(eb.cq, 10).unwrap().len())
}

pub fn pkey_not_checked() {
    check(
        Mutant::PkeyNotChecked,
        "MR-BTH-5: a packet with another P_Key is dropped and counted",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (qpn, psn) = (x.qb[0].qpn, x.qa[0].psn);
            let got = hand_send(&mut x, qpn, psn, |b| b.bth(|h| h.pkey = 0x1234));
            (x.b.counters().pkey_violations, got)
        },
        (1, (0, 0)),
        (0, (1, 1)),
    );
}

pub fn qpn_low_bits() {
    check(
        Mutant::QpnLowBits,
        "MR-BTH-6: a packet for a QPN that names no QP is dropped",
        |m| {
            let mut x = base(None, m, Params::default(), 1);
            let (qpn, psn) = (x.qb[0].qpn ^ 0x1_0000, x.qa[0].psn);
            let got = hand_send(&mut x, qpn, psn, |b| b);
            (x.b.counters().unknown_qp_drops, got)
        },
        (1, (0, 0)),
        (0, (1, 1)),
    );
}

/// B's frames answering `n` CE-marked SENDs from A, 1 µs apart: (CNPs,
/// ACKs, `cnp_sent`).
fn ce_marked(m: Option<Mutant>, n: u32) -> (usize, usize, u64) {
    let mut x = base(None, m, Params::default(), 1);
    let (ea, eb) = (x.qa[0], x.qb[0]);
    let rbuf = mr(&mut x.b, eb.pd, 64 * n as usize, Access::ALL);
    let (mut cnps, mut acks) = (0, 0);
    for i in 0..n {
        recv(&mut x.b, eb, &rbuf, u64::from(i), 64);
        let psn = ea.psn.wrapping_add(i) & 0xFF_FFFF;
        let ce = to_b(Opcode::RC_SEND_ONLY, eb.qpn, psn)
            .traffic_class(0b11) // ECN CE
            .ack_req(true)
            .payload(vec![1; 8])
            .build();
        x.b.handle_frame(u64::from(i) * 1_000, &ce);
        for f in drain(&mut x.b) {
            match seen(&f).opcode {
                Opcode::CNP => cnps += 1,
                Opcode::RC_ACK => acks += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    (cnps, acks, x.b.counters().cnp_sent)
}

pub fn cnp_never_sent() {
    check(
        Mutant::CnpNeverSent,
        "MR-CNP-1: a CE-marked request draws a CNP",
        |m| ce_marked(m, 1),
        (1, 1, 1),
        (0, 1, 0),
    );
}

pub fn cnp_not_paced() {
    check(
        Mutant::CnpNotPaced,
        "MR-CNP-2: one CNP per cnp_interval (50 µs) per QP",
        |m| ce_marked(m, 2),
        (1, 2, 1),
        (2, 2, 2),
    );
}

pub fn qkey_not_checked() {
    check(
        Mutant::QkeyNotChecked,
        "MR-UD-2: a UD packet with a wrong Q_Key is dropped and counted",
        |m| {
            let mut a = device(super::common::MAC_A, super::common::IP_A, 3, None);
            let mut b = device(super::common::MAC_B, super::common::IP_B, 4, m);
            let ea = ud_qp(&mut a);
            let eb = ud_qp(&mut b);
            let rbuf = mr(&mut b, eb.pd, 200, Access::ALL);
            recv(&mut b, eb, &rbuf, 1, 200);
            let src = mr(&mut a, ea.pd, 10, Access::ALL);
            let mut wr = SendWr::new(9, WrOp::Send, vec![sge(&src, 0, 10)]);
            wr.ud = Some(UdDest {
                ip: super::common::IP_B,
                mac: super::common::MAC_B,
                qpn: eb.qpn,
                qkey: 1, // B's is 0x1234
            });
            a.post_send(ea.qpn, wr).unwrap();
            let frames = drain(&mut a);
            deliver(&mut b, 0, &frames);
            (
                b.counters().qkey_violations,
                b.poll_cq(eb.cq, 10).unwrap().len(),
            )
        },
        (1, 0),
        (0, 1),
    );
}

fn ud_qp(dev: &mut Device) -> super::common::End {
    let pd = dev.alloc_pd();
    let cq = dev.create_cq();
    let init = QpInit {
        qp_type: QpType::Ud,
        pd,
        send_cq: cq,
        recv_cq: cq,
        sq_sig_all: true,
    };
    let qpn = dev.create_qp(init).unwrap();
    let qkey = QpAttrs {
        qkey: Some(0x1234),
        ..Default::default()
    };
    dev.modify_qp(qpn, QpState::Init, &qkey).unwrap();
    dev.modify_qp(qpn, QpState::Rtr, &QpAttrs::default())
        .unwrap();
    let psn = QpAttrs {
        sq_psn: Some(5),
        ..Default::default()
    };
    dev.modify_qp(qpn, QpState::Rts, &psn).unwrap();
    super::common::End {
        pd,
        cq,
        qpn,
        psn: 5,
    }
}

/// After `poison` reaches QP 0 of B: does a SEND on QP 0, then one on QP 1
/// (the sentinel), draw an ACK and a receive completion?
fn answers_after(m: Option<Mutant>, poison: impl Fn(&Base) -> Vec<u8>) -> (u64, bool, bool) {
    let mut x = base(None, m, Params::default(), 2);
    let bad = poison(&x);
    x.b.handle_frame(0, &bad);
    let drops = x.b.counters().malformed_drops;
    let mut answered = [false; 2];
    for (i, ok) in answered.iter_mut().enumerate() {
        let (ea, eb) = (x.qa[i], x.qb[i]);
        let rbuf = mr(&mut x.b, eb.pd, 64, Access::ALL);
        recv(&mut x.b, eb, &rbuf, 7, 64);
        post(&mut x.a, ea, 1, WrOp::Send, &[1; 8]);
        shuttle(&mut x, 1);
        let acked = statuses(&mut x.a, ea) == [WcStatus::Success];
        *ok = acked && x.b.poll_cq(eb.cq, 10).unwrap().len() == 1;
    }
    (drops, answered[0], answered[1])
}

pub fn wedge_on_bad_padcnt() {
    check(
        Mutant::WedgeOnBadPadcnt,
        "MR-ROB-4, MR-ROB-5, MR-ROB-7: a READ request with PadCnt 1 is dropped, no other effect",
        |m| {
            let read = |x: &Base| {
                let (ea, eb) = (x.qa[0], x.qb[0]);
                to_b(Opcode::RC_READ_REQUEST, eb.qpn, ea.psn).pad_count(1)
            };
            (
                // Row 20: PadCnt on an opcode without payload.
                answers_after(m, |x| read(x).payload(vec![0; 3]).build()),
                // Row 8: more pad than bytes (none) after the headers.
                answers_after(m, |x| read(x).pad_bytes(vec![]).build()),
            )
        },
        ((1, true, true), (1, true, true)),
        ((1, false, false), (1, false, false)),
    );
}

pub fn wedge_on_unknown_opcode() {
    check(
        Mutant::WedgeOnUnknownOpcode,
        "MR-OPC-2, MR-ROB-5: a reserved RC opcode is dropped, the QP left as it was",
        |m| answers_after(m, |x| to_b(Opcode(0x15), x.qb[0].qpn, x.qa[0].psn).build()),
        (1, true, true),
        (1, false, true),
    );
}
