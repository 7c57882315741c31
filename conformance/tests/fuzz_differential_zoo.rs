//! The `differential` fuzz target finds the protocol mutants of the bug zoo
//! (reference-impl/ZOO.md): for every mutant that is neither a memory nor a
//! liveness mutant (those are `metaroce fuzz`'s, `tests/fuzzing/fuzz_live.rs`), the
//! differential driver (`fuzz-drivers/src/stateful/differential.rs`, as in
//! `tests/fuzzing/fuzz_stateful_corpus.rs`) runs on both devices built
//! with that mutant, over the same inputs in the same order: first the
//! committed corpus `fuzz/corpus/differential`, then inputs from a seeded
//! generator (random bytes, which the driver's input format reads as some
//! event sequence). It must report a mismatch within [`MAX_GENERATED`]
//! generated inputs (and [`TIME_CAP`]); the unmutated transport must report
//! none on every input any mutant needed. No input is chosen per mutant.
//!
//! `cargo test -p metaroce-conformance --test fuzz_differential_zoo -- --nocapture`
//! prints, per mutant, the inputs run to the first mismatch and its text
//! (the table of fuzz/README.md).

use metaroce_fuzz_drivers::stateful;

use metaroce_ref::DeviceConfig;
use metaroce_ref::zoo::Mutant;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The protocol mutants: every mutant of `reference-impl/ZOO.md` that is
/// not a memory or liveness mutant. Each must be caught.
const PROTOCOL: [&str; 27] = [
    "msn-off-by-one",
    "ack-psn-off-by-one",
    "seq-nak-every-packet",
    "dup-read-ignored",
    "atomic-replay-reexecutes",
    "write-access-unchecked",
    "rnr-timer-code-zero",
    "credit-code-zero",
    "send-inv-ignored",
    "icrc-not-checked",
    "pkey-not-checked",
    "qpn-low-bits",
    "qkey-not-checked",
    "cnp-never-sent",
    "cnp-not-paced",
    "padcnt-zero",
    "ackreq-never-on-last",
    "rnr-wait-ignored",
    "retry-forever",
    "mp-replace-after-complete",
    "mp-sack-off-by-one",
    "mp-window-not-enforced",
    "mp-ack-echo-wrong",
    "mp-probe-unanswered",
    "mp-go-back-n",
    "mp-single-entropy",
    "mp-cwnd-ignored",
];

/// The memory mutants and the liveness mutants (ZOO.md): `metaroce fuzz`
/// finds these (`tests/fuzzing/fuzz_live.rs`); not part of this test.
const MEMORY_AND_LIVENESS: [&str; 4] = [
    "rkey-bounds-off-by-one",
    "read-leak",
    "wedge-on-bad-padcnt",
    "wedge-on-unknown-opcode",
];

/// Protocol mutants the differential target does not catch, with the
/// reason. The test checks they are still not caught within the bound (so
/// this list and fuzz/README.md stay true): one that becomes caught must
/// move out of this list.
const NOT_CAUGHT: [(&str, &str); 0] = [];

/// Most generated inputs per mutant (after the corpus).
const MAX_GENERATED: usize = 1000;
/// Most wall time per mutant (debug build, shared machine): a mutant not
/// caught by then counts as not caught.
const TIME_CAP: Duration = Duration::from_secs(60);
/// The generator's seed.
const SEED: u64 = 0x6d65_7461_726f_6365;

fn corpus() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/differential");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "fuzz/corpus/differential is empty");
    files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// SplitMix64: a fixed, dependency-free PRNG, so the generated inputs are
/// the same on every run and every platform.
struct SplitMix(metaroce_agent::rng::SplitMix64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
}

/// `n` inputs of 64–575 random bytes.
fn generated(n: usize) -> Vec<Vec<u8>> {
    let mut rng = SplitMix(metaroce_agent::rng::SplitMix64::new(SEED));
    (0..n)
        .map(|_| {
            let len = 64 + (rng.next() % 512) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        })
        .collect()
}

