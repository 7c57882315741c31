//! Management datagrams on QP1 and the connection management (CM) messages
//! RDMA-CM exchanges in them (IBA vol 1 §13.4.3 MAD header, §12.6 CM
//! messages; the field layout agrees with Linux's
//! `include/rdma/ibta_vol1_c12.h` and Wireshark's `packet-infiniband.c`).
//!
//! A MAD travels as the payload of a UD SEND Only to QP1 (the General
//! Services Interface, [`GSI_QPN`]); [`carries_mad`] tells such a packet.
//! [`CmMad::parse`] decodes the 24-byte MAD header and, for management
//! class 0x07, the CM message its attribute ID names: REQ, MRA, REJ, REP,
//! RTU, DREQ, DREP. Other attributes (LAP, APR, SIDR, ClassPortInfo) keep
//! only their header ([`CmMessage::Other`]).
//!
//! Only the fields a conversation needs are decoded; of the private data,
//! only the MetaRoCE MP setup block of a REQ or REP
//! ([`MpSetupField`](crate::mp_setup::MpSetupField)).
//! A capture that keeps only the first bytes of each frame may cut a REQ
//! after its connection fields: its primary path ([`CmPath`]) is then
//! `None`. Every error names the field and its byte offset from the start of
//! the MAD.

use crate::error::{Layer, WireError};
use crate::mp_setup::MpSetupField;
use crate::opcode::Opcode;
use crate::roce::RocePacket;

/// The QPN of the General Services Interface, where MADs are sent.
pub const GSI_QPN: u32 = 1;

/// Management class of communication management.
pub const MGMT_CLASS_CM: u8 = 0x07;

/// The MAD base version IBA defines.
pub const MAD_BASE_VERSION: u8 = 1;

/// Byte offsets of MAD header fields, and of CM message fields from the
/// start of the MAD (header included).
pub mod field {
    /// Base version, 1 byte.
    pub const BASE_VERSION: usize = 0;
    /// Management class, 1 byte.
    pub const MGMT_CLASS: usize = 1;
    /// Class version, 1 byte.
    pub const CLASS_VERSION: usize = 2;
    /// R bit and method, 1 byte.
    pub const METHOD: usize = 3;
    /// Status, 2 bytes.
    pub const STATUS: usize = 4;
    /// Class specific, 2 bytes.
    pub const CLASS_SPECIFIC: usize = 6;
    /// Transaction ID, 8 bytes.
    pub const TRANSACTION_ID: usize = 8;
    /// Attribute ID, 2 bytes.
    pub const ATTRIBUTE_ID: usize = 16;
    /// Attribute modifier, 4 bytes.
    pub const ATTRIBUTE_MODIFIER: usize = 20;
    /// Start of the message (the MAD data).
    pub const DATA: usize = 24;

    /// Local communication ID (every CM message), 4 bytes.
    pub const LOCAL_COMM_ID: usize = DATA;
    /// Remote communication ID (every CM message but REQ), 4 bytes.
    pub const REMOTE_COMM_ID: usize = DATA + 4;

    /// REQ: service ID, 8 bytes.
    pub const REQ_SERVICE_ID: usize = DATA + 8;
    /// REQ: local QPN (3 bytes) and responder resources (1).
    pub const REQ_LOCAL_QPN: usize = DATA + 32;
    /// REQ: initiator depth, 1 byte (after the local EECN).
    pub const REQ_INITIATOR_DEPTH: usize = DATA + 39;
    /// REQ: remote CM response timeout (5 bits), transport service type
    /// (2), end-to-end flow control (1).
    pub const REQ_FLAGS: usize = DATA + 43;
    /// REQ: starting PSN (3 bytes), local CM response timeout (5 bits),
    /// retry count (3).
    pub const REQ_STARTING_PSN: usize = DATA + 44;
    /// REQ: partition key, 2 bytes.
    pub const REQ_PKEY: usize = DATA + 48;
    /// REQ: path MTU (4 bits), RDC exists (1), RNR retry count (3).
    pub const REQ_MTU: usize = DATA + 50;
    /// REQ: max CM retries (4 bits), SRQ (1), extended transport type (3).
    pub const REQ_MAX_CM_RETRIES: usize = DATA + 51;
    /// REQ: primary local port GID, 16 bytes.
    pub const REQ_PRIMARY_LOCAL_GID: usize = DATA + 56;
    /// REQ: primary remote port GID, 16 bytes.
    pub const REQ_PRIMARY_REMOTE_GID: usize = DATA + 72;
    /// REQ: primary local ACK timeout (5 bits).
    pub const REQ_PRIMARY_ACK_TIMEOUT: usize = DATA + 95;

