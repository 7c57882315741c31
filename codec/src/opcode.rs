//! BTH opcodes and the one table that decides each opcode's header layout.
//!
//! [`Opcode`] is an open newtype: every `u8` parses and round-trips. Whether a
//! value is *allowed* is a validation question for the spec model, not for the
//! parser. [`Opcode::layout`] gives the extension headers that follow the BTH,
//! in wire order; an opcode with no layout is parsed with everything after the
//! BTH (up to pad and ICRC) kept as payload.

use core::fmt;

/// The extension headers a packet can carry, in the canonical wire order.
///
/// Every opcode's header list is a subsequence of this order, so emitting the
/// headers a packet holds in this order reproduces every layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtKind {
    /// Reliable Datagram ETH (RD only).
    Rdeth,
    /// Datagram ETH (UD, RD requests).
    Deth,
    /// XRC ETH (XRC requests).
    Xrceth,
    /// MetaRoCE multipath ETH.
    Mpeth,
    /// MetaRoCE selective-ACK ETH.
    Sacketh,
    /// FLUSH ETH.
    Feth,
    /// RDMA ETH.
    Reth,
    /// Atomic ETH.
    AtomicEth,
    /// ACK ETH.
    Aeth,
    /// Atomic ACK ETH.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH.
    Ieth,
    /// The 16 reserved bytes of a CNP.
    Cnp,
}

impl ExtKind {
    /// Every kind, in canonical wire order.
    pub const ALL: [ExtKind; 13] = [
        ExtKind::Rdeth,
        ExtKind::Deth,
        ExtKind::Xrceth,
        ExtKind::Mpeth,
        ExtKind::Sacketh,
        ExtKind::Feth,
        ExtKind::Reth,
        ExtKind::AtomicEth,
        ExtKind::Aeth,
        ExtKind::AtomicAckEth,
        ExtKind::ImmDt,
        ExtKind::Ieth,
        ExtKind::Cnp,
    ];

    /// Length on the wire in bytes.
    pub const fn wire_len(self) -> usize {
        match self {
            ExtKind::Rdeth | ExtKind::Xrceth | ExtKind::Aeth | ExtKind::ImmDt => 4,
            ExtKind::Ieth | ExtKind::Feth => 4,
            ExtKind::Deth | ExtKind::AtomicAckEth => 8,
            ExtKind::Reth | ExtKind::Mpeth | ExtKind::Cnp => 16,
            ExtKind::Sacketh => 24,
            ExtKind::AtomicEth => 28,
        }
    }
}

/// The transport service class, from opcode bits 7:5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceClass {
    /// Reliable Connected, 0x00–0x1F.
    Rc,
    /// Unreliable Connected, 0x20–0x3F.
    Uc,
    /// Reliable Datagram, 0x40–0x5F.
    Rd,
    /// Unreliable Datagram, 0x60–0x7F.
    Ud,
    /// Congestion notification, 0x80–0x9F.
    Cnp,
    /// Extended Reliable Connected, 0xA0–0xBF.
    Xrc,
    /// Manufacturer-specific, 0xC0–0xFF (MetaRoCE MP uses 0xC0–0xDF).
    Vendor,
}

/// Which packet of a message an opcode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First of several.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several.
    Last,
    /// The whole message in one packet.
    Only,
    /// Position is given per packet by MPETH flags (MP opcodes).
    PerPacket,
}

/// Whether an opcode's packets carry payload bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadRule {
    /// No payload (requests without data, acknowledgements, CNP).
    None,
    /// Payload allowed (length rules are the spec model's to check).
    Data,
}

/// The header layout of one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Name as SPEC.md and Wireshark write it, e.g. `"RC SEND Only"`.
    pub name: &'static str,
    /// Extension headers after the BTH, in wire order.
    pub headers: &'static [ExtKind],
    /// Whether data follows the headers.
    pub payload: PayloadRule,
    /// Position of the packet within its message.
    pub position: Position,
}

/// Whether the manufacturer-specific MetaRoCE MP opcodes (0xC0–0xDF) are decoded.
///
/// A Base-only parser sees them as unknown-but-well-formed packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Plain RoCEv2: 0xC0–0xFF are unknown opcodes.
    Base,
    /// RoCEv2 plus the MetaRoCE MP opcodes.
    #[default]
    MetaRoce,
}

