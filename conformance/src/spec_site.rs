//! SPEC.md as a web page (`metaroce spec html OUT_DIR`) and on the terminal
//! (`metaroce spec show ID`), and where reports point a requirement ID.
//!
//! The page is one self-contained file, `spec.html` (inline CSS, no
//! scripts): a table of contents, SPEC.md rendered by pulldown-cmark, an
//! anchor per requirement (`spec.html#MR-BTH-2`) on the item that states it,
//! a link wherever a requirement ID appears in the text (tables and code
//! spans included), and a requirement index by area. Reports link IDs to
//! [`spec_url`]: `spec.html#ID` next to them by default, or
//! `$METAROCE_SPEC_URL#ID` (e.g. the page published by CI).

// traceability: ignore-file (IDs here are examples and misspellings for the
// renderer and `spec show`, not citations)

use metaroce_spec::requirements::{self, Requirement};
use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd, TextMergeStream};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

/// The environment variable that overrides where reports link requirement IDs.
pub const SPEC_URL_ENV: &str = "METAROCE_SPEC_URL";

/// The file `metaroce spec html` writes, and reports link to by default.
pub const SPEC_FILE: &str = "spec.html";

/// Where a report links requirement `id`: `$METAROCE_SPEC_URL#id`, or
/// `spec.html#id` (a page rendered next to the report).
pub fn spec_url(id: &str) -> String {
    let base = published_spec().unwrap_or_else(|| SPEC_FILE.to_owned());
    format!("{base}#{id}")
}

/// Where the SPEC page is published, when `$METAROCE_SPEC_URL` says so.
pub fn published_spec() -> Option<String> {
    std::env::var(SPEC_URL_ENV).ok().filter(|b| !b.is_empty())
}

/// A heading of SPEC.md.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `#`, 2 for `##`, ...
    pub level: u8,
    /// Its text.
    pub text: String,
    /// Its anchor in the page.
    pub anchor: String,
}

/// `7.2 MP opcodes and headers` → `7-2-mp-opcodes-and-headers`.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("section");
    }
    out
}

