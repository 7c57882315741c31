//! The typed form of a vector file (vectors/README.md). Every struct rejects
//! unknown keys; `vectors/schema.json` is generated from these types
//! (`metaroce vectors schema`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One conformance test: a vector file.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    /// Unique id, lower-case words joined by `.`, `-` or `_`
    /// (for example `base.rsp.write.only`).
    pub id: String,
    /// One line saying what the test shows.
    pub title: String,
    /// The SPEC.md requirements the test checks (`MR-<AREA>-<n>`), at least one.
    pub requirements: Vec<String>,
    /// The conformance profile the test belongs to.
    pub profile: Profile,
    /// The part the harness plays; the implementation under test (IUT)
    /// plays the other.
    pub role: Role,
    /// Capability-profile keys (SPEC §2) that must be true for the test to
    /// apply; when one is false the verdict is UNSUPPORTED. `!key` asks for
    /// the opposite: the test applies only when `key` is declared false
    /// (requirements on an implementation without a feature, MR-CRD-1).
    #[serde(default)]
    pub needs: Vec<String>,
    /// Free text: why the test is built this way.
    #[serde(default)]
    pub description: Option<String>,
    /// The largest window margin (µs) at which the test's timing still
    /// means something: for tests that race an IUT's timers of about this
    /// size (MP RTO, ACK delay). On a live IUT whose calibrated margin is
    /// larger, the verdict is INCONC (the test bed cannot answer in time),
    /// never a FAIL blamed on the IUT. Virtual time always qualifies. A
    /// number, or an expression over the IUT's declared MP local constants
    /// only (`"${profile.mp_rto_init / 10}"`), so a test scales with the
    /// timers the IUT declares.
    #[serde(default)]
    pub max_margin_us: Option<Num>,
    /// Objects created on the IUT before the steps.
    #[serde(default)]
    pub setup: Setup,
    /// What happens, in order.
    pub steps: Vec<Step>,
}

/// The conformance profile of a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// RoCEv2 as deployed.
    Base,
    /// Multipath (needs `mp` in the capability profile).
    Mp,
}

/// The part the harness plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The harness sends requests: the IUT's responder is under test.
    Requester,
    /// The harness answers: the IUT's requester is under test.
    Responder,
    /// No connection role: packets to an idle or unknown QP, codec-level input.
    Peer,
}

/// What the runner creates on the IUT before the steps.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// The QP under test, connected to the harness.
    #[serde(default)]
    pub qp: QpSetup,
    /// A second QP, connected to the harness's second QP (`${iut.qpn2}`,
    /// `${h.qpn2}`), for tests that must show a packet to one QP leaves the
    /// other alone.
    #[serde(default)]
    pub second_qp: bool,
    /// Memory regions, by name (`${mr.NAME.addr}`, `${mr.NAME.rkey}`, ...).
    #[serde(default)]
    pub mrs: Vec<MrSetup>,
    /// Receive work requests posted on the QP under test before the steps.
    #[serde(default)]
    pub recvs: Vec<RecvSetup>,
}

/// The QP under test.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QpSetup {
    /// `rc` or `ud`.
    #[serde(default = "default_qp_type")]
    pub qp_type: String,
    /// Path MTU in bytes.
    #[serde(default = "default_pmtu")]
    pub pmtu: u32,
    /// Remote access rights of the QP (agent access flag names).
    #[serde(default = "default_qp_access")]
    pub access: Vec<String>,
    /// Local ACK timeout exponent (0 disables the timer).
    #[serde(default = "default_timeout")]
    pub timeout: u8,
    /// Retry count.
    #[serde(default = "default_retry")]
    pub retry_cnt: u8,
    /// RNR retry count (7 = unlimited).
    #[serde(default = "default_retry")]
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer code the IUT's responder advertises.
    #[serde(default = "default_min_rnr_timer")]
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic requests the IUT may issue.
    #[serde(default = "default_rd_atomic")]
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomic requests the IUT's responder accepts.
    #[serde(default = "default_rd_atomic")]
    pub max_dest_rd_atomic: u8,
    /// The Q_Key (UD).
    #[serde(default = "default_qkey")]
    pub q_key: u32,
    /// The P_Key.
    #[serde(default = "default_pkey")]
    pub p_key: u16,
    /// Traffic class of the path (DSCP and ECN of the IUT's packets).
    #[serde(default)]
    pub traffic_class: u8,
    /// The IUT's initial send PSN (`${iut.psn}`); random when absent.
    #[serde(default)]
    pub sq_psn: Option<u32>,
    /// The PSN the IUT expects first from the harness (`${psn}`); random
    /// when absent.
    #[serde(default)]
    pub rq_psn: Option<u32>,
    /// MP attributes (required when the profile is `mp`).
    #[serde(default)]
    pub mp: Option<MpSetup>,
    /// The state setup leaves the QP in: `reset`, `init`, `rtr` or `rts`
    /// (default). Receives of `recvs` are posted only in INIT and later.
    #[serde(default = "default_qp_state")]
    pub state: String,
}

