//! A live IUT through libpcap (feature `libpcap`): frames injected with
//! `pcap_sendpacket` and captured with a BPF filter for the harness's MAC,
//! control through an agent over TCP. The same contract as [`super::raw`],
//! for systems where libpcap is the way to a port (or AF_PACKET is not).

use super::agent_client::AgentClient;
use super::{Endpoint, Iut, IutError, LATE_LOOKS, Observed, arrival_ns};
use crate::run::budget::{Budget, Meter};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// An IUT reached through libpcap and an agent.
pub struct Pcap {
    capture: pcap::Capture<pcap::Active>,
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

impl std::fmt::Debug for Pcap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Pcap {
    /// Opens `iface` through libpcap and connects to the agent.
    pub fn open(
        iface: &str,
        agent: &str,
        mac: Option<[u8; 6]>,
        ip: core::net::Ipv4Addr,
    ) -> Result<Self, IutError> {
        let err = |e: pcap::Error| IutError(format!("pcap:{iface}: {e}"));
        let mac = match mac {
            Some(m) => m,
            None => metaroce_ref::drivers::raw::interface_mac(iface)
                .map_err(|e| IutError(format!("{iface}: {e}; give --mac")))?,
        };
        let mut capture = pcap::Capture::from_device(iface)
            .map_err(err)?
            .snaplen(65_535)
            .promisc(true)
            .timeout(1)
            .immediate_mode(true)
            .open()
            .map_err(err)?
            // A blocking capture ignores its timeout on a silent link (seen
            // with libpcap on veth: the harness then waits forever); poll
            // a non-blocking one instead.
            .setnonblock()
            .map_err(err)?;
        let filter = format!(
            "(ether dst {} or ether multicast) and not ether src {}",
            mac_text(mac),
            mac_text(mac)
        );
        capture.filter(&filter, true).map_err(err)?;
        let agent = AgentClient::connect(agent)?;
        let label = format!("pcap:{iface} agent {}", agent.addr());
        Ok(Pcap {
            capture,
            agent,
            harness: Endpoint { mac, ip },
            start: Instant::now(),
            queue: VecDeque::new(),
            last_at_ns: 0,
            label,
            meter: Meter::default(),
        })
    }

    /// Takes at most one frame from libpcap (polls; sleeps 50 µs when none).
    fn pull(&mut self) -> Result<bool, IutError> {
        let got = self.look()?;
        if !got {
            // Nothing queued: yield briefly before the next poll.
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(got)
    }

    /// Takes at most one frame from libpcap, without waiting.
    fn look(&mut self) -> Result<bool, IutError> {
        self.meter.wall()?;
        match self.capture.next_packet() {
            Ok(p) => {
                let bytes = p.data.to_vec();
                // libpcap's stamp: when the kernel took the frame in.
                let ts = p.header.ts;
                let at = u64::try_from(ts.tv_sec)
                    .ok()
                    .zip(u32::try_from(ts.tv_usec).ok());
                let at = at.and_then(|(secs, micros)| {
                    std::time::SystemTime::UNIX_EPOCH
                        .checked_add(Duration::new(secs, micros.saturating_mul(1_000)))
                });
                let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                let at_ns = arrival_ns(now, at, self.last_at_ns);
                self.last_at_ns = at_ns;
                self.queue.push_back(Observed { at_ns, bytes });
                Ok(true)
            }
            Err(pcap::Error::TimeoutExpired) => Ok(false),
            Err(e) => Err(IutError(format!("{}: {e}", self.label))),
        }
    }
}

impl Iut for Pcap {
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
        self.agent.call(request)
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), IutError> {
        self.capture
            .sendpacket(frame)
            .map_err(|e| IutError(format!("{}: send: {e}", self.label)))
    }

    fn recv(&mut self, deadline_ns: u64) -> Result<Option<Observed>, IutError> {
        loop {
            if let Some(o) = self.queue.pop_front() {
                return Ok(Some(o));
            }
            if self.now_ns() >= deadline_ns {
                // As `iut::raw`: a harness descheduled past its deadline
                // takes the frames already waiting (with libpcap's arrival
                // time, so each is judged where it came) instead of judging
                // the IUT silent; a few looks, bounded.
                for _ in 0..LATE_LOOKS {
                    if self.look()? {
                        break;
                    }
                }
                return Ok(self.queue.pop_front());
            }
            self.pull()?;
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn advance(&mut self, until_ns: u64) -> Result<(), IutError> {
        while self.now_ns() < until_ns {
            self.pull()?;
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<Vec<Observed>, IutError> {
        let until = self.now_ns() + Duration::from_millis(1).as_nanos() as u64;
        self.advance(until)?;
        Ok(self.queue.drain(..).collect())
    }

    fn start_budget(&mut self, budget: Budget) {
        self.meter = Meter::start(budget);
    }
}
