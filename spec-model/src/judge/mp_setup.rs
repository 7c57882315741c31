//! The MetaRoCE MP setup blocks of the RDMA-CM exchanges in a capture
//! (SPEC.md §7.1.1): what each REQ and REP carried, the outcome
//! [`negotiate`] gives, and the rules a capture shows:
//!
//! - "MR-MPN-7": a REQ's version-1 block has length 24, M set, reserved
//!   bits and bytes 0 and values in their ranges (a later version is read by
//!   its version-1 fields and not judged as a sender's);
//! - "MR-MPN-8": a REP answering M carries a block with M (version 1:
//!   length 24, reserved 0, values in range) or none; after a REP without M
//!   the passive side sends no MP opcode on the connection;
//! - "MR-MPN-9": a REP's T flag and trim DSCP equal the REQ's;
//! - "MR-MPN-10": after a REP without M the active side sends no MP opcode;
//! - "MR-MPN-11": a REP answering a malformed REQ block, or an RTU or data
//!   from the active side after a malformed REP block (each should have
//!   been a REJ of reason 28); a REJ of another reason is information (a
//!   CM may refuse for another cause first, no listener say);
//! - "MR-CM-6": a block in a REQ with M clear, in a REP answering a REQ
//!   that asked for no MP, and RC-class packets (a Base QP) from a side
//!   whose REQ or REP carried a block with M that the peer answered with M.
//!
//! Only what the capture shows is judged: a REQ or REP cut before its block
//! is a note about the capture; a REP without its REQ, or an exchange whose
//! end the capture does not hold (no REJ after a malformed block), gives no
//! finding. Each finding names the CM frames and the data frame it rests on.
//!
//! Memory: at most [`MAX_SETUPS`] REQs and exchanges followed; an
//! exchange is forgotten at its REJ, DREQ or DREP.

use super::ConversationFinding;
use super::cm::{DirKey, MAX_SETUPS};
use crate::Finding;
use crate::model::mp::MpConfig;
use crate::model::mp::judge::SetupBlocks;
use crate::model::mp::setup::{MpAgreed, REJ_CONSUMER, Side, malformed, negotiate};
use metaroce_codec::Opcode;
use metaroce_codec::ServiceClass;
use metaroce_codec::cm::{CmMad, CmMessage, CmRep, CmReq};
use metaroce_codec::mp_setup::{MpSetupBlock, MpSetupField, field};
use std::collections::HashMap;
use std::net::IpAddr;

/// What the CM exchange set up for one direction of a connection, as its
/// summary shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmMp {
    /// Frames of the REQ and the REP.
    pub frames: [u64; 2],
    /// The MP values both ends use; `None`: the REQ asked for MP and the
    /// REP declined it (a Base QP, MR-MPN-10).
    pub agreed: Option<MpAgreed>,
    /// Which side this direction's requester is.
    pub requester: Side,
}

impl CmMp {
    /// The MP parameters of this direction's judge: `base` (a profile's or
    /// the defaults) with the values its setup blocks agreed (SPEC.md
    /// §7.1.1, MR-MPN-9): W, the REQ's trim DSCP (trimming off when its T
    /// is clear), the responder's O and the requester's RN; and the frames
    /// of the two blocks. `None` when the exchange set up no MP QP.
    pub fn mp_config(&self, base: &MpConfig) -> Option<(MpConfig, SetupBlocks)> {
        let a = self.agreed?;
        let [req, rep] = self.frames;
        // The requester's view names the responder's O; the responder's
        // view, the requester's RN.
        let (mine, peer, blocks) = match self.requester {
            Side::Active => (
                a.active,
                a.passive,
                SetupBlocks {
                    requester: req,
                    responder: rep,
                },
            ),
            Side::Passive => (
                a.passive,
                a.active,
                SetupBlocks {
                    requester: rep,
                    responder: req,
                },
            ),
        };
        let cfg = MpConfig {
            window: u32::from(a.window),
            trim_dscp: a.trim_dscp,
            trimming: a.trim_dscp.is_some(),
            peer_ordered: mine.peer_ordered,
            resource_nak: Some(peer.peer_resource_nak),
            ..base.clone()
        };
        Some((cfg, blocks))
    }
}

/// What the exchange led to, as far as the judge follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// M in both blocks: an MP QP at both ends.
    Agreed(MpAgreed),
    /// The REQ asked for MP; the REP carried no block or M clear.
    Declined,
    /// The REQ asked for MP; the REP's block is malformed (MR-MPN-11).
    RepMalformed,
}

