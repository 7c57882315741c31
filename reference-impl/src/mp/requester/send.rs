//! MP request packets (SPEC §7.3): packetization with MPETH on every
//! packet, spraying (§7.4), and the order and limits of transmission:
//! probes, then retransmissions, READ re-requests and new packets, each
//! within cwnd (MR-MPC-1) and the receive window (MR-MPW-2).

use super::{MpRequester, MpWqe};
use crate::cq::WcStatus;
use crate::mp::loss::{Unit, UnitState};
use crate::mr::PdHandle;
use crate::qp_config::{Env, QpConfig};
use crate::wire::{Out, Path};
use crate::wr::{RemoteAddr, Sge, WrOp};
use metaroce_codec::ext::{AtomicEthRepr, IethRepr, ImmDtRepr, MpethRepr, RethRepr};
use metaroce_codec::{Msn, Opcode};

impl MpRequester {
    /// The next request packet, if one may leave now.
    pub(crate) fn poll_transmit(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> Option<Vec<u8>> {
        let mut path = cfg.path()?;
        if let Some(v) = self.probe_now.pop_front() {
            // MR-MPA-12: a probe carries the ACK DSCP.
            self.dscps.control(&mut path);
            return Some(self.probe(path, v, env.now));
        }
        // MR-MPT-9: never the trimming DSCP.
        self.dscps.data(&mut path);
        // MR-MPP-18: during an RNR wait no new message (nor the refused
        // one) leaves; retransmissions and READ re-requests of other
        // messages continue.
        let refused = self.rnr_until.and(self.rnr_msn);
        // `in_flight` is kept up to date where units change; the O(units)
        // sum is only a check in debug builds.
        debug_assert_eq!(self.in_flight, self.flight(), "in_flight drifted");
        let retx = self.retransmit(cfg, path, env, refused);
        if let Some(Some(frame)) = retx {
            return Some(frame);
        }
        if env.enter_err {
            return None;
        }
        // A re-request adds no bytes in flight: it goes even when cwnd
        // holds back a retransmission.
        if let Some(frame) = self.rerequest(path, env) {
            return Some(frame);
        }
        if retx.is_some() || self.rnr_until.is_some() {
            return None; // retransmissions first; MR-MPP-18
        }
        // Further parts of READs already executing come before new
        // messages (MR-MPR-11).
        // zoo: mp-cwnd-ignored
        if let Some(frame) = self.next_part(zoo!(cfg.mutant, MpCwndIgnored), path, env) {
            return Some(frame);
        }
        self.fresh_packet(cfg, path, env)
    }

    /// MR-MPF-4: an MP Probe on `v`.
    fn probe(&mut self, mut path: Path, v: u16, now: u64) -> Vec<u8> {
        let last = self.origin.add((self.sent_end as u32).wrapping_sub(1));
        let mut out = Out::new(Opcode::MP_PROBE, last.value());
        out.ext.mpeth = Some(MpethRepr {
            timestamp: now as u32,
            ..MpethRepr::default()
        });
        out.ack_req = true; // MR-MPH-9
        path.udp_src_port = v;
        path.build(out)
    }

    /// The lowest lost PSN, if cwnd allows (MR-MPL-3, MR-MPL-5, MR-MPT-6),
    /// other than those of message `skip` (waiting out an RNR NAK).
    /// `Some(None)` means "stop here" (a local error or cwnd full).
    fn retransmit(
        &mut self,
        cfg: &QpConfig,
        mut path: Path,
        env: &mut Env<'_>,
        skip: Option<u64>,
    ) -> Option<Option<Vec<u8>>> {
        while let Some(&key) = self
            .retx
            .iter()
            .find(|&&k| skip.is_none_or(|m| self.units.get(k).is_none_or(|u| u.msn != m)))
        {
            let Some(u) = self.units.get(key).copied() else {
                self.retx.remove(&key);
                continue;
            };
            let Some(i) = self.wqe_at(key) else {
                self.retx.remove(&key);
                self.units.remove(key);
                continue;
            };
            // MR-MPC-1, with one liveness exception: the oldest outstanding
            // PSN may always be resent, since READ response bytes counted in
            // flight can wait for it (a READ executes after it is placed).
            let oldest = self.units.first_key() == Some(key);
            if !oldest && !self.cc.allows(self.in_flight, u.bytes) {
                return Some(None);
            }
            self.retx.remove(&key);
            let k = (key - self.sq[i].first) as u32;
            let (out, gather) = match packet(&self.sq[i], k, self.pmtu, true, cfg, env) {
                Ok((out, _, gather)) => (out, gather),
                Err(status) => {
                    self.fail_at(cfg, env, Some(key), status);
                    return Some(None);
                }
            };
            // MR-MPS-7: another eligible value than the lost copy's.
            let v = self.entropy.next(env.now, Some(u.entropy));
            let seq = self.next_seq();
            if self.sq[i].is_read() {
                let w = &mut self.sq[i];
                w.asked.fill(env.now as u32);
                w.activity = env.now;
            }
            if let Some(u) = self.units.get_mut(key) {
                u.tx_time = env.now;
                u.tx_seq = seq;
                u.entropy = v;
                u.state = UnitState::InFlight;
                u.sends += 1;
                u.lost_by = None;
                self.in_flight += u.bytes;
            }
            self.by_tx.insert(seq, key);
            self.prune_tx();
            env.counters.retransmitted_packets += 1;
            if let Some(rule) = u.lost_by {
                rule.count(env.counters);
            }
            path.udp_src_port = v;
            return Some(Some(stamp(
                path,
                out,
                gather.map(|(o, l)| (cfg.pd, &self.sq[i].wr.sg_list[..], o, l)),
                env,
            )));
        }
        None
    }

    /// A pending READ re-request (MR-MPR-7).
    fn rerequest(&mut self, mut path: Path, env: &mut Env<'_>) -> Option<Vec<u8>> {
        let i = (0..self.started).find(|&i| !self.sq[i].rereq.is_empty())?;
        let p = u64::from(self.pmtu);
        let w = &mut self.sq[i];
        let WrOp::Read(remote) = w.wr.op else {
            w.rereq.clear();
            return None;
        };
        let &(from, count, rule) = w.rereq.front()?;
        let offset = u64::from(from) * p;
        let len = (u64::from(from + count) * p).min(w.len) - offset;
        w.rereq.pop_front();
        w.activity = env.now;
        let psn = self.origin.add((w.first + u64::from(from)) as u32).value();
        let out = read_request(w, remote, psn, offset, len, true);
        env.counters.retransmitted_packets += 1;
        rule.count(env.counters);
        path.udp_src_port = self.entropy.next(env.now, None);
        Some(stamp(path, out, None, env))
    }

    /// The bytes the next request of READ `w` (its first request or a
    /// further part) asks for now, if one may leave (MR-MPR-11, §7.12): at
    /// most max(PMTU, cwnd rounded down to a multiple of PMTU), a multiple
    /// of PMTU unless it reaches the end of the read, and costing that many
    /// bytes in flight (MR-MPC-1): it waits until the whole bound fits
    /// (asking for less when only part of it fits is allowed too, but
    /// changed the simulator's READ-heavy rows more: see the commit).
    /// `ignore_cwnd`: the bug-zoo mutant that ignores cwnd.
    fn next_ask(&self, w: &MpWqe, ignore_cwnd: bool) -> Option<u64> {
        let p = u64::from(self.pmtu);
        let rest = w.len - w.asked_to.min(w.len);
        let cwnd = self.cc.cwnd;
        let bound = (cwnd / p * p).max(p);
        if self.in_flight == 0 || ignore_cwnd {
            return Some(rest.min(bound));
        }
        let ask = rest.min(bound);
        self.cc.allows(self.in_flight, ask).then_some(ask)
    }

    /// A further part of an executing READ (MR-MPR-11): an MP READ Request
    /// with R clear, offset the first byte not yet requested, the whole
    /// read length, the original VA and R_Key, and BTH PSN the READ's first
    /// PSN plus offset / PMTU. It costs its bytes in flight (§7.12).
    fn next_part(
        &mut self,
        ignore_cwnd: bool,
        mut path: Path,
        env: &mut Env<'_>,
    ) -> Option<Vec<u8>> {
        let i = (0..self.started).find(|&i| {
            let w = &self.sq[i];
            w.is_read() && !w.done && w.executed && w.asked_to < w.len
        })?;
        let len = self.next_ask(&self.sq[i], ignore_cwnd)?;
        let p = u64::from(self.pmtu);
        let w = &mut self.sq[i];
        let WrOp::Read(remote) = w.wr.op else {
            return None;
        };
        let offset = w.asked_to;
        let psn = self.origin.add((w.first + offset / p) as u32).value();
        let out = read_request(w, remote, psn, offset, len, false);
        let (from, to) = ((offset / p) as usize, (offset + len).div_ceil(p) as usize);
        for a in &mut w.asked[from..to.min(w.got.len())] {
            *a = env.now as u32;
        }
        w.activity = env.now;
        w.asked_to = offset + len;
        self.in_flight += len;
        path.udp_src_port = self.entropy.next(env.now, None);
        Some(stamp(path, out, None, env))
    }

    fn next_seq(&mut self) -> u64 {
        self.tx_seq += 1;
        self.tx_seq
    }

    /// The next first transmission.
    fn fresh_packet(
        &mut self,
        cfg: &QpConfig,
        mut path: Path,
        env: &mut Env<'_>,
    ) -> Option<Vec<u8>> {
        loop {
            if self.fresh >= self.started {
                if !self.try_start(cfg, env) {
                    return None;
                }
                continue;
            }
            let i = self.fresh;
            let w = &self.sq[i];
            let k = self.fresh_pkt;
            let rd = w.wr.op.is_rd_atomic();
            let units = if rd { 1 } else { w.npsn };
            if k >= units {
                self.fresh += 1;
                self.fresh_pkt = 0;
                continue;
            }
            let idx = w.first + u64::from(k);
            let span = if rd { w.npsn } else { 1 };
            // MR-MPW-2: no PSN beyond c + W.
            if idx + u64::from(span) > self.cum_next + u64::from(self.window) {
                return None;
            }
            let bytes = request_bytes(w, k, self.pmtu);
            // §7.12: a READ request costs the bytes it asks for: the whole
            // read, or a first part when the read is longer than cwnd
            // allows (MR-MPR-11).
            // zoo: mp-cwnd-ignored
            let ignore_cwnd = zoo!(cfg.mutant, MpCwndIgnored);
            let flight = if w.is_read() {
                let Some(ask) = self.next_ask(w, ignore_cwnd) else {
                    return None; // MR-MPC-1
                };
                ask
            } else {
                bytes
            };
            if !self.cc.allows(self.in_flight, flight) && !ignore_cwnd {
                return None; // MR-MPC-1
            }
            if w.is_read() {
                let w = &mut self.sq[i];
                w.first_len = flight;
                w.asked_to = flight;
            }
            let w = &self.sq[i];
            // Built (payload gathered) only once cwnd lets it leave: a
            // cwnd-limited poll no longer copies a payload only to drop it.
            let (out, gather) = match packet(w, k, self.pmtu, false, cfg, env) {
                Ok((out, _, gather)) => (out, gather),
                Err(status) => {
                    let first = w.first;
                    self.fail_at(cfg, env, Some(first), status);
                    return None;
                }
            };
            let (msn, atomic, is_read) = (w.msn, w.wr.op.is_atomic(), w.is_read());
            if is_read {
                let w = &mut self.sq[i];
                w.activity = env.now;
                w.asked.fill(env.now as u32);
            }
            self.fresh_pkt += 1;
            let v = self.entropy.next(env.now, None);
            let seq = self.next_seq();
            self.units.insert(
                idx,
                Unit {
                    msn,
                    span,
                    bytes,
                    tx_time: env.now,
                    tx_seq: seq,
                    entropy: v,
                    state: UnitState::InFlight,
                    sends: 1,
                    atomic,
                    psn_acked: false,
                    lost_by: None,
                },
            );
            self.by_tx.insert(seq, idx);
            // READ responses requested count in flight (§7.12).
            self.in_flight += flight;
            self.sent_end = self.sent_end.max(idx + u64::from(span));
            path.udp_src_port = v;
            return Some(stamp(
                path,
                out,
                gather.map(|(o, l)| (cfg.pd, &self.sq[i].wr.sg_list[..], o, l)),
                env,
            ));
        }
    }

    /// Starts the next WQE if allowed: MSN and PSNs (MR-MPH-3, MR-MPH-10).
    fn try_start(&mut self, cfg: &QpConfig, env: &mut Env<'_>) -> bool {
        let index = self.started;
        let Some(w) = self.sq.get(index) else {
            return false;
        };
        if w.error.is_some() {
            return false;
        }
        // MR-MPP-11: a fenced request waits for every earlier one, or,
        // toward a peer that honours O and with no earlier READ or atomic
        // whose data it might carry, goes now with O (MR-MPP-21).
        let ordered = w.wr.fence
            && self.peer_ordered
            && !self.sq.iter().take(index).any(|e| e.wr.op.is_rd_atomic());
        if w.wr.fence && index > 0 && !ordered {
            return false;
        }
        let rd = w.wr.op.is_rd_atomic();
        if rd && self.rd_outstanding >= cfg.max_rd_atomic {
            return false;
        }
        let local = if w.len > cfg.max_msg_size {
            Err(WcStatus::LocLenErr)
        } else {
            let scatter = w.is_read() || w.wr.op.is_atomic();
            env.mem
                .check_local(cfg.pd, &w.wr.sg_list, scatter)
                .map_err(|_| WcStatus::LocProtErr)
        };
        let pmtu = u64::from(self.pmtu);
        let (next_psn, next_msn) = (self.next_psn, self.next_msn);
        let Some(w) = self.sq.get_mut(index) else {
            return false;
        };
        if let Err(status) = local {
            w.error = Some(status);
            self.complete_front(cfg, env);
            return !env.enter_err;
        }
        w.msn = next_msn;
        w.first = next_psn;
        w.npsn = if w.wr.op.is_atomic() {
            1
        } else {
            w.len.div_ceil(pmtu).max(1) as u32
        };
        if w.is_read() {
            w.got = vec![false; w.npsn as usize];
            w.later = vec![0; w.npsn as usize];
            w.asked = vec![0; w.npsn as usize];
        }
        w.started = true;
        w.ordered = ordered;
        self.next_psn += u64::from(w.npsn);
        self.next_msn += 1;
        self.started += 1;
        if rd {
            self.rd_outstanding += 1;
        }
        if self.fresh == index {
            self.fresh_pkt = 0;
        }
        true
    }
}

/// A payload's place in a WQE's gather list: offset and length.
type Span = (u64, usize);

/// Writes the transmit timestamp (MR-MPH-5) and encapsulates; `gather`
/// (PD, gather list, offset, length) is the payload, copied from memory
/// straight into the frame.
fn stamp(
    path: Path,
    mut out: Out,
    gather: Option<(PdHandle, &[Sge], u64, usize)>,
    env: &Env<'_>,
) -> Vec<u8> {
    if let Some(m) = out.ext.mpeth.as_mut() {
        m.timestamp = env.now as u32;
    }
    match gather {
        None => path.build(out),
        // `packet` checked these bytes against the same memory in this
        // poll (nothing changes it in between), so the gather cannot fail.
        // Debug builds (every test) assert it; a release build would send a
        // zero-filled payload rather than panic on a broken invariant.
        Some((pd, sges, offset, len)) => path
            .build_filled(&out, len, |buf| {
                env.mem.gather_into(pd, sges, offset, len, buf)
            })
            .unwrap_or_else(|e| {
                debug_assert!(false, "gather of a checked payload failed: {e:?}");
                let zeros = |_: &mut Vec<u8>| Ok::<(), ()>(());
                path.build_filled(&out, len, zeros).unwrap_or_default()
            }),
    }
}

/// The payload bytes request packet `k` of `w` carries, as [`packet`]
/// counts them for cwnd: 8 for an atomic, 0 for a READ request, else
/// min(P, L − k × P) (MR-MPH-10).
pub(super) fn request_bytes(w: &MpWqe, k: u32, pmtu: u32) -> u64 {
    match w.wr.op {
        WrOp::Read(_) => 0,
        WrOp::CompareSwap { .. } | WrOp::FetchAdd { .. } => 8,
        _ => {
            let offset = u64::from(k) * u64::from(pmtu);
            (w.len - offset.min(w.len)).min(u64::from(pmtu))
        }
    }
}

/// Request packet `k` of `w` (k = 0 for READ and atomics) and its payload
/// bytes for cwnd. `retx` sets R and AckReq (MR-MPL-7).
pub(super) fn packet(
    w: &MpWqe,
    k: u32,
    pmtu: u32,
    retx: bool,
    cfg: &QpConfig,
    env: &Env<'_>,
) -> Result<(Out, u64, Option<Span>), WcStatus> {
    let p = u64::from(pmtu);
    let psn = metaroce_codec::Psn::new(cfg.sq_psn)
        .add((w.first + u64::from(k)) as u32)
        .value();
    let mut mpeth = MpethRepr {
        first: true,
        last: true,
        retransmission: retx,
        ordered: w.ordered,
        msn: Msn::new(w.msn as u32),
        offset: 0,
        msg_len: w.len as u32,
        ..MpethRepr::default()
    };
    let atomic = |opcode: Opcode, va: u64, rkey: u32, swap_add: u64, compare: u64| {
        // MR-MPH-13.
        let mut out = Out::new(opcode, psn);
        out.ext.mpeth = Some(mpeth);
        out.ext.atomic_eth = Some(AtomicEthRepr {
            va,
            rkey,
            swap_add,
            compare,
        });
        out.ack_req = true;
        out.ect = true;
        (out, 8)
    };
    let mut gather = None;
    let r = match w.wr.op {
        WrOp::Read(remote) => {
            // MR-MPH-12: the whole read (L set) or a first part of a
            // multiple of PMTU (L clear, MR-MPR-11).
            mpeth.last = w.first_len == w.len;
            let mut out = Out::new(Opcode::MP_READ_REQUEST, psn);
            out.ext.mpeth = Some(mpeth);
            out.ext.reth = Some(RethRepr {
                va: remote.va,
                rkey: remote.rkey,
                dma_len: w.first_len as u32,
            });
            out.ack_req = true;
            out.ect = true;
            (out, 0)
        }
        WrOp::CompareSwap {
            remote,
            compare,
            swap,
        } => atomic(Opcode::MP_CMP_SWAP, remote.va, remote.rkey, swap, compare),
        WrOp::FetchAdd { remote, add } => {
            atomic(Opcode::MP_FETCH_ADD, remote.va, remote.rkey, add, 0)
        }
        op => {
            // §7.3, MR-MPH-10: offset k × P, min(P, L − k × P) bytes.
            let offset = u64::from(k) * p;
            let len = (w.len - offset.min(w.len)).min(p);
            mpeth.first = k == 0; // MR-MPH-2
            mpeth.last = offset + len == w.len;
            mpeth.offset = offset as u32;
            let opcode = match op {
                WrOp::SendImm(_) => Opcode::MP_SEND_IMM,
                WrOp::SendInv(_) => Opcode::MP_SEND_INV,
                WrOp::Write(_) => Opcode::MP_WRITE,
                WrOp::WriteImm(..) => Opcode::MP_WRITE_IMM,
                _ => Opcode::MP_SEND,
            };
            let mut out = Out::new(opcode, psn);
            out.ext.mpeth = Some(mpeth);
            // MR-MPH-4, MR-MPH-11: the same RETH / ImmDt / IETH everywhere.
            match op {
                WrOp::Write(r) | WrOp::WriteImm(r, _) => {
                    out.ext.reth = Some(RethRepr {
                        va: r.va,
                        rkey: r.rkey,
                        dma_len: w.len as u32,
                    });
                }
                _ => {}
            }
            match op {
                WrOp::SendImm(i) | WrOp::WriteImm(_, i) => {
                    out.ext.immdt = Some(ImmDtRepr { value: i });
                }
                WrOp::SendInv(rkey) => out.ext.ieth = Some(IethRepr { rkey }),
                _ => {}
            }
            out.ack_req = mpeth.last || retx; // MR-MPH-9
            out.se = mpeth.last && w.wr.solicited && !matches!(op, WrOp::Write(_));
            out.ect = true;
            // Checked here, copied into the frame by `stamp`.
            env.mem
                .check_gather(cfg.pd, &w.wr.sg_list, offset, len as usize)
                .map_err(|_| WcStatus::LocProtErr)?;
            gather = Some((offset, len as usize));
            (out, len)
        }
    };
    let (mut out, bytes) = r;
    if retx {
        out.ack_req = true;
    }
    Ok((out, bytes, gather))
}

/// An MP READ Request of READ `w` that asks for [`offset`, `offset` +
/// `len`) at `psn`, the READ's first PSN plus offset / PMTU: a re-request
/// (R set, MR-MPR-7) or a further part (R clear, MR-MPR-11). F and L by the
/// range (MR-MPH-2), the work request's O in every request of an ordered
/// READ (MR-MPP-21), the original VA and R_Key, AckReq.
fn read_request(
    w: &MpWqe,
    remote: RemoteAddr,
    psn: u32,
    offset: u64,
    len: u64,
    retransmission: bool,
) -> Out {
    let mut out = Out::new(Opcode::MP_READ_REQUEST, psn);
    out.ext.mpeth = Some(MpethRepr {
        first: offset == 0,
        last: offset + len == w.len,
        retransmission,
        ordered: w.ordered,
        msn: Msn::new(w.msn as u32),
        offset: offset as u32,
        msg_len: w.len as u32,
        ..MpethRepr::default()
    });
    out.ext.reth = Some(RethRepr {
        va: remote.va,
        rkey: remote.rkey,
        dma_len: len as u32,
    });
    out.ack_req = true;
    out.ect = true;
    out
}
