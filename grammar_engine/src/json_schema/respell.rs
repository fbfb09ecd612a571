//! Every spelling of a JSON string value: a language over canonical string bodies (see
//! [`super::canonical`]) read back as the language of all the texts that decode to the same
//! strings.
//!
//! JSON lets a string spell each character in several ways: raw UTF-8 (except `"`, `\` and
//! the controls U+0000–U+001F, which must be escaped), a short escape (`\"`, `\\`, `\/`, `\b`,
//! `\f`, `\n`, `\r`, `\t`), or `\uXXXX` with hex digits of either case, a character past
//! U+FFFF as a surrogate pair `\uD83D\uDE00`. Constraints (patterns, formats, lengths, `enum`)
//! are about the decoded characters, and the compiler builds their languages over canonical
//! spellings, one text per string, where lengths can be counted and languages subtracted.
//! [`respell`] then substitutes each character by the union of its spellings.
//!
//! How: the canonical body DFA is walked from each state that sits between two characters (a
//! *boundary*; the UTF-8 continuation states in between are kept as they are). At a boundary
//! `s`, every character `c` leads, by its canonical spelling, to a boundary `t(s, c)`; the
//! characters are mapped to their targets as ranges of code points, found by walking the UTF-8
//! byte ranges with the states memoized. The new `\` transition of `s` reads a short escape
//! into its target, or `u` and four hex digits down a trie over code point blocks: a block whose
//! characters all lead to one target is one chain of states, shared by every boundary with
//! that target, so a character class costs states per distinct target, not per character. A
//! high surrogate leads to a state expecting `\u` and a low surrogate, whose trie covers the
//! astral characters of that high surrogate. Lone surrogates are not generated.
//!
//! Which characters may be written as `\uXXXX` is [`U_ESCAPED`]: the ones writers escape
//! (controls, non-ASCII, the HTML-sensitive `&'<>`), not the ASCII letters, digits and
//! punctuation, whose `\u` forms no common writer produces and which would multiply the states
//! of every pattern, format and enum.

use std::collections::HashMap;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use super::canonical::push_spelling;
use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::util::StateId;

/// The code points whose `\uXXXX` spelling is generated, as sorted ranges. JSON allows it for
/// every character; these are the ones writers use it for: the controls (every writer), `&`,
/// `'`, `<` and `>` (HTML-safe encoders such as Go's), DEL and every non-ASCII character
/// (Python's `ensure_ascii`, its default).
const U_ESCAPED: &[(u32, u32)] = &[(0, 0x1F), (0x26, 0x27), (0x3C, 0x3C), (0x3E, 0x3E), (0x7F, 0x10FFFF)];

fn u_escaped(code: u32) -> bool {
    U_ESCAPED.iter().any(|&(lo, hi)| (lo..=hi).contains(&code))
}

/// The short escape letters and the characters they stand for.
const SHORT: [(u8, u32); 8] =
    [(b'"', 0x22), (b'\\', 0x5C), (b'/', 0x2F), (b'b', 0x08), (b'f', 0x0C), (b'n', 0x0A), (b'r', 0x0D), (b't', 0x09)];

/// Regex text of every spelling of one character (a literal string's character).
pub(crate) fn char_regex(c: char) -> String {
    let code = c as u32;
    let mut alts = Vec::new();
    if code >= 0x20 && c != '"' && c != '\\' {
        alts.push(regex_syntax::escape(c.encode_utf8(&mut [0; 4])));
    }
    for (letter, of) in SHORT {
        if of == code {
            alts.push(regex_syntax::escape(&format!("\\{}", letter as char)));
        }
    }
    if u_escaped(code) {
        let hex = |unit: u32| -> String {
            format!("{unit:04x}").chars().map(|h| if h.is_ascii_alphabetic() { format!("[{h}{}]", h.to_ascii_uppercase()) } else { h.to_string() }).collect()
        };
        if code < 0x10000 {
            alts.push(format!(r"\\u{}", hex(code)));
        } else {
            let v = code - 0x10000;
            alts.push(format!(r"\\u{}\\u{}", hex(0xD800 + (v >> 10)), hex(0xDC00 + (v & 0x3FF))));
        }
    }
    format!("(?:{})", alts.join("|"))
}