/// One REQ/REP pair whose REQ asked for MP.
#[derive(Clone, Copy, Debug)]
struct Exchange {
    state: State,
    /// REQ and REP frames.
    frames: [u64; 2],
    /// (active → passive, passive → active) directions.
    dirs: [DirKey; 2],
}

/// (active side's address, its communication ID).
type ExKey = (IpAddr, u32);

/// The MP setup blocks seen so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct MpSetups {
    /// REQs awaiting their REP or REJ: (sender, receiver, comm ID) →
    /// (block field, frame, the REQ's local QPN).
    reqs: HashMap<(IpAddr, IpAddr, u32), (MpSetupField, u64, u32)>,
    exchanges: HashMap<ExKey, Exchange>,
    /// Direction → (exchange, sending side, already reported).
    dirs: HashMap<DirKey, (ExKey, Side, bool)>,
    /// Frames of REQs and REPs cut before their block (the first 16) and
    /// their count.
    cut: (Vec<u64>, u64),
    /// Some exchange agreed a trim DSCP (it may have ended since).
    trim_agreed: bool,
}

fn side_name(s: Side) -> &'static str {
    match s {
        Side::Active => "the active side",
        Side::Passive => "the passive side",
    }
}

fn found(f: Finding, frames: Vec<u64>, qpns: Vec<u32>) -> ConversationFinding {
    ConversationFinding {
        finding: f,
        frames,
        qpns,
        connection: None,
    }
}

/// What is wrong with a sender's version-1 block besides M (reserved
/// bits and bytes, length, ranges of §7.1.1): one line, or `None`.
fn v1_faults(b: &MpSetupBlock) -> Option<String> {
    if b.version != 1 {
        return None;
    }
    let mut bad = Vec::new();
    if usize::from(b.length) != MpSetupBlock::LEN {
        bad.push(format!("length {} (not 24)", b.length));
    }
    if b.flags & 0x07 != 0 {
        bad.push(format!("reserved flag bits {:#04x}", b.flags & 0x07));
    }
    if b.trim_dscp & !field::TRIM_DSCP_MASK != 0 || (b.trim().is_none() && b.trim_dscp != 0) {
        bad.push(format!(
            "trim DSCP byte {:#04x} (reserved bits, or not 0 with T clear)",
            b.trim_dscp
        ));
    }
    if b.reserved != [0; 3] || b.reserved2 != [0; 4] {
        bad.push("reserved bytes not 0".to_string());
    }
    if let Some(m) = crate::model::mp::setup::malformed_block(b) {
        bad.push(format!("{} {} ({})", m.field, m.value, m.why));
    }
    if !MpSetupBlock::PLANES_RANGE.contains(&b.planes) {
        bad.push(format!("planes {} (outside 1-8)", b.planes));
    }
    if !MpSetupBlock::ACK_COALESCE_US_RANGE.contains(&b.ack_coalesce_us) {
        bad.push(format!(
            "ACK coalescing time {} µs (outside 1-64)",
            b.ack_coalesce_us
        ));
    }
    if !MpSetupBlock::ACK_PROMPT_US_RANGE.contains(&b.ack_prompt_us) {
        bad.push(format!(
            "ACK prompt bound {} µs (outside 1-50)",
            b.ack_prompt_us
        ));
    }
    (!bad.is_empty()).then(|| bad.join(", "))
}

/// Whether a REQ's block asks for MP (a readable block with M).
fn asks(f: &MpSetupField) -> bool {
    f.block().is_some_and(MpSetupBlock::mp) && malformed(f).is_none()
}

