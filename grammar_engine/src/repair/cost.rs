//! The edit-cost models: what each move costs, in the units the search adds up.
//!
//! Two models share one shape ([`Weights`]):
//!
//! * [`CostModel::Edit`]: plain weighted edit distance, one price per edit kind;
//! * [`CostModel::Intent`]: prices that depend on the context of the move, so that the cheapest
//!   repair is the one a person would make. The context is the class of the DFA state the move
//!   leaves ([`StateClass`]: before the value, after it, inside a free string, or in structure)
//!   and the class of the bytes involved (whitespace, quote, punctuation, other), plus one
//!   feature of the text: a `'` that stands where a JSON quote would (after `{[,:` or before
//!   `}],:`) costs something to *keep*, so single-quoted strings get their quotes swapped
//!   instead of being kept inside a string. Its weights ([`IntentWeights::DEFAULT`]) were
//!   fitted on a training corpus (`bench/repair_fit.py`) and are frozen.
//!
//! Every price is a non-negative integer, so the search stays an exact shortest path: the
//! answer is optimal for its model and valid by construction.
//!
//! Many repairs tie on price, and the tie should go to the one that disturbs the text least,
//! so the search works in finer internal units that add a tie-breaking "damage" to each edit.
//! This module is the only place that knows how the two are folded together.

use super::RepairOptions;
#[cfg(test)]
use super::{Edit, EditKind};

/// Internal costs are `u64`; `INF` means unseen / none.
pub(super) const INF: u64 = u64::MAX;

/// How edits are priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CostModel {
    /// `insert_cost`, `delete_cost` and `substitute_cost` of [`RepairOptions`], anywhere.
    Edit,
    /// Context-dependent prices (see the module documentation).
    Intent(IntentWeights),
}

/// The weights of [`CostModel::Intent`], in model units (a typical edit costs about 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntentWeights {
    /// Deleting any byte before the value starts (prose, code fences).
    pub delete_before: u32,
    /// Deleting any byte after the value ends, past the point where the text's first value
    /// closes (by a tolerant bracket count); earlier, the tail of a truncated value is content,
    /// priced as structure.
    pub delete_after: u32,
    /// Deleting a non-whitespace byte in structure (between tokens, in keys, enums, numbers).
    pub delete_structure: u32,
    /// Deleting whitespace in structure.
    pub delete_space: u32,
    /// Deleting a byte inside a free string (content).
    pub delete_string: u32,
    /// Inserting one of `{}[],:`.
    pub insert_punct: u32,
    /// Inserting `"`.
    pub insert_quote: u32,
    /// Inserting `\\`.
    pub insert_escape: u32,
    /// Inserting any other byte.
    pub insert_other: u32,
    /// Replacing a byte outside a free string.
    pub substitute: u32,
    /// Replacing a byte inside a free string (content).
    pub substitute_string: u32,
    /// Replacing `'` or `` ` `` by `"`.
    pub substitute_quote: u32,
    /// Replacing an ASCII letter by the same letter in the other case, or a raw newline, tab or
    /// carriage return after a `\\` by the letter of its escape.
    pub substitute_near: u32,
    /// Keeping a `'` that stands where a JSON quote would.
    pub keep_quote: u32,
    /// Keeping a non-space byte outside the text's bracketed values: before the first `{` or
    /// `[`, or after the last value closes. Prose kept inside a string value pays it.
    pub keep_outside: u32,
}

impl IntentWeights {
    /// The frozen default, fitted on `bench/data/repair_train.json` by `bench/repair_fit.py`
    /// (173 of its 189 cases repaired to the intended value).
    pub const DEFAULT: IntentWeights = IntentWeights {
        delete_before: 1,
        delete_after: 1,
        delete_structure: 6,
        delete_space: 1,
        delete_string: 20,
        insert_punct: 4,
        insert_quote: 12,
        insert_escape: 14,
        insert_other: 12,
        substitute: 12,
        substitute_string: 20,
        substitute_quote: 3,
        substitute_near: 3,
        keep_quote: 6,
        keep_outside: 4,
    };
}

/// What the model knows about a DFA state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum StateClass {
    /// Reached from the start by whitespace only: nothing of the value yet.
    Before,
    /// Accepting, and only whitespace may follow: the value is complete.
    After,
    /// Almost every printable byte continues: inside a free string.
    String,
    /// Anything else: between tokens, inside keys, enums, numbers, literals.
    Structure,
}

/// A byte class for insertion prices. Groups of transitions are split by it (see `groups`),
/// so each group's representative is also its cheapest byte.
#[inline]
pub(super) fn insert_class(b: u8) -> u8 {
    match b {
        b'"' => 1,
        b'{' | b'}' | b'[' | b']' | b',' | b':' => 2,
        b'\\' => 3,
        _ => 0,
    }
}

/// How many classes [`insert_class`] has.
pub(super) const INSERT_CLASSES: usize = 4;

