//! Invariants checkable over a whole observed sequence rather than one event:
//! the order of a Base responder's responses (SPEC.md §6.7, §6.15), the
//! constancy of a Base QP's flow identifiers (§3.4, §3.5), the flow labels
//! of an MP QP (§7.4) and the consistency of an MP message's packets (§7.2).

use crate::Finding;
use metaroce_codec::ext::{IethRepr, ImmDtRepr, RethRepr};
use metaroce_codec::{Opcode, Psn, RocePacket};
use std::collections::BTreeMap;

/// One event of a Base responder's send stream, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponderEvent {
    /// A request was executed; it occupies PSNs `first ..= last` (a READ of
    /// n packets occupies n PSNs).
    Executed {
        /// First PSN.
        first: Psn,
        /// Last PSN.
        last: Psn,
        /// The request is a READ (answered by `last - first + 1` responses).
        read: bool,
    },
    /// An ACK, READ response or atomic acknowledgement was sent with `psn`.
    Response {
        /// BTH PSN.
        psn: Psn,
        /// A re-sent response to a duplicate READ or atomic (§6.9).
        duplicate: bool,
    },
}

/// Judges the responses of a Base responder against the requests it executed:
/// "MR-ACK-3" (response PSNs never move backwards, except re-sent responses
/// of duplicates), "MR-ACK-4" (no PSN acknowledged before it was executed) and
/// "MR-READ-4" (the responses of a READ are finished before a later request
/// is answered).
pub fn judge_responses(events: &[ResponderEvent]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut executed: Option<Psn> = None;
    let mut last_sent: Option<Psn> = None;
    // READs executed and not yet fully answered: (first, last).
    let mut reads: Vec<(Psn, Psn)> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match *event {
            ResponderEvent::Executed { first, last, read } => {
                executed = Some(last);
                if read {
                    reads.push((first, last));
                }
            }
            // Re-sent responses of duplicates may repeat earlier PSNs.
            ResponderEvent::Response {
                duplicate: true, ..
            } => {}
            ResponderEvent::Response { psn, .. } => {
                if executed.is_none_or(|e| psn.is_after(e)) {
                    out.push(Finding::new(
                        "MR-ACK-4",
                        format!("event {i}: response PSN {psn} before that PSN was executed"),
                    ));
                }
                if let Some(prev) = last_sent
                    && psn.is_before(prev)
                {
                    out.push(Finding::new(
                        "MR-ACK-3",
                        format!("event {i}: response PSN {psn} moves back from {prev}"),
                    ));
                }
                // A READ whose responses have started must finish first.
                if let Some(&(first, last)) = reads.first() {
                    let started =
                        last_sent.is_some_and(|p| !p.is_before(first) && p.is_before(last));
                    let inside = !psn.is_before(first) && !psn.is_after(last);
                    if started && !inside {
                        out.push(Finding::new(
                            "MR-READ-4",
                            format!(
                                "event {i}: response PSN {psn} while the READ {first}..={last} is unfinished"
                            ),
                        ));
                    }
                }
                reads.retain(|&(_, last)| psn.is_before(last));
                last_sent = Some(psn);
            }
        }
    }
    out
}

/// The flow identifiers of one packet a Base QP sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowObservation {
    /// UDP source port.
    pub udp_src_port: u16,
    /// IPv6 flow label (`None` over IPv4).
    pub flow_label: Option<u32>,
}

/// Judges the packets one Base QP sent between leaving RESET and its next
/// RESET: "MR-ENC-12" (one UDP source port) and "MR-ENC-10" (one IPv6 flow
/// label).
pub fn judge_flow(packets: &[FlowObservation]) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(first) = packets.first() else {
        return out;
    };
    for (i, p) in packets.iter().enumerate().skip(1) {
        if p.udp_src_port != first.udp_src_port {
            out.push(Finding::new(
                "MR-ENC-12",
                format!(
                    "packet {i}: UDP source port 0x{:04x}, the QP's first packet used 0x{:04x}",
                    p.udp_src_port, first.udp_src_port
                ),
            ));
        }
        if let (Some(a), Some(b)) = (first.flow_label, p.flow_label)
            && a != b
        {
            out.push(Finding::new(
                "MR-ENC-10",
                format!("packet {i}: flow label 0x{b:05x}, the QP's first packet used 0x{a:05x}"),
            ));
        }
    }
    out
}

