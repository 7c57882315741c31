//! A driver turn gives the device the current time, so work posted after a
//! long idle period arms its timers from then, not in the past (found in the
//! rxe interop: the first SEND after seconds of connection setup was resent
//! at once).

mod common;
use common::*;
use metaroce_ref::agent::dataplane::service;
use metaroce_ref::{SendWr, Sge, WrOp};

#[test]
fn work_posted_after_an_idle_period_arms_its_timer_from_the_drivers_time() {
    let Pair { mut a, ea, .. } = pair(Params::default());
    let buf = a.reg_mr(ea.pd, 64, metaroce_ref::Access::ALL).unwrap();
    let idle_until = 5_000_000_000; // 5 s of out-of-band setup
    service(&mut a, idle_until, |_| Ok(())).unwrap();
    a.post_send(
        ea.qpn,
        SendWr::new(
            1,
            WrOp::Send,
            vec![Sge {
                addr: buf.addr,
                len: 64,
                lkey: buf.lkey,
            }],
        ),
    )
    .unwrap();
    assert_eq!(drain(&mut a).len(), 1, "the SEND goes out");
    let deadline = a.poll_timeout().expect("the ACK timer is armed");
    assert!(
        deadline > idle_until,
        "ACK timer at {deadline} ns: armed before the time the driver gave ({idle_until} ns)"
    );
}
