//! `metaroce zoo`: the suite against every bug-zoo mutant of the reference
//! transport (reference-impl/ZOO.md): which vectors catch which mutant.
//! The suite proves it can fail: every mutant must FAIL some vector, and
//! the unmutated transport must PASS them all. The catch table is
//! [`crate::run::zoo`]; this module parses the arguments and prints it.

use super::run::{BudgetArgs, default_vectors, load_set};
use crate::exit;
use crate::run::zoo::{all_caught, catch_table, render};
use clap::Args;
use metaroce_ref::zoo::Mutant;
use std::path::PathBuf;

/// Arguments of `metaroce zoo`.
#[derive(Debug, Args)]
pub struct ZooArgs {
    /// List the mutants and stop.
    #[arg(long)]
    pub list: bool,
    /// Only this mutant (repeatable).
    #[arg(long = "mutant", short = 'm')]
    pub mutants: Vec<String>,
    /// The vector set [default: ./vectors, else the repository's vectors/].
    #[arg(long)]
    pub vectors: Option<PathBuf>,
    /// Run only vectors whose id contains this text (repeatable).
    #[arg(long = "filter", short = 'k')]
    pub filters: Vec<String>,
    /// Print the catch table as Markdown.
    #[arg(long)]
    pub markdown: bool,
    /// What one test may cost.
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// Runs `metaroce zoo`.
pub fn run(args: &ZooArgs) -> u8 {
    let mut mutants = Vec::new();
    for name in &args.mutants {
        match name.parse::<Mutant>() {
            Ok(m) => mutants.push(m),
            Err(e) => {
                eprintln!("metaroce zoo: {e}");
                return exit::BAD_INPUT;
            }
        }
    }
    if mutants.is_empty() {
        mutants = Mutant::ALL.to_vec();
    }
    if args.list {
        for m in &mutants {
            println!(
                "{:<28} {:<4} {:<9} {}  [{}]",
                m.name(),
                format!("{:?}", m.profile()).to_lowercase(),
                format!("{:?}", m.role()).to_lowercase(),
                m.description(),
                m.requirements().join(" ")
            );
        }
        return exit::OK;
    }
    let root = args.vectors.clone().unwrap_or_else(default_vectors);
    let set = match load_set(&root) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (clean, rows) =
        match catch_table(&set, &root, &mutants, &args.filters, args.budget.budget()) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("metaroce zoo: {e}");
                return exit::ERROR;
            }
        };
    print!("{}", render(&clean, &rows, args.markdown));
    if all_caught(&clean, &rows) {
        exit::OK
    } else {
        exit::FAIL
    }
}
