//! The `model_stateful` target: the spec model alone, driven by an event
//! sequence, with its invariants checked after every event.
//!
//! The modelled device has a Base RC QP (responder and requester), an MP QP
//! (responder and requester) and a UD QP behind the receive path of §9.2
//! (`receiver::Device`, with the notification point and a DCQCN reaction
//! point). Its peer is modelled too: a Base responder and an MP responder
//! that answer what the local requesters send, over two lossy queues. Events
//! ([`Event`]): structure-aware frames injected at the device, time passing,
//! verbs (post send and receive on either profile), the MP requester sending
//! one packet it may send, and the peer answering or the wire delivering.
//!
//! Invariants (each failure names its requirement):
//! - "MR-PSN-4": the Base requester never has 2^23 or more PSNs outstanding,
//!   and its oldest unacknowledged PSN never moves back;
//! - "MR-RSP-1": the responder's expected PSN never moves back;
//! - "MR-MSN-1": the responder's MSN grows by at most one per packet;
//! - "MR-ACK-3", "MR-ACK-4", "MR-READ-4": the responder's own responses pass
//!   `invariants::judge_responses`;
//! - "MR-REQ-2", "MR-QP-6", "MR-MPP-6": no work request, send or receive, of
//!   any QP completes twice, and only posted ones complete;
//! - "MR-SEC-4": every memory write the responder model describes lies inside
//!   the region it names;
//! - "MR-MPA-7": the MP responder's count of completed messages and the MP
//!   requester's cumulative ACK never move back;
//! - "MR-DCQCN-3": the reaction point's rate stays within
//!   [`rpg_min_rate`, line rate];
//! - "MR-ROB-6": admission changes no QP's state;
//! - "MR-MPS-1" and the rest of `MpRequester::on_transmit`: a packet built to
//!   satisfy the MP requester's own spec is accepted by it.

use super::Tally;
use super::frame::{self, Endpoints, Family, Region, Target};
use super::input::Input;
use super::spec_frame;
use core::net::Ipv4Addr;
use metaroce_codec::{Frame, Opcode, ParseOptions, Psn, RocePacket};
use metaroce_spec::model::congestion::{DcqcnParams, RpEvent};
use metaroce_spec::model::invariants::{ResponderEvent, judge_responses};
use metaroce_spec::model::mp::memory::{Access as MpAccess, MemoryRegion as MpRegion, RecvQueue};
use metaroce_spec::model::mp::requester::{MpRequester, SendWr as MpSendWr, WrOp as MpWrOp};
use metaroce_spec::model::mp::responder::MpResponder;
use metaroce_spec::model::mp::{ArrivalInfo, MpConfig, RecvWr as MpRecvWr};
use metaroce_spec::model::qp::QpType;
use metaroce_spec::model::receiver::{Device, LocalQp, MpAdmission, Receiver};
use metaroce_spec::model::requester::{RequesterAttrs, RequesterState, WorkRequest, WrOp};
use metaroce_spec::model::responder::psn::{PsnClass, classify};
use metaroce_spec::model::responder::{
    AccessFlags, Features, MemoryRegion, QpAttributes, RecvWr, ResponderState,
};
use metaroce_spec::model::{Effect, Field, Knowledge, Outcomes, PacketSpec, SyndromeSpec};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Most events one input runs.
pub const MAX_EVENTS: usize = 192;
/// Most frames waiting on each modelled wire; older ones are lost.
const WIRE_CAP: usize = 64;

/// Local QPNs and the peer's.
const QPN_RC: u32 = 0x100;
const QPN_MP: u32 = 0x200;
const QPN_UD: u32 = 0x300;
const PEER_RC: u32 = 0x12;
const PEER_MP: u32 = 0x22;
const QKEY: u32 = 0x1111_1111;
/// Local regions (R_Key, VA, length).
const LOCAL: Region = Region {
    rkey: 0x0A00_0001,
    va: 0x1000,
    len: 4096,
};
const LOCAL_RO: Region = Region {
    rkey: 0x0A00_0002,
    va: 0x8000,
    len: 512,
};
const MP_LOCAL: Region = Region {
    rkey: 0x0B00_0001,
    va: 0x2_0000,
    len: 8192,
};
/// The peer's region, which the local requesters address.
const PEER: Region = Region {
    rkey: 0x0C00_0001,
    va: 0x4_0000,
    len: 16384,
};
const LINE_RATE: u64 = 100_000;