/// A BTH opcode. Unknown values parse and round-trip.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Opcode(pub u8);

macro_rules! opcodes {
    ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
        impl Opcode {
            $($(#[$doc])* pub const $name: Opcode = Opcode($value);)*

            /// Every named opcode constant, as `(identifier, opcode)`: the
            /// names vector files and tools accept (`RC_WRITE_ONLY`, `MP_ACK`, ...).
            pub const CONSTANTS: &'static [(&'static str, Opcode)] =
                &[$((stringify!($name), Opcode($value))),*];
        }
    };
}

opcodes! {
    /// RC SEND First.
    RC_SEND_FIRST = 0x00;
    /// RC SEND Middle.
    RC_SEND_MIDDLE = 0x01;
    /// RC SEND Last.
    RC_SEND_LAST = 0x02;
    /// RC SEND Last with Immediate.
    RC_SEND_LAST_IMM = 0x03;
    /// RC SEND Only.
    RC_SEND_ONLY = 0x04;
    /// RC SEND Only with Immediate.
    RC_SEND_ONLY_IMM = 0x05;
    /// RC RDMA WRITE First.
    RC_WRITE_FIRST = 0x06;
    /// RC RDMA WRITE Middle.
    RC_WRITE_MIDDLE = 0x07;
    /// RC RDMA WRITE Last.
    RC_WRITE_LAST = 0x08;
    /// RC RDMA WRITE Last with Immediate.
    RC_WRITE_LAST_IMM = 0x09;
    /// RC RDMA WRITE Only.
    RC_WRITE_ONLY = 0x0A;
    /// RC RDMA WRITE Only with Immediate.
    RC_WRITE_ONLY_IMM = 0x0B;
    /// RC RDMA READ Request.
    RC_READ_REQUEST = 0x0C;
    /// RC RDMA READ Response First.
    RC_READ_RESPONSE_FIRST = 0x0D;
    /// RC RDMA READ Response Middle.
    RC_READ_RESPONSE_MIDDLE = 0x0E;
    /// RC RDMA READ Response Last.
    RC_READ_RESPONSE_LAST = 0x0F;
    /// RC RDMA READ Response Only.
    RC_READ_RESPONSE_ONLY = 0x10;
    /// RC Acknowledge.
    RC_ACK = 0x11;
    /// RC Atomic Acknowledge.
    RC_ATOMIC_ACK = 0x12;
    /// RC Compare & Swap.
    RC_CMP_SWAP = 0x13;
    /// RC Fetch & Add.
    RC_FETCH_ADD = 0x14;
    /// RC SEND Last with Invalidate.
    RC_SEND_LAST_INV = 0x16;
    /// RC SEND Only with Invalidate.
    RC_SEND_ONLY_INV = 0x17;
    /// RC FLUSH (memory-placement extension).
    RC_FLUSH = 0x1C;
    /// RC ATOMIC WRITE (memory-placement extension).
    RC_ATOMIC_WRITE = 0x1D;
    /// UC SEND First.
    UC_SEND_FIRST = 0x20;
    /// UC SEND Only.
    UC_SEND_ONLY = 0x24;
    /// UC RDMA WRITE Only.
    UC_WRITE_ONLY = 0x2A;
    /// UD SEND Only.
    UD_SEND_ONLY = 0x64;
    /// UD SEND Only with Immediate.
    UD_SEND_ONLY_IMM = 0x65;
    /// RoCEv2 Congestion Notification Packet.
    CNP = 0x81;
    /// MP SEND.
    MP_SEND = 0xC0;
    /// MP SEND with Immediate.
    MP_SEND_IMM = 0xC1;
    /// MP WRITE.
    MP_WRITE = 0xC2;
    /// MP WRITE with Immediate.
    MP_WRITE_IMM = 0xC3;
    /// MP READ Request.
    MP_READ_REQUEST = 0xC4;
    /// MP READ Response.
    MP_READ_RESPONSE = 0xC5;
    /// MP Compare & Swap.
    MP_CMP_SWAP = 0xC6;
    /// MP Fetch & Add.
    MP_FETCH_ADD = 0xC7;
    /// MP Atomic Acknowledge.
    MP_ATOMIC_ACK = 0xC8;
    /// MP ACK (selective).
    MP_ACK = 0xC9;
    /// MP Probe.
    MP_PROBE = 0xCA;
    /// MP SEND with Invalidate.
    MP_SEND_INV = 0xCB;
}

