//! The AF_PACKET raw-socket driver (feature `raw`): a [`Device`] on a real
//! Ethernet interface (a veth into a network namespace, or a port cabled to
//! a peer), through an AF_PACKET socket of its own (`packet.rs`).
//!
//! Two layers:
//!
//! - [`RawPort`] is the socket and nothing else: the socket, the MAC
//!   filter, the counters, sending frames, and receiving with a timeout. It does not own a device; every call that moves frames takes
//!   the device (and the time) as arguments. [`RawPort::transmit`] fires
//!   the device's due timers and sends what it queued
//!   ([`crate::agent::dataplane::service`]); [`RawPort::receive`] waits at
//!   most a given time for a frame and hands it, and those queued behind
//!   it, to `handle_frame`. It
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
//!   4. wait for a frame, at most one *tick* (`RawConfig::tick`) and not past
//!      the device's next timer (`poll_timeout`), and
//!      hand it and those queued behind it to `handle_frame`.
//!
//! Both loops are made of the same two calls, `transmit` and `receive`.
//!
//! Receiving and sending are on the caller's thread, on a non-blocking
//! socket ([`super::packet`]): `receive` takes the frames queued in the
//! socket one `recv` each (at most [`RX_BATCH`] per call), and waits in
//! `poll(2)` only when none is queued; `transmit` sends what the device
//! queued [`SEND_BATCH`] frames to a `sendmmsg(2)`. There is no thread and
//! no queue of the driver's own: while the device's owner is busy (serving
//! an agent request, checking data) frames wait in the socket's receive
//! buffer (`RawConfig::socket_rx_buffer`, 4 MiB), which drops beyond it as
//! a NIC drops when its ring is full. A received frame is handed to the
//! device from the port's one receive buffer, without a copy or an
//! allocation. Time is [`Clock`] (an `Instant`) in nanoseconds. With
//! [`RawConfig::catch_up_after`] (the programs that move data, and the
//! agent), a service of the device that comes that long after the previous
//! one, or finds one of its timers due, first hands it the frames that
//! arrived in between, then fires its timers: a process
//! that waited milliseconds for a core then reads the acknowledgements
//! that came meanwhile before its retransmission timer can expire.
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

use super::packet::PacketSocket;
pub use super::packet::SEND_BATCH;
use crate::Device;
use crate::agent::dataplane::{Clock, DataPlane, Waker, service, wait_deadline};
use pnet_datalink::NetworkInterface;
use std::fmt;
use std::io;
use std::time::{Duration, Instant, SystemTime};

/// Consecutive receive errors (other than timeouts) after which a run gives
/// up: the socket or interface is gone.
const MAX_CONSECUTIVE_RX_ERRORS: u32 = 1000;
/// The pause after a receive error, so that a persistent error takes
/// about a second to be declared fatal rather than microseconds (a link
/// that flaps survives).
const RX_ERROR_BACKOFF: Duration = Duration::from_millis(1);
/// Frames one [`RawPort::receive`] takes from the socket at most before
/// the device's owner gets its turn (and what the device queued is sent).
pub const RX_BATCH: usize = 64;
/// Frames not for the device (filtered, oversize, receive errors) one
/// receive or catch-up reads past at most, besides its [`RX_BATCH`] frames
/// for the device. Without `ipv4_only` the socket gets a copy of every
/// frame the device sends: after a burst, those copies are queued ahead of
/// the acknowledgements that came back, and a batch counted in frames read
/// rather than frames handed stopped at the copies, so the device's timers
/// fired before it saw the acknowledgements (issue 19, C1: 64 copies of a
/// retransmission burst and its probes ahead of the MP ACK that covered
/// the next four retransmissions).
const RX_SKIP_MAX: usize = 16 * RX_BATCH;

/// How far one batch of receives has gone: frames handed to the device
/// and frames skipped, each with its own bound.
#[derive(Clone, Copy, Debug, Default)]
struct Batch {
    handed: usize,
    skipped: usize,
}