impl Default for QpSetup {
    fn default() -> Self {
        QpSetup {
            qp_type: default_qp_type(),
            pmtu: default_pmtu(),
            access: default_qp_access(),
            timeout: default_timeout(),
            retry_cnt: default_retry(),
            rnr_retry: default_retry(),
            min_rnr_timer: default_min_rnr_timer(),
            max_rd_atomic: default_rd_atomic(),
            max_dest_rd_atomic: default_rd_atomic(),
            q_key: default_qkey(),
            p_key: default_pkey(),
            traffic_class: 0,
            sq_psn: None,
            rq_psn: None,
            mp: None,
            state: default_qp_state(),
        }
    }
}

fn default_qp_state() -> String {
    "rts".into()
}

fn default_qp_type() -> String {
    "rc".into()
}
fn default_pmtu() -> u32 {
    1024
}
fn default_qp_access() -> Vec<String> {
    ["remote_write", "remote_read", "remote_atomic"]
        .map(String::from)
        .to_vec()
}
fn default_timeout() -> u8 {
    14
}
fn default_retry() -> u8 {
    7
}
fn default_min_rnr_timer() -> u8 {
    1
}
fn default_rd_atomic() -> u8 {
    16
}
fn default_qkey() -> u32 {
    0x1111_1111
}
fn default_pkey() -> u16 {
    0xFFFF
}

/// MP attributes of the QP under test (SPEC §7.1).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MpSetup {
    /// Entropy set size N.
    #[serde(default = "default_entropy")]
    pub entropy_set_size: u16,
    /// Receive window W in PSNs.
    #[serde(default = "default_window")]
    pub window: u32,
    /// DSCP of trimmed packets (trimming off when absent).
    #[serde(default)]
    pub trim_dscp: Option<u8>,
    /// DSCP of the IUT's MP ACKs, MP Atomic Acknowledges and MP Probes
    /// (`mp_ack_dscp`, SPEC §7.1, MR-MPA-12); not sent when absent (the
    /// DSCP of the QP's traffic class).
    #[serde(default)]
    pub ack_dscp: Option<u8>,
    /// The entropy set itself (`mp_entropy_set`, each 0xC000–0xFFFF);
    /// when given, `entropy_set_size` must equal its length. The IUT chooses
    /// the values when absent.
    #[serde(default)]
    pub entropy_set: Option<Vec<u16>>,
    /// The requester's reorder threshold K (`mp_reorder_threshold`, SPEC
    /// §10.3, 1–64), for vectors written for a given K; the IUT's own
    /// value when absent.
    #[serde(default)]
    pub reorder_threshold: Option<u8>,
    /// The harness's requester announces RN (`mp_peer_resource_nak`, SPEC
    /// §7.1, §7.16): the IUT's responder may answer a refusal with NAK
    /// 0x66. Not given when absent (the IUT's default: false).
    #[serde(default)]
    pub peer_resource_nak: Option<bool>,
    /// The IUT responder's staging limit in bytes (`mp_max_staged_bytes`,
    /// SPEC §2), at most the declared value; the IUT's own when absent (or
    /// when equal to the declared value: then not sent to the agent).
    #[serde(default)]
    pub max_staged_bytes: Option<u64>,
    /// `mp_peer_ordered` (SPEC v1.2 §7.5): the harness's responder honours
    /// the MPETH O flag; sent only when true (vectors that set it need
    /// `mp_ordered_write`).
    #[serde(default)]
    pub peer_ordered: bool,
}

fn default_entropy() -> u16 {
    8
}
fn default_window() -> u32 {
    1024
}

