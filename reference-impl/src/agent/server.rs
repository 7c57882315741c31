//! The agent's TCP server: JSON lines over `std::net`, no async runtime.
//!
//! One engine thread owns the [`Agent`] (and so the [`crate::Device`]) and
//! the [`DataPlane`]; it alternates between the requests that have arrived
//! and a pump slice of the data plane, so frames keep moving while
//! requests are served and while a `poll_cq` waits. One small thread per
//! connection reads bounded lines and writes replies; it hands each line to
//! the engine over a channel and waits for the reply, so replies on a
//! connection come in request order. A connection thread that hands over a
//! request calls the data plane's [`super::dataplane::Waker`], so the pump
//! under way ends and the engine serves it at once; with a data plane that
//! gives none, a request waits at most one pump slice (1 ms by default).
//!
//! Threads rather than an async runtime: the engine must block in the data
//! plane's own wait (a channel, or a raw socket's receive queue), the
//! connection count is tiny (one harness), and std is enough.

use super::dataplane::{Clock, DataPlane, Waker};
use super::dispatch::{Action, Agent, PendingPoll};
use metaroce_agent::line::{LineRead, read_line_bounded};
use metaroce_agent::protocol::{AgentError, ErrorCode, MAX_LINE, Reply};
use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// Most connections served at once; more are refused with an error line.
pub const MAX_CONNECTIONS: usize = 64;

/// What a connection thread hands the engine.
enum Job {
    Line {
        line: LineRead,
        reply: Sender<Outgoing>,
    },
    Closed(u64),
}

struct Outgoing {
    text: String,
    close: bool,
}

/// Server settings.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// Longest data-plane pump between two looks at the request queue.
    pub slice: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            slice: Duration::from_millis(1),
        }
    }
}

/// A bound, not yet running agent server.
pub struct Server {
    listener: TcpListener,
    agent: Agent,
    data_plane: Box<dyn DataPlane>,
    config: ServerConfig,
}

