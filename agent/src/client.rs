//! A typed client of the agent protocol over TCP (AGENT.md §1): typed
//! requests ([`Op`]) in, the result fields of an `ok: true` reply out,
//! replies read in request order and checked against their `id`. A reply
//! that breaks the protocol is an error with a message, never a panic.

use crate::line::{LineRead, read_line_bounded};
use crate::protocol::{MAX_LINE, Op, PROTOCOL_VERSION, Request};
use serde_json::{Map, Value};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Why a call did not give its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The agent answered `ok: false`: its error code and message, as it
    /// sent them (`?` for one it left out).
    Refused {
        /// The error code (AGENT.md §5).
        code: String,
        /// The agent's message.
        message: String,
    },
    /// No usable reply: the connection failed, or the reply breaks the
    /// protocol (not JSON, another id, no boolean `ok`).
    Broken(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Refused { code, message } => write!(f, "refused: {code} ({message})"),
            ClientError::Broken(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to an agent.
#[derive(Debug)]
pub struct Client {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    next_id: u64,
}

impl Client {
    /// Connects to `addr` (`HOST:PORT`), waiting at most 5 s.
    pub fn connect(addr: &str) -> Result<Self, ClientError> {
        let broken = ClientError::Broken;
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| broken(format!("agent address `{addr}`: {e}")))?
            .next()
            .ok_or_else(|| broken(format!("agent address `{addr}` resolves to nothing")))?;
        let stream = TcpStream::connect_timeout(&sock, Duration::from_secs(5))
            .map_err(|e| broken(format!("agent {sock}: cannot connect: {e}")))?;
        stream.set_nodelay(true).ok();
        let writer = stream
            .try_clone()
            .map_err(|e| broken(format!("agent {sock}: {e}")))?;
        Ok(Client {
            addr: sock,
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
        })
    }

    /// The agent's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `op` and returns the result fields of an `ok: true` reply
    /// (`id` and `ok` included).
    pub fn call(&mut self, op: Op) -> Result<Map<String, Value>, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let wait_ms = match &op {
            Op::PollCq(p) => p.wait_ms,
            _ => 0,
        };
        let mut request = Request::new(id, op);
        if matches!(request.op, Op::Hello(_)) {
            request.v = Some(PROTOCOL_VERSION);
        }
        let reply = self.exchange(id, request.to_json(), wait_ms)?;
        let Value::Object(map) = reply else {
            return Err(ClientError::Broken("the reply is not an object".into()));
        };
        match map.get("ok") {
            Some(Value::Bool(true)) => Ok(map),
            Some(Value::Bool(false)) => {
                let err = map.get("error");
                let field = |k: &str| {
                    err.and_then(|e| e.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string()
                };
                Err(ClientError::Refused {
                    code: field("code"),
                    message: field("message"),
                })
            }
            _ => Err(ClientError::Broken("the reply has no boolean `ok`".into())),
        }
    }

    /// Sends `request` as it is (an `id` is added to an object) and returns
    /// the reply whatever it says: for requests the types cannot express,
    /// as a test of an agent's checks sends them.
    pub fn call_raw(&mut self, mut request: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let wait_ms = request.get("wait_ms").and_then(Value::as_u64).unwrap_or(0);
        if let Value::Object(map) = &mut request {
            map.insert("id".into(), id.into());
        }
        self.exchange(id, request.to_string(), wait_ms)
    }

    /// Writes one line and reads the reply to request `id`, waiting
    /// `wait_ms` plus 10 s.
    fn exchange(&mut self, id: u64, mut line: String, wait_ms: u64) -> Result<Value, ClientError> {
        let addr = self.addr;
        let err = |what: &str, e: std::io::Error| {
            ClientError::Broken(format!("agent {addr}: {what}: {e}"))
        };
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| err("sending", e))?;
        self.reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_millis(wait_ms.saturating_add(10_000))))
            .map_err(|e| err("socket", e))?;
        let reply = match read_line_bounded(&mut self.reader, MAX_LINE)
            .map_err(|e| err("reading the reply", e))?
        {
            LineRead::Line(bytes) => bytes,
            LineRead::Eof => {
                return Err(ClientError::Broken(format!(
                    "agent {addr}: connection closed"
                )));
            }
            LineRead::TooLong(_) => {
                return Err(ClientError::Broken(format!(
                    "agent {addr}: reply longer than 1 MiB"
                )));
            }
        };
        let value: Value = serde_json::from_slice(&reply)
            .map_err(|e| ClientError::Broken(format!("agent {addr}: reply is not JSON: {e}")))?;
        if value.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(ClientError::Broken(format!(
                "agent {addr}: reply to request {id} carries id {}",
                value.get("id").unwrap_or(&Value::Null)
            )));
        }
        Ok(value)
    }
}
