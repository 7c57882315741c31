//! Finds requirement citations (`MR-<AREA>-<n>`) in the workspace's files.
//!
//! Where a citation stands decides what it counts as:
//!
//! | place | counts as |
//! | --- | --- |
//! | `spec-model/src/**/*.rs`, before the file's first `#[cfg(test)]` | model |
//! | `reference-impl/src/**/*.rs`, before the first `#[cfg(test)]` | reference |
//! | any crate's `tests/**/*.rs`; `src/**/*.rs` from the first `#[cfg(test)]` on; `src/**/tests/**/*.rs` and `src/**/tests.rs` whole | test |
//! | `vectors/**/*.yaml` | vector |
//!
//! The crates are `codec`, `spec-model`, `reference-impl` and `conformance`.
//! By convention a source file keeps its unit tests at its end, after
//! `#[cfg(test)]`. A file whose text contains the marker
//! `traceability: ignore-file` is not scanned: the requirement registry and
//! this scanner use IDs as data in their own tests, which would otherwise
//! count as (false) test citations.
// traceability: ignore-file

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// What a citation counts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// The executable model implements the requirement.
    Model,
    /// The reference transport implements it.
    Reference,
    /// A test checks it.
    Test,
    /// A conformance vector checks it.
    Vector,
}

/// Where one requirement is cited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Citations {
    /// Files citing it, per place (a file counts once per place).
    pub files: BTreeMap<Place, Vec<PathBuf>>,
}

impl Citations {
    /// Number of files citing it in `place`.
    pub fn count(&self, place: Place) -> usize {
        self.files.get(&place).map_or(0, Vec::len)
    }
}

/// Every citation found, by requirement ID (cited IDs that SPEC.md lacks included).
pub type CitationMap = BTreeMap<String, Citations>;

const CRATES: [&str; 4] = ["codec", "spec-model", "reference-impl", "conformance"];

/// Scans the workspace at `root`.
pub fn scan(root: &Path) -> io::Result<CitationMap> {
    let mut map = CitationMap::new();
    for krate in CRATES {
        let src_place = match krate {
            "spec-model" => Some(Place::Model),
            "reference-impl" => Some(Place::Reference),
            _ => None,
        };
        for file in files_with_extension(&root.join(krate).join("src"), &["rs"])? {
            let text = std::fs::read_to_string(&file)?;
            let (code, tests) = if is_test_module(&file) {
                ("", text.as_str())
            } else {
                split_at_tests(&text)
            };
            if let Some(place) = src_place {
                record(&mut map, code, place, &file, root);
            }
            record(&mut map, tests, Place::Test, &file, root);
        }
        for file in files_with_extension(&root.join(krate).join("tests"), &["rs"])? {
            let text = std::fs::read_to_string(&file)?;
            record(&mut map, &text, Place::Test, &file, root);
        }
    }
    for file in files_with_extension(&root.join("vectors"), &["yaml", "yml"])? {
        let text = std::fs::read_to_string(&file)?;
        record(&mut map, &text, Place::Vector, &file, root);
    }
    Ok(map)
}

/// A source file that is a test module: under a `tests` folder, or named `tests.rs`.
fn is_test_module(file: &Path) -> bool {
    file.file_stem().is_some_and(|s| s == "tests")
        || file
            .parent()
            .is_some_and(|d| d.components().any(|c| c.as_os_str() == "tests"))
}

/// Splits a source file into the part before its inline test module (the
/// first `#[cfg(test)]` followed by `mod NAME {`) and the rest. A
/// `#[cfg(test)] mod NAME;` declaration does not split the file: the module's
/// own file is under `tests` and counted as test code by its path, and the
/// code after the declaration is still model code.
fn split_at_tests(text: &str) -> (&str, &str) {
    let mut from = 0;
    while let Some(found) = text[from..].find("#[cfg(test)]") {
        let at = from + found;
        let after = text[at + "#[cfg(test)]".len()..].trim_start();
        let is_inline_module = after
            .strip_prefix("mod ")
            .or_else(|| after.strip_prefix("pub mod "))
            .or_else(|| after.strip_prefix("pub(crate) mod "))
            .and_then(|rest| rest.find(['{', ';']).map(|i| rest.as_bytes()[i] == b'{'))
            .unwrap_or(true);
        if is_inline_module {
            return text.split_at(at);
        }
        from = at + "#[cfg(test)]".len();
    }
    (text, "")
}

/// Marks a file whose IDs are data, not citations.
const IGNORE_MARKER: &str = "traceability: ignore-file";

fn record(map: &mut CitationMap, text: &str, place: Place, file: &Path, root: &Path) {
    if std::fs::read_to_string(file).is_ok_and(|t| t.contains(IGNORE_MARKER)) {
        return;
    }
    let rel = file.strip_prefix(root).unwrap_or(file).to_path_buf();
    for id in citations_in(text) {
        let files = map.entry(id).or_default().files.entry(place).or_default();
        if !files.contains(&rel) {
            files.push(rel.clone());
        }
    }
}

/// Every `MR-<AREA>-<n>` in `text` (AREA upper-case letters, n digits).
pub fn citations_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].find("MR-") {
        let start = i + found;
        i = start + 3;
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let area_end = i + bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_uppercase())
            .count();
        if area_end == i || bytes.get(area_end) != Some(&b'-') {
            continue;
        }
        let num_start = area_end + 1;
        let num_end = num_start
            + bytes[num_start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        if num_end == num_start
            || bytes
                .get(num_end)
                .is_some_and(|b| b.is_ascii_alphanumeric())
        {
            continue;
        }
        out.push(text[start..num_end].to_string());
        i = num_end;
    }
    out
}

/// Files under `dir` (recursively, sorted) whose extension is one of `exts`.
/// A missing directory has no files.
fn files_with_extension(dir: &Path, exts: &[&str]) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| exts.contains(&e))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_well_formed_ids_only() {
        let text = "MR-BTH-3, (MR-QP-12) xMR-QP-1 MR-qp-1 MR-QP- MR-QP-1a \"MR-MPA-7\"";
        assert_eq!(citations_in(text), vec!["MR-BTH-3", "MR-QP-12", "MR-MPA-7"]);
    }

    #[test]
    fn test_module_files_count_as_tests() {
        assert!(is_test_module(Path::new(
            "spec-model/src/model/responder/tests/dup.rs"
        )));
        assert!(is_test_module(Path::new("spec-model/src/model/tests.rs")));
        assert!(!is_test_module(Path::new(
            "spec-model/src/model/responder/dup.rs"
        )));
    }

    #[test]
    fn a_test_module_declaration_does_not_split_the_file() {
        let (code, tests) =
            split_at_tests("a\n#[cfg(test)]\nmod tests;\nb MR-A-1\n#[cfg(test)]\nmod t { MR-B-2 }");
        assert_eq!(citations_in(code), vec!["MR-A-1"]);
        assert_eq!(citations_in(tests), vec!["MR-B-2"]);
    }

    #[test]
    fn unit_tests_after_cfg_test_count_as_tests() {
        let (code, tests) = split_at_tests("a MR-A-1\n#[cfg(test)]\nmod t { MR-B-2 }");
        assert_eq!(citations_in(code), vec!["MR-A-1"]);
        assert_eq!(citations_in(tests), vec!["MR-B-2"]);
    }
}
