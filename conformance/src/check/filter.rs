//! What `metaroce check` judges and reports: a time range of the capture
//! (`--from`, `--to`) and QPs (`--qp`).
//!
//! The time range selects the frames judged, as if the capture had been
//! cut there: frames before `--from` are skipped (the conversation judge
//! then starts mid-conversation and learns its state), and reading stops at
//! the first frame after `--to`. A bound is seconds after the first frame of
//! the capture (`1.5`) or, with a leading `@`, absolute Unix time in
//! seconds (`@1764431280.25`).
//!
//! QPs select what is reported: every frame is still judged (a
//! conversation needs both directions), and a finding is reported when it
//! concerns one of the QPNs (either end of its connection, or the frame's
//! DestQP).

use super::Reported;
use core::fmt;
use core::str::FromStr;
use metaroce_spec::judge::ConnectionSummary;

/// One end of the time range, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBound {
    /// After the first frame's timestamp.
    Relative(u64),
    /// Since the Unix epoch.
    Absolute(u64),
}

/// Why a time bound does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeBoundError(String);

impl fmt::Display for TimeBoundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a time: seconds after the first frame (1.5) or @ and Unix seconds (@1764431280.25)",
            self.0
        )
    }
}

impl std::error::Error for TimeBoundError {}

/// Decimal seconds (up to nanoseconds) as nanoseconds.
fn seconds_ns(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || frac.len() > 9
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut nanos = 0u64;
    for (i, b) in frac.bytes().enumerate() {
        nanos += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    whole.checked_mul(1_000_000_000)?.checked_add(nanos)
}

impl FromStr for TimeBound {
    type Err = TimeBoundError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || TimeBoundError(s.to_string());
        match s.strip_prefix('@') {
            Some(abs) => seconds_ns(abs).map(TimeBound::Absolute).ok_or_else(err),
            None => seconds_ns(s).map(TimeBound::Relative).ok_or_else(err),
        }
    }
}

impl TimeBound {
    fn resolve(self, first_ns: u64) -> u64 {
        match self {
            TimeBound::Relative(d) => first_ns.saturating_add(d),
            TimeBound::Absolute(t) => t,
        }
    }
}

/// What to do with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameVerdict {
    /// Judge it.
    Take,
    /// Before the range: skip it.
    Skip,
    /// After the range: stop reading.
    Stop,
}

/// The filters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Report only findings concerning these QPNs (empty: all).
    pub qps: Vec<u32>,
    /// Judge frames from this time on.
    pub from: Option<TimeBound>,
    /// Judge frames up to this time (inclusive).
    pub to: Option<TimeBound>,
    first_ns: Option<u64>,
}

impl Filter {
    /// A filter of `qps` and the time range `from` … `to`.
    pub fn new(qps: Vec<u32>, from: Option<TimeBound>, to: Option<TimeBound>) -> Self {
        Filter {
            qps,
            from,
            to,
            first_ns: None,
        }
    }

    /// Whether the frame captured at `timestamp_ns` is judged (the first
    /// frame of the capture fixes what relative bounds count from).
    pub fn frame(&mut self, timestamp_ns: u64) -> FrameVerdict {
        let first = *self.first_ns.get_or_insert(timestamp_ns);
        if self.to.is_some_and(|t| timestamp_ns > t.resolve(first)) {
            return FrameVerdict::Stop;
        }
        if self.from.is_some_and(|t| timestamp_ns < t.resolve(first)) {
            return FrameVerdict::Skip;
        }
        FrameVerdict::Take
    }

    /// Whether the filter selects frames by time.
    pub fn has_time_range(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }

    /// Whether finding `r` is reported.
    pub fn finding(&self, r: &Reported) -> bool {
        self.qps.is_empty() || r.qpns.iter().any(|q| self.qps.contains(q))
    }

    /// Whether connection `c` is reported.
    pub fn connection(&self, c: &ConnectionSummary) -> bool {
        self.qps.is_empty()
            || self.qps.contains(&c.key.responder_qpn)
            || c.requester_qpn.is_some_and(|q| self.qps.contains(&q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse_as_seconds() {
        assert_eq!("1.5".parse(), Ok(TimeBound::Relative(1_500_000_000)));
        assert_eq!("0".parse(), Ok(TimeBound::Relative(0)));
        assert_eq!(".000000001".parse(), Ok(TimeBound::Relative(1)));
        assert_eq!(
            "@1764431280.25".parse(),
            Ok(TimeBound::Absolute(1_764_431_280_250_000_000))
        );
        for bad in [
            "",
            ".",
            "-1",
            "1e3",
            "1.0000000001",
            "@",
            "x",
            "99999999999999999999",
        ] {
            assert!(bad.parse::<TimeBound>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_range_counts_from_the_first_frame() {
        let mut f = Filter::new(
            vec![],
            Some(TimeBound::Relative(10)),
            Some(TimeBound::Relative(20)),
        );
        assert_eq!(f.frame(1000), FrameVerdict::Skip);
        assert_eq!(f.frame(1010), FrameVerdict::Take);
        assert_eq!(f.frame(1020), FrameVerdict::Take);
        assert_eq!(f.frame(1021), FrameVerdict::Stop);
        let mut abs = Filter::new(vec![], Some(TimeBound::Absolute(1005)), None);
        assert_eq!(abs.frame(1000), FrameVerdict::Skip);
        assert_eq!(abs.frame(1005), FrameVerdict::Take);
    }
}