/// Regex text of any spelling of any one character (a string the schema leaves open).
pub(crate) const ANY_CHAR: &str = concat!(
    r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]"#,
    r"|\\u00(?:[01][0-9a-fA-F]|2[67]|3[cCeE]|7[fF]|[89a-fA-F][0-9a-fA-F])",
    r"|\\u(?:0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})",
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
);

/// A state of the respelled DFA.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Node {
    /// A state of the canonical DFA, with the UTF-8 continuation bytes still to come (0: a
    /// boundary).
    Raw(StateId, u8),
    /// Reads one hex digit, either case, into the child for its value.
    Hex([u32; 16]),
    /// Reads one of these bytes.
    Bytes(Vec<(u8, u32)>),
}

/// No state: the text cannot continue.
const DEAD: u32 = u32::MAX;

/// Code point ranges and the canonical DFA state each leads to, sorted, adjacent ranges with
/// the same target merged.
type CharMap = Rc<Vec<(u32, u32, StateId)>>;

fn push_range(out: &mut Vec<(u32, u32, StateId)>, lo: u32, hi: u32, t: StateId) {
    match out.last_mut() {
        Some(last) if last.2 == t && last.1 + 1 == lo => last.1 = hi,
        _ => out.push((lo, hi, t)),
    }
}

fn extend_shifted(out: &mut Vec<(u32, u32, StateId)>, ranges: &[(u32, u32, StateId)], base: u32) {
    for &(lo, hi, t) in ranges {
        push_range(out, base + lo, base + hi, t);
    }
}

/// The target of `code` in a map, [`StateId::DEAD`] when it has none.
fn lookup(map: &[(u32, u32, StateId)], code: u32) -> StateId {
    let i = map.partition_point(|&(_, hi, _)| hi < code);
    match map.get(i) {
        Some(&(lo, _, t)) if lo <= code => t,
        _ => StateId::DEAD,
    }
}

/// The one target (possibly none) of every code point in `lo..=hi`, when they share one.
fn uniform(map: &[(u32, u32, StateId)], lo: u32, hi: u32) -> Option<StateId> {
    let i = map.partition_point(|&(_, end, _)| end < lo);
    match map.get(i) {
        None => Some(StateId::DEAD),
        Some(&(start, end, t)) if start <= lo => (end >= hi).then_some(t),
        Some(&(start, _, _)) => (start > hi).then_some(StateId::DEAD),
    }
}

/// The byte kinds UTF-8 tells apart: how many continuation bytes follow a byte, or that it is
/// one.
fn utf8_kind(b: u8) -> u8 {
    match b {
        0x00..=0x7F => 0,
        0x80..=0xBF => 4,
        0xC2..=0xDF => 1,
        0xE0..=0xEF => 2,
        0xF0..=0xF4 => 3,
        _ => 5,
    }
}

struct Respeller<'a> {
    dfa: &'a Dfa,
    nodes: Vec<Node>,
    ids: FxHashMap<Node, u32>,
    /// The `\` transition of each boundary state (DEAD: none).
    escape: FxHashMap<StateId, u32>,
    /// Raw nodes whose transitions are still to be explored.
    queue: Vec<u32>,
    /// Memoized character maps below a state: after a lead byte, by state and the allowed
    /// range of the next byte (offsets from 0x80 continuation bytes).
    below: FxHashMap<(StateId, u8, u8, u8), CharMap>,
    /// The canonical spelling of each ASCII character.
    ascii: Vec<Vec<u8>>,
    limit: usize,
}

impl<'a> Respeller<'a> {
    fn intern(&mut self, node: Node) -> Result<u32> {
        if let Some(&id) = self.ids.get(&node) {
            return Ok(id);
        }
        if self.nodes.len() >= self.limit {
            return Err(GrammarError::TooLarge {
                what: "string escapes automaton",
                limit: self.limit,
                detail: format!("more than {} states spelling escapes", self.limit),
            });
        }
        let id = self.nodes.len() as u32;
        if matches!(node, Node::Raw(..)) {
            self.queue.push(id);
        }
        self.nodes.push(node.clone());
        self.ids.insert(node, id);
        Ok(id)
    }