impl MpSetups {
    /// A CM MAD from `src` to `dst` in frame `frame`; findings it shows.
    pub fn on_mad(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        frame: u64,
        mad: &CmMad,
        out: &mut Vec<ConversationFinding>,
    ) {
        match mad.message {
            CmMessage::Req(req) => self.on_req(src, dst, frame, &req, out),
            CmMessage::Rep(rep) => self.on_rep(src, dst, frame, &rep, out),
            CmMessage::Rej(rej) => {
                let key = (dst, src, rej.remote_comm_id);
                if let Some((f, req_frame, _)) = self.reqs.remove(&key) {
                    // The passive side refused the REQ.
                    if let Some(m) = malformed(&f).filter(|m| m.field != "version")
                        && rej.reason != REJ_CONSUMER
                    {
                        out.push(found(
                            Finding::info(
                                "MR-MPN-11",
                                format!(
                                    "REJ (frame {frame}) of a REQ (frame {req_frame}) whose setup block is malformed ({} {}: {}) gives reason {}, not 28 (consumer reject); the CM may have refused it for that cause first",
                                    m.field, m.value, m.why, rej.reason
                                ),
                            ),
                            vec![frame, req_frame],
                            Vec::new(),
                        ));
                    }
                    return;
                }
                if let Some((key, ex)) = self.end(src, dst, rej.local_comm_id, rej.remote_comm_id)
                    && key.0 == src
                    && matches!(ex.state, State::RepMalformed | State::Declined)
                    && rej.reason != REJ_CONSUMER
                {
                    let [req_frame, rep_frame] = ex.frames;
                    let (id, what) = if ex.state == State::Declined {
                        ("MR-MPN-10", "declined MP")
                    } else {
                        ("MR-MPN-11", "carried a malformed setup block")
                    };
                    out.push(found(
                        Finding::info(
                            id,
                            format!(
                                "the active side's REJ (frame {frame}) of a REP (frame {rep_frame}) that {what} gives reason {}, not 28 (consumer reject); it may have refused the REP for another cause",
                                rej.reason
                            ),
                        ),
                        vec![frame, rep_frame, req_frame],
                        Vec::new(),
                    ));
                }
            }
            CmMessage::Rtu(ids) => {
                let Some(ex) = self.exchanges.get(&(src, ids.local_comm_id)) else {
                    return;
                };
                if ex.state == State::RepMalformed {
                    let [req_frame, rep_frame] = ex.frames;
                    out.push(found(
                        Finding::new(
                            "MR-MPN-11",
                            format!(
                                "the active side accepts (RTU, frame {frame}) a REP (frame {rep_frame}) whose setup block is malformed: it must answer it with a REJ of reason 28"
                            ),
                        ),
                        vec![frame, rep_frame, req_frame],
                        vec![ex.dirs[1].2, ex.dirs[0].2],
                    ));
                    // Reported once: the data that follows adds nothing.
                    for d in ex.dirs {
                        if let Some(w) = self.dirs.get_mut(&d) {
                            w.2 = true;
                        }
                    }
                }
            }
            CmMessage::Dreq(d) => {
                self.end(src, dst, d.local_comm_id, d.remote_comm_id);
            }
            CmMessage::Drep(ids) => {
                self.end(src, dst, ids.local_comm_id, ids.remote_comm_id);
            }
            _ => {}
        }
    }

    /// Forgets the exchange a REJ, DREQ or DREP from `src` names; returns
    /// it with its key.
    fn end(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        local: u32,
        remote: u32,
    ) -> Option<(ExKey, Exchange)> {
        let key = [(src, local), (dst, remote)]
            .into_iter()
            .find(|k| self.exchanges.contains_key(k))?;
        let ex = self.exchanges.remove(&key)?;
        for d in ex.dirs {
            if self.dirs.get(&d).is_some_and(|w| w.0 == key) {
                self.dirs.remove(&d);
            }
        }
        Some((key, ex))
    }

    fn on_req(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        frame: u64,
        req: &CmReq,
        out: &mut Vec<ConversationFinding>,
    ) {
        let key = (src, dst, req.local_comm_id);
        if self.reqs.get(&key).is_some_and(|r| r.0 == req.mp_setup)
            || self.exchanges.contains_key(&(src, req.local_comm_id))
        {
            return; // a retransmitted REQ (its REP may be lost): judged once
        }
        if self.reqs.len() >= MAX_SETUPS && !self.reqs.contains_key(&key) {
            return;
        }
        self.reqs.insert(key, (req.mp_setup, frame, req.local_qpn));
        let qpns = vec![req.local_qpn];
        match req.mp_setup {
            MpSetupField::Absent => {}
            MpSetupField::NotCaptured => self.cut(frame),
            MpSetupField::Unreadable { .. } => {
                let m = malformed(&req.mp_setup).map_or("", |m| m.why);
                out.push(found(
                    Finding::new(
                        "MR-MPN-7",
                        format!("REQ (frame {frame}) carries a setup block that cannot be read: {m}"),
                    ),
                    vec![frame],
                    qpns,
                ));
            }
            MpSetupField::Block(b) if !b.mp() => out.push(found(
                Finding::new(
                    "MR-CM-6",
                    format!(
                        "REQ (frame {frame}) carries the MetaRoCE setup block with M clear: a REQ that asks for a Base QP carries no block, one for an MP QP sets M"
                    ),
                ),
                vec![frame],
                qpns,
            )),
            MpSetupField::Block(b) => {
                if let Some(why) = v1_faults(&b) {
                    out.push(found(
                        Finding::new(
                            "MR-MPN-7",
                            format!("REQ (frame {frame}) setup block (version 1): {why}"),
                        ),
                        vec![frame],
                        qpns,
                    ));
                }
            }
        }
    }

