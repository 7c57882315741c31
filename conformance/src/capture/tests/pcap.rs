//! Classic pcap: both byte orders, both timestamp precisions.

use std::io::Cursor;

use super::{drain, packet};
use crate::capture::{
    ByteOrder, CaptureFormat, CaptureReader, PcapConfig, PcapWriter, TsPrecision,
};

const TIMES: [u64; 3] = [1_700_000_000_123_456_789, 0, 4_294_967_295_999_999_999];

fn written(config: PcapConfig) -> Vec<u8> {
    let mut w = PcapWriter::with_config(Vec::new(), config).unwrap();
    for (i, ts) in TIMES.into_iter().enumerate() {
        w.write_packet(ts, &packet(40 + i, i as u8), 100 + i as u32)
            .unwrap();
    }
    w.into_inner()
}

#[test]
fn round_trip_all_byte_orders_and_precisions() {
    for byte_order in [ByteOrder::Little, ByteOrder::Big] {
        for precision in [TsPrecision::Microsecond, TsPrecision::Nanosecond] {
            let config = PcapConfig {
                linktype: 147,
                precision,
                byte_order,
                ..PcapConfig::default()
            };
            let bytes = written(config);
            let mut reader = CaptureReader::new(Cursor::new(&bytes)).unwrap();
            assert_eq!(reader.format(), CaptureFormat::Pcap);
            assert_eq!(reader.byte_order(), byte_order);
            let (frames, err) = drain(&mut reader);
            assert!(err.is_none(), "{config:?}: {err:?}");
            assert_eq!(frames.len(), 3);
            let mut offset = 24;
            for (i, f) in frames.iter().enumerate() {
                let expected_ts = match precision {
                    TsPrecision::Microsecond => TIMES[i] / 1000 * 1000,
                    TsPrecision::Nanosecond => TIMES[i],
                };
                assert_eq!(f.number, i as u64 + 1);
                assert_eq!(f.offset, offset);
                assert_eq!(f.timestamp_ns, expected_ts, "{config:?}");
                assert_eq!((f.linktype, f.interface), (147, 0));
                assert_eq!(f.orig_len, 100 + i as u32);
                assert_eq!(f.data, packet(40 + i, i as u8));
                assert!(f.comments.is_empty());
                offset += 16 + 40 + i as u64;
            }
        }
    }
}

/// Hand-written files, so that a bug shared by writer and reader cannot hide.
#[test]
fn reads_hand_written_big_and_little_endian() {
    #[rustfmt::skip]
    let big: &[u8] = &[
        0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1,
        0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 64, 0xde, 0xad, 0xbe,
    ];
    #[rustfmt::skip]
    let little: &[u8] = &[
        0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
        10, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 64, 0, 0, 0, 0xde, 0xad, 0xbe,
    ];
    for (bytes, order, ts) in [
        (big, ByteOrder::Big, 10_000_020_000),
        (little, ByteOrder::Little, 10_000_000_020),
    ] {
        let mut reader = CaptureReader::new(bytes).unwrap();
        assert_eq!(reader.byte_order(), order);
        let f = reader.next_frame().unwrap().unwrap();
        assert_eq!((f.timestamp_ns, f.linktype, f.orig_len), (ts, 1, 64));
        assert_eq!(f.data, [0xde, 0xad, 0xbe]);
        assert!(reader.next_frame().unwrap().is_none());
    }
}

#[test]
fn rejects_invalid_writer_input() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    assert!(
        w.write_packet(0, &[0; 300_000], 300_000,).is_err(),
        "over snaplen"
    );
    assert!(w.write_packet(u64::MAX, &[0; 4], 4).is_err(), "after 2106");
    assert!(w.write_packet(0, &[0; 4], 3).is_err(), "orig_len < caplen");
    assert_eq!(w.get_ref().len(), 24);
}
