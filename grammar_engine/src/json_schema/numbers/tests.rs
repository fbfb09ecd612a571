//! Tests of the number languages: hand-checked verdicts, exhaustive grids against exact
//! decimal comparison, and recorded verdicts of Python's `jsonschema` (`testdata/`).

use serde_json::{json, Value};

use super::doubles::python_float_multiple;
use super::facts::Bound;
use super::*;
use crate::automata::{Dfa};
use crate::error::GrammarError;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

fn cfg() -> DfaConfig {
    DfaConfig::default()
}

fn facts(schema: Value, dialect: Dialect) -> NumberFacts {
    let map = schema.as_object().expect("an object schema");
    let mut f = NumberFacts::from_keywords(map, dialect, &Ctx::root()).expect("valid number keywords");
    f.integer = map.get("type") == Some(&json!("integer"));
    f
}

fn dfa_of(e: &Expr) -> Option<Dfa> {
    e.to_dfa(&cfg()).expect("compiles")
}

fn accepts(d: &Option<Dfa>, text: &str) -> bool {
    let Some(d) = d else { return false };
    let t = d.walk(d.start(), text.as_bytes());
    !t.is_dead() && d.is_accepting(t)
}

/// The DFA of a schema's numbers in a dialect.
fn lang(schema: Value, dialect: Dialect) -> Option<Dfa> {
    dfa_of(&number_expr(&facts(schema, dialect), dialect, &cfg()).expect("builds"))
}

fn check(schema: Value, dialect: Dialect, yes: &[&str], no: &[&str]) {
    let d = lang(schema.clone(), dialect);
    for t in yes {
        assert!(accepts(&d, t), "{schema} ({dialect:?}) should accept {t}");
    }
    for t in no {
        assert!(!accepts(&d, t), "{schema} ({dialect:?}) should reject {t}");
    }
}

const D4: Dialect = Dialect::Draft4;
const D20: Dialect = Dialect::Draft2020;

#[test]
fn the_universe() {
    check(
        json!({}),
        D20,
        &[
            "0", "-0", "1", "-7", "1.5", "-0.0", "0.000", "123456789012345", "1.00000000000000000000", "0.000000000000001",
            "12345678901234.5", "1234567890123456", "-98765432109876543210987654321", "1e5", "1E5", "1e-06", "2.5E+3",
            "-1.5e+300", "123.45e-300", "0.005e1", "0e300", "0.001234567890123e1", "-0.0E-0", "1.23456789012345e7", "1e0000000300",
        ],
        &[
            "", "-", "01", "-01", "1.", ".5", "+1", "--1", "1.2.3", "0.0000000000000001", "123456789012345.5", "00", "0x1",
            " 1", "1e", "1e+", "1e-", "e5", "1.e5", "1e5.5", "1e+-5", "1e301", "1e-301", "1000e3", "0.0005e1",
            "1.234567890123456e7", "0.00123456789012345e1", "1234567890123456.0", "0e1000", "0e999",
        ],
    );
}