/// The driver on one input, a panic counting as a failure.
fn run(data: &[u8], mutant: Option<Mutant>) -> Result<(), String> {
    let configure = |c: DeviceConfig| DeviceConfig { mutant, ..c };
    match catch_unwind(AssertUnwindSafe(|| {
        stateful::differential::run_tally_with(data, &configure)
    })) {
        Ok(r) => r.map(|_| ()),
        Err(panic) => Err(format!(
            "panicked: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// How a mutant fared: the index of the first input (corpus first, then
/// generated) that failed and the failure, or the inputs run without one.
enum Outcome {
    Caught { input: usize, message: String },
    Missed { inputs: usize },
}

fn hunt(m: Mutant, inputs: &[Vec<u8>]) -> Outcome {
    let start = Instant::now();
    for (i, data) in inputs.iter().enumerate() {
        if let Err(message) = run(data, Some(m)) {
            return Outcome::Caught { input: i, message };
        }
        if start.elapsed() > TIME_CAP {
            return Outcome::Missed { inputs: i + 1 };
        }
    }
    Outcome::Missed {
        inputs: inputs.len(),
    }
}

/// A failure in short for the table: where (mode, event), and the reason
/// (for a responder mismatch, what the model found wrong, without the
/// frame and state dump before it), at most `n` characters on one line.
fn short(message: &str, n: usize) -> String {
    let one: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let (at, rest) = one.split_once(": ").unwrap_or(("", &one));
    let rest = match rest.find("none the model allows (") {
        Some(i) => rest[i..].split_once("): ").map_or(rest, |(_, why)| why),
        None => rest,
    };
    let one = format!("{at}: {rest}");
    match one.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &one[..at]),
        None => one,
    }
}

#[test]
fn the_protocol_set_is_every_mutant_but_memory_and_liveness() {
    let all: BTreeSet<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
    let named: BTreeSet<&str> = PROTOCOL
        .iter()
        .chain(&MEMORY_AND_LIVENESS)
        .copied()
        .collect();
    assert_eq!(
        named, all,
        "every zoo mutant is named once, as protocol or memory/liveness"
    );
    assert_eq!(named.len(), PROTOCOL.len() + MEMORY_AND_LIVENESS.len());
    for (name, _) in NOT_CAUGHT {
        assert!(PROTOCOL.contains(&name), "{name} is a protocol mutant");
    }
}

#[test]
fn the_differential_driver_catches_every_protocol_mutant() {
    let corpus = corpus();
    let inputs: Vec<Vec<u8>> = corpus
        .iter()
        .cloned()
        .chain(generated(MAX_GENERATED))
        .collect();
    let started = Instant::now();
    let mut used = 0;
    let mut failures = Vec::new();
    let mut details = Vec::new();
    println!(
        "| mutant | caught | inputs to first mismatch (corpus {}) | mismatch |",
        corpus.len()
    );
    println!("| --- | --- | --- | --- |");
    // METAROCE_ZOO_ONLY=NAME: that mutant alone (to look at one, e.g. with
    // METAROCE_FUZZ_TRACE=1); METAROCE_ZOO_DUMP=DIR: each first mismatching
    // input saved as DIR/NAME.
    let only = std::env::var("METAROCE_ZOO_ONLY").ok();
    let dump = std::env::var_os("METAROCE_ZOO_DUMP").map(PathBuf::from);
    for name in PROTOCOL {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let m: Mutant = name.parse().expect("a zoo mutant");
        let t = Instant::now();
        let expected_miss = NOT_CAUGHT.iter().find(|(n, _)| *n == name);
        match hunt(m, &inputs) {
            Outcome::Caught { input, message } => {
                used = used.max(input + 1);
                let at = if input < corpus.len() {
                    format!("{} (corpus)", input + 1)
                } else {
                    format!("{} (generated {})", input + 1, input + 1 - corpus.len())
                };
                println!(
                    "| `{name}` | yes | {at} | {} | ({:.1} s)",
                    short(&message, 160),
                    t.elapsed().as_secs_f64()
                );
                details.push(format!("{name}: {message}"));
                if let Some(dir) = &dump {
                    std::fs::create_dir_all(dir).expect("METAROCE_ZOO_DUMP directory");
                    std::fs::write(dir.join(name), &inputs[input]).expect("dump the input");
                }
                if expected_miss.is_some() {
                    failures.push(format!(
                        "{name} is listed as not caught but is caught: move it out of NOT_CAUGHT"
                    ));
                }
            }
            Outcome::Missed { inputs } => {
                println!(
                    "| `{name}` | no | none in {inputs} | {} | ({:.1} s)",
                    expected_miss.map_or("", |(_, why)| why),
                    t.elapsed().as_secs_f64()
                );
                if expected_miss.is_none() {
                    failures.push(format!(
                        "{name}: no mismatch in {inputs} inputs ({} corpus, the rest generated)",
                        corpus.len()
                    ));
                }
            }
        }
    }
    println!("\nThe mismatches in full:");
    for d in &details {
        println!("- {d}");
    }
    // The unmutated transport on every input (those the caught mutants
    // needed, and those the missed ones ran through).
    let t = Instant::now();
    for (i, data) in inputs.iter().enumerate() {
        if let Err(e) = run(data, None) {
            failures.push(format!(
                "the unmutated transport fails input {}: {e}",
                i + 1
            ));
        }
    }
    println!(
        "unmutated: {} inputs, no mismatch expected ({:.1} s); most inputs a caught mutant needed: {used}; total {:.1} s",
        inputs.len(),
        t.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
