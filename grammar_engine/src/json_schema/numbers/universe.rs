//! Which number texts the compiler ever produces, and the texts of one value.
//!
//! Every number language is a subset of one universe, made of three families of texts:
//!
//! - **integers**, `-?(0|[1-9][0-9]*)`, of any length;
//! - **decimals**, `-?(0|[1-9][0-9]*)\.[0-9]+`, with at most [`MAX_SIGNIFICANT`] significant
//!   digits, counted as the integer part's digits (none for `0`) plus the fraction's digits up
//!   to its last non-zero one; trailing zeros are free (`1.5000` counts 2);
//! - **exponent forms**, a mantissa then `e` or `E`, an optional sign and the exponent's digits
//!   (leading zeros free). The mantissa is an integer or a decimal counted as above (at most
//!   fifteen digits; counting them the same way keeps a DFA of both families small), whose
//!   first non-zero digit is at most [`MANTISSA_INT_DIGITS`] digits before the point or at most
//!   [`MANTISSA_LEADING_ZEROS`] zeros after it (`125e3`, `2.5E+3`, `0.05e-1`; not `1000e3` or
//!   `0.0001e2`); the exponent is at most [`MAX_EXPONENT`]. A zero mantissa takes any such
//!   exponent.
//!
//! Python reads an integer text as an exact `int`, and the others as doubles. Fifteen is the
//! number of decimal digits a double always keeps, and the mantissa and exponent windows keep
//! every value between 10^-303 and 10^303, in the range where doubles have all their digits: so
//! two decimals or exponent forms of different values are different doubles, and one with a
//! non-zero fraction never rounds onto an integer. Python's verdicts on a universe text
//! (`type`, bounds, `const`, integral `multipleOf`) then depend on its value alone (the exact
//! integer, or the decimal's double), and the languages can be exact sets of texts, which is
//! what lets `oneOf` and `not` subtract them. A text outside the universe
//! (`0.30000000000000004`, `1e999`, `1000e3`) is never generated.
//!
//! The windows are a choice: the exponent forms writers use (`1e-06`, `2.5E+3`, `1.5e10`,
//! `12e3`) are in, and a DFA reading the mantissa must remember its magnitude until the
//! exponent says where the point is, which costs states per magnitude allowed.

use super::decimal::Decimal;

/// Most significant digits of a decimal or a mantissa (see the module documentation).
pub(crate) const MAX_SIGNIFICANT: usize = 15;

/// Lowest and highest magnitude (power of ten of the first non-zero digit) of a non-zero
/// mantissa.
pub(crate) const MANTISSA_MAG_LO: i32 = -3;
pub(crate) const MANTISSA_MAG_HI: i32 = 2;

/// Most integer digits of a mantissa.
pub(crate) const MANTISSA_INT_DIGITS: usize = MANTISSA_MAG_HI as usize + 1;

/// Most zeros between the point and the first non-zero digit of a mantissa whose integer part
/// is `0` (`None`: such a mantissa is zero).
pub(crate) const MANTISSA_LEADING_ZEROS: Option<usize> =
    if MANTISSA_MAG_LO < 0 { Some((-MANTISSA_MAG_LO - 1) as usize) } else { None };

/// Largest exponent, either sign.
pub(crate) const MAX_EXPONENT: u32 = 300;

/// The significant-digit count of the shortest decimal text of a value: integer digits (none
/// for a zero integer part) plus fraction digits up to the last non-zero one.
pub(crate) fn significant_count(v: &Decimal) -> usize {
    let int = v.int_digits();
    let int_len = if int == [0] { 0 } else { int.len() };
    int_len + v.frac_digits().len()
}

/// Whether a value has decimal texts in the universe (integers always have integer texts).
pub(crate) fn representable(v: &Decimal) -> bool {
    significant_count(v) <= MAX_SIGNIFICANT
}

fn sign_of(v: &Decimal) -> &'static str {
    if v.is_zero() {
        "-?"
    } else if v.is_negative() {
        "-"
    } else {
        ""
    }
}

fn digits_text(d: &[u8]) -> String {
    d.iter().map(|&x| char::from(b'0' + x)).collect()
}

/// A regex of the integer text of an integral value (`-?0` for zero); `None` when `v` has a
/// fraction.
pub(crate) fn integer_spelling(v: &Decimal) -> Option<String> {
    v.is_integer().then(|| format!("{}{}", sign_of(v), digits_text(&v.int_digits())))
}

/// A regex of every decimal text of `v` (`1.0`, `1.00`, ... for 1), or `None` when it has
/// none in the universe.
pub(crate) fn decimal_spellings(v: &Decimal) -> Option<String> {
    if !representable(v) {
        return None;
    }
    let int = digits_text(&v.int_digits());
    let frac = digits_text(&v.frac_digits());
    Some(if frac.is_empty() { format!(r"{}{int}\.0+", sign_of(v)) } else { format!(r"{}{int}\.{frac}0*", sign_of(v)) })
}

