//! Ordered messages at the requester (SPEC v1.2 §7.5): a fenced work
//! request sent at once with O toward a peer that honours O (MR-MPP-11),
//! and O only toward such a peer, alike in every packet (MR-MPP-21).

use super::*;

fn peer_ordered() -> MpConfig {
    MpConfig {
        peer_ordered: true,
        ..cfg()
    }
}

/// A requester with a 1-packet WRITE sent and a fenced `len`-byte WRITE
/// posted behind it.
fn fenced_behind_write(c: MpConfig, len: u32) -> MpRequester {
    let r = MpRequester::new(c, 0x22, psn(0));
    let (r, _) = r.post_send(write_wr(1, 256));
    let (r, _) = r.post_send(SendWr {
        fence: true,
        ..write_wr(2, len)
    });
    let (r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    r
}

/// Sends packet `k` of the fenced WRITE (PSN 1 + k) with O as given.
fn send_fenced(
    r: &MpRequester,
    k: u32,
    len: u32,
    o: bool,
    now: u64,
) -> (MpRequester, Vec<Finding>) {
    let off = k * 256;
    let chunk = (len - off).min(256);
    let b = write(1 + k, 1, off, len, 0x1000, 7, &vec![0xAB; chunk as usize]).ext(|e| {
        if let Some(m) = &mut e.mpeth {
            m.ordered = o;
        }
    });
    let w = wire(b.dest_qp(0x22));
    r.on_transmit(&w.roce(), 0xC001 + k as u16, now)
}

#[test]
fn fenced_request_goes_at_once_with_o_mr_mpp_11() {
    let r = fenced_behind_write(peer_ordered(), 512);
    // The model offers it now, with O.
    let o = r.next_packets(1);
    let spec = o
        .optional
        .iter()
        .find_map(|c| match &c.value {
            Effect::Send(s) if s.opcode == Field::Exact(Opcode::MP_WRITE) => Some(s.clone()),
            _ => None,
        })
        .expect("MR-MPP-11: sent at once toward a peer that honours O");
    assert_eq!(spec.mpeth.ordered, Field::Exact(true), "MR-MPP-21");
    let (r, f) = send_fenced(&r, 0, 512, true, 1);
    assert!(f.is_empty(), "{f:?}");
    let (_, f) = send_fenced(&r, 1, 512, true, 2);
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn fenced_request_without_o_waits_mr_mpp_11() {
    let r = fenced_behind_write(peer_ordered(), 256);
    let (_, f) = send_fenced(&r, 0, 256, false, 1);
    assert_eq!(ids(&f), vec!["MR-MPP-11"]);
}

#[test]
fn fenced_request_behind_a_read_waits_even_with_o_mr_mpp_11() {
    let r = MpRequester::new(peer_ordered(), 0x22, psn(0));
    let (r, _) = r.post_send(SendWr {
        wr: 1,
        op: WrOp::Read {
            va: 0x3000,
            rkey: 7,
            len: 256,
        },
        fence: false,
        signaled: true,
    });
    let (r, _) = r.post_send(SendWr {
        fence: true,
        ..write_wr(2, 256)
    });
    let (r, f, _) = send_next(&r, 0);
    assert!(f.is_empty(), "{f:?}");
    assert!(r.next_packets(1).optional.iter().all(|c| !matches!(
        &c.value,
        Effect::Send(s) if s.opcode == Field::Exact(Opcode::MP_WRITE)
    )));
    let (_, f) = send_fenced(&r, 0, 256, true, 1);
    assert_eq!(ids(&f), vec!["MR-MPP-11"]);
}

#[test]
fn o_toward_a_peer_that_did_not_announce_it_mr_mpp_21() {
    let r = fenced_behind_write(cfg(), 256);
    let (_, f) = send_fenced(&r, 0, 256, true, 1);
    assert!(ids(&f).contains(&"MR-MPP-21"), "{f:?}");
}

#[test]
fn o_in_some_packets_of_a_message_only_mr_mpp_21() {
    let r = fenced_behind_write(peer_ordered(), 512);
    let (r, f) = send_fenced(&r, 0, 512, true, 1);
    assert!(f.is_empty(), "{f:?}");
    let (_, f) = send_fenced(&r, 1, 512, false, 2);
    assert_eq!(ids(&f), vec!["MR-MPP-21"]);
}
