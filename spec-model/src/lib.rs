//! The executable model of `SPEC.md`. Not written yet: see issue 3.