    fn raw(&mut self, s: StateId, cont: u8) -> Result<u32> {
        if s.is_dead() {
            return Ok(DEAD);
        }
        self.intern(Node::Raw(s, cont))
    }

    /// The characters below `s` with `levels` continuation bytes to come (the first one in
    /// `first_lo..=first_hi`), as offsets: the bits the continuation bytes carry.
    fn below(&mut self, s: StateId, levels: u8, first_lo: u8, first_hi: u8) -> CharMap {
        let key = (s, levels, first_lo, first_hi);
        if let Some(m) = self.below.get(&key) {
            return m.clone();
        }
        let mut out = Vec::new();
        for b in first_lo..=first_hi {
            let t = self.dfa.next(s, b);
            if t.is_dead() {
                continue;
            }
            let base = u32::from(b - 0x80) << (6 * (levels - 1));
            if levels == 1 {
                push_range(&mut out, base, base, t);
            } else {
                let sub = self.below(t, levels - 1, 0x80, 0xBF);
                extend_shifted(&mut out, &sub, base);
            }
        }
        let m = Rc::new(out);
        self.below.insert(key, m.clone());
        m
    }

    /// Every character at boundary `s`, with the boundary its canonical spelling leads to.
    fn char_map(&mut self, s: StateId) -> CharMap {
        let mut out = Vec::new();
        for code in 0..0x80u32 {
            let t = self.dfa.walk(s, &self.ascii[code as usize]);
            if !t.is_dead() {
                push_range(&mut out, code, code, t);
            }
        }
        for lead in 0xC2..=0xF4u8 {
            let s1 = self.dfa.next(s, lead);
            if s1.is_dead() {
                continue;
            }
            let (levels, lo, hi, base) = match lead {
                0xC2..=0xDF => (1, 0x80, 0xBF, u32::from(lead & 0x1F) << 6),
                0xE0 => (2, 0xA0, 0xBF, 0),
                0xED => (2, 0x80, 0x9F, 0xD000),
                0xE1..=0xEF => (2, 0x80, 0xBF, u32::from(lead & 0x0F) << 12),
                0xF0 => (3, 0x90, 0xBF, 0),
                0xF4 => (3, 0x80, 0x8F, 0x10_0000),
                _ => (3, 0x80, 0xBF, u32::from(lead & 0x07) << 18),
            };
            let sub = self.below(s1, levels, lo, hi);
            extend_shifted(&mut out, &sub, base);
        }
        Rc::new(out)
    }


    /// `r` levels of hex digits whose every leaf is `leaf`.
    fn chain(&mut self, leaf: u32, r: u32) -> Result<u32> {
        let mut node = leaf;
        for _ in 0..r {
            if node == DEAD {
                return Ok(DEAD);
            }
            node = self.intern(Node::Hex([node; 16]))?;
        }
        Ok(node)
    }

    /// The trie of the `16^r` code points from `base` (astral ones when `astral`, whose map
    /// is `map` as well), after as many hex digits as fix the block.
    fn block(&mut self, map: &CharMap, r: u32, base: u32, astral: bool) -> Result<u32> {
        let width = 16u32.pow(r);
        let last = base + width - 1;
        if !astral && base <= 0xDFFF && last >= 0xD800 {
            // Surrogates: low ones alone are not characters; a high one begins a pair.
            if base >= 0xDC00 {
                return Ok(DEAD);
            }
            if r == 0 {
                return self.after_high(map, 0x10000 + ((base - 0xD800) << 10));
            }
            if base >= 0xD800 && last <= 0xDBFF {
                let lo = 0x10000 + ((base - 0xD800) << 10);
                if let Some(t) = uniform(map, lo, lo + (width << 10) - 1) {
                    let leaf = self.raw(t, 0)?;
                    let pair = self.low_part(leaf, None, lo)?;
                    return self.chain(pair, r);
                }
            }
        } else if let Some(t) = uniform(map, base, last) {
            let leaf = self.raw(t, 0)?;
            return self.chain(leaf, r);
        }
        let mut children = [DEAD; 16];
        for (h, child) in children.iter_mut().enumerate() {
            *child = self.block(map, r - 1, base + h as u32 * (width / 16), astral)?;
        }
        if children.iter().all(|&c| c == DEAD) {
            return Ok(DEAD);
        }
        self.intern(Node::Hex(children))
    }

