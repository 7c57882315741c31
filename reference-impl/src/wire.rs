//! Emitting frames: every byte goes through the codec's `PacketBuilder`
//! (encapsulation of SPEC §3, PadCnt and zero pad of MR-PKT-4, ICRC of §5).

use core::net::Ipv4Addr;
use metaroce_codec::{ExtHeaders, Opcode, PacketBuilder};

/// ECN code point ECT(0).
pub(crate) const ECN_ECT0: u8 = 0b10;
/// ECN code point CE.
pub(crate) const ECN_CE: u8 = 0b11;

/// Where a QP's packets go: addresses, ports and header constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Path {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// Constant per QP (MR-ENC-12, MR-ENC-13).
    pub udp_src_port: u16,
    /// DSCP in the upper six bits (MR-ENC-19).
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub pkey: u16,
    pub dest_qp: u32,
}

/// One packet to emit, before encapsulation.
#[derive(Clone, Debug)]
pub(crate) struct Out {
    pub opcode: Opcode,
    pub psn: u32,
    pub ack_req: bool,
    pub se: bool,
    pub ext: ExtHeaders,
    pub payload: Vec<u8>,
    /// Mark ECT(0) (requests and READ responses, MR-ENC-20).
    pub ect: bool,
}

impl Out {
    /// A packet with no extension headers, flags or payload.
    pub(crate) fn new(opcode: Opcode, psn: u32) -> Self {
        Out {
            opcode,
            psn,
            ack_req: false,
            se: false,
            ext: ExtHeaders::default(),
            payload: Vec::new(),
            ect: false,
        }
    }
}

impl Path {
    /// Encapsulates `out` (MR-ENC-1/4/6/7/11/16/21, MR-BTH-2/4, MR-ICRC-1/2).
    pub(crate) fn build(&self, mut out: Out) -> Vec<u8> {
        let payload = core::mem::take(&mut out.payload);
        self.builder(&out).payload(payload).build()
    }

    /// [`Self::build`] with a payload of `len` bytes that `fill` appends
    /// straight into the frame (`out.payload` is ignored): one copy from a
    /// memory region to the frame, no intermediate buffer.
    pub(crate) fn build_filled<E>(
        &self,
        out: &Out,
        len: usize,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        self.builder(out).build_filled(len, fill)
    }

    /// The codec's builder for `out`'s headers (no payload).
    fn builder(&self, out: &Out) -> PacketBuilder {
        let ecn = if out.ect { ECN_ECT0 } else { 0 };
        let (pkey, dest_qp, psn, ack_req, se) =
            (self.pkey, self.dest_qp, out.psn, out.ack_req, out.se);
        let ext = out.ext;
        PacketBuilder::new(out.opcode)
            .macs(self.src_mac, self.dst_mac)
            .ipv4(self.src_ip, self.dst_ip)
            .traffic_class((self.traffic_class & 0xFC) | ecn)
            .hop_limit(self.hop_limit)
            .udp_src_port(self.udp_src_port)
            .bth(|b| {
                b.pkey = pkey;
                b.dest_qp = dest_qp & 0x00FF_FFFF;
                b.psn = metaroce_codec::Psn::new(psn);
                b.ack_req = ack_req;
                b.se = se;
            })
            .ext(|e| *e = ext)
    }
}
