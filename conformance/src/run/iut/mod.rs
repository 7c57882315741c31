//! Implementations under test (SPEC §1.6): a data plane (whole frames in
//! and out) and a control plane (the agent protocol of
//! `reference-impl/AGENT.md`), behind one trait.
//!
//! - [`builtin`]: the reference transport in process, on virtual time (the
//!   default; no privileges; `builtin:mutant=NAME` selects a bug-zoo variant);
//! - [`raw`]: AF_PACKET frames on an interface and an agent over TCP;
//! - `pcap` (feature `libpcap`): libpcap injection and capture, agent over TCP.

pub mod agent_client;
pub mod builtin;
#[cfg(feature = "libpcap")]
pub mod pcap;
pub mod raw;
pub mod spec;

pub use spec::IutSpec;

use serde_json::Value;
use std::fmt;

/// Looks without waiting at a live IUT's socket once a deadline has passed
/// (`raw`, `pcap`): a harness descheduled past it takes the frames already
/// waiting instead of judging the IUT silent.
const LATE_LOOKS: usize = 16;

/// When a live IUT's frame came, on the harness clock that reads `now_ns`
/// now: the kernel's receive stamp `at` (its wall clock) moved onto that
/// clock by the frame's age, or `now_ns` without a stamp. Never later
/// than now, nor earlier than `floor_ns` (the frame read before it: the
/// socket gives frames in arrival order).
fn arrival_ns(now_ns: u64, at: Option<std::time::SystemTime>, floor_ns: u64) -> u64 {
    let age_ns = at
        .and_then(|at| std::time::SystemTime::now().duration_since(at).ok())
        .map_or(0, |age| u64::try_from(age.as_nanos()).unwrap_or(u64::MAX));
    now_ns.saturating_sub(age_ns).max(floor_ns).min(now_ns)
}

/// A frame the IUT sent, with the time the harness saw it (on a live IUT,
/// when the kernel received it where it gives receive stamps).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Nanoseconds on the IUT clock of [`Iut::now_ns`].
    pub at_ns: u64,
    /// The frame.
    pub bytes: Vec<u8>,
}

/// The test bed failed (never blamed on the IUT: the verdict is ERROR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IutError(pub String);

impl fmt::Display for IutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IutError {}

/// The data plane's addresses of one side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// MAC address.
    pub mac: [u8; 6],
    /// IPv4 address.
    pub ip: core::net::Ipv4Addr,
}

/// One implementation under test.
pub trait Iut {
    /// A one-line description for reports (`builtin`, `raw:veth0 agent 10.0.0.2:7471`).
    fn describe(&self) -> String;

    /// Whether time is virtual (exact windows, no calibration margin).
    fn virtual_time(&self) -> bool;

    /// The harness's own data-plane addresses.
    fn harness(&self) -> Endpoint;

    /// One agent request (a JSON object without `id`; the adapter adds it).
    /// Returns the reply object, `ok` true or false; an `Err` only when the
    /// agent cannot be reached.
    fn agent(&mut self, request: Value) -> Result<Value, IutError>;

    /// Sends one frame to the IUT.
    fn send(&mut self, frame: &[u8]) -> Result<(), IutError>;

    /// Sends one frame of a burst: the IUT may not transmit before the
    /// next [`Iut::send`]. A live IUT cannot be held: the frame leaves now
    /// and the next follows back to back (the default).
    fn send_held(&mut self, frame: &[u8]) -> Result<(), IutError> {
        self.send(frame)
    }

    /// The next frame from the IUT, waiting until `deadline_ns` at the latest;
    /// `None` when none came by then. On virtual time, time advances to
    /// the frame (or the deadline).
    fn recv(&mut self, deadline_ns: u64) -> Result<Option<Observed>, IutError>;

    /// The current time in nanoseconds.
    fn now_ns(&self) -> u64;

    /// Lets time pass until `until_ns`, keeping frames for `recv`.
    fn advance(&mut self, until_ns: u64) -> Result<(), IutError>;

    /// Drops every frame received and not yet taken (between tests).
    fn drain(&mut self) -> Result<Vec<Observed>, IutError>;

    /// A test begins with `budget` (docs/budgets.md): the adapter bounds
    /// its own loops by it from now on (a virtual-time IUT counts its
    /// events, a live one checks the wall clock while it drains), and
    /// returns the error of [`super::budget::Meter`] when it is spent.
    /// The session checks the wall clock between calls itself.
    fn start_budget(&mut self, budget: super::budget::Budget) {
        let _ = budget;
    }
}

#[cfg(test)]
mod tests {
    use super::arrival_ns;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_stamped_frame_is_placed_by_its_age_within_now_and_the_frame_before() {
        let now = 10_000_000;
        // No stamp: the frame came now.
        assert_eq!(arrival_ns(now, None, 0), now);
        // A frame at least 4 ms old (the clock only moves on between the
        // two reads): at least 4 ms before now.
        let at = SystemTime::now() - Duration::from_millis(4);
        let got = arrival_ns(now, Some(at), 0);
        assert!(got <= 6_000_000, "{got}");
        // Never before the frame read before it, never after now.
        assert_eq!(arrival_ns(now, Some(at), 9_000_000), 9_000_000);
        let future = SystemTime::now() + Duration::from_secs(1);
        assert_eq!(arrival_ns(now, Some(future), 0), now);
        // Older than the test: clamped to the floor, not wrapped.
        let ancient = SystemTime::UNIX_EPOCH;
        assert_eq!(arrival_ns(now, Some(ancient), 0), 0);
    }
}
