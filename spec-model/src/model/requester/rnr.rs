//! RNR NAK handling (SPEC.md §6.11).

use super::{RequesterState, RnrWait};
use crate::model::{Outcomes, WcStatus};
use metaroce_codec::Psn;

/// The wait of an RNR timer code, in nanoseconds (table of SPEC.md §6.11).
pub fn rnr_wait_ns(code: u8) -> u64 {
    const US_X100: [u64; 32] = [
        65536000, 1000, 2000, 3000, 4000, 6000, 8000, 12000, 16000, 24000, 32000, 48000, 64000,
        96000, 128000, 192000, 256000, 384000, 512000, 768000, 1024000, 1536000, 2048000, 3072000,
        4096000, 6144000, 8192000, 12288000, 16384000, 24576000, 32768000, 49152000,
    ];
    US_X100[usize::from(code & 0x1F)] * 10
}

impl RequesterState {
    /// An RNR NAK with PSN `p` (outstanding) and timer `code` arrived at `now_ns`.
    ///
    /// Earlier PSNs are acknowledged ("MR-RNR-4"); the NAK counts against
    /// `rnr_retry`, 7 meaning unlimited, and with the counter at 0 the work
    /// request fails with RNR_RETRY_EXC_ERR ("MR-RNR-6"); `retry_cnt` is not
    /// touched ("MR-RNR-7"). Otherwise the requester waits the table time
    /// before it retransmits from `p` ("MR-RNR-3"), see `on_timer`.
    pub(super) fn on_rnr_nak(&mut self, p: Psn, code: u8, now_ns: u64, out: &mut Outcomes) {
        if let Some(restart) = self.ack_through(p.sub(1), now_ns) {
            // An earlier READ or atomic lost its responses: retry from there ("MR-REQ-4").
            self.go_back(restart, now_ns, &["MR-REQ-4", "MR-TMR-5"], out);
            return;
        }
        if self.attrs.rnr_retry < 7 {
            if self.rnr_left == 0 {
                if let Some(idx) = self.wqe_holding(p) {
                    self.fail(idx, WcStatus::RnrRetryExcErr, &["MR-RNR-6"], out);
                }
                return;
            }
            self.rnr_left -= 1; // "MR-RNR-6"
        }
        self.rnr_wait = Some(RnrWait {
            psn: p,
            arrived_ns: now_ns,
            wait_ns: rnr_wait_ns(code), // "MR-RNR-3"
        });
        self.timer_ref_ns = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_times() {
        assert_eq!(rnr_wait_ns(0), 655_360_000);
        assert_eq!(rnr_wait_ns(1), 10_000);
        assert_eq!(rnr_wait_ns(12), 640_000);
        assert_eq!(rnr_wait_ns(25), 61_440_000);
        assert_eq!(rnr_wait_ns(31), 491_520_000);
    }
}
