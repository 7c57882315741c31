//! The AF_PACKET raw-socket driver (feature `raw`): a [`Device`] on a real
//! Ethernet interface (a veth into a network namespace, or a port cabled to
//! a peer), through `pnet_datalink`.
//!
//! The driver is the polling loop of the crate documentation around a
//! socket and a clock, and nothing more:
//!
//! 1. fire the device's timers that are due (`handle_timeout`);
//! 2. drain `poll_transmit` and send every frame;
//! 3. let the caller act on the device (poll CQs, post work, decide to stop);
//!    drain `poll_transmit` again;
//! 4. wait for one frame, at most one *tick* (`RawConfig::tick`), and hand
//!    it to `handle_frame`.
//!
//! Time is `Instant` converted to nanoseconds since [`RawDriver::open`].
//! The wait is pnet's read timeout, fixed when the socket is opened and of
//! millisecond granularity, so timers fire up to one tick late (1 ms by
//! default; the transport's timers are tens of milliseconds). Frames are
//! built and parsed only by the codec inside the device; the driver only
//! filters on the destination MAC, as a NIC does: a frame is handed over
//! when it is addressed to the device's MAC or to a group address, and
//! frames sent from the device's own MAC (copies of outgoing traffic of
//! other sockets) are not.
//!
//! Privileges: opening an AF_PACKET socket needs `CAP_NET_RAW` (root).
//! Nothing here panics on any frame or I/O error: errors are counted
//! ([`RawStats`]); only a persistent receive failure ends a run with
//! [`RawError::Receive`].

use crate::Device;
use pnet_datalink::{Channel, Config, DataLinkReceiver, DataLinkSender, NetworkInterface};
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

/// Consecutive receive errors (other than timeouts) after which a run gives
/// up: the socket or interface is gone.
const MAX_CONSECUTIVE_RX_ERRORS: u32 = 1000;

/// Options of [`RawDriver::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawConfig {
    /// Longest wait for a frame in one turn of the loop, which bounds how
    /// late a timer fires. Rounded down to whole milliseconds by pnet; zero
    /// means busy polling.
    pub tick: Duration,
    /// Receive buffer: the largest frame accepted. Longer frames are
    /// truncated by the kernel, counted in [`RawStats::rx_oversize`] and
    /// dropped.
    pub max_frame: usize,
    /// Longest wait for room in the socket's send buffer before a frame is
    /// dropped (and counted in [`RawStats::tx_errors`]).
    pub write_timeout: Duration,
    /// Put the interface in promiscuous mode, needed when the device's MAC
    /// is not the interface's own.
    pub promiscuous: bool,
}

impl Default for RawConfig {
    fn default() -> Self {
        RawConfig {
            tick: Duration::from_millis(1),
            max_frame: 16 * 1024,
            write_timeout: Duration::from_millis(100),
            promiscuous: true,
        }
    }
}

/// Counters of the driver (the device keeps its own, SPEC §9.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawStats {
    /// Frames handed to the device.
    pub frames_in: u64,
    /// Bytes of those frames.
    pub bytes_in: u64,
    /// Frames sent on the socket.
    pub frames_out: u64,
    /// Bytes of those frames.
    pub bytes_out: u64,
    /// Frames not addressed to the device (other MAC, or sent by it).
    pub frames_filtered: u64,
    /// Frames that filled the receive buffer (probably truncated): dropped.
    pub rx_oversize: u64,
    /// Receive errors other than timeouts.
    pub rx_errors: u64,
    /// Frames the socket refused or timed out on (dropped; the transport
    /// retransmits).
    pub tx_errors: u64,
}

/// Why a run ended before its condition held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The caller's condition returned `true`.
    Done,
    /// The deadline passed first.
    Deadline,
}

/// Errors of opening or running the driver.
#[derive(Debug)]
pub enum RawError {
    /// No interface of that name.
    NoSuchInterface {
        /// The name asked for.
        name: String,
    },
    /// The interface has no MAC address (not Ethernet).
    NoMac {
        /// The interface.
        name: String,
    },
    /// The AF_PACKET channel could not be opened (often: not root).
    Open {
        /// The interface.
        name: String,
        /// The OS error.
        source: io::Error,
    },
    /// pnet returned a channel that is not Ethernet.
    NotEthernet {
        /// The interface.
        name: String,
    },
    /// Receiving failed `consecutive` times in a row.
    Receive {
        /// The interface.
        name: String,
        /// Failures in a row.
        consecutive: u32,
        /// The last OS error.
        source: io::Error,
    },
}

impl fmt::Display for RawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawError::NoSuchInterface { name } => write!(f, "raw driver: no interface {name:?}"),
            RawError::NoMac { name } => {
                write!(f, "raw driver: interface {name:?} has no MAC address")
            }
            RawError::Open { name, source } => write!(
                f,
                "raw driver: cannot open an AF_PACKET socket on {name:?} \
                 (needs CAP_NET_RAW): {source}"
            ),
            RawError::NotEthernet { name } => {
                write!(f, "raw driver: {name:?} did not give an Ethernet channel")
            }
            RawError::Receive {
                name,
                consecutive,
                source,
            } => write!(
                f,
                "raw driver: receive on {name:?} failed {consecutive} times in a row: {source}"
            ),
        }
    }
}

impl std::error::Error for RawError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RawError::Open { source, .. } | RawError::Receive { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn find_interface(name: &str) -> Result<NetworkInterface, RawError> {
    pnet_datalink::interfaces()
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| RawError::NoSuchInterface { name: name.into() })
}

/// The MAC address of an interface (for a device that uses the
/// interface's own address).
pub fn interface_mac(name: &str) -> Result<[u8; 6], RawError> {
    find_interface(name)?
        .mac
        .map(|m| m.octets())
        .ok_or_else(|| RawError::NoMac { name: name.into() })
}

