//! Scenarios of the Base requester mutants: device A runs the mutant and
//! sends; B is correct.

use super::common::Params;
use super::fixture::*;
use metaroce_ref::zoo::Mutant;
use metaroce_ref::*;

pub fn padcnt_zero() {
    check(
        Mutant::PadcntZero,
        "MR-PKT-4: PadCnt is (-5) mod 4 = 3 and the receiver gets 5 bytes",
        |m| {
            let mut x = base(m, None, Params::default(), 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let rbuf = mr(&mut x.b, eb.pd, 64, Access::ALL);
            recv(&mut x.b, eb, &rbuf, 7, 64);
            post(&mut x.a, ea, 1, WrOp::Send, b"hello");
            let req = drain(&mut x.a);
            let pad = seen(&req[0]).pad_count;
            deliver(&mut x.b, 0, &req);
            let got = x.b.poll_cq(eb.cq, 10).unwrap()[0].byte_len;
            (pad, got)
        },
        (3, 5),
        (0, 8),
    );
}

pub fn ackreq_never_on_last() {
    check(
        Mutant::AckReqNeverOnLast,
        "MR-PKT-6: AckReq in the only packet of a SEND, which the responder acknowledges",
        |m| {
            let p = Params {
                retry_cnt: 1,
                ..Params::default()
            };
            let mut x = base(m, None, p, 1);
            let (ea, eb) = (x.qa[0], x.qb[0]);
            let rbuf = mr(&mut x.b, eb.pd, 64, Access::ALL);
            recv(&mut x.b, eb, &rbuf, 7, 64);
            post(&mut x.a, ea, 1, WrOp::Send, &[1; 8]);
            let req = drain(&mut x.a);
            let ack_req = seen(&req[0]).ack_req;
            deliver(&mut x.b, 0, &req);
            let mut wcs = Vec::new();
            for _ in 0..10 {
                let now = x.a.now();
                shuttle(&mut x, now);
                wcs = statuses(&mut x.a, ea);
                match x.a.poll_timeout() {
                    Some(t) if wcs.is_empty() => x.a.handle_timeout(t),
                    _ => break,
                }
            }
            (ack_req, wcs)
        },
        (true, vec![WcStatus::Success]),
        (false, vec![WcStatus::RetryExcErr]),
    );
}

pub fn rnr_wait_ignored() {
    check(
        Mutant::RnrWaitIgnored,
        "MR-RNR-3: no retransmission before the RNR timer (code 1: 10 µs)",
        |m| {
            let mut x = base(m, None, Params::default(), 1);
            let ea = x.qa[0];
            post(&mut x.a, ea, 1, WrOp::Send, &[1; 8]); // no receive at B
            let req = drain(&mut x.a);
            deliver(&mut x.b, 0, &req);
            let nak = drain(&mut x.b);
            deliver(&mut x.a, 1_000, &nak);
            let wait = x.a.poll_timeout().map(|t| t - 1_000);
            // Whatever the timer says, nothing may leave at the NAK's time.
            x.a.handle_timeout(1_000);
            (wait, drain(&mut x.a).len())
        },
        (Some(10_000), 0),
        (Some(0), 1),
    );
}

pub fn retry_forever() {
    check(
        Mutant::RetryForever,
        "MR-TMR-5, MR-TMR-6: with retry_cnt 1 the second timeout ends in RETRY_EXC_ERR",
        |m| {
            let p = Params {
                retry_cnt: 1,
                ..Params::default()
            };
            let mut x = base(m, None, p, 1);
            let ea = x.qa[0];
            post(&mut x.a, ea, 1, WrOp::Send, &[1; 8]);
            let mut sent = drain(&mut x.a).len(); // B never answers
            let mut fired = 0;
            while let Some(t) = x.a.poll_timeout() {
                if fired == 10 {
                    break;
                }
                x.a.handle_timeout(t);
                fired += 1;
                sent += drain(&mut x.a).len();
            }
            let state = x.a.query_qp(ea.qpn).unwrap().state;
            (fired, sent, statuses(&mut x.a, ea), state)
        },
        (2, 2, vec![WcStatus::RetryExcErr], QpState::Err),
        (10, 11, vec![], QpState::Rts),
    );
}
