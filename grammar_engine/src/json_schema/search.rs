//! The search language of a parsed pattern: the canonical spellings (see [`super::canonical`]) of
//! the strings in which the pattern finds a match, as an [`Expr`].
//!
//! JSON Schema patterns are unanchored searches over the decoded string, but the grammar
//! constrains the encoded text between the quotes. Each top-level alternative is handled on
//! its own:
//!
//! - Leading `^` and trailing `$` anchor it; otherwise it is padded with "any canonical
//!   characters" on that side. If nothing else asserts anything, the alternative becomes one
//!   regex over encoded text (each character set replaced by its spellings) — the fast path,
//!   taken by nearly every real pattern and by every format.
//! - Lookaheads right after a leading `^` and lookbehinds right before a trailing `$` become
//!   intersections and differences: `^(?=A)(?!B)R` is `search(^A) ∩ search(^R) − search(^B)`.
//!   Lookaround anywhere else is refused.
//! - Assertions anywhere else (`(^|,)x`, `\bword\b`) go through an automaton over code points:
//!   a Thompson NFA whose assertion edges are resolved by pairing each state with the kind of
//!   the previous character and testing each edge against the kind of the next. The resolved
//!   NFA is spelled out over bytes, character sets becoming UTF-8 ranges and escapes, and
//!   determinized by regex-automata.
//!
//! `\b` and `\B` must hold for both ECMA-262 (ASCII word characters) and Python's `re` (Unicode
//! word characters): a boundary next to a non-ASCII word character is one for ECMA-262 but not
//! for Python, so neither assertion is taken to hold there. `\B` never holds in the empty
//! string (Python's older rule).

use std::collections::HashMap;
use std::rc::Rc;

use regex_automata::nfa::thompson::{self, Transition};
use regex_syntax::hir::ClassUnicode;
use regex_syntax::utf8::Utf8Sequences;

use super::canonical::{self, CANONICAL_CHAR};
use super::context::Ctx;
use super::pattern::{self, Around, Look, Node};
use crate::automata::Expr;
use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};

/// Most states of the code-point automaton (before and after resolving assertions).
const MAX_NFA_STATES: usize = 2_000_000;

/// The canonical texts (no quotes) of the strings in which `node` finds a match.
///
/// Plain alternatives (no assertion but their edge anchors, no lookaround) with the same
/// anchors share one regex, `any*(?:a|b|…)any*` rather than `any*a any*|any*b any*|…`: the
/// same strings, but a determinization of the latter tracks which alternatives have matched
/// so far (one state per subset of them, for "contains one of 50 words"), where the former's
/// states are only how far each word has got.
pub(crate) fn search_language(node: &Node, ctx: &Ctx, config: &DfaConfig) -> Result<Expr> {
    let alternatives: Vec<&Node> = match node {
        Node::Alt(v) => v.iter().collect(),
        other => vec![other],
    };
    let mut parts = Vec::with_capacity(alternatives.len());
    // Bodies of plain alternatives, by (anchored at the start, anchored at the end).
    let mut plain: Vec<((bool, bool), Vec<String>)> = Vec::new();
    for alt in alternatives {
        let split = Split::of(alt, ctx)?;
        if split.lookarounds.is_empty() && !split.body.iter().any(|n| pattern::has_assertions(n)) {
            let mut text = String::new();
            split.body.iter().for_each(|n| encode(n, &mut text));
            let anchors = (split.anchored_start, split.anchored_end);
            match plain.iter_mut().find(|(a, _)| *a == anchors) {
                Some((_, bodies)) => bodies.push(text),
                None => plain.push((anchors, vec![text])),
            }
        } else {
            parts.push(split.language(ctx, config)?);
        }
    }
    for ((anchored_start, anchored_end), bodies) in plain {
        parts.push(plain_regex(anchored_start, anchored_end, &bodies));
    }
    Ok(Expr::union(parts))
}

/// A pattern whose matching strings are a finite head, a run of one character class and a
/// finite tail: `^X C{min,max} Y$` as written (`^https?://[^ ]+$`, `^[a-z]+\.json$`), or a
/// finite `^X` or `Y$` with any characters after or before it. Regexes are over canonical
/// text; lengths count characters.
pub(crate) struct Run {
    /// The regexes of the head and the tail.
    pub head: String,
    pub tail: String,
    /// The shortest and longest head, and tail.
    pub head_lengths: (u64, u64),
    pub tail_lengths: (u64, u64),
    /// The regex of one character of the run.
    pub char: String,
    /// Least and most characters in the run.
    pub min: u64,
    pub max: Option<u64>,
}

