//! What a schema says about numbers: bounds, divisors and the integer type, read as Python
//! reads them and merged across `allOf`.
//!
//! `json.loads` turns a keyword's value into an exact `int` when it is written without
//! fraction or exponent, and into a double otherwise, and `jsonschema` compares with that.
//! So a bound is kept as the exact value Python holds (`"maximum": 0.1` is the double
//! 0.1000000000000000055511151231257827..., `"maximum": 9007199254740993` stays odd), and a
//! divisor remembers which of the two it was, because `multipleOf` takes a different path for
//! each (`%` on ints, a rounded division on doubles).

use serde_json::{Map, Number, Value};

use super::decimal::{Decimal, DecimalError};
use crate::error::{GrammarError, Result};
use crate::json_schema::context::{Ctx, Dialect};

/// A bound on numbers: the exact value Python compares with, and whether equality fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bound {
    pub(crate) value: Decimal,
    pub(crate) exclusive: bool,
}

/// A `multipleOf` value as Python holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Divisor {
    /// Written without fraction or exponent: a Python `int`, tested with `%`, exactly.
    Int(Decimal),
    /// Written with a fraction or exponent: a double. `written` is the decimal of the text
    /// (`0.01`), `value` the double Python divides by.
    Float { written: Decimal, value: f64 },
}

/// What a (merged) schema says about a number.
#[derive(Debug, Clone, Default)]
pub(crate) struct NumberFacts {
    /// Type `integer`. Not read by [`NumberFacts::from_keywords`]: the caller decides it from
    /// `type` (merged: integer when any fact says so).
    pub(crate) integer: bool,
    /// The tightest lower bound.
    pub(crate) minimum: Option<Bound>,
    /// The tightest upper bound.
    pub(crate) maximum: Option<Bound>,
    /// Every `multipleOf`, with where it was written; all must hold.
    pub(crate) multiple_of: Vec<(Divisor, Ctx)>,
    /// A bound no number passes (a `minimum` that overflows to infinity as a double).
    pub(crate) unsatisfiable: bool,
}

/// A number keyword's value as Python reads it.
enum PyNumber {
    Int(Decimal),
    Float(f64),
}

impl NumberFacts {
    /// What decides the language of these facts, as text: everything but where the divisors
    /// were written (equal keys, equal languages).
    pub(crate) fn key(&self) -> String {
        let divisors: Vec<&Divisor> = self.multiple_of.iter().map(|(d, _)| d).collect();
        format!("{} {} {:?} {:?} {:?}", self.integer, self.unsatisfiable, self.minimum, self.maximum, divisors)
    }

    /// The facts of `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` and
    /// `multipleOf` in one schema object, read as `dialect` defines them: in draft 4 the
    /// exclusive keywords are booleans that make `minimum`/`maximum` strict, later they are
    /// bounds of their own.
    pub(crate) fn from_keywords(map: &Map<String, Value>, dialect: Dialect, ctx: &Ctx) -> Result<NumberFacts> {
        let mut facts = NumberFacts::default();
        let draft4 = dialect == Dialect::Draft4;
        let strict = |keyword: &str| -> Result<bool> {
            match map.get(keyword) {
                None => Ok(false),
                Some(Value::Bool(b)) if draft4 => Ok(*b),
                Some(_) if draft4 => Err(ctx.invalid(format!("{keyword} must be a boolean in draft 4"))),
                Some(_) => Ok(false),
            }
        };
        let (min_strict, max_strict) = (strict("exclusiveMinimum")?, strict("exclusiveMaximum")?);
        let mut keywords = vec![("minimum", true, min_strict), ("maximum", false, max_strict)];
        if !draft4 {
            keywords.push(("exclusiveMinimum", true, true));
            keywords.push(("exclusiveMaximum", false, true));
        }
        for (keyword, lower, exclusive) in keywords {
            let Some(v) = map.get(keyword) else { continue };
            let Value::Number(n) = v else {
                return Err(ctx.invalid(format!("{keyword} must be a number")));
            };
            let bound = match python_number(n, keyword, ctx)? {
                PyNumber::Int(d) => Some(Bound { value: d, exclusive }),
                PyNumber::Float(x) => match float_bound(x, lower, exclusive) {
                    Limit::Bound(b) => Some(b),
                    Limit::Open => None,
                    Limit::Closed => {
                        facts.unsatisfiable = true;
                        None
                    }
                },
            };
            if let Some(b) = bound {
                if lower {
                    facts.tighten_lower(b);
                } else {
                    facts.tighten_upper(b);
                }
            }
        }
        if let Some(v) = map.get("multipleOf") {
            let Value::Number(n) = v else {
                return Err(ctx.invalid("multipleOf must be a number"));
            };
            let divisor = match python_number(n, "multipleOf", ctx)? {
                PyNumber::Int(d) => Divisor::Int(d),
                PyNumber::Float(value) => {
                    if !value.is_finite() || value == 0.0 {
                        return Err(ctx.unsupported(
                            "multipleOf",
                            format!("{n} is {value} as a double, which jsonschema cannot divide by meaningfully"),
                        ));
                    }
                    let written = Decimal::parse(&n.to_string()).map_err(|e| number_error(e, "multipleOf", ctx))?;
                    Divisor::Float { written, value }
                }
            };
            let positive = match &divisor {
                Divisor::Int(d) => !d.is_zero() && !d.is_negative(),
                Divisor::Float { value, .. } => *value > 0.0,
            };
            if !positive {
                return Err(ctx.invalid("multipleOf must be strictly positive"));
            }
            facts.multiple_of.push((divisor, ctx.clone()));
        }
        Ok(facts)
    }