    /// REP: local QPN, 3 bytes.
    pub const REP_LOCAL_QPN: usize = DATA + 12;
    /// REP: starting PSN, 3 bytes.
    pub const REP_STARTING_PSN: usize = DATA + 20;
    /// REP: responder resources, 1 byte.
    pub const REP_RESPONDER_RESOURCES: usize = DATA + 24;
    /// REP: initiator depth, 1 byte.
    pub const REP_INITIATOR_DEPTH: usize = DATA + 25;
    /// REP: target ACK delay (5 bits), failover accepted (2), end-to-end
    /// flow control (1).
    pub const REP_FLAGS: usize = DATA + 26;
    /// REP: RNR retry count (3 bits), SRQ (1).
    pub const REP_RNR_RETRY: usize = DATA + 27;

    /// REQ: private data, [`REQ_PRIVATE_DATA_LEN`] bytes (after the
    /// alternate path).
    pub const REQ_PRIVATE_DATA: usize = DATA + 140;
    /// REQ: bytes of private data.
    pub const REQ_PRIVATE_DATA_LEN: usize = 92;
    /// REP: private data, [`REP_PRIVATE_DATA_LEN`] bytes (after the local
    /// CA GUID).
    pub const REP_PRIVATE_DATA: usize = DATA + 36;
    /// REP: bytes of private data.
    pub const REP_PRIVATE_DATA_LEN: usize = 196;
    /// RDMA-CM's header at the start of a REQ's private data (IBA annex
    /// A11: version, IP version, port, source and destination address).
    pub const RDMA_CM_HEADER_LEN: usize = 36;

    /// REJ and MRA: the message concerned (2 bits).
    pub const MESSAGE_CONCERNED: usize = DATA + 8;
    /// MRA: service timeout (5 bits).
    pub const MRA_SERVICE_TIMEOUT: usize = DATA + 9;
    /// REJ: reason, 2 bytes.
    pub const REJ_REASON: usize = DATA + 10;
    /// DREQ: remote QPN or EECN, 3 bytes.
    pub const DREQ_REMOTE_QPN: usize = DATA + 8;
}

/// Whether `pkt` carries a MAD: a UD SEND Only to QP1 (IBA vol 1 §13.5.1).
pub fn carries_mad(pkt: &RocePacket<'_>) -> bool {
    pkt.bth.opcode == Opcode::UD_SEND_ONLY && pkt.bth.dest_qp == GSI_QPN
}

/// A CM attribute ID (open: unknown values are kept).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AttributeId(pub u16);

impl AttributeId {
    /// ConnectRequest.
    pub const REQ: AttributeId = AttributeId(0x0010);
    /// MessageReceiptAcknowledgement.
    pub const MRA: AttributeId = AttributeId(0x0011);
    /// ConnectReject.
    pub const REJ: AttributeId = AttributeId(0x0012);
    /// ConnectReply.
    pub const REP: AttributeId = AttributeId(0x0013);
    /// ReadyToUse.
    pub const RTU: AttributeId = AttributeId(0x0014);
    /// DisconnectRequest.
    pub const DREQ: AttributeId = AttributeId(0x0015);
    /// DisconnectReply.
    pub const DREP: AttributeId = AttributeId(0x0016);

    /// The message's short name (`"REQ"` …), or `None` for other attributes.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self {
            AttributeId::REQ => "REQ",
            AttributeId::MRA => "MRA",
            AttributeId::REJ => "REJ",
            AttributeId::REP => "REP",
            AttributeId::RTU => "RTU",
            AttributeId::DREQ => "DREQ",
            AttributeId::DREP => "DREP",
            _ => return None,
        })
    }
}

/// The 24-byte common MAD header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MadHeader {
    /// Base version (1).
    pub base_version: u8,
    /// Management class (0x07: CM).
    pub mgmt_class: u8,
    /// Class version (2 for CM).
    pub class_version: u8,
    /// R bit (0x80) and method (0x03: Send).
    pub method: u8,
    /// Status.
    pub status: u16,
    /// Class specific.
    pub class_specific: u16,
    /// Transaction ID.
    pub transaction_id: u64,
    /// Attribute ID.
    pub attribute_id: AttributeId,
    /// Attribute modifier.
    pub attribute_modifier: u32,
}

