//! Connections whose RDMA-CM setup is in the capture: the REQ and REP
//! MADs on QP1 (IBA vol 1 §12.6.5, §12.6.8) declare both directions' QPNs,
//! starting PSNs, the path MTU, responder resources, end-to-end flow
//! control (credits) and retry counts. A connection opened after its REP
//! is judged from these, not guessed from its first packets.
//!
//! Memory: at most [`MAX_SETUPS`] REQs awaiting their REP and declared
//! directions awaiting their first request; beyond, new ones are ignored.

use metaroce_codec::Psn;
use metaroce_codec::cm::{CmMad, CmMessage, CmReq};
use std::collections::HashMap;
use std::net::IpAddr;

/// Most REQs awaiting a REP, and most declared directions not yet opened.
pub const MAX_SETUPS: usize = 4096;

/// What the CM exchange declared for one direction of a connection (its
/// requester's requests to its responder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The requester's QPN (DestQP of the responses).
    pub requester_qpn: u32,
    /// The PSN of the requester's first request.
    pub starting_psn: Psn,
    /// The path MTU (REQ), when its code is valid.
    pub pmtu: Option<u32>,
    /// The responder generates end-to-end credits (its side's
    /// End-to-End Flow Control bit).
    pub credits: bool,
    /// The responder's QP uses a shared receive queue (credit code 31).
    pub srq: bool,
    /// READ/atomic requests the responder accepts in flight.
    pub responder_resources: u8,
    /// READ/atomic requests the requester's side set itself up to issue
    /// in flight: for the active side the REP's Responder Resources (its
    /// REQ's Initiator Depth only asked; Linux `cm_rep_handler` takes the
    /// REP's answer), for the passive side its REP's Initiator Depth.
    pub initiator_depth: u8,
    /// The requester's retry count and RNR retry count.
    pub retry_count: u8,
    /// RNR retry count (7: infinite).
    pub rnr_retry_count: u8,
    /// Frames of the REQ and the REP.
    pub frames: [u64; 2],
}

/// (sender, receiver, communication ID) of a REQ.
type ReqKey = (IpAddr, IpAddr, u32);

/// (requester, responder, responder QPN) of a declared direction.
pub(crate) type DirKey = (IpAddr, IpAddr, u32);

/// The CM exchanges seen so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Setups {
    reqs: HashMap<ReqKey, (CmReq, u64)>,
    declared: HashMap<DirKey, Declared>,
}

impl Setups {
    /// A CM MAD from `src` to `dst` in frame `frame`.
    pub fn on_mad(&mut self, src: IpAddr, dst: IpAddr, frame: u64, mad: &CmMad) {
        match mad.message {
            CmMessage::Req(req) if req.transport_type == 0 && self.reqs.len() < MAX_SETUPS => {
                self.reqs
                    .insert((src, dst, req.local_comm_id), (req, frame));
            }
            CmMessage::Rep(rep) => {
                // The REP comes from the REQ's receiver.
                let Some((req, req_frame)) = self.reqs.remove(&(dst, src, rep.remote_comm_id))
                else {
                    return;
                };
                if self.declared.len() + 2 > MAX_SETUPS {
                    return;
                }
                let frames = [req_frame, frame];
                // The active side (REQ sender, `dst`) requests to the passive side.
                self.declared.insert(
                    (dst, src, rep.local_qpn),
                    Declared {
                        requester_qpn: req.local_qpn,
                        starting_psn: Psn::new(req.starting_psn),
                        pmtu: req.pmtu(),
                        credits: rep.end_to_end_flow_control,
                        srq: rep.srq,
                        responder_resources: rep.responder_resources,
                        initiator_depth: req.initiator_depth.min(rep.responder_resources),
                        retry_count: req.retry_count,
                        rnr_retry_count: rep.rnr_retry_count,
                        frames,
                    },
                );
                // The passive side requests to the active side.
                self.declared.insert(
                    (src, dst, req.local_qpn),
                    Declared {
                        requester_qpn: rep.local_qpn,
                        starting_psn: Psn::new(rep.starting_psn),
                        pmtu: req.pmtu(),
                        credits: req.end_to_end_flow_control,
                        srq: req.srq,
                        responder_resources: req.responder_resources,
                        initiator_depth: rep.initiator_depth,
                        retry_count: req.retry_count,
                        rnr_retry_count: req.rnr_retry_count,
                        frames,
                    },
                );
            }
            CmMessage::Rej(rej) => {
                self.reqs.remove(&(dst, src, rej.remote_comm_id));
            }
            _ => {}
        }
    }

    /// What was declared for the direction `key`, taken (a connection
    /// opens once).
    pub fn take(&mut self, key: &DirKey) -> Option<Declared> {
        if self.declared.is_empty() {
            return None;
        }
        self.declared.remove(key)
    }
}
