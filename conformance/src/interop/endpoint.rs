//! One end of an interop run: an agent (reference-impl/AGENT.md) reached
//! over TCP through the protocol's typed client, what its `hello` says,
//! and typed calls whose replies are checked — a reply that is not what the
//! protocol promises is an error with a message, never a panic.

use metaroce_agent::protocol::{
    AccessFlag, Encoding, Hello, MrRef, Op, PollCq, ReadMr, RegMr, WriteMr,
};
use metaroce_agent::{Client, ClientError};
use serde_json::{Map, Value};

/// Why a call did not give its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The agent answered `ok: false` (its error code and message): the
    /// implementation refused something.
    Refused(String),
    /// No usable reply: the connection failed, or the reply breaks the
    /// protocol (not JSON, a missing or mistyped field).
    Broken(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Refused(m) | CallError::Broken(m) => f.write_str(m),
        }
    }
}

/// A registered memory region, as `reg_mr` reported it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mr {
    /// The agent's handle.
    pub handle: u32,
    /// VA of the first byte.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
    /// L_Key.
    pub lkey: u32,
    /// R_Key.
    pub rkey: u32,
}

/// One completion, the fields the interop run checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Work-request identifier.
    pub wr_id: u64,
    /// SPEC §6.13 status number.
    pub status: u64,
    /// `ibv_wc_opcode` name.
    pub opcode: String,
    /// QP the work request was posted on.
    pub qpn: u64,
    /// Bytes received or transferred.
    pub byte_len: u64,
    /// Immediate data, if any.
    pub imm: Option<u64>,
}

/// An agent and what its `hello` reported.
#[derive(Debug)]
pub struct Endpoint {
    /// `A` or `B`.
    pub name: &'static str,
    /// The agent's address as given.
    pub agent: String,
    client: Client,
    /// `implementation.name` and `implementation.version`.
    pub implementation: String,
    /// Data-plane MAC.
    pub mac: String,
    /// Data-plane IPv4.
    pub ip: String,
    /// The capability profile.
    pub profile: Map<String, Value>,
    /// The limits of AGENT.md §4.
    pub limits: Map<String, Value>,
    /// The operations the agent supports.
    pub ops: Vec<String>,
    /// The wall clock of the current cell (docs/budgets.md): once spent,
    /// every call is an error, so a wedged agent costs one cell.
    meter: Option<crate::run::budget::Meter>,
}