#[test]
fn exponent_forms_within_bounds() {
    check(json!({"minimum": 0}), D20, &["1e-06", "2.5E+3", "0e0", "-0e5", "1e300", "1E-300"], &["-1e-06", "-2.5E+3", "-1e-300"]);
    check(json!({"exclusiveMinimum": 0}), D20, &["1e-300", "1e-06"], &["0e0", "-0.0e1", "-1e-300"]);
    check(json!({"maximum": 100}), D20, &["1e2", "1.0e+2", "10e1", "0.1e3", "-1e300", "99.9999e0"], &["1.00001e2", "1e3", "101e0"]);
    check(json!({"exclusiveMaximum": 100}), D20, &["99.9999e0", "9.9e1"], &["1e2", "100.0e0"]);
    check(json!({"minimum": 0.5, "maximum": 99.5}), D20, &["5e-1", "9.95e1", "0.995e2"], &["4.99e-1", "9.96e1", "5e-2"]);
    check(json!({"minimum": -2.5, "maximum": -1.25}), D20, &["-2.5e0", "-125e-2", "-0.2E1"], &["-1.2e0", "-3e0", "0e0"]);
    // Bounds Python holds as doubles: a text passes when its own double does.
    check(json!({"maximum": 0.3}), D20, &["3e-1", "2.99999999999999e-1"], &["3.00000000000001e-1"]);
    // A tiny bound: the text's double must pass it (1e-301 is not generated at all).
    check(parse(r#"{"exclusiveMinimum": 1e-300}"#), D20, &["1.00000000000001e-300", "2e-300"], &["1e-300", "1e-301", "0e0"]);
}

#[test]
fn exponent_forms_and_the_integer_type() {
    check(json!({"type": "integer"}), D20, &["1e2", "1.5e1", "-2.5E+3", "1e0", "0e-5", "120e-1", "1.23e2"], &["12e-1", "1e-1", "1.5e0", "1.23e1", "-2.5e0", "5e-300"]);
    check(json!({"type": "integer"}), D4, &["100", "-3"], &["1e2", "1.0", "0e0"]);
    check(json!({"type": "integer", "minimum": 5, "maximum": 1500}), D20, &["1.5e3", "5e0", "50e-1"], &["1.5e0", "1.501e3", "4e0", "1.5001e3"]);
}

#[test]
fn integers_of_any_length() {
    let long = "1".repeat(200);
    check(json!({"type": "integer"}), D4, &["1234567890123456", long.as_str(), "-99999999999999999999999"], &["1234567890123456.0"]);
    check(json!({"type": "integer"}), D20, &["1234567890123456", long.as_str()], &["1234567890123456.0"]);
    check(json!({"type": "number"}), D20, &[long.as_str(), "12345678901234567890"], &["12345678901234567890.5"]);
    // Bounded ranges stay exact at any length.
    let s = json!({"type": "integer", "minimum": 100000000000000000000u128, "maximum": 100000000000000000005u128});
    check(s, D20, &["100000000000000000000", "100000000000000000005", "1e20"], &["99999999999999999999", "100000000000000000006", "1000000000000000000000"]);
    check(json!({"maximum": -12345678901234567890i128}), D20, &["-12345678901234567890", "-99999999999999999999", "-1e300"], &["-12345678901234567889", "0"]);
    // Integral divisors count every digit.
    check(json!({"multipleOf": 7}), D20, &["7777777777777777777777777777", "-700000000000000000000"], &["7777777777777777777777777778", "7e1"]);
}

#[test]
fn integers_per_dialect() {
    check(json!({"type": "integer"}), D4, &["0", "-0", "42", "-42"], &["1.0", "0.0", "1.5"]);
    check(json!({"type": "integer"}), D20, &["0", "-0.0", "42.000", "-42", "42"], &["1.5", "1.01", "0.1"]);
    check(json!({"type": "integer"}), Dialect::Draft6, &["3.0"], &["3.5"]);
}

#[test]
fn fractional_bounds() {
    let s = json!({"type": "number", "minimum": 0.5, "maximum": 99.5});
    check(s, D20, &["0.5", "0.50", "1", "50", "99.5", "99.50000", "99.499999999", "0.500000000000001"], &["0.4999", "0", "-1", "99.51", "100", "-0.5", "99.500000000001"]);
    let s = json!({"exclusiveMinimum": 0, "exclusiveMaximum": 1});
    check(s, D20, &["0.5", "0.000000000000001", "0.999999999999999"], &["0", "0.0", "-0.0", "-0", "1", "1.0", "-0.5"]);
    let s = json!({"minimum": -2.5, "maximum": -1.25});
    check(s, D20, &["-2.5", "-1.25", "-2", "-1.3", "-2.0"], &["-1.2", "-2.6", "-0", "0", "2", "-3"]);
    let s = json!({"type": "integer", "minimum": 0.5, "exclusiveMaximum": 3.0});
    check(s, D20, &["1", "2", "2.0", "1.00"], &["0", "3", "3.0", "0.5", "-0", "2.5"]);
    check(json!({"type": "integer", "minimum": -0.5}), D4, &["0", "-0", "7"], &["-1", "0.0"]);
    check(json!({"maximum": 0}), D20, &["0", "-0", "-0.0", "0.000", "-5.5"], &["0.000000000000001", "1"]);
}

#[test]
fn bounds_follow_python_doubles() {
    // Python holds 0.3 as 0.299999999999999988898; a text is judged by its own double, so
    // "0.3" passes maximum 0.3 though it is above the double.
    check(json!({"maximum": 0.3}), D20, &["0.3", "0.299999999999999"], &["0.300000000000001"]);
    check(json!({"exclusiveMaximum": 0.3}), D20, &["0.299999999999999"], &["0.3", "0.30"]);
    // An exact int bound a double cannot hold: ints compare exactly.
    check(json!({"maximum": 100000000000000000001u128}), D20, &["999999999999999", "1.5", "1e3", "100000000000000000001"], &["100000000000000000002"]);
    // 1e400 overflows to infinity: no maximum, and a minimum nothing reaches.
    let long = "9".repeat(500);
    check(parse(r#"{"maximum": 1e400}"#), D20, &["999999999999999", "-3", long.as_str()], &[]);
    assert!(lang(parse(r#"{"minimum": 1e400}"#), D20).is_none());
    assert!(lang(parse(r#"{"exclusiveMinimum": -1e400, "maximum": -1e400}"#), D20).is_none());
    // A tiny double bound: 1e-400 underflows to 0.
    check(parse(r#"{"exclusiveMinimum": 1e-400}"#), D20, &["0.000000000000001", "3"], &["0", "-0.0"]);
}

#[test]
fn draft4_exclusive_flags() {
    check(json!({"minimum": 1, "exclusiveMinimum": true, "maximum": 3, "exclusiveMaximum": false}), D4, &["1.5", "3", "3.0"], &["1", "1.0", "3.1"]);
    // In draft 4 a lone exclusiveMaximum does nothing; from draft 6 it is a bound.
    check(json!({"exclusiveMaximum": true}), D4, &["5", "-5"], &[]);
    check(json!({"exclusiveMaximum": 5}), D20, &["4.9"], &["5", "5.0", "6"]);
    check(json!({"minimum": 1, "exclusiveMinimum": 1}), D20, &["1.1"], &["1"]);
    check(json!({"minimum": 2, "exclusiveMinimum": 1}), D20, &["2"], &["1.5"]);
}

#[test]
fn keyword_errors() {
    let err = |schema: Value, dialect: Dialect| NumberFacts::from_keywords(schema.as_object().unwrap(), dialect, &Ctx::root()).unwrap_err();
    assert!(matches!(err(json!({"minimum": "3"}), D20), GrammarError::InvalidSchema { .. }));
    assert!(matches!(err(json!({"exclusiveMinimum": 3, "minimum": 1}), D4), GrammarError::InvalidSchema { .. }));
    assert!(matches!(err(json!({"multipleOf": 0}), D20), GrammarError::InvalidSchema { .. }));
    assert!(matches!(err(json!({"multipleOf": -2.5}), D20), GrammarError::InvalidSchema { .. }));
    match err(parse(r#"{"multipleOf": 1e-400}"#), D20) {
        GrammarError::UnsupportedSchemaKeyword { keyword, .. } => assert_eq!(keyword, "multipleOf"),
        e => panic!("{e}"),
    }
    let big = format!("{{\"minimum\": 1{}}}", "0".repeat(5000));
    let v: Value = serde_json::from_str(&big).unwrap();
    assert!(matches!(err(v, D20), GrammarError::UnsupportedSchemaKeyword { .. }));
}

#[test]
fn merging_keeps_the_tightest() {
    let mut a = facts(json!({"minimum": 1, "maximum": 10, "multipleOf": 2}), D20);
    a.merge(facts(json!({"exclusiveMinimum": 1, "maximum": 12.5, "multipleOf": 3, "type": "integer"}), D20));
    a.merge(facts(json!({"multipleOf": 2}), D20));
    assert!(a.integer);
    assert_eq!(a.minimum, Some(Bound { value: Decimal::from_i128(1), exclusive: true }));
    assert_eq!(a.maximum, Some(Bound { value: Decimal::from_i128(10), exclusive: false }));
    assert_eq!(a.multiple_of.len(), 2);
    let d = dfa_of(&number_expr(&a, D20, &cfg()).unwrap());
    for k in -20..20 {
        assert_eq!(accepts(&d, &k.to_string()), (2..=10).contains(&k) && k % 6 == 0, "{k}");
    }
}

/// All texts with up to `int` integer digits and `frac` fraction digits, both signs.
fn grid(int: u32, frac: u32) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..10u64.pow(int) {
        for neg in ["", "-"] {
            out.push(format!("{neg}{i}"));
            for f in 1..=frac {
                for j in 0..10u64.pow(f) {
                    out.push(format!("{neg}{i}.{j:0width$}", width = f as usize));
                }
            }
        }
    }
    out
}

#[test]
fn bounds_exhaustively() {
    // Bounds and texts of at most 15 digits: Python's verdict is the exact comparison.
    let texts = grid(2, 2);
    let bounds = [None, Some(json!(0)), Some(json!(-3)), Some(json!(7.25)), Some(json!(-0.5)), Some(json!(12)), Some(json!(0.05))];
    for lo in &bounds {
        for hi in &bounds {
            for (lo_kw, hi_kw) in [("minimum", "maximum"), ("exclusiveMinimum", "exclusiveMaximum")] {
                for integer in [false, true] {
                    let mut schema = json!({});
                    if let Some(v) = lo {
                        schema[lo_kw] = v.clone();
                    }
                    if let Some(v) = hi {
                        schema[hi_kw] = v.clone();
                    }
                    if integer {
                        schema["type"] = json!("integer");
                    }
                    let d = lang(schema.clone(), D20);
                    for t in &texts {
                        let v = Decimal::parse(t).unwrap();
                        let num = |x: &Value| Decimal::parse(&x.to_string()).unwrap();
                        let strict = lo_kw == "exclusiveMinimum";
                        let above = lo.as_ref().is_none_or(|b| if strict { v > num(b) } else { v >= num(b) });
                        let below = hi.as_ref().is_none_or(|b| if strict { v < num(b) } else { v <= num(b) });
                        let kind = !integer || v.is_integer();
                        assert_eq!(accepts(&d, t), above && below && kind, "{schema} on {t}");
                    }
                }
            }
        }
    }
}

#[test]
fn integer_divisors_are_exact() {
    let texts = grid(3, 1);
    for (m, lo, hi) in [(7, None, None), (5, Some(-20), Some(45)), (12, Some(3), None), (1, Some(-2), Some(2)), (1000, None, None)] {
        let mut schema = json!({"multipleOf": m});
        if let Some(lo) = lo {
            schema["minimum"] = json!(lo);
        }
        if let Some(hi) = hi {
            schema["maximum"] = json!(hi);
        }
        let d = lang(schema.clone(), D20);
        for t in &texts {
            let v = Decimal::parse(t).unwrap();
            let k = v.to_i128();
            let ok = k.is_some_and(|k| k % m == 0 && lo.is_none_or(|l| k >= l) && hi.is_none_or(|h| k <= h));
            assert_eq!(accepts(&d, t), ok, "{schema} on {t}");
        }
    }
}

#[test]
fn large_integer_divisors() {
    // Past the residue limit, a bounded range is spelled out; an unbounded one is refused.
    check(json!({"multipleOf": 1000003, "minimum": 0, "maximum": 10000000}), D20, &["0", "1000003", "9000027", "2000006.0"], &["1000004", "-1000003", "11000033"]);
    let f = facts(json!({"multipleOf": 1000003}), D20);
    match number_expr(&f, D20, &cfg()) {
        Err(GrammarError::UnsupportedSchemaKeyword { keyword, .. }) => assert_eq!(keyword, "multipleOf"),
        other => panic!("{other:?}"),
    }
    // A divisor past the universe leaves 0 alone.
    check(json!({"multipleOf": 10000000000000000000u64}), D20, &["0", "-0", "0.0"], &["1", "10000000000000"]);
}

#[test]
fn float_divisors_are_sound() {
    let texts = grid(3, 2);
    for (m, lo) in [(0.01, None), (0.1, Some(-50.0)), (0.5, None), (2.5, None), (0.3, Some(0.0)), (1e-3, None), (2.0, None)] {
        let mut schema = json!({"multipleOf": m});
        if let Some(lo) = lo {
            schema["minimum"] = json!(lo);
        }
        let f = facts(schema.clone(), D20);
        assert!(!f.is_exact());
        let d = dfa_of(&number_expr(&f, D20, &cfg()).unwrap());
        let sup = dfa_of(&number_superset(&f, D20, &cfg()).unwrap());
        let mut accepted = 0;
        for t in &texts {
            let x: f64 = t.parse().unwrap();
            let python = python_float_multiple(x, m) && lo.is_none_or(|l| x >= l);
            if accepts(&d, t) {
                accepted += 1;
                assert!(python, "{schema} accepts {t}, which Python rejects");
            }
            if python {
                assert!(accepts(&sup, t), "{schema}: the superset misses {t}");
            }
        }
        assert!(accepted > 100, "{schema}: only {accepted} texts");
    }
    // Dyadic divisors: every multiple.
    check(json!({"multipleOf": 0.5}), D20, &["1.5", "-2", "0", "1000000.5", "3.50"], &["0.25", "1.2"]);
    check(json!({"multipleOf": 2.5}), D20, &["7.5", "-5", "0.0"], &["1", "2.6"]);
    // 0.07 / 0.01 == 7.000000000000001 in Python, 0.06 / 0.01 == 6.0.
    check(json!({"multipleOf": 0.01}), D20, &["0.06", "1.25", "12345.75", "0.5"], &["0.07", "0.001", "0.015"]);
    check(json!({"multipleOf": 0.01, "type": "integer"}), D4, &["7", "-100", "123456789"], &["7.0", "0.5"]);
}

#[test]
fn literals() {
    let lit = |v: Value| match v {
        Value::Number(n) => dfa_of(&number_literal(&n).unwrap()),
        _ => unreachable!(),
    };
    let one = lit(json!(1));
    assert!(accepts(&one, "1") && accepts(&one, "1.0") && accepts(&one, "1.000"));
    assert!(!accepts(&one, "1.01") && !accepts(&one, "01") && !accepts(&one, "-1") && !accepts(&one, "10"));
    let tenth = lit(json!(0.1));
    assert!(accepts(&tenth, "0.1") && accepts(&tenth, "0.10") && !accepts(&tenth, "0.11") && !accepts(&tenth, "1"));
    let v: Value = serde_json::from_str("0.1000000000000000055511151231257827").unwrap();
    let same = lit(v);
    assert!(accepts(&same, "0.1") && !accepts(&same, "0.1000000000000000055511151231257827"));
    let hundred = lit(serde_json::from_str("1e2").unwrap());
    assert!(accepts(&hundred, "100") && accepts(&hundred, "100.0") && accepts(&hundred, "1e2") && accepts(&hundred, "10E+1"));
    let zero = lit(serde_json::from_str("-0.0").unwrap());
    assert!(accepts(&zero, "0") && accepts(&zero, "-0") && accepts(&zero, "-0.00") && accepts(&zero, "0e0") && !accepts(&zero, "0.1"));
    let minus_two = lit(serde_json::from_str("-2.0").unwrap());
    for t in ["-2", "-2.0", "-2e0", "-2.00E+0", "-20e-1", "-0.2e1"] {
        assert!(accepts(&minus_two, t), "{t}");
    }
    assert!(!accepts(&minus_two, "2") && !accepts(&minus_two, "-2e1"));
    let big = lit(json!(100000000000000000000u128));
    assert!(accepts(&big, "100000000000000000000") && accepts(&big, "1e20") && !accepts(&big, "100000000000000000000.0"));
    // 10^23 is no double: only the integer equals it; the double 1e23 is another integer.
    let e23 = lit(serde_json::from_str("100000000000000000000000").unwrap());
    assert!(accepts(&e23, "100000000000000000000000") && !accepts(&e23, "1e23"));
    let d23 = lit(serde_json::from_str("1e23").unwrap());
    assert!(accepts(&d23, "1e23") && accepts(&d23, "99999999999999991611392") && !accepts(&d23, "100000000000000000000000"));
    assert!(lit(serde_json::from_str("0.12345678901234567").unwrap()).is_none());
    assert!(lit(serde_json::from_str("1e400").unwrap()).is_none());
    let long = format!("1{}", "0".repeat(60));
    let long_int = lit(serde_json::from_str(&format!("{long}1")).unwrap());
    assert!(accepts(&long_int, &format!("{long}1")) && !accepts(&long_int, &format!("{long}0")));
}

/// A universe text (see `universe.rs`), decided from the text alone.
fn in_universe(text: &str) -> bool {
    use super::universe::{representable, MANTISSA_MAG_HI, MANTISSA_MAG_LO, MAX_EXPONENT};
    let digits = text.strip_prefix('-').unwrap_or(text);
    let integer = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && (t == "0" || !t.starts_with('0'));
    if integer(digits) {
        return true;
    }
    match text.find(['e', 'E']) {
        None => Decimal::parse(text).is_ok_and(|v| representable(&v)),
        Some(i) => {
            let Ok(mantissa) = Decimal::parse(&text[..i]) else { return false };
            if text[..i].contains(['e', 'E']) {
                return false;
            }
            let exponent = text[i + 1..].strip_prefix(['+', '-']).unwrap_or(&text[i + 1..]);
            if exponent.is_empty() || !exponent.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            let k = exponent.trim_start_matches('0');
            let small = k.len() <= 3 && k.parse::<u32>().unwrap_or(0) <= MAX_EXPONENT;
            let window = mantissa.magnitude().is_none_or(|m| (i64::from(MANTISSA_MAG_LO)..=i64::from(MANTISSA_MAG_HI)).contains(&m));
            small && window && representable(&mantissa)
        }
    }
}

/// Which universe texts a recorded language must judge as Python does.
#[derive(PartialEq)]
enum Exact {
    All,
    /// Texts without exponent (integer divisors leave the exponent forms out).
    WithoutExponent,
    /// None: a sound subset (float divisors).
    Subset,
}

/// The language of a recorded schema: `const`/`enum` as literals, otherwise the merged facts
/// of the schema and its `allOf` branches. Also where it is exact.
fn recorded_language(schema: &Value, dialect: Dialect) -> (Option<Dfa>, Exact) {
    let map = schema.as_object().expect("object schema");
    if let Some(c) = map.get("const") {
        let Value::Number(n) = c else { unreachable!() };
        return (dfa_of(&number_literal(n).unwrap()), Exact::All);
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        let parts = values.iter().filter_map(|v| v.as_number()).map(|n| number_literal(n).unwrap()).collect();
        return (dfa_of(&Expr::union(parts)), Exact::All);
    }
    let mut f = facts(schema.clone(), dialect);
    for branch in map.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        f.merge(facts(branch.clone(), dialect));
    }
    let exact = if f.is_exact() {
        Exact::All
    } else if f.multiple_of.iter().all(|(d, _)| matches!(d, super::facts::Divisor::Int(_))) {
        Exact::WithoutExponent
    } else {
        Exact::Subset
    };
    (dfa_of(&number_expr(&f, dialect, &cfg()).unwrap()), exact)
}

#[test]
fn agrees_with_python_jsonschema() {
    // Verdicts recorded by testdata/gen_python_cases.py: every accepted text must be valid in
    // Python; for exact facts, every valid universe text must be accepted.
    let data: Value = serde_json::from_str(include_str!("testdata/python_cases.json")).expect("JSON");
    let (mut accepted, mut rejected_valid, mut rejected_invalid, mut outside) = (0, 0, 0, 0);
    let (mut suite_pass, mut suite_total, mut suite_missed) = (0, 0, Vec::new());
    for group in data["groups"].as_array().expect("groups") {
        let dialect = match group["dialect"].as_str() {
            Some("draft4") => D4,
            _ => D20,
        };
        let schema = match group.get("schema_text") {
            Some(Value::String(text)) => parse(text),
            _ => group["schema"].clone(),
        };
        let source = group["source"].as_str().unwrap_or("");
        let (d, exact) = recorded_language(&schema, dialect);
        let (mut group_ok, mut group_valid) = (0, 0);
        // Generated groups: `texts` space-separated and `accepted` one "1"/"0" each; the suite's:
        // `cases` of [text, verdict, the suite's own verdict].
        let cases: Vec<(&str, bool)> = match (group.get("texts"), group.get("accepted")) {
            (Some(Value::String(texts)), Some(Value::String(verdicts))) => {
                assert_eq!(texts.split(' ').count(), verdicts.len(), "{source}: a verdict per text");
                texts.split(' ').zip(verdicts.bytes()).map(|(t, v)| (t, v == b'1')).collect()
            }
            _ => group["cases"]
                .as_array()
                .expect("cases")
                .iter()
                .map(|c| (c[0].as_str().expect("text"), c[1].as_bool().expect("verdict")))
                .collect(),
        };
        for (text, valid) in cases {
            let ok = accepts(&d, text);
            assert!(!ok || valid, "{source} {schema} ({dialect:?}) accepts {text}, which jsonschema rejects");
            let judged = match exact {
                Exact::All => true,
                Exact::WithoutExponent => !text.contains(['e', 'E']),
                Exact::Subset => false,
            };
            if judged && in_universe(text) {
                assert_eq!(ok, valid, "{source} {schema} ({dialect:?}) on {text}");
            }
            if !in_universe(text) {
                assert!(!ok, "{text} is outside the universe");
                outside += 1;
            }
            group_ok += usize::from(ok);
            group_valid += usize::from(valid && in_universe(text));
            match (ok, valid) {
                (true, _) => accepted += 1,
                (false, true) => rejected_valid += 1,
                (false, false) => rejected_invalid += 1,
            }
            if source.starts_with("suite") {
                suite_total += 1;
                if ok == valid {
                    suite_pass += 1;
                } else {
                    suite_missed.push(format!("{source}: {text}"));
                }
            }
        }
        if exact != Exact::All {
            eprintln!("sound subset {schema}: {group_ok} of {group_valid} valid universe texts accepted");
        }
    }
    eprintln!(
        "python cases: {accepted} accepted (all valid), {rejected_invalid} rightly rejected, \
         {rejected_valid} valid but not generated ({outside} texts outside the universe)"
    );
    eprintln!("test suite: {suite_pass}/{suite_total} agree; the rest are valid texts not generated:");
    for m in &suite_missed {
        eprintln!("  {m}");
    }
    assert!(suite_total >= 90 && accepted > 2000);
}

