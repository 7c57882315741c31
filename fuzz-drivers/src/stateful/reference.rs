//! The `reference_stateful` target: two reference devices (requester and
//! responder both ways, Base RC, MP and UD) on a lossy in-memory link
//! ([`super::pair`]), driven by verbs, link impairments, time and injected
//! structure-aware frames. After every event:
//!
//! - nothing panicked (the target's harness catches that);
//! - "MR-REQ-2", "MR-QP-6": every completion is for a work request posted on
//!   that QP and not completed before (no completion twice, none invented);
//! - "MR-SEC-4", "MR-SEC-5": no byte of any memory region changed unless some
//!   operation addressed it (a local buffer of a posted receive, READ or
//!   atomic, or a remote range a posted or injected WRITE or atomic named);
//!   bytes outside every region cannot be written at all (regions are the
//!   device's own buffers), and the region with no remote rights is the
//!   canary next to the others;
//! - bounded state: each QP holds no more send and receive work requests
//!   than are outstanding, at most [`MAX_RESPONSES`] queued responses, and a
//!   device sends at most `MAX_BURST` frames in answer to one event.

use super::Tally;
use super::input::Input;
use super::pair::{Event, Kind, Pair};
use std::collections::BTreeSet;

/// Most events one input runs.
pub const MAX_EVENTS: usize = 160;
/// Most responses a QP may hold queued.
pub const MAX_RESPONSES: usize = 4096;

/// Runs one input; `Err` names the violated property.
pub fn run(data: &[u8]) -> Result<(), String> {
    run_tally(data).map(|_| ())
}

/// [`run`], with what the run did.
pub fn run_tally(data: &[u8]) -> Result<Tally, String> {
    let mut inp = Input::new(data);
    let mut pair = Pair::new(&mut inp, true)?;
    let mut done: [BTreeSet<u64>; 2] = [BTreeSet::new(), BTreeSet::new()];
    let mut tally = Tally::default();
    let trace = std::env::var_os("METAROCE_FUZZ_TRACE").is_some();
    for i in 0..MAX_EVENTS {
        if inp.is_empty() {
            break;
        }
        let event = Event::TABLE[inp.pick(Event::TABLE.len())];
        if trace {
            eprintln!("event {i}: {event:?} at {} ns", pair.now);
        }
        pair.step(event, &mut inp)
            .and_then(|()| pair.pump())
            .and_then(|()| check(&mut pair, &mut done))
            .map_err(|e| format!("event {i} ({event:?}): {e}"))?;
        tally.events += 1;
    }
    tally.completed_ok = pair.completed_ok;
    tally.judged = pair.frames_handed;
    Ok(tally)
}

/// Every property of the module documentation, after one event.
pub fn check(pair: &mut Pair, done: &mut [BTreeSet<u64>; 2]) -> Result<(), String> {
    let wcs = pair.take_completions();
    for (n, wcs) in wcs.iter().enumerate() {
        let node = &mut pair.nodes[n];
        for wc in wcs {
            match node.outstanding.remove(&wc.wr_id) {
                Some((qpn, _)) if qpn == wc.qpn => {
                    done[n].insert(wc.wr_id);
                }
                Some((qpn, _)) => {
                    return Err(format!(
                        "MR-REQ-2: node {n}: completion of wr {} on QP {:#x}, posted on QP {qpn:#x}",
                        wc.wr_id, wc.qpn
                    ));
                }
                None if done[n].contains(&wc.wr_id) => {
                    return Err(format!(
                        "MR-QP-6: node {n}: wr {} completes twice ({wc:?})",
                        wc.wr_id
                    ));
                }
                None => {
                    return Err(format!(
                        "MR-REQ-2: node {n}: completion of wr {} that is not outstanding ({wc:?})",
                        wc.wr_id
                    ));
                }
            }
        }
    }
    for (n, node) in pair.nodes.iter_mut().enumerate() {
        for (r, mr) in node.mrs.iter_mut().enumerate() {
            let now = node
                .dev
                .read_mr(mr.info.lkey, mr.info.addr, mr.info.len)
                .map_err(|e| format!("node {n}: region {r} cannot be read: {e:?}"))?;
            if now == mr.shadow.as_slice() {
                continue; // one comparison, not one per byte
            }
            for (i, (&b, old)) in now.iter().zip(mr.shadow.iter_mut()).enumerate() {
                if b != *old {
                    if !mr.exposed[i] {
                        return Err(format!(
                            "MR-SEC-4, MR-SEC-5: node {n}: byte {i} of region {r} ({} bytes, \
                             rights {:?}) changed from {old:#04x} to {b:#04x}, but no operation \
                             addressed it",
                            mr.info.len, mr.access
                        ));
                    }
                    *old = b;
                }
            }
        }
        for kind in [Kind::Rc, Kind::Mp, Kind::Ud] {
            let qpn = node.qpn(kind);
            let depths = node
                .dev
                .queue_depths(qpn)
                .map_err(|e| format!("node {n}: queue_depths of {qpn:#x}: {e:?}"))?;
            let sends = node
                .outstanding
                .values()
                .filter(|&&(q, r)| q == qpn && !r)
                .count();
            let recvs = node
                .outstanding
                .values()
                .filter(|&&(q, r)| q == qpn && r)
                .count();
            if depths.send > sends || depths.recv > recvs || depths.responses > MAX_RESPONSES {
                return Err(format!(
                    "bounded state: node {n} {kind:?} QP {qpn:#x} holds {depths:?}; outstanding \
                     {sends} sends, {recvs} receives, at most {MAX_RESPONSES} responses"
                ));
            }
        }
    }
    Ok(())
}