/// A memory region on the IUT.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MrSetup {
    /// Name used in expressions and steps.
    pub name: String,
    /// Length in bytes.
    pub length: u64,
    /// Access flags (`local_write`, `remote_read`, `remote_write`, `remote_atomic`).
    #[serde(default)]
    pub access: Vec<String>,
    /// Every byte starts as this value.
    #[serde(default)]
    pub fill: u8,
    /// Initial content from offset 0, after `fill`.
    #[serde(default)]
    pub content: Option<Bytes>,
    /// Register the MR in a second protection domain, not the QP's (to test
    /// that an R_Key of another PD is refused, MR-SEC-7).
    #[serde(default)]
    pub other_pd: bool,
}

/// A receive posted during setup.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecvSetup {
    /// Work request id.
    pub wr_id: u64,
    /// Scatter list.
    #[serde(default)]
    pub sg: Vec<Sge>,
    /// Post on the second QP instead.
    #[serde(default)]
    pub second_qp: bool,
}

/// A scatter/gather element naming an MR of the setup.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sge {
    /// The MR's name.
    pub mr: String,
    /// Offset into the MR.
    #[serde(default)]
    pub offset: u64,
    /// Length in bytes.
    pub length: u32,
    /// Use this L_Key instead of the MR's (to test a bad one).
    #[serde(default)]
    pub lkey: Option<Num>,
}

/// Bytes: a hex string, or a generated run.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Bytes {
    /// Hex digits, two per byte (spaces allowed).
    Hex(String),
    /// `len` bytes.
    Generated(GeneratedBytes),
}

/// `len` bytes of one value, or the pattern 0, 1, 2, ... (mod 256) plus `seed`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeneratedBytes {
    /// How many bytes.
    pub len: Num,
    /// Every byte is this value; the counting pattern when absent.
    #[serde(default)]
    pub byte: Option<u8>,
    /// Added to the counting pattern.
    #[serde(default)]
    pub seed: u8,
}

/// A number: an integer, or an expression string such as
/// `"${psn + 1}"`, `"${mr.buf.addr + 4096}"`, `"0x1f"`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Num {
    /// A literal.
    Int(u64),
    /// An expression (see `vectors/README.md`).
    Expr(String),
}

/// One step.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Send one packet (or `repeat` copies) to the IUT.
    Send(SendStep),
    /// The next packet(s) from the IUT must match.
    Expect(ExpectStep),
    /// No packet (or none matching) may arrive in the window.
    ExpectNone(ExpectNoneStep),
    /// Post a send work request on the IUT.
    PostSend(PostSendStep),
    /// Post a receive work request on the IUT.
    PostRecv(RecvSetup),
    /// The IUT's next completion must match.
    ExpectCompletion(CompletionStep),
    /// No completion (or none matching `fields`) may appear in the window.
    ExpectNoCompletion(NoCompletionStep),
    /// Bytes of an MR on the IUT.
    ExpectMemory(MemoryStep),
    /// Write bytes into an MR on the IUT (by the host, as `write_mr`).
    WriteMemory(MemoryStep),
    /// Device counters (SPEC §9.3): growth since the test started.
    ExpectCounters(BTreeMap<String, Matcher>),
    /// Move the QP under test to another state (`err`, ...).
    ModifyQp(ModifyQpStep),
    /// Deregister an MR of the setup (agent `dereg_mr`); its name stays
    /// bound, so later packets can name its old R_Key (MR-SEC-8).
    DeregMr(DeregMrStep),
    /// Let time pass, collecting what the IUT sends (checked by later steps).
    Wait(WindowStep),
    /// The QP's state as the agent's `query_qp` reports it.
    ExpectQpState(QpStateStep),
}

