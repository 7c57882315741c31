//! pcapng: writer output, round trips, and hand-built files with every packet block.

use std::io::Cursor;

use pcap_parser::{Block, parse_block_le};

use super::{Ng, Owned, packet, read_all};
use crate::capture::{ByteOrder, CaptureFormat, CaptureReader, PcapNgWriter};

#[test]
fn writer_emits_exact_bytes() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_packet(
        0x1_0000_0002,
        &[0xaa, 0xbb, 0xcc, 0xdd, 0xee],
        60,
        Some("hi"),
    )
    .unwrap();
    w.write_packet(3, &[1, 2, 3, 4], 4, None).unwrap();
    let bytes = w.into_inner();
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        // SHB: type, length 28, BOM, version 1.0, section length -1, length
        &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0][..],
        &[0xff; 8], &[28, 0, 0, 0],
        // IDB: type 1, length 32, Ethernet, reserved, snaplen 0,
        // if_tsresol (9) = 9 + 3 padding, opt_endofopt, length
        &[1, 0, 0, 0, 32, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
        &[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0],
        // EPB: type 6, length 52, interface 0, ts high 1, ts low 2, caplen 5, len 60
        &[6, 0, 0, 0, 52, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 60, 0, 0, 0],
        // data + 3 padding, opt_comment "hi" + 2 padding, opt_endofopt, length
        &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0, 0, 0],
        &[1, 0, 2, 0, b'h', b'i', 0, 0, 0, 0, 0, 0, 52, 0, 0, 0],
        // EPB without options: length 36, no padding, no opt_endofopt
        &[6, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0],
        &[1, 2, 3, 4, 36, 0, 0, 0],
    ]
    .concat();
    assert_eq!(bytes, expected);
}

/// Writes three packets: none, one and three comments (one of them empty and
/// one with multi-byte UTF-8).
fn commented_file(order: ByteOrder) -> Vec<u8> {
    let mut w = PcapNgWriter::with_byte_order(Vec::new(), 1, order).unwrap();
    w.write_packet(1_700_000_000_123_456_789, &packet(60, 1), 60, None)
        .unwrap();
    w.write_packet(
        1_700_000_000_223_456_789,
        &packet(61, 2),
        1500,
        Some("first"),
    )
    .unwrap();
    w.write_packet_with_comments(5, &packet(1, 3), 1, &["second", "", "dritte Größe"])
        .unwrap();
    w.into_inner()
}

#[test]
fn round_trip_with_comments_both_byte_orders() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let bytes = commented_file(order);
        let mut reader = CaptureReader::new(Cursor::new(&bytes)).unwrap();
        assert_eq!(reader.format(), CaptureFormat::PcapNg);
        assert_eq!(reader.byte_order(), order);
        let (frames, err) = super::drain(&mut reader);
        assert!(err.is_none(), "{err:?}");
        let got: Vec<_> = frames
            .iter()
            .map(|f| {
                (
                    f.number,
                    f.timestamp_ns,
                    f.orig_len,
                    f.data.clone(),
                    f.comments.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 1_700_000_000_123_456_789, 60, packet(60, 1), vec![]),
                (
                    2,
                    1_700_000_000_223_456_789,
                    1500,
                    packet(61, 2),
                    vec!["first".into()]
                ),
                (
                    3,
                    5,
                    1,
                    packet(1, 3),
                    vec!["second".into(), "".into(), "dritte Größe".into()]
                ),
            ]
        );
        assert!(frames.iter().all(|f| f.linktype == 1 && f.interface == 0));
        // SHB (28) + IDB (32); then EPBs of 28 + 60 + 4, and 28 + 64 + 4 + 12 + 4.
        let offsets: Vec<_> = frames.iter().map(|f| f.offset).collect();
        assert_eq!(offsets, [60, 152, 264]);
        assert_eq!(frames[2].end, bytes.len() as u64);
    }
}

#[test]
fn writer_output_parses_with_pcap_parser_directly() {
    let bytes = commented_file(ByteOrder::Little);
    let mut rest = &bytes[..];
    let mut comments = Vec::new();
    while !rest.is_empty() {
        let (next, block) = parse_block_le(rest).expect("valid block");
        if let Block::EnhancedPacket(epb) = block {
            let c: Vec<_> = epb
                .options
                .iter()
                .filter(|o| o.code.0 == 1)
                .map(|o| o.as_str().unwrap().to_owned())
                .collect();
            comments.push(c);
        }
        rest = next;
    }
    assert_eq!(
        comments,
        [vec![], vec!["first"], vec!["second", "", "dritte Größe"]]
    );
}

