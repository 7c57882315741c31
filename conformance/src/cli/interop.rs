//! `metaroce interop`: two implementations, each behind an agent, exchange
//! every RC operation in both directions; the data is checked through the
//! agents (see [`crate::interop`]).

use crate::exit;
use crate::interop::cases::Op;
use crate::interop::{Config, StartError, run};
use clap::Args;
use std::path::PathBuf;

/// Arguments of `metaroce interop`.
#[derive(Debug, Args)]
pub struct InteropArgs {
    /// Agent of implementation A (HOST:PORT).
    #[arg(long)]
    pub a: String,
    /// Agent of implementation B (HOST:PORT).
    #[arg(long)]
    pub b: String,
    /// A's data-plane MAC, when its `hello.addresses.mac` is not the one B
    /// must send to.
    #[arg(long)]
    pub a_mac: Option<String>,
    /// A's data-plane IPv4 (default: its `hello.addresses.ipv4`).
    #[arg(long)]
    pub a_ip: Option<String>,
    /// B's data-plane MAC (default: its `hello.addresses.mac`).
    #[arg(long)]
    pub b_mac: Option<String>,
    /// B's data-plane IPv4 (default: its `hello.addresses.ipv4`).
    #[arg(long)]
    pub b_ip: Option<String>,
    /// Message sizes in bytes, comma-separated [default: 0,1,PMTU-1,PMTU+1,65536].
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<u64>>,
    /// Path MTU [default: 1024, or the agents' smaller max_pmtu].
    #[arg(long)]
    pub pmtu: Option<u32>,
    /// Connect MP QPs (SPEC §7; both profiles need `mp: true`).
    #[arg(long)]
    pub mp: bool,
    /// Only these operations (comma-separated: send, send_with_imm,
    /// rdma_write, rdma_write_with_imm, rdma_read, cmp_swap_hit,
    /// cmp_swap_miss, fetch_add) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub ops: Vec<String>,
    /// Seed of the PSNs and of every byte written.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long one completion may take, in ms.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub wait_ms: u64,
    /// Seconds of wall-clock time one cell may take (spent: the cell is
    /// ERROR and the run goes on; docs/budgets.md).
    #[arg(long, default_value_t = crate::run::budget::DEFAULT_WALL.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub wall_budget_s: u64,
    /// Write the matrix as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the matrix as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// Runs `metaroce interop`; the exit code: 0 every cell PASS (or
/// UNSUPPORTED), 1 a FAIL, 2 an ERROR (a broken agent reply, or the QP
/// pair could not be set up), 4 an agent unreachable or bad arguments.
pub fn run_cmd(args: &InteropArgs) -> u8 {
    let mut ops = Vec::new();
    for name in &args.ops {
        match Op::ALL.iter().find(|o| o.key() == name) {
            Some(o) => ops.push(*o),
            None => {
                eprintln!("metaroce interop: --ops: unknown operation `{name}`");
                return exit::BAD_INPUT;
            }
        }
    }
    let cfg = Config {
        a: args.a.clone(),
        b: args.b.clone(),
        a_mac: args.a_mac.clone(),
        a_ip: args.a_ip.clone(),
        b_mac: args.b_mac.clone(),
        b_ip: args.b_ip.clone(),
        sizes: args.sizes.clone(),
        pmtu: args.pmtu,
        mp: args.mp,
        seed: args.seed,
        wait_ms: args.wait_ms,
        ops,
        budget: crate::run::budget::Budget {
            wall: std::time::Duration::from_secs(args.wall_budget_s),
            ..Default::default()
        },
    };
    let mut progress = |c: &crate::interop::matrix::Cell| {
        eprintln!(
            "{:<11} {} {}{}",
            c.verdict.name(),
            c.op.label(),
            c.direction.label(),
            c.reason
                .as_deref()
                .map_or(String::new(), |r| format!(": {r}"))
        );
    };
    let matrix = match run(&cfg, &mut progress) {
        Ok(m) => m,
        Err(StartError::BadInput(e)) => {
            eprintln!("metaroce interop: {e}");
            return exit::BAD_INPUT;
        }
        Err(StartError::Setup(e)) => {
            eprintln!("metaroce interop: cannot connect the QP pair: {e}");
            return exit::ERROR;
        }
    };
    print!("{}", matrix.text());
    let mut code = matrix.exit_code();
    let mut write = |path: &PathBuf, text: String| {
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("metaroce interop: {}: {e}", path.display());
            code = code.max(exit::ERROR);
        }
    };
    if let Some(p) = &args.json {
        let text = serde_json::to_string_pretty(&matrix.json()).unwrap_or_default();
        write(p, text + "\n");
    }
    if let Some(p) = &args.markdown {
        write(p, matrix.markdown());
    }
    code
}
