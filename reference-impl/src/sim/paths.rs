//! Multipath and per-entropy impairments: a link can model several
//! parallel paths with different delays, chosen by a hash of the UDP source
//! port as an ECMP switch does, and rules that hit one UDP source port (one
//! MP entropy value): a black hole, a loss rate or ECN-CE marking.

/// An impairment for the frames of one UDP source port.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortRule {
    /// The UDP source port (entropy value) the rule applies to.
    pub port: u16,
    /// Probability such a frame is lost (1.0 = black hole).
    pub drop: f64,
    /// Probability an ECN-capable such frame is marked CE.
    pub ecn_mark: f64,
}

impl PortRule {
    /// Every frame of `port` is lost.
    pub const fn black_hole(port: u16) -> Self {
        PortRule {
            port,
            drop: 1.0,
            ecn_mark: 0.0,
        }
    }
}

/// The UDP source port of an untagged IPv4/UDP frame.
pub fn udp_src_port(frame: &[u8]) -> Option<u16> {
    let ip = frame.get(14..)?;
    if ip.first()? >> 4 != 4 || *ip.get(9)? != 17 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0F) * 4;
    let udp = ip.get(ihl..ihl + 2)?;
    Some(u16::from_be_bytes([udp[0], udp[1]]))
}

/// The path (0..n) an ECMP hash of `port` selects.
pub fn path_of(port: u16, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let mut z = u64::from(port).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z ^= z >> 29;
    z = z.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^= z >> 32;
    (z % n as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_spreads_ports() {
        let mut hits = [0u32; 4];
        for p in 0xC000..0xC100u16 {
            hits[path_of(p, 4)] += 1;
        }
        assert!(hits.iter().all(|&h| h > 32), "{hits:?}");
    }
}
