//! The JSON Schema compiler as a whole: schema in, accepted and rejected texts out. Tables of
//! cases live in `data/json_schema_cases.json`, one table per test, run by [`check_cases`].

use std::sync::OnceLock;

use grammar_engine::{compile_json_schema, Dfa, DfaConfig, GrammarError, JsonSchemaOptions};
use serde_json::{json, Value};

fn dfa(schema: Value) -> Dfa {
    compile_json_schema(&schema, &JsonSchemaOptions { max_any_depth: 2, ..JsonSchemaOptions::default() }, &DfaConfig::default())
        .unwrap_or_else(|e| panic!("{schema} failed: {e}"))
}

fn accepts(d: &Dfa, text: &str) -> bool {
    d.accepts(text.as_bytes())
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

/// The case tables of `tests/data/json_schema_cases.json`, by test name.
fn case_tables() -> &'static serde_json::Map<String, Value> {
    static TABLES: OnceLock<serde_json::Map<String, Value>> = OnceLock::new();
    TABLES.get_or_init(|| {
        let text = include_str!("data/json_schema_cases.json");
        match serde_json::from_str(text) {
            Ok(Value::Object(tables)) => tables,
            other => panic!("json_schema_cases.json is not an object of tables: {other:?}"),
        }
    })
}

/// Runs [`check`] on every case of the table named `name`: `{"schema": ..., "accept": [...],
/// "reject": [...]}` (a `note` says what the case is about).
fn check_cases(name: &str) {
    let Some(Value::Array(cases)) = case_tables().get(name) else { panic!("no case table {name}") };
    assert!(!cases.is_empty(), "case table {name} is empty");
    let texts = |case: &Value, key: &str| -> Vec<String> {
        case[key].as_array().unwrap_or_else(|| panic!("{name}: {key} is not a list")).iter().map(|t| t.as_str().expect("a text").to_string()).collect()
    };
    for case in cases {
        let (good, bad) = (texts(case, "accept"), texts(case, "reject"));
        let good: Vec<&str> = good.iter().map(String::as_str).collect();
        let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
        check(case["schema"].clone(), &good, &bad);
    }
}

fn error(schema: Value) -> GrammarError {
    match compile_json_schema(&schema, &JsonSchemaOptions::default(), &DfaConfig::default()) {
        Ok(_) => panic!("{schema} should fail"),
        Err(e) => e,
    }
}

#[test]
fn scalars_and_types() {
    check_cases("scalars_and_types");
}

#[test]
fn unknown_keywords_are_annotations() {
    check_cases("unknown_keywords_are_annotations");
}

#[test]
fn objects_declared_order_required_optional() {
    check_cases("objects_declared_order_required_optional");
}

#[test]
fn additional_properties_schema_and_patterns() {
    check_cases("additional_properties_schema_and_patterns");
    let s = json!({"type": "object", "patternProperties": {"^n": {"type": "integer"}}, "additionalProperties": false});
    let d = dfa(s);
    assert!(accepts(&d, "{}"));
    let _ = d;
}

#[test]
fn required_names_not_declared_follow_additional_properties() {
    check_cases("required_names_not_declared_follow_additional_properties");
}

#[test]
fn properties_beside_any_of_and_one_of() {
    check_cases("properties_beside_any_of_and_one_of");
}

#[test]
fn all_of_merges_and_intersects() {
    check_cases("all_of_merges_and_intersects");
}

#[test]
fn one_of_overlap_is_subtracted() {
    check_cases("one_of_overlap_is_subtracted");
}

#[test]
fn not_and_if_then_else() {
    check_cases("not_and_if_then_else");
}

#[test]
fn dependencies_split() {
    check_cases("dependencies_split");
}

#[test]
fn recursion_unrolls_and_the_deepest_level_stops() {
    check_cases("recursion_unrolls_and_the_deepest_level_stops");
    // A required recursive property has no finite expansion.
    let endless = json!({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}},
                         "$ref": "#/$defs/n"});
    assert!(matches!(error(endless), GrammarError::EmptyLanguage { .. }));
}

#[test]
fn arrays_tuples_and_counts() {
    check_cases("arrays_tuples_and_counts");
}

#[test]
fn references_and_draft_readings() {
    check_cases("references_and_draft_readings");
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
    check_cases("one_of_disjoint_through_a_name_the_context_requires");
}

#[test]
fn one_of_closed_objects_told_apart_by_their_names() {
    check_cases("one_of_closed_objects_told_apart_by_their_names");
}

