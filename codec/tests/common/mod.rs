//! Helpers shared by the codec's integration tests.
#![allow(dead_code)]

/// Decodes a hex string, ignoring white space.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// Wraps an IP datagram in an Ethernet II header of the right EtherType.
pub fn ethernet(ip: &[u8]) -> Vec<u8> {
    let ethertype: [u8; 2] = if ip[0] >> 4 == 6 {
        [0x86, 0xdd]
    } else {
        [0x08, 0x00]
    };
    let mut frame = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    frame.extend_from_slice(&ethertype);
    frame.extend_from_slice(ip);
    frame
}
