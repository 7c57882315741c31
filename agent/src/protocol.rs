//! The agent protocol, version 1 (`reference-impl/AGENT.md`): requests,
//! results, error codes, and the parser that turns one line into a
//! [`Request`] or an [`AgentError`] naming the offending field.
//!
//! Every parameter struct is `deny_unknown_fields`: a misspelt key is an
//! `unknown_field` error, never silently ignored (MR-PICS-4).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this agent speaks (`"v": 1`).
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest request line in bytes, newline excluded (1 MiB).
pub const MAX_LINE: usize = 1 << 20;
/// Most bytes one `read_mr`, `write_mr` or `reg_mr` initial content carries.
pub const MAX_DATA: u64 = 256 * 1024;
/// Most SGEs in one work request.
pub const MAX_SGE: usize = 16;
/// Most completions one `poll_cq` returns.
pub const MAX_POLL: u32 = 1024;
/// Longest `poll_cq` wait in milliseconds.
pub const MAX_WAIT_MS: u64 = 10_000;
/// Largest memory region in bytes (64 MiB).
pub const MAX_MR_LEN: u64 = 64 << 20;
/// Most bytes registered at once over all regions (256 MiB).
pub const MAX_TOTAL_MR_BYTES: u64 = 256 << 20;
/// Most objects of each kind (PDs, MRs, CQs, QPs) alive at once.
pub const MAX_OBJECTS: usize = 4096;
/// Largest `max_send_wr` / `max_recv_wr`.
pub const MAX_QUEUE_DEPTH: u32 = 65_536;

/// Stable error codes (AGENT.md §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not valid UTF-8 JSON.
    BadJson,
    /// The line is longer than [`MAX_LINE`].
    LineTooLong,
    /// The line is JSON but not an object.
    BadRequest,
    /// `v` is not a version this agent speaks.
    UnsupportedVersion,
    /// `op` names no operation.
    UnknownOp,
    /// A required field is absent.
    MissingField,
    /// A field this operation does not take.
    UnknownField,
    /// A field of the wrong JSON type.
    BadType,
    /// A field of the right type with a value that means nothing (bad
    /// enum name, malformed hex, MAC or IP address).
    BadValue,
    /// A number outside the range the protocol or SPEC §10 allows.
    OutOfRange,
    /// A handle (PD, MR, CQ) or QPN that does not exist.
    UnknownHandle,
    /// The transition is not in the table of SPEC §6.2 for this QP.
    InvalidTransition,
    /// The transition needs an attribute the request lacks (MR-QP-2).
    MissingAttribute,
    /// The transition does not accept an attribute the request gives.
    UnexpectedAttribute,
    /// The QP's state does not accept the call (SPEC §6.2 behaviour table).
    WrongState,
    /// A feature the capability profile declares absent.
    Unsupported,
    /// A UD send without `ud`, or an RC send with one.
    BadDestination,
    /// A byte range outside the memory region.
    OutOfBounds,
    /// A limit of the agent (object count, memory, queue depth) is reached.
    ResourceExhausted,
    /// A bug in the agent; the request had no effect.
    Internal,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadJson => "bad_json",
            ErrorCode::LineTooLong => "line_too_long",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::UnknownOp => "unknown_op",
            ErrorCode::MissingField => "missing_field",
            ErrorCode::UnknownField => "unknown_field",
            ErrorCode::BadType => "bad_type",
            ErrorCode::BadValue => "bad_value",
            ErrorCode::OutOfRange => "out_of_range",
            ErrorCode::UnknownHandle => "unknown_handle",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::MissingAttribute => "missing_attribute",
            ErrorCode::UnexpectedAttribute => "unexpected_attribute",
            ErrorCode::WrongState => "wrong_state",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::BadDestination => "bad_destination",
            ErrorCode::OutOfBounds => "out_of_bounds",
            ErrorCode::ResourceExhausted => "resource_exhausted",
            ErrorCode::Internal => "internal",
        }
    }
}

/// The `error` object of a failed reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentError {
    /// Stable code.
    pub code: ErrorCode,
    /// Human-readable; starts with the field name when there is one.
    pub message: String,
    /// The offending field as a path (`attrs.path.dest_mac`,
    /// `sg_list[1].lkey`), when one field is to blame.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub field: Option<String>,
}

