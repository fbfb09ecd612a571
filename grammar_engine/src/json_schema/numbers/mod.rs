//! Number languages: the exponent-free texts of the numbers a schema allows, as automata that
//! agree with Python's `jsonschema`.
//!
//! The judge of an output is `jsonschema` on `json.loads(text)`, so the languages follow what
//! Python computes, not textbook arithmetic: a text without fraction is an exact `int`, one
//! with a fraction is a double, bounds are the values Python holds (a double for `0.1`), and
//! `multipleOf` is `%` for an integer divisor and a rounded division for a float one
//! ([`facts`], [`doubles`]).
//!
//! Every language lies in one universe ([`universe`]): texts with at most 15 significant
//! digits, where Python's verdicts follow the decimal value. Within it the languages are
//! exact, every spelling of every value Python accepts and nothing else, for the integer type
//! (per dialect), all four bounds (fractional or not) and integer divisors; so `oneOf` and
//! `not` may subtract them, as long as the complement is taken within
//! [`number_expr`]`(&NumberFacts::default(), ..)`, the universe itself. A float divisor makes
//! the language a sound subset ([`NumberFacts::is_exact`] says which); subtract
//! [`number_superset`] instead in that case, which contains every text Python accepts.
//!
//! Inside: [`range`] builds the bounded ranges digit by digit, [`multiples`] the residue
//! automata and the float-divisor subsets, both through the step-function builder in
//! [`automaton`]; the parts are intersected with the automaton algebra.

mod automaton;
mod decimal;
mod doubles;
mod facts;
mod finite;
mod multiples;
mod range;
mod universe;

use std::rc::Rc;

use serde_json::Number;

use crate::automata::Expr;
use crate::automata::DfaConfig;
use crate::error::Result;
use crate::json_schema::context::{Ctx, Dialect};

use decimal::Decimal;
use facts::Divisor;
pub(crate) use facts::NumberFacts;
pub(crate) use universe::universe_regex;

use multiples::{float_divisor_expr, int_divisors_expr};
use range::{bounded, Fractions};

/// The universe texts whose value satisfies every fact, as Python judges them (see the module
/// documentation for where this is exact and where a sound subset). `Expr::Empty` when no
/// number qualifies.
pub(crate) fn number_expr(facts: &NumberFacts, dialect: Dialect, config: &DfaConfig) -> Result<Expr> {
    let fractions = match (facts.integer, dialect) {
        (false, _) => Fractions::Any,
        (true, Dialect::Draft4) => Fractions::Forbidden,
        (true, _) => Fractions::ZerosOnly,
    };
    let Some(range) = bounded(fractions, facts.minimum.as_ref(), facts.maximum.as_ref(), config)? else {
        return Ok(Expr::Empty);
    };
    let mut lang = Expr::Dfa(Rc::new(range));
    let lo = facts.minimum.as_ref().map(|b| &b.value);
    let hi = facts.maximum.as_ref().map(|b| &b.value);
    let ints: Vec<(&Decimal, &Ctx)> = facts
        .multiple_of
        .iter()
        .filter_map(|(d, ctx)| match d {
            Divisor::Int(m) => Some((m, ctx)),
            Divisor::Float { .. } => None,
        })
        .collect();
    if !ints.is_empty() {
        lang = lang.and(&int_divisors_expr(&ints, lo, hi, config)?, config)?;
    }
    for (d, _) in &facts.multiple_of {
        if let Divisor::Float { written, value } = d {
            if lang.is_empty() {
                break;
            }
            lang = lang.and(&float_divisor_expr(written, *value, lo, hi, config)?, config)?;
        }
    }
    Ok(lang)
}

/// A language containing every universe text Python accepts under the facts: equal to
/// [`number_expr`] when the facts are exact, and without the float divisors otherwise. What
/// `not` and `oneOf` subtract when [`NumberFacts::is_exact`] is false.
pub(crate) fn number_superset(facts: &NumberFacts, dialect: Dialect, config: &DfaConfig) -> Result<Expr> {
    if facts.is_exact() {
        return number_expr(facts, dialect, config);
    }
    let mut relaxed = facts.clone();
    relaxed.multiple_of.retain(|(d, _)| matches!(d, Divisor::Int(_)));
    number_expr(&relaxed, dialect, config)
}

/// The universe texts equal to one number as `jsonschema` compares them (`enum`, `const`):
/// `1` gives `1`, `1.0`, `1.00`, ...; `1e2` gives `100`, `100.0`, ...; a double gives the
/// texts of the shortest decimal that reads back as it (`0.1` for
/// `0.1000000000000000055511151231257827`). `Expr::Empty` when the value has no universe text
/// (more than 15 significant digits, or an overflowing double).
pub(crate) fn number_literal(n: &Number) -> Result<Expr> {
    let text = n.to_string();
    let value = if text.contains(['.', 'e', 'E']) {
        let x: f64 = text.parse().unwrap_or(f64::NAN);
        if !x.is_finite() {
            return Ok(Expr::Empty);
        }
        // Display prints the shortest digits that read back as `x`, without exponent. If any
        // universe text reads as `x`, this one does (fewest digits), and it is the only value.
        match Decimal::parse(&format!("{x}")) {
            Ok(v) => v,
            Err(_) => return Ok(Expr::Empty),
        }
    } else {
        match Decimal::parse(&text) {
            Ok(v) => v,
            Err(_) => return Ok(Expr::Empty),
        }
    };
    Ok(universe::spellings(&value).map_or(Expr::Empty, Expr::regex))
}

#[cfg(test)]
mod tests;
