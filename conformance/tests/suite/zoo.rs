//! The suite proves it can fail: against every bug-zoo mutant of the
//! reference transport (reference-impl/ZOO.md) at least one vector FAILs,
//! and against the unmutated transport every vector PASSes (or is
//! UNSUPPORTED by its profile). `metaroce zoo` prints the same table.

use metaroce_conformance::run::verdict::Verdict;
use metaroce_conformance::run::zoo::catch_table;
use metaroce_conformance::vector::load_dir;
use metaroce_ref::zoo::Mutant;
use std::path::PathBuf;

#[test]
fn every_mutant_fails_some_vector_and_the_reference_passes_all() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    let set = load_dir(&root).unwrap_or_else(|e| panic!("{e:?}"));
    let (clean, rows) = catch_table(&set, &root, Mutant::ALL, &[], Default::default()).unwrap();
    let not_ok: Vec<String> = clean
        .tests
        .iter()
        .filter(|t| !matches!(t.verdict, Verdict::Pass | Verdict::Unsupported))
        .map(|t| format!("{} {}", t.verdict, t.id))
        .collect();
    assert!(not_ok.is_empty(), "unmutated: {not_ok:?}");
    let missed: Vec<&str> = rows
        .iter()
        .filter(|r| r.caught_by.is_empty())
        .map(|r| r.mutant.name())
        .collect();
    assert!(missed.is_empty(), "mutants no vector catches: {missed:?}");
    assert_eq!(rows.len(), Mutant::ALL.len());
    assert!(
        Mutant::ALL.len() >= 20,
        "the issue asks for at least 20 mutants"
    );
}
