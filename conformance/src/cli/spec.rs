//! `metaroce spec …`: the specification's requirements and their coverage.

use crate::exit;
use crate::trace::{Coverage, find_root, render_markdown, render_text};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// `metaroce spec` subcommands.
#[derive(Debug, Subcommand)]
pub enum SpecCommand {
    /// Requirement × model × reference × tests × vectors, from the workspace's sources.
    Coverage(CoverageArgs),
}

/// Arguments of `metaroce spec coverage`.
#[derive(Debug, Args)]
pub struct CoverageArgs {
    /// Workspace root (default: the first ancestor of the current directory holding spec-model/SPEC.md).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Also list every requirement (text format).
    #[arg(long)]
    pub all: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CoverageFormat::Text)]
    pub format: CoverageFormat,
    /// Exit with 1 when a MUST lacks a model or test citation without an exception or gap entry.
    #[arg(long)]
    pub check: bool,
}

/// Output formats of `spec coverage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CoverageFormat {
    /// Summary by area (and with --all, one line per requirement).
    Text,
    /// One Markdown table row per requirement.
    Markdown,
}

/// Runs a `spec` subcommand; returns the exit code.
pub fn run(command: &SpecCommand) -> u8 {
    match command {
        SpecCommand::Coverage(args) => coverage(args),
    }
}

fn coverage(args: &CoverageArgs) -> u8 {
    let root = match &args.root {
        Some(root) => root.clone(),
        None => {
            let cwd = std::env::current_dir().unwrap_or_default();
            match find_root(&cwd) {
                Some(root) => root.to_path_buf(),
                None => {
                    eprintln!(
                        "metaroce spec coverage: no spec-model/SPEC.md above {}: run it inside the workspace or pass --root",
                        cwd.display()
                    );
                    return exit::BAD_INPUT;
                }
            }
        }
    };
    let cov = match Coverage::of_workspace(&root) {
        Ok(cov) => cov,
        Err(e) => {
            eprintln!("metaroce spec coverage: {e}");
            return exit::BAD_INPUT;
        }
    };
    match args.format {
        CoverageFormat::Text => print!("{}", render_text(&cov, args.all)),
        CoverageFormat::Markdown => print!("{}", render_markdown(&cov)),
    }
    if args.check && !cov.violations().is_empty() {
        exit::FAIL
    } else {
        exit::OK
    }
}
