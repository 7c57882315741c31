//! Two hosts for the live tests (`suite_veth`, `interop_veth`): network
//! namespaces `<id>-<a>` and `<id>-<b>` joined by a data veth pair
//! (`data0`/`data1`: MACs given, MTU 9000, no IP address — frames only) and
//! a control veth pair (`ctl0`/`ctl1`: `<subnet>.1/30` and `<subnet>.2/30`,
//! for the agents' TCP); `metaroce-ref serve` agents started in them; all
//! killed and deleted on drop, on every path.
//!
//! Network rule: traffic only on the two veth pairs between the namespaces
//! a test creates and on their loopbacks.
//!
//! Needs root, `ip netns` and the `metaroce-ref` binary (built by `cargo
//! test --workspace`); [`TwoHosts::new`] otherwise prints `SKIP: ...` and
//! returns `None`, unless `CI=true`, where it panics.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The namespaces, their agents and a scratch directory; removed on drop.
pub struct TwoHosts {
    /// Namespace of `data0`/`ctl0` (`<subnet>.1`).
    pub a: String,
    /// Namespace of `data1`/`ctl1` (`<subnet>.2`).
    pub b: String,
    /// The control subnet's first three octets (`192.168.231`).
    pub subnet: &'static str,
    /// Scratch directory: agent logs, reports.
    pub dir: PathBuf,
    agents: Vec<Child>,
    what: String,
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for a in &mut self.agents {
            let _ = a.kill();
            let _ = a.wait();
        }
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// The SKIP/CI rule and `run` are the reference transport's veth tests' own.
use metaroce_test_support::netns;
pub use netns::{run as sh, skip};

/// The `metaroce-ref` binary beside `metaroce`.
pub fn agent_binary() -> Option<PathBuf> {
    let me = Path::new(env!("CARGO_BIN_EXE_metaroce"));
    let bin = me.with_file_name("metaroce-ref");
    bin.exists().then_some(bin)
}

impl TwoHosts {
    /// Builds the two hosts `<id>-<names[0]>` and `<id>-<names[1]>`, or
    /// SKIPs (see the module) and returns `None`.
    pub fn new(
        what: &str,
        id: &str,
        names: [&str; 2],
        subnet: &'static str,
        macs: [&str; 2],
    ) -> Option<TwoHosts> {
        if agent_binary().is_none() {
            skip(
                what,
                "metaroce-ref is not built (run `cargo test --workspace`)",
            );
            return None;
        }
        if !netns::can_run(what) {
            return None;
        }
        let hosts = TwoHosts {
            a: format!("{id}-{}", names[0]),
            b: format!("{id}-{}", names[1]),
            subnet,
            dir: Path::new(env!("CARGO_TARGET_TMPDIR")).join(id),
            agents: Vec::new(),
            what: what.to_string(),
        };
        std::fs::create_dir_all(&hosts.dir).unwrap();
        if let Err(e) = hosts.build(macs) {
            skip(what, &format!("cannot build the namespaces: {e}"));
            return None;
        }
        Some(hosts)
    }

    fn build(&self, macs: [&str; 2]) -> Result<(), String> {
        let (a, b) = (self.a.as_str(), self.b.as_str());
        sh(&["ip", "netns", "add", a])?;
        sh(&["ip", "netns", "add", b])?;
        for (x, y) in [("data0", "data1"), ("ctl0", "ctl1")] {
            sh(&[
                "ip", "link", "add", x, "netns", a, "type", "veth", "peer", "name", y, "netns", b,
            ])?;
        }
        for (ns, data, ctl, host, mac) in [
            (a, "data0", "ctl0", 1, macs[0]),
            (b, "data1", "ctl1", 2, macs[1]),
        ] {
            for key in ["all", "default"] {
                let _ = sh(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ]);
            }
            sh(&["ip", "-n", ns, "link", "set", data, "address", mac])?;
            // PMTU 4096 needs jumbo frames: 4096 bytes of payload plus headers.
            sh(&["ip", "-n", ns, "link", "set", data, "mtu", "9000"])?;
            for dev in [data, ctl, "lo"] {
                sh(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            }
            let addr = format!("{}.{host}/30", self.subnet);
            sh(&["ip", "-n", ns, "addr", "add", &addr, "dev", ctl])?;
        }
        Ok(())
    }

    /// The control address of host 1 (`a`) or 2 (`b`) with a port.
    pub fn agent_addr(&self, host: u8) -> String {
        format!("{}.{host}:7471", self.subnet)
    }

    /// Starts `metaroce-ref serve --iface data<host-1> --ip ip` in host
    /// `host`'s namespace, listening on [`agent_addr`](Self::agent_addr),
    /// logging to `data<n>.log`, and waits (10 s at most) until it listens.
    pub fn start_agent(&mut self, host: u8, ip: &str) {
        let (ns, data) = if host == 1 {
            (self.a.clone(), "data0")
        } else {
            (self.b.clone(), "data1")
        };
        let listen = self.agent_addr(host);
        let log = std::fs::File::create(self.dir.join(format!("{data}.log"))).unwrap();
        self.agents.push(
            Command::new("ip")
                .args(["netns", "exec", &ns])
                .arg(agent_binary().expect("checked in new"))
                .args(["serve", "--iface", data, "--ip", ip, "--listen", &listen])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start metaroce-ref serve"),
        );
        let target = listen.replace(':', "/");
        let started = Instant::now();
        loop {
            let probe = Command::new("ip")
                .args(["netns", "exec", &self.a, "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/{target}"))
                .stderr(Stdio::null())
                .status();
            if probe.is_ok_and(|s| s.success()) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{}: agent {listen} did not listen within 10 s",
                self.what
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every agent log, for a failure message.
    pub fn agent_logs(&self) -> String {
        ["data0", "data1"]
            .iter()
            .map(|d| std::fs::read_to_string(self.dir.join(format!("{d}.log"))).unwrap_or_default())
            .collect()
    }

    /// Runs `metaroce ARGS` in host 1's namespace, its standard output to
    /// `<tag>.out`; bounded: kills it and panics after `limit`.
    pub fn metaroce(&self, args: &[&str], tag: &str, limit: Duration) -> Output {
        let out = self.dir.join(format!("{tag}.out"));
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.a, env!("CARGO_BIN_EXE_metaroce")])
            .args(args)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run metaroce");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for metaroce") {
                break status;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{}: metaroce {tag} did not finish within {} s:\n{}",
                    self.what,
                    limit.as_secs(),
                    std::fs::read_to_string(&out).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        Output {
            status,
            stdout: std::fs::read(&out).unwrap_or_default(),
            stderr: Vec::new(),
        }
    }
}
