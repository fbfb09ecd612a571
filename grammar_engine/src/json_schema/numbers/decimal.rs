//! Exact decimal numbers: what a schema's numeric keywords say, without rounding.
//!
//! A schema's bounds and divisors arrive as JSON number text (`0.1`, `1e-3`, `9007199254740993`),
//! and Python reads the same text either as an exact `int` or as a double. To build languages
//! that agree with Python to the last digit, the compiler needs both views exactly: the value
//! as written, and the exact value of a double (every double is a finite decimal). [`Decimal`]
//! holds either, as significant digits and a power of ten, so `1e400` costs one digit, not
//! four hundred. Arithmetic is the little the number languages need: comparison, addition,
//! multiplication by a small integer, floor and ceiling, and the digits of the integer and
//! fractional parts that the comparison automata walk.

use std::cmp::Ordering;

/// Most significant digits a decimal may have: Python refuses to read an integer with more
/// (`sys.get_int_max_str_digits()`), so no schema Python can load has a longer one.
pub(crate) const MAX_DIGITS: usize = 4300;

/// Largest power of ten a decimal may carry either way. Doubles span 10^-1074 to 10^309;
/// anything past this is refused rather than spelled out.
pub(crate) const MAX_EXPONENT: i64 = 1100;

/// Why a number's text could not become a [`Decimal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecimalError {
    /// Not JSON number syntax.
    Syntax,
    /// More than [`MAX_DIGITS`] digits, or an exponent past [`MAX_EXPONENT`].
    TooLarge,
}

/// An exact decimal: `(-1)^negative * digits * 10^exp`.
///
/// Normalized: `digits` (most significant first) has no leading or trailing zeros, and zero is
/// the empty digit string with `negative == false` and `exp == 0`, so equal values are equal
/// structs.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exp: i32,
}

impl std::fmt::Debug for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_text())
    }
}

impl Decimal {
    pub(crate) fn zero() -> Decimal {
        Decimal { negative: false, digits: Vec::new(), exp: 0 }
    }