impl MadHeader {
    /// Bytes on the wire.
    pub const LEN: usize = 24;

    /// Parses the header; offsets are relative to `input`.
    pub fn parse(input: &[u8]) -> Result<(Self, &[u8]), WireError> {
        crate::error::parse_fixed::<{ Self::LEN }, _>(Layer::Mad, input, |b| MadHeader {
            base_version: b[field::BASE_VERSION],
            mgmt_class: b[field::MGMT_CLASS],
            class_version: b[field::CLASS_VERSION],
            method: b[field::METHOD],
            status: crate::error::be16(b, field::STATUS),
            class_specific: crate::error::be16(b, field::CLASS_SPECIFIC),
            transaction_id: crate::error::be64(b, field::TRANSACTION_ID),
            attribute_id: AttributeId(crate::error::be16(b, field::ATTRIBUTE_ID)),
            attribute_modifier: crate::error::be32(b, field::ATTRIBUTE_MODIFIER),
        })
    }
}

/// The primary path of a REQ, as far as a RoCE connection needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmPath {
    /// The requester's GID (for RoCEv2, its IP address, IPv4 mapped).
    pub local_gid: [u8; 16],
    /// The responder's GID.
    pub remote_gid: [u8; 16],
    /// The local ACK timeout the requester uses (5 bits).
    pub local_ack_timeout: u8,
}

/// ConnectRequest (IBA vol 1 §12.6.5): sent by the active side, the
/// requester of the connection's first direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmReq {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Service ID.
    pub service_id: u64,
    /// The sender's QPN.
    pub local_qpn: u32,
    /// READ/atomic requests the sender's responder accepts in flight.
    pub responder_resources: u8,
    /// READ/atomic requests the sender issues in flight.
    pub initiator_depth: u8,
    /// Transport service type (0: RC, 1: UC, 3: XRC).
    pub transport_type: u8,
    /// End-to-end flow control: the sender's responder generates credits.
    pub end_to_end_flow_control: bool,
    /// The first PSN the sender's requests carry.
    pub starting_psn: u32,
    /// Retry count (3 bits).
    pub retry_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Path MTU code (4 bits: 1 = 256 … 5 = 4096).
    pub path_mtu: u8,
    /// RNR retry count (3 bits; 7 = infinite).
    pub rnr_retry_count: u8,
    /// The sender uses a shared receive queue.
    pub srq: bool,
    /// The primary path, when the capture kept its bytes.
    pub primary: Option<CmPath>,
    /// The MetaRoCE MP setup block at the start of the consumer's private
    /// data, after RDMA-CM's 36-byte header (SPEC.md §7.1.1).
    pub mp_setup: MpSetupField,
}

/// ConnectReply (IBA vol 1 §12.6.8): sent by the passive side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmRep {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID (the REQ's local one).
    pub remote_comm_id: u32,
    /// The sender's QPN.
    pub local_qpn: u32,
    /// The first PSN the sender's requests carry.
    pub starting_psn: u32,
    /// READ/atomic requests the sender's responder accepts in flight.
    pub responder_resources: u8,
    /// READ/atomic requests the sender issues in flight.
    pub initiator_depth: u8,
    /// Target ACK delay (5 bits).
    pub target_ack_delay: u8,
    /// End-to-end flow control: the sender's responder generates credits.
    pub end_to_end_flow_control: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// The sender uses a shared receive queue.
    pub srq: bool,
    /// The MetaRoCE MP setup block at the start of the private data
    /// (SPEC.md §7.1.1).
    pub mp_setup: MpSetupField,
}

/// ConnectReject (IBA vol 1 §12.6.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmRej {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// The message rejected (0 REQ, 1 REP, 2 other).
    pub message_rejected: u8,
    /// Reason code.
    pub reason: u16,
}

/// MessageReceiptAcknowledgement (IBA vol 1 §12.6.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmMra {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// The message acknowledged (0 REQ, 1 REP, 2 LAP).
    pub message_mraed: u8,
    /// Service timeout (5 bits).
    pub service_timeout: u8,
}

