//! Tests of the compiler as a whole: schema in, accepted and rejected texts out.

use serde_json::{json, Value};

use super::{compile, JsonSchemaOptions};
use crate::automata::{Dfa, DfaConfig};
use crate::error::GrammarError;

fn dfa(schema: Value) -> Dfa {
    compile(&schema, &JsonSchemaOptions { max_any_depth: 2, ..JsonSchemaOptions::default() }, &DfaConfig::default())
        .unwrap_or_else(|e| panic!("{schema} failed: {e}"))
}

fn accepts(d: &Dfa, text: &str) -> bool {
    let s = d.walk(d.start(), text.as_bytes());
    !s.is_dead() && d.is_accepting(s)
}

fn check(schema: Value, good: &[&str], bad: &[&str]) {
    let d = dfa(schema.clone());
    for t in good {
        assert!(accepts(&d, t), "{schema} should accept {t}");
        assert!(serde_json::from_str::<Value>(t).is_ok(), "accepted non-JSON {t}");
    }
    for t in bad {
        assert!(!accepts(&d, t), "{schema} should reject {t}");
    }
}

fn error(schema: Value) -> GrammarError {
    match compile(&schema, &JsonSchemaOptions::default(), &DfaConfig::default()) {
        Ok(_) => panic!("{schema} should fail"),
        Err(e) => e,
    }
}

#[test]
fn scalars_and_types() {
    check(json!({"type": "integer"}), &["0", "-12", "7"], &["1.5", "01", "\"1\"", "1e3"]);
    check(json!({"type": ["string", "null"]}), &["\"a\"", "null"], &["1", "true"]);
    check(json!({"type": "boolean"}), &["true", "false"], &["null"]);
    check(json!({"enum": ["a", 1, null]}), &["\"a\"", "1", "null"], &["\"b\"", "2"]);
    check(json!({"const": {"a": [1, 2]}}), &["{\"a\":[1,2]}"], &["{\"a\":[1]}"]);
}

#[test]
fn unknown_keywords_are_annotations() {
    check(
        json!({"type": "object", "x-kubernetes-group-version-kind": [{"a": 1}], "readonly": true, "id": "foo",
               "properties": {"a": {"type": "string", "example": "x", "_format": "int"}}, "required": ["a"]}),
        &["{\"a\":\"x\"}"],
        &["{}"],
    );
}

#[test]
fn objects_declared_order_required_optional() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
                   "required": ["b"]});
    check(s, &["{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\",\"c\":null}", "{\"b\":\"\",\"c\":null}"],
          &["{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":\"x\",\"d\":1}"]);
}

#[test]
fn additional_properties_schema_and_patterns() {
    let s = json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                   "additionalProperties": {"type": "boolean"}});
    check(s, &["{\"id\":1}", "{\"id\":1,\"x\":true,\"y\":false}"], &["{\"id\":1,\"x\":1}", "{\"id\":1,\"id\":true}"]);
    let s = json!({"type": "object", "patternProperties": {"^n": {"type": "integer"}}, "additionalProperties": false});
    let d = dfa(s);
    assert!(accepts(&d, "{}"));
    let _ = d;
}

#[test]
fn required_names_not_declared_follow_additional_properties() {
    check(json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "z"],
                 "additionalProperties": {"type": "string"}}),
          &["{\"a\":1,\"z\":\"s\"}"], &["{\"a\":1}", "{\"a\":1,\"z\":1}"]);
    check(json!({"type": "object", "required": ["k"]}), &["{\"k\":1}", "{\"k\":{\"x\":null}}"], &["{}"]);
}

#[test]
fn properties_beside_any_of_and_one_of() {
    let s = json!({"type": "object", "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
                   "required": ["kind"],
                   "anyOf": [{"properties": {"kind": {"const": "a"}}}, {"required": ["n"]}]});
    check(s, &["{\"kind\":\"a\"}", "{\"kind\":\"b\",\"n\":1}", "{\"kind\":\"a\",\"n\":2}"], &["{\"kind\":\"b\"}"]);
}

