//! Reading vector files: YAML with budgets, unknown keys rejected, errors
//! with file, line and column; then the checks serde cannot make (ids,
//! requirement IDs, MR names, expressions, opcodes).

use super::codec_vector::CodecVector;
use super::expr;
use super::model::{Bytes, MatchTest, Matcher, Num, Step, Value, Vector};
use super::opcodes::opcode_by_name;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// Largest vector file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Deepest YAML nesting accepted.
pub const MAX_DEPTH: usize = 24;
/// Most YAML events (scalars, collection starts and ends) in one file.
pub const MAX_EVENTS: usize = 200_000;

/// A vector file that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<u64>,
    /// 1-based column, when known.
    pub column: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for LoadError {}

/// A vector and where it came from.
#[derive(Clone, Debug)]
pub struct Loaded<T> {
    /// The file.
    pub file: PathBuf,
    /// The file's bytes (hashed into reports).
    pub text: String,
    /// The vector.
    pub vector: T,
}

/// Every vector of a set: conversation tests and static codec vectors.
#[derive(Clone, Debug, Default)]
pub struct VectorSet {
    /// Tests run against an IUT, in file-name order.
    pub tests: Vec<Loaded<Vector>>,
    /// Static codec vectors (files under a `codec` folder), in file-name order.
    pub codec: Vec<Loaded<CodecVector>>,
}

impl VectorSet {
    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.tests.len() + self.codec.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn read(file: &Path) -> Result<String, LoadError> {
    let fail = |message: String| LoadError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message,
    };
    let meta = std::fs::metadata(file).map_err(|e| fail(e.to_string()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(fail(format!(
            "{} bytes: larger than the {MAX_FILE_BYTES}-byte limit of a vector file",
            meta.len()
        )));
    }
    let bytes = std::fs::read(file).map_err(|e| fail(e.to_string()))?;
    text_of(file, bytes)
}

/// The bytes of a vector file as text, within the size budget.
fn text_of(file: &Path, bytes: Vec<u8>) -> Result<String, LoadError> {
    let fail = |message: String| LoadError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message,
    };
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!(
            "{} bytes: larger than the {MAX_FILE_BYTES}-byte limit of a vector file",
            bytes.len()
        )));
    }
    String::from_utf8(bytes).map_err(|e| fail(format!("not UTF-8: {e}")))
}

/// Parses YAML text into `T` with the budgets above.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, LoadError> {
    let mut options = serde_saphyr::Options::default();
    if let Some(budget) = options.budget.as_mut() {
        budget.max_depth = MAX_DEPTH;
        budget.max_events = MAX_EVENTS;
        budget.max_aliases = 1_000;
        budget.max_anchors = 1_000;
        budget.max_documents = 1;
    }
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let location = e.location();
        let rendered = e.to_string();
        // The rendered error carries a source snippet; the first line is the message.
        let message = rendered
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("invalid YAML")
            .trim()
            .trim_start_matches("error: ")
            .to_string();
        // The location is given once, in front of the message.
        let message = match message.split_once(": ") {
            Some((head, rest)) if head.starts_with("line ") && head.contains(" column ") => {
                rest.to_string()
            }
            _ => message,
        };
        LoadError {
            file: file.to_path_buf(),
            line: location.map(|l| l.line()).filter(|&l| l > 0),
            column: location.map(|l| l.column()).filter(|&c| c > 0),
            message,
        }
    })
}

/// Loads one conversation vector and checks it.
pub fn load_vector(file: &Path) -> Result<Loaded<Vector>, LoadError> {
    vector_from_text(file, read(file)?)
}

/// A conversation vector from the bytes of a file named `file` (the loader
/// without the file system: `fuzz/fuzz_targets/vector_load.rs` and its
/// corpus replay call it). Errors, never panics, on any bytes.
pub fn vector_from_bytes(file: &Path, bytes: &[u8]) -> Result<Loaded<Vector>, LoadError> {
    vector_from_text(file, text_of(file, bytes.to_vec())?)
}

