//! GBNF, llama.cpp's grammar language, compiled to rules ([`crate::pushdown::RtnBuilder`]).
//!
//! What is read, as llama.cpp's grammar parser reads it (its `grammars/README.md`):
//!
//! * rules `name ::= alternatives`, names of letters, digits, `-` and `_`; the start is `root`;
//! * terminals are code points: strings `"..."`, classes `[a-z]` and negated `[^\n]`, `.` (any
//!   code point), with the escapes `\xHH`, `\uHHHH`, `\UHHHHHHHH`, `\t`, `\n`, `\r`, `\\`,
//!   `\"`, `\[`, `\]`;
//! * sequences, `|`, grouping `( )`, and `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, `{,n}` after an
//!   item;
//! * comments from `#` to the end of the line; a newline ends a rule, except inside
//!   parentheses and after `|`;
//! * tokens: `<[id]>` and `<text>` (a token whose text is exactly `text`). A special token
//!   becomes its marker byte (as in a structure, `crate::structure::special`); an ordinary token
//!   is read as its text. Negated tokens (`!<...>`) match "any one token but", which a grammar
//!   over bytes cannot say: they are refused.
//!
//! Errors are [`GrammarError::InvalidGrammar`] with the line and column (1-based) and, where
//! there is one, the rule.

use std::collections::HashMap;

use crate::automata::Expr;
use crate::error::{GrammarError, Result};
use crate::pushdown::RtnBuilder;
use crate::structure::special::marker_expr;
use crate::structure::SpecialTokens;
use crate::util::{RuleId, TokenId};
use crate::vocab::Vocabulary;

const SYNTAX: &str = "GBNF";

/// A GBNF grammar as rules, their start (`root`) and the special tokens it names.
pub struct Parsed {
    pub rules: RtnBuilder,
    pub start: RuleId,
    pub specials: SpecialTokens,
}

/// Parses `text` into rules over `vocab` (for its token references).
pub fn parse(text: &str, vocab: &Vocabulary) -> Result<Parsed> {
    let mut rules = RtnBuilder::new();
    let mut specials = SpecialTokens::default();
    let start = parse_into(text, vocab, &mut rules, &mut specials)?;
    Ok(Parsed { rules, start, specials })
}

