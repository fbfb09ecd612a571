//! The exponent forms between two bounds, as Python judges them, as a DFA.
//!
//! Python reads a text with an exponent as a double, so it passes a bound when its decimal
//! value lies beyond the bound's [`Cut`] (see `doubles`), as a decimal does. That value is the
//! mantissa's significant digits placed at the mantissa's magnitude plus the exponent, and the
//! exponent comes last. So the walker reads the mantissa comparing its significant digits with
//! each cut's (three states: below, equal, above so far) and remembering the magnitude of its
//! first non-zero digit; at the `e` it turns that into the interval of exponents that put the
//! value within the cuts (an exponent above "the cut's magnitude minus the mantissa's" makes
//! the value larger than the cut whatever the digits, one below makes it smaller, the one
//! between leaves it to the digits), and reads the exponent against that interval.
//!
//! The universe's windows on the mantissa and the exponent (`universe.rs`) keep the states
//! finite. The integer type (from draft 6) admits the texts whose last non-zero digit lands at
//! or before the point; draft 4 admits none, as it counts only texts without fraction or
//! exponent as integers.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::automaton::{build, Walker};
use super::decimal::Decimal;
use super::doubles::{lower_cut, upper_cut, Cut};
use super::facts::Bound;
use super::range::{sign_limits, Fractions};
use super::universe::{MANTISSA_INT_DIGITS, MANTISSA_MAG_LO, MAX_EXPONENT, MAX_SIGNIFICANT};
use crate::automata::{Dfa, DfaConfig};
use crate::error::Result;

const SIG: u8 = MAX_SIGNIFICANT as u8;
const K: i64 = MAX_EXPONENT as i64;

/// A magnitude limit: its significant digits (none for zero), the power of ten of the first,
/// and whether equality passes.
#[derive(Debug, Clone)]
struct Mark {
    digits: Vec<u8>,
    magnitude: i64,
    inclusive: bool,
}

impl Mark {
    fn new(c: &Cut) -> Mark {
        Mark { digits: c.value.significant_digits().to_vec(), magnitude: c.value.magnitude().unwrap_or(0), inclusive: c.inclusive }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// A significant string equal to this mark's first `read` digits, ended there: below the
    /// mark when the mark has digits left (it has no trailing zeros).
    fn settle(&self, ord: Ordering, read: u8) -> Ordering {
        if ord == Ordering::Equal && usize::from(read) < self.digits.len() {
            Ordering::Less
        } else {
            ord
        }
    }
}

/// The magnitude limits of the texts of one sign (lower, upper); `None`: no text of that sign.
type Side = Option<(Option<Mark>, Option<Mark>)>;

/// What the walker knows inside the mantissa.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Mantissa {
    neg: bool,
    /// The integer part is `0`.
    zero_int: bool,
    /// Integer digits read (none for `0`).
    int_len: u8,
    /// A point was read, then `frac_len` fraction digits.
    point: bool,
    frac_len: u8,
    /// Digits read since the first non-zero one (0: the value is zero so far).
    sig: u8,
    /// Power of ten of the first non-zero digit.
    magnitude: i8,
    /// Index of the last non-zero digit in the significant string (for the integer type only).
    last: u8,
    /// The significant string so far against each mark's (lower, upper).
    ord: [Ordering; 2],
    /// Only zeros may follow (the fifteen digits are used up, or a zero's leading zeros went
    /// past the window); `ord` is settled.
    tail: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum St {
    Start,
    Minus,
    Mantissa(Mantissa),
    /// After `e`/`E`: the exponents that keep the value within the limits.
    Exp { lo: i16, hi: i16 },
    /// In the exponent's digits (after its sign, if any): the absolute exponent must end in
    /// `lo..=hi`; `value` is the digits so far (`None`: no digit yet).
    Digits { lo: u16, hi: u16, value: Option<u16> },
}

/// The walker of exponent forms within cuts: see the module documentation.
pub(crate) struct ExponentWalker {
    integer: bool,
    /// Positive texts (including `0`), then negative ones (including `-0`).
    sides: [Side; 2],
}

impl ExponentWalker {
    fn new(integer: bool, lo: Option<&Cut>, hi: Option<&Cut>) -> ExponentWalker {
        let side = |negative: bool| sign_limits(negative, lo, hi).map(|(l, h)| (l.as_ref().map(Mark::new), h.as_ref().map(Mark::new)));
        ExponentWalker { integer, sides: [side(false), side(true)] }
    }

