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
use crate::util::RuleId;

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
    /// value) stay calls, read as one value each; the others are inlined. False when not
    /// proven.
    pub(crate) fn proven_apart(&mut self, lang: &Expr, others: &[&HashSet<String>]) -> Result<bool> {
        if others.iter().any(|required| required.is_empty()) {
            return Ok(false);
        }
        let not_proven = |e: GrammarError| match e {
            GrammarError::NotRegular { .. } | GrammarError::TooLarge { .. } => Ok(false),
            e => Err(e),
        };
        let mut done = HashMap::new();
        let inlined = match self.inline_calls(lang, &mut Vec::new(), &mut done, true) {
            Ok(e) => e,
            Err(e) => return not_proven(e),
        };
        let dfa = match inlined.to_dfa(self.config) {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(true),
            Err(e) => return not_proven(e),
        };
        let Some(written) = top_level_names(&dfa) else { return Ok(false) };
        Ok(others.iter().all(|required| required.iter().any(|r| !written.contains(r))))
    }

    /// The member names every object valid under `conj` holds, its references and `allOf`s
    /// followed.
    pub(crate) fn names_required(&mut self, conj: Conj<'a>) -> HashSet<String> {
        let mut entered = Vec::new();
        let names = match self.flatten(conj, &mut entered, true) {
            Ok(Flat::Conj(flat)) => required_by(&flat),
            _ => HashSet::new(),
        };
        for t in entered {
            if let Some(n) = self.active.get_mut(&t) {
                *n -= 1;
            }
        }
        names
    }

    /// [`Compiler::regular`] under the rules being inlined (`open`), with the regular forms
    /// of the rules inlined so far (`done`). With `keep`, calls of rules that reach themselves
    /// and of the rule of any JSON value stay calls.
    fn inline_calls(&mut self, lang: &Expr, open: &mut Vec<RuleId>, done: &mut HashMap<RuleId, Expr>, keep: bool) -> Result<Expr> {
        for rule in lang.calls() {
            if done.contains_key(&rule) {
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