/// A static codec vector from the bytes of a file named `file` (see
/// [`vector_from_bytes`]).
pub fn codec_vector_from_bytes(
    file: &Path,
    bytes: &[u8],
) -> Result<Loaded<CodecVector>, LoadError> {
    codec_vector_from_text(file, text_of(file, bytes.to_vec())?)
}

fn vector_from_text(file: &Path, text: String) -> Result<Loaded<Vector>, LoadError> {
    let vector: Vector = parse_yaml(file, &text)?;
    check_vector(&vector).map_err(|message| LoadError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message,
    })?;
    Ok(Loaded {
        file: file.to_path_buf(),
        text,
        vector,
    })
}

/// Loads one static codec vector and checks it.
pub fn load_codec_vector(file: &Path) -> Result<Loaded<CodecVector>, LoadError> {
    codec_vector_from_text(file, read(file)?)
}

fn codec_vector_from_text(file: &Path, text: String) -> Result<Loaded<CodecVector>, LoadError> {
    let vector: CodecVector = parse_yaml(file, &text)?;
    let fail = |message: String| LoadError {
        file: file.to_path_buf(),
        line: None,
        column: None,
        message,
    };
    check_id(&vector.id).map_err(fail)?;
    check_requirements(&vector.requirements).map_err(fail)?;
    for id in &vector.findings {
        check_requirements(std::slice::from_ref(id)).map_err(fail)?;
    }
    super::hex::decode(&vector.frame).map_err(|e| fail(format!("frame: {e}")))?;
    Ok(Loaded {
        file: file.to_path_buf(),
        text,
        vector,
    })
}

/// Loads every `*.yaml` / `*.yml` file under `root` (a file or a folder,
/// recursively; files under a folder named `codec` are codec vectors).
/// Every bad file is reported, not only the first; ids must be unique.
pub fn load_dir(root: &Path) -> Result<VectorSet, Vec<LoadError>> {
    let mut files = Vec::new();
    if root.is_file() {
        files.push(root.to_path_buf());
    } else {
        collect(root, &mut files).map_err(|e| {
            vec![LoadError {
                file: root.to_path_buf(),
                line: None,
                column: None,
                message: e.to_string(),
            }]
        })?;
    }
    files.sort();
    let mut set = VectorSet::default();
    let mut errors = Vec::new();
    let mut ids = BTreeSet::new();
    for file in files {
        let is_codec = file
            .components()
            .any(|c| c.as_os_str() == std::ffi::OsStr::new("codec"));
        let id = if is_codec {
            match load_codec_vector(&file) {
                Ok(v) => {
                    let id = v.vector.id.clone();
                    set.codec.push(v);
                    id
                }
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            }
        } else {
            match load_vector(&file) {
                Ok(v) => {
                    let id = v.vector.id.clone();
                    set.tests.push(v);
                    id
                }
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            }
        };
        if !ids.insert(id.clone()) {
            errors.push(LoadError {
                file,
                line: None,
                column: None,
                message: format!("id `{id}` is used by another vector"),
            });
        }
    }
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(errors)
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "id `{id}`: use 1–128 lower-case letters, digits, `.`, `_` or `-`"
        ))
    }
}

fn check_requirements(ids: &[String]) -> Result<(), String> {
    for id in ids {
        if metaroce_spec::requirements::get(id).is_none() {
            return Err(format!(
                "requirements: `{id}` is not a requirement of SPEC.md"
            ));
        }
    }
    Ok(())
}

/// The names every test binds before its steps (see `vectors/README.md`).
pub const FIXED_NAMES: &[&str] = &[
    "psn",
    "iut.psn",
    "iut.qpn",
    "iut.qpn2",
    "h.qpn",
    "h.qpn2",
    "pmtu",
    "iut.udp_sport",
    "h.ip",
    "iut.ip",
    "iut.ev_count",
];

