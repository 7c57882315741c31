//! # metaroce-codec
//!
//! The wire codec of MetaRoCE: Ethernet (with up to two VLAN tags), IPv4,
//! IPv6, UDP, the RoCEv2 Base Transport Header, every RoCEv2 extension header
//! and the MetaRoCE MP headers; parse (with nom) and emit; the Invariant CRC;
//! and a builder for valid and deliberately invalid packets. For captures:
//! RoCE v1, frames cut short by the capture ([`ParseOptions::accept_cut`]),
//! and the layers a capture adds around them ([`decap`]: ERSPAN, GRE,
//! VXLAN, QinQ, Linux cooked capture, raw IP). No I/O.
//!
//! Contracts:
//! - **No panics** on any input: every parse returns a [`WireError`] that
//!   names layer, field, byte offset and (for truncation) bytes needed and
//!   available. `emit` never panics on a buffer of at least `buffer_len()`
//!   bytes; a shorter buffer is an error.
//! - **Lossless**: for every frame [`Frame::parse`] accepts,
//!   [`Frame::emit`] writes back the same bytes.
//! - **Open code points**: [`Opcode`], [`ext::Syndrome`] and every reserved
//!   field keep unknown values; judging them is the spec model's job.
//! - **The ICRC is a separate step** ([`icrc`]): parse never checks it.
#![forbid(unsafe_code)]

pub mod bth;
pub mod builder;
pub mod cm;
pub mod decap;
pub mod error;
pub mod ethernet;
pub mod ext;
pub mod frame;
pub mod icrc;
pub mod ipv4;
pub mod ipv6;
pub mod mp_setup;
pub mod opcode;
pub mod roce;
pub mod seq;
pub mod udp;

pub use bth::BthRepr;
pub use builder::PacketBuilder;
pub use cm::{CmMad, CmMessage, MadHeader};
pub use error::{Layer, WireError, WireErrorKind};
pub use ethernet::{EthernetRepr, VlanTag};
pub use ext::ExtHeaders;
pub use frame::{Cut, Frame, IpRepr, ParseOptions};
pub use icrc::IcrcStatus;
pub use ipv4::Ipv4Repr;
pub use ipv6::Ipv6Repr;
pub use opcode::{Dialect, ExtKind, Layout, Opcode, ServiceClass};
pub use roce::RocePacket;
pub use seq::{Msn, Psn};
pub use udp::UdpRepr;