/// A message that carries only the two communication IDs (RTU, DREP), or a
/// DREQ with the QPN it closes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmIds {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
}

/// DisconnectRequest (IBA vol 1 §12.6.10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CmDreq {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// The receiver's QPN of the connection to close.
    pub remote_qpn: u32,
}

/// A CM message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmMessage {
    /// ConnectRequest.
    Req(CmReq),
    /// MessageReceiptAcknowledgement.
    Mra(CmMra),
    /// ConnectReject.
    Rej(CmRej),
    /// ConnectReply.
    Rep(CmRep),
    /// ReadyToUse.
    Rtu(CmIds),
    /// DisconnectRequest.
    Dreq(CmDreq),
    /// DisconnectReply.
    Drep(CmIds),
    /// Another attribute (LAP, APR, SIDR, ClassPortInfo …): not decoded.
    Other,
}

/// A CM MAD: its header and message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CmMad {
    /// The MAD header.
    pub header: MadHeader,
    /// The message its attribute ID names.
    pub message: CmMessage,
}

/// The MAD bytes, read at offsets from the MAD's start with errors that
/// name the field.
struct Mad<'a>(&'a [u8]);

impl Mad<'_> {
    fn bytes<const N: usize>(&self, at: usize, name: &'static str) -> Result<[u8; N], WireError> {
        self.0
            .get(at..at + N)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                WireError::truncated(Layer::Cm, name, at, N, self.0.len().saturating_sub(at))
            })
    }

    fn u8(&self, at: usize, name: &'static str) -> Result<u8, WireError> {
        Ok(self.bytes::<1>(at, name)?[0])
    }

    fn u16(&self, at: usize, name: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.bytes(at, name)?))
    }

    fn u24(&self, at: usize, name: &'static str) -> Result<u32, WireError> {
        let [a, b, c] = self.bytes(at, name)?;
        Ok(u32::from_be_bytes([0, a, b, c]))
    }

    fn u32(&self, at: usize, name: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.bytes(at, name)?))
    }

    fn u64(&self, at: usize, name: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.bytes(at, name)?))
    }

    /// The MP setup block's place: `size` bytes of private data from `at`,
    /// as far as the capture kept them.
    fn private(&self, at: usize, size: usize) -> MpSetupField {
        MpSetupField::read(self.0.get(at..).unwrap_or_default(), size)
    }

    fn ids(&self) -> Result<CmIds, WireError> {
        Ok(CmIds {
            local_comm_id: self.u32(field::LOCAL_COMM_ID, "local_comm_id")?,
            remote_comm_id: self.u32(field::REMOTE_COMM_ID, "remote_comm_id")?,
        })
    }
}

impl CmReq {
    /// The path MTU in bytes, when the code is one of the five IBA defines.
    pub const fn pmtu(&self) -> Option<u32> {
        match self.path_mtu {
            1..=5 => Some(128 << self.path_mtu),
            _ => None,
        }
    }

    fn parse(m: &Mad<'_>) -> Result<Self, WireError> {
        use field::*;
        // Fields in wire order: a cut names the first one missing.
        let local_comm_id = m.u32(LOCAL_COMM_ID, "local_comm_id")?;
        let service_id = m.u64(REQ_SERVICE_ID, "service_id")?;
        let local_qpn = m.u24(REQ_LOCAL_QPN, "local_qpn")?;
        let responder_resources = m.u8(REQ_LOCAL_QPN + 3, "responder_resources")?;
        let initiator_depth = m.u8(REQ_INITIATOR_DEPTH, "initiator_depth")?;
        let flags = m.u8(REQ_FLAGS, "transport_type")?;
        let psn = m.u32(REQ_STARTING_PSN, "starting_psn")?;
        let pkey = m.u16(REQ_PKEY, "pkey")?;
        let mtu = m.u8(REQ_MTU, "path_mtu")?;
        let srq = m.u8(REQ_MAX_CM_RETRIES, "srq")?;
        // The primary path only when the capture kept it whole.
        let primary = match (
            m.bytes::<16>(REQ_PRIMARY_LOCAL_GID, "primary_local_gid"),
            m.bytes::<16>(REQ_PRIMARY_REMOTE_GID, "primary_remote_gid"),
            m.u8(REQ_PRIMARY_ACK_TIMEOUT, "primary_local_ack_timeout"),
        ) {
            (Ok(local_gid), Ok(remote_gid), Ok(t)) => Some(CmPath {
                local_gid,
                remote_gid,
                local_ack_timeout: t >> 3,
            }),
            _ => None,
        };
        Ok(CmReq {
            local_comm_id,
            service_id,
            local_qpn,
            responder_resources,
            initiator_depth,
            transport_type: (flags >> 1) & 0x3,
            end_to_end_flow_control: flags & 1 != 0,
            starting_psn: psn >> 8,
            retry_count: (psn & 0x7) as u8,
            pkey,
            path_mtu: mtu >> 4,
            rnr_retry_count: mtu & 0x7,
            srq: srq & 0x08 != 0,
            primary,
            mp_setup: m.private(
                REQ_PRIVATE_DATA + RDMA_CM_HEADER_LEN,
                REQ_PRIVATE_DATA_LEN - RDMA_CM_HEADER_LEN,
            ),
        })
    }
}

