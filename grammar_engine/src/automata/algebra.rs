//! The automaton algebra: languages built from regexes and DFAs by concatenation, union,
//! repetition, intersection and difference, compiled to one minimized [`Dfa`].
//!
//! A regex engine cannot intersect, but a DFA can: the product of two DFAs accepts exactly the
//! strings both accept, and with one side complemented, the strings of the first the second
//! refuses. That is what makes `allOf`, a `pattern` next to length bounds, or `oneOf` as "a
//! union minus the overlaps" exact rather than refused.
//!
//! An [`Expr`] is a tree whose leaves are regex text or already-built DFAs; its nodes are
//! shared (`Rc`), so a subschema's language is reused wherever it occurs for the cost of a
//! reference count. A tree of regex leaves only (the common case) is rendered as one regex and
//! compiled as a plain pattern would be. Otherwise each maximal regex-only subtree is compiled
//! on its own, the DFAs are glued into one NFA by the tree's operators
//! ([`crate::automata::glued_nfa`]), and the subset construction determinizes the whole. Intersection
//! and difference are products on [`Dfa`]s, so [`Expr::and`] and [`Expr::minus`] build their
//! operands at once and give back a DFA leaf.
//!
//! Empty languages are values here ([`Expr::Empty`]), not errors: an intersection may well be
//! empty, and a union simply drops an empty branch.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::automata::calls::{bytes_dfa, call_bytes};
use crate::automata::glued_nfa::{GluedNfa, SharedDfa};
use crate::util::int_hash::IntMap;
use crate::util::{RuleId, StateId};
use crate::automata::subset::NodeId;

/// Longest regex text rendered for a regex-only subtree.
const MAX_REGEX_LEN: usize = 16 << 20;

/// A shared part of an expression, by address (and, for a repeat, its bounds).
type SharedKey = (usize, u64, Option<u32>);

/// A language, as an expression over regexes and DFAs.
#[derive(Debug, Clone)]
pub enum Expr {
    /// The strings that fully match a regex (regex-automata syntax, Unicode mode, no anchors).
    Regex(Rc<str>),
    /// The strings a DFA accepts.
    Dfa(Rc<Dfa>),
    /// One string of each part, in order.
    Concat(Rc<[Expr]>),
    /// The strings of any part.
    Union(Rc<[Expr]>),
    /// `min` to `max` (unbounded when `None`) strings of the inner language, concatenated.
    Repeat(Rc<Expr>, u32, Option<u32>),
    /// The non-empty ordered subsequences of the items, separated: the first part is the
    /// separator, the rest the items (at least two). Built as a graph in which each item
    /// appears once (see [`Expr::subsequence`]).
    Subsequence(Rc<[Expr]>),
    /// A call of a rule of a pushdown grammar: compiled as the call's spelling
    /// ([`crate::automata::calls`]), which the pushdown layer reads back as a call.
    Call(RuleId),
    /// No string at all.
    Empty,
}

impl Expr {
    /// The language of a regex.
    pub fn regex(text: impl Into<String>) -> Expr {
        Expr::Regex(Rc::from(text.into()))
    }

    /// The language of exactly one string.
    pub fn literal(text: &str) -> Expr {
        Expr::regex(regex_syntax::escape(text))
    }

    /// The empty string's language (the unit of concatenation).
    pub fn epsilon() -> Expr {
        Expr::Regex(Rc::from(""))
    }

    pub fn concat(parts: Vec<Expr>) -> Expr {
        if parts.iter().any(|p| matches!(p, Expr::Empty)) {
            return Expr::Empty;
        }
        let mut flat = Vec::with_capacity(parts.len());
        for p in parts {
            match p {
                Expr::Concat(inner) => flat.extend(inner.iter().cloned()),
                Expr::Regex(r) if r.is_empty() => {}
                other => flat.push(other),
            }
        }
        match flat.len() {
            0 => Expr::epsilon(),
            1 => flat.pop().unwrap_or(Expr::Empty),
            _ => Expr::Concat(flat.into()),
        }
    }