use ExtKind as K;
use PayloadRule::{Data, None as NoData};
use Position::{First, Last, Middle, Only, PerPacket};

const fn l(
    name: &'static str,
    headers: &'static [ExtKind],
    payload: PayloadRule,
    position: Position,
) -> Option<Layout> {
    Some(Layout {
        name,
        headers,
        payload,
        position,
    })
}

/// RC / UC / XRC opcodes share operation numbers 0x00–0x1F; this is the RC
/// view of the low five bits (headers after any class prefix header).
const fn rc_operation(op: u8) -> Option<Layout> {
    match op {
        0x00 => l("SEND First", &[], Data, First),
        0x01 => l("SEND Middle", &[], Data, Middle),
        0x02 => l("SEND Last", &[], Data, Last),
        0x03 => l("SEND Last with Immediate", &[K::ImmDt], Data, Last),
        0x04 => l("SEND Only", &[], Data, Only),
        0x05 => l("SEND Only with Immediate", &[K::ImmDt], Data, Only),
        0x06 => l("RDMA WRITE First", &[K::Reth], Data, First),
        0x07 => l("RDMA WRITE Middle", &[], Data, Middle),
        0x08 => l("RDMA WRITE Last", &[], Data, Last),
        0x09 => l("RDMA WRITE Last with Immediate", &[K::ImmDt], Data, Last),
        0x0A => l("RDMA WRITE Only", &[K::Reth], Data, Only),
        0x0B => l(
            "RDMA WRITE Only with Immediate",
            &[K::Reth, K::ImmDt],
            Data,
            Only,
        ),
        0x0C => l("RDMA READ Request", &[K::Reth], NoData, Only),
        0x0D => l("RDMA READ Response First", &[K::Aeth], Data, First),
        0x0E => l("RDMA READ Response Middle", &[], Data, Middle),
        0x0F => l("RDMA READ Response Last", &[K::Aeth], Data, Last),
        0x10 => l("RDMA READ Response Only", &[K::Aeth], Data, Only),
        0x11 => l("Acknowledge", &[K::Aeth], NoData, Only),
        0x12 => l(
            "Atomic Acknowledge",
            &[K::Aeth, K::AtomicAckEth],
            NoData,
            Only,
        ),
        0x13 => l("Compare Swap", &[K::AtomicEth], NoData, Only),
        0x14 => l("Fetch Add", &[K::AtomicEth], NoData, Only),
        0x16 => l("SEND Last with Invalidate", &[K::Ieth], Data, Last),
        0x17 => l("SEND Only with Invalidate", &[K::Ieth], Data, Only),
        0x1C => l("FLUSH", &[K::Feth, K::Reth], NoData, Only),
        0x1D => l("ATOMIC WRITE", &[K::Reth], Data, Only),
        _ => None,
    }
}

/// Layouts with a full name, built once per class so that `layout` can hand
/// out `&'static` references.
macro_rules! class_table {
    ($prefix:literal, $filter:expr, $extra:expr) => {{
        let mut table: [Option<Layout>; 32] = [None; 32];
        let mut op = 0;
        while op < 32 {
            if let Some(base) = rc_operation(op as u8) {
                if $filter(op as u8) {
                    table[op] = Some(Layout {
                        name: concat_name($prefix, op),
                        headers: $extra(op as u8, base.headers),
                        payload: base.payload,
                        position: base.position,
                    });
                }
            }
            op += 1;
        }
        table
    }};
}

