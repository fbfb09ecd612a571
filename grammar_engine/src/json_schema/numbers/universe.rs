//! Which number texts the compiler ever produces, and the texts of one value.
//!
//! Every number language is a subset of one universe: exponent-free texts
//! `-?(0|[1-9][0-9]*)(\.[0-9]+)?` with at most [`MAX_SIGNIFICANT`] significant digits, counted
//! as the integer part's digits (none for `0`) plus the fraction's digits up to its last
//! non-zero one; trailing zeros are free (`1.5000` counts 2). Fifteen is the number of decimal
//! digits a double always keeps, and the limit buys exactness: two different values of the
//! universe are two different doubles, an integer of the universe is an exact double, and a
//! text with a non-zero fraction never rounds onto an integer. So Python's verdicts on a
//! universe text (`type`, bounds, `const`, integral `multipleOf`) depend on its decimal value
//! alone, and the languages can be exact sets of texts, which is what lets `oneOf` and `not`
//! subtract them. A text outside the universe (`0.30000000000000004`, a 17-digit integer) is
//! never generated.

use super::decimal::Decimal;

/// Most significant digits of a number text (see the module documentation).
pub(crate) const MAX_SIGNIFICANT: usize = 15;

/// The significant-digit count of the shortest text of a value: integer digits (none for a
/// zero integer part) plus fraction digits up to the last non-zero one.
pub(crate) fn significant_count(v: &Decimal) -> usize {
    let int = v.int_digits();
    let int_len = if int == [0] { 0 } else { int.len() };
    int_len + v.frac_digits().len()
}

/// Whether a value has texts in the universe.
pub(crate) fn representable(v: &Decimal) -> bool {
    significant_count(v) <= MAX_SIGNIFICANT
}

/// A regex of every universe text of the value `v` (`1`, `1.0`, `1.00`, ... for 1; `-0` and
/// `-0.0` too for 0), or `None` when it has none.
pub(crate) fn spellings(v: &Decimal) -> Option<String> {
    if !representable(v) {
        return None;
    }
    let sign = if v.is_zero() {
        "-?"
    } else if v.is_negative() {
        "-"
    } else {
        ""
    };
    let int: String = v.int_digits().iter().map(|&d| char::from(b'0' + d)).collect();
    let frac: String = v.frac_digits().iter().map(|&d| char::from(b'0' + d)).collect();
    Some(if frac.is_empty() {
        format!(r"{sign}{int}(?:\.0+)?")
    } else {
        format!(r"{sign}{int}\.{frac}0*")
    })
}

/// The regex of the whole universe (every text of every representable number), for values
/// the schema leaves unconstrained: `n` integer digits leave `15 - n` significant fraction
/// digits (a zero integer part counts none), then any trailing zeros.
pub(crate) fn universe_regex() -> String {
    let fraction = |room: usize| match room {
        0 => r"\.0+".to_string(),
        r => format!(r"\.(?:[0-9]{{0,{}}}[1-9]0*|0+)", r - 1),
    };
    let mut alts = vec![format!("0(?:{})?", fraction(MAX_SIGNIFICANT))];
    for n in 1..=MAX_SIGNIFICANT {
        alts.push(format!("[1-9][0-9]{{{}}}(?:{})?", n - 1, fraction(MAX_SIGNIFICANT - n)));
    }
    format!("-?(?:{})", alts.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_universe_regex_is_the_universe() {
        use crate::automata::Expr;
        use crate::automata::DfaConfig;
        use crate::json_schema::context::Dialect;
        let cfg = DfaConfig::default();
        let regex = Expr::regex(universe_regex());
        let exact = super::super::number_expr(&super::super::NumberFacts::default(), Dialect::Draft2020, &cfg).unwrap();
        assert!(regex.minus(&exact, &cfg).unwrap().is_empty());
        assert!(exact.minus(&regex, &cfg).unwrap().is_empty());
    }

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn counts() {
        assert_eq!(significant_count(&d("0")), 0);
        assert_eq!(significant_count(&d("0.001")), 3);
        assert_eq!(significant_count(&d("120.5")), 4);
        assert_eq!(significant_count(&d("1e14")), 15);
        assert!(representable(&d("999999999999999")));
        assert!(!representable(&d("1e15")));
        assert!(!representable(&d("0.1234567890123456")));
        assert!(representable(&d("0.000000000000001")));
        assert!(!representable(&d("0.0000000000000001")));
    }

    #[test]
    fn spells_every_text_of_a_value() {
        assert_eq!(spellings(&d("1")).unwrap(), r"1(?:\.0+)?");
        assert_eq!(spellings(&d("-1.50")).unwrap(), r"-1\.50*");
        assert_eq!(spellings(&d("0")).unwrap(), r"-?0(?:\.0+)?");
        assert_eq!(spellings(&d("1e2")).unwrap(), r"100(?:\.0+)?");
        assert_eq!(spellings(&d("0.1e-1")).unwrap(), r"0\.010*");
        assert_eq!(spellings(&d("1e20")), None);
    }
}
