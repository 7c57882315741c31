//! Drivers: thin loops that move frames and time between a [`crate::Device`]
//! and some medium: the in-memory driver of the simulator, and (feature
//! `raw`) an AF_PACKET raw-socket driver, the same loop around a socket and
//! a clock.

pub mod memory;
#[cfg(feature = "raw")]
mod packet;
#[cfg(feature = "raw")]
pub mod raw;
