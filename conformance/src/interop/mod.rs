//! `metaroce interop`: two implementations, each behind an agent
//! (reference-impl/AGENT.md), connected by an RC QP pair on their own data
//! planes; every RC operation in both directions, the data checked through
//! the agents. The harness sends no frame itself: it only drives the two
//! agents.
//!
//! A cell of the matrix is one operation in one direction ("A→B": A posts
//! the work request, B is the responder — for a READ the data moves from B
//! to A). It passes when every size passes: the requester's completion
//! (status, opcode, QPN, and byte_len for READ and atomics), the
//! responder's receive completion where there is one (byte_len, imm), none
//! where there is none, the target's bytes and the bytes just after them,
//! the atomic's original value, and afterwards every canary of both ends.
//! After a cell that does not pass, the QP pair is built anew (a failed
//! work request moves a QP to ERR).

pub mod cases;
pub mod data;
pub mod endpoint;
pub mod matrix;
pub mod setup;

use cases::{Op, Outcome, Pair};
use endpoint::{CANARY_FILL, CallError, Endpoint};
use matrix::{Cell, Direction, End, Matrix, Verdict};
use setup::{Params, Side};

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Agent A, `HOST:PORT`.
    pub a: String,
    /// Agent B, `HOST:PORT`.
    pub b: String,
    /// MAC / IPv4 overrides of A's and B's data planes (else from `hello`).
    pub a_mac: Option<String>,
    /// See `a_mac`.
    pub a_ip: Option<String>,
    /// See `a_mac`.
    pub b_mac: Option<String>,
    /// See `a_mac`.
    pub b_ip: Option<String>,
    /// Message sizes; `None`: 0, 1, PMTU − 1, PMTU + 1, 65536.
    pub sizes: Option<Vec<u64>>,
    /// Path MTU; `None`: 1024, or the smaller `max_pmtu` of the two.
    pub pmtu: Option<u32>,
    /// Connect MP QPs (both profiles must have `mp`).
    pub mp: bool,
    /// Seed of PSNs and data.
    pub seed: u64,
    /// How long one completion may take, ms.
    pub wait_ms: u64,
    /// Only these operations (empty: all).
    pub ops: Vec<Op>,
    /// What one cell may cost (its wall clock; docs/budgets.md): spent,
    /// the cell is ERROR and the run goes on.
    pub budget: crate::run::budget::Budget,
}

/// Why the run could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartError {
    /// An agent is unreachable or the arguments do not fit the agents.
    BadInput(String),
    /// Setting up the QP pair failed (refused or broken replies).
    Setup(String),
}

/// Canary bytes on each side of each MR, when both agents offer them.
const CANARY: u64 = 64;

/// Runs the matrix. `progress` gets one line per cell as it finishes.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&Cell)) -> Result<Matrix, StartError> {
    let started = std::time::Instant::now();
    let mut a = Endpoint::connect("A", &cfg.a, cfg.a_mac.as_deref(), cfg.a_ip.as_deref())
        .map_err(StartError::BadInput)?;
    let mut b = Endpoint::connect("B", &cfg.b, cfg.b_mac.as_deref(), cfg.b_ip.as_deref())
        .map_err(StartError::BadInput)?;
    let max_pmtu = |e: &Endpoint| e.number("max_pmtu").unwrap_or(1024);
    let top = max_pmtu(&a).min(max_pmtu(&b));
    let pmtu = match cfg.pmtu {
        Some(p) if ![256, 512, 1024, 2048, 4096].contains(&p) => {
            return Err(StartError::BadInput(format!(
                "--pmtu {p}: one of 256, 512, 1024, 2048, 4096"
            )));
        }
        Some(p) if u64::from(p) > top => {
            return Err(StartError::BadInput(format!(
                "--pmtu {p}: above the agents' max_pmtu (A {}, B {})",
                max_pmtu(&a),
                max_pmtu(&b)
            )));
        }
        Some(p) => p,
        None => match [1024u32, 512, 256]
            .into_iter()
            .find(|p| u64::from(*p) <= top)
        {
            Some(p) => p,
            None => {
                return Err(StartError::BadInput(format!(
                    "the agents' max_pmtu (A {}, B {}) leaves no path MTU of at least 256",
                    max_pmtu(&a),
                    max_pmtu(&b)
                )));
            }
        },
    };
    let sizes = cfg.sizes.clone().unwrap_or_else(|| {
        let p = u64::from(pmtu);
        vec![0, 1, p - 1, p + 1, 65536]
    });
    let max_msg = |e: &Endpoint| e.number("max_msg_size").unwrap_or(u64::from(u32::MAX));
    let biggest = sizes.iter().copied().max().unwrap_or(0);
    let limit = max_msg(&a).min(max_msg(&b)).min(1 << 20);
    if biggest > limit {
        return Err(StartError::BadInput(format!(
            "--sizes: {biggest} bytes is above what both agents take ({limit}: max_msg_size, and at most 1 MiB here)"
        )));
    }
    if cfg.mp && !(a.has("mp") && b.has("mp")) {
        return Err(StartError::BadInput(format!(
            "--mp: both profiles need mp: true (A {}, B {})",
            a.has("mp"),
            b.has("mp")
        )));
    }
    let canaries = [&a, &b]
        .iter()
        .all(|e| e.ops.iter().any(|o| o == "read_canary"));
    let params = Params {
        mr_len: (biggest + 64).max(4096).next_multiple_of(8),
        pmtu,
        mp: cfg.mp,
        canary: if canaries { CANARY } else { 0 },
        atomics: a.has("atomics") && b.has("atomics"),
    };
    let conn = setup::connect(&mut a, &mut b, &params, cfg.seed)
        .map_err(|e| StartError::Setup(e.to_string()))?;
    let mut state = State {
        conn: Some(conn),
        params: params.clone(),
        generation: 0,
    };
    let ops = if cfg.ops.is_empty() {
        Op::ALL.to_vec()
    } else {
        cfg.ops.clone()
    };
    let mut cells = Vec::new();
    for op in ops {
        for direction in [Direction::AtoB, Direction::BtoA] {
            let cell = state.cell(&mut a, &mut b, cfg, op, direction, &sizes);
            progress(&cell);
            cells.push(cell);
        }
    }
    Ok(Matrix {
        date: matrix::utc_now(),
        a: End::of(&a),
        b: End::of(&b),
        pmtu,
        mp: cfg.mp,
        sizes,
        seed: cfg.seed,
        canaries,
        cells,
        seconds: started.elapsed().as_secs_f64(),
    })
}

