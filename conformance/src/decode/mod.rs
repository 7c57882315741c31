//! Decoding captured frames for people (`text`, like `tshark -V`) and for
//! machines (`jsonl`, one JSON object per frame).
//!
//! Both views are built from the codec's parse of one frame and its ICRC
//! check; a frame that does not decode keeps its number and length and
//! carries the decode error instead of layers.

mod cm;
mod json;
mod text;

pub use json::frame_json;
pub use text::frame_text;

use metaroce_codec::{Dialect, Frame, IcrcStatus, Layer, Opcode, ParseOptions, WireError, icrc};

/// The link type numbers `decode` understands.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// One frame, decoded as far as it goes.
#[derive(Debug)]
pub struct Decoded<'a> {
    /// 1-based frame number.
    pub number: u64,
    /// Captured bytes.
    pub len: usize,
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
            DecodeError::LinkType(t) => {
                write!(f, "link type {t} is not supported (only Ethernet, 1)")
            }
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
        let frame = if linktype == LINKTYPE_ETHERNET {
            Frame::parse(data, options).map_err(DecodeError::Wire)
        } else {
            Err(DecodeError::LinkType(linktype))
        };
        let icrc = frame.as_ref().map_or(IcrcStatus::NotRoce, icrc::verify);
        Decoded {
            number,
            len: data.len(),
            timestamp_ns,
            frame,
            icrc,
            comments: Vec::new(),
            dialect: options.dialect,
        }
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
            Ok(frame) => frame.roce.is_some(),
            Err(DecodeError::Wire(e)) => is_roce_layer(e.layer),
            Err(DecodeError::LinkType(_)) => false,
        }
    }
}

/// The opcode's name in `dialect`, or `None` when it has no layout there.
pub(crate) fn opcode_name(opcode: Opcode, dialect: Dialect) -> Option<&'static str> {
    opcode.layout(dialect).map(|l| l.name)
}

fn is_roce_layer(layer: Layer) -> bool {
    !matches!(
        layer,
        Layer::Ethernet | Layer::Vlan | Layer::Ipv4 | Layer::Ipv6 | Layer::Udp
    )
}

/// `aa:bb:cc:dd:ee:ff`.
pub(crate) fn mac(bytes: &[u8; 6]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