    fn on_rep(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        frame: u64,
        rep: &CmRep,
        out: &mut Vec<ConversationFinding>,
    ) {
        if rep.mp_setup == MpSetupField::NotCaptured {
            self.cut(frame);
        }
        // The REP comes from the REQ's receiver.
        let Some((req, req_frame, req_qpn)) = self.reqs.remove(&(dst, src, rep.remote_comm_id))
        else {
            return;
        };
        if req == MpSetupField::NotCaptured || rep.mp_setup == MpSetupField::NotCaptured {
            return;
        }
        if matches!(
            req,
            MpSetupField::Unreadable {
                field: "version",
                ..
            }
        ) {
            // Version 0 (reported as MR-MPN-7): §7.1.1 says nothing of the
            // answer it is owed.
            return;
        }
        let frames = vec![frame, req_frame];
        let qpns = vec![req_qpn, rep.local_qpn];
        if let Some(m) = malformed(&req).filter(|m| m.field != "version") {
            out.push(found(
                Finding::new(
                    "MR-MPN-11",
                    format!(
                        "REP (frame {frame}) answers a REQ (frame {req_frame}) whose setup block is malformed ({} {}: {}): the passive side must answer it with a REJ of reason 28",
                        m.field, m.value, m.why
                    ),
                ),
                frames,
                qpns,
            ));
            return;
        }
        if !asks(&req) {
            if rep.mp_setup != MpSetupField::Absent {
                out.push(found(
                    Finding::new(
                        "MR-CM-6",
                        format!(
                            "REP (frame {frame}) carries the MetaRoCE setup block though its REQ (frame {req_frame}) asked for no MP QP: the connection is a Base QP, whose REP carries no block"
                        ),
                    ),
                    frames,
                    qpns,
                ));
            }
            return;
        }
        let state = match rep.mp_setup {
            MpSetupField::Block(b) if malformed(&rep.mp_setup).is_none() && b.mp() => {
                if let Some(why) = v1_faults(&b) {
                    out.push(found(
                        Finding::new(
                            "MR-MPN-8",
                            format!("REP (frame {frame}) setup block (version 1): {why}"),
                        ),
                        frames.clone(),
                        qpns.clone(),
                    ));
                }
                let q = req.block().and_then(MpSetupBlock::trim);
                if b.trim() != q {
                    let show =
                        |t: Option<u8>| t.map_or("T clear".to_string(), |d| format!("T, DSCP {d}"));
                    out.push(found(
                        Finding::new(
                            "MR-MPN-9",
                            format!(
                                "REP (frame {frame}) setup block has {}, its REQ (frame {req_frame}) {}: a REP's T flag and trim DSCP equal the REQ's",
                                show(b.trim()),
                                show(q)
                            ),
                        ),
                        frames.clone(),
                        qpns.clone(),
                    ));
                }
                match negotiate(&req, &rep.mp_setup, false) {
                    crate::model::mp::setup::Outcome::Mp(a) => State::Agreed(a),
                    _ => return,
                }
            }
            MpSetupField::Block(b) if malformed(&rep.mp_setup).is_none() => {
                debug_assert!(!b.mp());
                out.push(found(
                    Finding::new(
                        "MR-MPN-8",
                        format!(
                            "REP (frame {frame}) answers a REQ (frame {req_frame}) that asked for MP with a setup block whose M is clear: the answer is a block with M (MP) or no block (Base)"
                        ),
                    ),
                    frames.clone(),
                    qpns.clone(),
                ));
                State::Declined
            }
            MpSetupField::Absent => State::Declined,
            _ => {
                let m = malformed(&rep.mp_setup);
                out.push(found(
                    Finding::new(
                        "MR-MPN-8",
                        format!(
                            "REP (frame {frame}) answers a REQ (frame {req_frame}) that asked for MP with a malformed setup block ({})",
                            m.map_or(String::new(), |m| format!("{} {}: {}", m.field, m.value, m.why))
                        ),
                    ),
                    frames.clone(),
                    qpns.clone(),
                ));
                if m.is_some_and(|m| m.field != "version") {
                    State::RepMalformed
                } else {
                    return;
                }
            }
        };
        if self.exchanges.len() >= MAX_SETUPS || self.dirs.len() + 2 > 2 * MAX_SETUPS {
            return;
        }
        // Active side `dst` (REQ's local QPN) ↔ passive side `src` (REP's).
        let ex_key = (dst, rep.remote_comm_id);
        let dirs = [(dst, src, rep.local_qpn), (src, dst, req_qpn)];
        self.end(dst, src, rep.remote_comm_id, rep.local_comm_id);
        self.exchanges.insert(
            ex_key,
            Exchange {
                state,
                frames: [req_frame, frame],
                dirs,
            },
        );
        self.dirs.insert(dirs[0], (ex_key, Side::Active, false));
        self.dirs.insert(dirs[1], (ex_key, Side::Passive, false));
        self.trim_agreed |= matches!(state, State::Agreed(a) if a.trim_dscp.is_some());
    }

