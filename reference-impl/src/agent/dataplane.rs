//! The data-plane side of the agent server: the [`DataPlane`] trait every
//! frame driver implements, the [`Clock`] the server owns, and two drivers:
//! [`ChannelLink`] (two devices joined in memory, for tests and demos) and
//! [`NullLink`] (no wire: frames are discarded).
//!
//! ## Contract of [`DataPlane::pump`]
//!
//! The server calls `pump(device, clock, until_ns)` between requests, with
//! `until_ns` a short slice ahead (1 ms by default). The driver:
//!
//! 1. sends every frame the device has queued (`poll_transmit` until
//!    `None`) — verbs calls made since the last pump queued them;
//! 2. waits for received frames until `until_ns` or the device's
//!    `poll_timeout()`, whichever is first, handing each to
//!    `handle_frame(clock.now_ns(), ..)`;
//! 3. calls `handle_timeout(now)` when `now` reaches `poll_timeout()`,
//!    and sends what that and each received frame queued;
//! 4. returns at `until_ns` at the latest (earlier is allowed), and soon
//!    after its [`DataPlane::waker`] is called, if it gave one.
//!
//! Before serving requests the server also calls `pump` with `until_ns`
//! already reached, to give the device the time at which the verbs act:
//! the data plane is the only caller of `handle_timeout`, so a driver that
//! hands frames which waited in its queue before the timers fire (the
//! raw driver's `catch_up_after`) decides that order everywhere.
//!
//! [`service`] and [`wait_deadline`] do steps 1 and 3 and compute the wait
//! of step 2; a driver only adds its medium. The raw-socket driver
//! (`drivers::raw::RawPort`, feature `raw`) is the same loop around an
//! AF_PACKET socket (AGENT.md §10).

use crate::Device;
use std::io;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Monotonic time in nanoseconds since the server started. The only clock:
/// the core gets time only through `handle_frame` / `handle_timeout`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock starting now (at a time of 0).
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    /// Nanoseconds since the clock started.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Called from any thread, ends the data plane's current (or next) wait
/// for frames early: see [`DataPlane::waker`].
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// A frame driver the agent server drives between requests.
pub trait DataPlane: Send {
    /// Moves frames and time until `until_ns` (see the module contract).
    /// An error stops the server: return one only when the medium is gone
    /// for good, not for one lost frame.
    fn pump(&mut self, device: &mut Device, clock: &Clock, until_ns: u64) -> io::Result<()>;

    /// A [`Waker`] the server calls when a request arrives: the pump under
    /// way (or the next one) then returns soon after, so the request is
    /// served at once and not only at the end of the slice. Without one
    /// (the default), a request waits up to one pump slice: with an MP QP
    /// that is as long as `mp_rto_init`, so a work request posted while
    /// the first one's packets are in flight left only after their
    /// retransmission timeout had fired (found over veth with
    /// `mp.req.sack_reserved_psn`). Asked for once, before serving.
    fn waker(&mut self) -> Option<Waker> {
        None
    }
}

impl<D: DataPlane + ?Sized> DataPlane for Box<D> {
    fn pump(&mut self, device: &mut Device, clock: &Clock, until_ns: u64) -> io::Result<()> {
        (**self).pump(device, clock, until_ns)
    }

    fn waker(&mut self) -> Option<Waker> {
        (**self).waker()
    }
}

/// Gives the device the time `now` (firing the timers that are due) and
/// hands every queued frame to `send` (steps 1 and 3 of the contract).
///
/// The time is given on every call, not only when a timer is due: verbs
/// calls act at the latest time the device was told, so a device left idle
/// (say, for seconds of out-of-band connection setup) would otherwise arm
/// the timers of its next work request in the past.
pub fn service(
    device: &mut Device,
    now: u64,
    mut send: impl FnMut(Vec<u8>) -> io::Result<()>,
) -> io::Result<()> {
    device.handle_timeout(now);
    while let Some(frame) = device.poll_transmit() {
        send(frame)?;
    }
    Ok(())
}

/// The time until which a driver may block waiting for a frame: `until_ns`
/// or the device's next timer, whichever is first.
pub fn wait_deadline(device: &Device, until_ns: u64) -> u64 {
    device.poll_timeout().map_or(until_ns, |t| t.min(until_ns))
}

/// One end of an in-memory cable: frames sent on one end arrive at the
/// other, in order, without loss. A frame sent after the other end is
/// dropped is lost, as on an unplugged cable.
#[derive(Debug)]
pub struct ChannelLink {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    peer_gone: bool,
}

impl ChannelLink {
    /// The two ends of a cable.
    pub fn pair() -> (ChannelLink, ChannelLink) {
        let (a_tx, b_rx) = mpsc::channel();
        let (b_tx, a_rx) = mpsc::channel();
        (
            ChannelLink {
                tx: a_tx,
                rx: a_rx,
                peer_gone: false,
            },
            ChannelLink {
                tx: b_tx,
                rx: b_rx,
                peer_gone: false,
            },
        )
    }
}

impl DataPlane for ChannelLink {
    fn pump(&mut self, device: &mut Device, clock: &Clock, until_ns: u64) -> io::Result<()> {
        loop {
            let now = clock.now_ns();
            let tx = &self.tx;
            service(device, now, |frame| {
                let _ = tx.send(frame); // the peer may be gone: frame lost
                Ok(())
            })?;
            if now >= until_ns {
                return Ok(());
            }
            let wait = Duration::from_nanos(wait_deadline(device, until_ns).saturating_sub(now));
            if self.peer_gone {
                std::thread::sleep(wait);
                continue;
            }
            match self.rx.recv_timeout(wait) {
                Ok(frame) => {
                    device.handle_frame(clock.now_ns(), &frame);
                    while let Ok(frame) = self.rx.try_recv() {
                        device.handle_frame(clock.now_ns(), &frame);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.peer_gone = true,
            }
        }
    }
}

/// No wire: every frame sent is counted and discarded; nothing arrives.
/// Useful for control-plane tests and for an agent without a data plane.
#[derive(Debug, Default)]
pub struct NullLink {
    /// Frames discarded so far.
    pub discarded: u64,
}

impl DataPlane for NullLink {
    fn pump(&mut self, device: &mut Device, clock: &Clock, until_ns: u64) -> io::Result<()> {
        loop {
            let now = clock.now_ns();
            let discarded = &mut self.discarded;
            service(device, now, |_| {
                *discarded += 1;
                Ok(())
            })?;
            if now >= until_ns {
                return Ok(());
            }
            let wait = wait_deadline(device, until_ns).saturating_sub(now);
            std::thread::sleep(Duration::from_nanos(wait));
        }
    }
}
