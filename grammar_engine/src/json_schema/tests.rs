//! Tests of the compiler's internals: pruning by depth, the NFA size estimate, and the
//! restriction ladder's predictions and helpers (the compiler as a whole is tested through the
//! public face in `tests/json_schema.rs`).

use serde_json::{json, Value};

use super::{compile, JsonSchemaOptions};
use crate::automata::{Dfa, DfaConfig};
use crate::error::GrammarError;

fn accepts(d: &Dfa, text: &str) -> bool {
    d.accepts(text.as_bytes())
}

/// `levels` levels of objects, each with members `names` of the next level's type (the first
/// one required), down to `leaf`.
fn nested_schema(levels: usize, names: &[&str], leaf: Value) -> Value {
    let mut defs = serde_json::Map::new();
    defs.insert(format!("l{levels}"), leaf);
    for level in (0..levels).rev() {
        let next = format!("#/$defs/l{}", level + 1);
        let props: serde_json::Map<String, Value> = names.iter().map(|n| (n.to_string(), json!({"$ref": next}))).collect();
        defs.insert(format!("l{level}"), json!({"type": "object", "properties": props, "required": [names[0]]}));
    }
    json!({"$ref": "#/$defs/l0", "$defs": defs})
}

/// Six levels of objects with two members each, down to a string whose pattern's DFA is much
/// larger than its NFA: attempts fail on DFA states (not on the NFA estimate), so the ladder
/// learns from them.
fn blowup_nested_schema() -> Value {
    nested_schema(6, &["p", "q"], json!({"type": "string", "pattern": "^[ab]*a[ab]{5}$"}))
}