    fn marks(&self, neg: bool) -> [Option<&Mark>; 2] {
        match &self.sides[usize::from(neg)] {
            Some((l, h)) => [l.as_ref(), h.as_ref()],
            None => [None, None],
        }
    }

    /// `m` with one more significant digit `d`.
    fn significant(&self, mut m: Mantissa, d: u8) -> Mantissa {
        for (o, mark) in m.ord.iter_mut().zip(self.marks(m.neg)) {
            if let Some(mark) = mark.filter(|k| !k.is_zero()) {
                if *o == Ordering::Equal {
                    *o = d.cmp(&mark.digits.get(usize::from(m.sig)).copied().unwrap_or(0));
                }
            }
        }
        if d != 0 && self.integer {
            m.last = m.sig;
        }
        m.sig += 1;
        m
    }

    fn first_digit(&self, neg: bool, d: u8) -> Option<St> {
        self.sides[usize::from(neg)].as_ref()?;
        let m = Mantissa {
            neg,
            zero_int: d == 0,
            int_len: u8::from(d != 0),
            point: false,
            frac_len: 0,
            sig: 0,
            magnitude: 0,
            last: 0,
            ord: [Ordering::Equal; 2],
            tail: false,
        };
        Some(St::Mantissa(if d == 0 { m } else { self.significant(m, d) }))
    }

    fn digit(&self, mut m: Mantissa, d: u8) -> Option<St> {
        if m.tail {
            return (d == 0).then_some(St::Mantissa(m));
        }
        if !m.point {
            if m.zero_int || usize::from(m.int_len) >= MANTISSA_INT_DIGITS {
                return None;
            }
            m.int_len += 1;
            m.magnitude = m.int_len as i8 - 1;
            return Some(St::Mantissa(self.significant(m, d)));
        }
        // Digits counted as for decimals: integer digits, then every fraction digit.
        m.frac_len += 1;
        let count = m.int_len + m.frac_len;
        if m.sig == 0 {
            let magnitude = -i32::from(m.frac_len);
            if d == 0 {
                // Still zero: past the window no non-zero digit may come.
                m.tail = magnitude - 1 < MANTISSA_MAG_LO;
                return Some(St::Mantissa(m));
            }
            if magnitude < MANTISSA_MAG_LO {
                return None;
            }
            m.magnitude = magnitude as i8;
        } else if d != 0 && count > SIG {
            return None;
        }
        let mut m = self.significant(m, d);
        if count >= SIG {
            let marks = self.marks(m.neg);
            for (o, mark) in m.ord.iter_mut().zip(marks) {
                if let Some(mark) = mark {
                    *o = mark.settle(*o, m.sig);
                }
            }
            m.tail = true;
            m.frac_len = 0;
        }
        Some(St::Mantissa(m))
    }

    /// The exponents that put the value of mantissa `m` within the limits, when there are any.
    fn exponents(&self, m: &Mantissa) -> Option<St> {
        if m.point && m.frac_len == 0 && !m.tail {
            return None;
        }
        let [lower, upper] = self.marks(m.neg);
        self.sides[usize::from(m.neg)].as_ref()?;
        if m.sig == 0 {
            // Zero: below every non-zero limit, equal to a zero one.
            let lo_ok = lower.is_none_or(|k| k.is_zero() && k.inclusive);
            let hi_ok = upper.is_none_or(|k| !k.is_zero() || k.inclusive);
            return (lo_ok && hi_ok).then_some(St::Exp { lo: -K as i16, hi: K as i16 });
        }
        let settle = |i: usize, mark: &Mark| if m.tail { m.ord[i] } else { mark.settle(m.ord[i], m.sig) };
        let magnitude = i64::from(m.magnitude);
        let (mut a, mut b) = (-K, K);
        if let Some(mark) = lower.filter(|k| !k.is_zero()) {
            let ord = settle(0, mark);
            let t = mark.magnitude - magnitude;
            let at_t = ord == Ordering::Greater || (ord == Ordering::Equal && mark.inclusive);
            a = a.max(if at_t { t } else { t + 1 });
        }
        if let Some(mark) = upper {
            if mark.is_zero() {
                return None;
            }
            let ord = settle(1, mark);
            let t = mark.magnitude - magnitude;
            let at_t = ord == Ordering::Less || (ord == Ordering::Equal && mark.inclusive);
            b = b.min(if at_t { t } else { t - 1 });
        }
        if self.integer {
            // The last non-zero digit, at magnitude - last + k, must be at or before the point.
            a = a.max(i64::from(m.last) - magnitude);
        }
        (a <= b).then_some(St::Exp { lo: a as i16, hi: b as i16 })
    }
}

impl Walker for ExponentWalker {
    type State = St;

