//! `metaroce check` and its checker, in one test binary (one link of the
//! crate): the command's outputs and options (`check_cli`, `check_outputs`,
//! `check_profile`, `check_threads`), the RDMA-CM limit on outstanding READs
//! (`check_cm_limit`), MP acknowledges (`check_mp_acks`), the MP setup blocks
//! of RDMA-CM exchanges (`cm_mp_setup`), the checker on cut,
//! real and Soft-RoCE captures (`cut_captures`, `real_captures`,
//! `rxe_captures`) and the committed sample capture (`sample_capture`).
//! Each module was a test binary of its own; insta names a snapshot
//! `check__MODULE__NAME.snap` (`snapshots/`).

#[path = "../common/mod.rs"]
mod common;

mod check_cli;
mod check_cm_limit;
mod check_mp_acks;
mod check_outputs;
mod check_profile;
mod check_threads;
mod cm_mp_setup;
mod cut_captures;
mod real_captures;
mod rxe_captures;
mod sample_capture;