impl AgentError {
    /// An error blamed on `field`; the message is prefixed with it.
    pub fn field(code: ErrorCode, field: impl Into<String>, why: impl core::fmt::Display) -> Self {
        let field = field.into();
        AgentError {
            code,
            message: format!("{field}: {why}"),
            field: Some(field),
        }
    }

    /// An error not blamed on one field.
    pub fn general(code: ErrorCode, why: impl Into<String>) -> Self {
        AgentError {
            code,
            message: why.into(),
            field: None,
        }
    }
}

/// One reply line: `{"id": n, "ok": true, ...result}` or
/// `{"id": n, "ok": false, "error": {...}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The request's `id`, or `None` (`null`) when it could not be read.
    pub id: Option<u64>,
    /// The result object's fields, or the error.
    pub result: Result<Map<String, Value>, AgentError>,
}

impl Reply {
    /// A success carrying the fields of `result` (which must serialize to
    /// an object; anything else becomes an `internal` error).
    pub fn ok(id: Option<u64>, result: &impl Serialize) -> Reply {
        let result = match serde_json::to_value(result) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(AgentError::general(
                ErrorCode::Internal,
                "result did not serialize",
            )),
        };
        Reply { id, result }
    }

    /// A failure.
    pub fn err(id: Option<u64>, error: AgentError) -> Reply {
        Reply {
            id,
            result: Err(error),
        }
    }

    /// The error, if the reply is one.
    pub fn error(&self) -> Option<&AgentError> {
        self.result.as_ref().err()
    }

    /// The reply as one JSON object (no newline).
    pub fn to_json(&self) -> String {
        let mut map = Map::new();
        map.insert("id".into(), self.id.map_or(Value::Null, Value::from));
        match &self.result {
            Ok(fields) => {
                map.insert("ok".into(), Value::Bool(true));
                for (k, v) in fields {
                    if k != "id" && k != "ok" {
                        map.insert(k.clone(), v.clone());
                    }
                }
            }
            Err(e) => {
                map.insert("ok".into(), Value::Bool(false));
                map.insert(
                    "error".into(),
                    serde_json::to_value(e).unwrap_or(Value::Null),
                );
            }
        }
        Value::Object(map).to_string()
    }
}

// ---------------------------------------------------------------- requests

/// A parsed request: envelope and operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request {
    /// Echoed in the reply.
    pub id: u64,
    /// Protocol version, if the client states it (must be 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v: Option<u32>,
    /// The operation and its fields.
    #[serde(flatten)]
    pub op: Op,
}

impl Request {
    /// A request with this id and operation.
    pub fn new(id: u64, op: Op) -> Request {
        Request { id, v: None, op }
    }

    /// The request as one JSON line (no newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Every operation of protocol version 1, tagged by `op`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[allow(missing_docs)] // each variant is the operation of the same name
pub enum Op {
    Hello(Hello),
    AllocPd(Empty),
    RegMr(RegMr),
    DeregMr(MrRef),
    ReadMr(ReadMr),
    WriteMr(WriteMr),
    ReadCanary(MrRef),
    CreateCq(Empty),
    CreateQp(CreateQp),
    ModifyQp(ModifyQp),
    QueryQp(QpRef),
    DestroyQp(QpRef),
    PostSend(PostSend),
    PostRecv(PostRecv),
    PollCq(PollCq),
    Counters(Empty),
    Reset(Empty),
    Bye(Empty),
}

/// The names of every operation, as `op` spells them.
pub const OPS: [&str; 18] = [
    "hello",
    "alloc_pd",
    "reg_mr",
    "dereg_mr",
    "read_mr",
    "write_mr",
    "read_canary",
    "create_cq",
    "create_qp",
    "modify_qp",
    "query_qp",
    "destroy_qp",
    "post_send",
    "post_recv",
    "poll_cq",
    "counters",
    "reset",
    "bye",
];

/// An operation without fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `hello`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Free text naming the client, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Access flags of an MR or a QP (SPEC §6.3 `access`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // the verbs flags of the same names
pub enum AccessFlag {
    LocalWrite,
    RemoteRead,
    RemoteWrite,
    RemoteAtomic,
    FlushGlobal,
    FlushPersistent,
}

/// `reg_mr`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegMr {
    /// Protection domain.
    pub pd: u32,
    /// Length in bytes, 1..=[`MAX_MR_LEN`].
    pub length: u64,
    /// Access flags.
    #[serde(default)]
    pub access: Vec<AccessFlag>,
    /// Byte every position starts with (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<u8>,
    /// Initial bytes from offset 0, hex (exclusive with `base64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    /// Initial bytes from offset 0, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// Canary bytes on each side of the region, 0..=[`MAX_CANARY`] (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_len: Option<u64>,
    /// Value of every canary byte (default 0xA5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_fill: Option<u8>,
}

