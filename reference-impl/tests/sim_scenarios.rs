//! Many mixed messages over impaired links: every message completes once,
//! in order, byte-exact (READ data, WRITE images, SEND buffers, atomic
//! originals), with bounded retransmissions and queues. The table of results
//! is pinned as an insta snapshot.

mod common;
use common::mixed::{Options, Row, assert_nothing_completes_after, run_mixed, sim_messages};
use common::*;
use metaroce_ref::sim::{Impairments, Network};

/// The run of one scenario: the shared mixed workload on the pair of
/// `network()` at PMTU 4096, then the Base bounds on state and
/// retransmissions.
fn run(name: &'static str, imp: Impairments, messages: usize, seed: u64) -> Row {
    let p = Params {
        pmtu: 4096,
        ..Params::default()
    };
    let (mut net, ea, eb) = network(p, imp, seed);
    let opts = Options {
        fence_write_after_write: false,
        time_limit_ns: None,
    };
    let out = run_mixed(&mut net, (ea, eb), name, messages, seed, opts);
    let (unacked, incomplete) = (out.unacked, out.incomplete);
    // The requester's unacknowledged span stays within its window plus one
    // READ block (256 PSNs of a 1 MiB READ at PMTU 4096); the responder
    // holds at most one message in progress.
    let window = net.device(0).config().max_outstanding_psns as usize;
    assert!(
        unacked <= window + 256 && incomplete <= 1,
        "{name}: state bounded ({unacked} unacked PSNs, {incomplete} messages in progress)"
    );
    let retransmitted = out.retransmitted;
    // No storm: go-back-N resends at most a window (plus a READ block) per
    // loss, reorder, duplicate or RNR event.
    let window = u64::from(net.device(0).config().max_outstanding_psns) + 256;
    let events = out.impaired + out.cb.rnr_naks_sent;
    assert!(
        retransmitted <= window * events,
        "{name}: {retransmitted} retransmissions for {events} events"
    );
    if events == 0 {
        assert_eq!(retransmitted, 0);
    }
    assert_nothing_completes_after(&mut net, (ea, eb));
    out.row(name, messages)
}

fn scenario(
    name: &'static str,
    edit: impl FnOnce(&mut Impairments),
    messages: usize,
    seed: u64,
) -> Row {
    let mut imp = Impairments::clean();
    edit(&mut imp);
    run(name, imp, messages, seed + seed_offset())
}

#[test]
fn scenarios_table() {
    let n = sim_messages(2000);
    let rows = [
        scenario("clean", |_| {}, n, 1),
        scenario("loss 1%", |i| i.drop = 0.01, n, 2),
        scenario("loss 10%", |i| i.drop = 0.10, n, 3),
        scenario(
            "reorder depth 16",
            |i| {
                i.reorder = 0.05;
                i.reorder_depth = 16;
            },
            n,
            4,
        ),
        scenario("duplicate 1%", |i| i.duplicate = 0.01, n, 5),
        scenario("corrupt 1%", |i| i.corrupt = 0.01, n, 6),
        scenario("ecn mark 5%", |i| i.ecn_mark = 0.05, n, 7),
    ];
    let mut table = String::from(
        "| scenario | messages | MiB | frames | impairments | retransmitted | timeouts | seq NAKs | RNR NAKs | peak unacked | virtual ms | goodput Gb/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        table += &format!(
            "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.2} |\n",
            r.name,
            r.messages,
            r.bytes as f64 / f64::from(1 << 20),
            r.frames,
            r.impaired,
            r.retransmitted,
            r.timeouts,
            r.seq_naks,
            r.rnr_naks,
            r.unacked,
            r.time_ns as f64 / 1e6,
            r.goodput(),
        );
    }
    println!("{table}");
    // 2,000 messages in `cargo test` (debug); 10,000 in release, in CI
    // (`.ci/run`, step "Simulator tables, 10,000 messages").
    match (n, seed_offset()) {
        (2000, 0) => insta::assert_snapshot!(table),
        (10_000, 0) => insta::assert_snapshot!("scenarios_table_10000", table),
        _ => {}
    }
}

#[allow(dead_code)]
fn _unused(_: Network) {}
