//! Frame rewrites of the mutants that break what the sender puts on the
//! wire, through the codec (no wire format is written here).

use metaroce_codec::{Frame, Layer, ParseOptions, icrc};

/// `wedge-on-bad-padcnt`: whether the codec rejects the frame because its
/// PadCnt claims more pad than there are bytes after the headers (§9.2
/// row 8).
pub(crate) fn pad_overrun(bytes: &[u8], options: &ParseOptions) -> bool {
    let parsed = Frame::parse(bytes, options);
    matches!(parsed, Err(e) if e.layer == Layer::Bth && e.field == "pad_count")
}

/// `padcnt-zero`: the frame with BTH PadCnt 0 and its pad bytes kept (they
/// now read as payload), the ICRC recomputed so that only PadCnt is wrong.
/// A frame the codec cannot parse is returned unchanged.
pub(crate) fn zero_padcnt(bytes: Vec<u8>) -> Vec<u8> {
    let Ok(mut frame) = Frame::parse(&bytes, &ParseOptions::default()) else {
        return bytes;
    };
    let Some(roce) = frame.roce.as_mut() else {
        return bytes;
    };
    roce.bth.pad_count = 0;
    icrc::fill(&mut frame);
    frame.to_bytes()
}
