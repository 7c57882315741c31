//! One fuzz batch as a vector: the fuzz setup, the stimuli, and the oracle
//! steps. A batch is run by the conformance session like any vector, so a
//! reproducer is that same vector, loadable by `metaroce run`.
//!
//! Setup (on a freshly reset IUT): the fuzz QP (the vector's QP) and a
//! sentinel QP (`second_qp`), both RC, connected to the harness; MRs `fuzz`
//! (256 bytes, every remote access, known contents: the fuzz packets aim at
//! it), `sentinel` (the probes' MR) and `ro` (64 bytes of 0x5a, local access
//! only: no remote request may change it); canaries around every MR when the
//! agent places them. One receive is posted, on the sentinel, for the SEND
//! probe. **No receive is posted on the fuzz QP and no work request on any
//! QP before the probes**, so no completion can legitimately exist when the
//! stimuli have been sent: a generated SEND cannot consume a receive, a
//! NAK that moves the fuzz QP to ERR has nothing to flush. That makes the
//! completion oracle exact: any completion before the probes is a finding.
//!
//! Oracle steps after the stimuli, in order (the first failing one names the
//! finding):
//! 1. `expect_no_completion` — COMPLETION (MR-ROB-5: an input has no effect
//!    beyond the outcome §9.2 names; MR-ROB-6 for the sentinel);
//! 2. liveness probe on the sentinel: RC SEND (ACK + receive completion),
//!    WRITE (ACK), READ (READ Response Only) — HANG (MR-ROB-7);
//! 3. `expect_memory` of `ro` — MEMORY (MR-SEC-4);
//! 4. the session's canary check of every MR — MEMORY (MR-SEC-4).
//!
//! Two more oracles run after the vector (see [`super::oracle`]): no READ
//! response with data to an out-of-range READ ([`super::leak`], MEMORY,
//! MR-SEC-6), and, when the agent says the fuzz QP is still RTS, a
//! duplicate WRITE with AckReq must draw an ACK (MR-DUP-2, MR-ROB-7). Their
//! steps ([`super::leak::expect_no_response`], [`fuzz_qp_probe`]) are added
//! to the reproducer of such a finding.

use super::mutate_send_steps::{FUZZ_MR, FUZZ_MR_LEN};
use crate::vector::model::{SendStep, Step, Vector};
use serde_json::json;

/// `wr_id` of the sentinel's receive.
pub const PROBE_WR_ID: u64 = 0x5E47;
/// How long a probe's answer may take on virtual time, µs (the session adds
/// the calibrated margin on a live IUT).
pub const PROBE_WITHIN_US: u64 = 2_000;

/// The vector of a batch: `sends` then the oracle steps; with `fuzz_probe`
/// also the fuzz QP's liveness probe. `rq_psn` is the harness's first PSN
/// (the batch's `${psn}`).
pub fn batch_vector(id: &str, sends: &[SendStep], rq_psn: u32, fuzz_probe: bool) -> Vector {
    batch_vector_with(id, sends, rq_psn, fuzz_probe, &[])
}

/// [`batch_vector`] with extra steps (a reproducer's specific check, such as
/// [`super::leak::expect_no_response`]) right after the stimuli.
pub fn batch_vector_with(
    id: &str,
    sends: &[SendStep],
    rq_psn: u32,
    fuzz_probe: bool,
    extra: &[Step],
) -> Vector {
    let mut steps: Vec<Step> = sends.iter().cloned().map(Step::Send).collect();
    steps.extend(extra.iter().cloned());
    steps.extend(oracle_steps());
    if fuzz_probe {
        steps.extend(fuzz_qp_probe());
    }
    let description = "Found by `metaroce fuzz`: the stimuli, then the fuzzer's oracles \
        (no completion may exist; RC SEND, WRITE and READ on a sentinel QP still complete; \
        memory outside the targeted MR unchanged; canaries intact).";
    let v = json!({
        "id": id,
        "title": "fuzz batch: stimuli on the fuzz QP, then liveness, completion and memory oracles",
        "requirements": ["MR-ROB-5", "MR-ROB-7", "MR-SEC-4", "MR-ROB-6"],
        "profile": "base",
        "role": "requester",
        "description": description,
        "setup": {
            "qp": {"rq_psn": rq_psn},
            "second_qp": true,
            "mrs": [
                {"name": FUZZ_MR, "length": FUZZ_MR_LEN,
                 "access": ["local_write", "remote_write", "remote_read", "remote_atomic"],
                 "content": {"len": FUZZ_MR_LEN, "seed": 0x40}},
                {"name": "sentinel", "length": 64,
                 "access": ["local_write", "remote_write", "remote_read"]},
                {"name": "ro", "length": 64, "access": ["local_write"], "fill": 0x5a}
            ],
            "recvs": [{"wr_id": PROBE_WR_ID, "second_qp": true,
                       "sg": [{"mr": "sentinel", "offset": 32, "length": 32}]}]
        },
        "steps": []
    });
    let mut vector: Vector =
        serde_json::from_value(v).expect("the batch skeleton is a valid vector");
    vector.steps = steps;
    vector
}