/// Checks what serde cannot: ids, requirement IDs, names used in
/// expressions, MR names, opcodes.
pub fn check_vector(v: &Vector) -> Result<(), String> {
    check_id(&v.id)?;
    if v.requirements.is_empty() {
        return Err("requirements: at least one requirement ID".into());
    }
    check_requirements(&v.requirements)?;
    if v.steps.is_empty() {
        return Err("steps: at least one step".into());
    }
    if !["reset", "init", "rtr", "rts"].contains(&v.setup.qp.state.as_str()) {
        return Err(format!(
            "setup.qp.state: `{}` is not one of reset, init, rtr, rts",
            v.setup.qp.state
        ));
    }
    // `${profile.KEY}`: the IUT's MP local constants (SPEC §2, §10.3).
    let declared: BTreeSet<String> = crate::run::profile_keys::MP_LOCAL
        .iter()
        .map(|c| format!("{}{}", crate::run::profile_keys::NAME_PREFIX, c.key))
        .collect();
    if let Some(Num::Expr(text)) = &v.max_margin_us {
        for name in expr::names(text).map_err(|e| format!("max_margin_us: {e}"))? {
            if !declared.contains(&name) {
                return Err(format!(
                    "max_margin_us: `{text}` uses `{name}`; it may use only the profile's MP local constants (`profile.mp_rto_init`, ...)"
                ));
            }
        }
    }
    let mut names: BTreeSet<String> = FIXED_NAMES.iter().map(|s| s.to_string()).collect();
    names.extend(declared);
    // An MP QP's entropy set, as query_qp reports it: `iut.ev0` .. `iut.ev{N-1}`.
    if v.profile == super::model::Profile::Mp {
        let n = v.setup.qp.mp.as_ref().map_or(8, |m| m.entropy_set_size);
        for i in 0..n.min(256) {
            names.insert(format!("iut.ev{i}"));
        }
    }
    let mut mrs = BTreeSet::new();
    for mr in &v.setup.mrs {
        if !mrs.insert(mr.name.clone()) {
            return Err(format!("setup.mrs: the name `{}` is used twice", mr.name));
        }
        for field in ["addr", "rkey", "lkey", "len"] {
            names.insert(format!("mr.{}.{field}", mr.name));
        }
    }
    let has_mr = |name: &str, at: &str| {
        if mrs.contains(name) {
            Ok(())
        } else {
            Err(format!("{at}: no MR named `{name}` in setup.mrs"))
        }
    };
    for (i, r) in v.setup.recvs.iter().enumerate() {
        for sge in &r.sg {
            has_mr(&sge.mr, &format!("setup.recvs[{i}]"))?;
        }
    }
    let check_num = |n: &Num, names: &BTreeSet<String>, at: &str| -> Result<(), String> {
        if let Num::Expr(text) = n
            && expr::is_expression(text)
        {
            for name in expr::names(text).map_err(|e| format!("{at}: {e}"))? {
                if !names.contains(&name) {
                    return Err(format!("{at}: `{text}` uses the unknown name `{name}`"));
                }
            }
        }
        Ok(())
    };
    for (i, step) in v.steps.iter().enumerate() {
        let at = format!("steps[{i}]");
        let window = match step {
            Step::Expect(s) => Some(&s.within_us),
            Step::ExpectNone(s) => Some(&s.within_us),
            Step::Wait(s) => Some(&s.within_us),
            Step::ExpectNoCompletion(s) => Some(&s.within_us),
            Step::ExpectCompletion(s) => Some(&s.within_us),
            _ => None,
        };
        if let Some(w) = window {
            check_num(w, &names, &format!("{at}.within_us"))?;
        }
        if let Step::Expect(s) = step
            && let Some(late) = &s.late
        {
            check_num(&late.after_us, &names, &format!("{at}.late.after_us"))?;
            check_requirements(std::slice::from_ref(&late.requirement))
                .map_err(|e| format!("{at}.late.{e}"))?;
        }
        match step {
            Step::Send(s) => {
                if let super::model::OpcodeRef::Name(name) = &s.opcode {
                    opcode_by_name(name)
                        .ok_or_else(|| format!("{at}.send.opcode: unknown opcode name `{name}`"))?;
                }
                let values = s
                    .bth
                    .values()
                    .chain(s.ext.values().flat_map(|m| m.values()))
                    .chain(s.udp.values());
                for value in values {
                    if let Value::Num(n) = value {
                        check_num(n, &names, &format!("{at}.send"))?;
                    }
                }
                if let Some(Bytes::Generated(g)) = &s.payload {
                    check_num(&g.len, &names, &format!("{at}.send.payload"))?;
                }
                names.insert("sent_ns".to_string());
            }
            Step::Expect(e) => {
                for m in e.fields.values() {
                    check_matcher(m, &names, &format!("{at}.expect"), &check_num)?;
                }
                for name in e.capture.keys() {
                    names.insert(name.clone());
                }
            }
            Step::ExpectNone(e) => {
                for m in e.fields.values() {
                    check_matcher(m, &names, &format!("{at}.expect_none"), &check_num)?;
                }
                if let Some(from) = e.from_step {
                    let starts = v.steps[..i]
                        .get(from)
                        .is_some_and(|s| matches!(s, Step::Send(_) | Step::Expect(_)));
                    if !e.lower_bound || !starts {
                        return Err(format!(
                            "{at}.expect_none.from_step: {from} must name an earlier `send` or `expect` step, with `lower_bound: true`"
                        ));
                    }
                }
            }
            Step::ExpectCompletion(c) => {
                for m in c.fields.values() {
                    check_matcher(m, &names, &format!("{at}.expect_completion"), &check_num)?;
                }
            }
            Step::PostSend(p) => {
                for sge in &p.sg {
                    has_mr(&sge.mr, &format!("{at}.post_send"))?;
                }
                for n in [
                    &p.remote_addr,
                    &p.rkey,
                    &p.imm,
                    &p.invalidate_rkey,
                    &p.compare,
                    &p.swap,
                    &p.add,
                ]
                .into_iter()
                .flatten()
                {
                    check_num(n, &names, &format!("{at}.post_send"))?;
                }
                if let Some(ud) = &p.ud {
                    for n in [&ud.qpn, &Some(ud.qkey.clone())].into_iter().flatten() {
                        check_num(n, &names, &format!("{at}.post_send.ud"))?;
                    }
                }
            }
            Step::PostRecv(r) => {
                for sge in &r.sg {
                    has_mr(&sge.mr, &format!("{at}.post_recv"))?;
                }
            }
            Step::ExpectMemory(m) | Step::WriteMemory(m) => has_mr(&m.mr, &at)?,
            Step::DeregMr(d) => has_mr(&d.mr, &format!("{at}.dereg_mr"))?,
            Step::ExpectCounters(_)
            | Step::ExpectNoCompletion(_)
            | Step::ExpectQpState(_)
            | Step::Wait(_) => {}
            Step::ModifyQp(m) => {
                for value in m.attrs.values() {
                    if let serde_json::Value::String(t) = value
                        && expr::is_expression(t)
                    {
                        check_num(&Num::Expr(t.clone()), &names, &format!("{at}.modify_qp"))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Checks the names one number uses.
type NumCheck = dyn Fn(&Num, &BTreeSet<String>, &str) -> Result<(), String>;

fn check_matcher(
    m: &Matcher,
    names: &BTreeSet<String>,
    at: &str,
    check_num: &NumCheck,
) -> Result<(), String> {
    match m {
        Matcher::Text(t) if expr::is_expression(t) => check_num(&Num::Expr(t.clone()), names, at),
        Matcher::Test(MatchTest {
            any_of,
            not,
            min,
            max,
            ..
        }) => {
            for m in any_of.iter().flatten() {
                check_matcher(m, names, at, check_num)?;
            }
            if let Some(m) = not {
                check_matcher(m, names, at, check_num)?;
            }
            for n in [min, max].into_iter().flatten() {
                check_num(n, names, at)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
