//! Saving findings and turning them into vectors of the suite (one corpus;
//! `metaroce fuzz export`, conformance/FUZZ.md).
//!
//! A finding is a folder `NNN-kind/` under `--out`:
//! - `reproducer.yaml`: the minimised vector (`metaroce run --vectors
//!   reproducer.yaml --iut …` FAILs it on the IUT that showed it);
//! - `batch.pcapng`: every packet of the batch as first run, commented;
//! - `reproducer.pcapng`: the reproducer's run;
//! - `finding.json`: kind, requirement, reason, sizes, whether the
//!   reproducer FAILed again.

use super::{Finding, FindingKind};
use crate::capture::PcapNgWriter;
use crate::run::verdict::{Direction, TestResult};
use crate::vector::load::{check_vector, load_vector};
use crate::vector::model::{SendStep, Vector};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A stable id for a finding: `fuzz.KIND.HASH` of its stimuli.
pub fn finding_id(kind: FindingKind, sends: &[SendStep], rq_psn: u32) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_string(sends).unwrap_or_default());
    h.update(rq_psn.to_le_bytes());
    let digest = hex::encode(h.finalize());
    format!(
        "fuzz.{}.{}",
        kind.name().to_ascii_lowercase(),
        &digest[..12]
    )
}

/// The YAML text of a vector, with a header comment.
pub fn to_yaml(vector: &Vector, header: &str) -> Result<String, String> {
    let body = serde_saphyr::to_string(vector).map_err(|e| format!("to YAML: {e}"))?;
    let mut out = String::new();
    for line in header.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&body);
    Ok(out)
}

/// Writes a test's packets as pcapng, each commented with its step and note.
pub fn write_pcapng(result: &TestResult, path: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(err)?;
    let mut w = PcapNgWriter::new(std::io::BufWriter::new(file)).map_err(err)?;
    let base: u64 = 1_767_225_600_000_000_000; // 2026-01-01, a fixed origin
    for p in &result.packets {
        let step = p
            .step
            .map_or("setup/oracle".to_string(), |s| format!("step {s}"));
        let dir = match p.direction {
            Direction::Sent => "harness → IUT",
            Direction::Received => "IUT → harness",
        };
        let mut comment = format!("{} {step}, {dir}", result.id);
        if !p.note.is_empty() {
            comment.push_str(": ");
            comment.push_str(&p.note);
        }
        let len = u32::try_from(p.bytes.len()).unwrap_or(u32::MAX);
        w.write_packet(base + p.at_ns, &p.bytes, len, Some(&comment))
            .map_err(err)?;
    }
    w.flush().map_err(err)
}

/// Saves finding number `index` under `out`; returns its folder.
pub fn save(out: &Path, index: usize, finding: &Finding, iut: &str) -> Result<PathBuf, String> {
    let dir = out.join(format!(
        "{index:03}-{}",
        finding.kind.name().to_ascii_lowercase()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let header = format!(
        "{} finding of `metaroce fuzz` against {iut}\n{}: {}\n{} of the batch's {} stimuli kept after {} replays; the reproducer {} on that IUT.\nTurn it into a suite vector with `metaroce fuzz export {}`.",
        finding.kind,
        finding.requirement,
        finding.reason,
        finding.reproducer_len(),
        finding.batch.len(),
        finding.replays,
        if finding.reproduced {
            "FAILed again"
        } else {
            "did NOT fail again (flaky or state-dependent)"
        },
        dir.display()
    );
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))
    };
    write(
        "reproducer.yaml",
        to_yaml(&finding.reproducer, &header)?.as_bytes(),
    )?;
    write_pcapng(&finding.batch_result, &dir.join("batch.pcapng"))?;
    write_pcapng(&finding.reproducer_result, &dir.join("reproducer.pcapng"))?;
    let meta = json!({
        "kind": finding.kind,
        "requirement": finding.requirement,
        "reason": finding.reason,
        "iut": iut,
        "after_packets": finding.after_packets,
        "batch_stimuli": finding.batch.len(),
        "reproducer_stimuli": finding.reproducer_len(),
        "replays": finding.replays,
        "reproduced": finding.reproduced,
        "id": finding.reproducer.id,
    });
    let text = serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?;
    write("finding.json", text.as_bytes())?;
    Ok(dir)
}

impl Finding {
    /// Stimuli in the reproducer.
    pub fn reproducer_len(&self) -> usize {
        self.reproducer
            .steps
            .iter()
            .take_while(|s| matches!(s, crate::vector::model::Step::Send(s) if s.note.as_deref().is_none_or(|n| !n.starts_with("liveness probe"))))
            .count()
    }
}

/// `metaroce fuzz export`: the reproducer of `finding` (its folder or its
/// YAML file) as a suite vector `DIR/NAME.yaml`, with `id` if given. Returns
/// the file written. Refuses to overwrite a file.
pub fn export(finding: &Path, to_dir: &Path, id: Option<&str>) -> Result<PathBuf, String> {
    let file = if finding.is_dir() {
        finding.join("reproducer.yaml")
    } else {
        finding.to_path_buf()
    };
    let loaded = load_vector(&file).map_err(|e| e.to_string())?;
    let mut vector = loaded.vector;
    if let Some(id) = id {
        vector.id = id.to_string();
    }
    check_vector(&vector).map_err(|e| format!("{}: {e}", file.display()))?;
    let name = vector
        .id
        .strip_prefix("fuzz.")
        .unwrap_or(&vector.id)
        .replace('.', "_");
    std::fs::create_dir_all(to_dir).map_err(|e| format!("{}: {e}", to_dir.display()))?;
    let out = to_dir.join(format!("{name}.yaml"));
    if out.exists() {
        return Err(format!("{}: exists; give another --id", out.display()));
    }
    let header = format!(
        "Exported by `metaroce fuzz export` from {}.\nPASSes on a conforming IUT; FAILs on the IUT the fuzzer found it on.",
        file.display()
    );
    std::fs::write(&out, to_yaml(&vector, &header)?)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live_fuzz::batch::batch_vector;
    use crate::live_fuzz::mutate_send_steps::Generator;

    #[test]
    fn a_batch_vector_round_trips_through_yaml() {
        let mut g = Generator::new(Vec::new(), 3);
        let sends: Vec<SendStep> = (0..20).map(|_| g.stimulus()).collect();
        let v = batch_vector("fuzz.t", &sends, 77, true);
        let text = to_yaml(&v, "a header\non two lines").unwrap();
        let back: Vector =
            crate::vector::load::parse_yaml(Path::new("t.yaml"), &text).expect("loads back");
        check_vector(&back).expect("still valid");
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&v).unwrap()
        );
    }
}
