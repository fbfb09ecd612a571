//! The edit-cost model: what each edit costs, in the units the search adds up.
//!
//! Callers price insertions, deletions and substitutions in whole units ([`RepairOptions`]).
//! Many repairs tie on that price, and the tie should go to the one a reader would pick, so
//! the search works in finer internal units that add a tie-breaking "damage" to each edit.
//! This module is the only place that knows how the two are folded together.

use super::{Edit, EditKind, RepairOptions};

/// Internal costs are `u64`; `INF` means unseen / none.
pub(super) const INF: u64 = u64::MAX;

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
    ins: u64,
    del: u64,
    sub: u64,
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
    pub(super) fn new(opts: &RepairOptions) -> Self {
        Weights {
            ins: hi(opts.insert_cost as u64),
            del: hi(opts.delete_cost as u64),
            sub: hi(opts.substitute_cost as u64),
        }
    }

    #[inline]
    pub(super) fn insert(&self, new: u8) -> u64 {
        self.ins.saturating_add(2 * content(new))
    }

    #[inline]
    pub(super) fn delete(&self, old: u8) -> u64 {
        self.del.saturating_add(1 + 2 * content(old))
    }

    #[inline]
    pub(super) fn substitute(&self, old: u8, new: u8) -> u64 {
        self.sub.saturating_add(1 + 2 * content(old) + 2 * content(new))
    }

    /// The cheapest single edit, without damage: a lower bound on any edit's internal cost.
    pub(super) fn min_edit(&self) -> u64 {
        self.ins.min(self.del).min(self.sub)
    }

    /// The cost bound implied by an internal bound.
    pub(super) fn cost_bound(internal: u64) -> u32 {
        (internal >> 32) as u32
    }
}

/// The caller's price of one edit (whole units, no damage).
pub(super) fn edit_cost(e: &Edit, opts: &RepairOptions) -> u32 {
    match e.kind {
        EditKind::Insert => opts.insert_cost,
        EditKind::Delete => opts.delete_cost,
        EditKind::Substitute => opts.substitute_cost,
    }
}

#[cfg(test)]
mod tests {
    use crate::repair::test_support::*;
    use crate::repair::{repair, EditKind, RepairOptions};

    #[test]
    fn costs_steer_the_repair() {
        let d = dfa("ab");
        // Substitution cheaper than delete + insert.
        let r = repair(&d, b"xb", &RepairOptions::default());
        assert_eq!(r.cost, Some(1));
        assert_eq!(r.edits[0].kind, EditKind::Substitute);
        // Substitution dearer than delete + insert.
        let opts = RepairOptions { substitute_cost: 5, ..RepairOptions::default() };
        let r = repair(&d, b"xb", &opts);
        assert_eq!(r.cost, Some(2));
        check(&d, b"xb", &opts, &r);
        assert!(r.edits.iter().all(|e| e.kind != EditKind::Substitute));
        // Expensive deletions: keep the bytes by inserting around them when the language allows.
        let d = dfa("a[a-z]*b");
        let opts = RepairOptions { delete_cost: 10, substitute_cost: 10, ..RepairOptions::default() };
        let r = repair(&d, b"xyz", &opts);
        assert_eq!(r.cost, Some(2));
        assert_eq!(check(&d, b"xyz", &opts, &r), b"axyzb");
    }

    #[test]
    fn json_trailing_comma() {
        let d = json_object_dfa();
        let (r, out) = repair_json(&d, r#"{"name": "Ada", "tags": ["x", "y",], "age": 36,}"#);
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, r#"{"name": "Ada", "tags": ["x", "y"], "age": 36}"#);
        assert!(r.edits.iter().all(|e| e.kind == EditKind::Delete && e.old == Some(b',')));
    }

    #[test]
    fn json_missing_brace_and_quote() {
        let d = json_object_dfa();
        let (r, out) = repair_json(&d, r#"{"name": "Ada", "age": 36"#);
        assert_eq!(r.cost, Some(1));
        assert_eq!(out, r#"{"name": "Ada", "age": 36}"#);
        let (r, out) = repair_json(&d, r#"{"name": "Ada}"#);
        assert_eq!(r.cost, Some(1));
        assert_eq!(out, r#"{"name": "Ada"}"#);
        let (r, out) = repair_json(&d, r#"{"name": "Ada"#);
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, r#"{"name": "Ada"}"#);
        let (r, _) = repair_json(&d, r#"{"name": Ada", "ok": true}"#);
        assert_eq!(r.cost, Some(1));
    }

    #[test]
    fn json_surrounding_prose() {
        // Minimal edit distance may absorb prose into a string rather than delete it; the
        // reference search confirms each cost is optimal.
        let d = json_object_dfa();
        for text in [
            r#"Note: {"a": 1}"#,
            "{\"a\": [1, 2]}\nHope it helps!",
            "Sure:\n{\"a\": true} ok",
            "Here you go!\n\n{\"name\": \"Ada\", \"age\": 36}\n\nLet me know.",
        ] {
            let (r, _) = repair_json(&d, text);
            assert!(r.cost.unwrap() > 0);
        }
        // Making insertions and substitutions dearer than deletions strips the prose instead.
        let opts = RepairOptions { insert_cost: 10, substitute_cost: 10, ..RepairOptions::default() };
        let text = "Here you go!\n\n{\"name\": \"Ada\", \"age\": 36}\n\nLet me know.";
        let r = repair(&d, text.as_bytes(), &opts);
        assert_eq!(r.cost, Some(reference_cost(&d, text.as_bytes(), &opts)));
        let out = String::from_utf8(check(&d, text.as_bytes(), &opts, &r)).unwrap();
        assert_eq!(out.trim(), r#"{"name": "Ada", "age": 36}"#);
        assert!(r.edits.iter().all(|e| e.kind == EditKind::Delete));
        let (r, out) = repair_json(&d, r#"ok {"a": 1}"#);
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, r#" {"a": 1}"#);
        let (r, out) = repair_json(&d, "{\"a\": 1} ok");
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, "{\"a\": 1} ");
    }
}
