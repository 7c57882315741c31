//! The fuzzing harnesses, in one test binary (one link of the crate): the
//! fuzz targets' corpora replayed (`fuzz_corpus_vector_load`,
//! `fuzz_stateful_corpus`) and `metaroce fuzz` against the built-in IUT
//! (`fuzz_live`). Each module was a test binary of its own. The
//! differential target against the bug zoo stays a binary of its own
//! (`tests/fuzz_differential_zoo.rs`): it bounds each mutant's hunt by wall
//! time, so it must not share the cores with these.

mod fuzz_corpus_vector_load;
mod fuzz_live;
mod fuzz_stateful_corpus;