impl Endpoint {
    /// Connects and says `hello`. `Err` when the agent cannot be reached or
    /// its `hello` is unusable; `mac` / `ip` override the addresses it
    /// reports (and supply one it lacks).
    pub fn connect(
        name: &'static str,
        agent: &str,
        mac: Option<&str>,
        ip: Option<&str>,
    ) -> Result<Self, String> {
        let client = Client::connect(agent).map_err(|e| format!("agent {name}: {e}"))?;
        let mut ep = Endpoint {
            name,
            agent: agent.to_string(),
            client,
            implementation: String::new(),
            mac: String::new(),
            ip: String::new(),
            profile: Map::new(),
            limits: Map::new(),
            ops: Vec::new(),
            meter: None,
        };
        let hello = ep
            .call(
                Op::Hello(Hello {
                    client: Some("metaroce interop".into()),
                }),
                "hello",
            )
            .map_err(|e| e.to_string())?;
        let obj = |k: &str| -> Result<Map<String, Value>, String> {
            hello
                .get(k)
                .and_then(Value::as_object)
                .cloned()
                .ok_or_else(|| format!("agent {name}: hello: `{k}` is not an object"))
        };
        let implementation = obj("implementation")?;
        let text = |m: &Map<String, Value>, k: &str| {
            m.get(k).and_then(Value::as_str).unwrap_or("?").to_string()
        };
        ep.implementation = format!(
            "{} {}",
            text(&implementation, "name"),
            text(&implementation, "version")
        );
        ep.profile = obj("profile")?;
        ep.limits = obj("limits")?;
        let addresses = obj("addresses")?;
        ep.mac = match mac {
            Some(m) => m.to_string(),
            None => addresses
                .get("mac")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("agent {name}: hello: no `addresses.mac`"))?
                .to_string(),
        };
        ep.ip = match ip {
            Some(i) => i.to_string(),
            None => addresses
                .get("ipv4")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    format!("agent {name}: hello: no `addresses.ipv4` (give --{name}-ip)")
                })?
                .to_string(),
        };
        ep.ops = hello
            .get("ops")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        Ok(ep)
    }

    /// A boolean of the profile (absent: `false`).
    pub fn has(&self, key: &str) -> bool {
        self.profile.get(key).and_then(Value::as_bool) == Some(true)
    }

    /// An integer of the profile or the limits.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.profile
            .get(key)
            .or_else(|| self.limits.get(key))
            .and_then(Value::as_u64)
    }

    /// Sends `op` and returns the result fields of an `ok: true` reply.
    pub fn call(&mut self, op: Op, what: &str) -> Result<Map<String, Value>, CallError> {
        let name = self.name;
        if let Some(m) = &self.meter {
            m.wall()
                .map_err(|e| CallError::Broken(format!("agent {name}: {what}: {e}")))?;
        }
        self.client.call(op).map_err(|e| match e {
            ClientError::Refused { .. } => CallError::Refused(format!("agent {name}: {what}: {e}")),
            ClientError::Broken(m) => CallError::Broken(format!("agent {name}: {what}: {m}")),
        })
    }

    /// Bounds the calls from now on by `budget`'s wall clock; `None`: unbounded.
    pub fn set_budget(&mut self, budget: Option<crate::run::budget::Budget>) {
        self.meter = budget.map(crate::run::budget::Meter::start);
    }

    /// An unsigned field of a result.
    pub fn field(&self, map: &Map<String, Value>, key: &str, what: &str) -> Result<u64, CallError> {
        map.get(key).and_then(Value::as_u64).ok_or_else(|| {
            CallError::Broken(format!(
                "agent {}: {what}: the reply has no unsigned integer `{key}`",
                self.name
            ))
        })
    }

    /// A 32-bit field of a result (a handle, a key).
    pub fn field32(
        &self,
        map: &Map<String, Value>,
        key: &str,
        what: &str,
    ) -> Result<u32, CallError> {
        u32::try_from(self.field(map, key, what)?).map_err(|_| {
            CallError::Broken(format!(
                "agent {}: {what}: `{key}` exceeds 32 bits",
                self.name
            ))
        })
    }

    /// `reg_mr` with `length` bytes, `access`, and `canary` bytes of canary
    /// on each side (0: none).
    pub fn reg_mr(
        &mut self,
        pd: u32,
        length: u64,
        access: &[AccessFlag],
        canary: u64,
    ) -> Result<Mr, CallError> {
        let req = RegMr {
            pd,
            length,
            access: access.to_vec(),
            canary_len: (canary > 0).then_some(canary),
            canary_fill: (canary > 0).then_some(CANARY_FILL),
            ..RegMr::default()
        };
        let r = self.call(Op::RegMr(req), "reg_mr")?;
        let key = |k: &str| self.field32(&r, k, "reg_mr");
        let mr = Mr {
            handle: self.field32(&r, "mr", "reg_mr")?,
            addr: self.field(&r, "addr", "reg_mr")?,
            len: self.field(&r, "length", "reg_mr")?,
            lkey: key("lkey")?,
            rkey: key("rkey")?,
        };
        if mr.len != length {
            return Err(CallError::Broken(format!(
                "agent {}: reg_mr: asked {length} bytes, the reply says {}",
                self.name, mr.len
            )));
        }
        Ok(mr)
    }

    /// Writes `data` at `offset` of `mr` (host write, AGENT.md §6.6), in
    /// pieces of at most `max_data`.
    pub fn write_mr(&mut self, mr: &Mr, offset: u64, data: &[u8]) -> Result<(), CallError> {
        for (i, chunk) in data.chunks(self.max_data()).enumerate() {
            let at = offset + (i * self.max_data()) as u64;
            let req = WriteMr {
                mr: mr.handle,
                offset: at,
                hex: Some(hex::encode(chunk)),
                base64: None,
            };
            self.call(Op::WriteMr(req), "write_mr")?;
        }
        Ok(())
    }

    /// Reads `len` bytes at `offset` of `mr`.
    pub fn read_mr(&mut self, mr: &Mr, offset: u64, len: u64) -> Result<Vec<u8>, CallError> {
        let mut out = Vec::with_capacity(len as usize);
        while (out.len() as u64) < len {
            let n = (len - out.len() as u64).min(self.max_data() as u64);
            let at = offset + out.len() as u64;
            let req = ReadMr {
                mr: mr.handle,
                offset: at,
                length: n,
                encoding: Encoding::Hex,
            };
            let r = self.call(Op::ReadMr(req), "read_mr")?;
            let bytes = r
                .get("hex")
                .and_then(Value::as_str)
                .and_then(|h| hex::decode(h).ok())
                .ok_or_else(|| {
                    CallError::Broken(format!("agent {}: read_mr: no valid `hex`", self.name))
                })?;
            if bytes.len() as u64 != n {
                return Err(CallError::Broken(format!(
                    "agent {}: read_mr: asked {n} bytes, got {}",
                    self.name,
                    bytes.len()
                )));
            }
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    }

    /// The canary bytes around `mr` (`before`, `after`).
    pub fn read_canary(&mut self, mr: &Mr) -> Result<(Vec<u8>, Vec<u8>), CallError> {
        let r = self.call(Op::ReadCanary(MrRef { mr: mr.handle }), "read_canary")?;
        let side = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .and_then(|h| hex::decode(h).ok())
                .ok_or_else(|| {
                    CallError::Broken(format!("agent {}: read_canary: no valid `{k}`", self.name))
                })
        };
        Ok((side("before")?, side("after")?))
    }

    /// Polls `cq` until `count` completions have come or `wait_ms` has passed
    /// (each poll waits at most the agent's `max_wait_ms`).
    pub fn poll(
        &mut self,
        cq: u32,
        count: usize,
        wait_ms: u64,
    ) -> Result<Vec<Completion>, CallError> {
        let start = std::time::Instant::now();
        let step = self.number("max_wait_ms").unwrap_or(1000).clamp(1, 10_000);
        let mut out = Vec::new();
        loop {
            let spent = start.elapsed().as_millis() as u64;
            let wait = if count == 0 {
                0
            } else {
                wait_ms.saturating_sub(spent).min(step)
            };
            let req = PollCq {
                cq,
                max: 16,
                wait_ms: wait,
            };
            let r = self.call(Op::PollCq(req), "poll_cq")?;
            let list = r
                .get("completions")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    CallError::Broken(format!(
                        "agent {}: poll_cq: no `completions` array",
                        self.name
                    ))
                })?;
            for c in list {
                out.push(self.completion(c)?);
            }
            if out.len() >= count || start.elapsed().as_millis() as u64 >= wait_ms {
                return Ok(out);
            }
        }
    }

    fn completion(&self, c: &Value) -> Result<Completion, CallError> {
        let num = |k: &str| {
            c.get(k).and_then(Value::as_u64).ok_or_else(|| {
                CallError::Broken(format!(
                    "agent {}: poll_cq: a completion without unsigned `{k}`: {c}",
                    self.name
                ))
            })
        };
        Ok(Completion {
            wr_id: num("wr_id")?,
            status: num("status")?,
            opcode: c
                .get("opcode")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    CallError::Broken(format!(
                        "agent {}: poll_cq: a completion without `opcode`: {c}",
                        self.name
                    ))
                })?
                .to_string(),
            qpn: num("qpn")?,
            byte_len: num("byte_len")?,
            imm: c.get("imm").and_then(Value::as_u64),
        })
    }

    fn max_data(&self) -> usize {
        // Hex doubles the bytes: stay well inside the line limit too.
        self.number("max_data").unwrap_or(65536).clamp(1, 262_144) as usize
    }
}

/// Value of every canary byte the run asks for.
pub const CANARY_FILL: u8 = 0xA5;
