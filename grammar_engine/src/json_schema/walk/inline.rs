//! Regular forms of languages that call rules, for the operations only regular languages allow.
//!
//! A difference (the subtraction that keeps `oneOf` branches apart, `not`, `else`, `maxContains`)
//! and an intersection (`contains`) are products of automata over bytes, so neither operand may
//! call a rule. A call that stands for a finite nesting (a `$ref` target that does not reach
//! itself, a large part made a rule only to be built once, a counted repetition) is replaced by
//! its rule's language, which is exact. Only a rule that reaches itself cannot be: then the
//! operation is [`GrammarError::NotRegular`], and the schema is compiled without rules, unless
//! [`Compiler::proven_apart`] shows that the subtraction would remove nothing.

use std::collections::{HashMap, HashSet};

use super::super::apart::top_level_names;
use super::super::values::any_value_expr;
use super::super::objects::required_by;
use super::{Compiler, Conj, Flat};
use crate::automata::Expr;
use crate::error::{GrammarError, Result};
use crate::pushdown::Memory;
use crate::util::RuleId;

/// Whether a case is told apart from the others without subtracting them (see
/// [`Compiler::proven_apart`]).
pub(crate) enum Apart {
    /// Subtracting the others would remove nothing: the case stays as it is, calls and all.
    Proven,
    /// Not proven; the case's regular form when working it out built it.
    NotProven(Option<Expr>),
}

impl<'a> Compiler<'a> {
    /// `lang` with every call replaced by the language of the rule it calls (see the module
    /// docs): a rule whose body is still queued is compiled now, and the rule of any JSON value
    /// is read as values nested at most `max_any_depth` levels, as without rules.
    pub(crate) fn regular(&mut self, lang: &Expr) -> Result<Expr> {
        if !lang.has_calls() {
            return Ok(lang.clone());
        }
        let mut done = HashMap::new();
        self.inline_calls(lang, &mut Vec::new(), &mut done, false)
    }

    /// Whether no text of `lang` is valid under any of `others`, given by the member names
    /// their objects must hold: `lang` writes only objects, and never one of the names each
    /// other requires (see `apart`). Then subtracting the others from `lang` leaves it as it
    /// is, calls and all. Calls of rules that reach themselves (and of the rule of any JSON
    /// value) stay calls, read as one value each; the others are inlined.
    pub(crate) fn proven_apart(&mut self, lang: &Expr, others: &[&HashSet<String>]) -> Result<Apart> {
        if others.iter().any(|required| required.is_empty()) {
            return Ok(Apart::NotProven(None));
        }
        let not_proven = |e: GrammarError| match e {
            GrammarError::NotRegular { .. } | GrammarError::TooLarge { .. } => Ok(Apart::NotProven(None)),
            e => Err(e),
        };
        let mut done = HashMap::new();
        let inlined = match self.inline_calls(lang, &mut Vec::new(), &mut done, true) {
            Ok(e) => e,
            Err(e) => return not_proven(e),
        };
        let dfa = match inlined.to_dfa(self.config) {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(Apart::Proven),
            Err(e) => return not_proven(e),
        };
        let proven = top_level_names(&dfa).is_some_and(|written| others.iter().all(|required| required.iter().any(|r| !written.contains(r))));
        Ok(match proven {
            true => Apart::Proven,
            // With no call kept, the automaton is the case's regular form.
            false if !inlined.has_calls() => Apart::NotProven(Some(Expr::Dfa(std::rc::Rc::new(dfa)))),
            false => Apart::NotProven(None),
        })
    }

    /// The regular form of `lang` as one automaton: `known` when [`Compiler::proven_apart`]
    /// built it already.
    pub(crate) fn regular_built(&mut self, lang: &Expr, known: Option<Expr>) -> Result<Expr> {
        match known {
            Some(built) => Ok(built),
            None => self.regular(lang)?.built(self.config),
        }
    }

    /// The member names every object valid under `conj` holds, its references and `allOf`s
    /// followed.
    pub(crate) fn names_required(&mut self, conj: Conj<'a>) -> HashSet<String> {
        self.within_flattened(conj, true, |_, flat| match flat {
            Ok(Flat::Conj(flat)) => required_by(&flat),
            _ => HashSet::new(),
        })
    }

    /// [`Compiler::regular`] under the rules being inlined (`open`), with the regular forms
    /// of the rules inlined so far (`done`). With `keep`, calls of rules that reach themselves
    /// and of the rule of any JSON value stay calls.
    fn inline_calls(&mut self, lang: &Expr, open: &mut Vec<RuleId>, done: &mut HashMap<RuleId, Expr>, keep: bool) -> Result<Expr> {
        for rule in lang.calls() {
            if done.contains_key(&rule) {
                continue;
            }
            // An array whose elements are compared at run time has no regular form: where a
            // call may stay, it is one value; in a product it holds at most one element, the
            // restriction taken without rules.
            if self.rules.as_ref().is_some_and(|b| b.memory(rule) != Memory::None) {
                if keep {
                    continue;
                }
                let Some((one, ctx)) = self.distinct_forms.get(&rule).cloned() else {
                    return Err(GrammarError::NotRegular { detail: format!("a product of languages that call {}", self.rule_name(rule)) });
                };
                super::super::arrays::one_unique(self, &ctx)?;
                done.insert(rule, one);
                continue;
            }
            if keep && (open.contains(&rule) || Some(rule) == self.any_rule) {
                // A chunk rule reads part of a value, which a call may not stand for.
                if self.is_chunk_rule(rule) {
                    return Err(recursive(self.rule_name(rule)));
                }
                continue;
            }
            if open.contains(&rule) {
                return Err(recursive(self.rule_name(rule)));
            }
            let body = if Some(rule) == self.any_rule {
                any_value_expr(self.opts.max_any_depth, &self.ws, self.config)
            } else {
                match self.body_of(rule) {
                    Err(GrammarError::NotRegular { .. }) if keep && !self.is_chunk_rule(rule) => continue,
                    other => other?,
                }
            };
            open.push(rule);
            let body = self.inline_calls(&body, open, done, keep);
            open.pop();
            done.insert(rule, body?);
        }
        Ok(lang.substitute(&|r| done.get(&r).cloned()))
    }

    /// The body of `rule`, compiling it now if it is still queued (as `finish_rules` would).
    fn body_of(&mut self, rule: RuleId) -> Result<Expr> {
        if let Some(body) = self.rules.as_ref().and_then(|b| b.definition(rule)) {
            return Ok(body.clone());
        }
        // Neither defined nor queued: its body is being compiled, so this call is inside it.
        let Some(at) = self.pending.iter().position(|(r, _)| *r == rule) else {
            return Err(recursive(self.rule_name(rule)));
        };
        let (_, item) = self.pending.remove(at);
        self.define_queued(rule, item)
    }

    /// Whether `rule` is one of the chunk rules of a long count (see `counted`).
    fn is_chunk_rule(&self, rule: RuleId) -> bool {
        let is = |e: &Expr| matches!(e, Expr::Call(r) if *r == rule);
        self.chunks.values().any(|c| is(&c.exactly) || is(&c.fewer))
    }

    fn rule_name(&self, rule: RuleId) -> String {
        self.rules.as_ref().map_or_else(String::new, |b| b.name(rule).to_string())
    }
}

fn recursive(name: String) -> GrammarError {
    GrammarError::NotRegular { detail: format!("a product of languages that call the recursive rule {name}") }
}
