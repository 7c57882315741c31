//! The AF_PACKET raw-socket driver (feature `raw`): a [`Device`] on a real
//! Ethernet interface (a veth into a network namespace, or a port cabled to
//! a peer), through `pnet_datalink`.
//!
//! Two layers:
//!
//! - [`RawPort`] is the socket and nothing else: the pnet channel, the MAC
//!   filter, the counters, sending a frame, and receiving one with a
//!   timeout. It does not own a device; every call that moves frames takes
//!   the device (and the time) as arguments. [`RawPort::transmit`] fires
//!   the device's due timers and sends what it queued
//!   ([`crate::agent::dataplane::service`]); [`RawPort::receive`] waits at
//!   most a given time for one frame and hands it to `handle_frame`. It
//!   implements the agent's [`DataPlane`], so `metaroce-ref serve --iface`
//!   drives it between requests.
//! - [`RawDriver`] owns a [`Device`], a [`RawPort`] and a [`Clock`], and
//!   runs the polling loop of the crate documentation for programs that own
//!   their device (`metaroce-ref peer`):
//!
//!   1. fire the device's timers that are due (`handle_timeout`);
//!   2. drain `poll_transmit` and send every frame;
//!   3. let the caller act on the device (poll CQs, post work, decide to
//!      stop); drain `poll_transmit` again;
//!   4. wait for one frame, at most one *tick* (`RawConfig::tick`), and
//!      hand it to `handle_frame`.
//!
//! Both loops are made of the same two calls, `transmit` and `receive`.
//!
//! Receiving: a reader thread per port blocks in the socket and queues the
//! frames (bounded, `RawConfig::rx_queue`), so the socket is drained while
//! the device's owner is busy (serving an agent request, checking data),
//! and `receive` waits exactly as long as asked — no millisecond rounding
//! of a socket timeout. Time is [`Clock`] (an `Instant`) in nanoseconds.
//! Frames are built and parsed only by the codec inside the device; the
//! port only filters on the destination MAC, as a NIC does: a frame is
//! handed over when it is addressed to the device's MAC or to a group
//! address, and frames sent from the device's own MAC (copies of outgoing
//! traffic of other sockets) are not.
//!
//! Privileges: opening an AF_PACKET socket needs `CAP_NET_RAW` (root).
//! Nothing here panics on any frame or I/O error: errors are counted
//! ([`RawStats`]); only a persistent receive failure (1000 errors in a row,
//! about a second) ends a run with [`RawError::Receive`].

use crate::Device;
use crate::agent::dataplane::{Clock, DataPlane, service, wait_deadline};
use pnet_datalink::{Channel, Config, DataLinkReceiver, DataLinkSender, NetworkInterface};
use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Consecutive receive errors (other than timeouts) after which a run gives
/// up: the socket or interface is gone.
const MAX_CONSECUTIVE_RX_ERRORS: u32 = 1000;
/// The reader thread's pause after a receive error, so that a persistent
/// error takes about a second to be declared fatal rather than microseconds
/// (a link that flaps survives).
const RX_ERROR_BACKOFF: Duration = Duration::from_millis(1);
/// The reader thread's socket timeout: how long dropping a port may wait
/// for the thread to notice.
const READER_POLL: Duration = Duration::from_millis(10);

/// Options of [`RawPort::open`] and [`RawDriver::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawConfig {
    /// [`RawDriver`]: longest wait for a frame in one turn of the loop,
    /// which bounds how late a timer fires and how often the caller's
    /// condition runs; zero means busy polling. [`RawPort`]'s own waits are
    /// given per call.
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
    /// Frames received and not yet handed to the device, at most; more are
    /// dropped (and counted in [`RawStats::rx_dropped`]), as a NIC drops
    /// when its ring is full.
    pub rx_queue: usize,
    /// Receive buffer of the socket in bytes (`SO_RCVBUFFORCE` as root,
    /// else `SO_RCVBUF`, capped by `net.core.rmem_max`), Linux only; zero
    /// keeps the system default (`net.core.rmem_default`, 208 KiB: about
    /// 90 frames of a 1 KiB PMTU, less than one go-back-N burst of the
    /// default window). The kernel drops frames beyond it unseen.
    pub socket_rx_buffer: usize,
}

