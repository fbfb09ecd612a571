//! The disjunctions of a conjunction: `anyOf`, `oneOf`, `not` and `if`/`then`/`else` (the
//! dependencies, which split on a member's presence, are in `objects.rs`).
//!
//! [`Compiler::split_or_emit`] takes the first disjunction left in a conjunction and compiles
//! each case as a conjunction of its own; once none is left the merged keywords are emitted. A
//! negation subtracts an over-language (see `walk.rs`): `not S` is under(rest) minus over(S),
//! `oneOf` branch i is under(rest ∧ Sᵢ) minus the over of every other branch, `else` is
//! under(rest ∧ else) minus over(if). Every split counts its cases against [`MAX_CASES`].

use std::collections::HashSet;

use serde_json::Value;

use super::context::Ctx;
use super::disjoint::Disjoint;
use super::objects;
use super::values::{K_ALL, K_OBJECT};
use super::walk::{
    nonempty_list, Compiler, Conj, Item, DONE_ANY_OF, DONE_DEPENDENCIES, DONE_IF, DONE_NOT, DONE_ONE_OF,
};
use crate::automata::Expr;
use crate::error::{GrammarError, Result};

/// How many alternatives one schema may split into (anyOf × oneOf × ...), in all.
pub(super) const MAX_CASES: usize = 512;

impl<'a> Compiler<'a> {
    pub(super) fn split_or_emit(&mut self, conj: Conj<'a>) -> Result<Expr> {
        for (idx, item) in conj.items.iter().enumerate() {
            let Some(map) = item.map() else { continue };
            if item.done & DONE_ANY_OF == 0 {
                if let Some(v) = map.get("anyOf") {
                    let branches = nonempty_list(v, "anyOf", &item.ctx)?;
                    let rest = with_done(&conj, idx, DONE_ANY_OF);
                    let mut parts = Vec::new();
                    for (i, b) in branches.iter().enumerate() {
                        let case = self.with_item(&rest, item.child(b, &format!("anyOf/{i}"), &self.resolver)?)?;
                        parts.push(self.compile(case)?);
                    }
                    return Ok(Expr::union(parts));
                }
            }
            if item.done & DONE_ONE_OF == 0 {
                if let Some(v) = map.get("oneOf") {
                    let branches = nonempty_list(v, "oneOf", &item.ctx)?;
                    let rest = with_done(&conj, idx, DONE_ONE_OF);
                    return self.one_of(rest, item, branches);
                }
            }
            if item.done & DONE_NOT == 0 {
                if let Some(negated) = map.get("not") {
                    let rest = with_done(&conj, idx, DONE_NOT);
                    let negated = item.child(negated, "not", &self.resolver)?;
                    return self.not(rest, negated);
                }
            }
            if item.done & DONE_IF == 0 && (map.contains_key("then") || map.contains_key("else")) {
                if let Some(cond) = map.get("if") {
                    let rest = with_done(&conj, idx, DONE_IF);
                    let cond = item.child(cond, "if", &self.resolver)?;
                    let then = match map.get("then") {
                        Some(t) => Some(item.child(t, "then", &self.resolver)?),
                        None => None,
                    };
                    let otherwise = match map.get("else") {
                        Some(e) => Some(item.child(e, "else", &self.resolver)?),
                        None => None,
                    };
                    return self.if_then_else(rest, cond, then, otherwise);
                }
            }
            if item.done & DONE_DEPENDENCIES == 0 && objects::has_dependencies(map) {
                let rest = with_done(&conj, idx, DONE_DEPENDENCIES);
                return objects::dependencies(self, rest, item.clone());
            }
        }
        self.emit(conj)
    }

    /// Counts one more case of a split; too many is an error.
    pub(crate) fn count_case(&mut self, ctx: &Ctx) -> Result<()> {
        self.cases += 1;
        if self.cases > MAX_CASES {
            return Err(GrammarError::TooLarge {
                what: "JSON Schema alternatives (anyOf × oneOf × dependencies ...)",
                limit: MAX_CASES,
                detail: format!("too many combined cases at {}", ctx.path),
            });
        }
        Ok(())
    }