#[inline]
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The byte a substitution of `old` would favour, if any: `"` for a quote-like byte, the
/// other case for a letter, the letter of its escape for a raw newline, tab or carriage
/// return (priced as near only outside a free string, that is right after a `\\`). The search
/// tries it besides each group's representative.
#[inline]
pub(super) fn special_target(old: u8) -> Option<u8> {
    match old {
        b'\'' | b'`' => Some(b'"'),
        b'\n' => Some(b'n'),
        b'\t' => Some(b't'),
        b'\r' => Some(b'r'),
        _ if old.is_ascii_alphabetic() => Some(old ^ 0x20),
        _ => None,
    }
}

/// The search minimizes `(cost, damage)` lexicographically, where `damage` breaks ties between
/// repairs of equal cost in favour of the one that disturbs the text least: each edit counts 2
/// per "content" byte it removes or writes (ASCII letters and digits, and non-ASCII bytes) and
/// 1 per original byte it removes. So a missing quote is inserted (`"Ada}` becomes `"Ada"}`,
/// not `"Ad"}`) and a trailing comma is deleted (`[1,]` becomes `[1]`, not `[1,1]`).
///
/// Both parts are folded into one internal `u64`: `cost << 32 | damage`. Damage grows by at
/// most 5 per edit, so it stays below 2^32 on any path of fewer than 858 million edits, and
/// the order on internal values is the lexicographic order; an internal bound `x` bounds the
/// cost by `x >> 32`. Heuristic values are cost bounds shifted left (damage bound 0), which
/// keeps them consistent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Weights {
    del_before: u64,
    del_after: u64,
    del_structure: u64,
    del_space: u64,
    del_string: u64,
    ins: [u64; INSERT_CLASSES],
    sub: u64,
    sub_string: u64,
    sub_quote: u64,
    sub_near: u64,
    keep_quote: u64,
    keep_outside: u64,
    /// The most keeping a byte may cost: the cheapest plain substitution.
    keep_cap: u64,
    /// Where the text's first bracketed value closes ([`Spans::first_end`]).
    tail: usize,
    min_insert: u64,
    min_edit: u64,
}

#[inline]
fn content(b: u8) -> u64 {
    (b.is_ascii_alphanumeric() || b >= 0x80) as u64
}

/// A cost in internal units, `u64::MAX` (never reached) when it does not fit.
#[inline]
pub(super) fn hi(cost: u64) -> u64 {
    if cost >= 1 << 32 {
        u64::MAX
    } else {
        cost << 32
    }
}

impl Weights {
    pub(super) fn new(opts: &RepairOptions, text: &[u8]) -> Self {
        let w = match opts.model {
            CostModel::Edit => {
                let (i, d, s) = (opts.insert_cost, opts.delete_cost, opts.substitute_cost);
                IntentWeights {
                    delete_before: d,
                    delete_after: d,
                    delete_structure: d,
                    delete_space: d,
                    delete_string: d,
                    insert_punct: i,
                    insert_quote: i,
                    insert_escape: i,
                    insert_other: i,
                    substitute: s,
                    substitute_string: s,
                    substitute_quote: s,
                    substitute_near: s,
                    keep_quote: 0,
                    keep_outside: 0,
                }
            }
            CostModel::Intent(w) => w,
        };
        let h = |c: u32| hi(c as u64);
        let ins = [h(w.insert_other), h(w.insert_quote), h(w.insert_punct), h(w.insert_escape)];
        let min_insert = ins.iter().copied().min().unwrap_or(0);
        let dels = [w.delete_before, w.delete_after, w.delete_structure, w.delete_space, w.delete_string];
        let subs = [w.substitute, w.substitute_string, w.substitute_quote, w.substitute_near];
        let min_other = dels.iter().chain(subs.iter()).copied().min().unwrap_or(0);
        Weights {
            del_before: h(w.delete_before),
            del_after: h(w.delete_after),
            del_structure: h(w.delete_structure),
            del_space: h(w.delete_space),
            del_string: h(w.delete_string),
            ins,
            sub: h(w.substitute),
            sub_string: h(w.substitute_string),
            sub_quote: h(w.substitute_quote),
            sub_near: h(w.substitute_near),
            keep_quote: h(w.keep_quote),
            keep_outside: h(w.keep_outside),
            keep_cap: h(w.substitute.min(w.substitute_string)),
            tail: spans(text).first_end,
            min_insert,
            min_edit: min_insert.min(h(min_other)),
        }
    }

    /// Inserting `new` from a state of class `_class`.
    #[inline]
    pub(super) fn insert(&self, _class: StateClass, new: u8) -> u64 {
        self.ins[insert_class(new) as usize].saturating_add(2 * content(new))
    }