/// A regex of `0*k` with `k` in `0..=max`, written without a sign.
fn up_to(max: u32) -> String {
    let text = max.to_string();
    let n = text.len();
    let mut alts = Vec::new();
    // Fewer digits than `max`: anything.
    for len in 1..n {
        alts.push(if len == 1 { "[0-9]".to_string() } else { format!("[1-9][0-9]{{{}}}", len - 1) });
    }
    // As many digits: at most `max`, digit by digit.
    let d: Vec<u32> = text.bytes().map(|b| u32::from(b - b'0')).collect();
    for i in 0..n {
        let low = if i == 0 && n > 1 { 1 } else { 0 };
        if d[i] > low {
            let rest = n - i - 1;
            let tail = if rest == 0 { String::new() } else { format!("[0-9]{{{rest}}}") };
            alts.push(format!("{}[{low}-{}]{tail}", &text[..i], d[i] - 1));
        }
    }
    alts.push(text);
    format!("0*(?:{})", alts.join("|"))
}

/// A regex of the exponent part (`e`/`E`, sign, digits) of the exponent `k`.
fn exponent_regex(k: i64) -> String {
    match k {
        0 => "[eE][+-]?0+".to_string(),
        k if k > 0 => format!(r"[eE]\+?0*{k}"),
        k => format!("[eE]-0*{}", -k),
    }
}

/// A regex of every exponent form of `v` in the universe, or `None` when it has none.
pub(crate) fn exponent_spellings(v: &Decimal) -> Option<String> {
    if v.is_zero() {
        return Some(format!(r"-?0(?:\.0+)?[eE][+-]?{}", up_to(MAX_EXPONENT)));
    }
    let digits = v.significant_digits();
    let magnitude = v.magnitude()?;
    let sign = sign_of(v);
    let mut alts = Vec::new();
    for m in MANTISSA_MAG_LO..=MANTISSA_MAG_HI {
        let k = magnitude - i64::from(m);
        if k.unsigned_abs() > u64::from(MAX_EXPONENT) {
            continue;
        }
        let mantissa = if m >= 0 {
            let int_len = m as usize + 1;
            if digits.len().max(int_len) > MAX_SIGNIFICANT {
                continue;
            }
            let mut int = digits_text(&digits[..digits.len().min(int_len)]);
            int.extend(std::iter::repeat_n('0', int_len.saturating_sub(digits.len())));
            if digits.len() > int_len {
                format!(r"{int}\.{}0*", digits_text(&digits[int_len..]))
            } else {
                format!(r"{int}(?:\.0+)?")
            }
        } else {
            let zeros = (-m - 1) as usize;
            if zeros + digits.len() > MAX_SIGNIFICANT {
                continue;
            }
            format!(r"0\.{}{}0*", "0".repeat(zeros), digits_text(digits))
        };
        alts.push(format!("{mantissa}{}", exponent_regex(k)));
    }
    (!alts.is_empty()).then(|| format!("{sign}(?:{})", alts.join("|")))
}

/// A fraction with room for `room` significant digits: `\.` then digits whose last non-zero
/// one is within the room, then any zeros.
fn fraction(room: usize) -> String {
    match room {
        0 => r"\.0+".to_string(),
        r => format!(r"\.(?:[0-9]{{0,{}}}[1-9]0*|0+)", r - 1),
    }
}

/// The regex of the whole universe (every text of every number it holds), for values the
/// schema leaves unconstrained.
pub(crate) fn universe_regex() -> String {
    let integer = "-?(?:0|[1-9][0-9]*)".to_string();
    let mut decimals = vec![format!("0{}", fraction(MAX_SIGNIFICANT))];
    for n in 1..=MAX_SIGNIFICANT {
        decimals.push(format!("[1-9][0-9]{{{}}}{}", n - 1, fraction(MAX_SIGNIFICANT - n)));
    }
    let mut mantissas = vec![format!("0(?:{})?", fraction(0))];
    for n in 1..=MANTISSA_INT_DIGITS {
        mantissas.push(format!("[1-9][0-9]{{{}}}(?:{})?", n - 1, fraction(MAX_SIGNIFICANT - n)));
    }
    for zeros in 0..=MANTISSA_LEADING_ZEROS.unwrap_or(0) {
        if MANTISSA_LEADING_ZEROS.is_none() {
            break;
        }
        let room = MAX_SIGNIFICANT - zeros - 1;
        let rest = if room == 0 { "0*".to_string() } else { format!("(?:[0-9]{{0,{}}}[1-9])?0*", room - 1) };
        mantissas.push(format!(r"0\.{}[1-9]{rest}", "0".repeat(zeros)));
    }
    let exponent = format!("[eE][+-]?{}", up_to(MAX_EXPONENT));
    format!("{integer}|-?(?:{})|-?(?:{}){exponent}", decimals.join("|"), mantissas.join("|"))
}

#[cfg(test)]
mod tests;
