//! The JSON string escape of a language: every sentence written as the content of a JSON
//! string.
//!
//! A custom tool's input (a sentence of a Lark grammar, say) travels inside a tool call's JSON
//! arguments as a string. What the model writes between the quotes is then not the sentence but
//! its escape: the image of the sentence under the byte map `h`
//!
//! | byte | written |
//! |---|---|
//! | `"` | `\"` |
//! | `\` | `\\` |
//! | 0x08, 0x0C, 0x0A, 0x0D, 0x09 | `\b`, `\f`, `\n`, `\r`, `\t` |
//! | any other byte below 0x20 | `\u00xx` (lowercase hex) |
//! | any other byte (UTF-8 bytes from 0x80 included) | itself |
//!
//! extended to strings byte by byte. `h(L) = { h(w) : w ∈ L }` is the language of string
//! contents whose decoded value is a sentence of `L`. These are the spellings serde_json and
//! Python's `json.dumps(..., ensure_ascii=False)` write, the canonical spelling of
//! `crate::json_schema`'s `canonical.rs`; the other spellings a JSON reader accepts (`\/`,
//! `\u00e9`, uppercase hex) are left out, so each sentence has one spelling. (The JSON Schema
//! compiler's string values also take the escapes writers use, `respell.rs`: a regular
//! language's rewrite, which a grammar with calls does not have.)
//!
//! `h` is a homomorphism whose codes form a prefix code (every code that is not a single byte
//! starts with `\`, which no single-byte code is, and no escape is a prefix of another). So:
//!
//! * on a DFA ([`Dfa::json_escaped`]), `h(L)` is recognised by the same states plus, per
//!   state, a few states in the middle of an escape (after `\`, `\u`, `\u0`, `\u00`, and
//!   `\u000` or `\u001`): still deterministic, with no subset construction;
//! * on an expression, `h` distributes over concatenation, union and repetition, so a tree is
//!   escaped part by part, and a call of a rule becomes a call of an escaped copy of that rule
//!   ([`RtnBuilder::json_escape`]). Escaping every rule body keeps calls as calls: a recursive
//!   grammar stays a pushdown grammar with the same calls, and nullability and left recursion
//!   are unchanged (`h` maps the empty string, and only it, to the empty string).
//!
//! The thirteen bytes no UTF-8 text contains (0xC0, 0xC1, 0xF5-0xFF) are refused with
//! [`GrammarError::NotText`]: where a language reads them they are special-token markers
//! (`crate::structure::special`), and a JSON string holds text only.

use std::collections::HashMap;
use std::rc::Rc;

use crate::automata::{Dfa, DfaConfig, Expr};
use crate::error::{GrammarError, Result};
use crate::pushdown::{Memory, RtnBuilder};
use crate::util::{RuleId, StateId};

/// The bytes a short escape writes after `\`, by the byte it stands for.
const SHORT_ESCAPES: [(u8, u8); 7] =
    [(b'"', b'"'), (b'\\', b'\\'), (0x08, b'b'), (0x0C, b'f'), (0x0A, b'n'), (0x0D, b'r'), (0x09, b't')];

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes no UTF-8 text contains.
fn is_non_text(b: u8) -> bool {
    b == 0xC0 || b == 0xC1 || b >= 0xF5
}

/// How one byte is written inside a JSON string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    /// As itself.
    Plain,
    /// `\` and this letter.
    Short(u8),
    /// `\u00` and two hex digits.
    Unicode,
}

fn code(b: u8) -> Code {
    if let Some(&(_, letter)) = SHORT_ESCAPES.iter().find(|(byte, _)| *byte == b) {
        Code::Short(letter)
    } else if b < 0x20 {
        Code::Unicode
    } else {
        Code::Plain
    }
}

/// `text` as it is written inside a JSON string (without the quotes): `h` on one string.
pub fn json_escape_bytes(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for &b in text {
        match code(b) {
            Code::Plain => out.push(b),
            Code::Short(letter) => out.extend_from_slice(&[b'\\', letter]),
            Code::Unicode => out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]),
        }
    }
    out
}

/// [`GrammarError::NotText`] when `dfa` reads a byte no UTF-8 text contains.
fn check_text(dfa: &Dfa, what: &str) -> Result<()> {
    let used = dfa.used_bytes();
    match (0..=255u8).find(|&b| is_non_text(b) && used[b as usize]) {
        None => Ok(()),
        Some(b) => Err(GrammarError::NotText {
            detail: format!("{what} reads the byte 0x{b:02X}, which is no text (a special token's marker), so it cannot be inside a JSON string"),
        }),
    }
}

