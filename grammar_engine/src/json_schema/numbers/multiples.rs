//! `multipleOf`: the texts `jsonschema` accepts as multiples, as automata.
//!
//! An integer divisor `m` (a Python `int`) is tested with `%`, exactly, and on a universe text
//! that means: an integral value whose integer part is 0 modulo `m`. A residue automaton reads
//! the digits and keeps the value so far modulo `m`, which is exact and has `m` states.
//!
//! A divisor written with a fraction or exponent is a double `d`, and `jsonschema` accepts `x`
//! when the double `x / d` is integral. That set has no regular shape: a third of the true
//! multiples of 0.1 fail (`0.3 / 0.1 == 2.9999999999999996`). So the language is a sound
//! subset, the union of three parts Python provably accepts:
//! - a lattice: the multiples of a dyadic multiple `D = k * d` of the written divisor
//!   (`0.25` for `0.01`), when `d` is within 2^-54 relative of its double: then a multiple of
//!   `D` is an exact double and the quotient lands within half an ulp of the integer. For a
//!   dyadic divisor (`0.5`, `2.5`) `D` is the divisor itself and the lattice is every multiple;
//! - the large values, `|x| >= 2^52 * d`, whose quotient is so large that every double there
//!   is an integer;
//! - the multiples near zero (at most [`ENUM_LIMIT`] of them, within the bounds; for a tiny
//!   divisor, the multiples of a coarser power-of-ten grid), each checked by running Python's
//!   arithmetic on its double.

use super::automaton::{build, Walker};
use super::decimal::Decimal;
use super::doubles::python_float_multiple;
use super::facts::Bound;
use super::finite::values_dfa;
use super::range::{bounded, Fractions};
use super::universe::MAX_SIGNIFICANT;
use crate::automata::Expr;
use crate::automata::DfaConfig;
use crate::error::Result;
use crate::json_schema::context::Ctx;
use std::rc::Rc;

/// Largest modulus of a residue automaton: it is explored with this many states times the
/// fraction digits it tracks, plus one, before minimization.
pub(crate) const RESIDUE_LIMIT: u64 = 100_000;

/// Most states of a minimized residue automaton. Each becomes up to 16 states once crossed
/// with the digit count of the universe, and every state costs the token index a walk:
/// divisibility by a prime like 19997 needs all of its residues, 3600 or 86400 only a few
/// hundred states (their factors 2 and 5 are decided by the last digits).
pub(crate) const RESIDUE_STATES: usize = 1_000;

/// Largest modulus of the lattice of a float divisor, which is only a part of a sound subset:
/// a coarser lattice costs less (1/16 rather than 1/256 for 1e-8).
const FLOAT_RESIDUE_LIMIT: u64 = 1_000;

/// Most multiples spelled out one by one.
pub(crate) const ENUM_LIMIT: usize = 20_000;

/// Width of the window of checked multiples of a tiny float divisor: below it, the window
/// steps by a power of ten times the divisor instead (0.01 for 1e-8), so that it covers the
/// values a document plausibly holds rather than a sliver around zero.
const WINDOW_WIDTH: u64 = 200;

/// The multiples of `p / 2^a` (`p` odd when `a > 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lattice {
    pub(crate) p: u64,
    pub(crate) a: u32,
}

impl Lattice {
    /// The smallest dyadic multiple of a positive decimal, when its numerator fits a u64:
    /// `w = n / (2^s 5^s)`; multiplying by the 5s left in the denominator gives `p / 2^a`.
    pub(crate) fn dyadic_multiple(w: &Decimal) -> Option<Lattice> {
        let (mut n, e) = w.coefficient()?;
        if n == 0 {
            return None;
        }
        if e >= 0 {
            return Some(Lattice { p: n.checked_mul(10u64.checked_pow(e as u32)?)?, a: 0 });
        }
        let s = (-e) as u32;
        let (mut twos, mut fives) = (0u32, 0u32);
        while n % 2 == 0 {
            n /= 2;
            twos += 1;
        }
        while n % 5 == 0 {
            n /= 5;
            fives += 1;
        }
        // w = n * 2^(twos - s) * 5^(fives - s); drop the 5s from the denominator.
        let p = n.checked_mul(5u64.checked_pow(fives.saturating_sub(s))?)?;
        if twos >= s {
            Some(Lattice { p: p.checked_mul(2u64.checked_pow(twos - s)?)?, a: 0 })
        } else {
            Some(Lattice { p, a: s - twos })
        }
    }

