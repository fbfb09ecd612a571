//! The number texts between two bounds, as Python judges them, as a DFA.
//!
//! A text without a fraction is a Python `int` and must lie in an integer interval; a text
//! with one is a double, and must lie between two [`Cut`]s that already account for rounding
//! (see `doubles`). Both are decided digit by digit against the magnitudes of the bounds: a
//! text's integer part is compared with a bound's by length first and then lexicographically,
//! its fraction digit by digit, so a comparison is three states (below, equal, above so far)
//! carried along the text. Positive and negative texts get their own magnitude limits (a
//! value `-m` is at least `-5` when `m` is at most 5).
//!
//! The walker also enforces the universe (at most [`MAX_SIGNIFICANT`] significant digits in a
//! text with a fraction; integers of any length, or of at most as many digits when
//! `long_integers` is off) and the integer type: draft 4 allows no fraction, later drafts only
//! zeros. Texts with an exponent are another walker's (`exponent.rs`).

use std::cmp::Ordering;

use super::automaton::{build, Walker};
use super::decimal::Decimal;
use super::doubles::{lower_cut, upper_cut, Cut};
use super::facts::Bound;
use super::universe::MAX_SIGNIFICANT;
use crate::automata::{Dfa, DfaConfig};
use crate::error::Result;

const SIG: u8 = MAX_SIGNIFICANT as u8;

/// Which fractions a text may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fractions {
    /// None at all (`integer` in draft 4).
    Forbidden,
    /// Only zeros (`integer` from draft 6: `1.0` is an integer).
    ZerosOnly,
    Any,
}

/// A magnitude to compare with: its integer and fraction digits, and whether equality passes.
#[derive(Debug, Clone)]
struct Mark {
    int: Vec<u8>,
    frac: Vec<u8>,
    /// `rest_nonzero[p]`: a non-zero digit at fraction position `p` or later.
    rest_nonzero: Vec<bool>,
    inclusive: bool,
}

impl Mark {
    fn new(magnitude: &Decimal, inclusive: bool) -> Mark {
        let int = magnitude.int_digits();
        let frac = magnitude.frac_digits();
        let mut rest_nonzero = vec![false; frac.len() + 1];
        for p in (0..frac.len()).rev() {
            rest_nonzero[p] = frac[p] != 0 || rest_nonzero[p + 1];
        }
        Mark { int, frac, rest_nonzero, inclusive }
    }

    /// A text whose digits so far equal this mark's, ended after `pos` fraction digits: below
    /// the mark if the mark has non-zero digits left.
    fn settle(&self, ord: Ordering, pos: usize) -> Ordering {
        if ord == Ordering::Equal && self.rest_nonzero.get(pos).copied().unwrap_or(false) {
            Ordering::Less
        } else {
            ord
        }
    }

    fn frac_digit(&self, pos: usize) -> u8 {
        self.frac.get(pos).copied().unwrap_or(0)
    }
}

/// The limits on the magnitude of the texts of one sign.
#[derive(Debug, Clone, Default)]
struct Side {
    /// Integers (texts without fraction): magnitude in `[lo, hi]` (no `hi`: unlimited); `None`:
    /// no integer text.
    ints: Option<(Mark, Option<Mark>)>,
    /// Texts with a fraction: lower and upper magnitude limits (`None`: unlimited); the whole
    /// `Option` is `None` when no such text qualifies.
    fracs: Option<(Option<Mark>, Option<Mark>)>,
}

