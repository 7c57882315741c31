//! Drivers: thin loops that move frames and time between a [`crate::Device`]
//! and some medium. Only the in-memory driver exists so far; a raw-socket
//! driver will be the same loop around a socket and a clock.

pub mod memory;
