//! How Python reads and compares numbers, so the number languages agree with `jsonschema`.
//!
//! `json.loads` gives an `int` (exact) for a number written without fraction or exponent and a
//! double (the nearest one, ties to even) otherwise; `jsonschema` then compares with Python's
//! operators, which compare an `int` with a double exactly. So a text with a fraction passes
//! `maximum: 0.3` when its *double* is at most the double of 0.3, which is not the same set
//! as the decimals at most 0.3 (`0.30000000000000001` rounds onto it).
//!
//! Rounding to nearest is monotone, so "the double of `t` is at least `b`" is a plain decimal
//! comparison of `t` with the midpoint between `b` and the double below it (the midpoint
//! itself counts when the tie goes to `b`, that is when `b`'s last mantissa bit is 0). This
//! module turns a bound into such a [`Cut`] and emulates `jsonschema`'s `multipleOf` on
//! doubles.

use super::decimal::Decimal;

/// The decimals `t` with `t >= value` (a lower cut) or `t <= value` (an upper cut); the
/// comparison is strict when `inclusive` is false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    pub(crate) value: Decimal,
    pub(crate) inclusive: bool,
}

/// The next double towards +infinity.
pub(crate) fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let bits = x.to_bits();
    f64::from_bits(if x > 0.0 { bits + 1 } else { bits - 1 })
}

/// The next double towards -infinity.
pub(crate) fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

/// Whether the double's last mantissa bit is 0: a decimal halfway between two doubles rounds
/// to the even one.
fn is_even(x: f64) -> bool {
    x.to_bits() & 1 == 0
}

/// The largest double not above `v` (`-inf` when there is none).
pub(crate) fn double_at_most(v: &Decimal) -> f64 {
    let x = v.to_f64();
    if x == f64::INFINITY {
        return f64::MAX;
    }
    if x == f64::NEG_INFINITY {
        return x;
    }
    match Decimal::from_f64(x) {
        Some(exact) if exact > *v => next_down(x),
        _ => x,
    }
}

/// The smallest double not below `v` (`+inf` when there is none).
pub(crate) fn double_at_least(v: &Decimal) -> f64 {
    -double_at_most(&v.neg())
}

/// The exact midpoint of two finite doubles.
fn midpoint(a: f64, b: f64) -> Decimal {
    let (Some(a), Some(b)) = (Decimal::from_f64(a), Decimal::from_f64(b)) else {
        unreachable!("midpoints are only taken between finite doubles")
    };
    a.add(&b).half()
}

/// The texts whose double is `>= bound` (`> bound` when `strict`), as a lower cut on the
/// text's decimal value. `bound` must lie well inside the double range (callers clamp it).
pub(crate) fn lower_cut(bound: &Decimal, strict: bool) -> Cut {
    let mut b = double_at_least(bound);
    if strict && Decimal::from_f64(b).as_ref() == Some(bound) {
        b = next_up(b);
    }
    Cut { value: midpoint(next_down(b), b), inclusive: is_even(b) }
}

/// The texts whose double is `<= bound` (`< bound` when `strict`), as an upper cut.
pub(crate) fn upper_cut(bound: &Decimal, strict: bool) -> Cut {
    let lower = lower_cut(&bound.neg(), strict);
    Cut { value: lower.value.neg(), inclusive: lower.inclusive }
}

/// `jsonschema`'s `multipleOf` with a float divisor, for an instance whose double is `x` (an
/// `int` instance is divided as `float(instance)`): the quotient, rounded to a double, must be
/// integral; when it overflows, the exact ratio of the two doubles must be.
pub(crate) fn python_float_multiple(x: f64, divisor: f64) -> bool {
    let q = x / divisor;
    if q.is_finite() {
        return q.fract() == 0.0;
    }
    // Fraction(x) / Fraction(divisor): with odd mantissas m and exponents e, the ratio
    // m_x / m_d * 2^(e_x - e_d) is an integer when m_d divides m_x and e_x >= e_d.
    let (mx, ex) = odd_parts(x);
    let (md, ed) = odd_parts(divisor);
    md != 0 && mx % md == 0 && ex >= ed
}

/// `x = m * 2^e` with `m` odd (`(0, 0)` for zero).
fn odd_parts(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (m, e) = if biased == 0 { (fraction, -1074) } else { (fraction | (1u64 << 52), biased - 1075) };
    if m == 0 {
        return (0, 0);
    }
    let tz = m.trailing_zeros();
    (m >> tz, e + tz as i32)
}

#[cfg(test)]
mod tests;
