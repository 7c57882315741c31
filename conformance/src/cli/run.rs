//! `metaroce run`: every vector against an IUT, with reports. With no
//! arguments: the `vectors/` folder against the built-in reference transport.

use crate::exit;
use crate::report::{self, Digests};
use crate::run::capability::{Expectations, load_profile};
use crate::run::iut::{Iut, IutSpec, builtin::Builtin, raw::Raw};
use crate::run::verdict::{TestResult, Verdict};
use crate::run::{RunOptions, SuiteResult, planned, run_suite};
use crate::vector::{VectorSet, load_dir};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The implementation under test and how to reach it: the arguments
/// `metaroce run` and `metaroce fuzz` share.
#[derive(Debug, Args)]
pub struct IutArgs {
    /// The implementation under test: `builtin`, `builtin:mutant=NAME`,
    /// `raw:IFACE` (needs --agent), `pcap:IFACE` (feature libpcap).
    #[arg(long, default_value = "builtin")]
    pub iut: IutSpec,
    /// The IUT's agent, `HOST:PORT` (raw and pcap IUTs).
    #[arg(long)]
    pub agent: Option<String>,
    /// The harness's IPv4 address on the link (raw and pcap IUTs); do not
    /// configure it on the interface.
    #[arg(long, default_value = "10.0.0.1")]
    pub ip: core::net::Ipv4Addr,
    /// The harness's MAC on the link (default: the interface's; another puts
    /// the interface in promiscuous mode).
    #[arg(long)]
    pub mac: Option<String>,
}

/// What one test may cost (docs/budgets.md): the arguments `metaroce run`,
/// `zoo` and `fuzz` share. A test that spends its budget is ERROR with the
/// reason and the run goes on (in `fuzz`, a HANG finding).
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// Timer firings plus frames sent a virtual-time IUT (builtin) may spend
    /// on one test.
    #[arg(long, default_value_t = crate::run::budget::DEFAULT_EVENTS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub event_budget: u64,
    /// Seconds of wall-clock time one test (one attempt) may take, every IUT.
    #[arg(long, default_value_t = crate::run::budget::DEFAULT_WALL.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub wall_budget_s: u64,
}

impl BudgetArgs {
    /// The budget these arguments give.
    pub fn budget(&self) -> crate::run::budget::Budget {
        crate::run::budget::Budget {
            events: self.event_budget,
            wall: std::time::Duration::from_secs(self.wall_budget_s),
        }
    }
}

/// Arguments of `metaroce run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The vector set: a folder (searched recursively) or one file
    /// [default: ./vectors, else the repository's vectors/]
    #[arg(long)]
    pub vectors: Option<PathBuf>,
    /// The implementation under test and how to reach it.
    #[command(flatten)]
    pub target: IutArgs,
    /// A capability profile (YAML, SPEC §2 keys) overriding the agent's declaration.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Known failures (YAML list of `{id, reason}`): their FAILs become XFAIL.
    #[arg(long)]
    pub expectations: Option<PathBuf>,
    /// Run only vectors whose id contains this text (repeatable).
    #[arg(long = "filter", short = 'k')]
    pub filters: Vec<String>,
    /// Seed of the harness's QPNs and PSNs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Extra time for every window on a live IUT, in µs (default: measured).
    #[arg(long)]
    pub margin_us: Option<u64>,
    /// On a live IUT, run a test that does not pass up to N more times (a
    /// pass after a failure is reported as FLAKY, with the earlier verdicts).
    #[arg(long, default_value_t = 0)]
    pub retries: usize,
    /// What one test may cost.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the HTML certification report here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write every test's traffic here (pcapng with per-packet comments).
    #[arg(long)]
    pub pcapng: Option<PathBuf>,
    /// Write report.xml, report.json, report.html and traffic.pcapng into this folder.
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// List every test with its verdict, not only those that did not pass.
    #[arg(long, short)]
    pub verbose: bool,
}

/// The vector folder when none is given.
pub fn default_vectors() -> PathBuf {
    let here = PathBuf::from("vectors");
    if here.is_dir() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("vectors")
    }
}

/// Loads a vector set, printing every bad file.
pub fn load_set(root: &Path) -> Result<VectorSet, u8> {
    load_dir(root).map_err(|errors| {
        for e in &errors {
            eprintln!("metaroce: {e}");
        }
        eprintln!("metaroce: {} bad vector file(s)", errors.len());
        exit::BAD_INPUT
    })
}

fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    metaroce_agent::encoding::parse_mac(text)
        .map_err(|_| format!("--mac `{text}` is not a MAC address"))
}

impl IutArgs {
    /// Opens the IUT `--iut` names (the built-in one seeded with `seed`).
    pub fn open(&self, seed: u64) -> Result<Box<dyn Iut>, String> {
        open_iut(
            &self.iut,
            self.agent.as_deref(),
            self.mac.as_deref(),
            self.ip,
            seed,
        )
    }
}

