//! Meaning of the blocks `pcap-parser` returns: format detection, pcapng
//! interfaces and timestamps, packet byte ranges, and the diagnosis of bad records.

use std::ops::Range;

use pcap_parser::{Block, InterfaceDescriptionBlock, PcapBlockOwned};

use super::{ByteOrder, CaptureError, CaptureFormat};

/// Size of the classic pcap file header.
pub(super) const PCAP_HEADER_LEN: usize = 24;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const PB: u32 = 2;
const SPB: u32 = 3;
const NRB: u32 = 4;
const ISB: u32 = 5;
const EPB: u32 = 6;

const PCAP_NANO_LE: u32 = 0xa1b2_3c4d;
const PCAP_NANO_BE: u32 = 0x4d3c_b2a1;
const PCAP_MODIFIED: u32 = 0xa1b2_cd34;

/// Format and (for pcap) byte order announced by the first four bytes. For
/// pcapng the byte order comes from the section header's byte-order magic.
pub(super) fn detect(magic: [u8; 4]) -> Option<(CaptureFormat, ByteOrder)> {
    match u32::from_le_bytes(magic) {
        0xa1b2_c3d4 | PCAP_NANO_LE | PCAP_MODIFIED => {
            Some((CaptureFormat::Pcap, ByteOrder::Little))
        }
        0xd4c3_b2a1 | PCAP_NANO_BE => Some((CaptureFormat::Pcap, ByteOrder::Big)),
        SHB => Some((CaptureFormat::PcapNg, ByteOrder::Little)),
        _ => None,
    }
}

pub(super) fn u32_at(data: &[u8], at: usize, order: ByteOrder) -> Option<u32> {
    let bytes: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(match order {
        ByteOrder::Little => u32::from_le_bytes(bytes),
        ByteOrder::Big => u32::from_be_bytes(bytes),
    })
}

fn u16_at(data: &[u8], at: usize, order: ByteOrder) -> Option<u16> {
    let bytes: [u8; 2] = data.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(match order {
        ByteOrder::Little => u16::from_le_bytes(bytes),
        ByteOrder::Big => u16::from_be_bytes(bytes),
    })
}

fn block_name(block_type: u32) -> &'static str {
    match block_type {
        SHB => "section header",
        IDB => "interface description",
        PB => "packet",
        SPB => "simple packet",
        NRB => "name resolution",
        ISB => "interface statistics",
        EPB => "enhanced packet",
        _ => "pcapng",
    }
}

fn min_block_len(block_type: u32) -> u32 {
    match block_type {
        SHB => 28,
        IDB => 20,
        SPB => 16,
        PB | EPB => 32,
        _ => 12,
    }
}

/// Type, total length and byte order of the pcapng block starting `data`,
/// checked for sanity; `Ok(None)` while too few bytes are there to tell.
pub(super) fn ng_header(
    data: &[u8],
    section: ByteOrder,
    offset: u64,
) -> Result<Option<(u32, u32, ByteOrder)>, CaptureError> {
    let Some(raw_type) = data.first_chunk::<4>() else {
        return Ok(None);
    };
    let order = if u32::from_le_bytes(*raw_type) == SHB {
        match data.get(8..12) {
            None => return Ok(None),
            Some([0x4d, 0x3c, 0x2b, 0x1a]) => ByteOrder::Little,
            Some([0x1a, 0x2b, 0x3c, 0x4d]) => ByteOrder::Big,
            Some(bom) => {
                return Err(CaptureError::malformed(
                    offset,
                    format!("section header block has an invalid byte-order magic {bom:02x?}"),
                ));
            }
        }
    } else {
        section
    };
    let (Some(block_type), Some(len)) = (u32_at(data, 0, order), u32_at(data, 4, order)) else {
        return Ok(None);
    };
    let name = block_name(block_type);
    let min = min_block_len(block_type);
    if len < min {
        return Err(CaptureError::malformed(
            offset,
            format!(
                "{name} block (type {block_type:#x}) has total length {len}, less than the minimum {min}"
            ),
        ));
    }
    if len % 4 != 0 {
        return Err(CaptureError::malformed(
            offset,
            format!(
                "{name} block (type {block_type:#x}) has total length {len}, not a multiple of 4"
            ),
        ));
    }
    Ok(Some((block_type, len, order)))
}

/// Where a packet lies in its block, and what its frame reports.
pub(super) struct Packet {
    pub(super) data: Range<usize>,
    pub(super) options: Range<usize>,
    pub(super) timestamp_ns: u64,
    pub(super) linktype: u32,
    pub(super) interface: u32,
    pub(super) orig_len: u32,
}

/// What to do with a parsed block.
pub(super) enum Step {
    Skip,
    Packet(Packet),
}

/// A pcapng interface, from its description block.
struct Interface {
    linktype: u32,
    snaplen: u32,
    units_per_sec: u64,
    offset_secs: i64,
}

