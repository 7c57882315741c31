//! Shared by the veth tests: the SKIP/CI rule, commands, and [`Lab`], two
//! network namespaces joined by a veth pair, deleted on drop.
//!
//! Network rule: the only traffic is on the veth pair between the two
//! namespaces a test creates (and on their own loopbacks); a guard deletes
//! the namespaces (and with them the veth pair) on every path.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `true` when the environment can run a veth test; else prints `SKIP:
/// <what>: <why>` and returns `false`, or panics under CI=true.
pub fn can_run(what: &str) -> bool {
    let why = if !is_root() {
        Some("not root (AF_PACKET and `ip netns` need it)".to_string())
    } else {
        match Command::new("ip").args(["netns", "list"]).output() {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "`ip netns list` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("cannot run `ip` (iproute2): {e}")),
        }
    };
    match why {
        None => true,
        Some(why) => skip(what, &why),
    }
}

/// Prints `SKIP: <what>: <why>` and returns `false`; panics under CI=true.
pub fn skip(what: &str, why: &str) -> bool {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} cannot run under CI=true: {why}");
    }
    println!("SKIP: {what}: {why}");
    false
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}

/// Runs a command; its stderr in the error.
pub fn run(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The two namespaces and a scratch directory; deleted on drop.
pub struct Lab {
    /// Namespace of `veth0`.
    pub a: String,
    /// Namespace of `veth1`.
    pub b: String,
    /// Scratch directory (logs, files exchanged by the processes).
    pub dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    /// Namespaces `<prefix>-<pid>-<case>-a` (veth0, `macs[0]`) and `-b`
    /// (veth1, `macs[1]`): links and loopback up, IPv6 off (no router
    /// solicitations on the link), no kernel IPv4 address on the veth (the
    /// kernel must not answer RoCE frames with ICMP).
    pub fn new(prefix: &str, case: &str, macs: [&str; 2]) -> Result<Lab, String> {
        let id = format!("{prefix}-{}-{case}", std::process::id());
        let lab = Lab {
            a: format!("{id}-a"),
            b: format!("{id}-b"),
            dir: std::env::temp_dir().join(&id),
        };
        std::fs::create_dir_all(&lab.dir).map_err(|e| e.to_string())?;
        let (a, b) = (lab.a.as_str(), lab.b.as_str());
        run(&["ip", "netns", "add", a])?;
        run(&["ip", "netns", "add", b])?;
        run(&[
            "ip", "link", "add", "veth0", "netns", a, "type", "veth", "peer", "name", "veth1",
            "netns", b,
        ])?;
        for (ns, dev, mac) in [(a, "veth0", macs[0]), (b, "veth1", macs[1])] {
            for key in ["all", "default"] {
                let _ = run(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ]);
            }
            run(&["ip", "-n", ns, "link", "set", dev, "address", mac])?;
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(lab)
    }

    /// About 1% loss on veth0's egress (namespace `a`'s frames), silent to
    /// the sender: netem when the kernel has it; else a classic-BPF filter
    /// on a random number whose matches are redirected to a veth pair
    /// `sink0`/`sink1` inside namespace `a`, where they die unseen (foreign
    /// MAC, no address). Returns which one was installed.
    pub fn lossy(&self) -> Result<&'static str, String> {
        let a = self.a.as_str();
        let netem = run(&[
            "tc", "-n", a, "qdisc", "add", "dev", "veth0", "root", "netem", "loss", "1%",
        ]);
        if netem.is_ok() {
            return Ok("netem loss 1%");
        }
        let tc = |args: &[&str]| {
            let mut cmd = vec!["tc", "-n", a];
            cmd.extend_from_slice(args);
            run(&cmd)
        };
        run(&[
            "ip", "-n", a, "link", "add", "sink0", "type", "veth", "peer", "name", "sink1",
        ])
        .and_then(|()| run(&["ip", "-n", a, "link", "set", "sink0", "up"]))
        .and_then(|()| run(&["ip", "-n", a, "link", "set", "sink1", "up"]))
        .and_then(|()| tc(&["qdisc", "add", "dev", "veth0", "clsact"]))
        .and_then(|()| {
            tc(&[
                "filter",
                "add",
                "dev",
                "veth0",
                "egress",
                "bpf",
                "bytecode",
                // A = random u32; A >= 2^32/100 ? no match (pass) : match.
                "4,32 0 0 4294963256,53 1 0 42949673,6 0 0 4294967295,6 0 0 0",
                "action",
                "mirred",
                "egress",
                "redirect",
                "dev",
                "sink0",
            ])
        })
        .map(|()| "tc clsact + cBPF random 1% redirected to a sink veth (kernel has no netem)")
        .map_err(|e| format!("netem: {netem:?}; fallback: {e}"))
    }

    /// Frames dropped by the loss rule so far (tc statistics), for the log.
    pub fn loss_stats(&self) -> String {
        let out = Command::new("tc")
            .args(["-n", &self.a, "-s", "qdisc", "show", "dev", "veth0"])
            .output();
        let filt = Command::new("tc")
            .args([
                "-n", &self.a, "-s", "filter", "show", "dev", "veth0", "egress",
            ])
            .output();
        [out, filt]
            .into_iter()
            .filter_map(Result::ok)
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .collect::<Vec<_>>()
            .join("")
    }
}