/// A packet to send. Header fields use the names of `metaroce decode
/// --format jsonl`; anything left out is derived (addresses, QPN, PSN,
/// lengths, PadCnt, ICRC).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendStep {
    /// Opcode: a name (`RC_RDMA_WRITE_ONLY`, `MP_WRITE`, `CNP`, ...) or a number.
    pub opcode: OpcodeRef,
    /// BTH fields: `se`, `m`, `pad_count`, `tver`, `pkey`, `fecn`, `becn`,
    /// `resv6a`, `dest_qp`, `ack_req`, `resv7`, `psn`.
    #[serde(default)]
    pub bth: BTreeMap<String, Value>,
    /// Extension headers by name (`reth`, `aeth`, `atomiceth`, `immdt`,
    /// `ieth`, `deth`, `mpeth`, `sacketh`, ...), fields as decode names them.
    #[serde(default)]
    pub ext: BTreeMap<String, BTreeMap<String, Value>>,
    /// Payload bytes.
    #[serde(default)]
    pub payload: Option<Bytes>,
    /// IP fields: `dscp`, `ecn`, `ttl`, `src`, `dst`, `total_len`, `protocol`,
    /// `checksum`.
    #[serde(default)]
    pub ip: BTreeMap<String, Value>,
    /// UDP fields: `src_port`, `dst_port`, `length`, `checksum`.
    #[serde(default)]
    pub udp: BTreeMap<String, Value>,
    /// Ethernet fields: `src`, `dst`.
    #[serde(default)]
    pub eth: BTreeMap<String, Value>,
    /// Deliberate damage.
    #[serde(default)]
    pub corrupt: Option<Corruption>,
    /// Send to the second QP (default DestQP `${iut.qpn2}`).
    #[serde(default)]
    pub second_qp: bool,
    /// Send this many identical copies.
    #[serde(default)]
    pub repeat: Option<u32>,
    /// Part of a burst: the IUT may not answer before the next step (a
    /// duplicate or a NAK arriving while the responses to earlier frames
    /// are still queued). On the built-in IUT the frame is handled without
    /// letting the IUT transmit; on a live IUT the next frame follows back
    /// to back. A burst is `send`s with `hold: true` ended by one without.
    #[serde(default)]
    pub hold: bool,
    /// A note written on the packet in the report and pcapng.
    #[serde(default)]
    pub note: Option<String>,
}

/// A field value: a number or expression, a boolean, or a string (address).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Value {
    /// true / false.
    Bool(bool),
    /// A number or expression.
    Num(Num),
}

/// An opcode by name or number.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OpcodeRef {
    /// 0–255.
    Number(u8),
    /// A name (see `metaroce vectors opcodes`).
    Name(String),
}

/// Deliberate damage to a packet, each applied after the derived fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Corruption {
    /// Flip bits of the ICRC.
    #[serde(default)]
    pub icrc: bool,
    /// Use this ICRC value.
    #[serde(default)]
    pub icrc_value: Option<Num>,
    /// Keep only the first N bytes of the frame.
    #[serde(default)]
    pub truncate: Option<Num>,
    /// Bytes appended after the ICRC (inside the IP and UDP lengths only
    /// if those are overridden).
    #[serde(default)]
    pub trailer: Option<Bytes>,
    /// Pad bytes (their count is BTH `pad_count` unless that is given).
    #[serde(default)]
    pub pad_bytes: Option<Bytes>,
}

/// Which packets an `expect` takes.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectStep {
    /// The window in microseconds from the step's start (plus the live
    /// margin): a number or an expression (`"${profile.mp_rto_init + 30}"`).
    #[serde(default = "default_window_us")]
    pub within_us: Num,
    /// Field matchers against the packet as `metaroce decode --format jsonl`
    /// shows it (`bth.opcode_name`, `bth.psn`, `aeth.syndrome`, ...). Extra keys:
    /// `payload` (hex of the payload), `syndrome` (`ack`, `rnr`, `nak_seq`,
    /// `nak_inv_req`, `nak_rem_access`, `nak_rem_op`, `nak_inv_rd_req`, `nak`)
    /// and `icrc_valid`.
    #[serde(default)]
    pub fields: BTreeMap<String, Matcher>,
    /// How many packets, each matching (default 1).
    #[serde(default)]
    pub count: Option<u32>,
    /// Packets that do not match are skipped (recorded) rather than failing
    /// the step: for behaviour the spec leaves open, such as extra ACKs.
    #[serde(default)]
    pub skip_unmatched: bool,
    /// With `skip_unmatched`: at most this many packets may be skipped
    /// before each match (for "at least one in every N packets" rules).
    #[serde(default)]
    pub max_skipped: Option<u32>,
    /// Names bound to fields of the (last) matched packet, for later steps:
    /// `{name: field}`, used as `${name}`.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
    /// The requirement this expectation checks, if narrower than the vector's.
    #[serde(default)]
    pub requirement: Option<String>,
    /// A tighter bound inside `within_us` that a weaker requirement sets
    /// (SPEC MR-MPL-11: how late an MP timer should fire): a packet that
    /// matches after `late.after_us` still passes the step, and the test,
    /// once every other step has passed, is judged a failure of
    /// `late.requirement` (PASS-NONSTRICT for a SHOULD).
    #[serde(default)]
    pub late: Option<LateBound>,
}