    /// `rest` plus one more member.
    pub(crate) fn with_item(&mut self, rest: &Conj<'a>, item: Item<'a>) -> Result<Conj<'a>> {
        self.count_case(&item.ctx)?;
        let mut case = rest.clone();
        case.items.push(item);
        Ok(case)
    }

    fn one_of(&mut self, rest: Conj<'a>, item: &Item<'a>, branches: &'a [Value]) -> Result<Expr> {
        let mut kids = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            kids.push(item.child(b, &format!("oneOf/{i}"), &self.resolver)?);
        }
        let context = self.kinds(&rest, false)? & !rest.excluded;
        let mut context_required: Vec<String> = objects::required_by(&rest).into_iter().collect();
        context_required.sort();
        let mut disjoint = true;
        'pairs: for (x, a) in kids.iter().enumerate() {
            for b in &kids[x + 1..] {
                let mut check = Disjoint::new(&self.resolver, &a.base)
                    .within(context)
                    .requiring(context_required.clone())
                    .with_consts(self.reading.knows_const());
                if !check.schemas(a.schema, b.schema, 0) {
                    disjoint = false;
                    break 'pairs;
                }
            }
        }
        let mut overs = Vec::new();
        if !disjoint {
            // Names every branch requires do not tell branches apart: over-languages are
            // narrowed by the others first.
            let mut shared: Option<HashSet<String>> = None;
            for k in &kids {
                let names = objects::required_by(&Conj::of(vec![k.clone()]));
                shared = Some(match shared {
                    None => names,
                    Some(s) => s.intersection(&names).cloned().collect(),
                });
            }
            self.common_names = shared.unwrap_or_default();
            for k in &kids {
                // Built once here: each is subtracted from every other branch.
                let over = self.over(Conj::of(vec![k.clone()]))?;
                overs.push(over.built(self.config)?);
            }
            self.common_names.clear();
        }
        let mut parts = Vec::new();
        for (i, k) in kids.iter().enumerate() {
            let case = self.with_item(&rest, k.clone())?;
            let mut lang = self.compile(case)?;
            if !disjoint && !lang.is_empty() {
                if !lang.has_calls() {
                    // Built once: a rule body keeps its calls (the difference refuses those).
                    lang = lang.built(self.config)?;
                }
                let (had_values, before) = (!lang.is_empty(), lang.clone());
                for (j, o) in overs.iter().enumerate() {
                    if j != i && !lang.is_empty() {
                        lang = lang.minus(o, self.config)?;
                    }
                }
                if had_values && lang.is_empty() {
                    let others = kids.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, k)| Conj::of(vec![k.clone()])).collect();
                    self.emptied_by("oneOf", &item.ctx, &before, others);
                }
            }
            parts.push(lang);
        }
        Ok(Expr::union(parts))
    }

    fn not(&mut self, rest: Conj<'a>, negated: Item<'a>) -> Result<Expr> {
        // `not: {required: [...]}` (and annotations): the value is an object (every other value
        // satisfies `required`) and some of those keys are absent. Forbid the first one the
        // rest does not require (a sound choice among the allowed ones).
        if let Some(names) = objects::required_only(negated.schema) {
            let required = objects::required_by(&rest);
            let Some(k) = names.iter().find(|n| !required.contains(n.as_str())) else { return Ok(Expr::Empty) };
            let mut case = rest.clone();
            case.forbidden.push(k.clone());
            case.excluded |= K_ALL & !K_OBJECT;
            return self.compile(case);
        }
        let under = self.compile(rest)?;
        // Built once (a rule body keeps its calls: the difference refuses those anyway).
        let under = if under.has_calls() { under } else { under.built(self.config)? };
        if under.is_empty() {
            return Ok(under);
        }
        let over = self.over(Conj::of(vec![negated.clone()]))?;
        let lang = under.minus(&over, self.config)?;
        if lang.is_empty() {
            let ctx = negated.ctx.clone();
            self.emptied_by("not", &ctx, &under, vec![Conj::of(vec![negated])]);
        }
        Ok(lang)
    }

    fn if_then_else(&mut self, rest: Conj<'a>, cond: Item<'a>, then: Option<Item<'a>>, otherwise: Option<Item<'a>>) -> Result<Expr> {
        let mut yes = self.with_item(&rest, cond.clone())?;
        if let Some(t) = then {
            yes.items.push(t);
        }
        let yes = self.compile(yes)?;
        let no = match otherwise {
            Some(e) => self.with_item(&rest, e)?,
            None => {
                self.count_case(&cond.ctx)?;
                rest
            }
        };
        let no = self.compile(no)?;
        let no = if no.has_calls() { no } else { no.built(self.config)? };
        let no = if no.is_empty() {
            no
        } else {
            let over = self.over(Conj::of(vec![cond.clone()]))?;
            let left = no.minus(&over, self.config)?;
            if left.is_empty() {
                let ctx = cond.ctx.clone();
                self.emptied_by("if", &ctx, &no, vec![Conj::of(vec![cond])]);
            }
            left
        };
        Ok(Expr::union(vec![yes, no]))
    }
}

/// The conjunction with member `idx` marked as having applied `bit`.
pub(crate) fn with_done<'a>(conj: &Conj<'a>, idx: usize, bit: u16) -> Conj<'a> {
    let mut rest = conj.clone();
    rest.items[idx].done |= bit;
    rest
}
