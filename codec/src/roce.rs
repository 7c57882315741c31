//! A RoCEv2 packet: the UDP payload from BTH to ICRC.

use crate::bth::BthRepr;
use crate::error::{Layer, WireError, check_emit};
use crate::ext::ExtHeaders;
use crate::opcode::{Dialect, Layout};

/// Bytes of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// A RoCEv2 packet. Payload and pad borrow from the parsed bytes.
///
/// `payload` and `pad` are split by `bth.pad_count` as sent; `icrc` is the
/// trailer as sent (least-significant byte of the CRC first). Parsing never
/// checks the ICRC: see [`crate::icrc`]. The default (all fields zero or
/// empty) is a place for [`RocePacket::parse_from`] to fill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RocePacket<'a> {
    /// Base transport header.
    pub bth: BthRepr,
    /// Extension headers, as the opcode's layout names them.
    pub ext: ExtHeaders,
    /// Data after the headers, pad excluded.
    pub payload: &'a [u8],
    /// Pad bytes (`bth.pad_count` of them, as sent).
    pub pad: &'a [u8],
    /// ICRC trailer bytes as sent.
    pub icrc: [u8; ICRC_LEN],
}

impl<'a> RocePacket<'a> {
    /// Parses a packet from a UDP payload. Error offsets are relative to `input`.
    ///
    /// An opcode without a layout in `dialect` keeps everything between BTH
    /// and pad as payload.
    #[inline]
    pub fn parse(input: &'a [u8], dialect: Dialect) -> Result<Self, WireError> {
        let mut packet = RocePacket::default();
        packet.parse_from(input, dialect)?;
        Ok(packet)
    }

    /// BTH and the extension headers its opcode's layout names, into
    /// `self`: what follows them, and where that starts in `input`.
    #[inline]
    fn parse_headers(
        &mut self,
        input: &'a [u8],
        dialect: Dialect,
    ) -> Result<(&'a [u8], usize), WireError> {
        let (bth, rest) = BthRepr::parse(input)?;
        self.bth = bth;
        let layout = bth.opcode.layout(dialect);
        let headers = layout.map_or(&[][..], |l: &Layout| l.headers);
        let rest = self
            .ext
            .parse_from(headers, rest)
            .map_err(|e| e.shifted(BthRepr::LEN))?;
        Ok((rest, input.len() - rest.len()))
    }

    /// [`RocePacket::parse`] into `self`, in place (see
    /// [`crate::Frame::parse_from`]). On an error only the error is
    /// meaningful.
    pub fn parse_from(&mut self, input: &'a [u8], dialect: Dialect) -> Result<(), WireError> {
        let (rest, body_start) = self.parse_headers(input, dialect)?;
        let Some(body_len) = rest.len().checked_sub(ICRC_LEN) else {
            return Err(WireError::truncated(
                Layer::Icrc,
                "trailer",
                body_start,
                ICRC_LEN,
                rest.len(),
            ));
        };
        let (body, icrc) = rest.split_at(body_len);
        let pad_len = usize::from(self.bth.pad_count);
        let Some(payload_len) = body_len.checked_sub(pad_len) else {
            return Err(WireError::invalid(
                Layer::Bth,
                "pad_count",
                crate::bth::field::FLAGS,
                u64::from(self.bth.pad_count),
                "pad count exceeds the bytes between the headers and the ICRC",
            ));
        };
        let (payload, pad) = body.split_at(payload_len);
        self.payload = payload;
        self.pad = pad;
        self.icrc = [icrc[0], icrc[1], icrc[2], icrc[3]];
        Ok(())
    }

    /// [`RocePacket::parse_from`] for a packet a capture cut short:
    /// `captured` holds its first bytes, `wire_len` is its length on the
    /// wire (from the UDP length). Headers must be whole in `captured` (a
    /// header cut short is its `Truncated` error); the payload, pad and
    /// ICRC bytes captured are kept, the rest is missing. Returns the bytes
    /// missing (0 when `captured` holds the whole packet, which parses as
    /// [`RocePacket::parse_from`] does); the ICRC bytes not captured are 0.
    /// PadCnt and the ICRC are checked against `wire_len` as
    /// [`RocePacket::parse_from`] checks them against the input.
    pub fn parse_cut_from(
        &mut self,
        captured: &'a [u8],
        wire_len: usize,
        dialect: Dialect,
    ) -> Result<usize, WireError> {
        if captured.len() >= wire_len {
            self.parse_from(captured.get(..wire_len).unwrap_or(captured), dialect)?;
            return Ok(0);
        }
        let (rest, body_start) = self.parse_headers(captured, dialect)?;
        // The caller bounds `captured` by `wire_len`: the headers fit.
        let body_wire = wire_len.saturating_sub(body_start);
        let Some(body_len) = body_wire.checked_sub(ICRC_LEN) else {
            return Err(WireError::truncated(
                Layer::Icrc,
                "trailer",
                body_start,
                ICRC_LEN,
                body_wire,
            ));
        };
        let pad_len = usize::from(self.bth.pad_count);
        let Some(payload_len) = body_len.checked_sub(pad_len) else {
            return Err(WireError::invalid(
                Layer::Bth,
                "pad_count",
                crate::bth::field::FLAGS,
                u64::from(self.bth.pad_count),
                "pad count exceeds the bytes between the headers and the ICRC",
            ));
        };
        let payload_end = payload_len.min(rest.len());
        let pad_end = body_len.min(rest.len());
        self.payload = &rest[..payload_end];
        self.pad = &rest[payload_end..pad_end];
        self.icrc = [0; ICRC_LEN];
        let icrc = &rest[pad_end..];
        self.icrc[..icrc.len().min(ICRC_LEN)].copy_from_slice(&icrc[..icrc.len().min(ICRC_LEN)]);
        Ok(body_wire - rest.len())
    }

    /// Bytes on the wire, BTH to ICRC.
    pub fn buffer_len(&self) -> usize {
        BthRepr::LEN + self.ext.buffer_len() + self.payload.len() + self.pad.len() + ICRC_LEN
    }

    /// Bytes of BTH and extension headers.
    pub fn header_len(&self) -> usize {
        BthRepr::LEN + self.ext.buffer_len()
    }

    /// The CRC value of the trailer (the trailer is least-significant byte first).
    pub const fn icrc_value(&self) -> u32 {
        u32::from_le_bytes(self.icrc)
    }

    /// Writes the packet into the start of `buf`; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        check_emit(Layer::Bth, buf, len)?;
        self.bth.emit(buf)?;
        let mut at = BthRepr::LEN;
        at += self.ext.emit(&mut buf[at..])?;
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();
        buf[at..at + self.pad.len()].copy_from_slice(self.pad);
        at += self.pad.len();
        buf[at..at + ICRC_LEN].copy_from_slice(&self.icrc);
        Ok(at + ICRC_LEN)
    }
}