    /// After a high surrogate: `\u`, a low surrogate, for the 1024 astral characters from
    /// `lo`.
    fn after_high(&mut self, map: &CharMap, lo: u32) -> Result<u32> {
        if let Some(t) = uniform(map, lo, lo + 0x3FF) {
            let leaf = self.raw(t, 0)?;
            return self.low_part(leaf, None, lo);
        }
        self.low_part(DEAD, Some(map), lo)
    }

    /// `\u`, `d`, one of `c`-`f`, two hex digits: every leaf `leaf`, or (with a map) the trie
    /// of the astral characters from `lo`.
    fn low_part(&mut self, leaf: u32, map: Option<&CharMap>, lo: u32) -> Result<u32> {
        let mut third = [DEAD; 16];
        for (i, h) in (0xC..=0xF).enumerate() {
            third[h] = match map {
                None => self.chain(leaf, 2)?,
                Some(m) => self.block(m, 2, lo + (i as u32) * 256, true)?,
            };
        }
        if third.iter().all(|&c| c == DEAD) {
            return Ok(DEAD);
        }
        let third = self.intern(Node::Hex(third))?;
        let d = self.intern(Node::Bytes(vec![(b'd', third), (b'D', third)]))?;
        let u = self.intern(Node::Bytes(vec![(b'u', d)]))?;
        self.intern(Node::Bytes(vec![(b'\\', u)]))
    }

    /// The `\` transition of boundary `s`: the short escapes and the `\u` trie.
    fn escape_of(&mut self, s: StateId) -> Result<u32> {
        let map = self.char_map(s);
        let mut edges = Vec::new();
        for (letter, code) in SHORT {
            let t = self.raw(lookup(&map, code), 0)?;
            if t != DEAD {
                edges.push((letter, t));
            }
        }
        // The `\u` spellings: the characters of the map that have one.
        let mut escaped = Vec::new();
        for &(lo, hi, t) in map.iter() {
            for &(a, b) in U_ESCAPED {
                if a.max(lo) <= b.min(hi) {
                    push_range(&mut escaped, a.max(lo), b.min(hi), t);
                }
            }
        }
        let u = self.block(&Rc::new(escaped), 4, 0, false)?;
        if u != DEAD {
            edges.push((b'u', u));
        }
        if edges.is_empty() {
            return Ok(DEAD);
        }
        self.intern(Node::Bytes(edges))
    }

    fn run(mut self, config: &DfaConfig) -> Result<Option<Dfa>> {
        self.raw(self.dfa.start(), 0)?;
        let mut popped = 0u32;
        while let Some(id) = self.queue.pop() {
            let Node::Raw(s, cont) = self.nodes[id as usize].clone() else { continue };
            for b in 0..=255u8 {
                let t = self.dfa.next(s, b);
                if t.is_dead() || (cont == 0 && b == b'\\') {
                    continue;
                }
                let next = match (cont, utf8_kind(b)) {
                    (0, k @ 0..=3) => k,
                    (c, 4) if c > 0 => c - 1,
                    _ => continue,
                };
                self.raw(t, next)?;
            }
            if cont == 0 && !self.escape.contains_key(&s) {
                let e = self.escape_of(s)?;
                self.escape.insert(s, e);
            }
            popped = popped.wrapping_add(1);
            if popped % 64 == 0 {
                config.check_deadline("string escapes")?;
            }
        }
        config.check_deadline("string escapes")?;
        Ok(self.table())
    }

