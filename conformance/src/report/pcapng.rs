//! Every test's traffic in one pcapng, each packet commented with the test
//! id, the step, the direction and what was expected of it; tests follow
//! one another one second apart.

use crate::capture::PcapNgWriter;
use crate::run::SuiteResult;
use crate::run::verdict::Direction;
use std::io::Write;

/// Writes the traffic of every test.
pub fn write_pcapng<W: Write>(result: &SuiteResult, out: W) -> std::io::Result<()> {
    let mut w = PcapNgWriter::new(out)?;
    let base: u64 = 1_767_225_600_000_000_000; // 2026-01-01, a fixed origin
    for (i, t) in result.tests.iter().enumerate() {
        let t0 = base + (i as u64) * 1_000_000_000;
        for p in &t.packets {
            let step = p.step.map_or("setup".to_string(), |s| format!("step {s}"));
            let dir = match p.direction {
                Direction::Sent => "harness → IUT",
                Direction::Received => "IUT → harness",
            };
            let mut comment = format!("{} [{}] {step}, {dir}", t.id, t.verdict.name());
            if !p.note.is_empty() {
                comment.push_str(": ");
                comment.push_str(&p.note);
            }
            let len = u32::try_from(p.bytes.len()).unwrap_or(u32::MAX);
            w.write_packet(t0 + p.at_ns.min(999_999_999), &p.bytes, len, Some(&comment))?;
        }
    }
    w.flush()
}