/// The walker of texts within bounds: see the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct RangeWalker {
    fractions: Fractions,
    /// Integer part lengths past which every comparison is settled: longer integers share
    /// one state.
    saturation: u16,
    /// Integers may be longer than [`MAX_SIGNIFICANT`] digits.
    long_integers: bool,
    /// Positive texts (including `0`), then negative ones (including `-0`).
    sides: [Side; 2],
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum St {
    Start,
    Minus,
    /// In the integer part: `len` digits read, `zero` if the part is the single digit 0, and
    /// the comparison of those digits with the same-length prefix of each mark's integer part
    /// (`Greater` once longer): integer low, integer high, fraction low, fraction high.
    Int { neg: bool, len: u16, zero: bool, ord: [Ordering; 4] },
    /// After the point: significant digits so far, comparison with the fraction marks.
    Point { neg: bool, sig: u8, ord: [Ordering; 2] },
    /// In the fraction with `pos` digits read, and more non-zero digits still allowed.
    Frac { neg: bool, sig: u8, pos: u8, ord: [Ordering; 2] },
    /// In the fraction, only zeros may follow; comparisons are final.
    Zeros { neg: bool, ord: [Ordering; 2] },
}

impl RangeWalker {
    /// Texts of the given fractions whose Python value lies in the integer interval
    /// `[int_lo, int_hi]` when written without fraction, and between the cuts with one.
    /// `None` limits are unlimited.
    pub(crate) fn new(
        fractions: Fractions,
        long_integers: bool,
        int_lo: Option<&Decimal>,
        int_hi: Option<&Decimal>,
        frac_lo: Option<&Cut>,
        frac_hi: Option<&Cut>,
    ) -> RangeWalker {
        let zero = Decimal::zero();
        let mut sides = [Side::default(), Side::default()];
        for (i, side) in sides.iter_mut().enumerate() {
            let negative = i == 1;
            // Magnitudes of this sign: m in [lo, hi] where value = m or -m.
            let (lo, hi) = if negative {
                (int_hi.map(Decimal::neg), int_lo.map(Decimal::neg))
            } else {
                (int_lo.cloned(), int_hi.cloned())
            };
            let lo = lo.filter(|l| *l > zero).unwrap_or_else(Decimal::zero);
            let hi_ok = hi.as_ref().is_none_or(|h| *h >= lo);
            if hi_ok {
                side.ints = Some((Mark::new(&lo, true), hi.map(|h| Mark::new(&h, true))));
            }
            side.fracs = sign_limits(negative, frac_lo, frac_hi).map(|(l, h)| {
                (l.map(|c| Mark::new(&c.value, c.inclusive)), h.map(|c| Mark::new(&c.value, c.inclusive)))
            });
        }
        let longest = sides
            .iter()
            .filter_map(|s| s.ints.as_ref())
            .flat_map(|(l, h)| [Some(l), h.as_ref()])
            .flatten()
            .map(|m| m.int.len())
            .max()
            .unwrap_or(0);
        let saturation = u16::try_from(longest.max(MAX_SIGNIFICANT) + 1).unwrap_or(u16::MAX);
        RangeWalker { fractions, saturation, long_integers, sides }
    }

    fn side(&self, neg: bool) -> &Side {
        &self.sides[usize::from(neg)]
    }

    /// The integer-part marks of a side, in the order of `St::Int::ord`.
    fn int_marks(&self, neg: bool) -> [Option<&Mark>; 4] {
        let side = self.side(neg);
        let (il, ih) = match &side.ints {
            Some((l, h)) => (Some(l), h.as_ref()),
            None => (None, None),
        };
        let (fl, fh) = match &side.fracs {
            Some((l, h)) => (l.as_ref(), h.as_ref()),
            None => (None, None),
        };
        [il, ih, fl, fh]
    }

    fn frac_marks(&self, neg: bool) -> [Option<&Mark>; 2] {
        match &self.side(neg).fracs {
            Some((l, h)) => [l.as_ref(), h.as_ref()],
            None => [None, None],
        }
    }

    fn digit(&self, state: &St, d: u8) -> Option<St> {
        match *state {
            St::Start | St::Minus => {
                let neg = matches!(state, St::Minus);
                self.int_digit(neg, 0, [Ordering::Equal; 4], d)
            }
            St::Int { neg, len, zero, ord } => {
                if zero {
                    return None;
                }
                self.int_digit(neg, len, ord, d)
            }
            St::Point { neg, sig, ord } => self.frac_digit(neg, sig, 0, ord, d),
            St::Frac { neg, sig, pos, ord } => self.frac_digit(neg, sig, pos, ord, d),
            St::Zeros { neg, ord } => (d == 0).then_some(St::Zeros { neg, ord }),
        }
    }