    /// Whether some exchange seen so far agreed a trim DSCP (a cheap test
    /// before [`MpSetups::view`]).
    pub fn trim_agreed(&self) -> bool {
        self.trim_agreed
    }

    /// A data packet from `src` to `dst` QPN `dest_qp` in frame `frame`:
    /// a finding when its side may not send its opcode on the connection
    /// its CM exchange set up (once per side).
    pub fn on_packet(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        dest_qp: u32,
        op: Opcode,
        frame: u64,
        out: &mut Vec<ConversationFinding>,
    ) {
        if self.dirs.is_empty() {
            return;
        }
        let Some(w) = self.dirs.get_mut(&(src, dst, dest_qp)) else {
            return;
        };
        if w.2 {
            return;
        }
        let Some(ex) = self.exchanges.get(&w.0) else {
            return;
        };
        let [req_frame, rep_frame] = ex.frames;
        let side = w.1;
        let rc = op.class() == ServiceClass::Rc;
        let (id, why) = match (ex.state, side) {
            (State::Agreed(_), _) if rc => (
                "MR-CM-6",
                format!(
                    "{} sends {op} (RC class, a Base QP) on a connection whose REQ (frame {req_frame}) and REP (frame {rep_frame}) both carried the setup block with M: its {} announced an MP QP, and a Base QP's REQ and REP carry no block",
                    side_name(side),
                    if side == Side::Active { "REQ" } else { "REP" }
                ),
            ),
            (State::Declined, Side::Active) if op.is_mp() => (
                "MR-MPN-10",
                format!(
                    "the active side sends {op} (MP) on a connection whose REP (frame {rep_frame}) declined the MP its REQ (frame {req_frame}) asked for: it sets up a Base QP or refuses"
                ),
            ),
            (State::Declined, Side::Passive) if op.is_mp() => (
                "MR-MPN-8",
                format!(
                    "the passive side sends {op} (MP) after answering the REQ (frame {req_frame}) with a REP (frame {rep_frame}) without M, which sets up a Base QP"
                ),
            ),
            (State::RepMalformed, Side::Active) if rc || op.is_mp() => (
                "MR-MPN-11",
                format!(
                    "the active side sends {op} on a connection whose REP (frame {rep_frame}) carried a malformed setup block: it must answer that REP with a REJ of reason 28"
                ),
            ),
            _ => return,
        };
        w.2 = true;
        // Both ends: the active side's QPN, then the passive side's.
        let qpns = vec![ex.dirs[1].2, ex.dirs[0].2];
        out.push(found(
            Finding::new(id, why),
            vec![frame, rep_frame, req_frame],
            qpns,
        ));
    }

    /// What the CM exchange set up for the direction `key` (requester,
    /// responder, responder QPN), when its REQ asked for MP.
    pub fn view(&self, key: &DirKey) -> Option<CmMp> {
        let (ex_key, side, _) = self.dirs.get(key)?;
        let ex = self.exchanges.get(ex_key)?;
        let agreed = match ex.state {
            State::Agreed(a) => Some(a),
            State::Declined => None,
            State::RepMalformed => return None,
        };
        Some(CmMp {
            frames: ex.frames,
            agreed,
            requester: *side,
        })
    }

    /// A note about REQs and REPs the capture cut before their block.
    pub fn note(&self) -> Option<String> {
        let (frames, n) = &self.cut;
        (*n > 0).then(|| {
            format!(
                "RDMA-CM REQ/REP cut by the capture before their MP setup block: {n} (frames {}{}); their blocks are not judged",
                frames.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
                if *n > 16 { ", …" } else { "" }
            )
        })
    }