/// Opens the IUT an `--iut` argument names.
fn open_iut(
    spec: &IutSpec,
    agent: Option<&str>,
    mac: Option<&str>,
    ip: core::net::Ipv4Addr,
    seed: u64,
) -> Result<Box<dyn Iut>, String> {
    match spec {
        IutSpec::Builtin { mutant } => Builtin::new(seed, mutant.as_deref())
            .map(|b| Box::new(b) as Box<dyn Iut>)
            .map_err(|e| e.0),
        IutSpec::Raw { iface } => {
            let agent = agent.ok_or("--iut raw:IFACE needs --agent HOST:PORT")?;
            let mac = mac.map(parse_mac).transpose()?;
            Raw::open(iface, agent, mac, ip)
                .map(|r| Box::new(r) as Box<dyn Iut>)
                .map_err(|e| e.0)
        }
        #[cfg(feature = "libpcap")]
        IutSpec::Pcap { iface } => {
            let agent = agent.ok_or("--iut pcap:IFACE needs --agent HOST:PORT")?;
            let mac = mac.map(parse_mac).transpose()?;
            crate::run::iut::pcap::Pcap::open(iface, agent, mac, ip)
                .map(|r| Box::new(r) as Box<dyn Iut>)
                .map_err(|e| e.0)
        }
        #[cfg(not(feature = "libpcap"))]
        IutSpec::Pcap { iface } => Err(format!(
            "pcap:{iface}: this metaroce was built without the `libpcap` feature \
             (cargo build --features libpcap); raw:{iface} reaches the same link"
        )),
    }
}

fn progress_bar(total: usize) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}

/// Runs `metaroce run`.
pub fn run(args: &RunArgs) -> u8 {
    let root = args.vectors.clone().unwrap_or_else(default_vectors);
    let set = match load_set(&root) {
        Ok(set) => set,
        Err(code) => return code,
    };
    let mut options = RunOptions {
        seed: args.seed,
        filters: args.filters.clone(),
        margin_ns: args.margin_us.map(|us| us * 1_000),
        retries: args.retries,
        budget: args.budget.budget(),
        ..RunOptions::default()
    };
    if let Some(p) = &args.profile {
        match load_profile(p) {
            Ok(map) => options.profile_override = map,
            Err(e) => {
                eprintln!("metaroce run: {e}");
                return exit::BAD_INPUT;
            }
        }
    }
    if let Some(p) = &args.expectations {
        match Expectations::load(p) {
            Ok(x) => options.expectations = x,
            Err(e) => {
                eprintln!("metaroce run: {e}");
                return exit::BAD_INPUT;
            }
        }
    }
    if planned(&set, &options) == 0 {
        eprintln!("metaroce run: no vector selected in {}", root.display());
        return exit::BAD_INPUT;
    }
    let mut iut = match args.target.open(args.seed) {
        Ok(iut) => iut,
        Err(e) => {
            eprintln!("metaroce run: {e}");
            return exit::ERROR;
        }
    };
    let bar = progress_bar(planned(&set, &options));
    let mut on_progress = |done: usize, _total: usize, t: &TestResult| {
        if let Some(bar) = &bar {
            bar.set_position(done as u64);
            if t.verdict != Verdict::Pass {
                bar.set_message(format!("{} {}", t.verdict, t.id));
            }
        }
    };
    let result = match run_suite(&set, &root, iut.as_mut(), &options, &mut on_progress) {
        Ok(r) => r,
        Err(e) => {
            if let Some(bar) = &bar {
                bar.abandon();
            }
            eprintln!("metaroce run: {} : {e}", iut.describe());
            return exit::ERROR;
        }
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    print!("{}", report::terminal::summary(&result, args.verbose));
    if let Err(e) = write_reports(args, &set, &root, &result) {
        eprintln!("metaroce run: {e}");
        return exit::ERROR;
    }
    result.exit_code()
}

fn write_reports(
    args: &RunArgs,
    set: &VectorSet,
    root: &Path,
    result: &SuiteResult,
) -> Result<(), String> {
    let dir = args.report_dir.as_ref();
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let pick =
        |given: &Option<PathBuf>, name: &str| given.clone().or_else(|| dir.map(|d| d.join(name)));
    let digests = Digests::compute(set, root, &result.profile);
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
    };
    if let Some(p) = pick(&args.junit, "report.xml") {
        write(&p, report::junit::junit_xml(result)?.as_bytes())?;
    }
    if let Some(p) = pick(&args.json, "report.json") {
        let text = serde_json::to_string_pretty(&report::json::report_json(result, &digests))
            .map_err(|e| e.to_string())?;
        write(&p, text.as_bytes())?;
    }
    if let Some(p) = pick(&args.pcapng, "traffic.pcapng") {
        let file = std::fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        report::pcapng::write_pcapng(result, std::io::BufWriter::new(file))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = pick(&args.html, "report.html") {
        let listed = std::fs::read_to_string(root.join("UNOBSERVABLE.md")).unwrap_or_default();
        let html =
            report::html::report_html(result, &digests, &report::html::unobservable(&listed));
        write(&p, html.as_bytes())?;
        // The report links requirement IDs to spec.html#ID next to it,
        // unless METAROCE_SPEC_URL says where the page is published.
        if crate::spec_site::published_spec().is_none() {
            let spec = p.with_file_name(crate::spec_site::SPEC_FILE);
            let page = crate::spec_site::render_html(
                metaroce_spec::requirements::SPEC_MD,
                metaroce_spec::requirements::all(),
            );
            write(&spec, page.as_bytes())?;
        }
    }
    Ok(())
}