/// Most canary bytes on each side of a region.
pub const MAX_CANARY: u64 = 4096;

/// `dereg_mr`: an MR handle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MrRef {
    /// MR handle from `reg_mr`.
    pub mr: u32,
}

/// Encoding of bytes in a reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// Lower-case hex, two digits per byte.
    #[default]
    Hex,
    /// Standard base64 with padding (RFC 4648 §4).
    Base64,
}

/// `read_mr`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadMr {
    /// MR handle.
    pub mr: u32,
    /// Offset from the MR's first byte.
    #[serde(default)]
    pub offset: u64,
    /// Bytes to read, 0..=[`MAX_DATA`].
    pub length: u64,
    /// Encoding of the reply's data (default hex).
    #[serde(default)]
    pub encoding: Encoding,
}

/// `write_mr`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteMr {
    /// MR handle.
    pub mr: u32,
    /// Offset from the MR's first byte.
    #[serde(default)]
    pub offset: u64,
    /// Bytes as hex (exactly one of `hex`, `base64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
    /// Bytes as base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

/// QP types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum QpTypeName {
    Rc,
    Uc,
    Ud,
}

/// Queue capacities asked for at `create_qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QpCaps {
    /// Outstanding send work requests, 1..=65536 (default 1024).
    #[serde(default = "default_depth")]
    pub max_send_wr: u32,
    /// Outstanding receive work requests, 1..=65536 (default 1024).
    #[serde(default = "default_depth")]
    pub max_recv_wr: u32,
    /// SGEs per send work request, 1..=16 (default 16).
    #[serde(default = "default_sge")]
    pub max_send_sge: u32,
    /// SGEs per receive work request, 1..=16 (default 16).
    #[serde(default = "default_sge")]
    pub max_recv_sge: u32,
}

fn default_depth() -> u32 {
    1024
}
fn default_sge() -> u32 {
    MAX_SGE as u32
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: default_depth(),
            max_recv_wr: default_depth(),
            max_send_sge: default_sge(),
            max_recv_sge: default_sge(),
        }
    }
}

/// `create_qp`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateQp {
    /// Protection domain.
    pub pd: u32,
    /// `rc`, `uc` or `ud`.
    pub qp_type: QpTypeName,
    /// CQ of send completions.
    pub send_cq: u32,
    /// CQ of receive completions.
    pub recv_cq: u32,
    /// Complete every send work request, signaled or not (default false).
    #[serde(default)]
    pub sq_sig_all: bool,
    /// Queue capacities.
    #[serde(default)]
    pub caps: QpCaps,
}

/// QP states (SPEC §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum StateName {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

/// The path of a connected QP (SPEC §6.3 path attributes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathAttr {
    /// Next-hop MAC, `aa:bb:cc:dd:ee:ff`.
    pub dest_mac: String,
    /// Peer IP address (IPv4 dotted quad; IPv6 if the profile has `ipv6`).
    pub dest_ip: String,
    /// Traffic class, DSCP in the upper 6 bits (default 0).
    #[serde(default)]
    pub traffic_class: u8,
    /// IPv4 TTL / IPv6 hop limit, 1..=255 (default 64).
    #[serde(default = "default_hop_limit")]
    pub hop_limit: u8,
}

fn default_hop_limit() -> u8 {
    64
}

