//! The harness's side of the agent protocol over TCP
//! (`reference-impl/AGENT.md` §1): the runner's untyped requests through
//! [`metaroce_agent::Client::call_raw`], errors as [`IutError`].

use super::IutError;
use metaroce_agent::{Client, ClientError};
use serde_json::Value;
use std::net::SocketAddr;

/// A connection to an agent.
#[derive(Debug)]
pub struct AgentClient(Client);

impl AgentClient {
    /// Connects to `addr` (`HOST:PORT`), waiting at most 5 s.
    pub fn connect(addr: &str) -> Result<Self, IutError> {
        Client::connect(addr).map(AgentClient).map_err(iut_error)
    }

    /// The agent's address.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }

    /// Sends one request (an `id` is added) and reads its reply, whatever
    /// it says.
    pub fn call(&mut self, request: Value) -> Result<Value, IutError> {
        self.0.call_raw(request).map_err(iut_error)
    }
}

fn iut_error(e: ClientError) -> IutError {
    IutError(e.to_string())
}