/// See [`ExpectStep::late`].
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LateBound {
    /// From the same start as `within_us` (plus the same live margin): a
    /// number or an expression.
    pub after_us: Num,
    /// The requirement a later match falls short of.
    pub requirement: String,
}

fn default_window_us() -> Num {
    Num::Int(2_000)
}

/// A window in which nothing (matching) may arrive.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectNoneStep {
    /// Window length in microseconds.
    #[serde(default = "default_window_us")]
    pub within_us: Num,
    /// The window bounds a timer from below ("no retransmission before T"):
    /// on a live IUT it shrinks by the margin (a late packet only looks
    /// later, never earlier), and when the margin swallows it the verdict is
    /// INCONC. Without it (a "never answered" check) the window grows by the
    /// margin.
    #[serde(default)]
    pub lower_bound: bool,
    /// With `lower_bound`: the index in `steps` of an earlier `send` or
    /// `expect` whose frame started the timer, when it is not the latest
    /// frame (a probe's retire hold runs from the ACK that revealed the
    /// loss, not from a later ACK). The window runs from that frame.
    #[serde(default)]
    pub from_step: Option<usize>,
    /// Only packets matching these fields count (all packets when empty).
    #[serde(default)]
    pub fields: BTreeMap<String, Matcher>,
    /// The requirement this expectation checks, if narrower than the vector's.
    #[serde(default)]
    pub requirement: Option<String>,
}

/// A window in which the IUT may give no completion, or none matching
/// `fields` (where the SPEC allows several outcomes but forbids one: a
/// completion that does not match is taken from the CQ and noted).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoCompletionStep {
    /// Microseconds.
    #[serde(default = "default_window_us")]
    pub within_us: Num,
    /// Matchers, as `expect_completion`'s, of the completions that may not
    /// appear; empty (the default): none may.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, Matcher>,
}

/// A bare window.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowStep {
    /// Microseconds.
    #[serde(default = "default_window_us")]
    pub within_us: Num,
}

/// A field matcher: a value (number, expression, boolean or string), or a
/// test.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Matcher {
    /// Equal to a boolean.
    Bool(bool),
    /// Equal to a number or an expression's value.
    Int(u64),
    /// Equal to an expression's value (`${...}`), or to a string (names,
    /// addresses, hex payloads).
    Text(String),
    /// A test.
    Test(MatchTest),
}

/// A test on a field.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchTest {
    /// One of these values.
    #[serde(default)]
    pub any_of: Option<Vec<Matcher>>,
    /// Not this value.
    #[serde(default)]
    pub not: Option<Box<Matcher>>,
    /// At least.
    #[serde(default)]
    pub min: Option<Num>,
    /// At most.
    #[serde(default)]
    pub max: Option<Num>,
    /// The field is absent (true) or present (false).
    #[serde(default)]
    pub absent: Option<bool>,
}

/// A send work request posted on the IUT.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostSendStep {
    /// Work request id.
    pub wr_id: u64,
    /// Agent opcode (`send`, `send_with_imm`, `send_with_inv`, `rdma_write`,
    /// `rdma_write_with_imm`, `rdma_read`, `atomic_cmp_and_swp`,
    /// `atomic_fetch_and_add`).
    pub opcode: String,
    /// Gather list.
    #[serde(default)]
    pub sg: Vec<Sge>,
    /// Remote VA (the harness's memory when the harness is the responder).
    #[serde(default)]
    pub remote_addr: Option<Num>,
    /// Remote key.
    #[serde(default)]
    pub rkey: Option<Num>,
    /// Immediate data.
    #[serde(default)]
    pub imm: Option<Num>,
    /// R_Key to invalidate.
    #[serde(default)]
    pub invalidate_rkey: Option<Num>,
    /// Compare operand.
    #[serde(default)]
    pub compare: Option<Num>,
    /// Swap operand.
    #[serde(default)]
    pub swap: Option<Num>,
    /// Add operand.
    #[serde(default)]
    pub add: Option<Num>,
    /// Signaled (default true).
    #[serde(default)]
    pub signaled: Option<bool>,
    /// Fence.
    #[serde(default)]
    pub fence: bool,
    /// Solicited event.
    #[serde(default)]
    pub solicited: bool,
    /// Post on the second QP.
    #[serde(default)]
    pub second_qp: bool,
    /// UD destination: the harness's QP (`qpn`, default `${h.qpn}`) and
    /// Q_Key; address and MAC are the harness's.
    #[serde(default)]
    pub ud: Option<UdDest>,
    /// The agent must refuse the request (`wrong_state`, ...): acceptance
    /// FAILs the step. Without it a refusal is INCONC.
    #[serde(default)]
    pub refused: Option<Refusal>,
    /// The requirement a refusal (or acceptance) checks.
    #[serde(default)]
    pub requirement: Option<String>,
}

