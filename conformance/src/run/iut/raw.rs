//! A live IUT on a link: frames through an AF_PACKET socket on an
//! interface (the reference transport's `RawPort`, pnet inside), control
//! through an agent over TCP. Time is the wall clock.

use super::agent_client::AgentClient;
use super::{Endpoint, Iut, IutError, LATE_LOOKS, Observed, arrival_ns};
use crate::run::budget::{Budget, Meter};
use metaroce_ref::drivers::raw::{RawConfig, RawPort, StampedFrame};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// An IUT reached over a raw interface and an agent.
pub struct Raw {
    port: RawPort,
    agent: AgentClient,
    harness: Endpoint,
    start: Instant,
    queue: VecDeque<Observed>,
    /// When the frame read last came (ns): the next one came no earlier.
    last_at_ns: u64,
    label: String,
    /// The current test's wall clock: a link that never falls quiet
    /// cannot keep `drain` (or an agent call's catch-up) going forever.
    meter: Meter,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

impl Raw {
    /// Opens `iface` and connects to the agent at `agent`. The harness
    /// uses the interface's MAC unless `mac` is given, and the address
    /// `ip` (not configured on the interface, so the kernel does not answer
    /// RoCE frames itself).
    pub fn open(
        iface: &str,
        agent: &str,
        mac: Option<[u8; 6]>,
        ip: core::net::Ipv4Addr,
    ) -> Result<Self, IutError> {
        let config = RawConfig {
            promiscuous: mac.is_some(),
            // Frames are timed when the kernel took them in, not when a
            // harness that fell behind read them.
            rx_timestamps: true,
            ..RawConfig::default()
        };
        let port = RawPort::open(iface, config).map_err(|e| IutError(e.to_string()))?;
        let mac = mac
            .or(port.interface_mac())
            .ok_or_else(|| IutError(format!("{iface}: no MAC address; give --mac")))?;
        let agent = AgentClient::connect(agent)?;
        let label = format!("raw:{iface} agent {}", agent.addr());
        Ok(Raw {
            port,
            agent,
            harness: Endpoint { mac, ip },
            start: Instant::now(),
            queue: VecDeque::new(),
            last_at_ns: 0,
            label,
            meter: Meter::default(),
        })
    }

    fn pull(&mut self, timeout: Duration) -> Result<bool, IutError> {
        self.meter.wall()?;
        match self
            .port
            .recv_frame_stamped(self.harness.mac, timeout)
            .map_err(|e| IutError(e.to_string()))?
        {
            Some(StampedFrame { bytes, at }) => {
                let at_ns = arrival_ns(self.now_ns(), at, self.last_at_ns);
                self.last_at_ns = at_ns;
                self.queue.push_back(Observed { at_ns, bytes });
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Iut for Raw {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn virtual_time(&self) -> bool {
        false
    }

    fn harness(&self) -> Endpoint {
        self.harness
    }

    fn agent(&mut self, request: Value) -> Result<Value, IutError> {
        let reply = self.agent.call(request);
        // Frames that came while the agent answered stay queued in order.
        while self.pull(Duration::ZERO)? {}
        reply
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), IutError> {
        let errors = self.port.stats().tx_errors;
        self.port.send(frame);
        if self.port.stats().tx_errors > errors {
            let why = self.port.last_error().unwrap_or("send failed");
            return Err(IutError(format!(
                "{why} ({} bytes; is the link's MTU large enough for the vector's PMTU?)",
                frame.len()
            )));
        }
        Ok(())
    }

    fn recv(&mut self, deadline_ns: u64) -> Result<Option<Observed>, IutError> {
        loop {
            if let Some(o) = self.queue.pop_front() {
                return Ok(Some(o));
            }
            let now = self.now_ns();
            if now >= deadline_ns {
                // A harness descheduled past its deadline (a loaded machine,
                // a debug build judging a burst) has frames in its socket
                // that came before it: one look without waiting takes them
                // (with the kernel's arrival time, so each is judged where
                // it came: a quiet window that ended before it puts it in
                // the next step) instead of judging the IUT silent. A frame
                // that is not the harness's (its own sent ones) ends a look
                // as an empty socket does: a few looks, bounded.
                for _ in 0..LATE_LOOKS {
                    if self.pull(Duration::ZERO)? {
                        break;
                    }
                }
                if let Some(o) = self.queue.pop_front() {
                    return Ok(Some(o));
                }
                return Ok(None);
            }
            let wait = Duration::from_nanos((deadline_ns - now).min(10_000_000));
            self.pull(wait)?;
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn advance(&mut self, until_ns: u64) -> Result<(), IutError> {
        while self.now_ns() < until_ns {
            let wait = Duration::from_nanos((until_ns - self.now_ns()).min(10_000_000));
            self.pull(wait)?;
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<Vec<Observed>, IutError> {
        while self.pull(Duration::ZERO)? {}
        Ok(self.queue.drain(..).collect())
    }

    fn start_budget(&mut self, budget: Budget) {
        self.meter = Meter::start(budget);
    }
}
