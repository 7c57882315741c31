//! One operation of one size from a requester to a responder, checked
//! through both agents: the completions (status, opcode, byte_len, imm),
//! the target's bytes (and the bytes just past them, which must not
//! change), and for atomics the original value returned.

use super::data::{bytes, first_difference, mix};
use super::endpoint::{CallError, Completion, Endpoint};
use super::setup::Side;
use metaroce_agent::protocol::{self as agent, PostRecv, PostSend, SendOpcode, SgeJson};

/// The operations of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// SEND.
    Send,
    /// SEND with immediate.
    SendImm,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate.
    WriteImm,
    /// RDMA READ.
    Read,
    /// Compare-swap whose compare value matches: the target is replaced.
    CasHit,
    /// Compare-swap whose compare value does not match: the target stays.
    CasMiss,
    /// Fetch-add.
    FetchAdd,
}

impl Op {
    /// Every operation, in matrix order.
    pub const ALL: [Op; 8] = [
        Op::Send,
        Op::SendImm,
        Op::Write,
        Op::WriteImm,
        Op::Read,
        Op::CasHit,
        Op::CasMiss,
        Op::FetchAdd,
    ];

    /// The row label.
    pub fn label(self) -> &'static str {
        match self {
            Op::Send => "SEND",
            Op::SendImm => "SEND with immediate",
            Op::Write => "RDMA WRITE",
            Op::WriteImm => "RDMA WRITE with immediate",
            Op::Read => "RDMA READ",
            Op::CasHit => "compare-swap (equal)",
            Op::CasMiss => "compare-swap (not equal)",
            Op::FetchAdd => "fetch-add",
        }
    }

    /// A short machine name (JSON output).
    pub fn key(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::SendImm => "send_with_imm",
            Op::Write => "rdma_write",
            Op::WriteImm => "rdma_write_with_imm",
            Op::Read => "rdma_read",
            Op::CasHit => "cmp_swap_hit",
            Op::CasMiss => "cmp_swap_miss",
            Op::FetchAdd => "fetch_add",
        }
    }

    /// An atomic: one 8-byte case, no size.
    pub fn is_atomic(self) -> bool {
        matches!(self, Op::CasHit | Op::CasMiss | Op::FetchAdd)
    }

    /// The profile key both ends need, if any.
    pub fn needs(self) -> Option<&'static str> {
        match self {
            Op::SendImm | Op::WriteImm => Some("immediate"),
            o if o.is_atomic() => Some("atomics"),
            _ => None,
        }
    }

    fn wire_opcode(self) -> SendOpcode {
        match self {
            Op::Send => SendOpcode::Send,
            Op::SendImm => SendOpcode::SendWithImm,
            Op::Write => SendOpcode::RdmaWrite,
            Op::WriteImm => SendOpcode::RdmaWriteWithImm,
            Op::Read => SendOpcode::RdmaRead,
            Op::CasHit | Op::CasMiss => SendOpcode::AtomicCmpAndSwp,
            Op::FetchAdd => SendOpcode::AtomicFetchAndAdd,
        }
    }

    fn completion_opcode(self) -> &'static str {
        match self {
            Op::Send | Op::SendImm => "send",
            Op::Write | Op::WriteImm => "rdma_write",
            Op::Read => "rdma_read",
            Op::CasHit | Op::CasMiss => "comp_swap",
            Op::FetchAdd => "fetch_add",
        }
    }
}

/// Why a case did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An implementation did something wrong (or refused a valid request).
    Fail(String),
    /// The run could not judge: an agent's reply broke the protocol.
    Error(String),
}

impl From<CallError> for Outcome {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Refused(m) => Outcome::Fail(m),
            CallError::Broken(m) => Outcome::Error(m),
        }
    }
}

/// The two ends of one case: the requester posts the work request.
#[derive(Debug)]
pub struct Pair<'a> {
    /// The requester's agent.
    pub req: &'a mut Endpoint,
    /// The requester's objects.
    pub rs: Side,
    /// The responder's agent.
    pub resp: &'a mut Endpoint,
    /// The responder's objects.
    pub ts: Side,
    /// How long a completion may take, in ms.
    pub wait_ms: u64,
    /// Data seed.
    pub seed: u64,
}

/// Bytes after the target range that must not change.
const TAIL: u64 = 16;

fn fail(msg: String) -> Outcome {
    Outcome::Fail(msg)
}