    /// Adds the facts of another schema that must hold too (`allOf`).
    pub(crate) fn merge(&mut self, other: NumberFacts) {
        self.integer |= other.integer;
        self.unsatisfiable |= other.unsatisfiable;
        if let Some(b) = other.minimum {
            self.tighten_lower(b);
        }
        if let Some(b) = other.maximum {
            self.tighten_upper(b);
        }
        for (d, ctx) in other.multiple_of {
            if !self.multiple_of.iter().any(|(have, _)| *have == d) {
                self.multiple_of.push((d, ctx));
            }
        }
    }

    fn tighten_lower(&mut self, b: Bound) {
        self.minimum = Some(match self.minimum.take() {
            None => b,
            Some(a) if a.value == b.value => Bound { value: a.value, exclusive: a.exclusive || b.exclusive },
            Some(a) => {
                if a.value > b.value {
                    a
                } else {
                    b
                }
            }
        });
    }

    fn tighten_upper(&mut self, b: Bound) {
        self.maximum = Some(match self.maximum.take() {
            None => b,
            Some(a) if a.value == b.value => Bound { value: a.value, exclusive: a.exclusive || b.exclusive },
            Some(a) => {
                if a.value < b.value {
                    a
                } else {
                    b
                }
            }
        });
    }

    /// Whether [`number_expr`](super::number_expr) is exactly the set of universe texts
    /// Python accepts: when there is no divisor. A divisor leaves out the exponent forms
    /// (Python divides their doubles, whose rounding a residue automaton over decimal digits
    /// does not follow); a float divisor makes even the decimals a sound subset (`jsonschema`
    /// divides in doubles and rejects some true multiples, `0.3` is not a multiple of `0.1`
    /// there, in a pattern no small automaton follows).
    pub(crate) fn is_exact(&self) -> bool {
        self.multiple_of.is_empty()
    }
}

/// The value of a number keyword as Python holds it.
fn python_number(n: &Number, keyword: &str, ctx: &Ctx) -> Result<PyNumber> {
    let text = n.to_string();
    if text.contains(['.', 'e', 'E']) {
        // Rust's parser rounds to nearest, ties to even, and overflows to infinity, as
        // Python's float() does.
        let x: f64 = text.parse().map_err(|_| ctx.invalid(format!("{keyword}: {text} is not a number")))?;
        Ok(PyNumber::Float(x))
    } else {
        Decimal::parse(&text).map(PyNumber::Int).map_err(|e| number_error(e, keyword, ctx))
    }
}

fn number_error(e: DecimalError, keyword: &str, ctx: &Ctx) -> GrammarError {
    match e {
        DecimalError::Syntax => ctx.invalid(format!("{keyword} is not a JSON number")),
        DecimalError::TooLarge => {
            ctx.unsupported(keyword, "the number has too many digits or too large an exponent to handle exactly")
        }
    }
}

/// What a bound written as a double says.
enum Limit {
    Bound(Bound),
    /// Nothing: every number passes.
    Open,
    /// No number passes.
    Closed,
}

/// The bound a double sets. An infinite one (the text overflowed) sets none when it is on the
/// open side (`maximum: 1e400`: every number, integers of any length too, is below infinity);
/// on the other side nothing passes.
fn float_bound(x: f64, lower: bool, exclusive: bool) -> Limit {
    match Decimal::from_f64(x) {
        Some(value) => Limit::Bound(Bound { value, exclusive }),
        None if (x > 0.0) != lower => Limit::Open,
        None => Limit::Closed,
    }
}