    fn cut(&mut self, frame: u64) {
        if self.cut.0.len() < 16 {
            self.cut.0.push(frame);
        }
        self.cut.1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_codec::cm::MadHeader;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const P: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn mad(message: CmMessage) -> CmMad {
        CmMad {
            header: MadHeader::default(),
            message,
        }
    }

    fn blk(flags: u8, window: u16) -> MpSetupField {
        MpSetupField::Block(MpSetupBlock {
            flags,
            window,
            entropy_set_size: 16,
            planes: 1,
            ack_coalesce_us: 8,
            ack_prompt_us: 4,
            ..MpSetupBlock::v1()
        })
    }

    fn req(f: MpSetupField) -> CmMad {
        mad(CmMessage::Req(CmReq {
            local_comm_id: 5,
            local_qpn: 0x22,
            mp_setup: f,
            ..CmReq::default()
        }))
    }

    fn rep(f: MpSetupField) -> CmMad {
        mad(CmMessage::Rep(CmRep {
            local_comm_id: 9,
            remote_comm_id: 5,
            local_qpn: 0x12,
            mp_setup: f,
            ..CmRep::default()
        }))
    }

    fn ids(out: &[ConversationFinding]) -> Vec<&'static str> {
        out.iter().map(|f| f.finding.id).collect()
    }

    #[test]
    fn mr_mpn_10_once_and_forgotten_at_dreq() {
        let mut s = MpSetups::default();
        let mut out = Vec::new();
        s.on_mad(A, P, 1, &req(blk(field::FLAG_MP, 1024)), &mut out);
        // A retransmitted REQ is judged once.
        s.on_mad(A, P, 2, &req(blk(field::FLAG_MP, 1024)), &mut out);
        s.on_mad(P, A, 3, &rep(MpSetupField::Absent), &mut out);
        s.on_mad(A, P, 4, &req(blk(field::FLAG_MP, 1024)), &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(
            s.view(&(A, P, 0x12)).map(|v| (v.agreed, v.requester)),
            Some((None, Side::Active))
        );
        s.on_packet(A, P, 0x12, Opcode::RC_SEND_ONLY, 5, &mut out);
        assert!(out.is_empty(), "Base after a declined REP: {out:?}");
        s.on_packet(A, P, 0x12, Opcode::MP_SEND, 6, &mut out);
        s.on_packet(A, P, 0x12, Opcode::MP_SEND, 7, &mut out);
        assert_eq!(ids(&out), ["MR-MPN-10"]);
        assert_eq!(
            (out[0].frames.clone(), out[0].qpns.clone()),
            (vec![6, 3, 1], vec![0x22, 0x12])
        );
        // After the DREQ the QPNs may serve another connection.
        let dreq = mad(CmMessage::Dreq(metaroce_codec::cm::CmDreq {
            local_comm_id: 9,
            remote_comm_id: 5,
            remote_qpn: 0x22,
        }));
        s.on_mad(P, A, 8, &dreq, &mut out);
        s.on_packet(P, A, 0x22, Opcode::MP_ACK, 9, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(s.view(&(A, P, 0x12)), None);
    }

    #[test]
    fn agreed_values_per_direction_mr_mpn_9() {
        let mut s = MpSetups::default();
        let mut out = Vec::new();
        s.on_mad(
            A,
            P,
            1,
            &req(blk(field::FLAG_MP | field::FLAG_ORDERED, 4096)),
            &mut out,
        );
        s.on_mad(P, A, 2, &rep(blk(field::FLAG_MP, 256)), &mut out);
        assert!(out.is_empty(), "{out:?}");
        let a = s.view(&(A, P, 0x12)).unwrap();
        let p = s.view(&(P, A, 0x22)).unwrap();
        assert_eq!((a.requester, p.requester), (Side::Active, Side::Passive));
        let agreed = a.agreed.unwrap();
        assert_eq!(agreed.window, 256);
        assert!(agreed.passive.peer_ordered && !agreed.active.peer_ordered);
        // MP both ways is what was agreed; an RC packet is not.
        s.on_packet(P, A, 0x22, Opcode::MP_ACK, 3, &mut out);
        assert!(out.is_empty());
        s.on_packet(P, A, 0x22, Opcode::RC_ACK, 4, &mut out);
        assert_eq!(ids(&out), ["MR-CM-6"]);
    }
}