/// Judges the IPv6 flow labels of the packets one MP QP sent ("MR-MPS-8"):
/// with `mp_flow_label_entropy` every label is the packet's entropy value
/// (UDP source port, zero-extended); without it every label equals the
/// first. Packets over IPv4 are skipped.
pub fn judge_mp_flow_labels(packets: &[FlowObservation], entropy: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut first: Option<u32> = None;
    for (i, p) in packets.iter().enumerate() {
        let Some(label) = p.flow_label else {
            continue;
        };
        let want = if entropy {
            u32::from(p.udp_src_port)
        } else {
            *first.get_or_insert(label)
        };
        if label != want {
            out.push(Finding::new(
                "MR-MPS-8",
                format!("packet {i}: flow label 0x{label:05x}, expected 0x{want:05x}"),
            ));
        }
    }
    out
}

/// What every packet of one MP message must repeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MessageHeaders {
    opcode: Opcode,
    msg_len: u32,
    reth: Option<RethRepr>,
    immdt: Option<ImmDtRepr>,
    ieth: Option<IethRepr>,
}

/// Judges the MP request packets one MP QP sent ("MR-MPH-4": every packet of
/// one message, by MPETH MSN, carries the same opcode, message length, RETH,
/// ImmDt and IETH). Packets without MPETH are skipped.
pub fn judge_mp_messages(packets: &[RocePacket<'_>]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<u32, MessageHeaders> = BTreeMap::new();
    for (i, p) in packets.iter().enumerate() {
        let Some(mpeth) = p.ext.mpeth else {
            continue;
        };
        if p.bth.opcode == Opcode::MP_PROBE || p.bth.opcode == Opcode::MP_READ_RESPONSE {
            continue;
        }
        let h = MessageHeaders {
            opcode: p.bth.opcode,
            msg_len: mpeth.msg_len,
            reth: p.ext.reth,
            immdt: p.ext.immdt,
            ieth: p.ext.ieth,
        };
        let msn = mpeth.msn.value();
        match seen.get(&msn) {
            None => {
                seen.insert(msn, h);
            }
            Some(first) if *first != h => out.push(Finding::new(
                "MR-MPH-4",
                format!("packet {i}: message {msn} headers {h:?} differ from its first packet's {first:?}"),
            )),
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ResponderEvent::{Executed, Response};
    use metaroce_codec::{Frame, PacketBuilder, ParseOptions};

    fn psn(v: u32) -> Psn {
        Psn::new(v)
    }

    fn exec(first: u32, last: u32, read: bool) -> ResponderEvent {
        Executed {
            first: psn(first),
            last: psn(last),
            read,
        }
    }

    fn resp(p: u32) -> ResponderEvent {
        Response {
            psn: psn(p),
            duplicate: false,
        }
    }

    fn ids(f: &[Finding]) -> Vec<&'static str> {
        f.iter().map(|f| f.id).collect()
    }

    #[test]
    fn conforming_response_streams() {
        // MR-ACK-3, MR-ACK-4, MR-READ-4: in order, across the PSN wrap.
        let ok = [
            exec(0xFF_FFFE, 0xFF_FFFE, false),
            resp(0xFF_FFFE),
            exec(0xFF_FFFF, 1, true),
            resp(0xFF_FFFF),
            resp(0),
            resp(1),
            exec(2, 2, false),
            Response {
                psn: psn(0xFF_FFFE),
                duplicate: true,
            },
            resp(2),
        ];
        assert_eq!(judge_responses(&ok), vec![]);
    }

    #[test]
    fn backwards_and_early_responses() {
        // MR-ACK-3
        let back = [exec(5, 5, false), exec(6, 6, false), resp(6), resp(5)];
        assert_eq!(ids(&judge_responses(&back)), vec!["MR-ACK-3"]);
        // MR-ACK-4
        let early = [exec(5, 5, false), resp(6)];
        assert_eq!(ids(&judge_responses(&early)), vec!["MR-ACK-4"]);
        assert_eq!(ids(&judge_responses(&[resp(0)])), vec!["MR-ACK-4"]);
    }

    #[test]
    fn read_responses_are_finished_first() {
        // MR-READ-4: an ACK of a later request between two READ responses.
        let interleaved = [
            exec(10, 12, true),
            exec(13, 13, false),
            resp(10),
            resp(13),
            resp(11),
            resp(12),
        ];
        let f = ids(&judge_responses(&interleaved));
        assert!(f.contains(&"MR-READ-4"), "{f:?}");
        assert!(f.contains(&"MR-ACK-3"));
    }

    #[test]
    fn flow_identifiers_stay_constant() {
        // MR-ENC-12, MR-ENC-10
        let same = FlowObservation {
            udp_src_port: 0xC123,
            flow_label: Some(0x12345),
        };
        assert_eq!(judge_flow(&[same, same, same]), vec![]);
        let port = FlowObservation {
            udp_src_port: 0xC124,
            ..same
        };
        assert_eq!(ids(&judge_flow(&[same, port])), vec!["MR-ENC-12"]);
        let label = FlowObservation {
            flow_label: Some(0),
            ..same
        };
        assert_eq!(ids(&judge_flow(&[same, label])), vec!["MR-ENC-10"]);
        let v4 = FlowObservation {
            udp_src_port: 0xC123,
            flow_label: None,
        };
        assert_eq!(judge_flow(&[v4, v4]), vec![]);
    }

    #[test]
    fn mp_message_headers_repeat() {
        // MR-MPH-4
        let packet = |msn: u32, len: u32, imm: u32| {
            PacketBuilder::new(Opcode::MP_SEND_IMM)
                .ext(|e| {
                    if let Some(m) = &mut e.mpeth {
                        m.msn = metaroce_codec::Msn::new(msn);
                        m.msg_len = len;
                    }
                    if let Some(i) = &mut e.immdt {
                        i.value = imm;
                    }
                })
                .payload(vec![0; 4])
                .build()
        };
        let wires = [packet(1, 8, 7), packet(1, 8, 7), packet(2, 4, 9)];
        fn parse(w: &[u8]) -> RocePacket<'_> {
            Frame::parse(w, &ParseOptions::default())
                .ok()
                .and_then(|f| f.roce)
                .expect("parses")
        }
        let good: Vec<RocePacket<'_>> = wires.iter().map(|w| parse(w)).collect();
        assert_eq!(judge_mp_messages(&good), vec![]);
        let bad_wires = [packet(1, 8, 7), packet(1, 12, 7), packet(1, 8, 8)];
        let bad: Vec<RocePacket<'_>> = bad_wires.iter().map(|w| parse(w)).collect();
        assert_eq!(ids(&judge_mp_messages(&bad)), vec!["MR-MPH-4", "MR-MPH-4"]);
    }

    #[test]
    fn mp_flow_labels_mr_mps_8() {
        let obs = |port: u16, label: u32| FlowObservation {
            udp_src_port: port,
            flow_label: Some(label),
        };
        // mp_flow_label_entropy: label = entropy value.
        let sprayed = [obs(0xC000, 0xC000), obs(0xC001, 0xC001)];
        assert!(judge_mp_flow_labels(&sprayed, true).is_empty(), "MR-MPS-8");
        let wrong = [obs(0xC000, 0xC000), obs(0xC001, 0xC000)];
        assert_eq!(judge_mp_flow_labels(&wrong, true)[0].id, "MR-MPS-8");
        // Not declared: one constant label for the QP, whatever the port.
        assert!(judge_mp_flow_labels(&wrong, false).is_empty(), "MR-MPS-8");
        let varying = [obs(0xC000, 5), obs(0xC001, 6)];
        assert_eq!(judge_mp_flow_labels(&varying, false)[0].id, "MR-MPS-8");
        // IPv4 packets carry no label.
        let v4 = [FlowObservation {
            udp_src_port: 0xC000,
            flow_label: None,
        }];
        assert!(judge_mp_flow_labels(&v4, true).is_empty());
    }
}