#[test]
fn all_of_merges_and_intersects() {
    let s = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"properties": {"b": {"type": "string"}}, "required": ["b"]},
        {"properties": {"a": {"enum": [1, 2, 3]}}}
    ]});
    check(s, &["{\"a\":1,\"b\":\"x\"}"], &["{\"a\":4,\"b\":\"x\"}", "{\"a\":1}", "{\"b\":\"x\"}"]);
    check(json!({"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 3}]}), &["\"ab\"", "\"abc\""], &["\"a\"", "\"abcd\""]);
}

#[test]
fn one_of_overlap_is_subtracted() {
    // number vs integer: oneOf means a number that is not an integer, or an integer that is not
    // a number (none).
    let s = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
    check(s, &["1.5", "-0.25"], &["1", "0", "2.0"]);
    let s = json!({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 2}]});
    check(s, &["\"a\"", "\"\"", "\"abcd\""], &["\"ab\"", "\"abc\""]);
}

#[test]
fn not_and_if_then_else() {
    check(json!({"type": "integer", "not": {"enum": [1, 2]}}), &["0", "3"], &["1", "2"]);
    check(json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                 "not": {"required": ["a"]}}), &["{}", "{\"b\":1}"], &["{\"a\":1}"]);
    let s = json!({"type": "integer", "if": {"enum": [1, 2, 3]}, "then": {"enum": [1]}, "else": {"enum": [5, 6]}});
    check(s, &["1", "5", "6"], &["2", "3", "4"]);
}

#[test]
fn dependencies_split() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "dependentRequired": {"a": ["b"]}});
    check(s, &["{}", "{\"b\":1}", "{\"a\":1,\"b\":2}"], &["{\"a\":1}"]);
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "dependencies": {"a": {"properties": {"b": {"const": 7}}, "required": ["b"]}}});
    check(s, &["{}", "{\"a\":1,\"b\":7}", "{\"b\":3}"], &["{\"a\":1,\"b\":3}", "{\"a\":1}"]);
}

#[test]
fn recursion_unrolls_and_the_deepest_level_stops() {
    let tree = json!({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
                      "$ref": "#/$defs/node"});
    check(tree, &["{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}"], &["{\"kids\":[]}"]);
    // A required recursive property has no finite expansion.
    let endless = json!({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}},
                         "$ref": "#/$defs/n"});
    assert!(matches!(error(endless), GrammarError::EmptyLanguage { .. }));
}

#[test]
fn arrays_tuples_and_counts() {
    check(json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false}),
          &["[]", "[1]", "[1,\"a\"]"], &["[\"a\"]", "[1,\"a\",2]"]);
    check(json!({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "null"}}),
          &["[1,null,null]"], &["[1,2]"]);
    check(json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}),
          &["[1,2]", "[1,2,3]"], &["[1]", "[1,2,3,4]"]);
    check(json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 5}}),
          &["[5]", "[5,1]"], &["[]", "[1]"]);
    check(json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true}),
          &["[]", "[\"a\"]", "[\"a\",\"c\"]"], &["[\"a\",\"a\"]"]);
}

#[test]
fn references_and_draft_readings() {
    let d7 = json!({"$schema": "http://json-schema.org/draft-07/schema#",
                    "definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s", "maxLength": 1});
    check(d7, &["\"abc\""], &["1"]);
    let d2020 = json!({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 1});
    check(d2020, &["\"a\""], &["\"abc\""]);
    let ids = json!({"$id": "http://x.com/root", "$defs": {"a": {"$id": "a.json", "type": "integer"}},
                     "properties": {"x": {"$ref": "a.json"}}, "required": ["x"], "type": "object"});
    check(ids, &["{\"x\":1}"], &["{\"x\":\"a\"}"]);
}