    /// Multiples of both lattices; `None` when the step overflows.
    pub(crate) fn lcm(self, other: Lattice) -> Option<Lattice> {
        let g = gcd(self.p, other.p);
        Some(Lattice { p: (self.p / g).checked_mul(other.p)?, a: self.a.min(other.a) })
    }

    /// The step as a decimal: `p / 2^a = p * 5^a / 10^a`.
    pub(crate) fn step(self) -> Decimal {
        let mut v = Decimal::from_i128(i128::from(self.p));
        for _ in 0..self.a {
            v = v.mul_u64(5);
        }
        v.shift(-(self.a as i32))
    }

    /// `t` is a multiple when `t * 10^a` is an integer divisible by `p * 5^a`.
    fn modulus(self) -> Option<u64> {
        5u64.checked_pow(self.a)?.checked_mul(self.p)
    }

    /// A coarser lattice (steps doubled) whose residue automaton's modulus is at most `limit`.
    fn fitting(mut self, limit: u64) -> Option<Lattice> {
        loop {
            if self.modulus().is_some_and(|m| m <= limit) {
                return Some(self);
            }
            if self.a == 0 {
                return None;
            }
            self.a -= 1;
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Reads the digits of a number text keeping `value * 10^scale` modulo `modulus`. Signs are
/// ignored and syntax is not checked: the language is always intersected with a range's.
struct Residue {
    modulus: u64,
    scale: u32,
}

impl Walker for Residue {
    /// The residue, and 0 in the integer part or 1 + the fraction digits absorbed.
    type State = (u64, u32);

    fn start(&self) -> (u64, u32) {
        (0, 0)
    }

    fn step(&self, &(r, k): &(u64, u32), byte: u8) -> Option<(u64, u32)> {
        match byte {
            b'-' => Some((r, k)),
            b'.' => (k == 0).then_some((r, 1)),
            b'0'..=b'9' => {
                let d = u64::from(byte - b'0');
                let next = ((u128::from(r) * 10 + u128::from(d)) % u128::from(self.modulus)) as u64;
                if k == 0 {
                    Some((next, 0))
                } else if k - 1 < self.scale {
                    Some((next, k + 1))
                } else {
                    (d == 0).then_some((r, k))
                }
            }
            _ => None,
        }
    }

    fn accepts(&self, &(r, k): &(u64, u32)) -> bool {
        let absorbed = k.saturating_sub(1);
        let mut v = u128::from(r);
        for _ in absorbed..self.scale {
            v = v * 10 % u128::from(self.modulus);
        }
        v == 0
    }
}

/// The texts whose value is a multiple of the lattice's step (any sign, any syntax around the
/// digits); `None` when the modulus is past [`RESIDUE_LIMIT`] or the automaton past
/// [`RESIDUE_STATES`].
pub(crate) fn lattice_expr(lattice: Lattice, config: &DfaConfig) -> Result<Option<Expr>> {
    let Some(modulus) = lattice.modulus().filter(|&m| m <= RESIDUE_LIMIT) else { return Ok(None) };
    // Split the modulus into its factors of 2 and 5 and the rest (coprime, so both residues
    // zero is the product's residue zero): the first is decided by the last digits and
    // minimizes to few states, and exploring the two apart is far cheaper than together.
    let mut tens = 1;
    let mut rest = modulus;
    for f in [2, 5] {
        while rest % f == 0 {
            rest /= f;
            tens *= f;
        }
    }
    let mut lang: Option<Expr> = None;
    for m in [tens, rest] {
        if m == 1 && lang.is_some() {
            continue;
        }
        let part = match build(&Residue { modulus: m, scale: lattice.a }, "multipleOf residue automaton", config)? {
            Some(d) => Expr::Dfa(Rc::new(d)),
            None => return Ok(Some(Expr::Empty)),
        };
        lang = Some(match lang {
            None => part,
            Some(l) => l.and(&part, config)?,
        });
    }
    let Some(lang) = lang else { return Ok(None) };
    match lang.to_dfa(config)? {
        Some(d) if d.num_states() > RESIDUE_STATES => Ok(None),
        Some(d) => Ok(Some(Expr::Dfa(Rc::new(d)))),
        None => Ok(Some(Expr::Empty)),
    }
}

/// Up to `count` multiples `j * step` within `[lo, hi]` and the universe, nearest to zero
/// first, that `keep` accepts; and whether that was all the multiples in range.
pub(crate) fn enumerate(
    step: &Decimal,
    lo: Option<&Decimal>,
    hi: Option<&Decimal>,
    count: usize,
    keep: impl Fn(&Decimal) -> bool,
) -> (Vec<Decimal>, bool) {
    // |j * step| < 10^15 for a universe value.
    let far = Decimal::from_i128(10i128.pow(MAX_SIGNIFICANT as u32));
    let limit = quotient_floor(&far, step);
    let mut j_lo = -limit;
    let mut j_hi = limit;
    if let Some(lo) = lo {
        j_lo = j_lo.max(quotient_ceil(lo, step, limit));
    }
    if let Some(hi) = hi {
        j_hi = j_hi.min(quotient_floor_signed(hi, step, limit));
    }
    let mut out = Vec::new();
    if j_lo > j_hi {
        return (out, true);
    }
    let total = (j_hi - j_lo) as u128 + 1;
    let complete = total <= count as u128;
    let order: Box<dyn Iterator<Item = i64>> = if j_lo <= 0 && 0 <= j_hi {
        let reach = j_hi.max(-j_lo);
        let outward = (0..=reach).flat_map(|i: i64| if i == 0 { vec![0] } else { vec![i, -i] });
        Box::new(outward.filter(move |j| (j_lo..=j_hi).contains(j)))
    } else if j_lo > 0 {
        Box::new(j_lo..=j_hi)
    } else {
        Box::new((j_lo..=j_hi).rev())
    };
    for j in order.take(count) {
        let v = step.mul_i64(j);
        if keep(&v) {
            out.push(v);
        }
    }
    (out, complete)
}

/// `floor(v / step)` for `v >= 0`, at most `i64::MAX / 2`.
fn quotient_floor(v: &Decimal, step: &Decimal) -> i64 {
    let guess = (v.to_f64() / step.to_f64()).floor();
    let mut j = if guess >= (i64::MAX / 2) as f64 { i64::MAX / 2 } else { guess as i64 };
    while j > 0 && step.mul_i64(j) > *v {
        j -= 1;
    }
    while j < i64::MAX / 2 && step.mul_i64(j + 1) <= *v {
        j += 1;
    }
    j
}

/// `floor(v / step)` clamped to `[-limit - 1, limit + 1]`.
fn quotient_floor_signed(v: &Decimal, step: &Decimal, limit: i64) -> i64 {
    let guess = (v.to_f64() / step.to_f64()).floor();
    let bound = (limit + 1) as f64;
    if guess > bound {
        return limit + 1;
    }
    if guess < -bound {
        return -limit - 1;
    }
    let mut j = guess as i64;
    while step.mul_i64(j) > *v {
        j -= 1;
    }
    while step.mul_i64(j + 1) <= *v {
        j += 1;
    }
    j
}

/// `ceil(v / step)` clamped to `[-limit - 1, limit + 1]`.
fn quotient_ceil(v: &Decimal, step: &Decimal, limit: i64) -> i64 {
    -quotient_floor_signed(&v.neg(), step, limit)
}

/// The language of the universe texts of some values (of a prefix of them when there are too
/// many for one trie, which only makes a sound subset smaller).
pub(crate) fn values_expr(values: &[Decimal]) -> Expr {
    values_dfa(values).0.map_or(Expr::Empty, |d| Expr::Dfa(Rc::new(d)))
}

/// What Python accepts for `multipleOf` with a float divisor (written `written`, held as the
/// double `value`): the sound subset described in the module documentation, over all texts
/// (to be intersected with the range). `lo`/`hi` bound where multiples are enumerated.
pub(crate) fn float_divisor_expr(
    written: &Decimal,
    value: f64,
    lo: Option<&Decimal>,
    hi: Option<&Decimal>,
    config: &DfaConfig,
) -> Result<Expr> {
    let mut parts = Vec::new();
    let mut complete_lattice = false;
    let held = Decimal::from_f64(value).unwrap_or_else(Decimal::zero);
    if let Some(lattice) = Lattice::dyadic_multiple(written).filter(|_| close_to_double(written, &held)) {
        if let Some(fit) = lattice.fitting(FLOAT_RESIDUE_LIMIT) {
            complete_lattice = fit == lattice && lattice.step() == *written;
            if let Some(e) = lattice_expr(fit, config)? {
                parts.push(e);
            }
        }
    }
    // |x| >= 2^52 * d: the quotient is at least 2^52, where every double is an integer.
    if let Some(edge) = Decimal::from_f64(value * 2f64.powi(52)) {
        let above = Bound { value: edge.clone(), exclusive: false };
        let below = Bound { value: edge.neg(), exclusive: false };
        for (lower, upper) in [(Some(&above), None), (None, Some(&below))] {
            if let Some(d) = bounded(Fractions::Any, false, lower, upper, config)? {
                parts.push(Expr::Dfa(Rc::new(d)));
            }
        }
    }
    if !complete_lattice {
        let mut grid = written.clone();
        loop {
            let span = grid.mul_u64(ENUM_LIMIT as u64);
            let fits = matches!((lo, hi), (Some(l), Some(h)) if h.sub(l) <= span);
            if fits || span >= Decimal::from_i128(i128::from(WINDOW_WIDTH)) {
                break;
            }
            grid = grid.shift(1);
        }
        let keep = |v: &Decimal| python_float_multiple(v.to_f64(), value);
        let values = if grid == *written {
            enumerate(written, lo, hi, ENUM_LIMIT, keep).0
        } else {
            // Half the budget on the divisor's own steps near zero, half on the coarser grid.
            let mut v = enumerate(written, lo, hi, ENUM_LIMIT / 2, keep).0;
            v.extend(enumerate(&grid, lo, hi, ENUM_LIMIT / 2, keep).0);
            v
        };
        parts.push(values_expr(&values));
    }
    Ok(Expr::union(parts))
}

/// Whether `|written - held| * 2^54 < held`: the written divisor is within 2^-54 relative of
/// the double Python divides by, so `k * written / held` rounds to `k` for every integer `k`.
fn close_to_double(written: &Decimal, held: &Decimal) -> bool {
    written.sub(held).abs().mul_u64(1u64 << 54) < *held
}

/// What Python accepts for integer divisors (all of them), among texts without exponent: a
/// residue automaton of their least common multiple (exact, integers of any length), or its
/// multiples in range of at most fifteen digits spelled out when few (a subset: longer
/// integers are left out). The flag says which. Errors when neither fits.
pub(crate) fn int_divisors_expr(
    divisors: &[(&Decimal, &Ctx)],
    lo: Option<&Decimal>,
    hi: Option<&Decimal>,
    config: &DfaConfig,
) -> Result<(Expr, bool)> {
    let Some(&(_, ctx)) = divisors.first() else { return Ok((Expr::regex("[-.0-9]*"), true)) };
    let universe = 10u64.pow(MAX_SIGNIFICANT as u32);
    // A divisor of sixteen digits or more has no multiple but 0 of fifteen digits or fewer.
    let mut lcm = Some(Lattice { p: 1, a: 0 });
    for (d, _) in divisors {
        let step = d.coefficient().and_then(|(c, e)| c.checked_mul(10u64.checked_pow(u32::try_from(e).ok()?)?));
        lcm = match (lcm, step) {
            (Some(l), Some(s)) if s < universe => l.lcm(Lattice { p: s, a: 0 }).filter(|l| l.p < universe),
            _ => None,
        };
    }
    let Some(lattice) = lcm else { return Ok((values_expr(&[Decimal::zero()]), false)) };
    if let Some(e) = lattice_expr(lattice, config)? {
        return Ok((e, true));
    }
    let (values, complete) = enumerate(&lattice.step(), lo, hi, ENUM_LIMIT, |_| true);
    if complete {
        return Ok((values_expr(&values), false));
    }
    Err(ctx.unsupported(
        "multipleOf",
        format!(
            "divisibility by {} needs a residue automaton of more than {RESIDUE_STATES} states; \
             bounds with at most {ENUM_LIMIT} multiples between them would do",
            lattice.p
        ),
    ))
}
