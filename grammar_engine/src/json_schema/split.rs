//! The disjunctions of a conjunction: `anyOf`, `oneOf`, `not` and `if`/`then`/`else` (the
//! dependencies, which split on a member's presence, are in `objects.rs`).
//!
//! [`Compiler::split_or_emit`] takes the first disjunction left in a conjunction and compiles
//! each case as a conjunction of its own; once none is left the merged keywords are emitted. A
//! negation subtracts an over-language (see `walk.rs`): `not S` is under(rest) minus over(S),
//! `oneOf` branch i is under(rest ∧ Sᵢ) minus the over of every other branch, `else` is
//! under(rest ∧ else) minus over(if). Every split counts its cases against [`MAX_CASES`].

use std::collections::HashSet;
use std::rc::Rc;

use serde_json::Value;

use super::context::Ctx;
use super::disjoint::Disjoint;
use super::objects;
use super::policy;
use super::values::{K_ALL, K_OBJECT};
use super::walk::{
    nonempty_list, Apart, Compiler, Conj, Item, DONE_ANY_OF, DONE_DEPENDENCIES, DONE_IF, DONE_NOT, DONE_ONE_OF,
};
use crate::automata::{DfaConfig, Expr};
use crate::error::{GrammarError, Result};

/// How many cases of one schema may try precise over-languages (a recursive schema meets the
/// same split at every depth; counted, not timed, so the outcome is the schema's alone).
const MAX_PRECISE_TRIES: usize = 16;

/// Most `oneOf` branches that try precise over-languages (each is subtracted from every other).
const MAX_PRECISE_BRANCHES: usize = 16;