/// QP attributes of SPEC §6.3 and the MP parameters of §7.1 (AGENT.md
/// §6.9); absent means "not given".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // the attributes of SPEC §6.3 of the same names
pub struct Attrs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<AccessFlag>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_key: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_key: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest_qpn: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rq_psn: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sq_psn: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_cnt: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rnr_retry: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rnr_timer: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rd_atomic: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_dest_rd_atomic: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathAttr>,
    /// `mp` (SPEC §7.1): the QP is an MP QP. INIT to RTR of an RC QP only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp: Option<bool>,
    /// The distinct UDP source ports (0xC000–0xFFFF) the MP QP sends from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_entropy_set: Option<Vec<u16>>,
    /// N, the size of the entropy set (the implementation picks the values
    /// when `mp_entropy_set` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_entropy_set_size: Option<u32>,
    /// W, the receive window in PSNs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_window: Option<u32>,
    /// DSCP that marks trimmed packets; absent or `null`: trimming off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_trim_dscp: Option<u8>,
    /// Over IPv6, the flow label carries the entropy value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_flow_label_entropy: Option<bool>,
    /// DSCP of the QP's MP ACKs, MP Atomic Acknowledges and MP Probes
    /// (`mp_ack_dscp`, SPEC §7.1, MR-MPA-12); absent or `null`: the DSCP
    /// of the QP's traffic class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_ack_dscp: Option<u8>,
    /// The requester's reorder threshold K (`mp_reorder_threshold`, SPEC
    /// §10.3, 1–64), a local setting; absent: the implementation's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_reorder_threshold: Option<u8>,
    /// The peer's requester understands NAK 0x66 (`mp_peer_resource_nak`,
    /// SPEC §7.1, §7.16: the RN flag of its setup block): the responder
    /// answers a packet it refuses for lack of resources with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_peer_resource_nak: Option<bool>,
    /// The responder's staging limit in bytes (`mp_max_staged_bytes`,
    /// SPEC §2, §7.16), a local setting of at most the declared value;
    /// absent: the declared value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_max_staged_bytes: Option<u64>,
    /// The peer's responder honours the MPETH O flag (`mp_peer_ordered`,
    /// SPEC §7.1, §7.5); absent: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mp_peer_ordered: Option<bool>,
}

impl Attrs {
    /// The names of the MP attributes (SPEC §7.1) this request gives, in
    /// table order.
    pub fn mp_given(&self) -> Vec<&'static str> {
        [
            ("mp", self.mp.is_some()),
            ("mp_entropy_set", self.mp_entropy_set.is_some()),
            ("mp_entropy_set_size", self.mp_entropy_set_size.is_some()),
            ("mp_window", self.mp_window.is_some()),
            ("mp_trim_dscp", self.mp_trim_dscp.is_some()),
            (
                "mp_flow_label_entropy",
                self.mp_flow_label_entropy.is_some(),
            ),
            ("mp_ack_dscp", self.mp_ack_dscp.is_some()),
            ("mp_reorder_threshold", self.mp_reorder_threshold.is_some()),
            ("mp_peer_resource_nak", self.mp_peer_resource_nak.is_some()),
            ("mp_max_staged_bytes", self.mp_max_staged_bytes.is_some()),
            ("mp_peer_ordered", self.mp_peer_ordered.is_some()),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| name)
        .collect()
    }
}

/// `modify_qp`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModifyQp {
    /// The QP.
    pub qpn: u32,
    /// Target state.
    pub state: StateName,
    /// Attributes set by the transition.
    #[serde(default)]
    pub attrs: Attrs,
}

/// `query_qp`, `destroy_qp`: a QP number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QpRef {
    /// The QP.
    pub qpn: u32,
}

/// One scatter/gather element (`ibv_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SgeJson {
    /// Virtual address inside the region.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// L_Key of the region.
    pub lkey: u32,
}

/// Send opcodes (`ibv_wr_opcode` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum SendOpcode {
    Send,
    SendWithImm,
    SendWithInv,
    RdmaWrite,
    RdmaWriteWithImm,
    RdmaRead,
    AtomicCmpAndSwp,
    AtomicFetchAndAdd,
}

/// The destination of a UD send.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdDestJson {
    /// Destination IP address.
    pub ip: String,
    /// Destination MAC address.
    pub mac: String,
    /// Destination QPN (24 bits).
    pub qpn: u32,
    /// Q_Key.
    pub qkey: u32,
}