/// Parses `text` into new rules of `rules` (special tokens it names get markers in
/// `specials`); returns its `root` rule.
pub fn parse_into(text: &str, vocab: &Vocabulary, rules: &mut RtnBuilder, specials: &mut SpecialTokens) -> Result<RuleId> {
    let mut p = Parser { src: text.as_bytes(), pos: 0, rules, ids: HashMap::new(), used: HashMap::new(), defined: HashMap::new(), specials, vocab, rule: None };
    p.space(true);
    while p.pos < p.src.len() {
        p.rule()?;
        p.space(true);
    }
    for (name, &(line, col)) in &p.used {
        if !p.defined.contains_key(name) {
            return Err(GrammarError::invalid_grammar(SYNTAX, line, col, Some(name), "the rule is used but never defined"));
        }
    }
    let Some(&start) = p.ids.get("root").filter(|_| p.defined.contains_key("root")) else {
        return Err(GrammarError::invalid_grammar(SYNTAX, 0, 0, None, "the grammar has no `root` rule"));
    };
    Ok(start)
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    rules: &'a mut RtnBuilder,
    ids: HashMap<String, RuleId>,
    /// Where each rule name was first used.
    used: HashMap<String, (usize, usize)>,
    defined: HashMap<String, (usize, usize)>,
    specials: &'a mut SpecialTokens,
    vocab: &'a Vocabulary,
    /// The rule being parsed, for errors.
    rule: Option<String>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Line and column (1-based) of byte offset `at`.
    fn location(&self, at: usize) -> (usize, usize) {
        let before = &self.src[..at.min(self.src.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
        (line, col)
    }

    fn error(&self, at: usize, reason: impl Into<String>) -> GrammarError {
        let (line, col) = self.location(at);
        GrammarError::invalid_grammar(SYNTAX, line, col, self.rule.as_deref(), reason)
    }

    /// Skips blanks and comments, and newlines when `newlines` is set.
    fn space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newlines => self.pos += 1,
                b'#' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Option<String> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_') {
            self.pos += 1;
        }
        (self.pos > start).then(|| String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
    }

    fn rule_id(&mut self, name: &str) -> RuleId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.rules.declare(name);
        self.ids.insert(name.to_string(), id);
        id
    }

    fn rule(&mut self) -> Result<()> {
        let at = self.pos;
        let Some(name) = self.name() else {
            return Err(self.error(at, "expected a rule name"));
        };
        self.rule = Some(name.clone());
        self.space(false);
        if !self.src[self.pos..].starts_with(b"::=") {
            return Err(self.error(self.pos, "expected `::=` after the rule name"));
        }
        self.pos += 3;
        self.space(true);
        let body = self.alternates(false)?;
        if let Some(&(line, _)) = self.defined.get(&name) {
            return Err(self.error(at, format!("the rule is defined twice (first on line {line})")));
        }
        self.defined.insert(name.clone(), self.location(at));
        let id = self.rule_id(&name);
        self.rules.define(id, body);
        self.space(false);
        match self.peek() {
            None | Some(b'\n') | Some(b'\r') => Ok(()),
            Some(c) => Err(self.error(self.pos, format!("unexpected `{}` after the rule", c as char))),
        }
    }

    fn alternates(&mut self, nested: bool) -> Result<Expr> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(Expr::union(alts))
    }

    fn sequence(&mut self, nested: bool) -> Result<Expr> {
        let mut items: Vec<Expr> = Vec::new();
        loop {
            let at = self.pos;
            let item = match self.peek() {
                None | Some(b'|') | Some(b')') | Some(b'\n') | Some(b'\r') => break,
                Some(b'"') => {
                    self.pos += 1;
                    self.literal(at)?
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.class(at)?
                }
                Some(b'.') => {
                    self.pos += 1;
                    Expr::regex("(?s:.)")
                }
                Some(b'(') => {
                    self.pos += 1;
                    self.space(true);
                    let inner = self.alternates(true)?;
                    self.space(true);
                    if self.peek() != Some(b')') {
                        return Err(self.error(self.pos, "expected `)`"));
                    }
                    self.pos += 1;
                    inner
                }
                Some(b'<') => {
                    self.pos += 1;
                    self.token(at)?
                }
                Some(b'!') => return Err(self.error(at, "negated tokens (`!<...>`: any one token but one) are not supported")),
                Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' => {
                    let name = self.name().unwrap_or_default();
                    let loc = self.location(at);
                    self.used.entry(name.clone()).or_insert(loc);
                    Expr::Call(self.rule_id(&name))
                }
                Some(b'*' | b'+' | b'?' | b'{') => return Err(self.error(at, "a repetition needs an item before it")),
                Some(c) => return Err(self.error(at, format!("unexpected `{}`", char_at(self.src, at).unwrap_or(c as char)))),
            };
            self.space(nested);
            let item = self.repetition(item, nested)?;
            items.push(item);
        }
        Ok(Expr::concat(items))
    }

    fn repetition(&mut self, mut item: Expr, nested: bool) -> Result<Expr> {
        loop {
            let at = self.pos;
            item = match self.peek() {
                Some(b'*') => {
                    self.pos += 1;
                    Expr::repeat(item, 0, None)
                }
                Some(b'+') => {
                    self.pos += 1;
                    Expr::repeat(item, 1, None)
                }
                Some(b'?') => {
                    self.pos += 1;
                    Expr::optional(item)
                }
                Some(b'{') => {
                    self.pos += 1;
                    self.space(nested);
                    let min = self.integer().unwrap_or(0);
                    self.space(nested);
                    let max = if self.peek() == Some(b',') {
                        self.pos += 1;
                        self.space(nested);
                        self.integer()
                    } else {
                        Some(min)
                    };
                    self.space(nested);
                    if self.peek() != Some(b'}') {
                        return Err(self.error(self.pos, "expected `}` to close the repetition"));
                    }
                    self.pos += 1;
                    if max.is_some_and(|m| m < min) {
                        return Err(self.error(at, format!("repetition {{{min},{}}}: the maximum is below the minimum", max.unwrap_or(0))));
                    }
                    Expr::repeat(item, min, max)
                }
                _ => return Ok(item),
            };
            self.space(nested);
        }
    }

    fn integer(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.src[start..self.pos]).ok()?.parse().ok()
    }

    /// A string literal after its opening quote.
    fn literal(&mut self, at: usize) -> Result<Expr> {
        let mut text = String::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err(self.error(at, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Expr::literal(&text));
                }
                Some(_) => text.push(self.char_or_escape()?),
            }
        }
    }

    /// A character class after its `[`.
    fn class(&mut self, at: usize) -> Result<Expr> {
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges: Vec<(char, char)> = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err(self.error(at, "unterminated character class")),
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let lo = self.char_or_escape()?;
                    let hi = if self.peek() == Some(b'-') && self.src.get(self.pos + 1).is_some_and(|&c| c != b']') {
                        self.pos += 1;
                        self.char_or_escape()?
                    } else {
                        lo
                    };
                    if hi < lo {
                        return Err(self.error(at, format!("range {lo:?}-{hi:?} runs backwards")));
                    }
                    ranges.push((lo, hi));
                }
            }
        }
        if ranges.is_empty() {
            return Ok(if negated { Expr::regex("(?s:.)") } else { Expr::Empty });
        }
        let mut re = String::from(if negated { "[^" } else { "[" });
        for (lo, hi) in ranges {
            re.push_str(&format!("\\x{{{:X}}}", lo as u32));
            if hi != lo {
                re.push_str(&format!("-\\x{{{:X}}}", hi as u32));
            }
        }
        re.push(']');
        Ok(Expr::regex(re))
    }

    /// One code point, or an escape for one.
    fn char_or_escape(&mut self) -> Result<char> {
        let at = self.pos;
        if self.peek() == Some(b'\\') {
            self.pos += 1;
            let c = self.peek().ok_or_else(|| self.error(at, "a `\\` at the end of the grammar"))?;
            self.pos += 1;
            let hex = |p: &mut Self, n: usize| -> Result<char> {
                let digits = p.src.get(p.pos..p.pos + n).and_then(|d| std::str::from_utf8(d).ok()).filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
                let Some(digits) = digits else { return Err(p.error(at, format!("`\\{}` needs {n} hex digits", c as char))) };
                p.pos += n;
                let v = u32::from_str_radix(digits, 16).unwrap_or(u32::MAX);
                char::from_u32(v).ok_or_else(|| p.error(at, format!("U+{v:X} is not a character")))
            };
            return match c {
                b'x' => hex(self, 2),
                b'u' => hex(self, 4),
                b'U' => hex(self, 8),
                b't' => Ok('\t'),
                b'n' => Ok('\n'),
                b'r' => Ok('\r'),
                b'\\' | b'"' | b'[' | b']' => Ok(c as char),
                _ => Err(self.error(at, format!("unknown escape `\\{}`", char_at(self.src, at + 1).unwrap_or(c as char)))),
            };
        }
        let c = char_at(self.src, self.pos).ok_or_else(|| self.error(at, "the grammar is not valid UTF-8 here"))?;
        self.pos += c.len_utf8();
        Ok(c)
    }

    /// A token reference after its `<`: `<[id]>` or `<text>`.
    fn token(&mut self, at: usize) -> Result<Expr> {
        let close = self.src[self.pos..].iter().position(|&b| b == b'>').ok_or_else(|| self.error(at, "unterminated token `<...>`"))?;
        let inner = String::from_utf8_lossy(&self.src[self.pos..self.pos + close]).into_owned();
        self.pos += close + 1;
        token_reference(&inner, self.vocab, &mut self.specials).map_err(|reason| self.error(at, reason))
    }
}

