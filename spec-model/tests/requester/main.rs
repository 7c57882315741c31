//! Tests of the requester model and the request-stream judge.
//! Each test names the requirement IDs it checks.

mod common;
mod judge;
mod local_buffers;
mod model_ack;
mod model_packetize;
mod model_timer;
mod psn_window;
