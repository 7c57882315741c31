//! The TCP server of metaroce-agent-verbs without a device: a fake handler
//! behind it, bad lines from a client (AGENT.md §1, §2 rule 1: never crash,
//! never hang; replies in request order; a waiting poll times out).

use metaroce_agent::protocol::{Op, Reply, Request};
use metaroce_agent_verbs::server::{Handler, Step, serve};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Answers every request with its op name; polls never find anything.
struct Echo;

impl Handler for Echo {
    fn handle(&mut self, req: Request) -> Step {
        match &req.op {
            Op::PollCq(p) => Step::Wait {
                id: req.id,
                cq: p.cq,
                max: p.max,
                wait: Duration::from_millis(p.wait_ms),
            },
            Op::Bye(_) => Step::Close(Reply::ok(Some(req.id), &json!({}))),
            _ => Step::Reply(Reply::ok(Some(req.id), &json!({"echo": req.id}))),
        }
    }

    fn try_poll(&mut self, id: u64, _cq: u32, _max: u32, last: bool) -> Option<Reply> {
        last.then(|| Reply::ok(Some(id), &json!({"completions": []})))
    }
}

fn start() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = l.local_addr().expect("address");
    std::thread::spawn(move || serve(l, Echo));
    addr
}

fn reply(r: &mut BufReader<TcpStream>) -> Value {
    let mut line = String::new();
    r.read_line(&mut line).expect("a reply line");
    serde_json::from_str(&line).expect("reply is JSON")
}

#[test]
fn bad_lines_get_error_replies_and_the_connection_survives() {
    let addr = start();
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut w = s.try_clone().expect("clone");
    let mut r = BufReader::new(s);
    let long = "x".repeat((1 << 20) + 10);
    let cases: [(&str, &str); 5] = [
        ("{not json", "bad_json"),
        ("[1,2]", "bad_request"),
        (r#"{"id":1,"op":"fly"}"#, "unknown_op"),
        (r#"{"id":2,"op":"alloc_pd","extra":1}"#, "unknown_field"),
        (&long, "line_too_long"),
    ];
    for (line, code) in cases {
        writeln!(w, "{line}").expect("send");
        let v = reply(&mut r);
        assert_eq!(
            v["ok"],
            false,
            "AGENT.md §2 rule 1: `{}` is an error",
            &line[..line.len().min(30)]
        );
        assert_eq!(v["error"]["code"], code);
    }
    // Pipelined requests: replies in request order, the waiting poll first.
    let t0 = Instant::now();
    writeln!(w, r#"{{"id":7,"op":"poll_cq","cq":1,"wait_ms":50}}"#).expect("send");
    writeln!(w, r#"{{"id":8,"op":"hello"}}"#).expect("send");
    assert_eq!(reply(&mut r)["id"], 7);
    assert!(
        t0.elapsed() >= Duration::from_millis(50),
        "the poll waited its wait_ms"
    );
    assert_eq!(reply(&mut r)["id"], 8);
    writeln!(w, r#"{{"id":9,"op":"bye"}}"#).expect("send");
    assert_eq!(reply(&mut r)["ok"], true);
    let mut rest = String::new();
    assert_eq!(
        r.read_line(&mut rest).expect("eof"),
        0,
        "bye closes the connection"
    );
}