impl Dfa {
    /// A DFA of the JSON string escape of this DFA's language (see the module documentation):
    /// the contents of JSON strings whose decoded value this DFA accepts, each spelled as
    /// [`json_escape_bytes`] spells it. Refuses a DFA that
    /// reads a byte no text contains ([`GrammarError::NotText`]) and a result over
    /// `config.max_states` ([`GrammarError::TooLarge`]).
    pub fn json_escaped(&self, config: &DfaConfig) -> Result<Dfa> {
        check_text(self, "the language")?;
        // Byte classes of the result: the bytes an escape spells after `\` are classes of their
        // own; every other byte keeps this DFA's class; raw control bytes are one class with no
        // transition (they are always escaped).
        let mut classes = [0u8; 256];
        let mut keys: HashMap<(u16, usize), u8> = HashMap::new();
        for b in 0..=255u8 {
            let spelled_in_escapes = SHORT_ESCAPES.iter().any(|&(_, l)| l == b) || b == b'u' || HEX.contains(&b);
            let key = if b < 0x20 {
                (0, usize::MAX)
            } else if spelled_in_escapes {
                (1 + b as u16, 0)
            } else {
                (0, self.class(b))
            };
            let next = keys.len() as u8;
            classes[b as usize] = *keys.entry(key).or_insert(next);
        }
        let stride = keys.len();
        let mut table = Table { stride, trans: Vec::new(), accepting: Vec::new() };
        let n = self.num_states();
        for s in 0..n {
            table.add(self.is_accepting(StateId::from_index(s)));
        }
        let col = |b: u8| classes[b as usize] as usize;
        for s in 0..n {
            let from = StateId::from_index(s);
            let next = |b: u8| self.next(from, b);
            for b in 0x20..=255u8 {
                if code(b) == Code::Plain {
                    table.set(from, col(b), next(b));
                }
            }
            let escaped: Vec<u8> = (0..=255u8).filter(|&b| code(b) != Code::Plain && !next(b).is_dead()).collect();
            if escaped.is_empty() {
                continue;
            }
            let after_backslash = table.add(false);
            table.set(from, col(b'\\'), after_backslash);
            for &(byte, letter) in &SHORT_ESCAPES {
                table.set(after_backslash, col(letter), next(byte));
            }
            let unicode: Vec<u8> = escaped.into_iter().filter(|&b| code(b) == Code::Unicode).collect();
            if unicode.is_empty() {
                continue;
            }
            // `\u`, `\u0`, `\u00`, then the high digit (0 or 1) and the low one.
            let mut at = after_backslash;
            for letter in [b'u', b'0', b'0'] {
                let t = table.add(false);
                table.set(at, col(letter), t);
                at = t;
            }
            for high in 0..2u8 {
                let in_range: Vec<u8> = unicode.iter().copied().filter(|b| b >> 4 == high).collect();
                if in_range.is_empty() {
                    continue;
                }
                let t = table.add(false);
                table.set(at, col(HEX[high as usize]), t);
                for b in in_range {
                    table.set(t, col(HEX[(b & 15) as usize]), next(b));
                }
            }
        }
        let dfa = Dfa::from_table(classes, stride, &table.trans, &table.accepting)
            .ok_or_else(|| GrammarError::EmptyLanguage { detail: "the escaped language has no string".into() })?;
        if dfa.num_states() > config.max_states {
            return Err(GrammarError::TooLarge {
                what: "JSON string escape of a DFA",
                limit: config.max_states,
                detail: format!("{} states", dfa.num_states()),
            });
        }
        Ok(dfa)
    }
}

/// A raw transition table under construction (rows of `stride` targets, dead by default).
struct Table {
    stride: usize,
    trans: Vec<StateId>,
    accepting: Vec<bool>,
}

impl Table {
    fn add(&mut self, accepting: bool) -> StateId {
        let id = StateId::from_index(self.accepting.len());
        self.accepting.push(accepting);
        self.trans.resize(self.trans.len() + self.stride, StateId::DEAD);
        id
    }

    fn set(&mut self, from: StateId, class: usize, to: StateId) {
        if !to.is_dead() {
            self.trans[from.as_usize() * self.stride + class] = to;
        }
    }
}