/// Most cases a `not` of names splits into (see [`Compiler::not`]).
const MAX_ABSENT_SPLIT: usize = 2;

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
                    .with_consts(self.reading.knows_const())
                    .with_ref_alone(self.reading.ref_may_override_siblings());
                if !check.schemas(a.schema, b.schema, 0) {
                    disjoint = false;
                    break 'pairs;
                }
            }
        }
        let mut overs = Vec::new();
        let mut common = HashSet::new();
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
            common = shared.unwrap_or_default();
            self.common_names = common.clone();
            for k in &kids {
                // Built once here: each is subtracted from every other branch.
                let over = self.over(Conj::of(vec![k.clone()]))?;
                overs.push(over.built(self.config)?);
            }
            self.common_names.clear();
        }
        // The branches' precise over-languages, built when a branch first needs them (`None`
        // inside: they could not be).
        let mut precise: Option<Option<Vec<Expr>>> = None;
        // The names each branch's objects must hold, when a branch that calls rules needs them.
        let mut required: Vec<HashSet<String>> = Vec::new();
        let mut parts = Vec::new();
        for (i, k) in kids.iter().enumerate() {
            let case = self.with_item(&rest, k.clone())?;
            let case_kinds = self.kinds(&case, false)? & !case.excluded;
            let mut lang = self.compile(case)?;
            let mut known = None;
            if !disjoint && lang.has_calls() {
                if required.is_empty() {
                    required = kids.iter().map(|k| self.names_required(Conj::of(vec![k.clone()]))).collect();
                }
                let others: Vec<&HashSet<String>> = required.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, r)| r).collect();
                match self.proven_apart(&lang, &others)? {
                    Apart::Proven => {
                        parts.push(lang);
                        continue;
                    }
                    Apart::NotProven(built) => known = built,
                }
            }
            if !disjoint && !lang.is_empty() {
                // Built once: subtracted from by every other branch.
                lang = self.regular_built(&lang, known)?;
                let (had_values, before) = (!lang.is_empty(), lang.clone());
                for (j, o) in overs.iter().enumerate() {
                    if j != i && !lang.is_empty() {
                        lang = lang.minus(o, self.config)?;
                    }
                }
                // Another branch that every value of this one's kinds satisfies proves that
                // this one has no value.
                let covered = kids.iter().enumerate().any(|(j, k)| j != i && self.accepts_kinds(k, case_kinds, 0));
                if had_values && lang.is_empty() && !covered && kids.len() <= MAX_PRECISE_BRANCHES {
                    if precise.is_none() {
                        self.common_names = common.clone();
                        precise = Some(self.precise_overs(kids.iter().map(|k| Conj::of(vec![k.clone()])).collect()));
                        self.common_names.clear();
                    }
                    if let Some(Some(overs)) = &precise {
                        lang = minus_all(&before, overs.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, o)| o), self.config);
                    }
                }
                if had_values && lang.is_empty() && !covered {
                    let others = kids.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, k)| with(&rest, k.clone())).collect();
                    self.emptied_by("oneOf", &item.ctx, &before, others);
                }
            }
            parts.push(lang);
        }
        Ok(Expr::union(parts))
    }

    fn not(&mut self, rest: Conj<'a>, negated: Item<'a>) -> Result<Expr> {
        // A negated schema that asks only for names (see `objects::absent_cases`): an object
        // in which the names of one case are all absent, a case at a time; a case forbidding a
        // name the rest requires has no value. Past `MAX_ABSENT_SPLIT` cases (`required` with
        // many names: not all of them), or where the schema has split into many cases already,
        // each would compile the rest again: the first case is kept, and noted.
        if let Some(cases) = objects::absent_cases(negated.schema) {
            let required = objects::required_by(&rest);
            let mut cases: Vec<Vec<String>> = cases.into_iter().filter(|names| !names.iter().any(|n| required.contains(n.as_str()))).collect();
            if cases.len() > MAX_ABSENT_SPLIT || (cases.len() > 1 && self.cases + cases.len() > MAX_CASES / 8) {
                cases.truncate(1);
                self.note(format!("not at {}: only objects without {:?} kept, one of the ways to leave names out", negated.ctx.path, cases[0]));
            }
            let mut parts = Vec::new();
            let split = cases.len() > 1;
            for names in cases {
                if split {
                    self.count_case(&negated.ctx)?;
                }
                let mut case = rest.clone();
                case.forbidden.extend(names);
                case.excluded |= K_ALL & !K_OBJECT;
                parts.push(self.compile(case)?);
            }
            return Ok(Expr::union(parts));
        }
        let kinds = self.kinds(&rest, false)? & !rest.excluded;
        let under = self.compile(rest.clone())?;
        let mut known = None;
        if under.has_calls() {
            let names = self.names_required(Conj::of(vec![negated.clone()]));
            match self.proven_apart(&under, &[&names])? {
                Apart::Proven => return Ok(under),
                Apart::NotProven(built) => known = built,
            }
        }
        let under = self.regular_built(&under, known)?;
        if under.is_empty() {
            return Ok(under);
        }
        let over = self.over(Conj::of(vec![negated.clone()]))?;
        let mut lang = under.minus(&over, self.config)?;
        // Every value of the rest's kinds satisfying the negated schema proves there is none.
        let covered = self.accepts_kinds(&negated, kinds, 0);
        if lang.is_empty() && !covered {
            lang = self.minus_precise(&under, vec![Conj::of(vec![negated.clone()])]);
        }
        if lang.is_empty() && !covered {
            let ctx = negated.ctx.clone();
            self.emptied_by("not", &ctx, &under, vec![with(&rest, negated)]);
        }
        Ok(lang)
    }

    fn if_then_else(&mut self, rest: Conj<'a>, cond: Item<'a>, then: Option<Item<'a>>, otherwise: Option<Item<'a>>) -> Result<Expr> {
        let mut yes = self.with_item(&rest, cond.clone())?;
        if let Some(t) = then {
            yes.items.push(t);
        }
        let yes = self.compile(yes)?;
        let passing = with(&rest, cond.clone());
        let no = match otherwise {
            Some(e) => self.with_item(&rest, e)?,
            None => {
                self.count_case(&cond.ctx)?;
                rest
            }
        };
        let no_kinds = self.kinds(&no, false)? & !no.excluded;
        let no = self.compile(no)?;
        let mut known = None;
        if no.has_calls() {
            let names = self.names_required(Conj::of(vec![cond.clone()]));
            match self.proven_apart(&no, &[&names])? {
                Apart::Proven => return Ok(Expr::union(vec![yes, no])),
                Apart::NotProven(built) => known = built,
            }
        }
        let no = self.regular_built(&no, known)?;
        let no = if no.is_empty() {
            no
        } else {
            let over = self.over(Conj::of(vec![cond.clone()]))?;
            let mut left = no.minus(&over, self.config)?;
            // Every value of the else case's kinds passing the condition proves none fails it.
            let covered = self.accepts_kinds(&cond, no_kinds, 0);
            if left.is_empty() && !covered {
                left = self.minus_precise(&no, vec![Conj::of(vec![cond.clone()])]);
            }
            if left.is_empty() && !covered {
                let ctx = cond.ctx.clone();
                self.emptied_by("if", &ctx, &no, vec![passing]);
            }
            left
        };
        Ok(Expr::union(vec![yes, no]))
    }
}

