//! Decoding captured frames for people (`text`, like `tshark -V`) and for
//! machines (`jsonl`, one JSON object per frame).
//!
//! Both views are built from the codec's parse of one frame and its ICRC
//! check; a frame that does not decode keeps its number and length and
//! carries the decode error instead of layers. Frames are read as `check`
//! reads them ([`decap::parse_captured`]): the layers a capture adds
//! (ERSPAN, GRE, VXLAN, QinQ, Linux cooked capture, raw IP) are shown as
//! the frame's encapsulation, a frame the capture cut short decodes as far
//! as it goes and says what is missing, and RoCE v1 is decoded.

mod cm;
mod json;
mod text;

pub use json::frame_json;
pub use text::frame_text;

use metaroce_codec::decap::{self, Encapsulation};
use metaroce_codec::{Dialect, Frame, IcrcStatus, Opcode, ParseOptions, WireError, icrc};

pub use metaroce_codec::decap::LINKTYPE_ETHERNET;

/// One frame, decoded as far as it goes.
#[derive(Debug)]
pub struct Decoded<'a> {
    /// 1-based frame number.
    pub number: u64,
    /// Captured bytes.
    pub len: usize,
    /// Bytes of the frame on the wire, when the capture says (pcap's
    /// original length); more than `len` when it kept only the first bytes.
    pub orig_len: Option<u32>,
    /// The layers the capture added around the frame, taken off.
    pub encapsulation: Encapsulation,
    /// Capture time, nanoseconds since the epoch (0 when unknown).
    pub timestamp_ns: u64,
    /// The parse, or why it failed.
    pub frame: Result<Frame<'a>, DecodeError>,
    /// ICRC check (`NotRoce` when the frame did not decode as RoCE).
    pub icrc: IcrcStatus,
    /// The capture's comments on this frame (pcapng `opt_comment`).
    pub comments: Vec<&'a str>,
    /// The dialect the frame was parsed in (names opcodes).
    pub dialect: Dialect,
}

/// Why a frame did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The codec rejected the bytes.
    Wire(WireError),
    /// The capture's link type is not Ethernet.
    LinkType(u32),
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Wire(e) => e.fmt(f),
            DecodeError::LinkType(t) => write!(
                f,
                "link type {t} is not supported (Ethernet 1, raw IP 101/228/229, \
                 Linux cooked capture 113/276)"
            ),
        }
    }
}

impl<'a> Decoded<'a> {
    /// Decodes one captured frame.
    pub fn new(
        number: u64,
        timestamp_ns: u64,
        linktype: u32,
        data: &'a [u8],
        options: &ParseOptions,
    ) -> Self {
        let mut parsed = Frame::default();
        let mut encapsulation = Encapsulation::default();
        let (frame, icrc) = if decap::LINKTYPES.contains(&linktype) {
            match decap::parse_captured(linktype, data, &mut parsed, &mut encapsulation, options) {
                Ok(ip_wire) => (Ok(parsed), icrc::verify_ip_marked(&parsed, ip_wire).0),
                Err(e) => (Err(DecodeError::Wire(e)), IcrcStatus::NotRoce),
            }
        } else {
            (Err(DecodeError::LinkType(linktype)), IcrcStatus::NotRoce)
        };
        Decoded {
            number,
            len: data.len(),
            orig_len: None,
            encapsulation,
            timestamp_ns,
            frame,
            icrc,
            comments: Vec::new(),
            dialect: options.dialect,
        }
    }

    /// The same, with the frame's length on the wire as the capture
    /// records it (pcap's original length).
    #[must_use]
    pub fn with_orig_len(mut self, orig_len: u32) -> Self {
        self.orig_len = Some(orig_len);
        self
    }

    /// The same, with the capture's comments on the frame.
    #[must_use]
    pub fn with_comments(mut self, comments: impl IntoIterator<Item = &'a str>) -> Self {
        self.comments = comments.into_iter().collect();
        self
    }

    /// Whether the frame is RoCE: it decoded as RoCE, or failed inside a RoCE header.
    pub fn is_roce(&self) -> bool {
        match &self.frame {
            Ok(frame) => frame.roce.is_some() || frame.cut_in_roce_headers(),
            Err(DecodeError::Wire(e)) => e.layer.is_roce(),
            Err(DecodeError::LinkType(_)) => false,
        }
    }
}

/// The opcode's name in `dialect`, or `None` when it has no layout there.
pub(crate) fn opcode_name(opcode: Opcode, dialect: Dialect) -> Option<&'static str> {
    opcode.layout(dialect).map(|l| l.name)
}

/// The BTH of a RoCE packet the capture cut inside its extension headers
/// (the BTH itself is whole): the frame has UDP and no RoCE packet.
pub(crate) fn cut_bth(frame: &Frame<'_>) -> Option<metaroce_codec::BthRepr> {
    if !frame.cut_in_roce_headers() || frame.cut?.layer == metaroce_codec::Layer::Bth {
        return None;
    }
    metaroce_codec::BthRepr::parse(frame.payload)
        .ok()
        .map(|(b, _)| b)
}

/// `aa:bb:cc:dd:ee:ff`.
pub(crate) fn mac(bytes: &[u8; 6]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