    fn new(negative: bool, mut digits: Vec<u8>, mut exp: i64) -> Decimal {
        let lead = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..lead);
        while digits.last() == Some(&0) {
            digits.pop();
            exp += 1;
        }
        if digits.is_empty() {
            return Decimal::zero();
        }
        Decimal { negative, digits, exp: exp as i32 }
    }

    pub(crate) fn from_i128(v: i128) -> Decimal {
        let digits = v.unsigned_abs().to_string().bytes().map(|b| b - b'0').collect();
        Decimal::new(v < 0, digits, 0)
    }

    /// Parses JSON number syntax (`-?int(.frac)?([eE][+-]?exp)?`), exactly.
    pub(crate) fn parse(text: &str) -> Result<Decimal, DecimalError> {
        let b = text.as_bytes();
        let mut i = 0;
        let negative = b.first() == Some(&b'-');
        if negative {
            i += 1;
        }
        let mut digits = Vec::new();
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            digits.push(b[i] - b'0');
            i += 1;
        }
        let int_len = i - int_start;
        if int_len == 0 || (int_len > 1 && b[int_start] == b'0') {
            return Err(DecimalError::Syntax);
        }
        let mut exp: i64 = 0;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                digits.push(b[i] - b'0');
                i += 1;
            }
            if i == start {
                return Err(DecimalError::Syntax);
            }
            exp -= (i - start) as i64;
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            let sign = match b.get(i) {
                Some(b'-') => {
                    i += 1;
                    -1
                }
                Some(b'+') => {
                    i += 1;
                    1
                }
                _ => 1,
            };
            let start = i;
            let mut e: i64 = 0;
            while i < b.len() && b[i].is_ascii_digit() {
                e = e.saturating_mul(10).saturating_add(i64::from(b[i] - b'0'));
                i += 1;
            }
            if i == start {
                return Err(DecimalError::Syntax);
            }
            exp = exp.saturating_add(sign * e);
        }
        if i != b.len() {
            return Err(DecimalError::Syntax);
        }
        // Checked before normalizing, so the exponent always fits the i32 it is stored in.
        if exp.abs() > MAX_EXPONENT + 2 * MAX_DIGITS as i64 {
            return Err(DecimalError::TooLarge);
        }
        let d = Decimal::new(negative, digits, exp);
        let magnitude = d.magnitude().unwrap_or(0);
        if d.digits.len() > MAX_DIGITS || magnitude.abs() > MAX_EXPONENT {
            return Err(DecimalError::TooLarge);
        }
        Ok(d)
    }

    /// The exact value of a finite double; `None` for infinities and NaN.
    pub(crate) fn from_f64(x: f64) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        let bits = x.to_bits();
        let negative = bits >> 63 == 1;
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1u64 << 52) - 1);
        let (mut m, mut e2) = if biased == 0 { (fraction, -1074) } else { (fraction | (1u64 << 52), biased - 1075) };
        if m == 0 {
            return Some(Decimal::zero());
        }
        let tz = m.trailing_zeros() as i32;
        m >>= tz;
        e2 += tz;
        let mut limbs = vec![(m % BASE) as u32, (m / BASE) as u32];
        let exp = if e2 >= 0 {
            mul_pow(&mut limbs, 2, e2 as u32);
            0
        } else {
            mul_pow(&mut limbs, 5, (-e2) as u32);
            i64::from(e2)
        };
        Some(Decimal::new(negative, limbs_to_digits(&limbs), exp))
    }

    /// The double nearest to this value (ties to even), as Python's `float()` computes it.
    pub(crate) fn to_f64(&self) -> f64 {
        if self.is_zero() {
            return 0.0;
        }
        let mut text = String::with_capacity(self.digits.len() + 16);
        if self.negative {
            text.push('-');
        }
        text.extend(self.digits.iter().map(|&d| char::from(b'0' + d)));
        text.push_str(&format!("e{}", self.exp));
        text.parse().unwrap_or(f64::NAN)
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    pub(crate) fn is_negative(&self) -> bool {
        self.negative
    }

    pub(crate) fn is_integer(&self) -> bool {
        self.exp >= 0
    }

    pub(crate) fn abs(&self) -> Decimal {
        Decimal { negative: false, ..self.clone() }
    }

    pub(crate) fn neg(&self) -> Decimal {
        if self.is_zero() {
            return self.clone();
        }
        Decimal { negative: !self.negative, ..self.clone() }
    }

    /// The significant digits of `|self|`, most significant first, without leading or trailing
    /// zeros (empty for zero): `120.5` has `[1, 2, 0, 5]`.
    pub(crate) fn significant_digits(&self) -> &[u8] {
        &self.digits
    }

    /// Where the most significant digit sits: `d` in `10^d` (`None` for zero).
    pub(crate) fn magnitude(&self) -> Option<i64> {
        (!self.is_zero()).then(|| self.exp as i64 + self.digits.len() as i64 - 1)
    }

    /// The digits of the integer part of `|self|`, most significant first; `[0]` when it is 0.
    pub(crate) fn int_digits(&self) -> Vec<u8> {
        let n = self.digits.len() as i64 + self.exp as i64;
        if self.is_zero() || n <= 0 {
            return vec![0];
        }
        let mut out: Vec<u8> = self.digits.iter().take(n as usize).copied().collect();
        out.resize(n as usize, 0);
        out
    }

    /// The digits after the decimal point of `|self|`, up to the last non-zero one.
    pub(crate) fn frac_digits(&self) -> Vec<u8> {
        if self.exp >= 0 {
            return Vec::new();
        }
        let frac_len = (-self.exp) as usize;
        let len = self.digits.len();
        if len >= frac_len {
            self.digits[len - frac_len..].to_vec()
        } else {
            let mut out = vec![0; frac_len - len];
            out.extend_from_slice(&self.digits);
            out
        }
    }

    /// The largest integer not above this value.
    pub(crate) fn floor(&self) -> Decimal {
        if self.is_integer() {
            return self.clone();
        }
        let keep = self.digits.len() as i64 + self.exp as i64;
        let truncated = if keep <= 0 {
            Decimal::zero()
        } else {
            Decimal::new(self.negative, self.digits[..keep as usize].to_vec(), 0)
        };
        if self.negative { truncated.add(&Decimal::from_i128(-1)) } else { truncated }
    }

    /// The smallest integer not below this value.
    pub(crate) fn ceil(&self) -> Decimal {
        self.neg().floor().neg()
    }

    /// The value as an `i128` when it is an integer that fits (for the tests).
    #[cfg(test)]
    pub(crate) fn to_i128(&self) -> Option<i128> {
        if !self.is_integer() || self.digits.len() + self.exp as usize > 38 {
            return None;
        }
        let mut v: i128 = 0;
        for &d in &self.digits {
            v = v * 10 + i128::from(d);
        }
        for _ in 0..self.exp {
            v *= 10;
        }
        Some(if self.negative { -v } else { v })
    }

    /// This value times `10^k`.
    pub(crate) fn shift(&self, k: i32) -> Decimal {
        if self.is_zero() {
            return self.clone();
        }
        Decimal { exp: self.exp + k, ..self.clone() }
    }

    pub(crate) fn add(&self, other: &Decimal) -> Decimal {
        if self.is_zero() {
            return other.clone();
        }
        if other.is_zero() {
            return self.clone();
        }
        let exp = self.exp.min(other.exp);
        let a = self.scaled_le(exp);
        let b = other.scaled_le(exp);
        if self.negative == other.negative {
            return Decimal::new(self.negative, to_be(add_le(&a, &b)), i64::from(exp));
        }
        match cmp_le(&a, &b) {
            Ordering::Equal => Decimal::zero(),
            Ordering::Greater => Decimal::new(self.negative, to_be(sub_le(&a, &b)), i64::from(exp)),
            Ordering::Less => Decimal::new(other.negative, to_be(sub_le(&b, &a)), i64::from(exp)),
        }
    }

    pub(crate) fn sub(&self, other: &Decimal) -> Decimal {
        self.add(&other.neg())
    }

    /// This value times a non-negative integer.
    pub(crate) fn mul_u64(&self, k: u64) -> Decimal {
        if k == 0 || self.is_zero() {
            return Decimal::zero();
        }
        let mut out = Vec::with_capacity(self.digits.len() + 20);
        let mut carry: u128 = 0;
        for &d in self.digits.iter().rev() {
            let v = u128::from(d) * u128::from(k) + carry;
            out.push((v % 10) as u8);
            carry = v / 10;
        }
        while carry > 0 {
            out.push((carry % 10) as u8);
            carry /= 10;
        }
        Decimal::new(self.negative, to_be(out), i64::from(self.exp))
    }

    /// This value times an integer.
    pub(crate) fn mul_i64(&self, k: i64) -> Decimal {
        let m = self.mul_u64(k.unsigned_abs());
        if k < 0 { m.neg() } else { m }
    }

    /// `|self|` as `(c, e)` with `|self| = c * 10^e`, when the significant digits fit a u64.
    pub(crate) fn coefficient(&self) -> Option<(u64, i32)> {
        if self.digits.len() > 19 {
            return None;
        }
        let mut c: u64 = 0;
        for &d in &self.digits {
            c = c.checked_mul(10)?.checked_add(u64::from(d))?;
        }
        Some((c, self.exp))
    }

    /// Half of this value (exact: `x / 2 = 5x / 10`).
    pub(crate) fn half(&self) -> Decimal {
        self.mul_u64(5).shift(-1)
    }

    /// Exponent-free text: `-`, the integer part, and the fraction if any (`0.001`, `-120`).
    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        if self.negative {
            s.push('-');
        }
        s.extend(self.int_digits().iter().map(|&d| char::from(b'0' + d)));
        let frac = self.frac_digits();
        if !frac.is_empty() {
            s.push('.');
            s.extend(frac.iter().map(|&d| char::from(b'0' + d)));
        }
        s
    }

    /// The digits, least significant first, padded with zeros down to `10^exp` (`exp <= self.exp`).
    fn scaled_le(&self, exp: i32) -> Vec<u8> {
        let mut out = vec![0u8; (self.exp - exp) as usize];
        out.extend(self.digits.iter().rev());
        out
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => return Ordering::Greater,
            (true, false) => return Ordering::Less,
            _ => {}
        }
        let mag = match (self.magnitude(), other.magnitude()) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) if a != b => a.cmp(&b),
            _ => {
                // Same leading power of ten: compare digit strings, shorter padded with zeros.
                let n = self.digits.len().max(other.digits.len());
                (0..n)
                    .map(|i| self.digits.get(i).unwrap_or(&0).cmp(other.digits.get(i).unwrap_or(&0)))
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            }
        };
        if self.negative { mag.reverse() } else { mag }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