impl Pair<'_> {
    /// Runs `op` with `size` bytes (ignored for atomics); `salt` makes the
    /// case's data its own.
    pub fn run(&mut self, op: Op, size: u64, salt: u64) -> Result<(), Outcome> {
        if op.is_atomic() {
            self.atomic(op, salt)
        } else {
            self.data(op, size, salt)
        }
    }

    /// One SGE of `len` bytes (none for 0); `len` is bounded by the
    /// regions' size, which the run keeps far below 4 GiB.
    fn sge(addr: u64, len: u64, lkey: u32) -> Vec<SgeJson> {
        if len == 0 {
            Vec::new()
        } else {
            let length = u32::try_from(len).unwrap_or(u32::MAX);
            vec![SgeJson { addr, length, lkey }]
        }
    }

    /// A signaled `post_send` of `opcode` from `sg_list`, nothing else set.
    fn send_wr(qpn: u32, wr_id: u64, opcode: SendOpcode, sg_list: Vec<SgeJson>) -> PostSend {
        PostSend {
            qpn,
            wr_id,
            opcode,
            sg_list,
            signaled: true,
            solicited: false,
            fence: false,
            remote_addr: None,
            rkey: None,
            imm: None,
            invalidate_rkey: None,
            compare: None,
            swap: None,
            add: None,
            ud: None,
        }
    }

    fn data(&mut self, op: Op, n: u64, salt: u64) -> Result<(), Outcome> {
        let (rs, ts, seed) = (self.rs, self.ts, self.seed);
        let span = (n + TAIL).min(ts.remote.len).min(rs.local.len);
        let data = bytes(seed, salt, n as usize);
        let bg = bytes(seed, salt ^ 0xB6B6, span as usize);
        let mut want = data.clone();
        want.extend_from_slice(&bg[n as usize..]);
        let imm = mix(seed, salt ^ 0x1111) & 0xFFFF_FFFF;
        // Source and target contents.
        if op == Op::Read {
            self.resp.write_mr(&ts.remote, 0, &want)?;
            self.req.write_mr(&rs.local, 0, &bg)?;
        } else {
            self.req.write_mr(&rs.local, 0, &data)?;
            self.resp.write_mr(&ts.remote, 0, &bg)?;
        }
        let recv = matches!(op, Op::Send | Op::SendImm | Op::WriteImm);
        let recv_id = salt ^ 0x5EC0_0000_0000;
        if recv {
            let sg_list = if op == Op::WriteImm {
                Vec::new()
            } else {
                Self::sge(ts.remote.addr, ts.remote.len, ts.remote.lkey)
            };
            let recv = PostRecv {
                qpn: ts.qpn,
                wr_id: recv_id,
                sg_list,
            };
            self.resp.call(agent::Op::PostRecv(recv), "post_recv")?;
        }
        let sg = Self::sge(rs.local.addr, n, rs.local.lkey);
        let mut wr = Self::send_wr(rs.qpn, salt, op.wire_opcode(), sg);
        if matches!(op, Op::Write | Op::WriteImm | Op::Read) {
            wr.remote_addr = Some(ts.remote.addr);
            wr.rkey = Some(ts.remote.rkey);
        }
        if matches!(op, Op::SendImm | Op::WriteImm) {
            wr.imm = Some(imm as u32);
        }
        self.req.call(agent::Op::PostSend(wr), "post_send")?;
        let byte_len = (op == Op::Read).then_some(n);
        let req_rule = if op == Op::Read {
            "MR-READ-7"
        } else {
            "MR-REQ-3"
        };
        self.requester_completion(op, salt, byte_len, req_rule)?;
        if recv {
            let got = self.resp.poll(ts.cq, 1, self.wait_ms)?;
            let want_op = if op == Op::WriteImm {
                "recv_rdma_with_imm"
            } else {
                "recv"
            };
            let want_imm = (op != Op::Send).then_some(imm);
            check_one(
                &got,
                "responder",
                recv_id,
                want_op,
                ts.qpn,
                Some(n),
                Some(want_imm),
            )
            .map_err(|e| fail(format!("{e} (MR-RSP-12)")))?;
        } else {
            self.no_completion(true)?;
        }
        // The target's bytes.
        let (who, target_mr, rule) = if op == Op::Read {
            ("requester", rs.local, "MR-READ-6")
        } else {
            ("responder", ts.remote, "MR-RSP-14")
        };
        let ep = if op == Op::Read {
            &mut *self.req
        } else {
            &mut *self.resp
        };
        let got = ep.read_mr(&target_mr, 0, span)?;
        if let Some(d) = first_difference(&got, &want) {
            return Err(fail(format!(
                "{who}'s memory after the operation: {d} ({rule}; bytes {n}.. must not change)"
            )));
        }
        Ok(())
    }

    fn atomic(&mut self, op: Op, salt: u64) -> Result<(), Outcome> {
        let (rs, ts, seed) = (self.rs, self.ts, self.seed);
        let slots = (ts.remote.len / 8).saturating_sub(3).max(1);
        let off = 8 * (1 + mix(seed, salt ^ 0x0FF) % slots);
        let orig = mix(seed, salt ^ 0x0419);
        let operand = mix(seed, salt ^ 0x0ADD);
        let mut window = bytes(seed, salt ^ 0xB6B6, 24);
        window[8..16].copy_from_slice(&orig.to_ne_bytes());
        let sink = bytes(seed, salt ^ 0x5111, 16);
        self.resp.write_mr(&ts.remote, off - 8, &window)?;
        self.req.write_mr(&rs.local, 0, &sink)?;
        let sg = Self::sge(rs.local.addr, 8, rs.local.lkey);
        let mut wr = Self::send_wr(rs.qpn, salt, op.wire_opcode(), sg);
        wr.remote_addr = Some(ts.remote.addr + off);
        wr.rkey = Some(ts.remote.rkey);
        let new = match op {
            Op::CasHit => {
                wr.compare = Some(orig);
                wr.swap = Some(operand);
                operand
            }
            Op::CasMiss => {
                // Never equal to the original: one bit differs at least.
                wr.compare = Some(orig ^ (operand | 1));
                wr.swap = Some(operand);
                orig
            }
            _ => {
                wr.add = Some(operand);
                orig.wrapping_add(operand)
            }
        };
        self.req.call(agent::Op::PostSend(wr), "post_send")?;
        self.requester_completion(op, salt, Some(8), "MR-ATOM-6")?;
        self.no_completion(true)?;
        let mut want_sink = sink.clone();
        want_sink[..8].copy_from_slice(&orig.to_ne_bytes());
        let got = self.req.read_mr(&rs.local, 0, 16)?;
        if let Some(d) = first_difference(&got, &want_sink) {
            return Err(fail(format!(
                "the original value returned to the requester: {d} (MR-ATOM-6; bytes 8..16 must not change)"
            )));
        }
        let mut want_window = window.clone();
        want_window[8..16].copy_from_slice(&new.to_ne_bytes());
        let got = self.resp.read_mr(&ts.remote, off - 8, 24)?;
        if let Some(d) = first_difference(&got, &want_window) {
            return Err(fail(format!(
                "the responder's 8 bytes before, at and after the target (offset {off}): {d} (MR-ATOM-3)"
            )));
        }
        Ok(())
    }

    fn requester_completion(
        &mut self,
        op: Op,
        wr_id: u64,
        byte_len: Option<u64>,
        rule: &str,
    ) -> Result<(), Outcome> {
        let got = self.req.poll(self.rs.cq, 1, self.wait_ms)?;
        check_one(
            &got,
            "requester",
            wr_id,
            op.completion_opcode(),
            self.rs.qpn,
            byte_len,
            None,
        )
        .map_err(|e| fail(format!("{e} ({rule})")))
    }

    /// Neither CQ holds anything more; `responder`: check the responder's too.
    fn no_completion(&mut self, responder: bool) -> Result<(), Outcome> {
        let extra = self.req.poll(self.rs.cq, 0, 0)?;
        if let Some(c) = extra.first() {
            return Err(fail(format!("an unexpected requester completion: {c:?}")));
        }
        if responder {
            let extra = self.resp.poll(self.ts.cq, 0, 0)?;
            if let Some(c) = extra.first() {
                return Err(fail(format!(
                    "a responder completion for an operation that consumes no receive: {c:?}"
                )));
            }
        }
        Ok(())
    }
}