/// `node` in the form of a [`Run`], when it has that form and asserts nothing but its edge
/// anchors.
pub(crate) fn run_of(node: &Node, ctx: &Ctx) -> Option<Run> {
    if matches!(node, Node::Alt(_)) {
        return None;
    }
    let split = Split::of(node, ctx).ok()?;
    if !split.lookarounds.is_empty() || split.body.iter().any(|n| pattern::has_assertions(n)) {
        return None;
    }
    let body = &split.body[..];
    let any = || (CANONICAL_CHAR.to_string(), 0, None);
    let (head, (char, min, max), tail) = match (split.anchored_start, split.anchored_end) {
        (true, true) => {
            let at = body.iter().position(|n| char_lengths(n).is_none())?;
            let Node::Repeat(inner, min, max) = body[at] else { return None };
            let Node::Set(set) = inner.as_ref() else { return None };
            (&body[..at], (canonical::set_regex(set), u64::from(*min), max.map(u64::from)), &body[at + 1..])
        }
        (true, false) => (body, any(), &body[..0]),
        (false, true) => (&body[..0], any(), body),
        (false, false) => return None,
    };
    let lengths = |part: &[&Node]| {
        part.iter().try_fold((0u64, 0u64), |(a, b), n| {
            let (x, y) = char_lengths(n)?;
            Some((a.saturating_add(x), b.saturating_add(y)))
        })
    };
    let (head_lengths, tail_lengths) = (lengths(head)?, lengths(tail)?);
    let text = |part: &[&Node]| {
        let mut text = String::new();
        part.iter().for_each(|n| encode(n, &mut text));
        text
    };
    Some(Run { head: text(head), tail: text(tail), head_lengths, tail_lengths, char, min, max })
}

/// The shortest and longest texts `node` matches, in characters; `None` when it has no
/// longest (or matches nothing).
fn char_lengths(node: &Node) -> Option<(u64, u64)> {
    match node {
        Node::Empty | Node::Look(_) => Some((0, 0)),
        Node::Set(_) => Some((1, 1)),
        Node::Concat(v) => v.iter().try_fold((0u64, 0u64), |(a, b), n| {
            let (x, y) = char_lengths(n)?;
            Some((a.saturating_add(x), b.saturating_add(y)))
        }),
        Node::Alt(v) => v.iter().map(char_lengths).try_fold(None, |acc: Option<(u64, u64)>, r| {
            let (x, y) = r?;
            Some(Some(acc.map_or((x, y), |(a, b)| (a.min(x), b.max(y)))))
        })?,
        Node::Repeat(n, min, Some(max)) => {
            let (a, b) = char_lengths(n)?;
            Some((a.saturating_mul(u64::from(*min)), b.saturating_mul(u64::from(*max))))
        }
        Node::Repeat(_, _, None) | Node::Around(..) => None,
    }
}

/// The regex of any of `bodies` (encoded regex text), padded with "any canonical characters"
/// on each side that is not anchored.
fn plain_regex(anchored_start: bool, anchored_end: bool, bodies: &[String]) -> Expr {
    let any = format!("{CANONICAL_CHAR}*");
    let mut text = String::new();
    if !anchored_start {
        text.push_str(&any);
    }
    text.push_str("(?:");
    text.push_str(&bodies.join("|"));
    text.push(')');
    if !anchored_end {
        text.push_str(&any);
    }
    Expr::regex(text)
}

fn flatten<'n>(node: &'n Node, out: &mut Vec<&'n Node>) {
    match node {
        Node::Concat(v) => v.iter().for_each(|n| flatten(n, out)),
        Node::Empty => {}
        other => out.push(other),
    }
}

/// One top-level alternative of a pattern, split into its edge anchors, the lookarounds next
/// to them, and the body between.
struct Split<'n> {
    anchored_start: bool,
    anchored_end: bool,
    lookarounds: Vec<(Around, &'n Node)>,
    body: Vec<&'n Node>,
}