    fn start(&self) -> St {
        St::Start
    }

    fn step(&self, state: &St, byte: u8) -> Option<St> {
        match (state, byte) {
            (St::Start, b'-') => Some(St::Minus),
            (St::Start, b'0'..=b'9') => self.first_digit(false, byte - b'0'),
            (St::Minus, b'0'..=b'9') => self.first_digit(true, byte - b'0'),
            (St::Mantissa(m), b'0'..=b'9') => self.digit(*m, byte - b'0'),
            (St::Mantissa(m), b'.') if !m.point => Some(St::Mantissa(Mantissa { point: true, ..*m })),
            (St::Mantissa(m), b'e' | b'E') => self.exponents(m),
            (&St::Exp { lo, hi }, b'+') => (hi >= 0).then(|| St::Digits { lo: lo.max(0) as u16, hi: hi as u16, value: None }),
            (&St::Exp { lo, hi }, b'-') => (lo <= 0).then(|| St::Digits { lo: (-hi).max(0) as u16, hi: (-lo) as u16, value: None }),
            (&St::Exp { lo, hi }, b'0'..=b'9') if hi >= 0 => {
                St::Digits { lo: lo.max(0) as u16, hi: hi as u16, value: None }.exponent_digit(byte - b'0')
            }
            (St::Digits { .. }, b'0'..=b'9') => state.exponent_digit(byte - b'0'),
            _ => None,
        }
    }

    fn accepts(&self, state: &St) -> bool {
        matches!(state, St::Digits { lo, value: Some(v), .. } if v >= lo)
    }
}

impl St {
    fn exponent_digit(&self, d: u8) -> Option<St> {
        let St::Digits { lo, hi, value } = *self else { return None };
        let v = value.unwrap_or(0) * 10 + u16::from(d);
        (v <= hi).then_some(St::Digits { lo, hi, value: Some(v) })
    }
}

/// The exponent forms of the universe whose Python value satisfies both bounds (either may be
/// missing), integral ones only with `Fractions::ZerosOnly` and none with
/// `Fractions::Forbidden`, as a minimized DFA; `None` when there is none.
pub(crate) fn exponent_range(fractions: Fractions, lower: Option<&Bound>, upper: Option<&Bound>, config: &DfaConfig) -> Result<Option<Dfa>> {
    if fractions == Fractions::Forbidden {
        return Ok(None);
    }
    // Schemas repeat a few ranges (none, `minimum: 0`, ...) and one takes milliseconds to walk:
    // built ranges are kept, by their inputs and the state limit they were built under.
    let key = format!("{fractions:?} {lower:?} {upper:?} {}", config.max_states);
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(dfa) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Some(dfa.clone()));
    }
    let built = walk_range(fractions, lower, upper, config)?;
    if let Some(dfa) = &built {
        let mut kept = memo.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MEMO_RANGES {
            kept.clear();
        }
        kept.insert(key, dfa.clone());
    }
    Ok(built)
}

/// Exponent ranges built so far (see [`exponent_range`]), at most [`MEMO_RANGES`].
static MEMO: OnceLock<Mutex<HashMap<String, Dfa>>> = OnceLock::new();
const MEMO_RANGES: usize = 256;

fn walk_range(fractions: Fractions, lower: Option<&Bound>, upper: Option<&Bound>, config: &DfaConfig) -> Result<Option<Dfa>> {
    // Every exponent form is below 10^304 in magnitude: a bound beyond 10^306 decides the same
    // as 10^306 does, and clamping keeps the doubles below finite.
    let far = Decimal::from_i128(1).shift(306);
    let clamp = |v: &Decimal| {
        if *v > far {
            far.clone()
        } else if *v < far.neg() {
            far.neg()
        } else {
            v.clone()
        }
    };
    let lo = lower.map(|b| lower_cut(&clamp(&b.value), b.exclusive));
    let hi = upper.map(|b| upper_cut(&clamp(&b.value), b.exclusive));
    let walker = ExponentWalker::new(fractions == Fractions::ZerosOnly, lo.as_ref(), hi.as_ref());
    build(&walker, "number range automaton", config)
}
