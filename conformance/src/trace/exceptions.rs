//! `spec-model/TRACEABILITY.md`: the requirements that deliberately have no
//! model or no test citation, and the gaps.
//!
//! Entries are the rows of Markdown tables whose first cell is a requirement
//! ID: `| MR-SEC-1 | model | reason |`. The second cell is `model` (cannot be
//! modelled), `test` (cannot be tested) or `gap` (not done yet); the third is
//! the reason, which must not be empty.
// traceability: ignore-file (IDs in the tests below are data, not citations)

/// What an entry excuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExceptionKind {
    /// No model citation is needed.
    NoModel,
    /// No test citation is needed.
    NoTest,
    /// Not done yet: shown as GAP.
    Gap,
}

impl ExceptionKind {
    /// As written in the file.
    pub const fn as_str(self) -> &'static str {
        match self {
            ExceptionKind::NoModel => "model",
            ExceptionKind::NoTest => "test",
            ExceptionKind::Gap => "gap",
        }
    }
}

/// One entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exception {
    /// Requirement ID.
    pub id: String,
    /// What it excuses.
    pub kind: ExceptionKind,
    /// Why.
    pub reason: String,
    /// 1-based line in the file.
    pub line: usize,
}

/// Parses the file; a malformed entry is an error naming its line.
pub fn parse_exceptions(text: &str) -> Result<Vec<Exception>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let Some(first) = cells.first() else { continue };
        let id = first.trim_matches('`');
        if !line.trim_start().starts_with('|') || !id.starts_with("MR-") {
            continue;
        }
        let at = i + 1;
        if cells.len() != 3 {
            return Err(format!("line {at}: expected | ID | kind | reason |"));
        }
        let kind = match cells[1].trim_matches('`') {
            "model" => ExceptionKind::NoModel,
            "test" => ExceptionKind::NoTest,
            "gap" => ExceptionKind::Gap,
            other => {
                return Err(format!(
                    "line {at}: kind `{other}` is not model, test or gap"
                ));
            }
        };
        if cells[2].is_empty() {
            return Err(format!("line {at}: {id} has no reason"));
        }
        out.push(Exception {
            id: id.to_string(),
            kind,
            reason: cells[2].to_string(),
            line: at,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_and_rejects_bad_ones() {
        let text = "# T\n| ID | kind | reason |\n|---|---|---|\n| MR-SEC-1 | model | RNG quality |\n| `MR-QP-2` | gap | not yet |\n";
        let e = parse_exceptions(text).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].id.as_str(), e[0].kind, e[0].line),
            ("MR-SEC-1", ExceptionKind::NoModel, 4)
        );
        assert_eq!(e[1].id, "MR-QP-2");
        assert!(
            parse_exceptions("| MR-A-1 | maybe | x |")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(
            parse_exceptions("| MR-A-1 | gap |  |")
                .unwrap_err()
                .contains("no reason")
        );
    }
}
