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

/// Most leaves kept; past it, the store is emptied.
const MAX_LEAVES: usize = 16_384;

/// Deepest nesting of operators put together here; deeper trees are parsed as text (whose
/// parser limits nesting).
const MAX_DEPTH: usize = 64;

/// Leaves parsed so far, by their text, for every compilation of the process.
static LEAVES: Mutex<Option<HashMap<Box<str>, Hir>>> = Mutex::new(None);

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

/// The syntax tree of one leaf's text, parsed once per process.
fn leaf(pattern: &str) -> Option<Hir> {
    let lock = || LEAVES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(hir) = lock().as_ref().and_then(|known| known.get(pattern)) {
        return Some(hir.clone());
    }
    let hir = parse(pattern).ok()?;
    let mut guard = lock();
    let known = guard.get_or_insert_with(HashMap::new);
    if known.len() >= MAX_LEAVES {
        known.clear();
    }
    known.insert(pattern.into(), hir.clone());
    Some(hir)
}
