//! `metaroce vectors …`: the vector format's schema, and checking files.

use super::run::{default_vectors, load_set};
use crate::exit;
use crate::vector::schema::schema_json;
use clap::Subcommand;
use std::path::PathBuf;

/// `metaroce vectors` subcommands.
#[derive(Debug, Subcommand)]
pub enum VectorsCommand {
    /// Print the JSON Schema of vector files (committed as vectors/schema.json).
    Schema,
    /// Load every vector and report bad files (exit 4) without running anything.
    Check {
        /// A folder or file [default: ./vectors, else the repository's vectors/].
        path: Option<PathBuf>,
    },
    /// Print every opcode name a vector may use.
    Opcodes,
    /// Print the JSON Schema of `metaroce run --json` reports (committed as conformance/report-schema.json).
    ReportSchema,
}

/// Runs a `vectors` subcommand.
pub fn run(command: &VectorsCommand) -> u8 {
    match command {
        VectorsCommand::Schema => {
            print!("{}", schema_json());
            exit::OK
        }
        VectorsCommand::Check { path } => {
            let root = path.clone().unwrap_or_else(default_vectors);
            match load_set(&root) {
                Ok(set) => {
                    println!(
                        "{}: {} test vectors, {} codec vectors, all valid",
                        root.display(),
                        set.tests.len(),
                        set.codec.len()
                    );
                    exit::OK
                }
                Err(code) => code,
            }
        }
        VectorsCommand::ReportSchema => {
            print!("{}", crate::report::json::schema_json());
            exit::OK
        }
        VectorsCommand::Opcodes => {
            for (name, op) in metaroce_codec::Opcode::CONSTANTS {
                println!("{:#04x}  {name:<24} {}", op.0, op.name().unwrap_or(""));
            }
            exit::OK
        }
    }
}