impl Default for RawConfig {
    fn default() -> Self {
        RawConfig {
            tick: Duration::from_millis(1),
            max_frame: 16 * 1024,
            write_timeout: Duration::from_millis(100),
            promiscuous: true,
            rx_queue: 8192,
            socket_rx_buffer: 4 << 20,
        }
    }
}

/// Counters of the port (the device keeps its own, SPEC §9.3).
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
    /// Frames dropped because the receive queue was full.
    pub rx_dropped: u64,
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

/// An unbound AF_PACKET socket with a receive buffer of `rx_buffer` bytes
/// (0: the default) for pnet to bind, and the buffer's size. Protocol 0:
/// it receives nothing until pnet binds it to the interface with
/// `ETH_P_ALL`, so no frame of another interface gets in first.
#[cfg(target_os = "linux")]
fn packet_socket(rx_buffer: usize) -> io::Result<(Option<i32>, Option<usize>)> {
    use rustix::net::{AddressFamily, SocketType, socket, sockopt};
    use std::os::fd::IntoRawFd;
    let fd = socket(AddressFamily::PACKET, SocketType::RAW, None)?;
    if rx_buffer > 0 && sockopt::set_socket_recv_buffer_size_force(&fd, rx_buffer).is_err() {
        // Without CAP_NET_ADMIN: as much as net.core.rmem_max allows.
        let _ = sockopt::set_socket_recv_buffer_size(&fd, rx_buffer);
    }
    let size = sockopt::socket_recv_buffer_size(&fd).ok();
    // pnet owns the descriptor from here (and closes it on every path).
    Ok((Some(fd.into_raw_fd()), size))
}

/// Elsewhere pnet opens its own socket, with the default buffer.
#[cfg(not(target_os = "linux"))]
fn packet_socket(_: usize) -> io::Result<(Option<i32>, Option<usize>)> {
    Ok((None, None))
}

/// What the reader thread queues.
enum RxEvent {
    Frame(Vec<u8>),
    Oversize,
    Error(String),
    /// The last event: receiving failed this many times in a row.
    Fatal(u32, io::Error),
}

/// The socket half of the driver: an AF_PACKET channel on one interface,
/// with the MAC filter and the counters, and no device. See the module
/// documentation.
pub struct RawPort {
    name: String,
    mac: Option<[u8; 6]>,
    tx: Box<dyn DataLinkSender>,
    rx: Receiver<RxEvent>,
    reader: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    rx_dropped: Arc<AtomicU64>,
    stats: RawStats,
    last_error: Option<String>,
    /// The receive failure that ended the reader thread, kept for every
    /// later `receive`.
    failed: Option<(u32, io::ErrorKind, String)>,
    socket_rx_buffer: Option<usize>,
}

impl fmt::Debug for RawPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawPort")
            .field("interface", &self.name)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Drop for RawPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join(); // within READER_POLL
        }
    }
}