impl Batch {
    /// Whether another frame may be read.
    fn more(&self) -> bool {
        self.handed < RX_BATCH && self.skipped < RX_SKIP_MAX
    }

    /// Whether nothing has been read yet (the first read may wait).
    fn first(&self) -> bool {
        self.handed == 0 && self.skipped == 0
    }
}
/// [`RawConfig::catch_up_after`] of the programs that move data
/// (`metaroce-ref peer`, `perf`, `pingpong`).
pub const CATCH_UP_AFTER: Duration = Duration::from_millis(1);

/// Options of [`RawPort::open`] and [`RawDriver::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawConfig {
    /// [`RawDriver`]: longest wait for a frame in one turn of the loop
    /// (shorter when the device's next timer is sooner), which bounds how
    /// often the caller's condition runs; zero means busy polling. [`RawPort`]'s own waits are
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
    /// Take only IPv4 frames (EtherType 0x0800) from the kernel. The socket
    /// is then not a tap on the interface's output, so the frames it sends
    /// are not copied back to it (with every EtherType, each is cloned,
    /// read, and filtered out as sent from the device's own MAC: about as
    /// much work as receiving it). Frames of other EtherTypes then never
    /// reach the device, an IPv6 RoCE frame included, which the device
    /// would count in `malformed_drops` (SPEC §9.2): off by default, so
    /// that a device under conformance tests sees every frame; on for
    /// programs that move data (`metaroce-ref peer`, `perf`).
    pub ipv4_only: bool,
    /// Receive buffer of the socket in bytes (`SO_RCVBUFFORCE` as root,
    /// else `SO_RCVBUF`, capped by `net.core.rmem_max`), Linux only; zero
    /// keeps the system default (`net.core.rmem_default`, 208 KiB: about
    /// 90 frames of a 1 KiB PMTU, less than one go-back-N burst of the
    /// default window). The kernel drops frames beyond it unseen.
    pub socket_rx_buffer: usize,
    /// With `Some`, a service of the device that finds one of its timers
    /// due, or comes at least this long after the previous one (the process
    /// was off the CPU, or busy elsewhere), first hands the device the
    /// frames that arrived meanwhile ([`RawStats::catch_ups`]): on a loaded
    /// machine a process waits milliseconds for a core, and an
    /// acknowledgement waiting in the socket must not lose the race against
    /// the retransmission timeout it stops. `None` (the default: the
    /// conformance harness) fires the timers first; the programs that move
    /// data use [`CATCH_UP_AFTER`]; the agent a gap too long to occur, so
    /// it catches up only before a due timer.
    pub catch_up_after: Option<Duration>,
    /// How [`RawPort::receive`] services the device within one batch of
    /// received frames: after every frame ([`Service::PerFrame`], the
    /// default: the device sees the calls of a loop that turned once per
    /// frame) or once the batch is in ([`Service::PerBatch`]: the programs
    /// that move data). See [`Service`].
    pub service: Service,
    /// Ask the kernel for each received frame's arrival time
    /// (`SO_TIMESTAMPNS`), for [`RawPort::recv_frame_stamped`]: a reader
    /// that falls behind (a loaded machine, a debug build) then still knows
    /// when a frame came. Off by default (one `recvmsg(2)` with a control
    /// message a frame instead of a plain `recv`); the conformance
    /// harness turns it on.
    pub rx_timestamps: bool,
}

