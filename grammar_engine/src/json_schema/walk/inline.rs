//! Regular forms of languages that call rules, for the operations only regular languages allow.
//!
//! A difference (the subtraction that keeps `oneOf` branches apart, `not`, `else`, `maxContains`)
//! and an intersection (`contains`) are products of automata over bytes, so neither operand may
//! call a rule. A call that stands for a finite nesting (a `$ref` target that does not reach
//! itself, a large part made a rule only to be built once, a counted repetition) is replaced by
//! its rule's language, which is exact. Only a rule that reaches itself cannot be: then the
//! operation is [`GrammarError::NotRegular`], and the schema is compiled without rules.

use std::collections::HashMap;

use super::super::values::any_value_expr;
use super::Compiler;
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
        self.inline_calls(lang, &mut Vec::new(), &mut done)
    }

    /// [`Compiler::regular`] under the rules being inlined (`open`), with the regular forms
    /// of the rules inlined so far (`done`).
    fn inline_calls(&mut self, lang: &Expr, open: &mut Vec<RuleId>, done: &mut HashMap<RuleId, Expr>) -> Result<Expr> {
        for rule in lang.calls() {
            if done.contains_key(&rule) {
                continue;
            }
            if open.contains(&rule) {
                return Err(recursive(self.rule_name(rule)));
            }
            let body = if Some(rule) == self.any_rule {
                any_value_expr(self.opts.max_any_depth, &self.ws, self.config)
            } else {
                self.body_of(rule)?
            };
            open.push(rule);
            let body = self.inline_calls(&body, open, done);
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

    fn rule_name(&self, rule: RuleId) -> String {
        self.rules.as_ref().map_or_else(String::new, |b| b.name(rule).to_string())
    }
}

fn recursive(name: String) -> GrammarError {
    GrammarError::NotRegular { detail: format!("a product of languages that call the recursive rule {name}") }
}
