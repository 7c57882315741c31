//! `metaroce completions SHELL` and `metaroce man`: the command line's shell
//! completions (clap_complete) and man pages (clap_mangen), generated from
//! the same definition the parser uses, so they cannot fall behind it.

use super::command;
use crate::exit;
use clap::Args;
use clap_complete::Shell;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `metaroce completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell (bash, zsh, fish, elvish, powershell).
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of `metaroce man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `metaroce.1` and one page per subcommand (`metaroce-check.1`, ...)
    /// into this folder instead of printing `metaroce.1`.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Prints the completion script; returns the exit code.
pub fn completions(args: &CompletionsArgs) -> u8 {
    let mut cmd = command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "metaroce", &mut out);
    print_bytes("completions", &out)
}

/// Prints or writes the man pages; returns the exit code.
pub fn man(args: &ManArgs) -> u8 {
    let cmd = command();
    if let Some(dir) = &args.out_dir {
        if let Err(e) =
            std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir))
        {
            eprintln!("metaroce man: {}: {e}", dir.display());
            return exit::ERROR;
        }
        return exit::OK;
    }
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
        eprintln!("metaroce man: {e}");
        return exit::ERROR;
    }
    print_bytes("man", &out)
}

fn print_bytes(command: &str, bytes: &[u8]) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => exit::OK,
        Err(e) => super::output_error(command, &e),
    }
}
