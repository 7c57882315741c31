//! Static per-packet validators: what a passive observer can judge from one
//! packet alone.
//!
//! Each check judges an obligation of the packet's **sender** that SPEC.md
//! states and that is visible in a single packet: the encapsulation (§3), BTH
//! (§4.1), extension headers (§4.2), opcodes (§4.3), ICRC (§5), packetization
//! as far as one packet shows it (§6.5, §7.3), the CNP format (§6.17) and the
//! per-packet rules of the MP headers (§7.2–7.4). A receiver's obligations
//! (drop, NAK, completion) need the conversation and are judged elsewhere.
//!
//! Every finding names the requirement it breaks; where two requirements say
//! the same thing about one field, the more specific one is reported (for
//! example CNP-3 rather than PKT-5 for the PadCnt of a CNP), so one wrong
//! field gives one finding.
//!
//! The frame must have been parsed with [`Context::parse_options`], so that
//! the RoCE ports and the opcode dialect agree with the context.

mod bth;
mod cnp;
mod decode_error;
pub(crate) mod encap;
mod ext;
mod icrc;
mod mp;
mod opcode;
mod packet;

pub use decode_error::{validate_decode_error, validate_undecodable};

use crate::{Finding, Profile};
use metaroce_codec::opcode::Layout;
use metaroce_codec::udp::ROCEV2_PORT;
use metaroce_codec::{Dialect, Frame, IcrcStatus, Opcode, ParseOptions, RocePacket};

/// The five path MTU values (SPEC.md §3.7), in bytes.
pub const PMTU_VALUES: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// The largest PMTU: no packet carries more payload (MR-ENC-23).
pub const MAX_PMTU: u32 = 4096;

/// What the observer knows besides the packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// Path MTU of the traffic in bytes, when known (one of [`PMTU_VALUES`]).
    /// Unknown: payload limits use [`MAX_PMTU`] and "exactly PMTU" means
    /// "one of the five PMTU values".
    pub pmtu: Option<u32>,
    /// UDP destination ports that mark RoCE traffic (default: 4791). A packet
    /// on another listed port is decoded and judged, and breaks MR-ENC-11.
    pub roce_ports: Vec<u16>,
    /// The DSCP that marks trimmed MP packets (`mp_trim_dscp`), when set.
    /// An MP data packet with this DSCP and a wrong ICRC is taken as trimmed
    /// by a switch: its ICRC and lengths are not judged.
    pub trim_dscp: Option<u8>,
    /// `Mp` (default): MP opcodes are decoded and allowed. `Base`: the
    /// implementation has no MP QP, so MP opcodes break MR-OPC-6.
    pub profile: Profile,
    /// The P_Key every packet must carry, when known (MR-BTH-4).
    pub pkey: Option<u16>,
    /// The capture was taken at the sender's port, before any switch: ECN
    /// CE cannot be a switch's mark there (MR-ENC-21). Default false.
    pub at_sender: bool,
    /// The implementation declares `mp_flow_label_entropy`: over IPv6 the
    /// flow label of every MP packet equals its UDP source port (MR-MPS-8).
    /// Default false (not declared: the flow label is not judged per packet).
    pub mp_flow_label_entropy: bool,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            pmtu: None,
            roce_ports: vec![ROCEV2_PORT],
            trim_dscp: None,
            profile: Profile::Mp,
            pkey: None,
            at_sender: false,
            mp_flow_label_entropy: false,
        }
    }
}

impl Context {
    /// The opcode dialect the profile implies.
    pub fn dialect(&self) -> Dialect {
        match self.profile {
            Profile::Base => Dialect::Base,
            Profile::Mp => Dialect::MetaRoce,
        }
    }

    /// How frames must be parsed for these validators.
    pub fn parse_options(&self) -> ParseOptions {
        ParseOptions {
            roce_ports: self.roce_ports.clone(),
            dialect: self.dialect(),
            ..ParseOptions::default()
        }
    }

    /// Largest payload a packet may carry: the PMTU, or 4096 when unknown.
    pub(crate) fn payload_limit(&self) -> usize {
        self.pmtu.unwrap_or(MAX_PMTU) as usize
    }
}

/// One RoCE packet and what the validators derive from it once.
pub(crate) struct Packet<'f, 'a> {
    /// The whole frame.
    pub frame: &'f Frame<'a>,
    /// Its RoCE part.
    pub roce: &'f RocePacket<'a>,
    /// The opcode.
    pub op: Opcode,
    /// The opcode's layout in the context's dialect.
    pub layout: Option<&'static Layout>,
    /// An MP data packet marked with the trimming DSCP whose ICRC fails:
    /// a switch cut its payload, so lengths and ICRC are not the sender's.
    pub trimmed: bool,
    /// The ICRC check.
    pub icrc: IcrcStatus,
    /// Payload bytes on the wire: more than `roce.payload` holds when the
    /// capture cut the packet short (a header-only capture).
    pub payload_len: usize,
}

/// MP data opcodes (§7.10): the ones a switch may trim.
pub(crate) fn is_mp_data(op: Opcode) -> bool {
    op.is_mp_data()
}

/// Whether a decoded frame is taken as an MP packet a switch trimmed: an
/// MP data packet marked with the context's trimming DSCP whose ICRC
/// fails. Its lengths and ICRC are then not the sender's (not judged), and
/// its receiver does not drop it for them (MR-MPT-3).
pub fn taken_as_trimmed(frame: &Frame<'_>, icrc: IcrcStatus, ctx: &Context) -> bool {
    let (Some(ip), Some(roce)) = (&frame.ip, &frame.roce) else {
        return false;
    };
    ctx.trim_dscp.is_some_and(|d| d == ip.dscp())
        && is_mp_data(roce.bth.opcode)
        && icrc.is_valid() == Some(false)
}

/// Judges one decoded frame. `icrc` is the frame's ICRC check
/// (`metaroce_codec::icrc::verify`). A frame that is not RoCE gives no
/// finding, except a first IPv4 fragment of a RoCE datagram.
pub fn validate_frame(frame: &Frame<'_>, icrc: IcrcStatus, ctx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(roce) = &frame.roce else {
        encap::check_fragment(frame, ctx, &mut out);
        return out;
    };
    let op = roce.bth.opcode;
    let trimmed = taken_as_trimmed(frame, icrc, ctx);
    let packet = Packet {
        frame,
        roce,
        op,
        layout: op.layout(ctx.dialect()),
        trimmed,
        icrc,
        payload_len: frame.roce_payload_len().unwrap_or(roce.payload.len()),
    };
    encap::check(&packet, ctx, &mut out);
    icrc::check(&packet, &mut out);
    bth::check(&packet, ctx, &mut out);
    let judged = opcode::check(&packet, &mut out);
    if judged {
        packet::check(&packet, ctx, &mut out);
        ext::check(&packet, &mut out);
        cnp::check(&packet, &mut out);
        mp::check(&packet, ctx, &mut out);
    }
    out
}

#[cfg(test)]
mod tests;