impl RtnBuilder {
    /// The JSON string escape of `expr` (see the module documentation), an expression over
    /// these rules: each rule it calls, and each rule those call, gets an escaped copy (declared
    /// here, under the same name), and every call becomes a call of the copy. The original
    /// rules are left as they are, so other parts of a grammar may still use them. A rule with
    /// no body gets a copy with no body (building the rules reports it).
    pub fn json_escape(&mut self, expr: &Expr, config: &DfaConfig) -> Result<Expr> {
        let mut escaper = Escaper { config, memo: HashMap::new(), copies: HashMap::new(), todo: Vec::new() };
        let out = escaper.expr(expr, self)?;
        while let Some(rule) = escaper.todo.pop() {
            let Some(body) = self.definition(rule).cloned() else { continue };
            let escaped = escaper.expr(&body, self).map_err(|e| match e {
                GrammarError::NotText { detail } => GrammarError::NotText { detail: format!("rule '{}': {detail}", self.name(rule)) },
                other => other,
            })?;
            let copy = escaper.copies[&rule];
            self.define(copy, escaped);
        }
        Ok(out)
    }
}

/// One escape of an expression and the rules it reaches.
struct Escaper<'a> {
    config: &'a DfaConfig,
    /// Parts already escaped, by the address of their shared node: a part used in many places
    /// (Lark's ignored whitespace between symbols) is escaped once and stays shared.
    memo: HashMap<usize, Expr>,
    /// Each rule called so far, and its escaped copy.
    copies: HashMap<RuleId, RuleId>,
    /// Copies declared whose bodies are not escaped yet.
    todo: Vec<RuleId>,
}

impl Escaper<'_> {
    fn expr(&mut self, e: &Expr, rules: &mut RtnBuilder) -> Result<Expr> {
        let key = match e {
            Expr::Regex(r) => Some(r.as_ptr() as usize),
            Expr::Dfa(d) => Some(Rc::as_ptr(d) as usize),
            Expr::Concat(p) | Expr::Union(p) | Expr::Subsequence(p) => Some(p.as_ptr() as usize),
            Expr::Repeat(inner, _, _) => Some(Rc::as_ptr(inner) as usize),
            Expr::Call(_) | Expr::Empty => None,
        };
        if let Some(hit) = key.and_then(|k| self.memo.get(&k)) {
            return Ok(hit.clone());
        }
        let out = if let Expr::Call(rule) = e {
            Expr::Call(self.copy(*rule, rules)?)
        } else if !e.has_calls() {
            // A regular part: one DFA, escaped as a whole.
            match e.to_dfa(self.config)? {
                None => Expr::Empty,
                Some(d) => Expr::Dfa(Rc::new(d.json_escaped(self.config)?)),
            }
        } else {
            match e {
                Expr::Concat(parts) | Expr::Union(parts) | Expr::Subsequence(parts) => e.with_parts(self.all(parts, rules)?),
                Expr::Repeat(inner, min, max) => Expr::repeat(self.expr(inner, rules)?, *min, *max),
                // Only the kinds above hold calls.
                Expr::Regex(_) | Expr::Dfa(_) | Expr::Call(_) | Expr::Empty => e.clone(),
            }
        };
        if let Some(k) = key {
            self.memo.insert(k, out.clone());
        }
        Ok(out)
    }

    fn all(&mut self, parts: &[Expr], rules: &mut RtnBuilder) -> Result<Vec<Expr>> {
        parts.iter().map(|p| self.expr(p, rules)).collect()
    }

    /// The escaped copy of `rule`, declared (and queued) on first use.
    fn copy(&mut self, rule: RuleId, rules: &mut RtnBuilder) -> Result<RuleId> {
        if let Some(&c) = self.copies.get(&rule) {
            return Ok(c);
        }
        if rule.as_usize() >= rules.len() {
            return Err(GrammarError::invalid_grammar("rules", 0, 0, None, format!("a call of rule {}, which was never declared", rule.as_u32())));
        }
        let name = rules.name(rule).to_string();
        if rules.memory(rule) != Memory::None {
            // Its run-time check reads the element's own text, not an escape of it.
            return Err(GrammarError::invalid_grammar("rules", 0, 0, Some(&name), "an array of distinct elements cannot be written inside a JSON string"));
        }
        let c = rules.declare(&name);
        self.copies.insert(rule, c);
        self.todo.push(rule);
        Ok(c)
    }
}