/// When [`RawPort::receive`] fires the device's timers and takes what it
/// queued, relative to the frames of one receive batch (at most
/// [`RX_BATCH`] frames already waiting in the socket, read without a wait).
///
/// Either way the frames queued during a batch leave together when the
/// batch is in (one `sendmmsg`); what differs is what the device is asked
/// for in between. Per frame, a responder that is polled after every frame
/// builds an acknowledgement whenever its coalescing timer (MP:
/// `mp_ack_coalesce_time`) has run out, and those acknowledgements then
/// leave at once, each superseded by the next. Per batch, the device is
/// handed every frame of the batch first (each at the time it is read),
/// then its due timers fire and its output is taken once: an MP responder
/// then sends one plain acknowledgement for the batch (a plain MP ACK
/// queued and not yet taken is replaced by a later one), leaving at the
/// same moment as the per-frame ones would have, and covering what they
/// covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Service {
    /// Timers and `poll_transmit` after every frame.
    #[default]
    PerFrame,
    /// Timers and `poll_transmit` once per receive batch.
    PerBatch,
}

impl Default for RawConfig {
    fn default() -> Self {
        RawConfig {
            tick: Duration::from_millis(1),
            max_frame: 16 * 1024,
            write_timeout: Duration::from_millis(100),
            promiscuous: true,
            ipv4_only: false,
            socket_rx_buffer: 4 << 20,
            catch_up_after: None,
            service: Service::PerFrame,
            rx_timestamps: false,
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
    /// Receive errors other than timeouts.
    pub rx_errors: u64,
    /// Frames the socket refused or timed out on (dropped; the transport
    /// retransmits).
    pub tx_errors: u64,
    /// Services of the device that came [`RawConfig::catch_up_after`] or
    /// more after the previous one and found frames waiting: those were
    /// handed over before the device's timers fired.
    pub catch_ups: u64,
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

/// What one receive attempt gave.
enum Rx {
    /// A frame for the device, of this length, in the receive buffer.
    Frame(usize),
    /// A frame that was not for the device (filtered, oversize, or a
    /// receive error): counted and skipped.
    Skipped,
    /// Nothing queued (after waiting as long as asked).
    Empty,
}

/// A frame [`RawPort::recv_frame_stamped`] received.
#[derive(Clone, Debug)]
pub struct StampedFrame {
    /// The frame.
    pub bytes: Vec<u8>,
    /// When the kernel received it (its wall clock), if it said.
    pub at: Option<SystemTime>,
}

/// The socket half of the driver: an AF_PACKET socket on one interface,
/// with the MAC filter, the counters and a receive buffer, and no device.
/// See the module documentation.
pub struct RawPort {
    name: String,
    mac: Option<[u8; 6]>,
    socket: PacketSocket,
    /// One frame, reused for every receive.
    rx_buf: Vec<u8>,
    /// Frames the device queued, waiting for one `sendmmsg`.
    tx_queue: Vec<Vec<u8>>,
    write_timeout: Duration,
    stats: RawStats,
    last_error: Option<String>,
    /// Receive errors in a row.
    consecutive_errors: u32,
    /// The receive failure that ended receiving, kept for every later
    /// `receive`.
    failed: Option<(u32, io::ErrorKind, String)>,
    /// [`RawConfig::catch_up_after`] in ns.
    catch_up_after: Option<u64>,
    /// When the device's timers were last given their turn (ns, the
    /// device's clock), for `catch_up_after`.
    last_service: Option<u64>,
    /// [`RawConfig::service`].
    service: Service,
    /// The kernel's arrival time of the frame received last, with
    /// [`RawConfig::rx_timestamps`].
    last_rx_at: Option<SystemTime>,
}

impl fmt::Debug for RawPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawPort")
            .field("interface", &self.name)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl RawPort {
    /// Opens an AF_PACKET socket on `interface` (all EtherTypes).
    pub fn open(interface: &str, config: RawConfig) -> Result<RawPort, RawError> {
        let iface = find_interface(interface)?;
        let max_frame = config.max_frame.max(64);
        let socket = PacketSocket::open(
            &iface,
            config.socket_rx_buffer,
            config.promiscuous,
            config.ipv4_only,
            config.rx_timestamps,
        )
        .map_err(|source| RawError::Open {
            name: interface.into(),
            source,
        })?;
        Ok(RawPort {
            name: interface.into(),
            mac: iface.mac.map(|m| m.octets()),
            socket,
            rx_buf: vec![0; max_frame],
            tx_queue: Vec::with_capacity(SEND_BATCH),
            write_timeout: config.write_timeout,
            stats: RawStats::default(),
            last_error: None,
            consecutive_errors: 0,
            failed: None,
            catch_up_after: config
                .catch_up_after
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            last_service: None,
            service: config.service,
            last_rx_at: None,
        })
    }

    /// The socket's receive buffer in bytes as the kernel reports it (it
    /// doubles the value asked for), if known.
    pub fn socket_rx_buffer(&self) -> Option<usize> {
        self.socket.rx_buffer()
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
        self.stats
    }

    /// The last receive or send error, as text, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Sends one frame (waiting at most the write timeout for room). A
    /// failure is counted and the frame dropped (the transport
    /// retransmits); it never ends a run.
    pub fn send(&mut self, frame: &[u8]) {
        self.send_all(&[frame]);
    }

    /// Sends `frames` in order, [`SEND_BATCH`] to a system call, waiting at
    /// most the write timeout for room each time the send buffer is full.
    /// Failures are counted and those frames dropped, as in [`Self::send`].
    /// Returns how many were sent.
    pub fn send_all<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> usize {
        let mut at = 0;
        let mut sent = 0;
        while at < frames.len() {
            match self.socket.send_batch(&frames[at..]) {
                Ok(n) => {
                    for f in &frames[at..at + n] {
                        self.stats.frames_out += 1;
                        self.stats.bytes_out += f.as_ref().len() as u64;
                    }
                    at += n;
                    sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match self.socket.wait(self.write_timeout, true) {
                        Ok(true) => {}
                        Ok(false) | Err(_) => {
                            // No room within the write timeout: drop one.
                            self.stats.tx_errors += 1;
                            self.last_error = Some(format!("send: {e}"));
                            at += 1;
                        }
                    }
                }
                Err(e) => {
                    // The first frame was refused (too long, link down):
                    // drop it and go on with the next.
                    self.stats.tx_errors += 1;
                    self.last_error = Some(format!("send: {e}"));
                    at += 1;
                }
            }
        }
        sent
    }

    /// Fires `device`'s timers if due at `now` and sends every frame it has
    /// queued, in batches.
    pub fn transmit(&mut self, device: &mut Device, now: u64) {
        self.take_from(device, now);
        self.send_queued();
    }

    /// Fires `device`'s due timers and moves what it queued to the port's
    /// send queue, sending whenever [`SEND_BATCH`] frames are waiting.
    /// After a gap of [`RawConfig::catch_up_after`] or more since the
    /// previous turn, the frames that arrived meanwhile come first
    /// ([`Self::catch_up`]).
    fn take_from(&mut self, device: &mut Device, now: u64) {
        if let Some(after) = self.catch_up_after {
            if catch_up_due(after, self.last_service, device.poll_timeout(), now) {
                self.catch_up(device, now);
            }
            self.last_service = Some(now);
        }
        let mut queue = std::mem::take(&mut self.tx_queue);
        let _ = service(device, now, |frame| {
            queue.push(frame);
            if queue.len() >= SEND_BATCH {
                self.send_all(&queue);
                queue.clear();
            }
            Ok(())
        });
        self.tx_queue = queue;
    }

    /// Hands `device` the frames queued in the socket (at most
    /// [`RX_BATCH`], without waiting), each at `now`, taking what it sends
    /// in answer, but fires no timer. Called when the device was not
    /// serviced for [`RawConfig::catch_up_after`] or more: had the process been on
    /// the CPU, those frames would have reached the device before its
    /// timers came due, so an acknowledgement that waited in the socket
    /// must not lose the race against the retransmission timeout it
    /// stops (on a loaded machine, a process waits milliseconds for a
    /// core). The timers fire right after, in [`Self::take_from`], and
    /// what the device queued meanwhile leaves after the catch-up.
    fn catch_up(&mut self, device: &mut Device, now: u64) {
        let mac = device.config().mac;
        let mut batch = Batch::default();
        while batch.more() {
            match self.recv_one(mac, Duration::ZERO) {
                Ok(Rx::Frame(len)) => {
                    device.handle_frame(now, &self.rx_buf[..len]);
                    batch.handed += 1;
                    // Queued, not sent, until the catch-up is over: every
                    // frame of it is handed over at the same `now`, so an
                    // answer to a frame sent now, read before the end,
                    // would give the device an RTT sample of 0 (which as
                    // an MP requester's smallest sample made every later
                    // one late, §7.12, and cwnd never grew again).
                    while let Some(frame) = device.poll_transmit() {
                        self.tx_queue.push(frame);
                    }
                }
                Ok(Rx::Skipped) => batch.skipped += 1,
                // A failure for good is returned by the next `receive`.
                Ok(Rx::Empty) | Err(_) => break,
            }
        }
        if batch.handed > 0 {
            self.stats.catch_ups += 1;
        }
    }

    /// Sends the port's send queue.
    fn send_queued(&mut self) {
        if !self.tx_queue.is_empty() {
            let queue = std::mem::take(&mut self.tx_queue);
            self.send_all(&queue);
            self.tx_queue = queue;
            self.tx_queue.clear();
        }
    }

    /// One receive: the next queued frame, waiting at most `timeout` for
    /// one when none is queued, filtered by `mac`.
    fn recv_one(&mut self, mac: [u8; 6], timeout: Duration) -> Result<Rx, RawError> {
        if let Some((consecutive, kind, text)) = &self.failed {
            return Err(RawError::Receive {
                name: self.name.clone(),
                consecutive: *consecutive,
                source: io::Error::new(*kind, text.clone()),
            });
        }
        let mut got = self.socket.try_recv(&mut self.rx_buf);
        if matches!(got, Ok(None)) && !timeout.is_zero() {
            got = match self.socket.wait(timeout, false) {
                Ok(true) => self.socket.try_recv(&mut self.rx_buf),
                Ok(false) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let len = match got {
            Ok(Some(rx)) => {
                self.last_rx_at = rx.at;
                rx.len
            }
            Ok(None) => return Ok(Rx::Empty),
            Err(e) => return self.rx_error(e),
        };
        self.consecutive_errors = 0;
        if len >= self.rx_buf.len() {
            self.stats.rx_oversize += 1;
            return Ok(Rx::Skipped);
        }
        let frame = &self.rx_buf[..len];
        let dst_ok = frame.get(0..6).is_some_and(|d| d == mac || d[0] & 1 == 1);
        let from_self = frame.get(6..12).is_some_and(|s| s == mac);
        if !dst_ok || from_self {
            self.stats.frames_filtered += 1;
            return Ok(Rx::Skipped);
        }
        self.stats.frames_in += 1;
        self.stats.bytes_in += len as u64;
        Ok(Rx::Frame(len))
    }

    /// Counts a receive error; after [`MAX_CONSECUTIVE_RX_ERRORS`] in a row
    /// (about a second, with a pause after each) receiving has failed for
    /// good.
    fn rx_error(&mut self, e: io::Error) -> Result<Rx, RawError> {
        self.stats.rx_errors += 1;
        self.consecutive_errors += 1;
        self.last_error = Some(format!("receive: {e}"));
        if self.consecutive_errors >= MAX_CONSECUTIVE_RX_ERRORS {
            let consecutive = self.consecutive_errors;
            self.failed = Some((consecutive, e.kind(), e.to_string()));
            return Err(RawError::Receive {
                name: self.name.clone(),
                consecutive,
                source: e,
            });
        }
        std::thread::sleep(RX_ERROR_BACKOFF);
        Ok(Rx::Skipped)
    }

    /// Waits at most `timeout` for a frame addressed to `mac` (or to a
    /// group address) and not sent from it, and returns a copy of it;
    /// `None` when none came. Other frames are counted in `frames_filtered`
    /// and skipped. An error only when receiving has failed for good.
    pub fn recv_frame(
        &mut self,
        mac: [u8; 6],
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, RawError> {
        self.recv_with(mac, timeout, <[u8]>::to_vec)
    }

    /// As [`Self::recv_frame`], with the time the kernel received the
    /// frame when the port was opened with [`RawConfig::rx_timestamps`]
    /// (else, or if the kernel gave none, `None`).
    pub fn recv_frame_stamped(
        &mut self,
        mac: [u8; 6],
        timeout: Duration,
    ) -> Result<Option<StampedFrame>, RawError> {
        self.last_rx_at = None;
        let frame = self.recv_frame(mac, timeout)?;
        Ok(frame.map(|bytes| StampedFrame {
            bytes,
            at: self.last_rx_at,
        }))
    }

    /// As [`Self::recv_frame`], but lends the frame to `f` (in the port's
    /// receive buffer, no copy) and returns what `f` returns.
    pub fn recv_with<R>(
        &mut self,
        mac: [u8; 6],
        timeout: Duration,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, RawError> {
        match self.recv_one(mac, timeout)? {
            Rx::Frame(len) => Ok(Some(f(&self.rx_buf[..len]))),
            Rx::Skipped | Rx::Empty => Ok(None),
        }
    }

    /// Waits at most `timeout` for a frame, then hands it and the frames
    /// queued behind it (at most [`RX_BATCH`] in all, without waiting
    /// again) that are addressed to `device` to it, each at
    /// `clock.now_ns()`. With [`Service::PerFrame`] the device's due timers
    /// fire and what it queued is taken after each frame, as if the loop
    /// had turned once per frame (the device sees the same calls, so it
    /// acknowledges exactly as it would frame by frame); with
    /// [`Service::PerBatch`], once after the last frame of the batch.
    /// Either way it is sent once the batch is in, in [`SEND_BATCH`]es.
    /// Returns whether a frame was handed over; an error only when
    /// receiving has failed for good.
    pub fn receive(
        &mut self,
        device: &mut Device,
        clock: &Clock,
        timeout: Duration,
    ) -> Result<bool, RawError> {
        let mac = device.config().mac;
        let mut batch = Batch::default();
        while batch.more() {
            let wait = if batch.first() {
                timeout
            } else {
                Duration::ZERO
            };
            match self.recv_one(mac, wait) {
                Ok(Rx::Frame(len)) => {
                    let now = clock.now_ns();
                    device.handle_frame(now, &self.rx_buf[..len]);
                    if self.service == Service::PerFrame {
                        self.take_from(device, now);
                    }
                    batch.handed += 1;
                }
                Ok(Rx::Skipped) => batch.skipped += 1,
                Ok(Rx::Empty) => break,
                Err(e) => {
                    if batch.handed > 0 && self.service == Service::PerBatch {
                        self.take_from(device, clock.now_ns());
                    }
                    self.send_queued();
                    return Err(e);
                }
            }
        }
        if batch.handed > 0 && self.service == Service::PerBatch {
            self.take_from(device, clock.now_ns());
        }
        self.send_queued();
        Ok(batch.handed > 0)
    }
}

impl DataPlane for RawPort {
    /// The agent's data plane on this interface: send what the device
    /// queued, wait for frames until `until_ns` or the device's next timer,
    /// hand them over, fire the timer, and so on until `until_ns`.
    /// Returns early, once what it has received is handed over and what
    /// the device queued is sent, when the [`DataPlane::waker`] ended its
    /// wait (a request arrived).
    fn pump(&mut self, device: &mut Device, clock: &Clock, until_ns: u64) -> io::Result<()> {
        loop {
            let now = clock.now_ns();
            self.transmit(device, now);
            if now >= until_ns || self.socket.take_woken() {
                return Ok(());
            }
            let wait = Duration::from_nanos(wait_deadline(device, until_ns).saturating_sub(now));
            self.receive(device, clock, wait)
                .map_err(io::Error::other)?;
        }
    }

    /// The socket's wake-up eventfd: a request no longer waits for the
    /// end of the slice (nor the requester for its RTO, see the trait).
    fn waker(&mut self) -> Option<Waker> {
        self.socket.waker()
    }
}

/// Whether a service of the device at `now` first hands it the frames
/// queued in the socket ([`RawConfig::catch_up_after`] = `after`, in ns):
/// when the previous service (`last`) is `after` or more ago, or when one
/// of the device's timers (`next_timer`, its `poll_timeout`) is due. A
/// timer that is due must not beat a frame that arrived before it: the
/// acknowledgement waiting in the socket stops the retransmission it would
/// fire (issue 19, C1: an MP requester off the CPU for 660 µs, less than
/// `after`, retransmitted 29 packets that two queued ACKs covered).
fn catch_up_due(after: u64, last: Option<u64>, next_timer: Option<u64>, now: u64) -> bool {
    let gap = last.map_or(0, |t| now.saturating_sub(t));
    gap >= after || next_timer.is_some_and(|t| t <= now)
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

    /// Waits at most one tick, and not past the device's next timer, for a
    /// frame and hands it, and those queued behind it (up to
    /// [`RX_BATCH`]), to the device. Returns whether a frame was handed
    /// over.
    pub fn receive(&mut self) -> Result<bool, RawError> {
        // No later than the device's next timer (an ACK to coalesce, a
        // retransmission): the timer fires on time, not up to a tick late.
        let now = self.clock.now_ns();
        let wait = match self.device.poll_timeout() {
            Some(t) => self.tick.min(Duration::from_nanos(t.saturating_sub(now))),
            None => self.tick,
        };
        self.port.receive(&mut self.device, &self.clock, wait)
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
    fn queued_frames_come_before_a_due_timer() {
        let ms = 1_000_000;
        // A long gap since the previous service.
        assert!(catch_up_due(ms, Some(0), None, 5 * ms));
        // A short gap and no timer due: the timers fire at once.
        assert!(!catch_up_due(ms, Some(4 * ms + 340_000), None, 5 * ms));
        assert!(!catch_up_due(
            ms,
            Some(4 * ms + 340_000),
            Some(6 * ms),
            5 * ms
        ));
        assert!(!catch_up_due(ms, None, None, 5 * ms));
        // A short gap but a timer due (the retransmission timeout of C1):
        // the queued acknowledgements first.
        assert!(catch_up_due(
            ms,
            Some(4 * ms + 340_000),
            Some(5 * ms),
            5 * ms
        ));
        assert!(catch_up_due(ms, None, Some(3 * ms), 5 * ms));
    }

    #[test]
    fn copies_of_sent_frames_do_not_use_up_a_batch() {
        // A burst of 64 frames sent (their copies queued first), then the
        // acknowledgement: the batch reads past the copies to it.
        let mut batch = Batch::default();
        assert!(batch.first());
        for _ in 0..RX_BATCH {
            assert!(batch.more());
            batch.skipped += 1;
        }
        assert!(!batch.first());
        assert!(
            batch.more(),
            "the acknowledgement behind the copies is read"
        );
        batch.handed += 1;
        // Both bounds hold.
        while batch.more() {
            batch.handed += 1;
        }
        assert_eq!(batch.handed, RX_BATCH);
        let mut skips = Batch::default();
        while skips.more() {
            skips.skipped += 1;
        }
        assert_eq!(skips.skipped, RX_SKIP_MAX);
    }

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