/// Splits `text` at the requirement IDs of `known` it contains:
/// `(before, Some(id))` pieces, the last one `(rest, None)`.
fn split_ids<'t>(text: &'t str, known: &HashSet<&str>) -> Vec<(&'t str, Option<&'t str>)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find("MR-") {
        let at = search + found;
        let bytes = text.as_bytes();
        let mut end = at + 3;
        while end < bytes.len() && bytes[end].is_ascii_uppercase() {
            end += 1;
        }
        let mut id_end = end;
        if end > at + 3 && end < bytes.len() && bytes[end] == b'-' {
            id_end = end + 1;
            while id_end < bytes.len() && bytes[id_end].is_ascii_digit() {
                id_end += 1;
            }
        }
        let candidate = &text[at..id_end];
        if known.contains(candidate) {
            out.push((&text[start..at], Some(candidate)));
            start = id_end;
        }
        search = id_end.max(at + 3);
    }
    out.push((&text[start..], None));
    out
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#222}\
.wrap{display:grid;grid-template-columns:minmax(14em,20em) minmax(0,1fr);gap:2em;max-width:90em;margin:auto}\
nav{position:sticky;top:0;max-height:100vh;overflow:auto;padding:1em;font-size:13px;border-right:1px solid #ddd}\
nav ul{padding-left:1.1em;margin:.2em 0}main{padding:1em 2em 4em 0;min-width:0}\
table{border-collapse:collapse;margin:1em 0;display:block;overflow-x:auto}td,th{border:1px solid #ccc;padding:2px 8px;vertical-align:top}\
th{background:#f3f3f3}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}code{font-size:13px}\
strong.req{scroll-margin-top:1em}:target{background:#fff3b0}a.ref{white-space:nowrap}\
.kw{font-size:12px;color:#555}@media(max-width:900px){.wrap{display:block}nav{position:static;max-height:none;border:0}}";

/// The whole page for `markdown` (SPEC.md) and its requirements.
pub fn render_html(markdown: &str, reqs: &[Requirement]) -> String {
    let known: HashSet<&str> = reqs.iter().map(|r| r.id).collect();
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut events: Vec<Event<'_>> =
        TextMergeStream::new(Parser::new_ext(markdown, options)).collect();

    // Headings: anchors and the table of contents.
    let mut headings = Vec::new();
    let mut used = HashSet::new();
    for i in 0..events.len() {
        if let Event::Start(Tag::Heading { level, .. }) = &events[i] {
            let level = heading_level(*level);
            let mut text = String::new();
            for e in &events[i + 1..] {
                match e {
                    Event::End(TagEnd::Heading(_)) => break,
                    Event::Text(t) | Event::Code(t) => text.push_str(t),
                    _ => {}
                }
            }
            let mut anchor = slug(&text);
            let mut n = 2;
            while !used.insert(anchor.clone()) {
                anchor = format!("{}-{n}", slug(&text));
                n += 1;
            }
            if let Event::Start(Tag::Heading { id, .. }) = &mut events[i] {
                *id = Some(CowStr::from(anchor.clone()));
            }
            headings.push(Heading {
                level,
                text,
                anchor,
            });
        }
    }

    // Requirement anchors and cross-links.
    let mut out: Vec<Event<'_>> = Vec::with_capacity(events.len());
    let mut code_block = false;
    let mut link_depth = 0usize;
    let mut i = 0;
    while i < events.len() {
        let after_item = matches!(out.last(), Some(Event::Start(Tag::Item)))
            || (matches!(out.last(), Some(Event::Start(Tag::Paragraph)))
                && matches!(out.iter().rev().nth(1), Some(Event::Start(Tag::Item))));
        match (&events[i], events.get(i + 1), events.get(i + 2)) {
            (Event::Start(Tag::Strong), Some(Event::Text(t)), Some(Event::End(TagEnd::Strong)))
                if after_item && known.contains(t.as_ref()) =>
            {
                out.push(Event::Html(CowStr::from(format!(
                    "<strong class=req id=\"{t}\"><a href=\"#{t}\">{t}</a></strong>"
                ))));
                i += 3;
                continue;
            }
            (Event::Start(Tag::CodeBlock(_)), _, _) => code_block = true,
            (Event::End(TagEnd::CodeBlock), _, _) => code_block = false,
            (Event::Start(Tag::Link { .. }), _, _) => link_depth += 1,
            (Event::End(TagEnd::Link), _, _) => link_depth = link_depth.saturating_sub(1),
            (Event::Code(c), _, _) if link_depth == 0 && known.contains(c.as_ref()) => {
                out.push(Event::Html(CowStr::from(format!(
                    "<a class=ref href=\"#{c}\"><code>{c}</code></a>"
                ))));
                i += 1;
                continue;
            }
            (Event::Text(t), _, _) if !code_block && link_depth == 0 => {
                let pieces = split_ids(t, &known);
                if pieces.len() > 1 {
                    for (before, id) in pieces {
                        if !before.is_empty() {
                            out.push(Event::Text(CowStr::from(before.to_owned())));
                        }
                        if let Some(id) = id {
                            out.push(Event::InlineHtml(CowStr::from(format!(
                                "<a class=ref href=\"#{id}\">{id}</a>"
                            ))));
                        }
                    }
                    i += 1;
                    continue;
                }
            }
            _ => {}
        }
        out.push(events[i].clone());
        i += 1;
    }
    let mut body = String::new();
    pulldown_cmark::html::push_html(&mut body, out.into_iter());

    let title = requirements::spec_title();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>\
         <meta name=viewport content='width=device-width,initial-scale=1'>\
         <title>{}</title><style>{STYLE}</style></head><body><div class=wrap><nav><b>Contents</b><ul>",
        crate::report::html::esc(title)
    );
    for hd in headings.iter().filter(|h| h.level == 2 || h.level == 3) {
        let _ = write!(
            h,
            "<li{}><a href=\"#{}\">{}</a></li>",
            if hd.level == 3 {
                " style='margin-left:1em'"
            } else {
                ""
            },
            hd.anchor,
            crate::report::html::esc(&hd.text)
        );
    }
    h.push_str(
        "<li><a href=\"#requirement-index\">Requirement index by area</a></li></ul></nav><main>",
    );
    h.push_str(&body);
    requirement_index(&mut h, reqs);
    h.push_str("</main></div></body></html>\n");
    h
}

fn heading_level(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// The index: per area (in document order), each requirement with its
/// keyword, observation and the start of its text.
fn requirement_index(h: &mut String, reqs: &[Requirement]) {
    let mut areas: Vec<&str> = Vec::new();
    let mut by_area: BTreeMap<&str, Vec<&Requirement>> = BTreeMap::new();
    for r in reqs {
        if !by_area.contains_key(r.area) {
            areas.push(r.area);
        }
        by_area.entry(r.area).or_default().push(r);
    }
    let _ = write!(
        h,
        "<h2 id=\"requirement-index\">Requirement index by area</h2><p>{} requirements in {} areas.</p><p>",
        reqs.len(),
        areas.len()
    );
    for area in &areas {
        let _ = write!(h, "<a href=\"#area-{area}\">{area}</a> ");
    }
    h.push_str("</p>");
    for area in areas {
        let list = &by_area[area];
        let _ = write!(
            h,
            "<h3 id=\"area-{area}\">{area} ({})</h3><table><tr><th>ID</th><th>keyword</th><th>observed</th><th>text</th></tr>",
            list.len()
        );
        for r in list {
            let _ = write!(
                h,
                "<tr><td><a class=ref href=\"#{0}\">{0}</a></td><td class=kw>{1}</td><td class=kw>{2}</td><td>{3}</td></tr>",
                r.id,
                r.keyword.as_str(),
                r.observation.as_str(),
                crate::report::html::esc(&shorten(r.text, 140))
            );
        }
        h.push_str("</table>");
    }
}

/// At most `max` characters of `text`, cut at a word, with an ellipsis.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(a, _)| a);
    format!("{cut} …")
}

/// The section (`7.2 MP opcodes and headers`) that holds 1-based `line` of `markdown`.
pub fn section_of(markdown: &str, line: usize) -> Option<&str> {
    markdown
        .lines()
        .take(line)
        .filter(|l| l.starts_with("## ") || l.starts_with("### "))
        .last()
        .map(|l| l.trim_start_matches('#').trim())
}

/// Up to five requirement IDs close to `query` (edit distance at most 2, or
/// the same area), closest first.
pub fn close_matches<'r>(query: &str, reqs: &'r [Requirement]) -> Vec<&'r str> {
    let area = query.split('-').nth(1).unwrap_or("");
    let mut scored: Vec<(usize, &str)> = reqs
        .iter()
        .filter_map(|r| {
            let d = edit_distance(query, r.id);
            (d <= 2 || (!area.is_empty() && r.area == area)).then_some((d, r.id))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(5).map(|(_, id)| id).collect()
}

/// Levenshtein distance (IDs are short; quadratic is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_id_splitting() {
        assert_eq!(
            slug("7.2 MP opcodes and headers"),
            "7-2-mp-opcodes-and-headers"
        );
        let known: HashSet<&str> = ["MR-BTH-2", "MR-BTH-12"].into_iter().collect();
        assert_eq!(
            split_ids("see MR-BTH-2, MR-BTH-12 and MR-BTH-3.", &known),
            vec![
                ("see ", Some("MR-BTH-2")),
                (", ", Some("MR-BTH-12")),
                (" and MR-BTH-3.", None)
            ]
        );
        assert_eq!(split_ids("MR-", &known), vec![("MR-", None)]);
    }

    #[test]
    fn close_matches_find_typos_and_the_area() {
        let reqs = requirements::all();
        assert_eq!(close_matches("MR-BHT-2", reqs).first(), Some(&"MR-BTH-2"));
        assert!(close_matches("MR-BTH-99", reqs).contains(&"MR-BTH-1"));
        assert!(close_matches("zzz", reqs).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn section_of_a_requirement() {
        let r = requirements::get("MR-MPH-1").expect("MR-MPH-1 exists");
        assert_eq!(
            section_of(requirements::SPEC_MD, r.line),
            Some("7.2 MP opcodes and headers")
        );
    }
}