fn peer_side() -> Endpoints {
    Endpoints {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: Ipv4Addr::new(10, 0, 0, 2),
    }
}

fn local_side() -> Endpoints {
    let p = peer_side();
    Endpoints {
        src_mac: p.dst_mac,
        dst_mac: p.src_mac,
        src_ip: p.dst_ip,
        dst_ip: p.src_ip,
    }
}

/// The kinds of event, one input byte each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A structure-aware frame arrives at the device.
    Inject,
    /// Time passes; every timer of every model runs.
    Tick,
    /// The application posts a Base send work request.
    PostSend,
    /// The application posts a Base receive work request.
    PostRecv,
    /// The application posts an MP send work request.
    MpPostSend,
    /// The application posts an MP receive work request.
    MpPostRecv,
    /// The MP requester sends one packet it may send now.
    MpTransmit,
    /// The peer takes the next frame the device sent and answers it.
    PeerStep,
    /// The next frame from the peer arrives at the device.
    Deliver,
    /// A CNP-worth of bytes is sent by the Base QP (reaction point).
    Sent,
}

impl Event {
    /// Every event, in the order of its tag byte.
    pub const ALL: [Event; 10] = [
        Event::Inject,
        Event::Tick,
        Event::PostSend,
        Event::PostRecv,
        Event::MpPostSend,
        Event::MpPostRecv,
        Event::MpTransmit,
        Event::PeerStep,
        Event::Deliver,
        Event::Sent,
    ];

    /// The tag byte of this event.
    pub fn tag(self) -> u8 {
        Event::ALL.iter().position(|&e| e == self).unwrap_or(0) as u8
    }
}

/// The modelled device, its peer and what the checks remember.
struct World {
    now: u64,
    dev: Device,
    rsp: ResponderState,
    req: RequesterState,
    ud: ResponderState,
    mp_rsp: MpResponder,
    mp_req: MpRequester,
    peer_rsp: ResponderState,
    peer_mp: MpResponder,
    dcqcn: DcqcnParams,
    to_peer: VecDeque<Vec<u8>>,
    from_peer: VecDeque<Vec<u8>>,
    /// Completed work requests per (QP, receive side).
    done: BTreeMap<(u32, bool), BTreeSet<u64>>,
    /// Work requests posted per (QP, receive side).
    posted: BTreeMap<(u32, bool), u64>,
    resp_events: Vec<ResponderEvent>,
    tally: Tally,
}

/// Runs one input through the model; `Err` names the violated invariant.
pub fn run(data: &[u8]) -> Result<(), String> {
    run_tally(data).map(|_| ())
}

/// [`run`], with what the run did.
pub fn run_tally(data: &[u8]) -> Result<Tally, String> {
    let mut inp = Input::new(data);
    let mut w = World::new(&mut inp);
    let trace = std::env::var_os("METAROCE_FUZZ_TRACE").is_some();
    for i in 0..MAX_EVENTS {
        if inp.is_empty() {
            break;
        }
        let event = Event::ALL[inp.pick(Event::ALL.len())];
        if trace {
            eprintln!("event {i}: {event:?} at {} ns", w.now);
        }
        w.step(event, &mut inp)
            .map_err(|e| format!("event {i} ({event:?}): {e}"))?;
        w.tally.events += 1;
    }
    Ok(w.tally)
}

