//! The TCP side of the agent (AGENT.md §1): one thread per connection (at
//! most [`MAX_CONNECTIONS`]), bounded lines, replies in request order, all
//! state shared behind one mutex. A `poll_cq` with `wait_ms` re-polls every
//! millisecond without holding the lock, so other connections are served
//! meanwhile. The data plane is the NIC's own: nothing to pump here.

use metaroce_agent::line::{LineRead, read_line_bounded};
use metaroce_agent::protocol::{AgentError, ErrorCode, MAX_LINE, Reply, Request, parse_request};
use std::io::{self, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most connections served at once; more get an error line and are closed.
pub const MAX_CONNECTIONS: usize = 64;

/// What handling one request leads to.
#[derive(Debug)]
pub enum Step {
    /// Send this reply.
    Reply(Reply),
    /// Send this reply, then close the connection (`bye`).
    Close(Reply),
    /// Poll `cq` for up to `max` completions until one arrives or `wait`
    /// passes (through [`Handler::try_poll`]).
    Wait {
        /// The request id.
        id: u64,
        /// The CQ handle.
        cq: u32,
        /// Most completions.
        max: u32,
        /// Longest wait.
        wait: Duration,
    },
}

/// The agent behind the server.
pub trait Handler: Send + 'static {
    /// Handles one parsed request.
    fn handle(&mut self, req: Request) -> Step;
    /// Polls `cq`: a reply when completions are there, or when `last`
    /// (the wait expired) even if empty; None to keep waiting.
    fn try_poll(&mut self, id: u64, cq: u32, max: u32, last: bool) -> Option<Reply>;
}

/// Serves `listener` forever.
pub fn serve<H: Handler>(listener: TcpListener, handler: H) -> io::Result<()> {
    let shared = Arc::new(Mutex::new(handler));
    let live = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let e = AgentError::general(
                ErrorCode::ResourceExhausted,
                format!("at most {MAX_CONNECTIONS} connections"),
            );
            let _ = writeln!(stream, "{}", Reply::err(None, e).to_json());
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let (shared, live) = (Arc::clone(&shared), Arc::clone(&live));
        std::thread::spawn(move || {
            if let Err(e) = connection(stream, &shared) {
                eprintln!("metaroce-agent-verbs: connection: {e}");
            }
            live.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

fn lock<H>(m: &Mutex<H>) -> std::sync::MutexGuard<'_, H> {
    // A panic while holding the lock would be a bug; keep serving anyway.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn connection<H: Handler>(stream: TcpStream, shared: &Mutex<H>) -> io::Result<()> {
    stream.set_nodelay(true).ok();
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let step = match read_line_bounded(&mut reader, MAX_LINE)? {
            LineRead::Eof => return Ok(()),
            LineRead::TooLong(n) => Step::Reply(Reply::err(
                None,
                AgentError::general(
                    ErrorCode::LineTooLong,
                    format!("line of {n} bytes exceeds {MAX_LINE}"),
                ),
            )),
            LineRead::Line(line) => match parse_request(&line) {
                Err((id, e)) => Step::Reply(Reply::err(id, e)),
                Ok(req) => lock(shared).handle(req),
            },
        };
        let (reply, close) = match step {
            Step::Reply(r) => (r, false),
            Step::Close(r) => (r, true),
            Step::Wait { id, cq, max, wait } => {
                let deadline = Instant::now() + wait;
                loop {
                    let last = Instant::now() >= deadline;
                    if let Some(r) = lock(shared).try_poll(id, cq, max, last) {
                        break (r, false);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        };
        let mut text = reply.to_json();
        text.push('\n');
        out.write_all(text.as_bytes())?;
        if close {
            return Ok(());
        }
    }
}
