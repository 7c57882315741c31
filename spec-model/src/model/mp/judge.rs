//! Judge (stub).
