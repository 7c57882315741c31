//! Live capture through libpcap (cargo feature `libpcap`).
//!
//! [`LiveCapture`] opens an interface with a BPF filter (by default
//! `udp port 4791`) and lends each captured packet as the same [`Frame`] the
//! file reader returns, so everything that reads captures can read a link.
//! `Frame::offset` is 0 (there is no file) and `Frame::options` is empty.
//! Capturing needs root or `CAP_NET_RAW`.

use super::{ByteOrder, Frame, PacketOptions};
use core::fmt;

/// The default BPF filter: RoCEv2 traffic.
pub const ROCE_FILTER: &str = "udp port 4791";

/// Why live capture failed.
#[derive(Debug)]
pub struct LiveError {
    /// The interface.
    pub interface: String,
    /// What libpcap said.
    pub message: String,
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "live capture on {}: {}", self.interface, self.message)
    }
}

impl std::error::Error for LiveError {}

/// A running capture on one interface.
pub struct LiveCapture {
    interface: String,
    capture: pcap::Capture<pcap::Active>,
    linktype: u32,
    number: u64,
}

impl fmt::Debug for LiveCapture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveCapture")
            .field("interface", &self.interface)
            .field("linktype", &self.linktype)
            .field("number", &self.number)
            .finish()
    }
}

impl LiveCapture {
    /// Opens `interface` with the BPF `filter`; [`Self::next_frame`] waits at
    /// most `timeout_ms` for a packet.
    pub fn open(interface: &str, filter: &str, timeout_ms: i32) -> Result<Self, LiveError> {
        let err = |e: pcap::Error| LiveError {
            interface: interface.to_string(),
            message: e.to_string(),
        };
        let mut capture = pcap::Capture::from_device(interface)
            .map_err(err)?
            .snaplen(65_535)
            .timeout(timeout_ms.max(1))
            .immediate_mode(true)
            .open()
            .map_err(err)?;
        capture.filter(filter, true).map_err(err)?;
        let linktype = u32::try_from(capture.get_datalink().0).unwrap_or(0);
        Ok(LiveCapture {
            interface: interface.to_string(),
            capture,
            linktype,
            number: 0,
        })
    }

    /// The same capture in non-blocking mode: [`Self::next_frame`] then
    /// returns `Ok(None)` at once when no packet is waiting. (On Linux, a
    /// blocking capture in immediate mode may wait for a packet past its
    /// timeout on a silent link; a caller that must notice time passing
    /// polls instead.)
    pub fn nonblocking(self) -> Result<Self, LiveError> {
        let LiveCapture {
            interface,
            capture,
            linktype,
            number,
        } = self;
        let capture = capture.setnonblock().map_err(|e| LiveError {
            interface: interface.clone(),
            message: e.to_string(),
        })?;
        Ok(LiveCapture {
            interface,
            capture,
            linktype,
            number,
        })
    }

    /// The next packet, or `Ok(None)` when the timeout passed without one
    /// (at once in non-blocking mode).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, LiveError> {
        match self.capture.next_packet() {
            Ok(packet) => {
                self.number += 1;
                let ts = packet.header.ts;
                let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
                let micros = u64::try_from(ts.tv_usec).unwrap_or(0);
                Ok(Some(Frame {
                    number: self.number,
                    offset: 0,
                    data_offset: 0,
                    timestamp_ns: secs.saturating_mul(1_000_000_000) + micros * 1_000,
                    linktype: self.linktype,
                    interface: 0,
                    orig_len: packet.header.len,
                    data: packet.data,
                    options: PacketOptions::new(&[], ByteOrder::Little),
                }))
            }
            Err(pcap::Error::TimeoutExpired) => Ok(None),
            Err(e) => Err(LiveError {
                interface: self.interface.clone(),
                message: e.to_string(),
            }),
        }
    }

    /// Packets lent so far.
    pub fn packets(&self) -> u64 {
        self.number
    }
}
