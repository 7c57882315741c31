//! What one test knows while it runs: addresses, the QPs and MRs its setup
//! made, and the names bound for expressions.

use super::iut::Endpoint;
use crate::vector::expr::Bindings;
use std::collections::BTreeMap;

/// An MR the setup registered on the IUT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrHandle {
    /// The agent's handle.
    pub handle: u64,
    /// VA of the first byte.
    pub addr: u64,
    /// Length.
    pub len: u64,
    /// L_Key.
    pub lkey: u64,
    /// R_Key.
    pub rkey: u64,
}

/// The state of one running test.
#[derive(Clone, Debug)]
pub struct Context {
    /// Names for expressions.
    pub bindings: Bindings,
    /// The harness's addresses.
    pub harness: Endpoint,
    /// The IUT's addresses.
    pub iut: Endpoint,
    /// The QP under test.
    pub iut_qpn: u32,
    /// The second QP (0 when the setup made none).
    pub iut_qpn2: u32,
    /// The CQ of every QP the setup made.
    pub cq: u64,
    /// UDP source port of the harness's packets.
    pub udp_sport: u16,
    /// P_Key of the QP.
    pub p_key: u16,
    /// Traffic class of the harness's packets.
    pub traffic_class: u32,
    /// MRs by name.
    pub mrs: BTreeMap<String, MrHandle>,
    /// IUT time when the test started.
    pub start_ns: u64,
    /// Extra time every window gets on a live IUT (calibrated).
    pub margin_ns: u64,
    /// Counters at the start of the test.
    pub counters_at_start: BTreeMap<String, u64>,
    /// The INIT→RTR attributes the setup gave the QP under test, without
    /// MP ones (`modify_qp` with `rtr_defaults`).
    pub rtr_attrs: serde_json::Map<String, serde_json::Value>,
}