impl Interface {
    fn new(
        idb: &InterfaceDescriptionBlock<'_>,
        order: ByteOrder,
        offset: u64,
    ) -> Result<Self, CaptureError> {
        let mut iface = Interface {
            linktype: u32::from(idb.linktype.0 as u16),
            snaplen: idb.snaplen,
            units_per_sec: 1_000_000,
            offset_secs: 0,
        };
        for opt in &idb.options {
            let value = opt.as_bytes().unwrap_or_default();
            match (opt.code.0, value) {
                (0, _) => break,
                (9, &[resol]) => {
                    iface.units_per_sec = ts_units(resol).ok_or_else(|| {
                        CaptureError::malformed(offset, format!("invalid if_tsresol {resol:#04x}"))
                    })?;
                }
                (14, &[a, b, c, d, e, f, g, h]) => {
                    let bytes = [a, b, c, d, e, f, g, h];
                    iface.offset_secs = match order {
                        ByteOrder::Little => i64::from_le_bytes(bytes),
                        ByteOrder::Big => i64::from_be_bytes(bytes),
                    };
                }
                (code @ (9 | 14), _) => {
                    return Err(CaptureError::malformed(
                        offset,
                        format!(
                            "interface option {} has length {}",
                            if code == 9 {
                                "if_tsresol"
                            } else {
                                "if_tsoffset"
                            },
                            opt.len
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(iface)
    }

    fn timestamp_ns(&self, high: u32, low: u32) -> u64 {
        let units = (u64::from(high) << 32) | u64::from(low);
        let ns = i128::from(units) * 1_000_000_000 / i128::from(self.units_per_sec.max(1))
            + i128::from(self.offset_secs) * 1_000_000_000;
        u64::try_from(ns.max(0)).unwrap_or(u64::MAX)
    }
}

/// Timestamp units per second for an `if_tsresol` value (10^-n or 2^-n seconds).
fn ts_units(resol: u8) -> Option<u64> {
    let exp = u32::from(resol & 0x7f);
    if resol & 0x80 == 0 {
        10u64.checked_pow(exp)
    } else {
        1u64.checked_shl(exp)
    }
}

/// What the reader knows about the file so far.
pub(super) struct State {
    format: CaptureFormat,
    /// Byte order of the pcap file or of the current pcapng section.
    order: ByteOrder,
    pcap_linktype: u32,
    pcap_nanos: bool,
    pcap_record_header: usize,
    interfaces: Vec<Interface>,
}

impl State {
    pub(super) fn new(format: CaptureFormat, order: ByteOrder, magic: [u8; 4]) -> Self {
        let magic = u32::from_le_bytes(magic);
        State {
            format,
            order,
            pcap_linktype: 0,
            pcap_nanos: magic == PCAP_NANO_LE || magic == PCAP_NANO_BE,
            pcap_record_header: if magic == PCAP_MODIFIED { 24 } else { 16 },
            interfaces: Vec::new(),
        }
    }

    pub(super) fn format(&self) -> CaptureFormat {
        self.format
    }

    pub(super) fn byte_order(&self) -> ByteOrder {
        self.order
    }

    pub(super) fn on_block(
        &mut self,
        block: PcapBlockOwned<'_>,
        offset: u64,
    ) -> Result<Step, CaptureError> {
        let packet = match block {
            PcapBlockOwned::LegacyHeader(h) => {
                // The low 16 bits; the upper ones carry FCS information.
                self.pcap_linktype = (h.network.0 as u32) & 0xffff;
                return Ok(Step::Skip);
            }
            PcapBlockOwned::Legacy(b) => {
                let start = self.pcap_record_header;
                let frac_ns = if self.pcap_nanos { 1 } else { 1000 };
                Packet {
                    data: start..start + b.data.len(),
                    options: 0..0,
                    timestamp_ns: u64::from(b.ts_sec) * 1_000_000_000
                        + u64::from(b.ts_usec) * frac_ns,
                    linktype: self.pcap_linktype,
                    interface: 0,
                    orig_len: b.origlen,
                }
            }
            PcapBlockOwned::NG(Block::SectionHeader(shb)) => {
                if shb.major_version != 1 {
                    return Err(CaptureError::malformed(
                        offset,
                        format!(
                            "unsupported pcapng version {}.{}",
                            shb.major_version, shb.minor_version
                        ),
                    ));
                }
                self.order = if shb.big_endian() {
                    ByteOrder::Big
                } else {
                    ByteOrder::Little
                };
                self.interfaces.clear();
                return Ok(Step::Skip);
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                let iface = Interface::new(&idb, self.order, offset)?;
                self.interfaces.push(iface);
                return Ok(Step::Skip);
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let iface = self.interface(epb.if_id, offset, "enhanced packet")?;
                let caplen = (epb.caplen as usize).min(epb.data.len());
                let options = 28 + epb.data.len();
                Packet {
                    data: 28..28 + caplen,
                    options: options..(epb.block_len1 as usize).saturating_sub(4).max(options),
                    timestamp_ns: iface.timestamp_ns(epb.ts_high, epb.ts_low),
                    linktype: iface.linktype,
                    interface: epb.if_id,
                    orig_len: epb.origlen,
                }
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                let iface = self.interface(0, offset, "simple packet")?;
                let mut caplen = (spb.origlen as usize).min(spb.data.len());
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen as usize);
                }
                Packet {
                    data: 12..12 + caplen,
                    options: 0..0,
                    timestamp_ns: 0,
                    linktype: iface.linktype,
                    interface: 0,
                    orig_len: spb.origlen,
                }
            }
            PcapBlockOwned::NG(Block::Unknown(ub)) if self.native(ub.block_type) == PB => {
                self.obsolete_packet(ub.data, ub.block_len1, offset)?
            }
            PcapBlockOwned::NG(_) => return Ok(Step::Skip),
        };
        Ok(Step::Packet(packet))
    }

    /// `pcap-parser` reads block types little-endian; this undoes it in a big-endian section.
    fn native(&self, raw_type: u32) -> u32 {
        match self.order {
            ByteOrder::Little => raw_type,
            ByteOrder::Big => raw_type.swap_bytes(),
        }
    }

    /// The obsolete Packet Block (type 2), which `pcap-parser` leaves unparsed.
    /// `body` is the block without its 8-byte header and 4-byte trailer.
    fn obsolete_packet(&self, body: &[u8], len: u32, offset: u64) -> Result<Packet, CaptureError> {
        let field = |at| u32_at(body, at, self.order).unwrap_or_default();
        let if_id = u32::from(u16_at(body, 0, self.order).unwrap_or_default());
        let (caplen, orig_len) = (field(12) as usize, field(16));
        if body.len() < 20 || caplen > body.len() - 20 {
            return Err(CaptureError::malformed(
                offset,
                format!(
                    "packet block: captured length {caplen} does not fit in a block of {len} bytes"
                ),
            ));
        }
        let iface = self.interface(if_id, offset, "packet")?;
        let options = 28 + caplen.next_multiple_of(4);
        Ok(Packet {
            data: 28..28 + caplen,
            options: options..(len as usize).saturating_sub(4).max(options),
            timestamp_ns: iface.timestamp_ns(field(4), field(8)),
            linktype: iface.linktype,
            interface: if_id,
            orig_len,
        })
    }

    fn interface(&self, id: u32, offset: u64, what: &str) -> Result<&Interface, CaptureError> {
        self.interfaces.get(id as usize).ok_or_else(|| {
            CaptureError::malformed(
                offset,
                format!(
                    "{what} block refers to interface {id}, but the section describes {} interface(s)",
                    self.interfaces.len()
                ),
            )
        })
    }

    /// Checks a complete pcapng block's framing, which `pcap-parser` checks
    /// only for some block types.
    pub(super) fn check_block(&self, block: &[u8], offset: u64) -> Result<(), CaptureError> {
        if self.format == CaptureFormat::Pcap {
            return Ok(());
        }
        match ng_header(block, self.order, offset)? {
            Some((block_type, len, order)) if len as usize == block.len() => {
                let trailer = u32_at(block, block.len() - 4, order);
                if trailer != Some(len) {
                    return Err(CaptureError::malformed(
                        offset,
                        format!(
                            "{} block: trailing total length {} differs from the leading {len}",
                            block_name(block_type),
                            trailer.unwrap_or_default()
                        ),
                    ));
                }
                Ok(())
            }
            _ => Err(CaptureError::malformed(offset, "inconsistent block length")),
        }
    }

    /// Total length of the record starting `data`, once its header is there.
    pub(super) fn declared_len(
        &self,
        data: &[u8],
        offset: u64,
    ) -> Result<Option<u64>, CaptureError> {
        Ok(match self.format {
            CaptureFormat::Pcap => u32_at(data, 8, self.order)
                .map(|caplen| self.pcap_record_header as u64 + u64::from(caplen)),
            CaptureFormat::PcapNg => {
                ng_header(data, self.order, offset)?.map(|(_, len, _)| u64::from(len))
            }
        })
    }

    /// Explains why the record starting `data` was rejected.
    pub(super) fn diagnose(&self, data: &[u8], offset: u64) -> CaptureError {
        if self.format == CaptureFormat::Pcap {
            return CaptureError::malformed(offset, "invalid pcap record");
        }
        let (block_type, len, order) = match ng_header(data, self.order, offset) {
            Err(e) => return e,
            Ok(None) => return CaptureError::malformed(offset, "invalid block header"),
            Ok(Some(header)) => header,
        };
        let name = block_name(block_type);
        let Some(block) = data.get(..len as usize) else {
            return CaptureError::malformed(offset, format!("invalid {name} block"));
        };
        if let Err(e) = self.check_block(block, offset) {
            return e;
        }
        if let (PB | EPB, Some(caplen)) = (block_type, u32_at(block, 20, order))
            && u64::from(caplen).next_multiple_of(4) + 32 > u64::from(len)
        {
            return CaptureError::malformed(
                offset,
                format!(
                    "{name} block: captured length {caplen} does not fit in a block of {len} bytes"
                ),
            );
        }
        CaptureError::malformed(offset, format!("invalid {name} block contents"))
    }
}