impl RawPort {
    /// Opens an AF_PACKET socket on `interface` (all EtherTypes) and starts
    /// its reader thread.
    pub fn open(interface: &str, config: RawConfig) -> Result<RawPort, RawError> {
        let iface = find_interface(interface)?;
        let max_frame = config.max_frame.max(64);
        let open_err = |source| RawError::Open {
            name: interface.into(),
            source,
        };
        let (socket_fd, socket_rx_buffer) =
            packet_socket(config.socket_rx_buffer).map_err(open_err)?;
        let pnet_config = Config {
            socket_fd,
            read_buffer_size: max_frame,
            write_buffer_size: max_frame,
            read_timeout: Some(READER_POLL),
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
        let (queue_tx, queue_rx) = mpsc::sync_channel(config.rx_queue.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let rx_dropped = Arc::new(AtomicU64::new(0));
        let reader = {
            let (stop, dropped) = (Arc::clone(&stop), Arc::clone(&rx_dropped));
            std::thread::Builder::new()
                .name(format!("raw-rx-{interface}"))
                .spawn(move || reader(rx, &queue_tx, &stop, &dropped, max_frame))
                .map_err(open_err)?
        };
        Ok(RawPort {
            name: interface.into(),
            mac: iface.mac.map(|m| m.octets()),
            tx,
            rx: queue_rx,
            reader: Some(reader),
            stop,
            rx_dropped,
            stats: RawStats::default(),
            last_error: None,
            failed: None,
            socket_rx_buffer,
        })
    }

    /// The socket's receive buffer in bytes as the kernel reports it (it
    /// doubles the value asked for), if known.
    pub fn socket_rx_buffer(&self) -> Option<usize> {
        self.socket_rx_buffer
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.name
    }

    /// The interface's own MAC address, if it has one.
    pub fn interface_mac(&self) -> Option<[u8; 6]> {
        self.mac
    }

    /// The port's counters.
    pub fn stats(&self) -> RawStats {
        RawStats {
            rx_dropped: self.rx_dropped.load(Ordering::Relaxed),
            ..self.stats
        }
    }

    /// The last receive or send error, as text, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Sends one frame. A failure is counted and the frame dropped (the
    /// transport retransmits); it never ends a run.
    pub fn send(&mut self, frame: &[u8]) {
        match self.tx.send_to(frame, None) {
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

    /// Fires `device`'s timers if due at `now` and sends every frame it has
    /// queued.
    pub fn transmit(&mut self, device: &mut Device, now: u64) {
        let _ = service(device, now, |frame| {
            self.send(&frame);
            Ok(())
        });
    }

    /// Waits at most `timeout` for a frame addressed to `mac` (or to a
    /// group address) and not sent from it, and returns it; `None` when
    /// none came. Other frames are counted in `frames_filtered` and skipped.
    /// An error only when receiving has failed for good.
    pub fn recv_frame(
        &mut self,
        mac: [u8; 6],
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, RawError> {
        if let Some((consecutive, kind, text)) = &self.failed {
            return Err(RawError::Receive {
                name: self.name.clone(),
                consecutive: *consecutive,
                source: io::Error::new(*kind, text.clone()),
            });
        }
        let event = if timeout.is_zero() {
            match self.rx.try_recv() {
                Ok(event) => event,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => return Err(self.reader_gone()),
            }
        } else {
            match self.rx.recv_timeout(timeout) {
                Ok(event) => event,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => return Err(self.reader_gone()),
            }
        };
        match event {
            RxEvent::Frame(frame) => {
                let dst_ok = frame.get(0..6).is_some_and(|d| d == mac || d[0] & 1 == 1);
                let from_self = frame.get(6..12).is_some_and(|s| s == mac);
                if !dst_ok || from_self {
                    self.stats.frames_filtered += 1;
                    Ok(None)
                } else {
                    self.stats.frames_in += 1;
                    self.stats.bytes_in += frame.len() as u64;
                    Ok(Some(frame))
                }
            }
            RxEvent::Oversize => {
                self.stats.rx_oversize += 1;
                Ok(None)
            }
            RxEvent::Error(text) => {
                self.stats.rx_errors += 1;
                self.last_error = Some(format!("receive: {text}"));
                Ok(None)
            }
            RxEvent::Fatal(consecutive, source) => {
                self.stats.rx_errors += 1;
                self.last_error = Some(format!("receive: {source}"));
                self.failed = Some((consecutive, source.kind(), source.to_string()));
                Err(RawError::Receive {
                    name: self.name.clone(),
                    consecutive,
                    source,
                })
            }
        }
    }

    /// Waits at most `timeout` for a frame and, if it is addressed to
    /// `device`, hands it over at `clock.now_ns()`. Returns whether a frame
    /// was handed over; an error only when receiving has failed for good.
    pub fn receive(
        &mut self,
        device: &mut Device,
        clock: &Clock,
        timeout: Duration,
    ) -> Result<bool, RawError> {
        match self.recv_frame(device.config().mac, timeout)? {
            Some(frame) => {
                device.handle_frame(clock.now_ns(), &frame);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The reader thread ended without a fatal event (it cannot, short of
    /// a panic inside pnet): receiving is over.
    fn reader_gone(&mut self) -> RawError {
        let text = "the receive thread ended".to_string();
        self.failed = Some((0, io::ErrorKind::BrokenPipe, text.clone()));
        RawError::Receive {
            name: self.name.clone(),
            consecutive: 0,
            source: io::Error::new(io::ErrorKind::BrokenPipe, text),
        }
    }
}

/// The reader thread: socket → bounded queue, until `stop` or a persistent
/// failure.
fn reader(
    mut rx: Box<dyn DataLinkReceiver>,
    queue: &SyncSender<RxEvent>,
    stop: &AtomicBool,
    dropped: &AtomicU64,
    max_frame: usize,
) {
    let mut consecutive = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let event = match rx.next() {
            Ok(frame) => {
                consecutive = 0;
                if frame.len() >= max_frame {
                    RxEvent::Oversize
                } else {
                    RxEvent::Frame(frame.to_vec())
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
                continue;
            }
            Err(e) => {
                consecutive += 1;
                if consecutive >= MAX_CONSECUTIVE_RX_ERRORS {
                    let mut last = RxEvent::Fatal(consecutive, e);
                    // The consumer must see it: wait for room, not forever.
                    while !stop.load(Ordering::Relaxed) {
                        match queue.try_send(last) {
                            Err(TrySendError::Full(event)) => {
                                last = event;
                                std::thread::sleep(RX_ERROR_BACKOFF);
                            }
                            _ => break,
                        }
                    }
                    return;
                }
                std::thread::sleep(RX_ERROR_BACKOFF);
                RxEvent::Error(e.to_string())
            }
        };
        match queue.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => return,
        }
    }
}

impl DataPlane for RawPort {
    /// The agent's data plane on this interface: send what the device
    /// queued, wait for frames until `until_ns` or the device's next timer,
    /// hand them over, fire the timer, and so on until `until_ns`.
    fn pump(&mut self, device: &mut Device, clock: &Clock, until_ns: u64) -> io::Result<()> {
        loop {
            let now = clock.now_ns();
            self.transmit(device, now);
            if now >= until_ns {
                return Ok(());
            }
            let wait = Duration::from_nanos(wait_deadline(device, until_ns).saturating_sub(now));
            self.receive(device, clock, wait)
                .map_err(io::Error::other)?;
        }
    }
}

/// A [`Device`] on its own [`RawPort`], with the polling loop. See the
/// module documentation.
pub struct RawDriver {
    device: Device,
    port: RawPort,
    clock: Clock,
    tick: Duration,
}

impl fmt::Debug for RawDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawDriver")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl RawDriver {
    /// Opens a [`RawPort`] on `interface` and wraps `device`. The clock
    /// starts now: the device sees nanoseconds since this call.
    pub fn open(interface: &str, device: Device, config: RawConfig) -> Result<Self, RawError> {
        let port = RawPort::open(interface, config)?;
        Ok(RawDriver {
            device,
            port,
            clock: Clock::new(),
            tick: config.tick,
        })
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        self.port.interface()
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

    /// The port.
    pub fn port(&self) -> &RawPort {
        &self.port
    }

    /// Gives the device back (the socket closes).
    pub fn into_device(self) -> Device {
        self.device
    }

    /// The port's counters.
    pub fn stats(&self) -> RawStats {
        self.port.stats()
    }

    /// The last receive or send error, as text, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.port.last_error()
    }

    /// Nanoseconds since `open`, the device's clock.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Fires the device's due timers and sends everything it has queued.
    pub fn flush(&mut self) {
        self.port.transmit(&mut self.device, self.clock.now_ns());
    }

    /// Waits at most one tick for a frame and hands it to the device.
    /// Returns whether a frame was handed over.
    pub fn receive(&mut self) -> Result<bool, RawError> {
        self.port.receive(&mut self.device, &self.clock, self.tick)
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
            RawPort::open("mr-no-such-if", RawConfig::default()),
            Err(RawError::NoSuchInterface { .. })
        ));
        assert!(matches!(
            interface_mac("mr-no-such-if"),
            Err(RawError::NoSuchInterface { .. })
        ));
    }
}