#[test]
fn errors_name_the_keyword_and_place() {
    match error(json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 2})) {
        GrammarError::UnsupportedSchemaKeyword { keyword, path, .. } => {
            assert_eq!(keyword, "uniqueItems");
            assert_eq!(path, "#");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(error(json!({"$ref": "http://elsewhere.com/x.json"})), GrammarError::UnsupportedSchemaKeyword { .. }));
    assert!(matches!(error(json!({"type": 5})), GrammarError::InvalidSchema { .. }));
}

#[test]
fn one_of_disjoint_through_a_name_the_context_requires() {
    // The branches set `shape` to different constants and the context requires `shape`: no
    // object satisfies two branches (JSONSchemaBench Glaiveai2K calculate_area_530837db, with
    // a draft that knows `const`).
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "required": ["shape"],
        "properties": {"shape": {"enum": ["circle", "square"]}, "radius": {"type": "number"}, "side": {"type": "number"}},
        "dependencies": {"shape": {"oneOf": [
            {"properties": {"shape": {"const": "circle"}, "radius": {"type": "number"}}},
            {"properties": {"shape": {"const": "square"}, "side": {"type": "number"}}}
        ]}}
    });
    check(schema, &[r#"{"shape":"circle","radius":1}"#, r#"{"shape":"square"}"#], &[r#"{"shape":"triangle"}"#, "{}"]);
}

#[test]
fn one_of_closed_objects_told_apart_by_their_names() {
    // `{}` satisfies both branches; an object with one of the names satisfies only one
    // (JSONSchemaBench Github_trivial o10020).
    let schema = json!({"type": "object", "oneOf": [
        {"additionalProperties": false, "properties": {"key": {"type": "string", "maxLength": 3}}},
        {"additionalProperties": false, "properties": {"keys": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}
    ]});
    check(schema, &[r#"{"key":"ab"}"#, r#"{"keys":["a"]}"#, r#"{"keys":[]}"#], &["{}", r#"{"key":"a","keys":[]}"#]);
}

#[test]
fn untyped_schema_whose_object_keywords_admit_nothing_writes_other_types() {
    // No `type`: `required` only applies to objects, and no object can hold the undeclared
    // required name; every non-object is valid (JSONSchemaBench Github_hard o10346).
    let schema = json!({"required": ["id"], "properties": {"name": {"type": "string"}}, "additionalProperties": false});
    check(schema, &["null", "true", "\"x\"", "1", "[]"], &["{}", r#"{"id":"a"}"#]);
}

#[test]
fn const_separates_one_of_branches_without_a_draft() {
    // Draft 4 ignores `const`, but a schema that uses it is not a draft 4 schema: without
    // `$schema` it is read as draft 6 and later (JSONSchemaBench Glaiveai2K
    // calculate_area_530837db, once refused as empty).
    let branches = json!([
        {"properties": {"shape": {"const": "circle"}, "radius": {"type": "number"}}},
        {"properties": {"shape": {"const": "square"}, "side": {"type": "number"}}}
    ]);
    let good = [r#"{"shape":"circle"}"#, r#"{"shape":"square","side":2}"#];
    let bad = [r#"{"shape":"circle","side":2}"#, r#"{"shape":"triangle"}"#];
    let untyped = json!({"type": "object", "required": ["shape"], "oneOf": branches.clone()});
    check(untyped, &good, &bad);
    let declared = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": ["shape"], "oneOf": branches.clone()});
    check(declared, &good, &bad);
    // Declared draft 4 reads `const` as an annotation: the branches overlap everywhere.
    let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["shape"], "oneOf": branches});
    assert!(matches!(error(draft4), GrammarError::EmptyLanguage { .. }));
}

#[test]
fn too_deep_a_schema_drops_the_optional_part_below_the_limit() {
    // 80 levels of optional nested objects: past the nesting limit the property is left out
    // (as a recursion cut would), so the schema still compiles.
    let mut schema = json!({"type": "string"});
    for _ in 0..80 {
        schema = json!({"type": "object", "properties": {"a": schema}, "additionalProperties": false});
    }
    check(schema.clone(), &["{}", r#"{"a":{}}"#, r#"{"a":{"a":{}}}"#], &[r#"{"b":1}"#]);
    // Required all the way down, nothing is left.
    let mut required = json!({"type": "string"});
    for _ in 0..80 {
        required = json!({"type": "object", "properties": {"a": required}, "required": ["a"]});
    }
    assert!(matches!(error(required), GrammarError::EmptyLanguage { .. }));
}

#[test]
fn json_schema_test_suite_false_positives_stay_fixed() {
    // properties and a matching patternProperties apply together (properties.json).
    let schema = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {"foo": {"type": "array", "maxItems": 3}}, "patternProperties": {"f.o": {"minItems": 2}},
        "additionalProperties": {"type": "integer"}});
    check(schema, &[r#"{"foo":[1,2]}"#], &[r#"{"foo":[1]}"#]);
    // uniqueItems beside a tuple: never two positions that could be equal (uniqueItems.json).
    let schema = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
        "prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "uniqueItems": true});
    check(schema, &["[]", "[true]"], &["[false,false]", "[true,true]"]);
    // unevaluatedProperties beside schemas that may evaluate members, and dynamic references,
    // are refused (unevaluatedProperties.json, dynamicRef.json).
    for schema in [
        json!({"allOf": [{"properties": {"foo": true}}, {"unevaluatedProperties": false}]}),
        json!({"$defs": {"A": {"unevaluatedProperties": false}}, "properties": {"p": {"type": "string"}}, "$ref": "#/$defs/A"}),
        json!({"$defs": {"a": {"$dynamicAnchor": "x", "type": "string"}}, "$dynamicRef": "#x"}),
    ] {
        assert!(matches!(error(schema.clone()), GrammarError::UnsupportedSchemaKeyword { .. }), "{schema}");
    }
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

/// A schema whose exact automaton is past a (small) state limit: four levels of objects, each
/// with four optional members of the next level's type, the last level a string.
fn wide_nested_schema() -> Value {
    nested_schema(4, &["p", "q", "r", "s"], json!({"type": "string", "pattern": "^[a-z]{1,6}$"}))
}

#[test]
fn past_the_state_limit_deep_optional_members_are_pruned() {
    let schema = wide_nested_schema();
    let opts = JsonSchemaOptions::default();
    let exact = compile(&schema, &opts, &DfaConfig::default()).expect("fits the default limit");
    let small = DfaConfig { max_states: exact.num_states() / 3, ..DfaConfig::default() };
    let d = compile(&schema, &opts, &small).expect("a pruned automaton fits");
    assert!(d.num_states() <= small.max_states);
    let required_only = r#"{"p":{"p":{"p":{"p":"ab"}}}}"#;
    let shallow_optional = r#"{"p":{"p":{"p":{"p":"ab"}}},"q":{"p":{"p":{"p":"z"}}}}"#;
    let deep_optional = r#"{"p":{"p":{"p":{"p":"ab","s":"cd"}}}}"#;
    for t in [required_only, shallow_optional, deep_optional] {
        assert!(accepts(&exact, t), "the exact automaton accepts {t}");
    }
    // Sound: the required members stay; optional ones are kept near the root only.
    assert!(accepts(&d, required_only));
    assert!(accepts(&d, shallow_optional));
    assert!(!accepts(&d, deep_optional));
    // Still exact where it keeps anything: the pattern and the required member are enforced.
    assert!(!accepts(&d, r#"{"p":{"p":{"p":{"p":"AB"}}}}"#));
    assert!(!accepts(&d, r#"{"q":{"p":{"p":{"p":"z"}}}}"#));
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

/// Six levels of objects with two members each, down to a string whose pattern's DFA is much
/// larger than its NFA: attempts fail on DFA states (not on the NFA estimate), so the ladder
/// learns from them. Under an eighth and a twelfth of the exact size, depth 3 is skipped as
/// predicted too large (it would have 742 states).
fn blowup_nested_schema() -> Value {
    nested_schema(6, &["p", "q"], json!({"type": "string", "pattern": "^[ab]*a[ab]{5}$"}))
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
        let (want, want_text) = compile_helped_after(&schema, &in_turn, &config, Duration::ZERO).unwrap();
        assert_eq!(divisor == 1, want_text.is_none(), "divisor {divisor}: {want_text:?}");
        for threads in [2, 4, 8] {
            let opts = JsonSchemaOptions { threads, ..JsonSchemaOptions::default() };
            let (got, got_text) = compile_helped_after(&schema, &opts, &config, Duration::ZERO).unwrap();
            assert_eq!((got.num_states(), &got_text), (want.num_states(), &want_text), "divisor {divisor}, {threads} threads");
        }
    }
    // A refusal no restriction mends is the answer too, and so is a size error past the last.
    let refused = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=a)b"}}, "required": ["a"]});
    let tiny = DfaConfig { max_states: 3, ..DfaConfig::default() };
    for threads in [1, 4] {
        let opts = JsonSchemaOptions { threads, ..JsonSchemaOptions::default() };
        let e = compile_helped_after(&refused, &opts, &DfaConfig::default(), Duration::ZERO).unwrap_err();
        assert!(matches!(e, crate::error::GrammarError::UnsupportedSchemaKeyword { .. }), "{e:?}");
        let e = compile_helped_after(&schema, &opts, &tiny, Duration::ZERO).unwrap_err();
        assert!(matches!(e, crate::error::GrammarError::TooLarge { .. }), "{e:?}");
    }
}

#[test]
fn leaves_built_once_are_reused_only_under_the_same_facts() {
    let num = |min: i64| json!({"type": "number", "multipleOf": 0.5, "minimum": min});
    let string = |max: u64| json!({"type": "string", "maxLength": max});
    let schema = json!({"type": "object", "required": ["a", "b", "c", "d", "e"], "additionalProperties": false,
        "properties": {"a": num(0), "b": num(1), "c": string(2), "d": string(3), "e": num(0)}});
    check(
        schema,
        &[r#"{"a":0,"b":1.5,"c":"xy","d":"xyz","e":2.5}"#],
        &[
            r#"{"a":0,"b":0.5,"c":"xy","d":"xyz","e":2.5}"#,  // b below its own minimum
            r#"{"a":0,"b":1.5,"c":"xyz","d":"xyz","e":2.5}"#, // c past its own maxLength
            r#"{"a":0,"b":1.5,"c":"xy","d":"xyz","e":0.3}"#,  // e shares a's facts
        ],
    );
}

#[test]
fn a_recursive_definition_is_compiled_once_per_depth() {
    // Three references to `e` per level and six alternatives: compiled anew at each use, the
    // levels would split into 6 + 3 × (6 + 3 × ...) cases, past the limit of 512 at depth 5.
    let schema = json!({"$defs": {"e": {"anyOf": [
        {"type": "integer"}, {"type": "string", "maxLength": 2}, {"type": "null"}, {"type": "boolean"},
        {"type": "object", "properties": {"l": {"$ref": "#/$defs/e"}, "r": {"$ref": "#/$defs/e"}}, "additionalProperties": false},
        {"type": "array", "items": {"$ref": "#/$defs/e"}, "maxItems": 2}]}},
        "$ref": "#/$defs/e"});
    let opts = JsonSchemaOptions { max_recursion_depth: 5, max_any_depth: 2, ..JsonSchemaOptions::default() };
    let d = compile(&schema, &opts, &DfaConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    let deep = r#"{"l":{"r":[{"l":"ab"},null]},"r":true}"#;
    for good in ["1", "[]", r#"{"l":"x"}"#, deep] {
        assert!(accepts(&d, good), "{good}");
    }
    for bad in [r#"{"x":1}"#, "[1,2,3]", r#""abc""#, r#"{"l":{"l":{"l":{"l":{"l":{"l":1}}}}}}"#] {
        assert!(!accepts(&d, bad), "{bad}");
    }
}

#[test]
fn integer_enums_follow_the_dialects_integers() {
    // Draft 4 does not count `1.0` as an integer; an enum's literal must not bring it back.
    let d4 = "http://json-schema.org/draft-04/schema#";
    check(json!({"$schema": d4, "type": "integer", "enum": [1, 2]}), &["1", "2"], &["1.0", "2.00", "3"]);
    check(json!({"$schema": d4, "anyOf": [{"type": "null"}, {"type": "integer", "enum": [0]}]}), &["0", "-0", "null"], &["0.0", "-0.0"]);
    check(json!({"$schema": d4, "type": "number", "enum": [1]}), &["1", "1.0"], &["2"]);
    // From 2019-09 on, `1.0` is the integer 1.
    let d2020 = "https://json-schema.org/draft/2020-12/schema";
    check(json!({"$schema": d2020, "type": "integer", "enum": [1, 2]}), &["1", "1.0", "2"], &["3", "1.5"]);
}

#[test]
fn extra_names_from_a_short_list_are_written_once_each() {
    // The JSONSchemaBench case: propertyNames an enum, values from additionalProperties.
    let s = json!({"type": "object", "propertyNames": {"enum": ["b", "a", "c"]}, "additionalProperties": {"type": "integer"}});
    check(s.clone(), &["{}", "{\"a\":1}", "{\"a\":1,\"b\":2,\"c\":3}", "{\"b\":2,\"c\":3}"],
          &["{\"a\":1,\"a\":2}", "{\"a\":1,\"b\":2,\"a\":3}", "{\"d\":1}", "{\"a\":\"x\"}"]);
    // Listed names are optional members, so minProperties past one extra is now exact.
    let mut with_min = s;
    with_min["minProperties"] = json!(2);
    check(with_min, &["{\"a\":1,\"b\":2}", "{\"a\":1,\"b\":2,\"c\":3}"], &["{}", "{\"c\":1}", "{\"a\":1,\"a\":2}"]);
    // Finite pattern regions, beside declared names (never repeated as extras).
    check(json!({"type": "object", "properties": {"y": {"type": "null"}},
                 "patternProperties": {"^x[0-2]$": {"type": "boolean"}}, "additionalProperties": false}),
          &["{\"y\":null}", "{\"x0\":true,\"x2\":false}", "{\"y\":null,\"x0\":true,\"x1\":false}"],
          &["{\"x0\":true,\"x0\":false}", "{\"y\":null,\"x1\":true,\"x1\":true}", "{\"y\":null,\"y\":null}", "{\"x3\":true}"]);
    // A free object whose names are listed.
    check(json!({"type": "object", "propertyNames": {"const": "k"}}), &["{}", "{\"k\":null}"], &["{\"k\":1,\"k\":2}"]);
    // More members than the listed names: a typed error, never a name written twice.
    let few = json!({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {"type": "null"}, "minProperties": 3});
    assert!(matches!(error(few), GrammarError::UnsupportedSchemaKeyword { ref keyword, .. } if keyword == "minProperties"));
    // Unbounded names are still repeated (the known restriction).
    check(json!({"type": "object", "additionalProperties": {"type": "integer"}}), &["{\"a\":1,\"b\":2,\"c\":3}"], &["{\"a\":\"x\"}"]);
}

#[test]
fn a_pattern_in_two_members_of_all_of_applies_both_schemas_once() {
    // Found in review: each member's copy of the pattern made a region of its own, so a name
    // was listed twice and its value had to satisfy only one of the two schemas.
    let s = json!({"allOf": [
        {"type": "object", "patternProperties": {"^x[0-2]$": {"type": "integer"}}, "additionalProperties": false},
        {"type": "object", "patternProperties": {"^x[0-2]$": {"minimum": 5}}, "additionalProperties": false}]});
    check(s, &["{}", "{\"x0\":7}", "{\"x0\":7,\"x2\":5}"], &["{\"x0\":1}", "{\"x0\":7,\"x0\":8}", "{\"x0\":5.5}"]);
}