/// A [`Device`] on an AF_PACKET socket. See the module documentation.
pub struct RawDriver {
    device: Device,
    name: String,
    tx: Box<dyn DataLinkSender>,
    rx: Box<dyn DataLinkReceiver>,
    start: Instant,
    max_frame: usize,
    stats: RawStats,
    consecutive_rx_errors: u32,
    last_error: Option<String>,
}

impl fmt::Debug for RawDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawDriver")
            .field("interface", &self.name)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl RawDriver {
    /// Opens an AF_PACKET socket on `interface` (all EtherTypes) and wraps
    /// `device`. The clock starts now: the device sees nanoseconds since
    /// this call.
    pub fn open(interface: &str, device: Device, config: RawConfig) -> Result<Self, RawError> {
        let iface = find_interface(interface)?;
        let pnet_config = Config {
            read_buffer_size: config.max_frame.max(64),
            write_buffer_size: config.max_frame.max(64),
            read_timeout: Some(config.tick),
            write_timeout: Some(config.write_timeout),
            promiscuous: config.promiscuous,
            ..Config::default()
        };
        let (tx, rx) = match pnet_datalink::channel(&iface, pnet_config) {
            Ok(Channel::Ethernet(tx, rx)) => (tx, rx),
            Ok(_) => {
                return Err(RawError::NotEthernet {
                    name: interface.into(),
                });
            }
            Err(source) => {
                return Err(RawError::Open {
                    name: interface.into(),
                    source,
                });
            }
        };
        Ok(RawDriver {
            device,
            name: interface.into(),
            tx,
            rx,
            start: Instant::now(),
            max_frame: config.max_frame.max(64),
            stats: RawStats::default(),
            consecutive_rx_errors: 0,
            last_error: None,
        })
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.name
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device, for verbs calls. Frames that a call queues leave at the
    /// next turn of the loop.
    pub fn device_mut(&mut self) -> &mut Device {
        &mut self.device
    }

    /// Gives the device back (the socket closes).
    pub fn into_device(self) -> Device {
        self.device
    }

    /// The driver's counters.
    pub fn stats(&self) -> &RawStats {
        &self.stats
    }

    /// The last receive or send error, as text, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Nanoseconds since `open`, the device's clock.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Fires the device's due timers and sends everything it has queued.
    pub fn flush(&mut self) {
        let now = self.now_ns();
        if self.device.poll_timeout().is_some_and(|t| t <= now) {
            self.device.handle_timeout(now);
        }
        while let Some(frame) = self.device.poll_transmit() {
            match self.tx.send_to(&frame, None) {
                Some(Ok(())) => {
                    self.stats.frames_out += 1;
                    self.stats.bytes_out += frame.len() as u64;
                }
                Some(Err(e)) => {
                    self.stats.tx_errors += 1;
                    self.last_error = Some(format!("send: {e}"));
                }
                None => {
                    self.stats.tx_errors += 1;
                    self.last_error = Some("send: frame larger than the write buffer".into());
                }
            }
        }
    }

    /// Waits at most one tick for a frame and hands it to the device.
    /// Returns whether a frame was handed over.
    pub fn receive(&mut self) -> Result<bool, RawError> {
        match self.rx.next() {
            Ok(frame) => {
                self.consecutive_rx_errors = 0;
                let mac = self.device.config().mac;
                let dst_ok = frame.get(0..6).is_some_and(|d| d == mac || d[0] & 1 == 1);
                let from_self = frame.get(6..12).is_some_and(|s| s == mac);
                if frame.len() >= self.max_frame {
                    self.stats.rx_oversize += 1;
                    Ok(false)
                } else if !dst_ok || from_self {
                    self.stats.frames_filtered += 1;
                    Ok(false)
                } else {
                    self.stats.frames_in += 1;
                    self.stats.bytes_in += frame.len() as u64;
                    let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    self.device.handle_frame(now, frame);
                    Ok(true)
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(false)
            }
            Err(source) => {
                self.stats.rx_errors += 1;
                self.consecutive_rx_errors += 1;
                self.last_error = Some(format!("receive: {source}"));
                if self.consecutive_rx_errors >= MAX_CONSECUTIVE_RX_ERRORS {
                    return Err(RawError::Receive {
                        name: self.name.clone(),
                        consecutive: self.consecutive_rx_errors,
                        source,
                    });
                }
                Ok(false)
            }
        }
    }

    /// Runs the loop until `done(device)` returns `true` or `deadline`
    /// passes. `done` is called once per turn (after every received frame
    /// and at least once per tick); it may poll CQs and post work, which is
    /// sent before the next wait. A server passes a far deadline and a
    /// condition that watches for shutdown; a test passes its time budget.
    pub fn run_until(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&mut Device) -> bool,
    ) -> Result<RunOutcome, RawError> {
        loop {
            self.flush();
            let finished = done(&mut self.device);
            self.flush();
            if finished {
                return Ok(RunOutcome::Done);
            }
            if Instant::now() >= deadline {
                return Ok(RunOutcome::Deadline);
            }
            self.receive()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceConfig;
    use core::net::Ipv4Addr;

    #[test]
    fn unknown_interface_is_an_error_not_a_panic() {
        let dev = Device::new(
            DeviceConfig::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 99, 0, 1)),
            [7; 32],
        );
        let err = RawDriver::open("mr-no-such-if", dev, RawConfig::default()).unwrap_err();
        assert!(matches!(err, RawError::NoSuchInterface { ref name } if name == "mr-no-such-if"));
        assert!(err.to_string().contains("mr-no-such-if"));
        assert!(matches!(
            interface_mac("mr-no-such-if"),
            Err(RawError::NoSuchInterface { .. })
        ));
    }
}
