//! The counts behind `metaroce check`'s summaries: findings per requirement
//! (with the first frame and a few examples) and per connection, of what was
//! reported (after the QP filter).

use super::{Reported, report::reported_text, spec_order};
use metaroce_spec::Severity;
use metaroce_spec::judge::ConnectionSummary;
use std::collections::HashMap;

/// Example findings kept per requirement (for JUnit).
pub const MAX_SAMPLES: usize = 20;

/// Most connections counted; findings of further ones are counted under none.
const MAX_CONNECTION_KEYS: usize = 100_000;

/// The findings of one requirement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdTally {
    /// Findings of severity MUST.
    pub must: u64,
    /// Findings of severity SHOULD.
    pub should: u64,
    /// Informational findings.
    pub info: u64,
    /// The first frame of the first finding.
    pub first_frame: u64,
    /// The first [`MAX_SAMPLES`] findings, as text lines.
    pub samples: Vec<String>,
}

impl IdTally {
    /// All findings.
    pub fn total(&self) -> u64 {
        self.must + self.should + self.info
    }

    /// The worst severity seen.
    pub fn worst(&self) -> Severity {
        if self.must > 0 {
            Severity::Must
        } else if self.should > 0 {
            Severity::Should
        } else {
            Severity::Info
        }
    }
}

/// Counts of reported findings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    by_id: HashMap<&'static str, IdTally>,
    /// Per connection (by its first frame; `None`: no connection): counts
    /// per requirement.
    by_conn: HashMap<Option<u64>, HashMap<&'static str, IdTally>>,
}

impl Tally {
    /// Counts a reported finding.
    pub fn add(&mut self, r: &Reported) {
        let first = r.frames.first().copied().unwrap_or(0);
        let add = |t: &mut IdTally, sample: bool| {
            if t.total() == 0 {
                t.first_frame = first;
            }
            match r.finding.severity {
                Severity::Must => t.must += 1,
                Severity::Should => t.should += 1,
                Severity::Info => t.info += 1,
            }
            if sample && t.samples.len() < MAX_SAMPLES {
                t.samples.push(reported_text(r));
            }
        };
        add(self.by_id.entry(r.finding.id).or_default(), true);
        let key = if self.by_conn.len() < MAX_CONNECTION_KEYS
            || self.by_conn.contains_key(&r.connection)
        {
            r.connection
        } else {
            None
        };
        add(
            self.by_conn
                .entry(key)
                .or_default()
                .entry(r.finding.id)
                .or_default(),
            false,
        );
    }

    /// Findings by severity: (must, should, info).
    pub fn counts(&self) -> (u64, u64, u64) {
        self.by_id.values().fold((0, 0, 0), |(m, s, i), t| {
            (m + t.must, s + t.should, i + t.info)
        })
    }

    /// Requirements with their counts, in SPEC.md order.
    pub fn by_id(&self) -> Vec<(&'static str, &IdTally)> {
        let mut v: Vec<(&'static str, &IdTally)> =
            self.by_id.iter().map(|(id, t)| (*id, t)).collect();
        v.sort_by_key(|(id, _)| spec_order(id));
        v
    }

    /// The findings of connection `c` per requirement, in SPEC.md order.
    pub fn for_connection(&self, c: &ConnectionSummary) -> Vec<(&'static str, &IdTally)> {
        let mut v: Vec<(&'static str, &IdTally)> = self
            .by_conn
            .get(&Some(c.first_frame))
            .map(|m| m.iter().map(|(id, t)| (*id, t)).collect())
            .unwrap_or_default();
        v.sort_by_key(|(id, _)| spec_order(id));
        v
    }
}
