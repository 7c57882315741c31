//! Symbolic values in vectors: `${psn + 1}`, `${mr.buf.addr + 4096}`,
//! `${iut.qpn}`, or a literal in a string (`"0x1f"`).
//!
//! Grammar: `expr := sum ('^' sum)*` (`^` is exclusive or), `sum := term
//! (('+' | '-') term)*`, `term := atom (('*' | '/' | '%') atom)*`,
//! `atom := NUMBER | NAME | FUNC '(' expr ',' expr ')' | '(' expr ')'`,
//! NUMBER decimal or `0x` hex, NAME letters, digits, `_` and `.`, FUNC `min`
//! or `max` (for windows that follow the smaller or larger of two declared
//! timers). Arithmetic wraps modulo 2^64; fields that
//! are sequence numbers take the result modulo 2^24, every other field must
//! hold it as it is.

use std::collections::BTreeMap;
use std::fmt;

/// Names and their values during one test.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    values: BTreeMap<String, u64>,
}

impl Bindings {
    /// Binds `name` to `value` (replacing an earlier value).
    pub fn set(&mut self, name: impl Into<String>, value: u64) {
        self.values.insert(name.into(), value);
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.get(name).copied()
    }

    /// Every binding, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.values.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// Why an expression has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprError {
    /// The expression text.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.text, self.reason)
    }
}

impl std::error::Error for ExprError {}

/// Whether `text` is an expression (`${...}`) rather than a plain string.
pub fn is_expression(text: &str) -> bool {
    let t = text.trim();
    t.starts_with("${") && t.ends_with('}')
}

/// Evaluates `${...}` or a numeric literal string.
pub fn eval(text: &str, bindings: &Bindings) -> Result<u64, ExprError> {
    let err = |reason: String| ExprError {
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let inner = if is_expression(trimmed) {
        &trimmed[2..trimmed.len() - 1]
    } else {
        trimmed
    };
    let tokens = tokenize(inner).map_err(err)?;
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
        bindings,
    };
    let value = parser.expr().map_err(err)?;
    if parser.pos != tokens.len() {
        return Err(err(format!(
            "unexpected `{}`",
            tokens[parser.pos].describe()
        )));
    }
    Ok(value)
}

/// Checks the syntax of an expression without binding names; returns the
/// names it uses.
pub fn names(text: &str) -> Result<Vec<String>, ExprError> {
    let trimmed = text.trim();
    let inner = if is_expression(trimmed) {
        &trimmed[2..trimmed.len() - 1]
    } else {
        trimmed
    };
    let tokens = tokenize(inner).map_err(|reason| ExprError {
        text: text.to_string(),
        reason,
    })?;
    let names: Vec<String> = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match t {
            Token::Name(n) if !is_call(&tokens, i) => Some(n.clone()),
            _ => None,
        })
        .collect();
    // The syntax is checked by evaluating with every name bound to 0.
    let mut zero = Bindings::default();
    for n in &names {
        zero.set(n.clone(), 0);
    }
    eval(text, &zero)?;
    Ok(names)
}

/// The functions an expression may call, each with two arguments.
const FUNCTIONS: [&str; 2] = ["min", "max"];

/// Whether the name at `i` is a function called there (`min(`, `max(`).
fn is_call(tokens: &[Token], i: usize) -> bool {
    matches!(&tokens[i], Token::Name(n) if FUNCTIONS.contains(&n.as_str()))
        && tokens.get(i + 1) == Some(&Token::Op('('))
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Num(u64),
    Name(String),
    Op(char),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Num(n) => n.to_string(),
            Token::Name(n) => n.clone(),
            Token::Op(c) => c.to_string(),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/%^(),".contains(c) {
            tokens.push(Token::Op(c));
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
            let value = if let Some(hex) = word.strip_prefix("0x").or(word.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16)
            } else {
                word.parse()
            };
            tokens.push(Token::Num(
                value.map_err(|_| format!("`{word}` is not a number"))?,
            ));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            tokens.push(Token::Name(chars[start..i].iter().collect()));
        } else {
            return Err(format!("unexpected character `{c}`"));
        }
    }
    if tokens.is_empty() {
        return Err("empty expression".into());
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    bindings: &'a Bindings,
}

/// Deepest nesting of parentheses (a vector is small; this bounds recursion).
const MAX_DEPTH: usize = 32;

