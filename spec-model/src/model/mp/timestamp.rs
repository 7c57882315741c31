//! The clock behind MPETH timestamps (SPEC.md §7.2, MR-MPH-5): one sender's
//! timestamps, compared with the times a capture saw its packets, must
//! advance at one tick per nanosecond within 100 ppm.
//!
//! The capture clock is the reference. A packet is captured some time after
//! its transmit time (propagation, queuing, capture timestamping); that
//! delay may vary by up to `jitter_ns` between packets. The capture clock's
//! own error (`capture_ppm`) widens the allowed rate.
//!
//! Timestamps wrap modulo 2^32: consecutive samples are unwrapped by taking
//! the step closest to the capture step, which is unambiguous while the two
//! steps differ by less than 2^31 ns (about 2.1 s) between consecutive
//! samples.

use crate::Finding;

/// The sender's clock accuracy MR-MPH-5 requires, in parts per million.
pub const CLOCK_PPM: u64 = 100;

/// One request packet or probe of one MP sender as captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimestampSample {
    /// Capture time in ns (capture clock).
    pub capture_ns: u64,
    /// MPETH timestamp the packet carried.
    pub mpeth_ts: u32,
}

/// What the capture contributes to the error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CaptureTolerance {
    /// Largest variation of the delay from transmission to capture, in ns.
    pub jitter_ns: u64,
    /// Accuracy of the capture clock, in ppm.
    pub capture_ppm: u64,
}

/// Judges one MP sender's MPETH timestamps against their capture times
/// ("MR-MPH-5"). Samples are taken in capture order. With the first sample
/// as origin, sample i passes when its timestamp has advanced by the
/// capture time elapsed, D, within (100 + `capture_ppm`) ppm of D + jitter,
/// plus the jitter. At most one finding: the first sample outside.
pub fn judge_timestamp_clock(samples: &[TimestampSample], tol: CaptureTolerance) -> Vec<Finding> {
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| s.capture_ns);
    let Some(first) = sorted.first().copied() else {
        return Vec::new();
    };
    let ppm = i128::from(CLOCK_PPM) + i128::from(tol.capture_ppm);
    let jitter = i128::from(tol.jitter_ns);
    // Unwrapped timestamp advance since the first sample.
    let mut advance: i128 = 0;
    let mut prev = first;
    for (i, s) in sorted.iter().enumerate().skip(1) {
        let step = i128::from(s.capture_ns - prev.capture_ns);
        let raw = s.mpeth_ts.wrapping_sub(prev.mpeth_ts);
        // The step modulo 2^32 nearest to the capture step.
        let off = i128::from(raw.wrapping_sub(step as u32) as i32);
        advance += step + off;
        prev = *s;
        let elapsed = i128::from(s.capture_ns - first.capture_ns);
        let allowed = (elapsed + jitter)
            .saturating_mul(ppm)
            .saturating_add(999_999)
            / 1_000_000
            + jitter;
        let error = advance - elapsed;
        if error.abs() > allowed {
            let rate = if elapsed > 0 {
                format!("{:+} ppm", error * 1_000_000 / elapsed)
            } else {
                "no time elapsed".into()
            };
            return vec![Finding::new(
                "MR-MPH-5",
                format!(
                    "sample {i}: MPETH timestamps advanced {advance} ns in {elapsed} ns of capture time ({rate}; {allowed} ns allowed)"
                ),
            )];
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets every 10 µs for 50 ms from a sender whose clock runs at
    /// (1 + ppm / 10^6) ticks per ns, starting at `ts0`, captured with a
    /// delay of 500 ns plus a pseudo-random 0–`jitter` ns.
    fn sender(ppm: i64, ts0: u32, jitter: u64) -> Vec<TimestampSample> {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        (0..5000u64)
            .map(|k| {
                let tx = 1_000_000 + k * 10_000;
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let delay = 500 + if jitter > 0 { seed % (jitter + 1) } else { 0 };
                let ticks = (tx as i128 * (1_000_000 + i128::from(ppm)) / 1_000_000) as u64;
                TimestampSample {
                    capture_ns: tx + delay,
                    mpeth_ts: ts0.wrapping_add(ticks as u32),
                }
            })
            .collect()
    }

    const TOL: CaptureTolerance = CaptureTolerance {
        jitter_ns: 300,
        capture_ppm: 0,
    };

    #[test]
    fn conforming_clocks_pass_mr_mph_5() {
        for ppm in [0, 99, -99] {
            // Starting near 2^32 so that the timestamps wrap.
            let s = sender(ppm, u32::MAX - 20_000_000, 300);
            assert!(
                judge_timestamp_clock(&s, TOL).is_empty(),
                "MR-MPH-5 at {ppm} ppm"
            );
        }
        // Order of the samples does not matter; none or one sample passes.
        let mut s = sender(50, 0, 300);
        s.reverse();
        assert!(judge_timestamp_clock(&s, TOL).is_empty());
        assert!(judge_timestamp_clock(&[], TOL).is_empty());
        assert!(judge_timestamp_clock(&s[..1], TOL).is_empty());
    }

    #[test]
    fn a_200_ppm_clock_breaks_mr_mph_5() {
        for ppm in [200, -200] {
            let s = sender(ppm, u32::MAX - 20_000_000, 300);
            let f = judge_timestamp_clock(&s, TOL);
            assert_eq!(f.len(), 1, "MR-MPH-5 at {ppm} ppm");
            assert_eq!(f[0].id, "MR-MPH-5");
        }
        // Microsecond ticks instead of nanoseconds.
        let us: Vec<_> = sender(0, 0, 0)
            .into_iter()
            .map(|s| TimestampSample {
                mpeth_ts: (s.capture_ns / 1000) as u32,
                ..s
            })
            .collect();
        assert_eq!(judge_timestamp_clock(&us, TOL).len(), 1, "MR-MPH-5");
    }

    #[test]
    fn jitter_and_capture_clock_widen_the_tolerance() {
        // 300 ns of capture jitter with no jitter allowance: broken.
        let s = sender(0, 7, 300);
        let none = CaptureTolerance::default();
        assert_eq!(judge_timestamp_clock(&s, none).len(), 1);
        // A 150 ppm sender passes when the capture clock may be 100 ppm off.
        let s = sender(150, 7, 300);
        let loose = CaptureTolerance {
            capture_ppm: 100,
            ..TOL
        };
        assert!(judge_timestamp_clock(&s, loose).is_empty());
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let s = [
            TimestampSample {
                capture_ns: u64::MAX,
                mpeth_ts: 0,
            },
            TimestampSample {
                capture_ns: 0,
                mpeth_ts: u32::MAX,
            },
        ];
        let _ = judge_timestamp_clock(
            &s,
            CaptureTolerance {
                jitter_ns: u64::MAX,
                capture_ppm: u64::MAX,
            },
        );
    }
}
