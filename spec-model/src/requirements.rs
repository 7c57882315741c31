//! The requirements of `SPEC.md`, read from the document itself.
//!
//! SPEC.md is compiled into the crate; each normative item is a list item of
//! the form `- **MR-<AREA>-<n>** (<KEYWORD>; <observation>) <text>`. The
//! registry is parsed once, on first use. A unit test checks that every line
//! that starts like a requirement parses, so a malformed item fails the build's
//! tests rather than vanishing from the registry.
// traceability: ignore-file (IDs in this file are data, not citations)

use core::fmt;
use std::sync::LazyLock;

/// The normative text.
pub const SPEC_MD: &str = include_str!("../SPEC.md");

/// The RFC 2119 keyword of a requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Keyword {
    /// MUST.
    Must,
    /// MUST NOT.
    MustNot,
    /// SHOULD.
    Should,
    /// SHOULD NOT.
    ShouldNot,
    /// MAY.
    May,
}

impl Keyword {
    /// The keyword as SPEC.md writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Keyword::Must => "MUST",
            Keyword::MustNot => "MUST NOT",
            Keyword::Should => "SHOULD",
            Keyword::ShouldNot => "SHOULD NOT",
            Keyword::May => "MAY",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "MUST" => Keyword::Must,
            "MUST NOT" => Keyword::MustNot,
            "SHOULD" => Keyword::Should,
            "SHOULD NOT" => Keyword::ShouldNot,
            "MAY" => Keyword::May,
            _ => return None,
        })
    }

    /// How a violation of a requirement with this keyword is judged.
    pub const fn severity(self) -> Severity {
        match self {
            Keyword::Must | Keyword::MustNot => Severity::Must,
            Keyword::Should | Keyword::ShouldNot => Severity::Should,
            Keyword::May => Severity::Info,
        }
    }
}

impl fmt::Display for Keyword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much a finding weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// A MUST or MUST NOT was broken: the implementation fails.
    Must,
    /// A SHOULD or SHOULD NOT was not met: an allowed alternative.
    Should,
    /// Informational (a MAY, or an observation).
    Info,
}

impl Severity {
    /// Lower-case name for reports (`"must"`, `"should"`, `"info"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Must => "must",
            Severity::Should => "should",
            Severity::Info => "info",
        }
    }
}

/// Where a requirement can be observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Observation {
    /// On the wire (captures, the harness's data plane).
    Wire,
    /// Through the agent (control plane: completions, memory).
    Agent,
    /// Both are needed.
    WireAndAgent,
    /// Not observable; the text says why.
    None,
}

impl Observation {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "wire" => Observation::Wire,
            "agent" => Observation::Agent,
            "wire+agent" => Observation::WireAndAgent,
            "none" => Observation::None,
            _ => return None,
        })
    }

    /// As SPEC.md writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Observation::Wire => "wire",
            Observation::Agent => "agent",
            Observation::WireAndAgent => "wire+agent",
            Observation::None => "none",
        }
    }
}

/// One normative statement of SPEC.md.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// Stable identifier, e.g. `MR-BTH-3`.
    pub id: &'static str,
    /// Area, e.g. `BTH`.
    pub area: &'static str,
    /// Number within the area.
    pub number: u32,
    /// RFC 2119 keyword.
    pub keyword: Keyword,
    /// Where it is observed.
    pub observation: Observation,
    /// The statement, without ID, keyword, observation and source.
    pub text: &'static str,
    /// Where it comes from (SPEC.md §1.2): the item's own `[…]`, or else the
    /// `Source: …` line of its section; empty when neither is given.
    pub source: &'static str,
    /// 1-based line in SPEC.md.
    pub line: usize,
}

/// Why a line that looks like a requirement does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecFormatError {
    /// 1-based line in SPEC.md.
    pub line: usize,
    /// What is wrong.
    pub reason: &'static str,
}

const ITEM_PREFIX: &str = "- **MR-";

/// Parses one requirement line.
fn parse_line(line: &'static str, line_number: usize) -> Result<Requirement, SpecFormatError> {
    let err = |reason| SpecFormatError {
        line: line_number,
        reason,
    };
    let rest = line.strip_prefix("- **").ok_or(err("no `- **` prefix"))?;
    let (id, rest) = rest
        .split_once("** (")
        .ok_or(err("no `** (` after the ID"))?;
    let mut parts = id.splitn(3, '-');
    let (Some("MR"), Some(area), Some(n)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(err("ID is not MR-<AREA>-<n>"));
    };
    if area.is_empty() || !area.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(err("area is not upper-case letters"));
    }
    let number: u32 = n
        .parse()
        .map_err(|_| err("requirement number is not a number"))?;
    let (meta, text) = rest
        .split_once(") ")
        .ok_or(err("no `) ` after keyword and observation"))?;
    let (keyword, observation) = meta
        .split_once("; ")
        .ok_or(err("no `; ` between keyword and observation"))?;
    let keyword = Keyword::parse(keyword).ok_or(err("unknown keyword"))?;
    let observation = Observation::parse(observation).ok_or(err("unknown observation"))?;
    let text = text.trim();
    let (text, source) = match text.strip_suffix(']').and_then(|t| t.rsplit_once(" [")) {
        Some((t, src)) => (t.trim_end(), src),
        None => (text, ""),
    };
    Ok(Requirement {
        id,
        area,
        number,
        keyword,
        observation,
        text,
        source,
        line: line_number,
    })
}

