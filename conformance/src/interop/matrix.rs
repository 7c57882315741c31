//! The result of an interop run: operation × direction → verdict, and its
//! renderings (terminal text, Markdown, JSON).

use super::cases::Op;
use super::endpoint::Endpoint;
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Who is the requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// A posts, B responds.
    AtoB = 0,
    /// B posts, A responds.
    BtoA = 1,
}

impl Direction {
    /// `A→B` or `B→A`.
    pub fn label(self) -> &'static str {
        match self {
            Direction::AtoB => "A→B",
            Direction::BtoA => "B→A",
        }
    }
}

/// A cell's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Every case passed.
    Pass,
    /// A case failed (the reason says which and how).
    Fail,
    /// An agent's reply broke the protocol: not judged.
    Error,
    /// A profile lacks the feature: not run.
    Unsupported,
}

impl Verdict {
    /// Upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
            Verdict::Unsupported => "UNSUPPORTED",
        }
    }
}

/// One operation in one direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The operation.
    pub op: Op,
    /// The direction.
    pub direction: Direction,
    /// The verdict.
    pub verdict: Verdict,
    /// Why it did not pass.
    pub reason: Option<String>,
    /// Cases run (sizes; 1 for an atomic).
    pub cases: u32,
}

/// One end, as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// The agent's address.
    pub agent: String,
    /// `implementation` name and version.
    pub implementation: String,
    /// Data-plane MAC.
    pub mac: String,
    /// Data-plane IPv4.
    pub ip: String,
}

impl End {
    /// What `ep` reported.
    pub fn of(ep: &Endpoint) -> Self {
        End {
            agent: ep.agent.clone(),
            implementation: ep.implementation.clone(),
            mac: ep.mac.clone(),
            ip: ep.ip.clone(),
        }
    }
}

/// A whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// When (UTC).
    pub date: String,
    /// End A.
    pub a: End,
    /// End B.
    pub b: End,
    /// Path MTU.
    pub pmtu: u32,
    /// MP QPs.
    pub mp: bool,
    /// Message sizes of the non-atomic operations.
    pub sizes: Vec<u64>,
    /// Seed.
    pub seed: u64,
    /// Canaries were checked.
    pub canaries: bool,
    /// The cells, operation by operation, A→B then B→A.
    pub cells: Vec<Cell>,
    /// Wall time.
    pub seconds: f64,
}

impl Matrix {
    /// The exit code: 0 no FAIL or ERROR, 1 a FAIL, else 2 an ERROR.
    pub fn exit_code(&self) -> u8 {
        let has = |v| self.cells.iter().any(|c| c.verdict == v);
        if has(Verdict::Fail) {
            crate::exit::FAIL
        } else if has(Verdict::Error) {
            crate::exit::ERROR
        } else {
            crate::exit::OK
        }
    }

    fn cell(&self, op: Op, d: Direction) -> Option<&Cell> {
        self.cells.iter().find(|c| c.op == op && c.direction == d)
    }

    fn ops(&self) -> Vec<Op> {
        let mut ops: Vec<Op> = Vec::new();
        for c in &self.cells {
            if !ops.contains(&c.op) {
                ops.push(c.op);
            }
        }
        ops
    }

    fn header(&self) -> String {
        format!(
            "A: {} at {} ({} / {}); B: {} at {} ({} / {}); PMTU {}{}; sizes {:?}; seed {}; canaries {}",
            self.a.implementation,
            self.a.agent,
            self.a.ip,
            self.a.mac,
            self.b.implementation,
            self.b.agent,
            self.b.ip,
            self.b.mac,
            self.pmtu,
            if self.mp { ", MP QPs" } else { "" },
            self.sizes,
            self.seed,
            if self.canaries {
                "checked"
            } else {
                "not offered"
            }
        )
    }

    /// One row per operation: its label and the verdicts of A→B and B→A
    /// (`-` where the cell was not run).
    fn rows(&self) -> impl Iterator<Item = (&'static str, &'static str, &'static str)> + '_ {
        self.ops().into_iter().map(|op| {
            let v = |d| self.cell(op, d).map_or("-", |c| c.verdict.name());
            (op.label(), v(Direction::AtoB), v(Direction::BtoA))
        })
    }

    /// Each cell that has a reason, as "VERDICT operation direction" and
    /// the reason.
    fn reasons(&self) -> impl Iterator<Item = (String, &str)> {
        self.cells.iter().filter_map(|c| {
            let r = c.reason.as_deref()?;
            Some((
                format!(
                    "{} {} {}",
                    c.verdict.name(),
                    c.op.label(),
                    c.direction.label()
                ),
                r,
            ))
        })
    }

    /// Terminal text: the header, one line per operation, then the reasons.
    pub fn text(&self) -> String {
        let mut out = format!("{}\n\n", self.header());
        let _ = writeln!(out, "{:<28} {:<12} {:<12}", "operation", "A→B", "B→A");
        for (op, ab, ba) in self.rows() {
            let _ = writeln!(out, "{op:<28} {ab:<12} {ba:<12}");
        }
        for (what, r) in self.reasons() {
            let _ = writeln!(out, "{what}: {r}");
        }
        let pass = self
            .cells
            .iter()
            .filter(|c| c.verdict == Verdict::Pass)
            .count();
        let _ = writeln!(
            out,
            "\n{pass}/{} cells PASS in {:.1} s ({})",
            self.cells.len(),
            self.seconds,
            self.date
        );
        out
    }

    /// A Markdown table (operations × directions) with the reasons below.
    pub fn markdown(&self) -> String {
        let mut out = format!("{} — {}\n\n", self.date, self.header());
        out.push_str("| operation | A→B | B→A |\n|---|---|---|\n");
        for (op, ab, ba) in self.rows() {
            let _ = writeln!(out, "| {op} | {ab} | {ba} |");
        }
        for (what, r) in self.reasons() {
            let _ = writeln!(out, "\n- {what}: {}", r.replace('|', "\\|"));
        }
        out
    }

    /// The JSON document of `--json`.
    pub fn json(&self) -> Value {
        let end = |e: &End| json!({"agent": e.agent, "implementation": e.implementation, "mac": e.mac, "ip": e.ip});
        json!({
            "date": self.date,
            "a": end(&self.a),
            "b": end(&self.b),
            "pmtu": self.pmtu,
            "mp": self.mp,
            "sizes": self.sizes,
            "seed": self.seed,
            "canaries": self.canaries,
            "seconds": self.seconds,
            "cells": self.cells.iter().map(|c| json!({
                "operation": c.op.key(),
                "direction": match c.direction { Direction::AtoB => "a_to_b", Direction::BtoA => "b_to_a" },
                "verdict": c.verdict.name(),
                "reason": c.reason,
                "cases": c.cases,
            })).collect::<Vec<_>>(),
            "exit": self.exit_code(),
        })
    }
}

/// Now, UTC, to the second.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    chrono::DateTime::from_timestamp(i64::try_from(secs).unwrap_or(0), 0).map_or_else(
        || "?".into(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}