impl World {
    fn new(inp: &mut Input<'_>) -> Self {
        let rq_psn = Psn::new(inp.u32());
        let sq_psn = Psn::new(inp.u32());
        let credits = inp.bool();
        let pmtu = [256, 512, 1024, 2048, 4096][inp.pick(5)];
        let features = Features {
            credits,
            ..Features::ALL
        };
        let attrs = QpAttributes {
            pmtu,
            dest_qpn: Knowledge::Known(PEER_RC),
            ..QpAttributes::defaults()
        };
        let region = |r: Region, access| {
            MemoryRegion::with_contents(r.rkey, 1, r.va, access, vec![0; r.len as usize])
        };
        let rsp = ResponderState::new(QpType::Rc, attrs.clone(), features, rq_psn)
            .with_region(region(LOCAL, AccessFlags::ALL))
            .with_region(region(LOCAL_RO, AccessFlags::READ));
        let peer_rsp = ResponderState::new(
            QpType::Rc,
            QpAttributes {
                dest_qpn: Knowledge::Known(QPN_RC),
                ..attrs.clone()
            },
            Features::ALL,
            sq_psn,
        )
        .with_region(region(PEER, AccessFlags::ALL));
        let ud = ResponderState::new(
            QpType::Ud,
            QpAttributes {
                pmtu: 4096,
                q_key: Knowledge::Known(QKEY),
                ..QpAttributes::defaults()
            },
            features,
            Psn::new(0),
        );
        let req = RequesterState::new(RequesterAttrs {
            pmtu,
            sq_psn,
            timeout: 1 + inp.pick(12) as u8,
            retry_cnt: inp.pick(8) as u8,
            rnr_retry: inp.pick(8) as u8,
            max_rd_atomic: 1 + inp.pick(16) as u8,
            credits,
            dest_qpn: PEER_RC,
            own_qpn: QPN_RC,
            ..RequesterAttrs::default()
        });
        let cfg = MpConfig {
            pmtu,
            ..MpConfig::default()
        };
        let mp_rsp = MpResponder::new(cfg.clone(), PEER_MP, rq_psn)
            .with_region(MpRegion::known(
                MP_LOCAL.rkey,
                MP_LOCAL.va,
                &[0; MP_LOCAL.len as usize],
                MpAccess::ALL,
            ))
            .with_recv_queue(RecvQueue::Known(Vec::new()));
        let peer_recvs = (0..1024)
            .map(|i| MpRecvWr {
                wr: i,
                key: PEER.rkey,
                offset: 0,
                len: PEER.len,
            })
            .collect();
        let peer_mp = MpResponder::new(cfg.clone(), QPN_MP, sq_psn)
            .with_region(MpRegion::known(
                PEER.rkey,
                PEER.va,
                &[0; PEER.len as usize],
                MpAccess::ALL,
            ))
            .with_recv_queue(RecvQueue::Known(peer_recvs));
        let mp_req = MpRequester::new(cfg, PEER_MP, sq_psn);
        let mut qps = BTreeMap::new();
        let base = |qp_type, dest_qpn| LocalQp {
            dest_qpn,
            pmtu,
            features,
            ..LocalQp::base(qp_type)
        };
        qps.insert(QPN_RC, base(QpType::Rc, PEER_RC));
        qps.insert(
            QPN_MP,
            LocalQp {
                mp: Some(MpAdmission {
                    trim_dscp: None,
                    trimming: false,
                }),
                ..base(QpType::Rc, PEER_MP)
            },
        );
        qps.insert(
            QPN_UD,
            LocalQp {
                q_key: QKEY,
                pmtu: 4096,
                ..LocalQp::base(QpType::Ud)
            },
        );
        let dcqcn = DcqcnParams::defaults(LINE_RATE);
        let mut dev = Device::new(Receiver {
            vlan: false,
            mp: true,
            qps,
        });
        dev.dcqcn = Some(dcqcn);
        let dev = dev.enter_rts(QPN_RC, 0);
        World {
            now: 0,
            dev,
            rsp,
            req,
            ud,
            mp_rsp,
            mp_req,
            peer_rsp,
            peer_mp,
            dcqcn,
            to_peer: VecDeque::new(),
            from_peer: VecDeque::new(),
            done: BTreeMap::new(),
            posted: BTreeMap::new(),
            resp_events: Vec::new(),
            tally: Tally::default(),
        }
    }

