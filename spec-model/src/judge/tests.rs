//! Unit tests of the conversation judge.