/// Full names, indexed by the five operation bits, per class.
const fn concat_name(prefix: &'static str, op: usize) -> &'static str {
    macro_rules! names {
        ($p:literal) => {
            [
                concat!($p, " SEND First"),
                concat!($p, " SEND Middle"),
                concat!($p, " SEND Last"),
                concat!($p, " SEND Last with Immediate"),
                concat!($p, " SEND Only"),
                concat!($p, " SEND Only with Immediate"),
                concat!($p, " RDMA WRITE First"),
                concat!($p, " RDMA WRITE Middle"),
                concat!($p, " RDMA WRITE Last"),
                concat!($p, " RDMA WRITE Last with Immediate"),
                concat!($p, " RDMA WRITE Only"),
                concat!($p, " RDMA WRITE Only with Immediate"),
                concat!($p, " RDMA READ Request"),
                concat!($p, " RDMA READ Response First"),
                concat!($p, " RDMA READ Response Middle"),
                concat!($p, " RDMA READ Response Last"),
                concat!($p, " RDMA READ Response Only"),
                concat!($p, " Acknowledge"),
                concat!($p, " Atomic Acknowledge"),
                concat!($p, " Compare Swap"),
                concat!($p, " Fetch Add"),
                "",
                concat!($p, " SEND Last with Invalidate"),
                concat!($p, " SEND Only with Invalidate"),
                "",
                "",
                "",
                "",
                concat!($p, " FLUSH"),
                concat!($p, " ATOMIC WRITE"),
                "",
                "",
            ]
        };
    }
    const RC: [&str; 32] = names!("RC");
    const UC: [&str; 32] = names!("UC");
    const RD: [&str; 32] = names!("RD");
    const XRC: [&str; 32] = names!("XRC");
    let table = match prefix.as_bytes()[0] {
        b'U' => &UC,
        b'X' => &XRC,
        b'R' if prefix.len() == 2 && prefix.as_bytes()[1] == b'D' => &RD,
        _ => &RC,
    };
    table[op]
}

const fn all_ops(_: u8) -> bool {
    true
}

/// UC carries SEND and WRITE only (0x00–0x0B).
const fn uc_ops(op: u8) -> bool {
    op <= 0x0B
}

/// RD has the RC operations up to Fetch Add (0x00–0x14).
const fn rd_ops(op: u8) -> bool {
    op <= 0x14
}

/// XRC mirrors RC numbering up to SEND Only with Invalidate (0x00–0x17).
const fn xrc_ops(op: u8) -> bool {
    op <= 0x17
}

const fn same(_: u8, headers: &'static [ExtKind]) -> &'static [ExtKind] {
    headers
}

/// Response operations (READ responses, ACK, atomic ACK): 0x0D–0x12.
const fn is_response_op(op: u8) -> bool {
    Opcode(op).is_rc_response()
}

/// RD: every packet starts with RDETH; requests add DETH after it.
const fn rd_headers(op: u8, headers: &'static [ExtKind]) -> &'static [ExtKind] {
    if is_response_op(op) {
        match headers {
            [K::Aeth] => &[K::Rdeth, K::Aeth],
            [K::Aeth, K::AtomicAckEth] => &[K::Rdeth, K::Aeth, K::AtomicAckEth],
            _ => &[K::Rdeth],
        }
    } else {
        match headers {
            [] => &[K::Rdeth, K::Deth],
            [K::ImmDt] => &[K::Rdeth, K::Deth, K::ImmDt],
            [K::Reth] => &[K::Rdeth, K::Deth, K::Reth],
            [K::Reth, K::ImmDt] => &[K::Rdeth, K::Deth, K::Reth, K::ImmDt],
            _ => &[K::Rdeth, K::Deth, K::AtomicEth],
        }
    }
}

/// XRC: requests start with XRCETH; responses are as in RC.
const fn xrc_headers(op: u8, headers: &'static [ExtKind]) -> &'static [ExtKind] {
    if is_response_op(op) {
        headers
    } else {
        match headers {
            [] => &[K::Xrceth],
            [K::ImmDt] => &[K::Xrceth, K::ImmDt],
            [K::Reth] => &[K::Xrceth, K::Reth],
            [K::Reth, K::ImmDt] => &[K::Xrceth, K::Reth, K::ImmDt],
            [K::AtomicEth] => &[K::Xrceth, K::AtomicEth],
            _ => &[K::Xrceth, K::Ieth],
        }
    }
}

static RC_TABLE: [Option<Layout>; 32] = class_table!("RC", all_ops, same);
static UC_TABLE: [Option<Layout>; 32] = class_table!("UC", uc_ops, same);
static RD_TABLE: [Option<Layout>; 32] = class_table!("RD", rd_ops, rd_headers);
static XRC_TABLE: [Option<Layout>; 32] = class_table!("XRC", xrc_ops, xrc_headers);

static UD_SEND_ONLY: Layout = Layout {
    name: "UD SEND Only",
    headers: &[K::Deth],
    payload: Data,
    position: Only,
};
static UD_SEND_ONLY_IMM: Layout = Layout {
    name: "UD SEND Only with Immediate",
    headers: &[K::Deth, K::ImmDt],
    payload: Data,
    position: Only,
};
static RD_RESYNC: Layout = Layout {
    name: "RD RESYNC",
    headers: &[K::Rdeth, K::Deth],
    payload: NoData,
    position: Only,
};
static CNP: Layout = Layout {
    name: "CNP",
    headers: &[K::Cnp],
    payload: NoData,
    position: Only,
};

static MP_TABLE: [Option<Layout>; 12] = [
    l("MP SEND", &[K::Mpeth], Data, PerPacket),
    l(
        "MP SEND with Immediate",
        &[K::Mpeth, K::ImmDt],
        Data,
        PerPacket,
    ),
    l("MP WRITE", &[K::Mpeth, K::Reth], Data, PerPacket),
    l(
        "MP WRITE with Immediate",
        &[K::Mpeth, K::Reth, K::ImmDt],
        Data,
        PerPacket,
    ),
    l("MP READ Request", &[K::Mpeth, K::Reth], NoData, Only),
    l("MP READ Response", &[K::Mpeth], Data, PerPacket),
    l("MP Compare Swap", &[K::Mpeth, K::AtomicEth], NoData, Only),
    l("MP Fetch Add", &[K::Mpeth, K::AtomicEth], NoData, Only),
    l(
        "MP Atomic Acknowledge",
        &[K::Sacketh, K::AtomicAckEth],
        NoData,
        Only,
    ),
    l("MP ACK", &[K::Sacketh], NoData, Only),
    l("MP Probe", &[K::Mpeth], NoData, Only),
    l(
        "MP SEND with Invalidate",
        &[K::Mpeth, K::Ieth],
        Data,
        PerPacket,
    ),
];

impl Opcode {
    /// Service class from bits 7:5.
    pub const fn class(self) -> ServiceClass {
        match self.0 >> 5 {
            0 => ServiceClass::Rc,
            1 => ServiceClass::Uc,
            2 => ServiceClass::Rd,
            3 => ServiceClass::Ud,
            4 => ServiceClass::Cnp,
            5 => ServiceClass::Xrc,
            _ => ServiceClass::Vendor,
        }
    }

    /// Operation bits 4:0.
    pub const fn operation(self) -> u8 {
        self.0 & 0x1F
    }

    /// The header layout, or `None` for an opcode that is reserved or unknown
    /// in `dialect`.
    pub fn layout(self, dialect: Dialect) -> Option<&'static Layout> {
        let op = usize::from(self.operation());
        match self.class() {
            ServiceClass::Rc => RC_TABLE[op].as_ref(),
            ServiceClass::Uc => UC_TABLE[op].as_ref(),
            ServiceClass::Rd if self.0 == 0x55 => Some(&RD_RESYNC),
            ServiceClass::Rd => RD_TABLE[op].as_ref(),
            ServiceClass::Xrc => XRC_TABLE[op].as_ref(),
            ServiceClass::Ud => match self {
                Opcode::UD_SEND_ONLY => Some(&UD_SEND_ONLY),
                Opcode::UD_SEND_ONLY_IMM => Some(&UD_SEND_ONLY_IMM),
                _ => None,
            },
            ServiceClass::Cnp if self == Opcode::CNP => Some(&CNP),
            ServiceClass::Cnp => None,
            ServiceClass::Vendor => match dialect {
                Dialect::MetaRoce => MP_TABLE
                    .get(usize::from(self.0.wrapping_sub(0xC0)))?
                    .as_ref(),
                Dialect::Base => None,
            },
        }
    }

    /// `true` for the MetaRoCE MP opcodes (0xC0–0xCB).
    pub const fn is_mp(self) -> bool {
        self.0 >= 0xC0 && self.0 <= 0xCB
    }

    /// `true` for the whole range MP owns (0xC0–0xDF): the MP opcodes and
    /// those reserved for MP (SPEC.md §7.2).
    pub const fn in_mp_range(self) -> bool {
        self.0 >= 0xC0 && self.0 <= 0xDF
    }

    /// `true` for the opcodes reserved for MP (0xCC–0xDF): in the MP range
    /// but not an MP opcode (SPEC.md §7.2).
    pub const fn is_mp_reserved(self) -> bool {
        self.in_mp_range() && !self.is_mp()
    }

    /// `true` for the MP responses: READ Response, Atomic Acknowledge, ACK.
    pub const fn is_mp_response(self) -> bool {
        matches!(
            self,
            Opcode::MP_READ_RESPONSE | Opcode::MP_ATOMIC_ACK | Opcode::MP_ACK
        )
    }

    /// `true` for the MP requests: every MP opcode that is not a response
    /// (data, READ Request, atomics, Probe).
    pub const fn is_mp_request(self) -> bool {
        self.is_mp() && !self.is_mp_response()
    }

    /// `true` for the MP opcodes that carry data (0xC0–0xC3, 0xC5, 0xCB).
    pub const fn is_mp_data(self) -> bool {
        matches!(self.0, 0xC0..=0xC3)
            || matches!(self, Opcode::MP_READ_RESPONSE | Opcode::MP_SEND_INV)
    }

    /// `true` for the RC responses (0x0D–0x12): READ Response First to
    /// Only, Acknowledge, Atomic Acknowledge.
    pub const fn is_rc_response(self) -> bool {
        self.0 >= 0x0D && self.0 <= 0x12
    }

    /// `true` for RC READ Response First, Middle, Last and Only (0x0D–0x10).
    pub const fn is_rc_read_response(self) -> bool {
        self.0 >= 0x0D && self.0 <= 0x10
    }

    /// `true` for the known RC requests: every RC opcode with a layout that
    /// is not a response.
    pub const fn is_rc_request(self) -> bool {
        matches!(
            self.0,
            0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17 | 0x1C | 0x1D
        )
    }

    /// `true` for the RC requests of RDMA-resource operations (READ Request,
    /// Compare-Swap, Fetch-Add, FLUSH, ATOMIC WRITE: 0x0C, 0x13, 0x14, 0x1C,
    /// 0x1D), each of which occupies a responder resource.
    pub const fn is_rc_rdma_resource(self) -> bool {
        matches!(self.0, 0x0C | 0x13 | 0x14 | 0x1C | 0x1D)
    }

    /// `true` for the RC SEND opcodes (0x00–0x05, 0x16, 0x17).
    pub const fn is_rc_send(self) -> bool {
        matches!(self.0, 0x00..=0x05 | 0x16 | 0x17)
    }

    /// `true` for the RC RDMA WRITE opcodes (0x06–0x0B).
    pub const fn is_rc_write(self) -> bool {
        self.0 >= 0x06 && self.0 <= 0x0B
    }

    /// Name of a known opcode (MetaRoCE dialect), or `None`.
    pub fn name(self) -> Option<&'static str> {
        self.layout(Dialect::MetaRoce).map(|l| l.name)
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "Opcode({:#04x} {name})", self.0),
            None => write!(f, "Opcode({:#04x} unknown)", self.0),
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({:#04x})", self.0),
            None => write!(f, "unknown ({:#04x})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_layouts_match_the_fact_sheet() {
        let hdr = |op: u8| {
            Opcode(op)
                .layout(Dialect::Base)
                .map(|l| l.headers.iter().map(|k| k.wire_len()).sum::<usize>() + 12)
        };
        // The header bytes of each opcode's layout (SPEC §4.3).
        for (op, bytes) in [
            (0x00, 12),
            (0x03, 16),
            (0x06, 28),
            (0x0B, 32),
            (0x0C, 28),
            (0x0D, 16),
            (0x0E, 12),
            (0x11, 16),
            (0x12, 24),
            (0x13, 40),
            (0x14, 40),
            (0x16, 16),
            (0x1C, 32),
            (0x1D, 28),
            (0x64, 20),
            (0x65, 24),
            (0x81, 28),
        ] {
            assert_eq!(hdr(op), Some(bytes), "opcode {op:#04x}");
        }
    }

    #[test]
    fn reserved_and_vendor_opcodes_have_no_layout_in_base() {
        for op in [
            0x15u8, 0x18, 0x1B, 0x1E, 0x1F, 0x2C, 0x60, 0x66, 0x80, 0x82, 0xB8, 0xC0, 0xFF,
        ] {
            assert_eq!(Opcode(op).layout(Dialect::Base), None, "opcode {op:#04x}");
        }
        assert!(Opcode::MP_ACK.layout(Dialect::MetaRoce).is_some());
        assert!(Opcode(0xCC).layout(Dialect::MetaRoce).is_none());
        // The MP range: the MP opcodes and those reserved for MP, nothing else.
        let range: Vec<u8> = (0..=255u8).filter(|&op| Opcode(op).in_mp_range()).collect();
        assert_eq!(range.first(), Some(&Opcode::MP_SEND.0));
        assert_eq!(range.len(), 32);
        assert!((0..=255u8).all(|op| !Opcode(op).is_mp() || Opcode(op).in_mp_range()));
    }

    #[test]
    fn class_predicates_agree_with_the_layout_table() {
        for op in (0..=255u8).map(Opcode) {
            let layout = op.layout(Dialect::MetaRoce);
            let name = layout.map_or("", |l| l.name);
            let response = ["Response", "Acknowledge", "ACK"]
                .iter()
                .any(|w| name.contains(w));
            let rc = op.class() == ServiceClass::Rc && layout.is_some();
            assert_eq!(op.is_rc_response(), rc && response, "{op:?}");
            assert_eq!(op.is_rc_request(), rc && !response, "{op:?}");
            let read_response = name.starts_with("RC RDMA READ Response");
            assert_eq!(op.is_rc_read_response(), read_response, "{op:?}");
            let resource = ["READ Request", "Compare", "Fetch", "FLUSH", "ATOMIC WRITE"]
                .iter()
                .any(|w| name.contains(w));
            assert_eq!(op.is_rc_rdma_resource(), rc && resource, "{op:?}");
            assert_eq!(op.is_rc_send(), name.starts_with("RC SEND"), "{op:?}");
            assert_eq!(
                op.is_rc_write(),
                name.starts_with("RC RDMA WRITE"),
                "{op:?}"
            );
            assert_eq!(op.is_mp_response(), op.is_mp() && response, "{op:?}");
            assert_eq!(op.is_mp_request(), op.is_mp() && !response, "{op:?}");
            let data = layout.is_some_and(|l| l.payload == PayloadRule::Data);
            assert_eq!(op.is_mp_data(), op.is_mp() && data, "{op:?}");
            assert_eq!(op.is_mp_reserved(), op.in_mp_range() && layout.is_none());
        }
    }

    #[test]
    fn every_layout_follows_the_canonical_order() {
        for op in 0..=255u8 {
            if let Some(layout) = Opcode(op).layout(Dialect::MetaRoce) {
                let positions: Vec<usize> = layout
                    .headers
                    .iter()
                    .map(|k| ExtKind::ALL.iter().position(|a| a == k).unwrap())
                    .collect();
                assert!(positions.windows(2).all(|w| w[0] < w[1]), "{layout:?}");
                assert!(!layout.name.is_empty(), "opcode {op:#04x}");
            }
        }
    }

    #[test]
    fn class_prefixed_names() {
        assert_eq!(Opcode(0x24).name(), Some("UC SEND Only"));
        assert_eq!(Opcode(0xA4).name(), Some("XRC SEND Only"));
        assert_eq!(Opcode(0x4C).name(), Some("RD RDMA READ Request"));
        assert_eq!(Opcode(0x10).name(), Some("RC RDMA READ Response Only"));
    }
}