    pub fn union(parts: Vec<Expr>) -> Expr {
        let mut flat = Vec::with_capacity(parts.len());
        for p in parts {
            match p {
                Expr::Union(inner) => flat.extend(inner.iter().cloned()),
                Expr::Empty => {}
                other => flat.push(other),
            }
        }
        match flat.len() {
            0 => Expr::Empty,
            1 => flat.pop().unwrap_or(Expr::Empty),
            _ => Expr::Union(flat.into()),
        }
    }

    pub fn repeat(inner: Expr, min: u32, max: Option<u32>) -> Expr {
        if max == Some(0) {
            return Expr::epsilon();
        }
        if matches!(inner, Expr::Empty) {
            return if min == 0 { Expr::epsilon() } else { Expr::Empty };
        }
        if min == 1 && max == Some(1) {
            return inner;
        }
        Expr::Repeat(Rc::new(inner), min, max)
    }

    /// The non-empty ordered subsequences of `items`, each two separated by `sep`: an
    /// object's optional members in their declared order.
    ///
    /// As a regular expression each item would be written twice (once as the first, once
    /// after a separator: `N(k) = N(k-1) (sep m_k)? | m_k`), and its states twice in a DFA
    /// until minimization merges them. As a graph each item is written once: a chain of
    /// choices enters item `i` or skips on to the next choice; the start is the first choice,
    /// and after item `i` a separator leads to choice `i + 1`.
    pub fn subsequence(items: Vec<Expr>, sep: Expr) -> Expr {
        let mut items: Vec<Expr> = items.into_iter().filter(|e| !e.is_empty()).collect();
        match items.len() {
            0 => Expr::Empty,
            1 => items.pop().unwrap_or(Expr::Empty),
            _ => {
                items.insert(0, sep);
                Expr::Subsequence(items.into())
            }
        }
    }

