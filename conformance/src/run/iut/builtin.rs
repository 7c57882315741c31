//! The built-in IUT: the reference transport's agent and device in this
//! process, on virtual time. The control plane goes through the same JSON
//! parser as the TCP agent (`Agent::handle_line`), so a vector behaves the
//! same here and against `metaroce-ref serve`.

use super::{Endpoint, Iut, IutError, Observed};
use crate::run::budget::{Budget, Meter};
use core::net::Ipv4Addr;
use metaroce_ref::DeviceConfig;
use metaroce_ref::agent::{Action, Agent, AgentConfig};
use serde_json::Value;
use std::collections::VecDeque;

/// The harness's addresses facing the built-in IUT.
pub const HARNESS: Endpoint = Endpoint {
    mac: [0x02, 0, 0, 0, 0, 0x01],
    ip: Ipv4Addr::new(10, 0, 0, 1),
};
/// The built-in IUT's addresses.
pub const IUT: Endpoint = Endpoint {
    mac: [0x02, 0, 0, 0, 0, 0x02],
    ip: Ipv4Addr::new(10, 0, 0, 2),
};

/// The reference transport in process.
#[derive(Debug)]
pub struct Builtin {
    agent: Agent,
    now: u64,
    queue: VecDeque<Observed>,
    next_id: u64,
    label: String,
    /// The current test's events and wall clock.
    meter: Meter,
    /// The device's next timer as this IUT sees it: the device's own
    /// (`poll_timeout`), or a test's livelocked one.
    next_timer: fn(&Agent) -> Option<u64>,
    /// A held frame (a burst's) was handled and the device not serviced.
    held: bool,
}

/// The device's own next timer.
fn device_timer(agent: &Agent) -> Option<u64> {
    agent.device().poll_timeout()
}

impl Builtin {
    /// A fresh reference transport seeded with `seed`, or one of its
    /// bug-zoo variants.
    pub fn new(seed: u64, mutant: Option<&str>) -> Result<Self, IutError> {
        let mut device = DeviceConfig::new(IUT.mac, IUT.ip);
        let label = match mutant {
            None => "builtin".to_string(),
            Some(name) => {
                let m: metaroce_ref::zoo::Mutant =
                    name.parse().map_err(|e| IutError(format!("{e}")))?;
                device.mutant = Some(m);
                format!("builtin:mutant={}", m.name())
            }
        };
        let mut seed_bytes = [0u8; 32];
        seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
        seed_bytes[8..16].copy_from_slice(b"builtin!");
        let agent = Agent::new(AgentConfig::reference(device, seed_bytes));
        Ok(Builtin {
            agent,
            now: 1_000_000,
            queue: VecDeque::new(),
            next_id: 1,
            label,
            meter: Meter::default(),
            next_timer: device_timer,
            held: false,
        })
    }

    /// The reference transport with its next timer read through
    /// `next_timer` instead of the device's: a test's livelocked IUT.
    #[cfg(test)]
    pub(crate) fn with_timer(seed: u64, next_timer: fn(&Agent) -> Option<u64>) -> Self {
        let mut b = Builtin::new(seed, None).expect("no mutant to parse");
        b.next_timer = next_timer;
        b.label = "builtin (test timer)".into();
        b
    }

    /// Gives the device the time and collects what it sends, each frame
    /// counted against the event budget.
    fn service(&mut self) -> Result<(), IutError> {
        self.held = false;
        let now = self.now;
        let device = self.agent.device_mut();
        device.handle_timeout(now);
        while let Some(bytes) = device.poll_transmit() {
            self.queue.push_back(Observed { at_ns: now, bytes });
            self.meter.frame()?;
        }
        Ok(())
    }

    /// Moves virtual time to the device's next timer if it is before
    /// `until`, else to `until`, counting the timer against the event
    /// budget. Returns whether time reached `until`.
    fn step_towards(&mut self, until: u64) -> Result<bool, IutError> {
        let until = until.max(self.now);
        let next = (self.next_timer)(&self.agent).map_or(until, |t| t.max(self.now + 1).min(until));
        if next < until {
            self.meter.timer()?;
        }
        self.now = next;
        self.service()?;
        Ok(next >= until)
    }
}

impl Iut for Builtin {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn virtual_time(&self) -> bool {
        true
    }

    fn harness(&self) -> Endpoint {
        HARNESS
    }

    fn agent(&mut self, mut request: Value) -> Result<Value, IutError> {
        let id = self.next_id;
        self.next_id += 1;
        if let Value::Object(map) = &mut request {
            map.insert("id".into(), id.into());
        }
        self.service()?;
        let line = request.to_string();
        let action = self.agent.handle_line(line.as_bytes());
        let reply = match action {
            Action::Reply(r) | Action::Close(r) => r,
            Action::Wait(pending) => {
                let until = self.now.saturating_add(pending.wait_ms * 1_000_000);
                loop {
                    if let Some(r) = self.agent.try_poll(&pending) {
                        break r;
                    }
                    if self.step_towards(until)? {
                        break self.agent.finish_poll(&pending);
                    }
                }
            }
        };
        self.service()?;
        serde_json::from_str(&reply.to_json())
            .map_err(|e| IutError(format!("agent reply is not JSON: {e}")))
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), IutError> {
        let now = self.now;
        self.agent.device_mut().handle_frame(now, frame);
        self.service()
    }

    fn send_held(&mut self, frame: &[u8]) -> Result<(), IutError> {
        // Not serviced: what the frame makes the device queue stays queued
        // until the burst's last frame has arrived too.
        let now = self.now;
        self.agent.device_mut().handle_frame(now, frame);
        self.held = true;
        Ok(())
    }

    fn recv(&mut self, deadline_ns: u64) -> Result<Option<Observed>, IutError> {
        if self.held {
            self.service()?;
        }
        loop {
            if let Some(frame) = self.queue.pop_front() {
                return Ok(Some(frame));
            }
            if self.now >= deadline_ns {
                return Ok(None);
            }
            self.step_towards(deadline_ns)?;
        }
    }

    fn now_ns(&self) -> u64 {
        self.now
    }

    fn advance(&mut self, until_ns: u64) -> Result<(), IutError> {
        while !self.step_towards(until_ns)? {}
        Ok(())
    }

    fn drain(&mut self) -> Result<Vec<Observed>, IutError> {
        self.service()?;
        Ok(self.queue.drain(..).collect())
    }

    fn start_budget(&mut self, budget: Budget) {
        self.meter = Meter::start(budget);
    }
}