impl CmRep {
    fn parse(m: &Mad<'_>) -> Result<Self, WireError> {
        use field::*;
        let ids = m.ids()?;
        let local_qpn = m.u24(REP_LOCAL_QPN, "local_qpn")?;
        let starting_psn = m.u24(REP_STARTING_PSN, "starting_psn")?;
        let responder_resources = m.u8(REP_RESPONDER_RESOURCES, "responder_resources")?;
        let initiator_depth = m.u8(REP_INITIATOR_DEPTH, "initiator_depth")?;
        let flags = m.u8(REP_FLAGS, "target_ack_delay")?;
        let rnr = m.u8(REP_RNR_RETRY, "rnr_retry_count")?;
        Ok(CmRep {
            local_comm_id: ids.local_comm_id,
            remote_comm_id: ids.remote_comm_id,
            local_qpn,
            starting_psn,
            responder_resources,
            initiator_depth,
            target_ack_delay: flags >> 3,
            end_to_end_flow_control: flags & 1 != 0,
            rnr_retry_count: rnr >> 5,
            srq: rnr & 0x10 != 0,
            mp_setup: m.private(REP_PRIVATE_DATA, REP_PRIVATE_DATA_LEN),
        })
    }
}

impl CmMad {
    /// Parses a MAD (the payload of a UD SEND to QP1) as a CM MAD. Errors:
    /// a MAD of another class or base version (`Invalid`), or one cut before
    /// the fields of its message (`Truncated`, naming the field); offsets
    /// are relative to `input`.
    pub fn parse(input: &[u8]) -> Result<Self, WireError> {
        let (header, _) = MadHeader::parse(input)?;
        if header.base_version != MAD_BASE_VERSION {
            return Err(WireError::invalid(
                Layer::Mad,
                "base_version",
                field::BASE_VERSION,
                u64::from(header.base_version),
                "not a MAD of base version 1",
            ));
        }
        if header.mgmt_class != MGMT_CLASS_CM {
            return Err(WireError::invalid(
                Layer::Mad,
                "mgmt_class",
                field::MGMT_CLASS,
                u64::from(header.mgmt_class),
                "not communication management (0x07)",
            ));
        }
        let m = Mad(input);
        let message = match header.attribute_id {
            AttributeId::REQ => CmMessage::Req(CmReq::parse(&m)?),
            AttributeId::REP => CmMessage::Rep(CmRep::parse(&m)?),
            AttributeId::RTU => CmMessage::Rtu(m.ids()?),
            AttributeId::DREP => CmMessage::Drep(m.ids()?),
            AttributeId::DREQ => {
                let ids = m.ids()?;
                CmMessage::Dreq(CmDreq {
                    local_comm_id: ids.local_comm_id,
                    remote_comm_id: ids.remote_comm_id,
                    remote_qpn: m.u24(field::DREQ_REMOTE_QPN, "remote_qpn")?,
                })
            }
            AttributeId::REJ => {
                let ids = m.ids()?;
                CmMessage::Rej(CmRej {
                    local_comm_id: ids.local_comm_id,
                    remote_comm_id: ids.remote_comm_id,
                    message_rejected: m.u8(field::MESSAGE_CONCERNED, "message_rejected")? >> 6,
                    reason: m.u16(field::REJ_REASON, "reason")?,
                })
            }
            AttributeId::MRA => {
                let ids = m.ids()?;
                CmMessage::Mra(CmMra {
                    local_comm_id: ids.local_comm_id,
                    remote_comm_id: ids.remote_comm_id,
                    message_mraed: m.u8(field::MESSAGE_CONCERNED, "message_mraed")? >> 6,
                    service_timeout: m.u8(field::MRA_SERVICE_TIMEOUT, "service_timeout")? >> 3,
                })
            }
            _ => CmMessage::Other,
        };
        Ok(CmMad { header, message })
    }