    fn int_digit(&self, neg: bool, len: u16, mut ord: [Ordering; 4], d: u8) -> Option<St> {
        let len = len.saturating_add(1).min(self.saturation);
        if len > u16::from(SIG) && !self.long_integers {
            return None;
        }
        for (o, mark) in ord.iter_mut().zip(self.int_marks(neg)) {
            let Some(mark) = mark else { continue };
            let n = mark.int.len();
            if usize::from(len) > n {
                *o = Ordering::Greater;
            } else if *o == Ordering::Equal {
                *o = d.cmp(&mark.int[usize::from(len) - 1]);
            }
        }
        if len > u16::from(SIG) {
            // No point may follow: the fraction comparisons no longer matter.
            ord[2] = Ordering::Greater;
            ord[3] = Ordering::Greater;
        }
        Some(St::Int { neg, len, zero: len == 1 && d == 0, ord })
    }

    fn frac_digit(&self, neg: bool, sig: u8, pos: u8, mut ord: [Ordering; 2], d: u8) -> Option<St> {
        let pos = pos + 1;
        if d != 0 && (self.fractions != Fractions::Any || sig + pos > SIG) {
            return None;
        }
        let marks = self.frac_marks(neg);
        for (o, mark) in ord.iter_mut().zip(marks) {
            if let Some(mark) = mark {
                if *o == Ordering::Equal {
                    *o = d.cmp(&mark.frac_digit(usize::from(pos) - 1));
                }
            }
        }
        if self.fractions != Fractions::Any || sig + pos >= SIG {
            for (o, mark) in ord.iter_mut().zip(marks) {
                if let Some(mark) = mark {
                    *o = mark.settle(*o, usize::from(pos));
                }
            }
            return Some(St::Zeros { neg, ord });
        }
        Some(St::Frac { neg, sig, pos, ord })
    }

    /// The integer part ended after `len` digits: each mark's final comparison.
    fn int_end(len: u16, ord: Ordering, mark: &Mark) -> Ordering {
        if usize::from(len) < mark.int.len() { Ordering::Less } else { ord }
    }

    fn fracs_accept(&self, neg: bool, ord: [Ordering; 2]) -> bool {
        let Some((lo, hi)) = &self.side(neg).fracs else { return false };
        let lo_ok = lo.as_ref().is_none_or(|m| ord[0] == Ordering::Greater || (ord[0] == Ordering::Equal && m.inclusive));
        let hi_ok = hi.as_ref().is_none_or(|m| ord[1] == Ordering::Less || (ord[1] == Ordering::Equal && m.inclusive));
        lo_ok && hi_ok
    }
}

/// The magnitude limits (lower, upper; `None`: unlimited) of the texts of one sign whose
/// values lie between the cuts; `None` when no text of this sign can.
pub(crate) fn sign_limits(negative: bool, lo: Option<&Cut>, hi: Option<&Cut>) -> Option<(Option<Cut>, Option<Cut>)> {
    let zero = Decimal::zero();
    let cut = |value: Decimal, inclusive: bool| Some(Cut { value, inclusive });
    if !negative {
        // value = m >= 0.
        let low = match lo {
            Some(c) if c.value > zero || (c.value == zero && !c.inclusive) => cut(c.value.clone(), c.inclusive),
            _ => None,
        };
        let high = match hi {
            Some(c) if c.value < zero => return None,
            Some(c) => cut(c.value.clone(), c.inclusive),
            None => None,
        };
        Some((low, high))
    } else {
        // value = -m <= 0: value >= lo is m <= -lo, value <= hi is m >= -hi.
        let high = match lo {
            Some(c) if c.value > zero => return None,
            Some(c) => cut(c.value.neg(), c.inclusive),
            None => None,
        };
        let low = match hi {
            Some(c) if c.value < zero || (c.value == zero && !c.inclusive) => cut(c.value.neg(), c.inclusive),
            _ => None,
        };
        Some((low, high))
    }
}