    /// The inner language or the empty string.
    pub fn optional(inner: Expr) -> Expr {
        Expr::repeat(inner, 0, Some(1))
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Expr::Empty)
    }

    /// True when the language calls a rule somewhere ([`Expr::Call`]): it is then a rule body
    /// of a pushdown grammar, not a regular language, and cannot enter a product.
    pub fn has_calls(&self) -> bool {
        fn walk(e: &Expr, seen: &mut HashSet<usize>) -> bool {
            match e {
                Expr::Call(_) => true,
                Expr::Regex(_) | Expr::Dfa(_) | Expr::Empty => false,
                // A shared part already seen had no call (else the walk would have stopped).
                Expr::Concat(parts) | Expr::Union(parts) | Expr::Subsequence(parts) => {
                    seen.insert(parts.as_ptr() as usize) && parts.iter().any(|p| walk(p, seen))
                }
                Expr::Repeat(inner, _, _) => seen.insert(Rc::as_ptr(inner) as usize) && walk(inner, seen),
            }
        }
        walk(self, &mut HashSet::new())
    }

    /// The rules this expression calls, each once, in order of first appearance.
    pub fn calls(&self) -> Vec<RuleId> {
        fn walk(e: &Expr, out: &mut Vec<RuleId>, seen: &mut HashSet<usize>) {
            match e {
                Expr::Call(r) => {
                    if !out.contains(r) {
                        out.push(*r);
                    }
                }
                Expr::Regex(_) | Expr::Dfa(_) | Expr::Empty => {}
                Expr::Concat(parts) | Expr::Union(parts) | Expr::Subsequence(parts) => {
                    if seen.insert(parts.as_ptr() as usize) {
                        parts.iter().for_each(|p| walk(p, out, seen))
                    }
                }
                Expr::Repeat(inner, _, _) => {
                    if seen.insert(Rc::as_ptr(inner) as usize) {
                        walk(inner, out, seen)
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out, &mut HashSet::new());
        out
    }

    /// The same expression with every call of a rule that `body` gives a body for replaced by
    /// that body (shared, not copied); other calls stay.
    pub fn substitute(&self, body: &dyn Fn(RuleId) -> Option<Expr>) -> Expr {
        self.substituted(body, &mut HashMap::new()).unwrap_or_else(|| self.clone())
    }

    /// [`Expr::substitute`] in one pass over the expression, each shared part visited once
    /// (`memo`, by the part's address): `None` when nothing under `self` changed.
    fn substituted(&self, body: &dyn Fn(RuleId) -> Option<Expr>, memo: &mut HashMap<SharedKey, Option<Expr>>) -> Option<Expr> {
        let key = match self {
            Expr::Call(r) => return body(*r),
            Expr::Regex(_) | Expr::Dfa(_) | Expr::Empty => return None,
            Expr::Concat(p) => (p.as_ptr() as usize, 0, None),
            Expr::Union(p) => (p.as_ptr() as usize, 1, None),
            Expr::Subsequence(p) => (p.as_ptr() as usize, 2, None),
            Expr::Repeat(inner, min, max) => (Rc::as_ptr(inner) as usize, 3 + *min as u64, *max),
        };
        if let Some(done) = memo.get(&key) {
            return done.clone();
        }
        let out = match self {
            Expr::Concat(parts) | Expr::Union(parts) | Expr::Subsequence(parts) => {
                let new: Vec<Option<Expr>> = parts.iter().map(|p| p.substituted(body, memo)).collect();
                if new.iter().all(Option::is_none) {
                    None
                } else {
                    let parts = new.into_iter().zip(parts.iter()).map(|(n, p)| n.unwrap_or_else(|| p.clone())).collect();
                    Some(self.with_parts(parts))
                }
            }
            Expr::Repeat(inner, min, max) => inner.substituted(body, memo).map(|i| Expr::repeat(i, *min, *max)),
            _ => unreachable!("returned above"),
        };
        memo.insert(key, out.clone());
        out
    }

    /// The strings both languages contain (built now: a DFA leaf, or [`Expr::Empty`]). Neither
    /// side may call a rule ([`GrammarError::NotRegular`]).
    pub fn and(&self, other: &Expr, config: &DfaConfig) -> Result<Expr> {
        not_regular(self, other, "an intersection")?;
        let (Some(a), Some(b)) = (self.shared_dfa(config)?, other.shared_dfa(config)?) else {
            return Ok(Expr::Empty);
        };
        Ok(product(&a, &b, Op::And, config)?.map_or(Expr::Empty, |d| Expr::Dfa(Rc::new(d))))
    }

    /// The strings of this language that `other` does not contain (built now). Neither side may
    /// call a rule ([`GrammarError::NotRegular`]).
    pub fn minus(&self, other: &Expr, config: &DfaConfig) -> Result<Expr> {
        not_regular(self, other, "a difference")?;
        let Some(a) = self.shared_dfa(config)? else { return Ok(Expr::Empty) };
        let Some(b) = other.shared_dfa(config)? else { return Ok(Expr::Dfa(a)) };
        Ok(product(&a, &b, Op::Minus, config)?.map_or(Expr::Empty, |d| Expr::Dfa(Rc::new(d))))
    }

    /// The same language as a DFA leaf (built now, once: an operand used in several products
    /// is determinized only the first time); [`Expr::Empty`] when it has no string.
    pub fn built(&self, config: &DfaConfig) -> Result<Expr> {
        Ok(self.shared_dfa(config)?.map_or(Expr::Empty, Expr::Dfa))
    }

    /// [`Expr::to_dfa`], without copying a DFA leaf.
    fn shared_dfa(&self, config: &DfaConfig) -> Result<Option<Rc<Dfa>>> {
        match self {
            Expr::Dfa(d) => Ok(Some(d.clone())),
            _ => Ok(self.to_dfa(config)?.map(Rc::new)),
        }
    }

    /// Compiles the language to a minimized DFA (a DFA leaf as it is); `None` when it has no
    /// string.
    pub fn to_dfa(&self, config: &DfaConfig) -> Result<Option<Dfa>> {
        if let Expr::Dfa(d) = self {
            return Ok(Some((**d).clone()));
        }
        if config.nfa_states_factor.is_some() {
            // Building an NFA of millions of states takes seconds; estimate it first (in the
            // states a Thompson NFA would have, the unit of the limit).
            // The estimate runs about twice the real size (median 1.9× over the automata of
            // JSONSchemaBench's slowest schemas), hence twice the NFA limit; none it refused
            // there would have fitted.
            config.check_nfa_states(self.nfa_size_estimate(&mut HashMap::new()), true)?;
        }
        if self.is_regex_only() {
            return match Dfa::shared_from_tree(self, config).map(Arc::unwrap_or_clone) {
                Ok(d) => Ok(Some(d)),
                Err(GrammarError::EmptyLanguage { .. }) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let config = &config.with_memo();
        let mut nfa = NfaBuilder::new(config);
        let (start, end) = nfa.emit(self, config)?;
        let matched = nfa.b.add_match()?;
        nfa.b.patch(end, matched);
        match nfa.b.determinize(start, config) {
            Ok(d) => Ok(Some(d)),
            Err(GrammarError::EmptyLanguage { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// An expression of the same kind as `self` (a concatenation, a union or a subsequence)
    /// over new parts.
    pub(crate) fn with_parts(&self, parts: Vec<Expr>) -> Expr {
        match self {
            Expr::Concat(_) => Expr::concat(parts),
            Expr::Union(_) => Expr::union(parts),
            Expr::Subsequence(_) => {
                let mut parts = parts.into_iter();
                let sep = parts.next().unwrap_or(Expr::Empty);
                Expr::subsequence(parts.collect(), sep)
            }
            _ => unreachable!("only kinds with parts are rebuilt from parts"),
        }
    }

    /// Identifies this expression while it is alive: equal for clones (they share their
    /// node), different for expressions built separately. For keying caches by language.
    pub(crate) fn identity(&self) -> (u8, usize) {
        match self {
            Expr::Regex(r) => (0, r.as_ptr() as usize),
            Expr::Dfa(d) => (1, Rc::as_ptr(d) as usize),
            Expr::Concat(p) => (2, p.as_ptr() as usize),
            Expr::Union(p) => (3, p.as_ptr() as usize),
            Expr::Repeat(inner, _, _) => (4, Rc::as_ptr(inner) as usize),
            Expr::Call(r) => (5, r.as_usize()),
            Expr::Empty => (6, 0),
            Expr::Subsequence(p) => (7, p.as_ptr() as usize),
        }
    }

    /// About how many states the Thompson NFA of this expression has (shared nodes counted
    /// at each use, as the NFA copies them), without building it. `memo` holds the estimates
    /// of shared nodes by address.
    pub(crate) fn nfa_size_estimate(&self, memo: &mut HashMap<usize, u64>) -> u64 {
        let key = match self {
            Expr::Regex(r) => r.as_ptr() as usize,
            Expr::Concat(p) | Expr::Union(p) | Expr::Subsequence(p) => p.as_ptr() as usize,
            Expr::Repeat(inner, _, _) => Rc::as_ptr(inner) as usize,
            Expr::Dfa(d) => return d.num_states() as u64 * 2,
            Expr::Call(_) => return 8,
            Expr::Empty => return 1,
        };
        if let Some(&n) = memo.get(&key) {
            return n;
        }
        let n = match self {
            Expr::Regex(r) => regex_size_estimate(r),
            Expr::Concat(parts) | Expr::Union(parts) => {
                parts.iter().fold(1u64, |acc, p| acc.saturating_add(p.nfa_size_estimate(memo)))
            }
            // The items once, a choice before each and a separator between each two.
            Expr::Subsequence(parts) => {
                let Some((sep, items)) = parts.split_first() else { return 1 };
                let seps = sep.nfa_size_estimate(memo).saturating_mul(items.len().saturating_sub(1) as u64);
                items.iter().fold(seps.saturating_add(1), |acc, p| acc.saturating_add(p.nfa_size_estimate(memo)).saturating_add(2))
            }
            Expr::Repeat(inner, min, max) => {
                let copies = repeat_copies(*min, *max);
                inner.nfa_size_estimate(memo).saturating_mul(copies).saturating_add(2)
            }
            Expr::Dfa(_) | Expr::Call(_) | Expr::Empty => unreachable!("returned above"),
        };
        memo.insert(key, n);
        n
    }

    /// True when every leaf is regex text (so the whole renders as one regex).
    fn is_regex_only(&self) -> bool {
        match self {
            Expr::Regex(_) | Expr::Empty => true,
            // A regex would write each item twice: built as a graph instead.
            Expr::Dfa(_) | Expr::Call(_) | Expr::Subsequence(_) => false,
            Expr::Concat(parts) | Expr::Union(parts) => parts.iter().all(Expr::is_regex_only),
            Expr::Repeat(inner, _, _) => inner.is_regex_only(),
        }
    }

    /// The regex of a regex-only tree.
    pub(crate) fn render(&self) -> Result<String> {
        let mut out = String::new();
        self.render_into(&mut out)?;
        Ok(out)
    }

    fn render_into(&self, out: &mut String) -> Result<()> {
        match self {
            Expr::Regex(r) => {
                out.push_str("(?:");
                out.push_str(r);
                out.push(')');
            }
            Expr::Empty => out.push_str("[^\\x00-\\x{10FFFF}]"),
            Expr::Dfa(_) | Expr::Call(_) | Expr::Subsequence(_) => {
                unreachable!("render is only called on regex-only trees")
            }
            Expr::Concat(parts) => {
                for p in parts.iter() {
                    p.render_into(out)?;
                }
            }
            Expr::Union(parts) => {
                out.push_str("(?:");
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    p.render_into(out)?;
                }
                out.push(')');
            }
            Expr::Repeat(inner, min, max) => {
                out.push_str("(?:");
                inner.render_into(out)?;
                out.push(')');
                match max {
                    Some(max) => out.push_str(&format!("{{{min},{max}}}")),
                    None => out.push_str(&format!("{{{min},}}")),
                }
            }
        }
        if out.len() > MAX_REGEX_LEN {
            return Err(GrammarError::TooLarge {
                what: "regex of a grammar expression",
                limit: MAX_REGEX_LEN,
                detail: "nested repetitions and alternatives spell out too much regex text".into(),
            });
        }
        Ok(())
    }
}

/// Most bytes of pattern text [`regex_size_estimate`] keeps estimates for; past it, the store
/// is emptied.
const MAX_ESTIMATED_BYTES: usize = 8 << 20;

/// The estimates of regex texts already parsed, with the bytes of text they hold: kept for
/// every compilation of the process, since parsing a pattern again costs far more than the
/// lookup and schemas share most of their pieces.
static ESTIMATES: Mutex<Option<Estimates>> = Mutex::new(None);

/// Estimates by regex text, and the bytes of text they hold.
type Estimates = (HashMap<Box<str>, u64>, usize);

/// About how many NFA states a regex text has (see [`Expr::nfa_size_estimate`]).
fn regex_size_estimate(r: &str) -> u64 {
    let lock = || ESTIMATES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((known, _)) = lock().as_ref() {
        if let Some(&n) = known.get(r) {
            return n;
        }
    }
    let n = match crate::automata::regex_tree::leaf(r) {
        Some(hir) => hir_size(&hir),
        None => r.len() as u64,
    };
    if r.len() <= MAX_ESTIMATED_BYTES {
        let mut guard = lock();
        let (known, bytes) = guard.get_or_insert_with(Default::default);
        if *bytes + r.len() > MAX_ESTIMATED_BYTES {
            known.clear();
            *bytes = 0;
        }
        if known.insert(r.into(), n).is_none() {
            *bytes += r.len();
        }
    }
    n
}

/// How many copies of a repeated body the estimate counts. Capped at 16: a large counted
/// repetition of a small body often compiles (as a minimized DFA of its own) to far fewer
/// states than its copies, and an estimate must err low, not refuse what would fit.
fn repeat_copies(min: u32, max: Option<u32>) -> u64 {
    u64::from(max.unwrap_or(min.saturating_add(1)).max(min).clamp(1, 16))
}

/// About how many Thompson NFA states a regex's syntax tree compiles to: a literal byte or a
/// byte class is one, a Unicode class one per UTF-8 sequence of its ranges, a counted
/// repetition copies its body.
fn hir_size(hir: &regex_syntax::hir::Hir) -> u64 {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(lit) => lit.0.len() as u64,
        HirKind::Class(Class::Bytes(_)) => 1,
        HirKind::Class(Class::Unicode(c)) => c
            .iter()
            .map(|r| regex_syntax::utf8::Utf8Sequences::new(r.start(), r.end()).count() as u64)
            .sum::<u64>()
            .max(1),
        HirKind::Repetition(rep) => {
            let copies = repeat_copies(rep.min, rep.max);
            hir_size(&rep.sub).saturating_mul(copies).saturating_add(1)
        }
        HirKind::Capture(cap) => hir_size(&cap.sub),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => {
            parts.iter().fold(1u64, |acc, p| acc.saturating_add(hir_size(p)))
        }
    }
}

/// A [`GluedNfa`] under construction from an expression.
struct NfaBuilder {
    b: GluedNfa,
}

impl NfaBuilder {
    fn new(config: &DfaConfig) -> NfaBuilder {
        NfaBuilder { b: GluedNfa::new(config) }
    }

    /// Adds the fragment of `expr`; returns its entry and its exit (a union node to patch).
    fn emit(&mut self, expr: &Expr, config: &DfaConfig) -> Result<(NodeId, NodeId)> {
        if expr.is_regex_only() {
            // A subtree that appears again is built once (the config's memo, see `to_dfa`).
            return match Dfa::shared_from_tree(expr, config) {
                Ok(d) => self.b.embed(SharedDfa::Arc(d)),
                Err(GrammarError::EmptyLanguage { .. }) => self.fail(),
                Err(e) => Err(e),
            };
        }
        match expr {
            Expr::Dfa(d) => self.b.embed(SharedDfa::Rc(d.clone())),
            Expr::Call(rule) => self.b.embed(SharedDfa::Rc(Rc::new(bytes_dfa(&call_bytes(*rule))))),
            Expr::Concat(parts) => {
                let (start, mut end) = self.emit(&parts[0], config)?;
                for p in &parts[1..] {
                    let (s, e) = self.emit(p, config)?;
                    self.b.patch(end, s);
                    end = e;
                }
                Ok((start, end))
            }
            Expr::Union(parts) => {
                let start = self.b.add_union()?;
                let end = self.b.add_union()?;
                for p in parts.iter() {
                    let (s, e) = self.emit(p, config)?;
                    self.b.patch(start, s);
                    self.b.patch(e, end);
                }
                Ok((start, end))
            }
            Expr::Repeat(inner, min, max) => {
                let start = self.b.add_union()?;
                let mut end = start;
                for _ in 0..*min {
                    let (s, e) = self.emit(inner, config)?;
                    self.b.patch(end, s);
                    end = e;
                }
                match max {
                    None => {
                        // end -> loop: either one more copy (back to loop) or out.
                        let lp = self.b.add_union()?;
                        let out = self.b.add_union()?;
                        self.b.patch(end, lp);
                        let (s, e) = self.emit(inner, config)?;
                        self.b.patch(lp, s);
                        self.b.patch(lp, out);
                        self.b.patch(e, lp);
                        Ok((start, out))
                    }
                    Some(max) => {
                        // Each optional copy may be skipped to the common exit.
                        let out = self.b.add_union()?;
                        for _ in *min..*max {
                            let fork = self.b.add_union()?;
                            self.b.patch(end, fork);
                            let (s, e) = self.emit(inner, config)?;
                            self.b.patch(fork, s);
                            self.b.patch(fork, out);
                            end = e;
                        }
                        self.b.patch(end, out);
                        Ok((start, out))
                    }
                }
            }
            Expr::Subsequence(parts) => {
                let Some((sep, items)) = parts.split_first() else { return self.fail() };
                if items.is_empty() {
                    return self.fail();
                }
                let out = self.b.add_union()?;
                // `enter[i]` enters item i or skips to `enter[i + 1]`: the start, and where the
                // separator after item i - 1 leads.
                let enter: Vec<NodeId> = items.iter().map(|_| self.b.add_union()).collect::<Result<_>>()?;
                for (i, item) in items.iter().enumerate() {
                    let (s, e) = self.emit(item, config)?;
                    self.b.patch(enter[i], s);
                    self.b.patch(e, out);
                    if let Some(&next) = enter.get(i + 1) {
                        self.b.patch(enter[i], next);
                        let (ss, se) = self.emit(sep, config)?;
                        self.b.patch(e, ss);
                        self.b.patch(se, next);
                    }
                }
                Ok((enter[0], out))
            }
            Expr::Regex(_) | Expr::Empty => unreachable!("regex-only trees are handled above"),
        }
    }

    /// A fragment that matches nothing: a union with no moves, and an exit nothing reaches.
    fn fail(&mut self) -> Result<(NodeId, NodeId)> {
        Ok((self.b.add_union()?, self.b.add_union()?))
    }
}

/// [`GrammarError::NotRegular`] when either operand of a product calls a rule: a product is
/// over byte strings, and a call stands for a context-free language.
fn not_regular(a: &Expr, b: &Expr, what: &str) -> Result<()> {
    if a.has_calls() || b.has_calls() {
        return Err(GrammarError::NotRegular { detail: format!("{what} of languages that call rules") });
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Minus,
}

/// The product of two DFAs: `And` accepts what both accept, `Minus` what `a` accepts and `b`
/// does not. Byte classes are refined so each product class is one class of each side. In a
/// `Minus` product, `b` may die ([`StateId::DEAD`]): from there it refuses everything, so only `a`
/// decides.
fn product(a: &Dfa, b: &Dfa, op: Op, config: &DfaConfig) -> Result<Option<Dfa>> {
    let mut classes = [0u8; 256];
    let mut pair_class: HashMap<(usize, usize), u8> = HashMap::new();
    let mut reps: Vec<(usize, usize)> = Vec::new();
    for byte in 0..=255u8 {
        let key = (a.class(byte), b.class(byte));
        let next = reps.len();
        let c = *pair_class.entry(key).or_insert_with(|| {
            reps.push(key);
            next as u8
        });
        classes[byte as usize] = c;
    }
    let stride = reps.len();
    // Not `raw_state_limit`: a product's pairs are often dead (no accepting pair ahead), and
    // pruning them often brings a table too large to minimize under the limit (on the slowest
    // JSONSchemaBench schemas, products of 134,000-181,000 raw states pruned to 70,000-95,000).
    let limit = config.max_states.saturating_mul(2).saturating_add(64);
    // Pairs by `a`'s state in the high half and `b`'s in the low one.
    let pair = |sa: StateId, sb: StateId| (sa.as_u32() as u64) << 32 | sb.as_u32() as u64;
    let mut ids: IntMap<u64, StateId> = IntMap::default();
    let mut order: Vec<(StateId, StateId)> = vec![(a.start(), b.start())];
    ids.insert(pair(a.start(), b.start()), StateId::new(0));
    let mut trans: Vec<StateId> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let (sa, sb) = order[i];
        i += 1;
        if i % 1024 == 0 {
            config.check_deadline("a product of two automata")?;
        } else if i % 64 == 0 {
            crate::util::background::pause_point();
        }
        for &(ca, cb) in &reps {
            let ta = a.row(sa)[ca];
            let tb = if sb.is_dead() { StateId::DEAD } else { b.row(sb)[cb] };
            if ta.is_dead() || (op == Op::And && tb.is_dead()) {
                trans.push(StateId::DEAD);
                continue;
            }
            let key = pair(ta, tb);
            let id = match ids.get(&key) {
                Some(&id) => id,
                None => {
                    if order.len() >= limit {
                        return Err(GrammarError::TooLarge {
                            what: "product of two automata",
                            limit: config.max_states,
                            detail: format!("more than {} states while intersecting", order.len()),
                        });
                    }
                    let id = StateId::from_index(order.len());
                    ids.insert(key, id);
                    order.push((ta, tb));
                    id
                }
            };
            trans.push(id);
        }
    }
    let accepting: Vec<bool> = order
        .iter()
        .map(|&(sa, sb)| {
            let in_b = !sb.is_dead() && b.is_accepting(sb);
            a.is_accepting(sa) && if op == Op::And { in_b } else { !in_b }
        })
        .collect();
    let dfa = Dfa::from_table(classes, stride, &trans, &accepting);
    if let Some(d) = &dfa {
        if d.num_states() > config.max_states {
            return Err(GrammarError::TooLarge {
                what: "product of two automata",
                limit: config.max_states,
                detail: format!("{} live states", d.num_states()),
            });
        }
    }
    Ok(dfa)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> DfaConfig {
        DfaConfig::default()
    }

    fn accepts(e: &Expr, s: &str) -> bool {
        let Some(d) = e.to_dfa(&cfg()).unwrap() else { return false };
        let t = d.walk(d.start(), s.as_bytes());
        !t.is_dead() && d.is_accepting(t)
    }

    #[test]
    fn intersection_is_exact() {
        let pattern = Expr::regex("[a-z]*q[a-z]*");
        let length = Expr::regex("[a-z]{2,4}");
        let both = pattern.and(&length, &cfg()).unwrap();
        for (s, ok) in [("q", false), ("aq", true), ("qqqq", true), ("abcde", false), ("abcq", true), ("ab", false)] {
            assert_eq!(accepts(&both, s), ok, "{s}");
        }
        assert!(Expr::regex("a+").and(&Expr::regex("b+"), &cfg()).unwrap().is_empty());
    }

    #[test]
    fn difference_removes_the_overlap() {
        let digits = Expr::regex("[0-9]+");
        let small = Expr::regex("[0-9]{1,2}");
        let big = digits.minus(&small, &cfg()).unwrap();
        assert!(accepts(&big, "123") && !accepts(&big, "12") && !accepts(&big, "1"));
        assert!(small.minus(&digits, &cfg()).unwrap().is_empty());
        // Strings `b` rejects after dying count: "ab" is not in "a", so it stays.
        let d = Expr::regex("ab?").minus(&Expr::regex("a"), &cfg()).unwrap();
        assert!(accepts(&d, "ab") && !accepts(&d, "a"));
    }

    #[test]
    fn dfa_leaves_compose_with_regex_leaves() {
        let inner = Expr::regex("[a-z]+").and(&Expr::regex("[a-c]{3}"), &cfg()).unwrap();
        let e = Expr::concat(vec![Expr::literal("{"), inner.clone(), Expr::regex(",?"), Expr::literal("}")]);
        assert!(accepts(&e, "{abc}") && accepts(&e, "{cab,}") && !accepts(&e, "{ab}") && !accepts(&e, "{abd}"));
        let u = Expr::union(vec![inner.clone(), Expr::regex("x")]);
        assert!(accepts(&u, "x") && accepts(&u, "bbb") && !accepts(&u, "xx"));
        let r = Expr::repeat(Expr::concat(vec![inner.clone(), Expr::literal(";")]), 2, Some(3));
        assert!(accepts(&r, "abc;cba;") && accepts(&r, "abc;cba;aaa;") && !accepts(&r, "abc;"));
        assert!(!accepts(&r, "abc;abc;abc;abc;"));
        let star = Expr::repeat(inner, 0, None);
        assert!(accepts(&star, "") && accepts(&star, "abcabcabc") && !accepts(&star, "ab"));
    }

    #[test]
    fn empty_languages_are_values() {
        let none = Expr::regex("a").and(&Expr::regex("b"), &cfg()).unwrap();
        assert!(none.is_empty());
        assert!(Expr::concat(vec![Expr::regex("x"), none.clone()]).is_empty());
        let u = Expr::union(vec![none.clone(), Expr::regex("y")]);
        assert!(accepts(&u, "y"));
        assert!(matches!(Expr::repeat(none, 0, Some(3)), Expr::Regex(ref r) if r.is_empty()));
        assert!(Expr::Empty.to_dfa(&cfg()).unwrap().is_none());
    }

    #[test]
    fn unicode_survives_products_and_embedding() {
        let e = Expr::regex("[^\"]{1,3}").and(&Expr::regex(".*é.*"), &cfg()).unwrap();
        let wrapped = Expr::concat(vec![Expr::literal("\""), e, Expr::literal("\"")]);
        assert!(accepts(&wrapped, "\"é\"") && accepts(&wrapped, "\"aéb\"") && !accepts(&wrapped, "\"abc\""));
        assert!(!accepts(&wrapped, "\"aébc\""));
    }

    #[test]
    fn products_respect_the_state_limit() {
        let small = DfaConfig { max_states: 20, ..DfaConfig::default() };
        let a = Expr::regex("[a-z]{30}");
        let b = Expr::regex("[a-m]*");
        assert!(matches!(a.and(&b, &small), Err(GrammarError::TooLarge { .. })));
    }
}
