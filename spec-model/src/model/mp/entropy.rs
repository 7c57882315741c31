//! Entropy (stub).