    /// Deleting `old`, at text offset `at`, in a state of class `class`.
    #[inline]
    pub(super) fn delete(&self, class: StateClass, old: u8, at: usize) -> u64 {
        let base = match class {
            StateClass::Before => self.del_before,
            StateClass::After if at >= self.tail => self.del_after,
            StateClass::After => self.del_structure,
            StateClass::String => self.del_string,
            StateClass::Structure if is_space(old) => self.del_space,
            StateClass::Structure => self.del_structure,
        };
        base.saturating_add(1 + 2 * content(old))
    }

    /// Replacing `old` by `new` from a state of class `class`.
    #[inline]
    pub(super) fn substitute(&self, class: StateClass, old: u8, new: u8) -> u64 {
        let base = if special_target(old) != Some(new) || (old.is_ascii_control() && class == StateClass::String) {
            if class == StateClass::String {
                self.sub_string
            } else {
                self.sub
            }
        } else if new == b'"' {
            self.sub_quote
        } else {
            self.sub_near
        };
        base.saturating_add(1 + 2 * content(old) + 2 * content(new))
    }

    /// The price of keeping a text byte flagged as a quote-like `'` (see [`keep_costs`]).
    #[inline]
    pub(super) fn keep_quote(&self) -> u64 {
        self.keep_quote
    }

    /// The cheapest insertion, without damage: a lower bound on any insertion.
    pub(super) fn min_insert(&self) -> u64 {
        self.min_insert
    }

    /// The cheapest single edit, without damage: a lower bound on any edit's internal cost.
    pub(super) fn min_edit(&self) -> u64 {
        self.min_edit
    }

    /// The cost bound implied by an internal bound.
    pub(super) fn cost_bound(internal: u64) -> u32 {
        (internal >> 32) as u32
    }
}

/// Where the text's top-level bracketed values lie, by a tolerant bracket count (`{[` and
/// `}]` outside double-quoted strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Spans {
    /// The offset of the first `{` or `[` (0 without one).
    pub(super) head: usize,
    /// Just past the first value's closing bracket (the text's length if it never closes).
    pub(super) first_end: usize,
    /// Just past the last value that closes (the text's length if the text ends inside one,
    /// or has no bracket).
    pub(super) last_end: usize,
}

pub(super) fn spans(text: &[u8]) -> Spans {
    let n = text.len();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let (mut head, mut first_end, mut last_end) = (None, n, n);
    for (i, &b) in text.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' if depth > 0 => in_string = true,
            b'{' | b'[' => {
                head.get_or_insert(i);
                depth += 1;
            }
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    if first_end == n {
                        first_end = i + 1;
                    }
                    last_end = i + 1;
                }
            }
            _ => {}
        }
    }
    if depth > 0 {
        last_end = n;
    }
    Spans { head: head.unwrap_or(0), first_end, last_end }
}

/// Per text position, the internal price of keeping the byte there: `keep_quote` for a `'`
/// that stands where a JSON quote would (the previous non-space byte is one of `{[,:` or the
/// next one is one of `}],:`), plus `keep_outside` for a non-space byte outside the bracketed
/// values (before [`Spans::head`] or from [`Spans::last_end`]); at most the price of a plain
/// substitution, which the search relies on. Also returns the suffix sums (`len + 1` entries), the
/// price of keeping all of `text[i..]`.
pub(super) fn keep_costs(text: &[u8], w: &Weights) -> (Vec<u64>, Vec<u64>) {
    let n = text.len();
    let mut keep = vec![0u64; n];
    if w.keep_outside > 0 {
        let cap = w.keep_outside.min(w.keep_cap);
        let sp = spans(text);
        for (i, &b) in text.iter().enumerate() {
            if (i < sp.head || i >= sp.last_end) && !is_space(b) {
                keep[i] = cap;
            }
        }
    }
    if w.keep_quote() > 0 {
        for i in 0..n {
            if text[i] != b'\'' {
                continue;
            }
            let prev = text[..i].iter().rev().find(|&&b| !is_space(b));
            let next = text[i + 1..].iter().find(|&&b| !is_space(b));
            let opens = prev.is_none_or(|b| b"{[,:".contains(b));
            let closes = next.is_none_or(|b| b"}],:".contains(b));
            if opens || closes {
                keep[i] = (keep[i] + w.keep_quote()).min(w.keep_cap);
            }
        }
    }
    let mut suffix = vec![0u64; n + 1];
    for i in (0..n).rev() {
        suffix[i] = suffix[i + 1].saturating_add(keep[i]);
    }
    (keep, suffix)
}

/// The caller's price of one edit under [`CostModel::Edit`] (whole units, no damage).
#[cfg(test)]
pub(super) fn edit_cost(e: &Edit, opts: &RepairOptions) -> u32 {
    match e.kind {
        EditKind::Insert => opts.insert_cost,
        EditKind::Delete => opts.delete_cost,
        EditKind::Substitute => opts.substitute_cost,
    }
}

#[cfg(test)]
mod tests;
