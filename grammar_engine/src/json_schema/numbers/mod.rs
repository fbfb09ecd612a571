//! Number languages: the texts of the numbers a schema allows, as automata that agree with
//! Python's `jsonschema`.
//!
//! The judge of an output is `jsonschema` on `json.loads(text)`, so the languages follow what
//! Python computes, not textbook arithmetic: a text without fraction or exponent is an exact
//! `int`, any other a double, bounds are the values Python holds (a double for `0.1`), and
//! `multipleOf` is `%` for an integer divisor and a rounded division for a float one
//! ([`facts`], [`doubles`]).
//!
//! Every language lies in one universe ([`universe`]): integers of any length, decimals of at
//! most 15 significant digits, and exponent forms within windows, where Python's verdicts
//! follow the value. Within it the languages are exact, every spelling of every value Python
//! accepts and nothing else, for the integer type (per dialect) and all four bounds
//! (fractional or not); so `oneOf` and `not` may subtract them, as long as the complement is
//! taken within [`number_expr`]`(&NumberFacts::default(), ..)`, the universe itself.
//! `multipleOf` narrows that to a sound subset ([`NumberFacts::is_exact`] says which): no
//! exponent forms (Python divides their doubles, which an automaton reading decimal digits
//! does not follow), and with a float divisor the subset described in [`multiples`]. Subtract
//! [`number_superset`] instead in that case, which contains every universe text Python
//! accepts.
//!
//! Inside: [`range`] builds the bounded ranges of texts without exponent digit by digit,
//! [`exponent`] those with one, [`multiples`] the residue automata and the float-divisor
//! subsets, all through the step-function builder in [`automaton`]; the parts are joined
//! and intersected with the automaton algebra.

mod automaton;
mod decimal;
mod doubles;
mod exponent;
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

use exponent::exponent_range;
use multiples::{float_divisor_expr, int_divisors_expr};
use range::{bounded, Fractions};

/// Which fractions the texts of `facts` may have in `dialect`.
fn fractions(facts: &NumberFacts, dialect: Dialect) -> Fractions {
    match (facts.integer, dialect) {
        (false, _) => Fractions::Any,
        (true, Dialect::Draft4) => Fractions::Forbidden,
        (true, _) => Fractions::ZerosOnly,
    }
}

fn dfa_expr(d: Option<crate::automata::Dfa>) -> Expr {
    d.map_or(Expr::Empty, |d| Expr::Dfa(Rc::new(d)))
}