/// The destination of a UD send work request.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UdDest {
    /// Destination QPN (default `${h.qpn}`).
    #[serde(default)]
    pub qpn: Option<Num>,
    /// Q_Key carried in DETH.
    pub qkey: Num,
}

/// A completion the IUT must report.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionStep {
    /// Window in microseconds.
    #[serde(default = "default_window_us")]
    pub within_us: Num,
    /// Matchers on the completion's fields as the agent reports them
    /// (`wr_id`, `status`, `status_name`, `opcode`, `byte_len`, `imm`,
    /// `invalidated_rkey`, `src_qp`, `qpn`).
    pub fields: BTreeMap<String, Matcher>,
    /// The requirement this expectation checks, if narrower than the vector's.
    #[serde(default)]
    pub requirement: Option<String>,
}

/// Bytes of an MR.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryStep {
    /// The MR's name.
    pub mr: String,
    /// Offset.
    #[serde(default)]
    pub offset: u64,
    /// The bytes.
    pub bytes: Bytes,
    /// The requirement this expectation checks, if narrower than the vector's.
    #[serde(default)]
    pub requirement: Option<String>,
}

/// An MR to deregister.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeregMrStep {
    /// The MR's name.
    pub mr: String,
}

/// A QP state change (agent `modify_qp` on the QP under test).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModifyQpStep {
    /// Target state (`err`, `sqd`, `reset`, `init`, `rtr`, `rts`, ...).
    pub state: String,
    /// Attributes as the agent takes them (AGENT.md §6.9), passed as they are.
    #[serde(default)]
    pub attrs: BTreeMap<String, serde_json::Value>,
    /// Add the INIT→RTR attributes the setup used (`dest_qpn`, `rq_psn`,
    /// `pmtu`, `path`, `max_dest_rd_atomic`, `min_rnr_timer`; no MP ones)
    /// to `attrs`, for a test that re-negotiates the QP after `reset` and
    /// `init`. Keys in `attrs` win.
    #[serde(default)]
    pub rtr_defaults: bool,
    /// The agent must refuse the request: `true` or `any` for any error
    /// code, or the code (`bad_value`, `out_of_range`,
    /// `unexpected_attribute`, `unsupported`, ...). A refusal is then the
    /// expected outcome and an acceptance FAILs. Without it a refusal is
    /// INCONC. String values of `attrs` that are `${...}` expressions are
    /// evaluated.
    #[serde(default)]
    pub refused: Option<Refusal>,
    /// The requirement this step checks, if narrower than the vector's.
    #[serde(default)]
    pub requirement: Option<String>,
}

/// What `refused` asks of the agent.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Refusal {
    /// `true`: any error code; `false`: no refusal expected.
    Flag(bool),
    /// This error code, or `any`.
    Code(String),
}

impl Refusal {
    /// The code a refusal must carry (`any` for any), or `None` when the
    /// request must be accepted.
    pub fn expected(&self) -> Option<&str> {
        match self {
            Refusal::Flag(true) => Some("any"),
            Refusal::Flag(false) => None,
            Refusal::Code(c) => Some(c),
        }
    }
}

/// The QP state the agent must report.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QpStateStep {
    /// `reset`, `init`, `rtr`, `rts`, `sqd`, `sqe` or `err`.
    pub state: String,
    /// Further states that pass too, where SPEC.md allows a set (a UD send
    /// completed LOC_LEN_ERR leaves the QP in SQE or ERR, MR-UD-5).
    #[serde(default)]
    pub alternatives: Vec<String>,
    /// The requirement the step checks.
    #[serde(default)]
    pub requirement: Option<String>,
}