fn step(v: serde_json::Value) -> Step {
    serde_json::from_value(v).expect("the fuzzer's own steps are valid")
}

/// The oracle steps that follow the stimuli.
pub fn oracle_steps() -> Vec<Step> {
    let w = PROBE_WITHIN_US;
    [
        json!({"expect_no_completion": {"within_us": 300}}),
        json!({"send": {"opcode": "RC_SEND_ONLY", "second_qp": true,
            "bth": {"psn": "${psn}"}, "payload": "70726f6265",
            "note": "liveness probe: SEND on the sentinel QP"}}),
        json!({"expect": {"within_us": w, "skip_unmatched": true, "requirement": "MR-ROB-7",
            "fields": {"opcode": "RC_ACK", "bth.dest_qp": "${h.qpn2}", "bth.psn": "${psn}",
                       "syndrome": "ack"}}}),
        json!({"expect_completion": {"within_us": w, "requirement": "MR-ROB-7",
            "fields": {"wr_id": PROBE_WR_ID, "status_name": "SUCCESS", "opcode": "recv",
                       "byte_len": 5}}}),
        json!({"send": {"opcode": "RC_WRITE_ONLY", "second_qp": true,
            "bth": {"psn": "${psn + 1}"},
            "ext": {"reth": {"va": "${mr.sentinel.addr + 8}", "rkey": "${mr.sentinel.rkey}",
                             "dma_len": 4}},
            "payload": "c0ffee00", "note": "liveness probe: WRITE on the sentinel QP"}}),
        json!({"expect": {"within_us": w, "skip_unmatched": true, "requirement": "MR-ROB-7",
            "fields": {"opcode": "RC_ACK", "bth.dest_qp": "${h.qpn2}", "bth.psn": "${psn + 1}",
                       "syndrome": "ack"}}}),
        json!({"send": {"opcode": "RC_READ_REQUEST", "second_qp": true,
            "bth": {"psn": "${psn + 2}"},
            "ext": {"reth": {"va": "${mr.sentinel.addr + 8}", "rkey": "${mr.sentinel.rkey}",
                             "dma_len": 4}},
            "note": "liveness probe: READ on the sentinel QP"}}),
        json!({"expect": {"within_us": w, "skip_unmatched": true, "requirement": "MR-ROB-7",
            "fields": {"opcode": "RC_READ_RESPONSE_ONLY", "bth.dest_qp": "${h.qpn2}",
                       "bth.psn": "${psn + 2}", "payload_len": 4}}}),
        json!({"expect_memory": {"mr": "ro", "bytes": {"len": 64, "byte": 0x5a},
            "requirement": "MR-SEC-4"}}),
    ]
    .into_iter()
    .map(step)
    .collect()
}

/// The fuzz QP's liveness probe: a duplicate (PSN `${psn} - 1`) zero-length
/// WRITE with AckReq, which a live responder answers with an ACK (MR-DUP-2)
/// whatever its expected PSN.
pub fn fuzz_qp_probe() -> Vec<Step> {
    vec![
        probe_send_step(),
        step(json!({"expect": probe_expect_json()})),
    ]
}

/// The probe's stimulus.
pub fn probe_send_step() -> Step {
    step(json!({"send": {"opcode": "RC_WRITE_ONLY",
        "bth": {"psn": "${psn + 16777215}", "ack_req": true},
        "ext": {"reth": {"va": format!("${{mr.{FUZZ_MR}.addr}}"),
                         "rkey": format!("${{mr.{FUZZ_MR}.rkey}}"), "dma_len": 0}},
        "note": "liveness probe: duplicate WRITE on the fuzz QP"}}))
}

/// The answer the probe needs (an ACK to the harness's fuzz QP).
pub fn probe_expect_json() -> serde_json::Value {
    json!({"within_us": PROBE_WITHIN_US, "skip_unmatched": true, "requirement": "MR-ROB-7",
        "fields": {"opcode": "RC_ACK", "bth.dest_qp": "${h.qpn}", "syndrome": "ack"}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::load::check_vector;

    #[test]
    fn a_batch_is_a_valid_vector() {
        let v = batch_vector("fuzz.test", &[], 5, true);
        check_vector(&v).expect("the batch vector passes the loader's checks");
    }
}
