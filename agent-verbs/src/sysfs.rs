//! What libibverbs does not say, read from sysfs: the RoCEv2 GID index of
//! an IPv4 address, the netdev behind it and its MAC, the P_Key table, and
//! the device's hardware counters. Every read is bounded and fallible.

use std::fs;
use std::net::Ipv4Addr;
use std::path::PathBuf;

fn port_dir(dev: &str, port: u8) -> PathBuf {
    PathBuf::from(format!("/sys/class/infiniband/{dev}/ports/{port}"))
}

fn read_trim(p: PathBuf) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// The IPv4 address of a GID in sysfs text form (`0000:0000:0000:0000:0000:ffff:0a4d:0001`).
pub fn gid_ipv4(text: &str) -> Option<Ipv4Addr> {
    let groups: Vec<u16> = text
        .split(':')
        .map(|g| u16::from_str_radix(g, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    if groups.len() != 8 || groups[..5] != [0, 0, 0, 0, 0] || groups[5] != 0xffff {
        return None;
    }
    let [a, b] = groups[6].to_be_bytes();
    let [c, d] = groups[7].to_be_bytes();
    Some(Ipv4Addr::new(a, b, c, d))
}

/// A RoCEv2 GID with an IPv4-mapped address.
#[derive(Clone, Debug)]
pub struct RoceGid {
    /// GID table index (`sgid_index`).
    pub index: u8,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// The netdev it belongs to.
    pub netdev: String,
}

/// The first RoCEv2 GID with an IPv4-mapped address (the one given, if any).
pub fn find_roce_gid(dev: &str, port: u8, want: Option<Ipv4Addr>) -> Option<RoceGid> {
    let dir = port_dir(dev, port);
    for i in 0..=255u8 {
        let Some(gid) = read_trim(dir.join(format!("gids/{i}"))) else {
            break;
        };
        let Some(ip) = gid_ipv4(&gid) else { continue };
        let ty = read_trim(dir.join(format!("gid_attrs/types/{i}"))).unwrap_or_default();
        if !ty.contains("v2") || want.is_some_and(|w| w != ip) {
            continue;
        }
        let netdev = read_trim(dir.join(format!("gid_attrs/ndevs/{i}"))).unwrap_or_default();
        return Some(RoceGid {
            index: i,
            ip,
            netdev,
        });
    }
    None
}

/// A netdev's MAC address.
pub fn netdev_mac(netdev: &str) -> Option<String> {
    read_trim(PathBuf::from(format!("/sys/class/net/{netdev}/address")))
}

/// The index of `pkey` in the port's P_Key table.
pub fn pkey_index(dev: &str, port: u8, pkey: u16) -> Option<u16> {
    let dir = port_dir(dev, port).join("pkeys");
    for i in 0..128u16 {
        let text = read_trim(dir.join(i.to_string()))?;
        let v = u16::from_str_radix(text.trim_start_matches("0x"), 16).ok()?;
        if v == pkey {
            return Some(i);
        }
    }
    None
}

/// Every hardware counter of the port, by name.
pub fn hw_counters(dev: &str, port: u8) -> Vec<(String, u64)> {
    let dir = port_dir(dev, port).join("hw_counters");
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten().take(256) {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(v) = read_trim(e.path()).and_then(|t| t.parse().ok()) {
                out.push((name, v));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ipv4_mapped_gids_only() {
        assert_eq!(
            gid_ipv4("0000:0000:0000:0000:0000:ffff:0a4d:0001"),
            Some(Ipv4Addr::new(10, 77, 0, 1))
        );
        assert_eq!(gid_ipv4("fe80:0000:0000:0000:5054:00ff:fe00:000a"), None);
        assert_eq!(gid_ipv4("nonsense"), None);
        assert_eq!(gid_ipv4(""), None);
    }
}