/// `post_send`: one work request (`ibv_send_wr`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostSend {
    /// The QP.
    pub qpn: u32,
    /// Echoed in the completion.
    pub wr_id: u64,
    /// Operation.
    pub opcode: SendOpcode,
    /// Local buffers (at most `caps.max_send_sge`).
    #[serde(default)]
    pub sg_list: Vec<SgeJson>,
    /// Ask for a completion on success (default true).
    #[serde(default = "yes")]
    pub signaled: bool,
    /// Solicited event (default false).
    #[serde(default)]
    pub solicited: bool,
    /// Fence (default false).
    #[serde(default)]
    pub fence: bool,
    /// Remote VA (WRITE, READ, atomics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_addr: Option<u64>,
    /// R_Key (WRITE, READ, atomics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rkey: Option<u32>,
    /// Immediate data (`*_with_imm`), as the 32-bit value on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imm: Option<u32>,
    /// R_Key to invalidate (`send_with_inv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidate_rkey: Option<u32>,
    /// Compare operand (`atomic_cmp_and_swp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare: Option<u64>,
    /// Swap operand (`atomic_cmp_and_swp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<u64>,
    /// Add operand (`atomic_fetch_and_add`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<u64>,
    /// Destination (UD QPs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ud: Option<UdDestJson>,
}

fn yes() -> bool {
    true
}

/// `post_recv`: one receive work request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostRecv {
    /// The QP.
    pub qpn: u32,
    /// Echoed in the completion.
    pub wr_id: u64,
    /// Buffers (at most `caps.max_recv_sge`).
    #[serde(default)]
    pub sg_list: Vec<SgeJson>,
}

/// `poll_cq`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PollCq {
    /// The CQ.
    pub cq: u32,
    /// Most completions to return, 1..=[`MAX_POLL`] (default 16).
    #[serde(default = "default_max")]
    pub max: u32,
    /// Wait up to this many ms for a first completion, 0..=[`MAX_WAIT_MS`]
    /// (default 0: return at once).
    #[serde(default)]
    pub wait_ms: u64,
}

fn default_max() -> u32 {
    16
}

// ----------------------------------------------------------------- parsing

/// Parses one request line (without its newline). On failure, returns the
/// id when it could be read, and the error to reply with.
pub fn parse_request(line: &[u8]) -> Result<Request, (Option<u64>, AgentError)> {
    if line.len() > MAX_LINE {
        return Err((
            None,
            AgentError::general(
                ErrorCode::LineTooLong,
                format!("line of {} bytes exceeds {MAX_LINE}", line.len()),
            ),
        ));
    }
    let value = serde_json::from_slice::<StrictValue>(line)
        .map_err(|e| {
            (
                None,
                AgentError::general(ErrorCode::BadJson, format!("not JSON: {e}")),
            )
        })?
        .0;
    let Value::Object(mut map) = value else {
        return Err((
            None,
            AgentError::general(ErrorCode::BadRequest, "a request is a JSON object"),
        ));
    };
    let id = match map.remove("id") {
        None => {
            return Err((
                None,
                AgentError::field(ErrorCode::MissingField, "id", "missing field"),
            ));
        }
        Some(v) => v.as_u64().ok_or_else(|| {
            (
                None,
                AgentError::field(
                    ErrorCode::BadType,
                    "id",
                    format!("expected an unsigned integer, got {}", kind(&v)),
                ),
            )
        })?,
    };
    let fail = |e: AgentError| (Some(id), e);
    let v = match map.remove("v") {
        None => None,
        Some(Value::Number(n)) if n.as_u64() == Some(u64::from(PROTOCOL_VERSION)) => {
            Some(PROTOCOL_VERSION)
        }
        Some(other) => {
            return Err(fail(AgentError::field(
                ErrorCode::UnsupportedVersion,
                "v",
                format!("this agent speaks version {PROTOCOL_VERSION}, not {other}"),
            )));
        }
    };
    let op = match map.remove("op") {
        None => {
            return Err(fail(AgentError::field(
                ErrorCode::MissingField,
                "op",
                "missing field",
            )));
        }
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(fail(AgentError::field(
                ErrorCode::BadType,
                "op",
                format!("expected a string, got {}", kind(&other)),
            )));
        }
    };
    let rest = Value::Object(map);
    let op = match op.as_str() {
        "hello" => Op::Hello(fields(rest).map_err(fail)?),
        "alloc_pd" => Op::AllocPd(fields(rest).map_err(fail)?),
        "reg_mr" => Op::RegMr(fields(rest).map_err(fail)?),
        "dereg_mr" => Op::DeregMr(fields(rest).map_err(fail)?),
        "read_mr" => Op::ReadMr(fields(rest).map_err(fail)?),
        "read_canary" => Op::ReadCanary(fields(rest).map_err(fail)?),
        "write_mr" => Op::WriteMr(fields(rest).map_err(fail)?),
        "create_cq" => Op::CreateCq(fields(rest).map_err(fail)?),
        "create_qp" => Op::CreateQp(fields(rest).map_err(fail)?),
        "modify_qp" => Op::ModifyQp(fields(rest).map_err(fail)?),
        "query_qp" => Op::QueryQp(fields(rest).map_err(fail)?),
        "destroy_qp" => Op::DestroyQp(fields(rest).map_err(fail)?),
        "post_send" => Op::PostSend(fields(rest).map_err(fail)?),
        "post_recv" => Op::PostRecv(fields(rest).map_err(fail)?),
        "poll_cq" => Op::PollCq(fields(rest).map_err(fail)?),
        "counters" => Op::Counters(fields(rest).map_err(fail)?),
        "reset" => Op::Reset(fields(rest).map_err(fail)?),
        "bye" => Op::Bye(fields(rest).map_err(fail)?),
        other => {
            let shown: String = other.chars().take(64).collect();
            return Err(fail(AgentError::field(
                ErrorCode::UnknownOp,
                "op",
                format!("unknown operation {shown:?}"),
            )));
        }
    };
    Ok(Request { id, v, op })
}