impl Parser<'_> {
    fn expr(&mut self) -> Result<u64, String> {
        self.expr_at(0)
    }

    fn expr_at(&mut self, depth: usize) -> Result<u64, String> {
        let mut value = self.sum(depth)?;
        while let Some(Token::Op('^')) = self.tokens.get(self.pos) {
            self.pos += 1;
            value ^= self.sum(depth)?;
        }
        Ok(value)
    }

    fn sum(&mut self, depth: usize) -> Result<u64, String> {
        let mut value = self.term(depth)?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.tokens.get(self.pos) {
            self.pos += 1;
            let rhs = self.term(depth)?;
            value = if *op == '+' {
                value.wrapping_add(rhs)
            } else {
                value.wrapping_sub(rhs)
            };
        }
        Ok(value)
    }

    fn term(&mut self, depth: usize) -> Result<u64, String> {
        let mut value = self.atom(depth)?;
        while let Some(Token::Op(op @ ('*' | '/' | '%'))) = self.tokens.get(self.pos) {
            self.pos += 1;
            let rhs = self.atom(depth)?;
            value = match op {
                '*' => value.wrapping_mul(rhs),
                _ if rhs == 0 => return Err("division by zero".into()),
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn atom(&mut self, depth: usize) -> Result<u64, String> {
        let token = self
            .tokens
            .get(self.pos)
            .ok_or_else(|| "expression ends early".to_string())?;
        self.pos += 1;
        match token {
            Token::Num(n) => Ok(*n),
            Token::Name(_) if is_call(self.tokens, self.pos - 1) => self.call(depth),
            Token::Name(name) => self
                .bindings
                .get(name)
                .ok_or_else(|| format!("unknown name `{name}`")),
            Token::Op('(') => {
                if depth >= MAX_DEPTH {
                    return Err("parentheses nested too deep".into());
                }
                let value = self.expr_at(depth + 1)?;
                match self.tokens.get(self.pos) {
                    Some(Token::Op(')')) => {
                        self.pos += 1;
                        Ok(value)
                    }
                    _ => Err("missing `)`".into()),
                }
            }
            Token::Op(c) => Err(format!("unexpected `{c}`")),
        }
    }

    /// `min(a, b)` or `max(a, b)`; the name has been taken, `(` is next.
    fn call(&mut self, depth: usize) -> Result<u64, String> {
        if depth >= MAX_DEPTH {
            return Err("parentheses nested too deep".into());
        }
        let is_min = self.tokens[self.pos - 1] == Token::Name("min".into());
        self.pos += 1; // `(`
        let a = self.expr_at(depth + 1)?;
        if self.tokens.get(self.pos) != Some(&Token::Op(',')) {
            return Err("`min` and `max` take two arguments: missing `,`".into());
        }
        self.pos += 1;
        let b = self.expr_at(depth + 1)?;
        if self.tokens.get(self.pos) != Some(&Token::Op(')')) {
            return Err("missing `)`".into());
        }
        self.pos += 1;
        Ok(if is_min { a.min(b) } else { a.max(b) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> Bindings {
        let mut b = Bindings::default();
        b.set("psn", 0xFF_FFFF);
        b.set("mr.buf.addr", 0x1000);
        b
    }

    #[test]
    fn arithmetic_and_names() {
        assert_eq!(eval("${psn + 1}", &b()), Ok(0x100_0000));
        assert_eq!(eval("${mr.buf.addr + 2 * 8}", &b()), Ok(0x1010));
        assert_eq!(eval("${(1 + 2) * 3}", &b()), Ok(9));
        assert_eq!(eval("0x1f", &b()), Ok(31));
        assert_eq!(eval("${0 - 1}", &b()), Ok(u64::MAX));
        assert_eq!(eval("${7 / 2 + 7 % 2}", &b()), Ok(4));
        assert_eq!(eval("${psn ^ 0x10000 + 1}", &b()), Ok(0xFF_FFFF ^ 0x10001));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = eval("${nope + 1}", &b()).unwrap_err();
        assert!(e.reason.contains("unknown name `nope`"), "{e}");
        assert!(eval("${1 +}", &b()).is_err());
        assert!(eval("${(1}", &b()).is_err());
        assert!(eval("${1 2}", &b()).is_err());
        assert!(eval("${}", &b()).is_err());
        assert!(eval("${1 / 0}", &b()).is_err());
        assert!(eval("${1 & 2}", &b()).is_err());
        let deep = format!("${{{}1{}}}", "(".repeat(100), ")".repeat(100));
        assert!(eval(&deep, &b()).is_err());
        assert!(eval("${min(1)}", &b()).is_err());
        assert!(eval("${min(1, 2, 3)}", &b()).is_err());
        assert!(eval("${1, 2}", &b()).is_err());
        let e = eval("${min + 1}", &b()).unwrap_err();
        assert!(e.reason.contains("unknown name `min`"), "{e}");
    }

    #[test]
    fn min_and_max() {
        let mut b = b();
        b.set("profile.mp_rto_init", 1000);
        b.set("profile.mp_rto_max", 16000);
        assert_eq!(
            eval(
                "${min(2 * profile.mp_rto_init, profile.mp_rto_max) - 10}",
                &b
            ),
            Ok(1990)
        );
        b.set("profile.mp_rto_init", 10000);
        assert_eq!(
            eval(
                "${min(2 * profile.mp_rto_init, profile.mp_rto_max) - 10}",
                &b
            ),
            Ok(15990)
        );
        assert_eq!(eval("${max(3, (1 + 1) * 2)}", &b), Ok(4));
        assert_eq!(
            names("${min(profile.mp_rto_init, psn) / 10}"),
            Ok(vec!["profile.mp_rto_init".to_string(), "psn".to_string()])
        );
    }
}