    /// The message's short name (`"REQ"` …) or `"CM"` for other attributes.
    pub fn name(&self) -> &'static str {
        self.header.attribute_id.name().unwrap_or("CM")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A REQ with known fields, laid out by hand from IBA Table 99.
    fn req_bytes() -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[..4].copy_from_slice(&[1, 0x07, 2, 0x03]);
        b[16..18].copy_from_slice(&0x0010u16.to_be_bytes());
        let d = 24;
        b[d..d + 4].copy_from_slice(&0xac66_08b9u32.to_be_bytes());
        b[d + 8..d + 16].copy_from_slice(&0x0000_0001_061d_2f00u64.to_be_bytes());
        b[d + 32..d + 36].copy_from_slice(&[0x00, 0x00, 0x17, 0x01]);
        b[d + 39] = 0x02;
        b[d + 43] = 0xa0 | 0x01; // timeout 0x14, RC, e2e flow control
        b[d + 44..d + 48].copy_from_slice(&[0x89, 0xbb, 0x0e, 0xa7]);
        b[d + 48..d + 50].copy_from_slice(&0xffffu16.to_be_bytes());
        b[d + 50] = 0x37;
        b[d + 51] = 0xf8;
        b[d + 56 + 10..d + 56 + 16].copy_from_slice(&[0xff, 0xff, 192, 168, 2, 25]);
        b[d + 95] = 0x13 << 3;
        b
    }

    #[test]
    fn req_fields() {
        let mad = CmMad::parse(&req_bytes()).unwrap();
        assert_eq!(mad.name(), "REQ");
        let CmMessage::Req(r) = mad.message else {
            panic!("{mad:?}")
        };
        assert_eq!(
            (r.local_comm_id, r.local_qpn, r.responder_resources),
            (0xac66_08b9, 0x17, 1)
        );
        assert_eq!((r.initiator_depth, r.transport_type), (2, 0));
        assert!(r.end_to_end_flow_control);
        assert_eq!((r.starting_psn, r.retry_count), (0x89bb0e, 7));
        assert_eq!((r.pkey, r.path_mtu, r.pmtu()), (0xffff, 3, Some(1024)));
        assert_eq!(r.rnr_retry_count, 7);
        assert!(r.srq);
        let p = r.primary.unwrap();
        assert_eq!(&p.local_gid[10..], &[0xff, 0xff, 192, 168, 2, 25]);
        assert_eq!(p.local_ack_timeout, 0x13);
    }

    #[test]
    fn header_only_req_keeps_its_connection_fields() {
        let b = req_bytes();
        let mad = CmMad::parse(&b[..24 + 52]).unwrap();
        let CmMessage::Req(r) = mad.message else {
            panic!("{mad:?}")
        };
        assert_eq!((r.starting_psn, r.primary), (0x89bb0e, None));
    }

    #[test]
    fn every_cut_before_the_fields_is_an_exact_error() {
        let b = req_bytes();
        for cut in 0..24 + 52 {
            let e = CmMad::parse(&b[..cut]).unwrap_err();
            match e.kind {
                crate::WireErrorKind::Truncated { needed, available } => {
                    assert!(
                        e.offset >= cut.saturating_sub(7) || cut < 24,
                        "cut {cut}: {e}"
                    );
                    assert_eq!(available, cut.saturating_sub(e.offset), "cut {cut}: {e}");
                    assert!(needed > available, "{e}");
                }
                _ => panic!("cut {cut}: {e}"),
            }
        }
    }

    #[test]
    fn rep_fields() {
        let mut b = vec![0u8; 256];
        b[..4].copy_from_slice(&[1, 0x07, 2, 0x03]);
        b[16..18].copy_from_slice(&0x0013u16.to_be_bytes());
        let d = 24;
        b[d..d + 4].copy_from_slice(&7u32.to_be_bytes());
        b[d + 4..d + 8].copy_from_slice(&9u32.to_be_bytes());
        b[d + 12..d + 15].copy_from_slice(&[0, 0, 0x11]);
        b[d + 20..d + 23].copy_from_slice(&[0x12, 0x34, 0x56]);
        b[d + 24] = 4;
        b[d + 25] = 5;
        b[d + 26] = (0x0f << 3) | 1;
        b[d + 27] = 0xe0 | 0x10;
        let CmMessage::Rep(r) = CmMad::parse(&b).unwrap().message else {
            panic!()
        };
        assert_eq!(
            (r.local_comm_id, r.remote_comm_id, r.local_qpn),
            (7, 9, 0x11)
        );
        assert_eq!((r.starting_psn, r.responder_resources), (0x123456, 4));
        assert_eq!((r.initiator_depth, r.target_ack_delay), (5, 0x0f));
        assert!(r.end_to_end_flow_control && r.srq);
        assert_eq!(r.rnr_retry_count, 7);
    }

    #[test]
    fn other_classes_are_refused_with_the_field() {
        let mut b = req_bytes();
        b[1] = 0x04;
        let e = CmMad::parse(&b).unwrap_err();
        assert_eq!((e.layer, e.field, e.offset), (Layer::Mad, "mgmt_class", 1));
        b[1] = 0x07;
        b[16..18].copy_from_slice(&0x0019u16.to_be_bytes());
        assert_eq!(CmMad::parse(&b).unwrap().message, CmMessage::Other);
    }

    /// A version-1 block: M, T with DSCP 46, W 512, N 64, 2 planes.
    const BLOCK: [u8; 24] = [
        b'M', b'R', 1, 24, 0xC0, 46, 0x02, 0x00, 0x00, 0x40, 2, 8, 4, 0, 0, 0, 0, 0, 0x10, 0, 0, 0,
        0, 0,
    ];

    #[test]
    fn mp_setup_block_in_req_after_rdma_cm_header_and_at_rep_start() {
        use crate::mp_setup::MpSetupField;
        // REQ: private data at MAD byte 24 + 140, block after 36 bytes.
        let mut b = req_bytes();
        assert_eq!(
            mp_of(&CmMad::parse(&b).unwrap().message),
            MpSetupField::Absent
        );
        b[200..224].copy_from_slice(&BLOCK);
        let MpSetupField::Block(blk) = mp_of(&CmMad::parse(&b).unwrap().message) else {
            panic!()
        };
        assert_eq!(
            (blk.window, blk.entropy_set_size, blk.trim()),
            (512, 64, Some(46))
        );
        // Cut inside the block: not captured, never malformed.
        assert_eq!(
            mp_of(&CmMad::parse(&b[..210]).unwrap().message),
            MpSetupField::NotCaptured
        );
        // Length beyond the 56 bytes left after RDMA-CM's header.
        b[203] = 57;
        assert_eq!(
            mp_of(&CmMad::parse(&b).unwrap().message),
            MpSetupField::Unreadable {
                field: "length",
                value: 57
            }
        );
        b[203] = 56;
        assert!(matches!(
            mp_of(&CmMad::parse(&b).unwrap().message),
            MpSetupField::Block(_)
        ));
        b[203] = 23;
        assert_eq!(
            mp_of(&CmMad::parse(&b).unwrap().message),
            MpSetupField::Unreadable {
                field: "length",
                value: 23
            }
        );
        // REP: private data at MAD byte 24 + 36.
        let mut r = vec![0u8; 256];
        r[..4].copy_from_slice(&[1, 0x07, 2, 0x03]);
        r[16..18].copy_from_slice(&0x0013u16.to_be_bytes());
        r[60..84].copy_from_slice(&BLOCK);
        assert!(matches!(
            mp_of(&CmMad::parse(&r).unwrap().message),
            MpSetupField::Block(_)
        ));
        assert_eq!(
            mp_of(&CmMad::parse(&r[..62]).unwrap().message),
            MpSetupField::NotCaptured
        );
        assert_eq!(
            mp_of(&CmMad::parse(&r[..59]).unwrap().message),
            MpSetupField::NotCaptured
        );
    }

    fn mp_of(m: &CmMessage) -> crate::mp_setup::MpSetupField {
        match m {
            CmMessage::Req(r) => r.mp_setup,
            CmMessage::Rep(r) => r.mp_setup,
            _ => panic!("{m:?}"),
        }
    }
}
