//! Minimising a finding by replaying parts of its batch: halves first, then
//! quarters, and so on (delta debugging by complement), each candidate kept
//! when it still gives a finding of the same kind. Bounded by a number of
//! replays.

use crate::vector::model::SendStep;

/// The smallest sub-list of `sends` found (at most `max_replays` calls of
/// `still_fails`) for which `still_fails` holds. `still_fails` replays a
/// candidate on the IUT; an `Err` stops the search (the test bed failed).
pub fn minimise<E>(
    sends: &[SendStep],
    max_replays: usize,
    still_fails: &mut dyn FnMut(&[SendStep]) -> Result<bool, E>,
) -> Result<(Vec<SendStep>, usize), E> {
    let mut current = sends.to_vec();
    let mut replays = 0;
    let mut chunk = current.len().div_ceil(2).max(1);
    while replays < max_replays && current.len() > 1 {
        let mut removed_any = false;
        let mut start = 0;
        while start < current.len() && replays < max_replays {
            let end = (start + chunk).min(current.len());
            let candidate: Vec<SendStep> = current[..start]
                .iter()
                .chain(&current[end..])
                .cloned()
                .collect();
            if candidate.is_empty() {
                start = end;
                continue;
            }
            replays += 1;
            if still_fails(&candidate)? {
                current = candidate;
                removed_any = true;
            } else {
                start = end;
            }
        }
        if !removed_any {
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2);
        }
    }
    Ok((current, replays))
}

#[cfg(test)]
mod tests {
    use super::minimise;
    use crate::vector::model::{OpcodeRef, SendStep};

    fn step(n: u8) -> SendStep {
        serde_json::from_value(serde_json::json!({"opcode": n})).unwrap()
    }

    fn op(s: &SendStep) -> u8 {
        match s.opcode {
            OpcodeRef::Number(n) => n,
            OpcodeRef::Name(_) => 0,
        }
    }

    #[test]
    fn keeps_only_the_packets_the_failure_needs() {
        let sends: Vec<SendStep> = (0..16).map(step).collect();
        // Fails when both 3 and 11 are present.
        let (min, replays) = minimise::<()>(&sends, 100, &mut |c| {
            Ok(c.iter().any(|s| op(s) == 3) && c.iter().any(|s| op(s) == 11))
        })
        .unwrap();
        assert_eq!(min.iter().map(op).collect::<Vec<_>>(), [3, 11]);
        assert!(replays <= 100);
    }

    #[test]
    fn stops_at_the_replay_budget() {
        let sends: Vec<SendStep> = (0..64).map(step).collect();
        let mut calls = 0;
        let (_, replays) = minimise::<()>(&sends, 5, &mut |_| {
            calls += 1;
            Ok(false)
        })
        .unwrap();
        assert_eq!((replays, calls), (5, 5));
    }
}