impl Walker for RangeWalker {
    type State = St;

    fn start(&self) -> St {
        St::Start
    }

    fn step(&self, state: &St, byte: u8) -> Option<St> {
        match (state, byte) {
            (St::Start, b'-') => Some(St::Minus),
            (_, b'0'..=b'9') => self.digit(state, byte - b'0'),
            (St::Int { neg, len, zero, ord }, b'.') => {
                if self.fractions == Fractions::Forbidden || self.side(*neg).fracs.is_none() || *len > u16::from(SIG) {
                    return None;
                }
                let marks = self.int_marks(*neg);
                let mut settled = [Ordering::Equal; 2];
                for i in 0..2 {
                    if let Some(mark) = marks[i + 2] {
                        settled[i] = Self::int_end(*len, ord[i + 2], mark);
                    }
                }
                Some(St::Point { neg: *neg, sig: if *zero { 0 } else { *len as u8 }, ord: settled })
            }
            _ => None,
        }
    }

    fn accepts(&self, state: &St) -> bool {
        match state {
            St::Int { neg, len, ord, .. } => {
                let Some((lo, hi)) = &self.side(*neg).ints else { return false };
                Self::int_end(*len, ord[0], lo) != Ordering::Less
                    && hi.as_ref().is_none_or(|hi| Self::int_end(*len, ord[1], hi) != Ordering::Greater)
            }
            St::Frac { neg, pos, ord, .. } => {
                let marks = self.frac_marks(*neg);
                let mut settled = *ord;
                for (o, mark) in settled.iter_mut().zip(marks) {
                    if let Some(mark) = mark {
                        *o = mark.settle(*o, usize::from(*pos));
                    }
                }
                self.fracs_accept(*neg, settled)
            }
            St::Zeros { neg, ord } => self.fracs_accept(*neg, *ord),
            St::Start | St::Minus | St::Point { .. } => false,
        }
    }
}

/// Texts without exponent of the given fractions whose Python value satisfies both bounds
/// (either may be missing), as a minimized DFA; `None` when there is none. Integers are of
/// any length with `long_integers`, else of at most [`MAX_SIGNIFICANT`] digits.
pub(crate) fn bounded(
    fractions: Fractions,
    long_integers: bool,
    lower: Option<&Bound>,
    upper: Option<&Bound>,
    config: &DfaConfig,
) -> Result<Option<Dfa>> {
    // A text with a fraction is below 10^15 in magnitude, so a bound beyond 10^17 decides the
    // same for it as 10^17 does; clamping keeps the doubles below finite. Integers compare
    // with the bound itself (of any length, they may lie beyond it).
    let far = Decimal::from_i128(10i128.pow(17));
    let clamp = |v: &Decimal| {
        if *v > far {
            far.clone()
        } else if *v < far.neg() {
            far.neg()
        } else {
            v.clone()
        }
    };
    let one = Decimal::from_i128(1);
    // An int k satisfies k >= B when k >= ceil(B), and k > B when k >= floor(B) + 1.
    let int_clamp = |v: &Decimal| if long_integers { v.clone() } else { clamp(v) };
    let int_lo = lower.map(|b| {
        let v = int_clamp(&b.value);
        if b.exclusive { v.floor().add(&one) } else { v.ceil() }
    });
    let int_hi = upper.map(|b| {
        let v = int_clamp(&b.value);
        if b.exclusive { v.ceil().sub(&one) } else { v.floor() }
    });
    let frac_lo = lower.map(|b| lower_cut(&clamp(&b.value), b.exclusive));
    let frac_hi = upper.map(|b| upper_cut(&clamp(&b.value), b.exclusive));
    let walker = RangeWalker::new(fractions, long_integers, int_lo.as_ref(), int_hi.as_ref(), frac_lo.as_ref(), frac_hi.as_ref());
    build(&walker, "number range automaton", config)
}
