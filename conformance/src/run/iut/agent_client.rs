//! The harness's side of the agent protocol over TCP
//! (`reference-impl/AGENT.md` §1): one JSON object per line, replies in
//! request order.

use super::IutError;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest reply line accepted (the protocol's limit).
const MAX_LINE: usize = 1 << 20;

/// A connection to an agent.
#[derive(Debug)]
pub struct AgentClient {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    next_id: u64,
}

impl AgentClient {
    /// Connects to `addr` (`HOST:PORT`), waiting at most 5 s.
    pub fn connect(addr: &str) -> Result<Self, IutError> {
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| IutError(format!("agent address `{addr}`: {e}")))?
            .next()
            .ok_or_else(|| IutError(format!("agent address `{addr}` resolves to nothing")))?;
        let stream = TcpStream::connect_timeout(&sock, Duration::from_secs(5))
            .map_err(|e| IutError(format!("agent {sock}: cannot connect: {e}")))?;
        stream.set_nodelay(true).ok();
        let writer = stream
            .try_clone()
            .map_err(|e| IutError(format!("agent {sock}: {e}")))?;
        Ok(AgentClient {
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

    /// Sends one request (an `id` is added) and reads its reply.
    pub fn call(&mut self, mut request: Value) -> Result<Value, IutError> {
        let id = self.next_id;
        self.next_id += 1;
        let wait_ms = request.get("wait_ms").and_then(Value::as_u64).unwrap_or(0);
        if let Value::Object(map) = &mut request {
            map.insert("id".into(), id.into());
        }
        let err =
            |what: &str, e: std::io::Error| IutError(format!("agent {}: {what}: {e}", self.addr));
        let mut line = request.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| err("sending", e))?;
        self.reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_millis(wait_ms + 10_000)))
            .map_err(|e| err("socket", e))?;
        let mut reply = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut reply)
            .map_err(|e| err("reading the reply", e))?;
        if n == 0 {
            return Err(IutError(format!("agent {}: connection closed", self.addr)));
        }
        if reply.len() > MAX_LINE {
            return Err(IutError(format!(
                "agent {}: reply longer than 1 MiB",
                self.addr
            )));
        }
        let value: Value = serde_json::from_slice(&reply)
            .map_err(|e| IutError(format!("agent {}: reply is not JSON: {e}", self.addr)))?;
        if value.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(IutError(format!(
                "agent {}: reply to request {id} carries id {}",
                self.addr,
                value.get("id").unwrap_or(&Value::Null)
            )));
        }
        Ok(value)
    }
}

use std::io::Read as _;