    fn targets(&self) -> Vec<Target> {
        let rc_response = self.req.next_psn.sub(1);
        vec![
            Target {
                qpn: QPN_RC,
                family: Family::Rc,
                request_psn: self.rsp.epsn,
                response_psn: rc_response,
                pkey: 0xFFFF,
                qkey: QKEY,
                pmtu: self.rsp.attrs.pmtu,
                regions: vec![LOCAL, LOCAL_RO],
                msn: self.rsp.msn.get().map_or(0, |m| m.value()),
            },
            Target {
                qpn: QPN_MP,
                family: Family::Mp,
                request_psn: self.mp_rsp.received.highest().add(1),
                response_psn: self.mp_req.psn(self.mp_req.next_idx.saturating_sub(1)),
                pkey: 0xFFFF,
                qkey: QKEY,
                pmtu: self.mp_rsp.cfg.pmtu,
                regions: vec![MP_LOCAL],
                msn: self.mp_rsp.completed as u32,
            },
            Target {
                qpn: QPN_UD,
                family: Family::Ud,
                request_psn: Psn::new(0),
                response_psn: Psn::new(0),
                pkey: 0xFFFF,
                qkey: QKEY,
                pmtu: 4096,
                regions: Vec::new(),
                msn: 0,
            },
        ]
    }

    fn step(&mut self, event: Event, inp: &mut Input<'_>) -> Result<(), String> {
        match event {
            Event::Inject => {
                let wire = frame::frame(inp, &peer_side(), &self.targets());
                self.arrive(&wire)
            }
            Event::Tick => {
                let dt = match inp.pick(4) {
                    0 => 1_000,
                    1 => u64::from(inp.u16()) * 100,
                    2 => 4096u64 << self.req.attrs.timeout.min(20),
                    _ => u64::from(inp.u32()),
                };
                self.now = self.now.saturating_add(dt);
                self.tick()
            }
            Event::PostSend => {
                let wr = base_wr(inp);
                let prev = self.req.clone();
                let (req, out) = prev.clone().post_send(wr, self.now);
                self.req = req;
                self.posted_one(QPN_RC, false);
                self.requester_out(&prev, &out)
            }
            Event::PostRecv => {
                let id = self.posted_one(QPN_RC, true);
                let cap = [0, 1, 64, 4096, 1 << 20][inp.pick(5)];
                let wr = RecvWr {
                    writable: inp.pick(8) != 0,
                    ..RecvWr::new(id, cap)
                };
                self.rsp = self.rsp.post_recv(wr);
                let ud_id = self.posted_one(QPN_UD, true);
                self.ud = self.ud.post_recv(RecvWr::new(ud_id, 4096 + 40));
                Ok(())
            }
            Event::MpPostSend => {
                let id = self.posted_one(QPN_MP, false);
                let wr = MpSendWr {
                    wr: id,
                    op: mp_op(inp),
                    fence: inp.pick(4) == 0,
                    signaled: inp.bool(),
                };
                let (next, out) = self.mp_req.post_send(wr);
                self.mp_req = next;
                self.completions(QPN_MP, false, &out)
            }
            Event::MpPostRecv => {
                let id = self.posted_one(QPN_MP, true);
                let off = u64::from(inp.u16()) % MP_LOCAL.len;
                let wr = MpRecvWr {
                    wr: id,
                    key: MP_LOCAL.rkey,
                    offset: off,
                    len: (MP_LOCAL.len - off).min(u64::from(inp.u16())),
                };
                self.mp_rsp = self.mp_rsp.post_recv(wr).0;
                Ok(())
            }
            Event::MpTransmit => self.mp_transmit(inp),
            Event::PeerStep => self.peer_step(inp),
            Event::Deliver => {
                let Some(wire) = wire_take(&mut self.from_peer, inp) else {
                    return Ok(());
                };
                self.arrive(&wire)
            }
            Event::Sent => {
                let bytes = u64::from(inp.u16()) * 64;
                if let (Some(rp), Some(p)) = (self.dev.rps.get(&QPN_RC), &self.dev.dcqcn) {
                    let (rp, _) = rp.on_event(p, self.now, RpEvent::Sent(bytes));
                    self.dev.rps.insert(QPN_RC, rp);
                }
                self.check_rate()
            }
        }
    }