/// A server running on its own thread.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server, closes its connections and waits for it.
    pub fn stop(mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("agent server thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Server {
    /// Binds `addr` (use port 0 for an ephemeral port).
    pub fn bind(
        addr: impl ToSocketAddrs,
        agent: Agent,
        data_plane: Box<dyn DataPlane>,
        config: ServerConfig,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            agent,
            data_plane,
            config,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Runs on a new thread until [`ServerHandle::stop`].
    pub fn spawn(self) -> io::Result<ServerHandle> {
        let addr = self.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("agent-engine".into())
            .spawn(move || self.run(&flag))?;
        Ok(ServerHandle {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Serves until `stop` is set or the data plane fails.
    pub fn run(mut self, stop: &AtomicBool) -> io::Result<()> {
        let clock = Clock::new();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let mut conns: HashMap<u64, TcpStream> = HashMap::new();
        let mut next_conn = 0u64;
        let mut pending: Vec<(PendingPoll, u64, Sender<Outgoing>)> = Vec::new();
        let waker = self.data_plane.waker();
        let result = loop {
            if stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            self.accept(&jobs_tx, &mut conns, &mut next_conn, waker.as_ref());
            // Verbs act at `now`. The time is given through the data plane
            // (a pump that ends at once), never by firing the device's
            // timers here: a driver hands the frames that waited in its
            // queue first, so an acknowledgement that arrived while this
            // thread was off the CPU stops the retransmission timeout it
            // would otherwise lose to (issue 19, C1).
            let now = clock.now_ns();
            if let Err(e) = self.data_plane.pump(self.agent.device_mut(), &clock, now) {
                break Err(e);
            }
            let replies = self.serve_jobs(&jobs_rx, &mut conns, &mut pending, now);
            // What the requests queued (a post_send's first packets) leaves
            // before their replies: a reply wakes the connection thread,
            // which on a busy machine can take this thread's core for a
            // millisecond, as long as mp_rto_init (a second post_send's
            // READ then left after the first SEND's retransmission, over
            // veth). The harness sends the next request only after the
            // reply, so the frames of a request precede what it does next.
            let sent = if replies.is_empty() {
                Ok(())
            } else {
                self.data_plane
                    .pump(self.agent.device_mut(), &clock, clock.now_ns())
            };
            for (to, reply, close) in replies {
                send(&to, &reply, close);
            }
            if let Err(e) = sent {
                break Err(e);
            }
            self.settle_pending(&mut pending, clock.now_ns());
            let until = clock.now_ns() + self.config.slice.as_nanos() as u64;
            if let Err(e) = self.data_plane.pump(self.agent.device_mut(), &clock, until) {
                break Err(e);
            }
            self.settle_pending(&mut pending, clock.now_ns());
        };
        for stream in conns.values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        result
    }

    fn accept(
        &mut self,
        jobs: &Sender<Job>,
        conns: &mut HashMap<u64, TcpStream>,
        next: &mut u64,
        waker: Option<&Waker>,
    ) {
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_nodelay(true);
            if conns.len() >= MAX_CONNECTIONS {
                let reply = Reply::err(
                    None,
                    AgentError::general(
                        ErrorCode::ResourceExhausted,
                        format!("at most {MAX_CONNECTIONS} connections"),
                    ),
                );
                let mut s = stream;
                let _ = writeln!(s, "{}", reply.to_json());
                continue;
            }
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            let id = *next;
            *next += 1;
            let jobs = jobs.clone();
            let waker = waker.cloned();
            let spawned = std::thread::Builder::new()
                .name(format!("agent-conn-{id}"))
                .spawn(move || connection(id, stream, jobs, waker));
            if spawned.is_ok() {
                conns.insert(id, clone);
            }
        }
    }

    /// Handles the requests that have arrived; returns their replies (to
    /// send once the data plane has sent what they queued), a `poll_cq`
    /// that waits going to `pending`.
    fn serve_jobs(
        &mut self,
        jobs: &Receiver<Job>,
        conns: &mut HashMap<u64, TcpStream>,
        pending: &mut Vec<(PendingPoll, u64, Sender<Outgoing>)>,
        now: u64,
    ) -> Vec<(Sender<Outgoing>, Reply, bool)> {
        let mut replies = Vec::new();
        while let Ok(job) = jobs.try_recv() {
            let (line, reply) = match job {
                Job::Closed(id) => {
                    conns.remove(&id);
                    continue;
                }
                Job::Line { line, reply } => (line, reply),
            };
            let action = match line {
                LineRead::Line(bytes) => self.agent.handle_line(&bytes),
                LineRead::TooLong(n) => Action::Reply(Reply::err(
                    None,
                    AgentError::general(
                        ErrorCode::LineTooLong,
                        format!("line of {n} bytes exceeds {MAX_LINE}"),
                    ),
                )),
                LineRead::Eof => continue,
            };
            match action {
                Action::Reply(r) => replies.push((reply, r, false)),
                Action::Close(r) => replies.push((reply, r, true)),
                Action::Wait(p) => {
                    let deadline = now.saturating_add(p.wait_ms.saturating_mul(1_000_000));
                    pending.push((p, deadline, reply));
                }
            }
        }
        replies
    }

    fn settle_pending(
        &mut self,
        pending: &mut Vec<(PendingPoll, u64, Sender<Outgoing>)>,
        now: u64,
    ) {
        pending.retain(|(p, deadline, reply)| {
            if let Some(r) = self.agent.try_poll(p) {
                send(reply, &r, false);
                false
            } else if now >= *deadline {
                send(reply, &self.agent.finish_poll(p), false);
                false
            } else {
                true
            }
        });
    }
}

fn send(to: &Sender<Outgoing>, reply: &Reply, close: bool) {
    let _ = to.send(Outgoing {
        text: reply.to_json(),
        close,
    });
}

/// A connection thread: read a line, hand it over (and wake the engine's
/// pump), write the reply.
fn connection(id: u64, stream: TcpStream, jobs: Sender<Job>, waker: Option<Waker>) {
    let (reply_tx, reply_rx) = mpsc::channel();
    if let Ok(read_half) = stream.try_clone() {
        let mut reader = BufReader::with_capacity(64 * 1024, read_half);
        let mut writer = &stream;
        loop {
            let line = match read_line_bounded(&mut reader, MAX_LINE) {
                Ok(LineRead::Eof) | Err(_) => break,
                Ok(line) => line,
            };
            let job = Job::Line {
                line,
                reply: reply_tx.clone(),
            };
            if jobs.send(job).is_err() {
                break;
            }
            if let Some(wake) = &waker {
                wake();
            }
            let Ok(out) = reply_rx.recv() else { break };
            let mut text = out.text;
            text.push('\n');
            if writer.write_all(text.as_bytes()).is_err() || out.close {
                break;
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    let _ = jobs.send(Job::Closed(id));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceConfig;
    use crate::agent::dispatch::AgentConfig;
    use core::net::Ipv4Addr;
    use std::io::BufRead;

    /// A data plane that gives the device time itself and counts the turns
    /// at which it finds the device's time moved by someone else.
    struct Watch {
        last: Option<u64>,
        pumps: u32,
        foreign: u32,
        stop: Arc<AtomicBool>,
        seen: Arc<std::sync::Mutex<(u32, u32)>>,
    }

    impl DataPlane for Watch {
        fn pump(&mut self, device: &mut crate::Device, clock: &Clock, _: u64) -> io::Result<()> {
            if self.last.is_some_and(|t| device.now() != t) {
                self.foreign += 1;
            }
            device.handle_timeout(clock.now_ns());
            self.last = Some(device.now());
            self.pumps += 1;
            if self.pumps >= 20 {
                self.stop.store(true, Ordering::SeqCst);
            }
            *self.seen.lock().unwrap() = (self.pumps, self.foreign);
            // The server's clock is read after this returns: it is later.
            std::thread::sleep(Duration::from_micros(50));
            Ok(())
        }
    }

    /// Issue 19, C1: the server fired the device's timers itself before
    /// each round of requests, so a retransmission timeout could fire
    /// while the acknowledgement that stops it waited in the driver's
    /// queue. Only the data plane may give the device time.
    #[test]
    fn only_the_data_plane_gives_the_device_time() {
        let device = DeviceConfig::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 99, 0, 1));
        let agent = Agent::new(AgentConfig::reference(device, [3; 32]));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(std::sync::Mutex::new((0, 0)));
        let watch = Watch {
            last: None,
            pumps: 0,
            foreign: 0,
            stop: Arc::clone(&stop),
            seen: Arc::clone(&seen),
        };
        let server = Server::bind(
            "127.0.0.1:0",
            agent,
            Box::new(watch),
            ServerConfig::default(),
        )
        .unwrap();
        server.run(&stop).unwrap();
        let (pumps, foreign) = *seen.lock().unwrap();
        assert!(pumps >= 20, "the server pumped {pumps} times");
        assert_eq!(foreign, 0, "the device's time moved outside the data plane");
    }

    /// A data plane whose every pump waits for its waker (at most
    /// [`Sleeper::BOUND`]), as the raw driver waits in `poll(2)` until the
    /// slice ends or the device's next timer.
    struct Sleeper {
        tx: mpsc::Sender<()>,
        rx: Receiver<()>,
    }

    impl Sleeper {
        const BOUND: Duration = Duration::from_secs(30);
    }

    impl DataPlane for Sleeper {
        fn pump(
            &mut self,
            device: &mut crate::Device,
            clock: &Clock,
            until: u64,
        ) -> io::Result<()> {
            device.handle_timeout(clock.now_ns());
            let left = until.saturating_sub(clock.now_ns());
            if left > 0 {
                let _ = self
                    .rx
                    .recv_timeout(Duration::from_nanos(left).min(Self::BOUND));
                while self.rx.try_recv().is_ok() {}
            }
            Ok(())
        }

        fn waker(&mut self) -> Option<Waker> {
            let tx = self.tx.clone();
            Some(Arc::new(move || {
                let _ = tx.send(());
            }))
        }
    }

    /// A data plane that sends the device's frames only in the pumps that
    /// end at once (the server's turns that give the device the time), and
    /// whose other pumps wait for its waker without sending: it isolates
    /// whether the server sends what a request queued before its reply.
    struct Lazy {
        tx: mpsc::Sender<()>,
        rx: Receiver<()>,
        sent: Arc<std::sync::atomic::AtomicU64>,
    }

    impl DataPlane for Lazy {
        fn pump(
            &mut self,
            device: &mut crate::Device,
            clock: &Clock,
            until: u64,
        ) -> io::Result<()> {
            if until > clock.now_ns() {
                let _ = self.rx.recv_timeout(Sleeper::BOUND);
                while self.rx.try_recv().is_ok() {}
                return Ok(());
            }
            let sent = &self.sent;
            crate::agent::dataplane::service(device, clock.now_ns(), |_| {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        }

        fn waker(&mut self) -> Option<Waker> {
            let tx = self.tx.clone();
            Some(Arc::new(move || {
                let _ = tx.send(());
            }))
        }
    }

    /// A server on an ephemeral loopback port with an hour-long pump slice
    /// (a request served at once was woken, not timed out), the reference
    /// agent and `plane`, running on its own thread; the client connected
    /// (before the engine runs: its first turn accepts it) and a reader on it.
    struct Running {
        client: TcpStream,
        reader: std::io::BufReader<TcpStream>,
        stop: Arc<AtomicBool>,
        engine: std::thread::JoinHandle<io::Result<()>>,
    }

    fn run_with(plane: Box<dyn DataPlane>) -> Running {
        let device = DeviceConfig::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 99, 0, 1));
        let agent = Agent::new(AgentConfig::reference(device, [3; 32]));
        let config = ServerConfig {
            slice: Duration::from_secs(3600),
        };
        let server = Server::bind("127.0.0.1:0", agent, plane, config).unwrap();
        let client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let engine = std::thread::spawn(move || server.run(&flag));
        let reader = std::io::BufReader::new(client.try_clone().unwrap());
        Running {
            client,
            reader,
            stop,
            engine,
        }
    }

    /// The first packet of a posted work request leaves before the reply
    /// to `post_send`: the reply wakes the connection thread, which on a
    /// loaded machine kept the engine off its core for up to a millisecond
    /// (mp_rto_init), and the harness's next request follows the reply
    /// (over veth, an MP READ posted right after a SEND then left only
    /// after the SEND's retransmission).
    #[test]
    fn a_posted_request_is_sent_before_its_reply() {
        use serde_json::{Value, json};
        let (tx, rx) = mpsc::channel();
        let wake = tx.clone();
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let plane = Lazy {
            tx,
            rx,
            sent: Arc::clone(&sent),
        };
        let Running {
            mut client,
            mut reader,
            stop,
            engine,
        } = run_with(Box::new(plane));
        let mut id = 0;
        let mut call = |mut req: Value| -> Value {
            id += 1;
            req["id"] = json!(id);
            writeln!(client, "{req}").unwrap();
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            assert_eq!(v["ok"], true, "{req} -> {line}");
            v
        };
        let pd = call(json!({"op": "alloc_pd"}))["pd"].clone();
        let cq = call(json!({"op": "create_cq"}))["cq"].clone();
        let qpn = call(json!({"op": "create_qp", "pd": pd, "qp_type": "rc",
            "send_cq": cq, "recv_cq": cq}))["qpn"]
            .clone();
        let mr = call(json!({"op": "reg_mr", "pd": pd, "length": 4096, "access": ["local_write"]}));
        call(json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": {"access": []}}));
        call(
            json!({"op": "modify_qp", "qpn": qpn, "state": "rtr", "attrs": {"dest_qpn": 0x11,
            "rq_psn": 0, "pmtu": 1024, "max_dest_rd_atomic": 1, "min_rnr_timer": 1,
            "path": {"dest_mac": "02:00:00:00:00:02", "dest_ip": "10.99.0.2"}}}),
        );
        call(
            json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": {"sq_psn": 0,
            "timeout": 14, "retry_cnt": 7, "rnr_retry": 7, "max_rd_atomic": 1}}),
        );
        let before = sent.load(Ordering::SeqCst);
        call(
            json!({"op": "post_send", "qpn": qpn, "wr_id": 1, "opcode": "send",
            "sg_list": [{"addr": mr["addr"], "length": 100, "lkey": mr["lkey"]}]}),
        );
        let after = sent.load(Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        let _ = wake.send(());
        engine.join().unwrap().unwrap();
        assert_eq!(
            after - before,
            1,
            "the SEND had not left when post_send replied"
        );
    }

    /// A request that arrives while the data plane waits for frames is
    /// served at once, not at the end of the pump slice: the connection
    /// thread wakes the pump. Before, a request waited up to one slice,
    /// and an MP QP's second work request, posted ~0.5 ms after the first,
    /// left only after the first's RTO (mp_rto_init = the 1 ms slice) and
    /// its retransmission (veth, `mp.req.sack_reserved_psn` and
    /// `mp.loss.rnr_others_continue`). The slice here is an hour, so
    /// without the wake the second request gets no reply within the
    /// read timeout.
    #[test]
    fn a_request_wakes_the_data_plane() {
        let (tx, rx) = mpsc::channel();
        let wake = tx.clone();
        let Running {
            mut client,
            mut reader,
            stop,
            engine,
        } = run_with(Box::new(Sleeper { tx, rx }));
        let mut replies = Vec::new();
        for id in 1..=3 {
            writeln!(
                client,
                r#"{{"id":{id},"op":"hello","v":1,"client":"test"}}"#
            )
            .unwrap();
            let mut line = String::new();
            let got = reader.read_line(&mut line);
            replies.push(line.clone());
            if got.is_err() || line.is_empty() {
                break;
            }
        }
        stop.store(true, Ordering::SeqCst);
        let _ = wake.send(());
        engine.join().unwrap().unwrap();
        assert_eq!(
            replies.iter().filter(|l| l.contains("\"ok\":true")).count(),
            3,
            "a request waited for the end of the pump slice: {replies:?}"
        );
    }
}
