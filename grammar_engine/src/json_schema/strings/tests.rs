use super::*;
use serde_json::json;

fn facts(schema: Value) -> StringFacts {
    StringFacts::from_keywords(schema.as_object().unwrap(), &Ctx::root()).unwrap()
}

fn compile(schema: Value) -> Option<Dfa> {
    let e = string_expr(&facts(schema), &DfaConfig::default()).unwrap();
    e.to_dfa(&DfaConfig::default()).unwrap()
}

/// Checks decoded values: each is spelled canonically and quoted.
fn check(schema: Value, yes: &[&str], no: &[&str]) {
    let d = compile(schema.clone());
    let accepts = |s: &str| {
        d.as_ref().is_some_and(|d| {
            let t = d.walk(d.start(), format!("\"{}\"", canonical::spell(s)).as_bytes());
            !t.is_dead() && d.is_accepting(t)
        })
    };
    for s in yes {
        assert!(accepts(s), "{schema} should accept {s:?}");
    }
    for s in no {
        assert!(!accepts(s), "{schema} should reject {s:?}");
    }
}

fn accepts_text(d: &Dfa, text: &str) -> bool {
    let t = d.walk(d.start(), text.as_bytes());
    !t.is_dead() && d.is_accepting(t)
}

#[test]
fn only_canonical_spellings() {
    let d = compile(json!({})).unwrap();
    for ok in [r#""""#, r#""a\"b""#, r#""\u0001""#, r#""\n""#, "\"é\u{7f}\"", r#""/""#] {
        assert!(accepts_text(&d, ok), "{ok}");
    }
    for no in [r#""\/""#, r#""\u0041""#, r#""\u000A""#, r#""\u000a""#, "\"\n\"", r#""\x""#] {
        assert!(!accepts_text(&d, no), "{no}");
    }
    let lit = string_literal("a\"\u{1}\n").to_dfa(&DfaConfig::default()).unwrap().unwrap();
    assert!(accepts_text(&lit, r#""a\"\u0001\n""#) && !accepts_text(&lit, "\"a\\\"\\u0001\\u000a\""));
}

#[test]
fn lengths_count_code_points() {
    check(json!({"minLength": 2, "maxLength": 3}), &["ab", "é😀", "\n\"x", "\u{1}\u{2}"], &["a", "abcd", "😀", ""]);
    check(json!({"maxLength": 0}), &[""], &["a"]);
    check(json!({"minLength": 2.0}), &["ab", "abc"], &["a"]);
    assert!(compile(json!({"minLength": 3, "maxLength": 2})).is_none());
}

#[test]
fn lengths_with_patterns_and_formats() {
    check(json!({"pattern": "^[a-z]+$", "maxLength": 3}), &["a", "abc"], &["", "abcd", "A"]);
    check(json!({"pattern": "x", "minLength": 3}), &["axb", "xxx", "x\n\""], &["x", "ax"]);
    check(json!({"pattern": "\"", "minLength": 2, "maxLength": 2}), &["a\"", "\"\""], &["\"", "ab\""]);
    check(json!({"format": "date", "maxLength": 10}), &["2020-01-01"], &["2020-01-1"]);
    assert!(compile(json!({"format": "date", "maxLength": 9})).is_none());
    check(json!({"format": "date-time", "maxLength": 22}), &["1963-06-19T08:30:06.1Z"], &["1963-06-19T08:30:06.12Z"]);
    check(json!({"pattern": "^\\u0001*$", "minLength": 2}), &["\u{1}\u{1}"], &["\u{1}"]);
}

#[test]
fn patterns_and_formats_intersect() {
    let mut f = facts(json!({"pattern": "^a", "format": "email"}));
    f.merge(facts(json!({"pattern": "z$", "maxLength": 20})));
    let d = string_expr(&f, &DfaConfig::default()).unwrap().to_dfa(&DfaConfig::default()).unwrap().unwrap();
    assert!(accepts_text(&d, "\"ab@example.xyz\"") && !accepts_text(&d, "\"ab@example.xy\""));
    assert!(!accepts_text(&d, "\"bb@example.xyz\"") && !accepts_text(&d, "\"abcdefghi@example.xyz\"") && accepts_text(&d, "\"abcdefgh@example.xyz\""));
    check(json!({"format": "not-a-known-format"}), &["anything", ""], &[]);
    assert!(compile(json!({"pattern": "^a$", "format": "ipv4"})).is_none());
}

#[test]
fn errors_are_typed() {
    let err = |schema: Value| string_expr(&facts(schema), &DfaConfig::default()).unwrap_err();
    assert!(matches!(err(json!({"pattern": "(a"})), GrammarError::InvalidSchema { .. }));
    assert!(matches!(err(json!({"pattern": "\\a"})), GrammarError::InvalidSchema { .. }));
    assert!(matches!(err(json!({"pattern": "(a)\\1"})), GrammarError::UnsupportedSchemaKeyword { ref keyword, .. } if keyword == "pattern"));
    assert!(matches!(err(json!({"pattern": "a(?=b)"})), GrammarError::UnsupportedSchemaKeyword { ref keyword, .. } if keyword == "pattern"));
    assert!(matches!(err(json!({"minLength": 1_000_000})), GrammarError::TooLarge { .. }));
    assert!(matches!(err(json!({"pattern": "^.*$", "minLength": 1_000_000})), GrammarError::TooLarge { .. }));
    let bad = |schema: Value| StringFacts::from_keywords(schema.as_object().unwrap(), &Ctx::root()).unwrap_err();
    assert!(matches!(bad(json!({"minLength": -1})), GrammarError::InvalidSchema { .. }));
    assert!(matches!(bad(json!({"maxLength": 1.5})), GrammarError::InvalidSchema { .. }));
    assert!(matches!(bad(json!({"pattern": 3})), GrammarError::InvalidSchema { .. }));
}

#[test]
fn large_bounds_shrink_to_fit() {
    let small = DfaConfig { max_states: 2_000, ..DfaConfig::default() };
    let d = string_expr(&facts(json!({"maxLength": 1_000_000})), &small).unwrap().to_dfa(&small).unwrap().unwrap();
    assert!(d.num_states() <= 2_000);
    assert!(accepts_text(&d, &format!("\"{}\"", "a".repeat(100))) && !accepts_text(&d, &format!("\"{}\"", "a".repeat(200))));
    let e = string_expr(&facts(json!({"pattern": "^[a-z]*$", "maxLength": 1_000_000})), &small).unwrap();
    let d = e.to_dfa(&small).unwrap().unwrap();
    assert!(d.num_states() <= 2_000 && accepts_text(&d, &format!("\"{}\"", "a".repeat(900))));
}

#[test]
fn length_ranges_of_languages() {
    let range = |regex: &str| length_range(&Dfa::from_regex(regex, &DfaConfig::default()).unwrap());
    assert_eq!(range("abc"), (3, Some(3)));
    assert_eq!(range("a(?:bc)?|é"), (1, Some(3)));
    assert_eq!(range(r"\\u0001x|\\n"), (1, Some(2)));
    assert_eq!(range("x+"), (1, None));
    // A bound the language implies leaves it as it is.
    let e = string_expr(&facts(json!({"format": "date", "minLength": 1, "maxLength": 20})), &DfaConfig::default()).unwrap();
    assert!(matches!(e, Expr::Concat(ref v) if matches!(v[1], Expr::Regex(_))));
}
