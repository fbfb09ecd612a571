use super::*;

fn d(s: &str) -> Decimal {
    Decimal::parse(s).unwrap()
}

/// The double Python gives a text.
fn fl(s: &str) -> f64 {
    s.parse().unwrap()
}

fn in_lower(c: &Cut, t: &str) -> bool {
    let v = d(t);
    v > c.value || (c.inclusive && v == c.value)
}

fn in_upper(c: &Cut, t: &str) -> bool {
    let v = d(t);
    v < c.value || (c.inclusive && v == c.value)
}

#[test]
fn neighbours() {
    assert_eq!(next_up(1.0), 1.0 + f64::EPSILON);
    assert_eq!(next_down(1.0), 1.0 - f64::EPSILON / 2.0);
    assert_eq!(next_up(-0.0), f64::from_bits(1));
    assert_eq!(next_down(0.0), -f64::from_bits(1));
    assert_eq!(next_up(f64::MAX), f64::INFINITY);
    // The double nearest 0.3 is 0.299999999999999988898: below it.
    assert_eq!(double_at_most(&d("0.3")), 0.3);
    assert_eq!(double_at_least(&d("0.3")), next_up(0.3));
    assert_eq!(double_at_least(&Decimal::from_f64(0.3).unwrap()), 0.3);
    assert_eq!(double_at_most(&d("0.1")), next_down(0.1));
    assert_eq!(double_at_least(&d("1e400")), f64::INFINITY);
    assert_eq!(double_at_most(&d("1e400")), f64::MAX);
}

#[test]
fn cuts_agree_with_rounding() {
    // For texts around the bound, membership in the cut must equal Python's comparison of
    // the text's double with the bound (an exact comparison of two doubles here).
    let texts = [
        "0.3", "0.30000000000000001", "0.3000000000000000166", "0.29999999999999998",
        "0.29999999999999997", "0.30000000000000004", "0.2999999999999999611", "1", "0.1",
        "0.10000000000000000555", "0.1000000000000000055511151231257827021181583404541015625",
        "0.100000000000000012", "0.09999999999999999", "-0.3", "-0.30000000000000001",
    ];
    for bound in ["0.3", "0.1", "-0.3", "1", "0.29999999999999998"] {
        // A float bound is the double Python holds.
        let bf = fl(bound);
        let b = Decimal::from_f64(bf).unwrap();
        for strict in [false, true] {
            let lo = lower_cut(&b, strict);
            let hi = upper_cut(&b, strict);
            for t in texts {
                let x = fl(t);
                let ge = if strict { x > bf } else { x >= bf };
                let le = if strict { x < bf } else { x <= bf };
                assert_eq!(in_lower(&lo, t), ge, "{t} >= {bound} strict={strict}");
                assert_eq!(in_upper(&hi, t), le, "{t} <= {bound} strict={strict}");
            }
        }
    }
}

#[test]
fn cuts_against_an_exact_integer_bound() {
    // An int bound Python does not hold as a double: 2^53 + 1. A double is >= it exactly
    // when it is >= 2^53 + 2.
    let b = d("9007199254740993");
    let lo = lower_cut(&b, false);
    assert!(in_lower(&lo, "9007199254740994.0"));
    assert!(in_lower(&lo, "9007199254740993.0001"));
    assert!(!in_lower(&lo, "9007199254740993.0"), "rounds to 2^53 (ties to even)");
}

#[test]
fn float_multiples_like_python() {
    assert!(python_float_multiple(0.2, 0.1));
    assert!(!python_float_multiple(0.3, 0.1), "0.3 / 0.1 == 2.9999999999999996");
    assert!(!python_float_multiple(0.07, 0.01));
    assert!(python_float_multiple(7.5, 2.5));
    assert!(python_float_multiple(-3.0, 1.5));
    assert!(python_float_multiple(0.0, 0.1));
    // Overflowing quotients fall back to exact fractions.
    assert!(python_float_multiple(3.0, f64::from_bits(1)));
    assert!(python_float_multiple(1.5, f64::from_bits(3)), "1.5 / (3 * 2^-1074) == 2^1073");
    assert!(!python_float_multiple(1.0, f64::from_bits(3)));
}
