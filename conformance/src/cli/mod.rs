//! Command-line interface: argument parsing and dispatch.

mod check;
mod decode;
pub mod fuzz;
pub mod interop;
pub mod run;
mod spec;
mod tooling;
mod vectors;
mod zoo;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::sync::LazyLock;

/// MetaRoCE: RoCEv2 and MetaRoCE conformance suite, capture checker and fuzzing harness.
#[derive(Debug, Parser)]
#[command(name = "metaroce", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Decode every frame of a pcap or pcapng capture, like `tshark -V`, or as JSON lines.
    Decode(decode::DecodeArgs),
    /// Check a capture (or a live link) against SPEC.md: every packet and every conversation.
    Check(check::CheckArgs),
    /// Run the conformance suite against an implementation under test (default: the built-in reference transport).
    Run(Box<run::RunArgs>),
    /// The vector format: its JSON Schema, checking files, opcode names.
    #[command(subcommand)]
    Vectors(vectors::VectorsCommand),
    /// Run the suite against every bug-zoo mutant of the reference transport: which vectors catch which mutant.
    Zoo(zoo::ZooArgs),
    /// Fuzz a live IUT with oracles (liveness, memory, completions); `fuzz export` turns a finding into a vector.
    Fuzz(Box<fuzz::FuzzArgs>),
    /// Two implementations, each behind an agent: every RC operation in both directions, data checked.
    Interop(Box<interop::InteropArgs>),
    /// Questions about the specification (SPEC.md).
    #[command(subcommand)]
    Spec(spec::SpecCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(tooling::CompletionsArgs),
    /// Print the man page (roff), or write one page per subcommand into a folder.
    Man(tooling::ManArgs),
}

/// `metaroce --version`: the tool's version and the SPEC.md it judges against.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    use metaroce_spec::requirements;
    format!(
        "{} (judges against SPEC.md, MetaRoCE {}: {} requirements)",
        env!("CARGO_PKG_VERSION"),
        requirements::spec_version(),
        requirements::all().len()
    )
});

/// The command line's definition, with the version naming the SPEC.
pub fn command() -> clap::Command {
    Cli::command().version(VERSION.as_str())
}

/// Parses the process arguments, runs the command, and returns the exit code
/// (see [`crate::exit`]).
pub fn run() -> u8 {
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                crate::exit::BAD_INPUT
            } else {
                crate::exit::OK
            };
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Decode(args) => decode::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Spec(command) => spec::run(&command),
        Command::Run(args) => run::run(&args),
        Command::Vectors(command) => vectors::run(&command),
        Command::Zoo(args) => zoo::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::Interop(args) => interop::run_cmd(&args),
        Command::Completions(args) => tooling::completions(&args),
        Command::Man(args) => tooling::man(&args),
    }
}

/// Reports input that cannot be read (not a capture, truncated, missing) as one
/// line naming the command and file; returns [`crate::exit::BAD_INPUT`].
pub(crate) fn bad_input(
    command: &str,
    file: &std::path::Path,
    error: &dyn std::fmt::Display,
) -> u8 {
    eprintln!("metaroce {command}: {}: {error}", file.display());
    crate::exit::BAD_INPUT
}

/// Handles a failed write to standard output. A closed pipe
/// (`metaroce decode f | head`) ends the output normally; anything else is an
/// error of the tool, not of the input.
pub(crate) fn output_error(command: &str, e: &std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        crate::exit::OK
    } else {
        eprintln!("metaroce {command}: writing output: {e}");
        crate::exit::ERROR
    }
}
