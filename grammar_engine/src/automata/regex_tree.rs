//! The syntax tree of a regex-only expression, put together from its leaves' trees.
//!
//! A tree of regex leaves ([`Expr`] without DFAs, calls or subsequences) is one regex: its
//! rendered text is the memo's key, so the same subtree in another rule or schema is built
//! once. On a miss, parsing the rendered text would read every leaf again (an object's
//! members, a long enum, the string and number pieces every schema shares). Here each leaf is
//! parsed once per process and the operators are applied to the leaves' trees, which gives
//! the syntax tree the rendered text parses to. A leaf that does not parse, or a tree nested
//! deeper than [`MAX_DEPTH`], is left to the parse of the whole text, which says where it goes
//! wrong as before.

use std::collections::HashMap;
use std::sync::Mutex;

use regex_syntax::hir::{Hir, Repetition};

use super::algebra::Expr;
use super::parse::parse;

/// Most bytes the kept leaves' trees hold (as [`tree_bytes`] counts them); past it, the store
/// is emptied. A leaf larger than an eighth of it is parsed each time.
const MAX_KEPT_BYTES: usize = 8 << 20;

/// Deepest nesting of operators put together here; deeper trees are parsed as text (whose
/// parser limits nesting).
const MAX_DEPTH: usize = 64;

/// Leaves parsed so far, by their text, for every compilation of the process, and the bytes
/// they hold.
static LEAVES: Mutex<Option<(HashMap<Box<str>, Hir>, usize)>> = Mutex::new(None);

/// The syntax tree of the regex-only `expr`; `None` when a leaf does not parse on its own or
/// the tree is nested too deep (the caller parses the rendered text instead).
pub(crate) fn hir(expr: &Expr) -> Option<Hir> {
    tree(expr, 0)
}

fn tree(expr: &Expr, depth: usize) -> Option<Hir> {
    if depth > MAX_DEPTH {
        return None;
    }
    let all = |parts: &[Expr]| parts.iter().map(|p| tree(p, depth + 1)).collect::<Option<Vec<Hir>>>();
    Some(match expr {
        Expr::Regex(r) => leaf(r)?,
        Expr::Empty => Hir::fail(),
        Expr::Concat(parts) => Hir::concat(all(parts)?),
        Expr::Union(parts) => Hir::alternation(all(parts)?),
        Expr::Repeat(inner, min, max) => {
            Hir::repetition(Repetition { min: *min, max: *max, greedy: true, sub: Box::new(tree(inner, depth + 1)?) })
        }
        Expr::Dfa(_) | Expr::Call(_) | Expr::Subsequence(_) => return None,
    })
}

/// The syntax tree of one leaf's text, parsed once per process (the size estimates of
/// [`Expr::nfa_size_estimate`] read it too); `None` when it does not parse.
pub(crate) fn leaf(pattern: &str) -> Option<Hir> {
    let lock = || LEAVES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(hir) = lock().as_ref().and_then(|(known, _)| known.get(pattern)) {
        return Some(hir.clone());
    }
    let hir = parse(pattern).ok()?;
    let size = pattern.len() + tree_bytes(&hir);
    if size <= MAX_KEPT_BYTES / 8 {
        let mut guard = lock();
        let (known, bytes) = guard.get_or_insert_with(Default::default);
        if *bytes + size > MAX_KEPT_BYTES {
            known.clear();
            *bytes = 0;
        }
        if known.insert(pattern.into(), hir.clone()).is_none() {
            *bytes += size;
        }
    }
    Some(hir)
}

/// About how many bytes a syntax tree holds: its nodes, literals and class ranges (a Unicode
/// class of a few characters of text can hold thousands of ranges).
fn tree_bytes(hir: &Hir) -> usize {
    use regex_syntax::hir::{Class, HirKind};
    const NODE: usize = 64;
    NODE + match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(lit) => lit.0.len(),
        HirKind::Class(Class::Unicode(c)) => c.ranges().len() * 8,
        HirKind::Class(Class::Bytes(c)) => c.ranges().len() * 2,
        HirKind::Repetition(rep) => tree_bytes(&rep.sub),
        HirKind::Capture(cap) => tree_bytes(&cap.sub),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => parts.iter().map(tree_bytes).sum(),
    }
}