const BASE: u64 = 1_000_000_000;

/// `limbs *= base^k` for base 2 or 5, in chunks that keep each product inside a u64.
fn mul_pow(limbs: &mut Vec<u32>, base: u64, mut k: u32) {
    let (chunk, chunk_pow) = if base == 2 { (29u32, 1u64 << 29) } else { (13u32, 5u64.pow(13)) };
    while k > 0 {
        let step = k.min(chunk);
        let factor = if step == chunk { chunk_pow } else { base.pow(step) };
        let mut carry = 0u64;
        for limb in limbs.iter_mut() {
            let v = u64::from(*limb) * factor + carry;
            *limb = (v % BASE) as u32;
            carry = v / BASE;
        }
        while carry > 0 {
            limbs.push((carry % BASE) as u32);
            carry /= BASE;
        }
        k -= step;
    }
}

/// Base-10^9 limbs (least significant first) to decimal digits, most significant first.
fn limbs_to_digits(limbs: &[u32]) -> Vec<u8> {
    let mut le = Vec::with_capacity(limbs.len() * 9);
    for &limb in limbs {
        let mut v = limb;
        for _ in 0..9 {
            le.push((v % 10) as u8);
            v /= 10;
        }
    }
    to_be(le)
}

fn to_be(mut le: Vec<u8>) -> Vec<u8> {
    le.reverse();
    le
}