struct State {
    conn: Option<(Side, Side)>,
    params: Params,
    generation: u64,
}

impl State {
    fn cell(
        &mut self,
        a: &mut Endpoint,
        b: &mut Endpoint,
        cfg: &Config,
        op: Op,
        direction: Direction,
        sizes: &[u64],
    ) -> Cell {
        let mut cell = Cell {
            op,
            direction,
            verdict: Verdict::Pass,
            reason: None,
            cases: 0,
        };
        if let Some(key) = op.needs()
            && !(a.has(key) && b.has(key))
        {
            cell.verdict = Verdict::Unsupported;
            cell.reason = Some(format!(
                "profile `{key}`: A {}, B {}",
                a.has(key),
                b.has(key)
            ));
            return cell;
        }
        a.set_budget(Some(cfg.budget));
        b.set_budget(Some(cfg.budget));
        let result = self.cases(a, b, cfg, op, direction, sizes, &mut cell.cases);
        a.set_budget(None);
        b.set_budget(None);
        if let Err(outcome) = result {
            // A failed work request leaves the QPs in ERR: start afresh.
            self.conn = None;
            let (verdict, reason) = match outcome {
                Outcome::Fail(r) => (Verdict::Fail, r),
                Outcome::Error(r) => (Verdict::Error, r),
            };
            cell.verdict = verdict;
            cell.reason = Some(reason);
        }
        cell
    }

    #[allow(clippy::too_many_arguments)]
    fn cases(
        &mut self,
        a: &mut Endpoint,
        b: &mut Endpoint,
        cfg: &Config,
        op: Op,
        direction: Direction,
        sizes: &[u64],
        count: &mut u32,
    ) -> Result<(), Outcome> {
        let (sa, sb) = match self.conn {
            Some(c) => c,
            None => {
                self.generation += 1;
                let seed = data::mix(cfg.seed, 0xC0_0000 + self.generation);
                let c = setup::connect(a, b, &self.params, seed)
                    .map_err(|e| Outcome::Error(format!("setting up the QP pair again: {e}")))?;
                self.conn = Some(c);
                c
            }
        };
        let (req, rs, resp, ts) = match direction {
            Direction::AtoB => (a, sa, b, sb),
            Direction::BtoA => (b, sb, a, sa),
        };
        let mut pair = Pair {
            req,
            rs,
            resp,
            ts,
            wait_ms: cfg.wait_ms,
            seed: cfg.seed,
        };
        let sizes: &[u64] = if op.is_atomic() { &[8] } else { sizes };
        for (i, &n) in sizes.iter().enumerate() {
            let salt = ((op as u64) << 40)
                | ((direction as u64) << 36)
                | (self.generation << 24)
                | i as u64;
            *count += 1;
            pair.run(op, n, salt).map_err(|o| match o {
                Outcome::Fail(r) if !op.is_atomic() => Outcome::Fail(format!("{n} bytes: {r}")),
                Outcome::Error(r) if !op.is_atomic() => Outcome::Error(format!("{n} bytes: {r}")),
                o => o,
            })?;
        }
        if self.params.canary > 0 {
            for (ep, side) in [(&mut *pair.req, rs), (&mut *pair.resp, ts)] {
                for mr in [side.local, side.remote] {
                    let (before, after) = ep.read_canary(&mr).map_err(Outcome::from)?;
                    for (where_, bytes) in [("before", before), ("after", after)] {
                        if let Some(i) = bytes.iter().position(|&x| x != CANARY_FILL) {
                            return Err(Outcome::Fail(format!(
                                "agent {}: the canary {where_} an MR changed at its byte {i} (MR-SEC-4)",
                                ep.name
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

impl From<CallError> for StartError {
    fn from(e: CallError) -> Self {
        StartError::Setup(e.to_string())
    }
}
