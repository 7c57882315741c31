//! Vectors (vectors/README.md): the YAML format, its loader and its JSON Schema.
//!
//! - [`model`]: the typed vector (one conversation test against an IUT);
//! - [`codec_vector`]: static codec vectors (bytes ↔ fields ↔ verdict);
//! - [`load`]: reading files with budgets and precise errors;
//! - [`expr`]: symbolic values (`${psn + 1}`);
//! - [`opcodes`], [`hex`]: names and bytes in vectors;
//! - [`schema`], which generates `vectors/schema.json`.
//!
//! The format is documented for authors in `vectors/README.md`.

pub mod codec_vector;
pub mod expr;
pub mod hex;
pub mod load;
pub mod model;
pub mod opcodes;
pub mod schema;

pub use codec_vector::CodecVector;
pub use load::{LoadError, Loaded, VectorSet, load_dir};
pub use model::{Profile, Role, Step, Vector};
