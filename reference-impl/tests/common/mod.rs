//! Shared set-up: devices, a connected RC pair, frame shuttling.
#![allow(dead_code)]

use core::net::Ipv4Addr;
use metaroce_ref::sim::{Impairments, Network};
use metaroce_ref::*;

pub mod mixed;

pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn device(mac: [u8; 6], ip: Ipv4Addr, seed: u8) -> Device {
    Device::new(DeviceConfig::new(mac, ip), [seed; 32])
}

/// One side of a connection.
#[derive(Clone, Copy, Debug)]
pub struct End {
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub qpn: u32,
    pub psn: u32,
}

pub fn create_rc(dev: &mut Device, psn: u32) -> End {
    let pd = dev.alloc_pd();
    let cq = dev.create_cq();
    let qpn = dev
        .create_qp(QpInit {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            sq_sig_all: false,
        })
        .unwrap();
    End { pd, cq, qpn, psn }
}

/// Connection parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub pmtu: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub access: Access,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            pmtu: 1024,
            timeout: 6,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            access: Access::ALL,
        }
    }
}

/// The RTR attributes of a QP connected to `peer` (Base or MP alike).
pub fn rtr_attrs(peer: End, peer_ip: Ipv4Addr, peer_mac: [u8; 6], p: Params) -> QpAttrs {
    QpAttrs {
        dest_qpn: Some(peer.qpn),
        rq_psn: Some(peer.psn),
        pmtu: Some(p.pmtu),
        path: Some(AddressVector {
            dest_ip: peer_ip,
            dest_mac: peer_mac,
            traffic_class: 0,
            hop_limit: 64,
        }),
        max_dest_rd_atomic: Some(16),
        min_rnr_timer: Some(p.min_rnr_timer),
        ..Default::default()
    }
}

/// RESET → INIT with `p`'s access flags.
fn to_init(dev: &mut Device, me: End, p: Params) {
    dev.modify_qp(
        me.qpn,
        QpState::Init,
        &QpAttrs {
            access: Some(p.access),
            ..Default::default()
        },
    )
    .unwrap();
}

/// RTR → RTS with `p`'s timers and retry counts.
pub fn to_rts(dev: &mut Device, me: End, p: Params) {
    dev.modify_qp(
        me.qpn,
        QpState::Rts,
        &QpAttrs {
            sq_psn: Some(me.psn),
            timeout: Some(p.timeout),
            retry_cnt: Some(p.retry_cnt),
            rnr_retry: Some(p.rnr_retry),
            max_rd_atomic: Some(16),
            ..Default::default()
        },
    )
    .unwrap();
}

/// RESET → INIT → RTR → RTS, connected to `peer`.
pub fn connect(
    dev: &mut Device,
    me: End,
    peer: End,
    peer_ip: Ipv4Addr,
    peer_mac: [u8; 6],
    p: Params,
) {
    to_init(dev, me, p);
    dev.modify_qp(me.qpn, QpState::Rtr, &rtr_attrs(peer, peer_ip, peer_mac, p))
        .unwrap();
    to_rts(dev, me, p);
}

/// The address and key of all of `m` for a remote operation.
pub fn remote(m: &MrInfo) -> RemoteAddr {
    RemoteAddr {
        va: m.addr,
        rkey: m.rkey,
    }
}

/// (work request ID, status) of each completion, in order.
pub fn ids_and_statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// Two devices with a connected RC pair; A's PSNs start near the wrap.
pub struct Pair {
    pub a: Device,
    pub b: Device,
    pub ea: End,
    pub eb: End,
}

pub fn pair(p: Params) -> Pair {
    let mut a = device(MAC_A, IP_A, 1);
    let mut b = device(MAC_B, IP_B, 2);
    let ea = create_rc(&mut a, 0xFF_FFF0);
    let eb = create_rc(&mut b, 0x12_3456);
    connect(&mut a, ea, eb, IP_B, MAC_B, p);
    connect(&mut b, eb, ea, IP_A, MAC_A, p);
    Pair { a, b, ea, eb }
}

/// Every frame `from` has queued.
pub fn drain(dev: &mut Device) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| dev.poll_transmit()).collect()
}

/// Moves frames both ways until both are quiet; returns frames moved.
pub fn shuttle(a: &mut Device, b: &mut Device, now: u64) -> usize {
    let mut moved = 0;
    loop {
        let ab = drain(a);
        let ba = drain(b);
        if ab.is_empty() && ba.is_empty() {
            return moved;
        }
        moved += ab.len() + ba.len();
        for f in ab {
            b.handle_frame(now, &f);
        }
        for f in ba {
            a.handle_frame(now, &f);
        }
    }
}

/// A network with the pair of `pair()` on one link pair.
pub fn network(p: Params, imp: Impairments, seed: u64) -> (Network, End, End) {
    let Pair { a, b, ea, eb } = pair(p);
    let mut net = Network::new();
    let ia = net.add(a);
    let ib = net.add(b);
    net.connect(ia, ib, imp, seed);
    (net, ea, eb)
}

/// INIT → RTR with MP attributes → RTS.
pub fn connect_mp(
    dev: &mut Device,
    me: End,
    peer: End,
    peer_ip: Ipv4Addr,
    peer_mac: [u8; 6],
    p: Params,
    mp: &MpAttrs,
) {
    to_init(dev, me, p);
    dev.modify_qp_mp(me.qpn, &rtr_attrs(peer, peer_ip, peer_mac, p), mp)
        .unwrap();
    assert!(dev.is_mp(me.qpn).unwrap());
    to_rts(dev, me, p);
}

/// The values `MpEntropy::Seeded` derives (splitmix64, as the crate does).
pub fn seeded_values(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = metaroce_agent::rng::SplitMix64::new(seed);
    let mut out: Vec<u16> = Vec::new();
    while out.len() < n {
        let z = rng.next_u64();
        let v = 0xC000 | (z as u16 & 0x3FFF);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// `MR_SIM_SEED`: an offset added to every simulator scenario's seed, to run
/// the scenario checks on other random draws (0 when unset; the pinned
/// snapshots are those of offset 0).
pub fn seed_offset() -> u64 {
    std::env::var("MR_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