#[test]
fn pruning_keeps_what_min_properties_and_min_items_need() {
    let schema = json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "object",
        "minProperties": 1, "properties": {"x": {"type": "integer"}, "y": {"type": "string", "maxLength": 3}},
        "additionalProperties": {"type": "boolean"}}, "b": {"type": "array", "minItems": 1, "items": {"type": "null"}}}});
    let opts = JsonSchemaOptions::default();
    let config = DfaConfig::default();
    let mut c = super::walk::Compiler::new(&schema, &opts, &config);
    c.prune_depth = Some(1);
    let root = c.root_item(&schema);
    let d = c.compile_one(root).unwrap().to_dfa(&config).unwrap().expect("not empty");
    assert!(c.pruned());
    // `a` needs one member: the first optional one is kept, extras are not.
    assert!(accepts(&d, r#"{"a":{"x":1}}"#));
    for t in [r#"{"a":{}}"#, r#"{"a":{"x":1,"y":"z"}}"#, r#"{"a":{"x":1,"k":true}}"#] {
        assert!(!accepts(&d, t), "{t}");
    }
    // The root (depth 0) keeps its optional `b`; `b`'s elements are at depth 1: only `minItems`.
    assert!(accepts(&d, r#"{"a":{"x":1},"b":[null]}"#));
    assert!(!accepts(&d, r#"{"a":{"x":1},"b":[null,null]}"#));
}

#[test]
fn the_size_estimate_refuses_huge_expressions_before_building_them() {
    use crate::automata::Expr;
    let config = DfaConfig { max_states: 1_000, nfa_states_factor: Some(2), ..DfaConfig::default() };
    // 64 distinct words, the union copied 2^7 times: far more NFA states than 4 × 1,000
    // (its minimized DFA would be small; the estimate is about the NFA built on the way).
    let word = |i: usize| Expr::literal(&format!("w{i:03}x"));
    let mut e = Expr::union((0..64).map(word).collect());
    for _ in 0..7 {
        e = Expr::concat(vec![e.clone(), Expr::literal(","), e]);
    }
    let started = std::time::Instant::now();
    let err = e.to_dfa(&config).expect_err("too large");
    assert!(matches!(err, GrammarError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("about"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_millis(500));
    // Below the estimate's limit the same shape compiles.
    let small = Expr::concat(vec![Expr::union((0..4).map(word).collect()), Expr::literal(";")]);
    assert!(small.to_dfa(&config).unwrap().is_some());
}

#[test]
fn the_ladder_skips_attempts_predicted_not_to_fit() {
    use super::ladder::Overflow;
    // The last attempt: 200,000 NFA states estimated, 150,000 DFA states reached (0.75 each).
    let o = Overflow { estimate: 200_000, states: 150_000, count_cap: None };
    assert!(o.predicts_overflow(160_000, None, 100_000).is_some(), "120,000 predicted");
    assert!(o.predicts_overflow(140_000, None, 100_000).is_none(), "105,000: within the slack");
    // A new count cap may change the proportion: only a barely smaller estimate is skipped.
    assert!(o.predicts_overflow(160_000, Some(16), 100_000).is_none());
    assert!(o.predicts_overflow(190_000, Some(16), 100_000).is_some());
}

#[test]
fn with_predictions_the_ladder_still_keeps_the_least_restriction_that_fits() {
    use super::{compile_noting, walk};
    let schema = blowup_nested_schema();
    let opts = JsonSchemaOptions::default();
    let exact = compile(&schema, &opts, &DfaConfig::default()).unwrap();
    for divisor in [2, 4, 8, 12] {
        let small = DfaConfig { max_states: exact.num_states() / divisor, ..DfaConfig::default() };
        let (d, restriction) = compile_noting(&schema, &opts, &small).expect("a pruned automaton fits");
        // The deepest prune depth whose automaton fits, found by trying each in turn.
        let fits = |depth: usize| {
            let mut c = walk::Compiler::new(&schema, &opts, &small);
            c.prune_depth = Some(depth);
            let root = c.root_item(&schema);
            c.compile_one(root).and_then(|e| e.to_dfa(&small)).ok().flatten()
        };
        let best = [6, 4, 3, 2, 1].into_iter().find(|&depth| fits(depth).is_some()).expect("some depth fits");
        let text = restriction.expect("restricted");
        assert!(text.contains(&format!("objects {best} or more levels deep")), "divisor {divisor}: {text}, best {best}");
        assert_eq!(d.num_states(), fits(best).unwrap().num_states());
    }
}

fn regular((c, text): (crate::pushdown::Compiled, Option<String>)) -> (crate::automata::Dfa, Option<String>) {
    match c {
        crate::pushdown::Compiled::Regular(d) => (d, text),
        crate::pushdown::Compiled::Pushdown(_) => panic!("a pushdown grammar"),
    }
}

#[test]
fn attempts_side_by_side_give_the_answer_of_attempts_in_turn() {
    use super::ladder::compile_helped_after;
    use std::time::Duration;
    let schema = blowup_nested_schema();
    let exact = compile(&schema, &JsonSchemaOptions::default(), &DfaConfig::default()).unwrap();
    // Exact, then restricted at several depths, with helpers starting at once.
    for divisor in [1, 3, 10] {
        let config = DfaConfig { max_states: exact.num_states() / divisor + 1, ..DfaConfig::default() };
        let in_turn = JsonSchemaOptions { threads: 1, ..JsonSchemaOptions::default() };
        let (want, want_text) = regular(compile_helped_after(&schema, &in_turn, &config, Duration::ZERO, false).unwrap());
        assert_eq!(divisor == 1, want_text.is_none(), "divisor {divisor}: {want_text:?}");
        for threads in [2, 4, 8] {
            let opts = JsonSchemaOptions { threads, ..JsonSchemaOptions::default() };
            let (got, got_text) = regular(compile_helped_after(&schema, &opts, &config, Duration::ZERO, false).unwrap());
            assert_eq!((got.num_states(), &got_text), (want.num_states(), &want_text), "divisor {divisor}, {threads} threads");
        }
    }
    // A refusal no restriction mends is the answer too, and so is a size error past the last.
    let refused = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=a)b"}}, "required": ["a"]});
    let tiny = DfaConfig { max_states: 3, ..DfaConfig::default() };
    for threads in [1, 4] {
        let opts = JsonSchemaOptions { threads, ..JsonSchemaOptions::default() };
        let e = compile_helped_after(&refused, &opts, &DfaConfig::default(), Duration::ZERO, false).unwrap_err();
        assert!(matches!(e, crate::error::GrammarError::UnsupportedSchemaKeyword { .. }), "{e:?}");
        let e = compile_helped_after(&schema, &opts, &tiny, Duration::ZERO, false).unwrap_err();
        assert!(matches!(e, crate::error::GrammarError::TooLarge { .. }), "{e:?}");
    }
}