    /// The respelled automaton, pruned. It needs no minimization when the canonical one is
    /// minimal and reads canonical spellings only (as the languages the compiler builds over
    /// canonical characters do): every text decodes to one canonical string, so states with
    /// different languages keep different languages when respelled (and states with UTF-8
    /// bytes still to come differ from the others in the bytes they read first), and the trie
    /// states are interned by their children. (A trie state could in principle read the same
    /// as another state, which would cost a row of the token index, not a text; a test checks
    /// that minimizing the respelled automata of patterns, formats and lengths merges nothing.)
    fn table(&self) -> Option<Dfa> {
        // Byte classes: the canonical DFA's, split by UTF-8 kind and by the bytes escapes read.
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut seen: HashMap<(usize, u8, u8), u8> = HashMap::new();
        for b in 0..=255u8 {
            let role = if br#"\"/bfnrtu0123456789abcdefABCDEF"#.contains(&b) { b } else { 0 };
            let key = (self.dfa.class(b), utf8_kind(b), role);
            let next = reps.len() as u8;
            classes[b as usize] = *seen.entry(key).or_insert_with(|| {
                reps.push(b);
                next
            });
        }
        let stride = reps.len();
        let mut trans = vec![StateId::DEAD; self.nodes.len() * stride];
        let mut accepting = vec![false; self.nodes.len()];
        let id = |n: u32| if n == DEAD { StateId::DEAD } else { StateId::from_index(n as usize) };
        for (i, node) in self.nodes.iter().enumerate() {
            let row = &mut trans[i * stride..(i + 1) * stride];
            match node {
                Node::Raw(s, cont) => {
                    accepting[i] = *cont == 0 && self.dfa.is_accepting(*s);
                    for (c, &b) in reps.iter().enumerate() {
                        row[c] = if *cont == 0 && b == b'\\' {
                            id(self.escape.get(s).copied().unwrap_or(DEAD))
                        } else {
                            let t = self.dfa.next(*s, b);
                            let next = match (*cont, utf8_kind(b)) {
                                (0, k @ 0..=3) => Some(k),
                                (c, 4) if c > 0 => Some(c - 1),
                                _ => None,
                            };
                            match next {
                                Some(k) if !t.is_dead() => id(self.ids.get(&Node::Raw(t, k)).copied().unwrap_or(DEAD)),
                                _ => StateId::DEAD,
                            }
                        };
                    }
                }
                Node::Hex(children) => {
                    for (c, &b) in reps.iter().enumerate() {
                        if let Some(v) = (b as char).to_digit(16) {
                            row[c] = id(children[v as usize]);
                        }
                    }
                }
                Node::Bytes(edges) => {
                    for (c, &b) in reps.iter().enumerate() {
                        if let Some(&(_, t)) = edges.iter().find(|(e, _)| *e == b) {
                            row[c] = id(t);
                        }
                    }
                }
            }
        }
        Dfa::prune(classes, stride, &trans, &accepting)
    }
}

/// The language of every spelling of the strings whose canonical bodies `body` accepts (see
/// the module documentation); `None` when it accepts none.
pub(crate) fn respell(body: &Dfa, config: &DfaConfig) -> Result<Option<Dfa>> {
    let limit = config.max_states.saturating_mul(4).max(1024);
    let r = Respeller {
        dfa: body,
        nodes: Vec::new(),
        ids: FxHashMap::default(),
        escape: FxHashMap::default(),
        queue: Vec::new(),
        below: FxHashMap::default(),
        ascii: (0..0x80u8)
            .map(|b| {
                let mut spelling = String::new();
                push_spelling(&mut spelling, char::from(b));
                spelling.into_bytes()
            })
            .collect(),
        limit,
    };
    let out = r.run(config)?;
    if let Some(d) = &out {
        if d.num_states() > config.max_states {
            return Err(GrammarError::TooLarge {
                what: "string escapes automaton",
                limit: config.max_states,
                detail: format!("{} states with every spelling", d.num_states()),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