    /// The number the next work request of this queue gets.
    fn posted_one(&mut self, qpn: u32, recv: bool) -> u64 {
        let n = self.posted.entry((qpn, recv)).or_default();
        *n += 1;
        *n - 1
    }

    fn tick(&mut self) -> Result<(), String> {
        let now = self.now;
        let prev = self.req.clone();
        let (req, out) = prev.clone().on_timer(now);
        self.req = req;
        self.requester_out(&prev, &out)?;
        let (mp_req, out) = self.mp_req.on_timer(now);
        self.mp_req = mp_req;
        self.completions(QPN_MP, false, &out)?;
        let (mp_rsp, out) = self.mp_rsp.on_timer(now);
        self.mp_rsp = mp_rsp;
        self.completions(QPN_MP, true, &out)?;
        self.peer_mp = self.peer_mp.on_timer(now).0;
        if let (Some(rp), Some(p)) = (self.dev.rps.get(&QPN_RC), &self.dev.dcqcn) {
            let (rp, _) = rp.on_event(p, now, RpEvent::Tick);
            self.dev.rps.insert(QPN_RC, rp);
        }
        self.check_rate()
    }

    /// A frame reaches the device: admission, then the QP it names.
    fn arrive(&mut self, wire: &[u8]) -> Result<(), String> {
        let before = self.dev.receiver.qps.clone();
        let (dev, received) = self.dev.receive(wire, self.now);
        if dev.receiver.qps != before {
            return Err("MR-ROB-6: admission changed a QP's state".into());
        }
        self.dev = dev;
        self.check_rate()?;
        let Some(d) = received.delivery() else {
            return Ok(());
        };
        self.tally.judged += 1;
        let packet = d.packet;
        let arrival = ArrivalInfo {
            now_ns: self.now,
            ..d.arrival
        };
        let op = packet.bth.opcode;
        match d.qpn {
            QPN_RC if is_rc_response(op) => {
                let prev = self.req.clone();
                let (req, out) = prev.clone().on_response(&packet, self.now);
                self.req = req;
                self.requester_out(&prev, &out)
            }
            QPN_RC => self.responder_in(&packet),
            QPN_UD => {
                let (ud, out) = self.ud.on_request(&packet);
                self.ud = ud;
                self.completions(QPN_UD, true, &out)
            }
            QPN_MP
                if matches!(
                    op,
                    Opcode::MP_ACK | Opcode::MP_ATOMIC_ACK | Opcode::MP_READ_RESPONSE
                ) =>
            {
                let before = self.mp_req.cum_idx;
                let (next, out) = self.mp_req.on_ack(&packet, &arrival);
                self.mp_req = next;
                if self.mp_req.cum_idx < before {
                    return Err(format!(
                        "MR-MPA-10: MP cumulative ACK index moved back from {before} to {}",
                        self.mp_req.cum_idx
                    ));
                }
                self.completions(QPN_MP, false, &out)
            }
            QPN_MP => {
                let before = self.mp_rsp.completed;
                let (next, out) = self.mp_rsp.on_packet(&packet, &arrival);
                self.mp_rsp = next;
                if self.mp_rsp.completed < before {
                    return Err("MR-MPA-7: MP responder's completed messages went down".into());
                }
                self.completions(QPN_MP, true, &out)?;
                self.writes_inside(&out, &[MP_LOCAL])
            }
            _ => Ok(()),
        }
    }