/// The language of a token reference `<inner>` (`<[id]>`, or `<text>` for a token whose text is
/// exactly that): a special token's marker byte, an ordinary token's text. Shared with the
/// Lark front end, which reads the same syntax; the error is the reason alone.
pub(crate) fn token_reference(inner: &str, vocab: &Vocabulary, specials: &mut SpecialTokens) -> std::result::Result<Expr, String> {
    let id = if let Some(num) = inner.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        let id: u32 = num.trim().parse().map_err(|_| format!("`<[{num}]>`: a token id is a number"))?;
        let id = TokenId::new(id);
        if vocab.token_bytes(id).is_none() {
            return Err(format!("token {id} is outside the vocabulary"));
        }
        id
    } else {
        let text = format!("<{inner}>");
        let found = vocab.find_tokens(text.as_bytes());
        *found.first().ok_or_else(|| format!("no single token of this vocabulary is `{text}`"))?
    };
    if vocab.is_special(id) {
        let byte = specials.marker(id, "").map_err(|e| e.to_string())?;
        Ok(marker_expr(byte))
    } else {
        let bytes = vocab.token_bytes(id).unwrap_or_default();
        let text = std::str::from_utf8(bytes).map_err(|_| format!("token {id} is not UTF-8 text"))?;
        Ok(Expr::literal(text))
    }
}

fn char_at(src: &[u8], at: usize) -> Option<char> {
    let end = (at + 4).min(src.len());
    let chunk = &src[at.min(end)..end];
    match std::str::from_utf8(chunk) {
        Ok(s) => s.chars().next(),
        Err(e) => std::str::from_utf8(&chunk[..e.valid_up_to()]).ok()?.chars().next(),
    }
}