impl<'n> Split<'n> {
    /// Splits `node`; lookaround anywhere else than at an anchored edge is refused.
    fn of(node: &'n Node, ctx: &Ctx) -> Result<Split<'n>> {
        let mut items = Vec::new();
        flatten(node, &mut items);
        let mut i = 0;
        while matches!(items.get(i), Some(Node::Look(Look::Start))) {
            i += 1;
        }
        let anchored_start = i > 0;
        let mut lookarounds: Vec<(Around, &Node)> = Vec::new();
        if anchored_start {
            while let Some(Node::Around(a, inner)) = items.get(i) {
                if !a.ahead {
                    break;
                }
                lookarounds.push((*a, inner));
                i += 1;
            }
        }
        let mut j = items.len();
        while j > i && matches!(items[j - 1], Node::Look(Look::End)) {
            j -= 1;
        }
        let anchored_end = j < items.len();
        while anchored_end && j > i {
            match items[j - 1] {
                Node::Around(a, inner) if !a.ahead => lookarounds.push((*a, inner)),
                _ => break,
            }
            j -= 1;
        }
        let body = items[i..j].to_vec();
        if let Some(a) = body.iter().find_map(|n| first_around(n)) {
            return Err(ctx.unsupported(
                "pattern",
                format!(
                    "{} is supported only right after a leading ^ (lookahead) or right before a trailing $ (lookbehind)",
                    a.syntax()
                ),
            ));
        }
        Ok(Split { anchored_start, anchored_end, lookarounds, body })
    }

    /// The search language of the alternative.
    fn language(&self, ctx: &Ctx, config: &DfaConfig) -> Result<Expr> {
        let mut language = if self.body.iter().any(|n| pattern::has_assertions(n)) {
            let mut core: Vec<Node> = Vec::with_capacity(self.body.len() + 2);
            if self.anchored_start {
                core.push(Node::Look(Look::Start));
            }
            core.extend(self.body.iter().map(|n| (*n).clone()));
            if self.anchored_end {
                core.push(Node::Look(Look::End));
            }
            assertion_language(&Node::Concat(core), config)?
        } else {
            let mut text = String::new();
            self.body.iter().for_each(|n| encode(n, &mut text));
            plain_regex(self.anchored_start, self.anchored_end, &[text])
        };
        for &(around, inner) in &self.lookarounds {
            let probe = if around.ahead {
                Node::Concat(vec![Node::Look(Look::Start), inner.clone()])
            } else {
                Node::Concat(vec![inner.clone(), Node::Look(Look::End)])
            };
            let sub = search_language(&probe, ctx, config)?;
            language = if around.negate { language.minus(&sub, config)? } else { language.and(&sub, config)? };
        }
        Ok(language)
    }
}

fn first_around(node: &Node) -> Option<Around> {
    match node {
        Node::Around(a, _) => Some(*a),
        Node::Concat(v) | Node::Alt(v) => v.iter().find_map(first_around),
        Node::Repeat(n, _, _) => first_around(n),
        _ => None,
    }
}

/// Appends the regex of the encoded texts `node` matches in full (no assertions inside).
pub(crate) fn encode(node: &Node, out: &mut String) {
    match node {
        Node::Empty | Node::Look(_) | Node::Around(..) => {}
        Node::Set(set) => out.push_str(&canonical::set_regex(set)),
        Node::Concat(v) => v.iter().for_each(|n| encode(n, out)),
        Node::Alt(v) => {
            out.push_str("(?:");
            for (k, n) in v.iter().enumerate() {
                if k > 0 {
                    out.push('|');
                }
                encode(n, out);
            }
            out.push(')');
        }
        Node::Repeat(n, min, max) => {
            out.push_str("(?:");
            encode(n, out);
            out.push(')');
            match max {
                Some(max) => out.push_str(&format!("{{{min},{max}}}")),
                None => out.push_str(&format!("{{{min},}}")),
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Edge {
    Eps(usize),
    Look(Look, usize),
    Set(usize, usize),
}

/// A Thompson NFA over code points, with assertion edges.
struct CharNfa {
    edges: Vec<Vec<Edge>>,
    sets: Vec<ClassUnicode>,
    set_ids: HashMap<Vec<(char, char)>, usize>,
}

impl CharNfa {
    fn state(&mut self) -> Result<usize> {
        if self.edges.len() >= MAX_NFA_STATES {
            return Err(GrammarError::TooLarge {
                what: "pattern automaton",
                limit: MAX_NFA_STATES,
                detail: "counted repetitions spell out too many states".into(),
            });
        }
        self.edges.push(Vec::new());
        Ok(self.edges.len() - 1)
    }

    fn intern(&mut self, set: ClassUnicode) -> usize {
        let key: Vec<(char, char)> = set.ranges().iter().map(|r| (r.start(), r.end())).collect();
        if let Some(&id) = self.set_ids.get(&key) {
            return id;
        }
        self.sets.push(set);
        self.set_ids.insert(key, self.sets.len() - 1);
        self.sets.len() - 1
    }

    /// Adds the fragment of `node`: its entry and exit states.
    fn build(&mut self, node: &Node) -> Result<(usize, usize)> {
        match node {
            Node::Empty => {
                let s = self.state()?;
                Ok((s, s))
            }
            Node::Set(set) => {
                let (s, e) = (self.state()?, self.state()?);
                let id = self.intern(set.clone());
                self.edges[s].push(Edge::Set(id, e));
                Ok((s, e))
            }
            Node::Look(look) => {
                let (s, e) = (self.state()?, self.state()?);
                self.edges[s].push(Edge::Look(*look, e));
                Ok((s, e))
            }
            Node::Concat(v) => {
                let start = self.state()?;
                let mut end = start;
                for n in v {
                    let (s, e) = self.build(n)?;
                    self.edges[end].push(Edge::Eps(s));
                    end = e;
                }
                Ok((start, end))
            }
            Node::Alt(v) => {
                let (start, end) = (self.state()?, self.state()?);
                for n in v {
                    let (s, e) = self.build(n)?;
                    self.edges[start].push(Edge::Eps(s));
                    self.edges[e].push(Edge::Eps(end));
                }
                Ok((start, end))
            }
            Node::Repeat(inner, min, max) => {
                let start = self.state()?;
                let mut end = start;
                for _ in 0..*min {
                    let (s, e) = self.build(inner)?;
                    self.edges[end].push(Edge::Eps(s));
                    end = e;
                }
                let out = self.state()?;
                match max {
                    None => {
                        let (s, e) = self.build(inner)?;
                        self.edges[end].push(Edge::Eps(s));
                        self.edges[end].push(Edge::Eps(out));
                        self.edges[e].push(Edge::Eps(end));
                    }
                    Some(max) => {
                        for _ in *min..*max {
                            let (s, e) = self.build(inner)?;
                            self.edges[end].push(Edge::Eps(s));
                            self.edges[end].push(Edge::Eps(out));
                            end = e;
                        }
                        self.edges[end].push(Edge::Eps(out));
                    }
                }
                Ok((start, out))
            }
            Node::Around(a, _) => Err(GrammarError::UnsupportedRegex {
                construct: a.syntax().into(),
                reason: "look-around inside an assertion pattern".into(),
            }),
        }
    }
}

/// Kinds of neighbouring characters, as the assertions see them. Kind 0 is "no character" (the
/// start, for the previous one; the end, for the next one). With word boundaries in play the
/// characters are ASCII word characters (word characters to both engines), [`non_word`]
/// characters (word characters to neither) and the rest, next to which neither `\b` nor `\B`
/// is taken to hold. The rest holds the non-ASCII word characters, which the engines disagree
/// on, and, for a small automaton, the non-ASCII characters outside `non_word`'s short list.
struct Kinds {
    sets: Vec<ClassUnicode>,
    words: bool,
}

const ASCII_WORD: u8 = 1;
/// Kind 2, the characters next to which no word-boundary assertion holds, is never tested.
const NON_WORD: u8 = 3;

impl Kinds {
    fn new(words: bool) -> Kinds {
        let mut all = ClassUnicode::empty();
        all.negate();
        if !words {
            return Kinds { sets: vec![ClassUnicode::empty(), all], words };
        }
        let ascii = pattern::ascii_word();
        let non = non_word();
        let mut other = all;
        other.difference(&ascii);
        other.difference(&non);
        Kinds { sets: vec![ClassUnicode::empty(), ascii, other, non], words }
    }

    fn holds(&self, look: Look, prev: u8, next: u8) -> bool {
        // Kind 2 (uncertain) is neither side for sure.
        let nonword_side = |k: u8| k == 0 || k == NON_WORD;
        let same_sure = (prev == ASCII_WORD && next == ASCII_WORD) || (nonword_side(prev) && nonword_side(next));
        let differ_sure =
            (prev == ASCII_WORD && nonword_side(next)) || (nonword_side(prev) && next == ASCII_WORD);
        match look {
            Look::Start => prev == 0,
            Look::End => next == 0,
            _ if !self.words => false,
            Look::WordBoundary => differ_sure,
            // Python's older `\B` does not match the empty string.
            Look::NotWordBoundary => same_sure && !(prev == 0 && next == 0),
            Look::AnyWordBoundary => !same_sure,
            Look::AnyNotWordBoundary => !differ_sure,
        }
    }
}

/// Characters neither ECMA-262 nor Python's `re` counts as word characters: ASCII punctuation,
/// spaces and controls, Latin-1 punctuation and symbols, General Punctuation (assigned part) and
/// the first CJK punctuation marks.
fn non_word() -> ClassUnicode {
    let r = |a: char, b: char| regex_syntax::hir::ClassUnicodeRange::new(a, b);
    let mut set = ClassUnicode::new([
        r('\u{0}', '/'),
        r(':', '@'),
        r('[', '^'),
        r('`', '`'),
        r('{', '\u{A9}'),
        r('\u{AB}', '\u{B1}'),
        r('\u{B4}', '\u{B4}'),
        r('\u{B6}', '\u{B8}'),
        r('\u{BB}', '\u{BB}'),
        r('\u{BF}', '\u{BF}'),
        r('\u{D7}', '\u{D7}'),
        r('\u{F7}', '\u{F7}'),
        r('\u{2000}', '\u{2064}'),
        r('\u{3000}', '\u{3003}'),
    ]);
    set.difference(&pattern::python_word_superset());
    set
}

/// The search language of a pattern with assertions in arbitrary places.
fn assertion_language(node: &Node, config: &DfaConfig) -> Result<Expr> {
    let mut nfa = CharNfa { edges: Vec::new(), sets: Vec::new(), set_ids: HashMap::new() };
    let mut any = ClassUnicode::empty();
    any.negate();
    let any_id = nfa.intern(any);
    let (s, e) = nfa.build(node)?;
    // Search: any prefix before the match, any suffix after it.
    let start = nfa.state()?;
    nfa.edges[start].push(Edge::Set(any_id, start));
    nfa.edges[start].push(Edge::Eps(s));
    let fin = nfa.state()?;
    nfa.edges[e].push(Edge::Eps(fin));
    nfa.edges[fin].push(Edge::Set(any_id, fin));

    let words = nfa.edges.iter().flatten().any(|e| matches!(e, Edge::Look(look, _) if !matches!(look, Look::Start | Look::End)));
    let kinds = Kinds::new(words);
    let resolved = resolve(&nfa, start, fin, &kinds)?;
    spell_out(&resolved, config)
}

/// An NFA over code points without assertions: state 0 is the start; edges are (set, target)
/// with sets indexed in `sets`.
struct Resolved {
    edges: Vec<Vec<(usize, usize)>>,
    accepting: Vec<bool>,
    sets: Vec<ClassUnicode>,
}

/// Pairs each NFA state with the kind of the previous character and resolves assertion edges
/// against the kind of the next one.
fn resolve(nfa: &CharNfa, start: usize, fin: usize, kinds: &Kinds) -> Result<Resolved> {
    let n_kinds = kinds.sets.len() as u8;
    let mut ids: HashMap<(usize, u8), usize> = HashMap::new();
    let mut order: Vec<(usize, u8)> = vec![(start, 0)];
    ids.insert((start, 0), 0);
    let mut out = Resolved { edges: Vec::new(), accepting: Vec::new(), sets: Vec::new() };
    let mut set_ids: HashMap<Vec<(char, char)>, usize> = HashMap::new();
    let mut stamp = vec![0u32; nfa.edges.len()];
    let mut generation = 0u32;
    // Each NFA set cut down to the characters of one kind (None: no such character).
    let mut cut: HashMap<(usize, u8), Option<ClassUnicode>> = HashMap::new();
    let mut i = 0;
    while i < order.len() {
        let (q, prev) = order[i];
        i += 1;
        let mut by_target: HashMap<usize, ClassUnicode> = HashMap::new();
        let mut accepting = false;
        for next in 0..n_kinds {
            generation += 1;
            let mut stack = vec![q];
            stamp[q] = generation;
            while let Some(r) = stack.pop() {
                if r == fin && next == 0 {
                    accepting = true;
                }
                for &edge in &nfa.edges[r] {
                    let target = match edge {
                        Edge::Eps(t) => t,
                        Edge::Look(look, t) if kinds.holds(look, prev, next) => t,
                        Edge::Look(..) => continue,
                        Edge::Set(_, _) if next == 0 => continue,
                        Edge::Set(set, t) => {
                            let part = cut.entry((set, next)).or_insert_with(|| {
                                let mut s = nfa.sets[set].clone();
                                s.intersect(&kinds.sets[next as usize]);
                                (!s.ranges().is_empty()).then_some(s)
                            });
                            let Some(part) = part else { continue };
                            let key = (t, next);
                            let id = match ids.get(&key) {
                                Some(&id) => id,
                                None => {
                                    if order.len() >= MAX_NFA_STATES {
                                        return Err(GrammarError::TooLarge {
                                            what: "pattern automaton",
                                            limit: MAX_NFA_STATES,
                                            detail: "too many states while resolving assertions".into(),
                                        });
                                    }
                                    ids.insert(key, order.len());
                                    order.push(key);
                                    order.len() - 1
                                }
                            };
                            by_target.entry(id).or_insert_with(ClassUnicode::empty).union(part);
                            continue;
                        }
                    };
                    if stamp[target] != generation {
                        stamp[target] = generation;
                        stack.push(target);
                    }
                }
            }
        }
        let mut edges = Vec::with_capacity(by_target.len());
        for (target, set) in by_target {
            let key: Vec<(char, char)> = set.ranges().iter().map(|r| (r.start(), r.end())).collect();
            let id = *set_ids.entry(key).or_insert_with(|| {
                out.sets.push(set);
                out.sets.len() - 1
            });
            edges.push((id, target));
        }
        edges.sort_unstable();
        out.edges.push(edges);
        out.accepting.push(accepting);
    }
    Ok(out)
}

fn too_large(e: thompson::BuildError, config: &DfaConfig) -> GrammarError {
    GrammarError::TooLarge { what: "pattern automaton", limit: config.build_size_limit, detail: e.to_string() }
}

/// Spells a resolved NFA out over canonical bytes and determinizes it.
fn spell_out(resolved: &Resolved, config: &DfaConfig) -> Result<Expr> {
    let err = |e| too_large(e, config);
    let mut b = thompson::Builder::new();
    b.set_size_limit(Some(config.build_size_limit)).map_err(err)?;
    b.set_utf8(true);
    b.start_pattern().map_err(err)?;
    let matched = b.add_match().map_err(err)?;
    let mut entry = Vec::with_capacity(resolved.edges.len());
    for _ in 0..resolved.edges.len() {
        entry.push(b.add_union(Vec::new()).map_err(err)?);
    }
    let mut sequences: HashMap<usize, Vec<Vec<(u8, u8)>>> = HashMap::new();
    for (p, edges) in resolved.edges.iter().enumerate() {
        for &(set, target) in edges {
            let seqs = sequences.entry(set).or_insert_with(|| byte_sequences(&resolved.sets[set]));
            for seq in seqs.iter() {
                let mut next = entry[target];
                for &(start, end) in seq.iter().rev() {
                    next = b.add_range(Transition { start, end, next }).map_err(err)?;
                }
                b.patch(entry[p], next).map_err(err)?;
            }
        }
        if resolved.accepting[p] {
            b.patch(entry[p], matched).map_err(err)?;
        }
    }
    b.finish_pattern(entry[0]).map_err(err)?;
    let built = b.build(entry[0], entry[0]).map_err(err)?;
    match Dfa::from_nfa(&built, config) {
        Ok(d) => Ok(Expr::Dfa(Rc::new(d))),
        Err(GrammarError::EmptyLanguage { .. }) => Ok(Expr::Empty),
        Err(e) => Err(e),
    }
}

/// The byte-range sequences spelling one character of `set`: UTF-8 of the safe characters,
/// the escapes of the others.
fn byte_sequences(set: &ClassUnicode) -> Vec<Vec<(u8, u8)>> {
    let spell = canonical::spellings(set);
    let mut out = Vec::new();
    for r in spell.safe.ranges() {
        for seq in Utf8Sequences::new(r.start(), r.end()) {
            out.push(seq.as_slice().iter().map(|r| (r.start, r.end)).collect());
        }
    }
    for e in spell.escapes {
        out.push(e.bytes().map(|b| (b, b)).collect());
    }
    out
}

#[cfg(test)]
mod tests;