    /// A request reaches the Base responder.
    fn responder_in(&mut self, packet: &RocePacket<'_>) -> Result<(), String> {
        let prev = self.rsp.clone();
        let (next, out) = prev.on_request(packet);
        if next.epsn.is_before(prev.epsn) {
            return Err(format!(
                "MR-RSP-1: expected PSN moved back from {} to {}",
                prev.epsn, next.epsn
            ));
        }
        if let (Some(a), Some(b)) = (prev.msn.get(), next.msn.get())
            && b.distance(a) > 1
        {
            return Err(format!(
                "MR-MSN-1: MSN jumped from {a} to {b} on one packet"
            ));
        }
        if next.epsn != prev.epsn && self.resp_events.len() < 4 * MAX_EVENTS {
            self.resp_events.push(ResponderEvent::Executed {
                first: prev.epsn,
                last: next.epsn.sub(1),
                read: packet.bth.opcode == Opcode::RC_READ_REQUEST,
            });
        }
        let duplicate = classify(prev.epsn, packet.bth.psn) == PsnClass::Duplicate;
        for spec in sends(&out) {
            if let (Field::Exact(psn), true) = (&spec.psn, is_positive(spec))
                && self.resp_events.len() < 4 * MAX_EVENTS
            {
                self.resp_events.push(ResponderEvent::Response {
                    psn: *psn,
                    duplicate,
                });
            }
        }
        let findings = judge_responses(&self.resp_events);
        if let Some(f) = findings.first() {
            return Err(format!(
                "{}: {} (the model's own responses)",
                f.id, f.message
            ));
        }
        self.rsp = next;
        self.completions(QPN_RC, true, &out)?;
        self.writes_inside(&out, &[LOCAL, LOCAL_RO])
    }

    /// The Base requester's outcome: its packets go on the wire to the peer.
    fn requester_out(&mut self, prev: &RequesterState, out: &Outcomes) -> Result<(), String> {
        let r = &self.req;
        if r.next_psn.distance(r.una) >= 1 << 23 {
            return Err(format!(
                "MR-PSN-4: {} PSNs outstanding (una {}, next {})",
                r.next_psn.distance(r.una),
                r.una,
                r.next_psn
            ));
        }
        if r.una.is_before(prev.una) {
            return Err(format!(
                "MR-PSN-4: una moved back from {} to {}",
                prev.una, r.una
            ));
        }
        self.completions(QPN_RC, false, out)?;
        let mut fill = Input::new(&[]);
        for spec in sends(out) {
            if let Some(wire) = spec_frame::build(spec, &mut fill, &local_side()) {
                wire_push(&mut self.to_peer, wire);
            }
        }
        Ok(())
    }

    /// The MP requester sends one of the packets it may send now.
    fn mp_transmit(&mut self, inp: &mut Input<'_>) -> Result<(), String> {
        let out = self.mp_req.next_packets(self.now);
        let specs: Vec<&PacketSpec> = sends(&out).chain(optional_sends(&out)).collect();
        let Some(spec) = specs.get(inp.pick(specs.len().max(1))) else {
            return Ok(());
        };
        let Some(wire) = spec_frame::build(spec, inp, &local_side()) else {
            return Ok(());
        };
        let frame = Frame::parse(&wire, &ParseOptions::default()).map_err(|e| {
            format!("a frame built from the MP requester's spec does not parse: {e}")
        })?;
        let Some(packet) = frame.roce else {
            return Err("a frame built from the MP requester's spec is not RoCE".into());
        };
        let (next, findings) =
            self.mp_req
                .on_transmit(&packet, frame.udp.map_or(0, |u| u.src_port), self.now);
        if let Some(f) = findings.first() {
            return Err(format!(
                "{}: a packet built to the MP requester's own spec is refused: {} ({spec:?})",
                f.id, f.message
            ));
        }
        self.mp_req = next;
        wire_push(&mut self.to_peer, wire);
        Ok(())
    }