/// Checks that `got` is exactly one completion with these fields
/// (`byte_len` / `imm`: `None` = not checked; `Some(None)` imm = none).
fn check_one(
    got: &[Completion],
    who: &str,
    wr_id: u64,
    opcode: &str,
    qpn: u32,
    byte_len: Option<u64>,
    imm: Option<Option<u64>>,
) -> Result<(), String> {
    let c = match got {
        [] => return Err(format!("no {who} completion in time")),
        [c] => c,
        more => {
            return Err(format!(
                "{} {who} completions, expected one: {more:?}",
                more.len()
            ));
        }
    };
    let mut bad = Vec::new();
    if c.status != 0 {
        bad.push(format!("status {} (expected 0 SUCCESS)", c.status));
    }
    if c.wr_id != wr_id {
        bad.push(format!("wr_id {} (expected {wr_id})", c.wr_id));
    }
    if c.opcode != opcode {
        bad.push(format!("opcode {} (expected {opcode})", c.opcode));
    }
    if c.qpn != u64::from(qpn) {
        bad.push(format!("qpn {} (expected {qpn})", c.qpn));
    }
    if let Some(n) = byte_len
        && c.byte_len != n
    {
        bad.push(format!("byte_len {} (expected {n})", c.byte_len));
    }
    if let Some(i) = imm
        && c.imm != i
    {
        bad.push(format!("imm {:?} (expected {i:?})", c.imm));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{who} completion: {}", bad.join(", ")))
    }
}
