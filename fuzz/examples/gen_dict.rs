//! Writes the libFuzzer dictionaries generated from the codec's tables.
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example gen-dict [-- --out DIR]
//! ```
//!
//! `DIR` defaults to the crate's `dict/`. `codec/tests/fuzz_dict.rs` fails
//! when the committed files differ from what this writes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut out = Path::new(env!("CARGO_MANIFEST_DIR")).join("dict");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => match args.next() {
                Some(dir) => out = PathBuf::from(dir),
                None => {
                    eprintln!("gen-dict: --out needs a directory");
                    return ExitCode::FAILURE;
                }
            },
            _ => {
                eprintln!("usage: gen-dict [--out DIR]");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("gen-dict: cannot create {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    for (name, text) in metaroce_fuzz::dict::all() {
        let path = out.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("gen-dict: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("gen-dict: wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