/// A JSON value read with one extra rule: an object may not repeat a key
/// (RFC 8259 leaves duplicates undefined; the agent rejects them rather
/// than pick one).
struct StrictValue(Value);

impl<'de> serde::Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(v) = map.next_value()?;
            if out.contains_key(&key) {
                let shown: String = key.chars().take(64).collect();
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{shown}`"
                )));
            }
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// The JSON type of a value, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Deserializes the fields of an operation, naming the offending field on
/// failure.
fn fields<T: serde::de::DeserializeOwned>(rest: Value) -> Result<T, AgentError> {
    serde_path_to_error::deserialize(rest).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        classify(&path, &inner)
    })
}

/// Maps a serde message to a stable code and a field path.
fn classify(path: &str, msg: &str) -> AgentError {
    let path = if path == "." { "" } else { path };
    let join = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let quoted = |m: &str| m.split('`').nth(1).map(str::to_string);
    let (code, field) = if msg.starts_with("missing field") {
        (
            ErrorCode::MissingField,
            quoted(msg).map_or_else(|| path.to_string(), |n| join(&n)),
        )
    } else if msg.starts_with("unknown field") {
        let field = match quoted(msg) {
            Some(n) if !path.ends_with(&n) => join(&n),
            _ => path.to_string(),
        };
        (ErrorCode::UnknownField, field)
    } else if msg.starts_with("invalid type") {
        (ErrorCode::BadType, path.to_string())
    } else if msg.starts_with("invalid value: integer") {
        (ErrorCode::OutOfRange, path.to_string())
    } else {
        (ErrorCode::BadValue, path.to_string())
    };
    let field = if field.is_empty() {
        "(request)".to_string()
    } else {
        field
    };
    let msg: String = msg.chars().take(300).collect();
    AgentError::field(code, field, msg)
}

// ----------------------------------------------------------------- results

/// One completion as `poll_cq` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionJson {
    /// The work request's identifier.
    pub wr_id: u64,
    /// Status number of SPEC §6.13.
    pub status: u32,
    /// Status name of SPEC §6.13 (`SUCCESS`, `WR_FLUSH_ERR`, ...).
    pub status_name: String,
    /// `send`, `rdma_write`, `rdma_read`, `comp_swap`, `fetch_add`,
    /// `recv`, `recv_rdma_with_imm`.
    pub opcode: String,
    /// QP the work request was posted on.
    pub qpn: u32,
    /// Bytes received or transferred.
    pub byte_len: u32,
    /// Immediate data, or null.
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with Invalidate, or null.
    pub invalidated_rkey: Option<u32>,
    /// Source QP of a UD receive, or null.
    pub src_qp: Option<u32>,
}
