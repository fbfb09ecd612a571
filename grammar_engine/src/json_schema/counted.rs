//! Counted repetitions too long for one DFA, as calls of chunk rules.
//!
//! `unit{min,max}` with a large `max` costs a DFA a copy of the unit per count. With rules
//! (a pushdown grammar) the count is split in chunks of [`CHUNK`] units: a rule `E` of exactly
//! `CHUNK` units and a rule `A` of fewer than `CHUNK`, and with `n = max - min = q·CHUNK + r`
//!
//! ```text
//! unit{0,n} = E{0,q-1} A  |  E{q} unit{0,r}
//! ```
//!
//! Every string of at most `n` units splits one way: `k = ⌊length / CHUNK⌋` whole chunks, then
//! what is left (fewer than a chunk, or at most `r` after the last whole one). The calling
//! DFA counts chunks (about `q` states), each chunk rule is one DFA of `CHUNK` units shared by
//! every long repetition of the same unit, and a call returns to its caller, so the stack never
//! grows with the count. The unit must read unambiguously as a sequence (a JSON string's
//! characters, an array's `,`-separated elements), which keeps the readings to a few heads.

use crate::automata::Expr;

/// Units per chunk rule.
pub(super) const CHUNK: u64 = 64;

/// A repetition is split in chunks from this size (optional units times the unit's size, in
/// the Thompson NFA states of `Expr::nfa_size_estimate`): smaller ones stay one automaton,
/// which products (`allOf`, the difference that keeps `oneOf` branches apart) can still take.
pub(super) const LONG: u64 = 8_192;

/// Whether `unit{min,max}` is split in chunks.
pub(super) fn is_long(unit: &Expr, min: u64, max: u64) -> bool {
    let n = max.saturating_sub(min);
    n >= 2 * CHUNK && is_large(unit, n)
}

/// Whether `max` copies of `unit` are large enough to call the unit as a rule instead.
pub(super) fn is_large(unit: &Expr, max: u64) -> bool {
    max >= 2 && max.saturating_mul(unit.nfa_size_estimate(&mut std::collections::HashMap::new())) >= LONG
}

/// The chunk rules of one unit: `exactly` reads `CHUNK` units, `fewer` fewer than `CHUNK`.
#[derive(Debug, Clone)]
pub(super) struct Chunks {
    pub exactly: Expr,
    pub fewer: Expr,
}

/// The bodies of the two chunk rules of `unit`.
pub(super) fn chunk_bodies(unit: &Expr) -> (Expr, Expr) {
    let c = CHUNK as u32;
    (Expr::repeat(unit.clone(), c, Some(c)), Expr::repeat(unit.clone(), 0, Some(c - 1)))
}

/// `unit{min,max}` from the calls of its chunk rules (`chunks.exactly` and `chunks.fewer` are
/// calls), with `unit` itself for the parts shorter than a chunk.
pub(super) fn counted(unit: &Expr, chunks: &Chunks, min: u64, max: u64) -> Expr {
    let whole = |k: u64| Expr::repeat(chunks.exactly.clone(), count(k), Some(count(k)));
    let (m1, m0) = (min / CHUNK, min % CHUNK);
    let n = max - min;
    let (q, r) = (n / CHUNK, n % CHUNK);
    let prefix = Expr::concat(vec![whole(m1), Expr::repeat(unit.clone(), count(m0), Some(count(m0)))]);
    let optional = if q == 0 {
        Expr::repeat(unit.clone(), 0, Some(count(r)))
    } else {
        Expr::union(vec![
            Expr::concat(vec![Expr::repeat(chunks.exactly.clone(), 0, Some(count(q - 1))), chunks.fewer.clone()]),
            Expr::concat(vec![whole(q), Expr::repeat(unit.clone(), 0, Some(count(r)))]),
        ])
    };
    Expr::concat(vec![prefix, optional])
}

pub(super) fn count(n: u64) -> u32 {
    n.min(u64::from(u32::MAX)) as u32
}