#[test]
fn untyped_schema_whose_object_keywords_admit_nothing_writes_other_types() {
    check_cases("untyped_schema_whose_object_keywords_admit_nothing_writes_other_types");
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
    // Declared draft 4 reads `const` as an annotation: the branches overlap everywhere. The
    // compiler approximates object branches, so it cannot prove the schema empty: it refuses
    // naming the keyword instead of claiming that no value exists.
    let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": ["shape"], "oneOf": branches});
    match error(draft4) {
        GrammarError::UnsupportedSchemaKeyword { keyword, path, .. } => assert_eq!((keyword.as_str(), path.as_str()), ("oneOf", "#")),
        other => panic!("{other}"),
    }
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
    check_cases("json_schema_test_suite_false_positives_stay_fixed");
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
    let exact = compile_json_schema(&schema, &opts, &DfaConfig::default()).expect("fits the default limit");
    let small = DfaConfig { max_states: exact.num_states() / 3, ..DfaConfig::default() };
    let d = compile_json_schema(&schema, &opts, &small).expect("a pruned automaton fits");
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
    // The leaves are small (an enum for the numbers): the test is about how often `e` is
    // compiled, and the integer type's language (exponent forms, integers of any length) would
    // make the exact grammar too large at this depth.
    let schema = json!({"$defs": {"e": {"anyOf": [
        {"enum": [0, 1, 2]}, {"type": "string", "maxLength": 2}, {"type": "null"}, {"type": "boolean"},
        {"type": "object", "properties": {"l": {"$ref": "#/$defs/e"}, "r": {"$ref": "#/$defs/e"}}, "additionalProperties": false},
        {"type": "array", "items": {"$ref": "#/$defs/e"}, "maxItems": 2}]}},
        "$ref": "#/$defs/e"});
    let opts = JsonSchemaOptions { max_recursion_depth: 5, max_any_depth: 2, ..JsonSchemaOptions::default() };
    let d = compile_json_schema(&schema, &opts, &DfaConfig::default()).unwrap_or_else(|e| panic!("{e}"));
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
    check_cases("extra_names_from_a_short_list_are_written_once_each");
    // More members than the listed names: a typed error, never a name written twice.
    let few = json!({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {"type": "null"}, "minProperties": 3});
    assert!(matches!(error(few), GrammarError::UnsupportedSchemaKeyword { ref keyword, .. } if keyword == "minProperties"));
}

#[test]
fn a_pattern_in_two_members_of_all_of_applies_both_schemas_once() {
    check_cases("a_pattern_in_two_members_of_all_of_applies_both_schemas_once");
}

#[test]
fn unique_items_keep_to_the_element_language_and_its_spellings() {
    // Draft 4 integers 1..3 are three texts; `1.0` equals 1 but is no draft 4 integer.
    let d4 = "http://json-schema.org/draft-04/schema#";
    check(
        json!({"$schema": d4, "type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 3}, "uniqueItems": true, "minItems": 2}),
        &["[1,2]", "[1,2,3]"],
        &["[1.0,2]", "[1,1]", "[1]", "[1e0,2]"],
    );
    // String values have several spellings (`héllo` as `h\u00e9llo` or `h\u00E9llo`); the enum
    // is still two values, each used once.
    check(
        json!({"type": "array", "items": {"enum": ["héllo", "wörld"]}, "uniqueItems": true, "minItems": 2}),
        &[r#"["héllo","wörld"]"#, r#"["h\u00e9llo","w\u00F6rld"]"#],
        &[r#"["héllo","h\u00e9llo"]"#, r#"["héllo","héllo"]"#, r#"["héllo"]"#],
    );
    // Numbers too (`1`, `1.0`, `1e0`): three values, each used once (in list order), in any of
    // their spellings.
    check(
        json!({"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": true, "minItems": 2}),
        &["[1,2,3]", "[1.0,2e0]", "[1,2.0,3]"],
        &["[1,1.0]", "[2,2]", "[1]"],
    );
}

#[test]
fn exponent_ranges_are_kept_apart_by_their_bounds() {
    // Exponent forms are built once per range and kept: schemas compiled one after another
    // with different bounds each get their own range, and the same bounds the same language.
    for _ in 0..2 {
        check(json!({"type": "number", "minimum": 0}), &["1e0", "5E2", "0e5", "2.5e-3"], &["-1e0", "-2.5e-3"]);
        check(json!({"type": "number", "minimum": 5}), &["5e0", "1e3", "0.5e1"], &["1e0", "4.9e0", "0e5"]);
        check(json!({"type": "number", "exclusiveMaximum": 5}), &["4.9e0", "-1e3"], &["5e0", "0.5e1", "1e3"]);
        check(json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "integer", "minimum": 0}), &["1e3", "150e-1"], &["1.5e0", "15e-1", "-1e3"]);
    }
}