/// The section default of a `Source: …` line (one line in SPEC.md): its text
/// without the trailing ", unless a requirement names another." and
/// the final period.
fn section_source(line: &'static str) -> &'static str {
    let text = line.strip_prefix("Source: ").unwrap_or_default().trim_end();
    let text = text.split(", unless").next().unwrap_or(text);
    text.trim_end_matches('.')
}

/// Parses every requirement of `text`; the first malformed item is an error.
///
/// A `Source: …` line gives the default source of the requirements that
/// follow it up to the next heading of its own level or higher (a line under
/// `## 3.` covers all of §3; one under `### 6.10` only §6.10).
pub fn parse_spec(text: &'static str) -> Result<Vec<Requirement>, SpecFormatError> {
    let mut out = Vec::new();
    let mut level = 0usize; // heading level of the current section
    let mut default: Option<(usize, &'static str)> = None; // (level, source)
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            level = line.bytes().take_while(|&b| b == b'#').count();
            if default.is_some_and(|(l, _)| level <= l) {
                default = None;
            }
        } else if line.starts_with("Source: ") {
            default = Some((level, section_source(line)));
        } else if line.starts_with(ITEM_PREFIX) {
            let mut r = parse_line(line, i + 1)?;
            if r.source.is_empty()
                && let Some((_, src)) = default
            {
                r.source = src;
            }
            out.push(r);
        }
    }
    Ok(out)
}

static REGISTRY: LazyLock<Vec<Requirement>> =
    LazyLock::new(|| parse_spec(SPEC_MD).unwrap_or_default());

/// Every requirement of SPEC.md, in document order.
pub fn all() -> &'static [Requirement] {
    &REGISTRY
}

/// SPEC.md's title, from its first line (`MetaRoCE v1 — Normative Specification`).
pub fn spec_title() -> &'static str {
    SPEC_MD
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .unwrap_or("MetaRoCE")
        .trim()
}

/// The version SPEC.md's title names (`v1`): the first word of the title
/// that is `v` followed by a digit; `unversioned` when none is.
pub fn spec_version() -> &'static str {
    spec_title()
        .split_whitespace()
        .find(|w| {
            w.strip_prefix('v')
                .is_some_and(|d| d.starts_with(|c: char| c.is_ascii_digit()))
        })
        .unwrap_or("unversioned")
}

/// The requirement with this ID.
pub fn get(id: &str) -> Option<&'static Requirement> {
    REGISTRY.iter().find(|r| r.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    #[test]
    fn every_requirement_line_parses() {
        let reqs = parse_spec(SPEC_MD).expect("SPEC.md requirement items are well formed");
        assert_eq!(reqs.len(), all().len());
        assert!(reqs.len() >= 150, "only {} requirements", reqs.len());
    }

    #[test]
    fn ids_are_unique_and_numbered_from_one_without_gaps() {
        let mut seen = HashSet::new();
        let mut by_area: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for r in all() {
            assert!(seen.insert(r.id), "{} twice", r.id);
            by_area.entry(r.area).or_default().push(r.number);
        }
        for (area, mut numbers) in by_area {
            numbers.sort_unstable();
            let expected: Vec<u32> = (1..=numbers.len() as u32).collect();
            assert_eq!(numbers, expected, "area {area}");
        }
    }

    #[test]
    fn each_statement_uses_exactly_its_own_keyword() {
        for r in all() {
            let words = ["MUST NOT", "MUST", "SHOULD NOT", "SHOULD", "MAY"];
            let mut rest = r.text.to_string();
            let mut found = Vec::new();
            for w in words {
                while let Some(at) = rest.find(w) {
                    found.push(w);
                    rest.replace_range(at..at + w.len(), "");
                }
            }
            assert_eq!(
                found,
                vec![r.keyword.as_str()],
                "{} (line {})",
                r.id,
                r.line
            );
        }
    }

    #[test]
    fn sources_own_and_section_default() {
        // SPEC.md §1.2 and §1.5: every requirement names its source, its
        // own or its section's.
        for r in all() {
            assert!(!r.source.is_empty(), "{} has no source", r.id);
            assert!(!r.text.ends_with(']'), "{}: source left in the text", r.id);
        }
        assert_eq!(get("MR-BTH-5").map(|r| r.source), Some("IBA 10.9"));
        assert_eq!(
            get("MR-ENC-21").map(|r| r.source),
            Some("RFC 3168"),
            "own source"
        );
        let text = "## 3. A\n\nSource: A17, unless a requirement names another.\n\n### 3.1 B\n\n- **MR-X-1** (MUST; wire) a MUST b.\n- **MR-X-2** (MUST; wire) c MUST d. [RFC 768]\n## 4. C\n- **MR-X-3** (MUST; wire) e MUST f.\n";
        let reqs = parse_spec(text).expect("parses");
        let got: Vec<(&str, &str)> = reqs.iter().map(|r| (r.text, r.source)).collect();
        assert_eq!(
            got,
            vec![
                ("a MUST b.", "A17"),
                ("c MUST d.", "RFC 768"),
                ("e MUST f.", "")
            ]
        );
    }

    #[test]
    fn the_title_names_the_version() {
        assert!(spec_title().starts_with("MetaRoCE"), "{}", spec_title());
        assert!(spec_title().contains(spec_version()));
        assert!(spec_version().starts_with('v') && spec_version().len() >= 2);
    }

    #[test]
    fn lookup_and_a_malformed_item_is_reported_with_its_line() {
        assert_eq!(get("MR-QP-1").map(|r| r.keyword), Some(Keyword::Must));
        assert!(get("MR-NOPE-1").is_none());
        let bad = "intro\n- **MR-BTH-1** (MUSTN'T; wire) nope\n";
        assert_eq!(
            parse_spec(bad),
            Err(SpecFormatError {
                line: 2,
                reason: "unknown keyword"
            })
        );
    }
}