    /// The peer takes the next frame sent to it and queues its answers.
    fn peer_step(&mut self, inp: &mut Input<'_>) -> Result<(), String> {
        let Some(wire) = wire_take(&mut self.to_peer, inp) else {
            return Ok(());
        };
        let Ok(frame) = Frame::parse(&wire, &ParseOptions::default()) else {
            return Ok(());
        };
        let Some(packet) = frame.roce else {
            return Ok(());
        };
        let out = if packet.bth.opcode.is_mp() {
            let arrival = ArrivalInfo {
                udp_src_port: frame.udp.map_or(0, |u| u.src_port),
                now_ns: self.now,
                ..ArrivalInfo::default()
            };
            let (next, out) = self.peer_mp.on_packet(&packet, &arrival);
            self.peer_mp = next;
            out
        } else {
            if self
                .peer_rsp
                .recv_queue
                .known()
                .is_some_and(|q| q.len() < 4)
            {
                let id = self
                    .peer_rsp
                    .recv_queue
                    .known()
                    .map_or(0, |q| q.len() as u64);
                self.peer_rsp = self.peer_rsp.post_recv(RecvWr::new(1 << 32 | id, 1 << 31));
            }
            let (next, out) = self.peer_rsp.on_request(&packet);
            self.peer_rsp = next;
            out
        };
        let chosen = choose_alternative(&out, inp);
        let optional: Vec<&PacketSpec> = optional_sends(chosen).filter(|_| inp.bool()).collect();
        for spec in sends(chosen).chain(optional) {
            if let Some(wire) = spec_frame::build(spec, inp, &peer_side()) {
                wire_push(&mut self.from_peer, wire);
            }
        }
        Ok(())
    }

    /// Completions in `out` for queue (`qpn`, `recv`): each once, each posted.
    fn completions(&mut self, qpn: u32, recv: bool, out: &Outcomes) -> Result<(), String> {
        let posted = self.posted.get(&(qpn, recv)).copied().unwrap_or(0);
        let done = self.done.entry((qpn, recv)).or_default();
        for c in &out.required {
            let Effect::Complete(spec) = &c.value else {
                continue;
            };
            let side = if recv { "receive" } else { "send" };
            if spec.wr >= posted {
                return Err(format!(
                    "MR-REQ-2: QP {qpn:#x} completes {side} work request {} of {posted} posted",
                    spec.wr
                ));
            }
            if spec.status == Field::Exact(metaroce_spec::model::WcStatus::Success) {
                self.tally.completed_ok += 1;
            }
            if !done.insert(spec.wr) {
                return Err(format!(
                    "MR-QP-6, MR-MPP-6: QP {qpn:#x} completes {side} work request {} twice ({:?})",
                    spec.wr, c.reqs
                ));
            }
        }
        Ok(())
    }

    /// "MR-SEC-4": every described memory write lies inside its region.
    fn writes_inside(&self, out: &Outcomes, regions: &[Region]) -> Result<(), String> {
        for c in out.required.iter().chain(&out.optional) {
            let Effect::Write { key, offset, bytes } = &c.value else {
                continue;
            };
            let Some(r) = regions.iter().find(|r| r.rkey == *key) else {
                continue; // a receive buffer's key: the model describes no placement there
            };
            if offset.saturating_add(bytes.len() as u64) > r.len {
                return Err(format!(
                    "MR-SEC-4: write of {} bytes at offset {offset} of the {}-byte region {key:#x}",
                    bytes.len(),
                    r.len
                ));
            }
        }
        Ok(())
    }

    /// "MR-DCQCN-3": the rate stays within [min rate, line rate].
    fn check_rate(&self) -> Result<(), String> {
        for (qpn, rp) in &self.dev.rps {
            if rp.rc > self.dcqcn.line_rate || rp.rc < self.dcqcn.min_rate.min(self.dcqcn.line_rate)
            {
                return Err(format!(
                    "MR-DCQCN-3: QP {qpn:#x} rate {} outside [{}, {}]",
                    rp.rc, self.dcqcn.min_rate, self.dcqcn.line_rate
                ));
            }
        }
        Ok(())
    }
}

/// Whether `op` is a Base RC response opcode (READ responses to Atomic ACK).
fn is_rc_response(op: Opcode) -> bool {
    op.is_rc_response()
}

/// A response that acknowledges (not a NAK, whose PSN is not an executed one).
fn is_positive(spec: &PacketSpec) -> bool {
    match spec.syndrome {
        None => true,
        Some(SyndromeSpec::AnyAck | SyndromeSpec::AckCredits { .. }) => true,
        Some(SyndromeSpec::Exact(s)) => s.0 <= 0x1F,
        Some(_) => false,
    }
}