#[test]
fn linktype_is_configurable() {
    let mut w = PcapNgWriter::new_with_linktype(Vec::new(), 101).unwrap();
    w.write_packet(1, &[0x45; 20], 20, None).unwrap();
    let (frames, err) = read_all(&w.into_inner());
    assert!(err.is_none());
    assert_eq!(frames[0].linktype, 101);
}

#[test]
fn several_sections_with_different_byte_orders() {
    let mut bytes = commented_file(ByteOrder::Little);
    let mut w =
        PcapNgWriter::with_byte_order(bytes.split_off(bytes.len()), 101, ByteOrder::Big).unwrap();
    w.write_packet(9, &[0x45; 20], 40, Some("raw ip")).unwrap();
    bytes.extend(w.into_inner());
    let mut reader = CaptureReader::new(Cursor::new(&bytes)).unwrap();
    let (frames, err) = super::drain(&mut reader);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(frames.len(), 4);
    assert_eq!(reader.byte_order(), ByteOrder::Big);
    let last = &frames[3];
    assert_eq!((last.number, last.linktype, last.timestamp_ns), (4, 101, 9));
    assert_eq!(last.comments, ["raw ip"]);
}

#[test]
fn rejects_invalid_writer_input_without_writing() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let before = w.get_ref().len();
    assert!(w.write_packet(0, &[0; 10], 9, None).is_err());
    let long = "x".repeat(70_000);
    assert!(w.write_packet(0, &[0; 10], 10, Some(&long)).is_err());
    assert_eq!(w.get_ref().len(), before);
}

/// A file with every packet block kind, interfaces with and without
/// `if_tsresol`/`if_tsoffset`, and blocks the reader must skip.
pub(super) fn hand_built(order: ByteOrder) -> Vec<u8> {
    let ng = Ng(order);
    [
        ng.shb(),
        ng.idb(1, 0, &[]),       // microseconds by default
        ng.block(4, &ng.u32(0)), // name resolution block with only nrb_record_end
        ng.idb(
            228,
            0,
            &[
                ng.option(2, b"eth9"),
                ng.option(9, &[0x80 | 10]),
                ng.option(14, &ng.u64(100)),
            ],
        ),
        ng.epb(0, 1_500_000, &packet(14, 1), 14, &[ng.option(1, b"note")]),
        ng.block(0x0BAD_0000, &[1, 2, 3, 4]), // unknown block type
        ng.epb(1, 3 * 1024 + 512, &packet(20, 2), 20, &[]),
        ng.spb(&packet(30, 3), 30),
        ng.spb(&packet(30, 4), 25), // caplen limited by orig_len
        ng.pb(1, 2048, &packet(7, 5), 9),
        ng.shb(),                            // a new section forgets the interfaces
        ng.idb(1, 0, &[ng.option(9, &[3])]), // milliseconds
        ng.epb(0, 42, &packet(5, 6), 5, &[]),
    ]
    .concat()
}

impl Ng {
    fn u64(&self, v: u64) -> [u8; 8] {
        match self.0 {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
}

#[test]
fn every_packet_block_and_timestamp_resolution() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let (frames, err) = read_all(&hand_built(order));
        assert!(err.is_none(), "{order:?}: {err:?}");
        let got: Vec<_> = frames
            .iter()
            .map(|f: &Owned| {
                (
                    f.timestamp_ns,
                    f.linktype,
                    f.interface,
                    f.orig_len,
                    f.data.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1_500_000_000, 1, 0, 14, packet(14, 1)),
                (100_000_000_000 + 3_500_000_000, 228, 1, 20, packet(20, 2)),
                (0, 1, 0, 30, packet(30, 3)),
                (0, 1, 0, 25, packet(25, 4)),
                (100_000_000_000 + 2_000_000_000, 228, 1, 9, packet(7, 5)),
                (42_000_000, 1, 0, 5, packet(5, 6)),
            ],
            "{order:?}"
        );
        assert_eq!(frames[0].comments, ["note"]);
        assert_eq!(
            frames.iter().map(|f| f.number).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
    }
}

#[test]
fn block_before_any_interface_is_malformed() {
    let ng = Ng(ByteOrder::Little);
    let bytes = [ng.shb(), ng.idb(1, 0, &[]), ng.epb(3, 0, &[1], 1, &[])].concat();
    let (frames, err) = read_all(&bytes);
    assert!(frames.is_empty());
    let msg = err.unwrap().to_string();
    assert!(
        msg.contains("offset 48") && msg.contains("interface 3"),
        "{msg}"
    );
}
