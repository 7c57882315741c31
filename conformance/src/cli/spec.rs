//! `metaroce spec …`: the specification's requirements and their coverage.

use crate::exit;
use crate::spec_site;
use crate::trace::{Coverage, find_root, render_markdown, render_text};
use clap::{Args, Subcommand, ValueEnum};
use metaroce_spec::requirements;
use std::path::PathBuf;

/// `metaroce spec` subcommands.
#[derive(Debug, Subcommand)]
pub enum SpecCommand {
    /// Requirement × model × reference × tests × vectors, from the workspace's sources.
    Coverage(CoverageArgs),
    /// Print one requirement: ID, keyword, observation, section and text.
    Show(ShowArgs),
    /// Render SPEC.md as a web page: OUT_DIR/spec.html, with a table of contents,
    /// an anchor per requirement (spec.html#MR-BTH-2) and a requirement index.
    Html(HtmlArgs),
}

/// Arguments of `metaroce spec show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The requirement's ID, e.g. MR-BTH-2 (case and the MR- prefix optional).
    pub id: String,
}

/// Arguments of `metaroce spec html`.
#[derive(Debug, Args)]
pub struct HtmlArgs {
    /// The folder to write spec.html into (created if missing).
    pub out_dir: PathBuf,
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
        SpecCommand::Show(args) => show(args),
        SpecCommand::Html(args) => html(args),
    }
}

fn show(args: &ShowArgs) -> u8 {
    let reqs = requirements::all();
    let mut id = args.id.trim().to_ascii_uppercase();
    if !id.starts_with("MR-") {
        id.insert_str(0, "MR-");
    }
    let Some(r) = requirements::get(&id) else {
        let close = spec_site::close_matches(&id, reqs);
        let hint = if close.is_empty() {
            "IDs look like MR-BTH-2; `metaroce spec coverage --all` lists them".to_owned()
        } else {
            format!("did you mean {}?", close.join(", "))
        };
        eprintln!(
            "metaroce spec show: no requirement {id} in SPEC.md (MetaRoCE {}, {} requirements); {hint}",
            requirements::spec_version(),
            reqs.len()
        );
        return exit::BAD_INPUT;
    };
    let section = spec_site::section_of(requirements::SPEC_MD, r.line).unwrap_or("");
    println!(
        "{} ({}; {})  SPEC.md line {}, §{section}",
        r.id,
        r.keyword.as_str(),
        r.observation.as_str(),
        r.line
    );
    println!();
    println!("{}", r.text);
    println!();
    println!("Source: {}", r.source);
    println!("{}", spec_site::spec_url(r.id));
    exit::OK
}

fn html(args: &HtmlArgs) -> u8 {
    let page = spec_site::render_html(requirements::SPEC_MD, requirements::all());
    let path = args.out_dir.join(spec_site::SPEC_FILE);
    match std::fs::create_dir_all(&args.out_dir).and_then(|()| std::fs::write(&path, page)) {
        Ok(()) => {
            println!("{}", path.display());
            exit::OK
        }
        Err(e) => {
            eprintln!("metaroce spec html: {}: {e}", path.display());
            exit::ERROR
        }
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