fn sends(out: &Outcomes) -> impl Iterator<Item = &PacketSpec> {
    out.required.iter().filter_map(|c| match &c.value {
        Effect::Send(p) => Some(p),
        _ => None,
    })
}

fn optional_sends(out: &Outcomes) -> impl Iterator<Item = &PacketSpec> {
    out.optional.iter().filter_map(|c| match &c.value {
        Effect::Send(p) => Some(p),
        _ => None,
    })
}

/// The primary outcome set or one of its alternatives.
fn choose_alternative<'a>(out: &'a Outcomes, inp: &mut Input<'_>) -> &'a Outcomes {
    match inp.pick(4 + out.alternatives.len()) {
        n if n < 4 => out,
        n => &out.alternatives[n - 4],
    }
}

fn wire_push(wire: &mut VecDeque<Vec<u8>>, frame: Vec<u8>) {
    if wire.len() >= WIRE_CAP {
        wire.pop_front();
    }
    wire.push_back(frame);
}

/// The next frame off a wire: usually the oldest; sometimes lost, taken out
/// of order or duplicated.
fn wire_take(wire: &mut VecDeque<Vec<u8>>, inp: &mut Input<'_>) -> Option<Vec<u8>> {
    match inp.pick(16) {
        15 => {
            wire.pop_front();
            wire.pop_front()
        }
        14 => {
            let i = inp.pick(wire.len().max(1));
            wire.remove(i)
        }
        13 => wire.front().cloned(),
        _ => wire.pop_front(),
    }
}

/// A Base send work request from the input, mostly aimed at the peer's region.
fn base_wr(inp: &mut Input<'_>) -> WorkRequest {
    let (va, rkey) = if inp.pick(8) == 0 {
        (inp.u64(), inp.u32())
    } else {
        (PEER.va + u64::from(inp.u16()) % PEER.len, PEER.rkey)
    };
    let op = match inp.pick(10) {
        0 => WrOp::Send,
        1 => WrOp::SendImm { imm: inp.u32() },
        2 => WrOp::SendInv { rkey: inp.u32() },
        3 => WrOp::Write { va, rkey },
        4 => WrOp::WriteImm {
            va,
            rkey,
            imm: inp.u32(),
        },
        5 | 6 => WrOp::Read { va, rkey },
        7 => WrOp::CmpSwap {
            va: va & !7,
            rkey,
            compare: inp.u64(),
            swap: inp.u64(),
        },
        8 => WrOp::FetchAdd {
            va: va & !7,
            rkey,
            add: inp.u64(),
        },
        _ => WrOp::Flush {
            va,
            rkey,
            selectivity: inp.u8() & 1,
            placement: 1 + (inp.u8() & 1),
        },
    };
    let len = match inp.pick(4) {
        0 => 0,
        1 => u64::from(inp.u16()) % 8192,
        _ => 1 + u64::from(inp.u8()),
    };
    let mut wr = WorkRequest::new(op, len);
    wr.signaled = inp.bool();
    wr.fence = inp.pick(4) == 0;
    wr.solicited = inp.bool();
    wr
}

/// An MP send operation from the input, aimed at the peer's region.
fn mp_op(inp: &mut Input<'_>) -> MpWrOp {
    let va = PEER.va + u64::from(inp.u16()) % PEER.len;
    let len = match inp.pick(4) {
        0 => 0,
        1 => u32::from(inp.u16()) % 8192,
        _ => 1 + u32::from(inp.u8()),
    };
    let rkey = PEER.rkey;
    match inp.pick(6) {
        0 => MpWrOp::Send {
            len,
            imm: inp.bool().then(|| inp.u32()),
            invalidate: None,
        },
        1 => MpWrOp::Write {
            va,
            rkey,
            len,
            imm: inp.bool().then(|| inp.u32()),
        },
        2 | 3 => MpWrOp::Read { va, rkey, len },
        4 => MpWrOp::CmpSwap {
            va: va & !7,
            rkey,
            compare: inp.u64(),
            swap: inp.u64(),
        },
        _ => MpWrOp::FetchAdd {
            va: va & !7,
            rkey,
            add: inp.u64(),
        },
    }
}
