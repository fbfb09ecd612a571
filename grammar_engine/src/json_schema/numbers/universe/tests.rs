use super::*;
use crate::automata::{Dfa, DfaConfig, Expr};
use crate::json_schema::context::Dialect;

fn d(s: &str) -> Decimal {
    Decimal::parse(s).unwrap()
}

fn full_match(regex: &str, text: &str) -> bool {
    let dfa = Dfa::from_regex(regex, &DfaConfig::default()).unwrap();
    dfa.accepts(text.as_bytes())
}

#[test]
fn the_universe_regex_is_the_universe() {
    let cfg = DfaConfig::default();
    let regex = Expr::regex(universe_regex());
    let exact = super::super::number_expr(&super::super::NumberFacts::default(), Dialect::Draft2020, &cfg).unwrap();
    assert!(regex.minus(&exact, &cfg).unwrap().is_empty());
    assert!(exact.minus(&regex, &cfg).unwrap().is_empty());
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
    assert_eq!(integer_spelling(&d("1")).unwrap(), "1");
    assert_eq!(integer_spelling(&d("-0.0")).unwrap(), "-?0");
    assert_eq!(integer_spelling(&d("1e20")).unwrap(), format!("1{}", "0".repeat(20)));
    assert_eq!(integer_spelling(&d("1.5")), None);
    assert_eq!(decimal_spellings(&d("1")).unwrap(), r"1\.0+");
    assert_eq!(decimal_spellings(&d("-1.50")).unwrap(), r"-1\.50*");
    assert_eq!(decimal_spellings(&d("0")).unwrap(), r"-?0\.0+");
    assert_eq!(decimal_spellings(&d("0.1e-1")).unwrap(), r"0\.010*");
    assert_eq!(decimal_spellings(&d("1e20")), None);
}

#[test]
fn exponent_spellings_of_a_value() {
    let of = |v: &str| exponent_spellings(&d(v)).unwrap();
    let yes = |v: &str, texts: &[&str]| {
        let r = of(v);
        for t in texts {
            assert!(full_match(&r, t), "{v}: {t} should match {r}");
        }
    };
    let no = |v: &str, texts: &[&str]| {
        let r = of(v);
        for t in texts {
            assert!(!full_match(&r, t), "{v}: {t} should not match {r}");
        }
    };
    yes("1500", &["1.5e3", "1.5E+3", "1.50e03", "15e2", "150e1", "150.0e1", "0.15e4", "0.015e5", "0.0015E+006"]);
    no("1500", &["1500e0", "1.5e2", "0.00015e7", "1.5e", "1.5e+", "15e3", "-1.5e3"]);
    yes("-0.000001", &["-1e-06", "-1E-6", "-10e-7", "-100e-8", "-0.1e-5", "-1.0e-6"]);
    no("-0.000001", &["1e-6", "-1e-07", "-1000e-9"]);
    yes("0", &["0e0", "-0.0E+300", "0e-300", "0.000e5", "0E0000"]);
    no("0", &["0e301", "0.e1", "00e1"]);
    yes("1e300", &["1e300", "10e299"]);
    no("1e300", &["0.1e301"]);
    assert!(exponent_spellings(&d("1e305")).is_none());
    // Sixteen significant digits: no exponent form either.
    assert!(exponent_spellings(&d("1.234567890123456")).is_none());
}

#[test]
fn up_to_counts_exactly() {
    for max in [0u32, 5, 9, 10, 99, 100, 253, 300] {
        let r = up_to(max);
        for k in 0..=400u32 {
            assert_eq!(full_match(&r, &k.to_string()), k <= max, "{k} against {max}");
            assert_eq!(full_match(&r, &format!("00{k}")), k <= max, "00{k} against {max}");
        }
    }
}