/// The universe texts whose value satisfies every fact, as Python judges them (see the module
/// documentation for where this is exact and where a sound subset). `Expr::Empty` when no
/// number qualifies.
pub(crate) fn number_expr(facts: &NumberFacts, dialect: Dialect, config: &DfaConfig) -> Result<Expr> {
    if facts.unsatisfiable {
        return Ok(Expr::Empty);
    }
    let fractions = fractions(facts, dialect);
    let (lower, upper) = (facts.minimum.as_ref(), facts.maximum.as_ref());
    if facts.multiple_of.is_empty() {
        let plain = dfa_expr(bounded(fractions, true, lower, upper, config)?);
        let exponents = dfa_expr(exponent_range(fractions, lower, upper, config)?);
        return Expr::union(vec![plain, exponents]).built(config);
    }
    // A float divisor makes Python divide an integer as a double, which fails past 10^308:
    // integers keep to fifteen digits there.
    let floats = facts.multiple_of.iter().any(|(d, _)| matches!(d, Divisor::Float { .. }));
    let mut lang = dfa_expr(bounded(fractions, !floats, lower, upper, config)?);
    if lang.is_empty() {
        return Ok(lang);
    }
    let lo = lower.map(|b| &b.value);
    let hi = upper.map(|b| &b.value);
    let ints = int_divisors(facts);
    if !ints.is_empty() {
        lang = lang.and(&int_divisors_expr(&ints, lo, hi, config)?.0, config)?;
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

/// The integer divisors of the facts, with where each was written.
fn int_divisors(facts: &NumberFacts) -> Vec<(&Decimal, &Ctx)> {
    facts
        .multiple_of
        .iter()
        .filter_map(|(d, ctx)| match d {
            Divisor::Int(m) => Some((m, ctx)),
            Divisor::Float { .. } => None,
        })
        .collect()
}

/// A language containing every universe text Python accepts under the facts: equal to
/// [`number_expr`] when the facts are exact; with divisors, the texts in range that the
/// divisors' exact automata accept (an integer lattice that fits a residue automaton), and
/// every exponent form in range. What `not` and `oneOf` subtract when
/// [`NumberFacts::is_exact`] is false.
pub(crate) fn number_superset(facts: &NumberFacts, dialect: Dialect, config: &DfaConfig) -> Result<Expr> {
    if facts.is_exact() || facts.unsatisfiable {
        return number_expr(facts, dialect, config);
    }
    let fractions = fractions(facts, dialect);
    let (lower, upper) = (facts.minimum.as_ref(), facts.maximum.as_ref());
    let mut plain = dfa_expr(bounded(fractions, true, lower, upper, config)?);
    let ints = int_divisors(facts);
    if !ints.is_empty() && !plain.is_empty() {
        let (lo, hi) = (lower.map(|b| &b.value), upper.map(|b| &b.value));
        if let Ok((e, true)) = int_divisors_expr(&ints, lo, hi, config) {
            plain = plain.and(&e, config)?;
        }
    }
    let exponents = dfa_expr(exponent_range(fractions, lower, upper, config)?);
    Expr::union(vec![plain, exponents]).built(config)
}

/// The exact exponent-free text of the value Python holds for `n`: the integer as written, or
/// the exact value of the double a text with a fraction or an exponent reads as (`1e23` is
/// `99999999999999991611392`); `None` for a double that overflows.
pub(crate) fn python_value_text(n: &Number) -> Option<String> {
    let text = n.to_string();
    if text.contains(['.', 'e', 'E']) {
        let x: f64 = text.parse().ok()?;
        Decimal::from_f64(x).map(|d| d.to_text())
    } else {
        Some(text)
    }
}

/// The universe texts equal to one number as `jsonschema` compares them (`enum`, `const`):
/// Python compares an `int` and a double exactly, so `1` gives `1`, `1.0`, `1.00`, `1e0`,
/// `10e-1`, ...; `1e2` gives `100`, `100.0`, `1e2`, ...; the double `1e23` gives the integer it
/// is exactly (`99999999999999991611392`) and the texts that read as it (`1e23`, not the
/// integer `100000000000000000000000`); a double gives the texts of the shortest decimal that
/// reads back as it (`0.1` for `0.1000000000000000055511151231257827`). `Expr::Empty` when the
/// value has no universe text (an overflowing double, say).
pub(crate) fn number_literal(n: &Number) -> Result<Expr> {
    let text = n.to_string();
    // The value as Python holds it: an exact integer, a double, or both (a double that is an
    // integer; an integer that is exactly a double).
    let (integer, double) = if text.contains(['.', 'e', 'E']) {
        let x: f64 = text.parse().unwrap_or(f64::NAN);
        if !x.is_finite() {
            return Ok(Expr::Empty);
        }
        let exact = Decimal::from_f64(x);
        (exact.filter(Decimal::is_integer), Some(x))
    } else {
        let Ok(v) = Decimal::parse(&text) else { return Ok(Expr::Empty) };
        let x = v.to_f64();
        let double = (Decimal::from_f64(x).as_ref() == Some(&v)).then_some(x);
        (Some(v), double)
    };
    let mut alts: Vec<String> = integer.as_ref().and_then(universe::integer_spelling).into_iter().collect();
    if let Some(x) = double {
        // Display prints the shortest digits that read back as `x`, without exponent. If any
        // decimal or exponent form of the universe reads as `x`, this one does (fewest digits),
        // and it is the only value that does.
        if let Ok(v) = Decimal::parse(&format!("{x}")) {
            alts.extend(universe::decimal_spellings(&v));
            alts.extend(universe::exponent_spellings(&v));
        }
    }
    Ok(if alts.is_empty() { Expr::Empty } else { Expr::regex(alts.join("|")) })
}

#[cfg(test)]
mod tests;