fn add_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0;
    for i in 0..a.len().max(b.len()) {
        let v = a.get(i).unwrap_or(&0) + b.get(i).unwrap_or(&0) + carry;
        out.push(v % 10);
        carry = v / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out
}

/// `a - b` for `a >= b`.
fn sub_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i8;
    for (i, &digit) in a.iter().enumerate() {
        let mut v = digit as i8 - *b.get(i).unwrap_or(&0) as i8 - borrow;
        borrow = 0;
        if v < 0 {
            v += 10;
            borrow = 1;
        }
        out.push(v as u8);
    }
    out
}

fn cmp_le(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().max(b.len());
    (0..n)
        .rev()
        .map(|i| a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn parsing_normalizes() {
        assert_eq!(d("1.500"), d("1.5"));
        assert_eq!(d("15e-1"), d("1.5"));
        assert_eq!(d("0.015E2"), d("1.5"));
        assert_eq!(d("-0"), Decimal::zero());
        assert_eq!(d("-0.000e5"), Decimal::zero());
        assert_eq!(d("1e400").to_text().len(), 401);
        assert_eq!(d("1e-3").to_text(), "0.001");
        assert_eq!(d("-120").to_text(), "-120");
        for bad in ["", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.5.2", "0x10", "1 "] {
            assert_eq!(Decimal::parse(bad), Err(DecimalError::Syntax), "{bad:?}");
        }
        assert_eq!(Decimal::parse("1e99999999999999999999"), Err(DecimalError::TooLarge));
        assert_eq!(Decimal::parse("1e-5000"), Err(DecimalError::TooLarge));
        assert_eq!(Decimal::parse(&"9".repeat(4301)), Err(DecimalError::TooLarge));
    }

    #[test]
    fn doubles_convert_exactly() {
        assert_eq!(Decimal::from_f64(0.1).unwrap().to_text(), "0.1000000000000000055511151231257827021181583404541015625");
        assert_eq!(Decimal::from_f64(-2.5).unwrap(), d("-2.5"));
        assert_eq!(Decimal::from_f64(1e23).unwrap(), d("99999999999999991611392"));
        assert_eq!(Decimal::from_f64(0.0).unwrap(), Decimal::zero());
        assert_eq!(Decimal::from_f64(-0.0).unwrap(), Decimal::zero());
        let tiny = Decimal::from_f64(f64::from_bits(1)).unwrap();
        assert_eq!(tiny.magnitude(), Some(-324));
        assert_eq!(tiny.to_f64(), f64::from_bits(1));
        for x in [0.1, 1.0 / 3.0, 1e300, -7.25e-200, f64::MAX, 123456.789] {
            assert_eq!(Decimal::from_f64(x).unwrap().to_f64(), x);
        }
        assert_eq!(Decimal::from_f64(f64::INFINITY), None);
    }

    #[test]
    fn ordering_and_arithmetic() {
        let mut v = [d("1.5"), d("-2"), d("0"), d("1.05"), d("-1.5e1"), d("1e2"), d("-0.5")];
        v.sort();
        let texts: Vec<String> = v.iter().map(Decimal::to_text).collect();
        assert_eq!(texts, ["-15", "-2", "-0.5", "0", "1.05", "1.5", "100"]);
        assert_eq!(d("1.25").add(&d("-3.5")), d("-2.25"));
        assert_eq!(d("0.1").sub(&d("0.1")), Decimal::zero());
        assert_eq!(d("-1.5").mul_u64(3), d("-4.5"));
        assert_eq!(d("3").half(), d("1.5"));
        assert_eq!(d("2.7").floor(), d("2"));
        assert_eq!(d("-2.7").floor(), d("-3"));
        assert_eq!(d("-2.7").ceil(), d("-2"));
        assert_eq!(d("-0.3").ceil(), Decimal::zero());
        assert_eq!(d("0.3").floor(), Decimal::zero());
        assert_eq!(d("5").floor(), d("5"));
        assert_eq!(d("1.2e3").to_i128(), Some(1200));
        assert_eq!(d("1.5").to_i128(), None);
    }

    #[test]
    fn digit_views() {
        assert_eq!(d("123.045").int_digits(), [1, 2, 3]);
        assert_eq!(d("123.045").frac_digits(), [0, 4, 5]);
        assert_eq!(d("0.007").int_digits(), [0]);
        assert_eq!(d("0.007").frac_digits(), [0, 0, 7]);
        assert_eq!(d("-4e2").int_digits(), [4, 0, 0]);
        assert!(d("-4e2").frac_digits().is_empty());
        assert_eq!(d("-120.50").significant_digits(), [1, 2, 0, 5]);
        assert!(d("-0.0").significant_digits().is_empty());
    }
}