impl<'a> Compiler<'a> {
    /// Whether every value of the given kinds satisfies `item` (see
    /// [`policy::accepts_every_value_of`]), following its references and `allOf` members.
    fn accepts_kinds(&self, item: &Item<'a>, kinds: u8, depth: usize) -> bool {
        const MAX_DEPTH: usize = 16;
        let Some(map) = item.map() else { return policy::accepts_every_value_of(item.schema, kinds) };
        if depth == MAX_DEPTH {
            return false;
        }
        map.iter().all(|(k, v)| match k.as_str() {
            "$ref" => v
                .as_str()
                .and_then(|r| self.resolver.resolve(r, &item.base, "$ref", &item.ctx).ok())
                .is_some_and(|t| {
                    let target = Item { schema: t.schema, ctx: item.ctx.clone(), base: Rc::from(t.base.as_str()), done: 0 };
                    self.accepts_kinds(&target, kinds, depth + 1)
                }),
            "allOf" => v.as_array().is_some_and(|all| {
                all.iter().enumerate().all(|(i, b)| {
                    item.child(b, &format!("allOf/{i}"), &self.resolver).is_ok_and(|c| self.accepts_kinds(&c, kinds, depth + 1))
                })
            }),
            k => policy::keyword_accepts_kinds(k, v, kinds),
        })
    }

    /// `before` (built) minus the precise over-languages of `subtracted`: tried only where the
    /// plain ones left no value, as they cost more to build. Empty when they cannot be built.
    fn minus_precise(&mut self, before: &Expr, subtracted: Vec<Conj<'a>>) -> Expr {
        match self.precise_overs(subtracted) {
            Some(overs) => minus_all(before, overs.iter(), self.config),
            None => Expr::Empty,
        }
    }

    /// The precise over-languages of `conjs` (see [`Compiler::precise_over`]), built; `None`
    /// when they cannot be built, after [`MAX_PRECISE_TRIES`] tries, and in the restricted
    /// attempts of the ladder.
    fn precise_overs(&mut self, conjs: Vec<Conj<'a>>) -> Option<Vec<Expr>> {
        // A restricted attempt of the ladder is not exact anyway: it keeps the plain ones.
        if self.precise_tries == MAX_PRECISE_TRIES || self.count_cap.is_some() || self.prune_depth.is_some() {
            return None;
        }
        self.precise_tries += 1;
        let was = std::mem::replace(&mut self.precise_over, true);
        let overs: Result<Vec<Expr>> = conjs.into_iter().map(|conj| self.over(conj).and_then(|o| o.built(self.config))).collect();
        self.precise_over = was;
        overs.ok()
    }
}

/// `before` minus every one of `overs`; empty when a difference cannot be built.
fn minus_all<'e>(before: &Expr, overs: impl Iterator<Item = &'e Expr>, config: &DfaConfig) -> Expr {
    let mut lang = before.clone();
    for o in overs {
        if lang.is_empty() {
            break;
        }
        match lang.minus(o, config) {
            Ok(l) => lang = l,
            Err(_) => return Expr::Empty,
        }
    }
    lang
}

/// The conjunction with member `idx` marked as having applied `bit`.
pub(crate) fn with_done<'a>(conj: &Conj<'a>, idx: usize, bit: u16) -> Conj<'a> {
    let mut rest = conj.clone();
    rest.items[idx].done |= bit;
    rest
}

/// `rest` plus one more member, not counted as a case (a proof's conjunction, see
/// [`Compiler::emptied_by`]).
fn with<'a>(rest: &Conj<'a>, item: Item<'a>) -> Conj<'a> {
    let mut conj = rest.clone();
    conj.items.push(item);
    conj
}
