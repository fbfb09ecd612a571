//! JSON Schemas compiled as rules: recursive references nest without a depth limit, and a large
//! definition referenced from many places is shared rather than copied. Both must still be
//! completable grammars over a real-looking vocabulary (no marker byte may leak into a DFA).

use std::sync::Arc;

use grammar_engine::{Family, Grammar, GrammarConfig, JsonSchemaOptions, TokenId, TokenSpec, Vocabulary};
use serde_json::{json, Value};

/// Every printable ASCII character as a token, plus a few multi-byte ones.
fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (32u8..127).map(|b| vec![b]).collect();
    for t in ["{\"", "\":", "\",", "[{", "}]", "null", "true", "false", "\n"] {
        toks.push(t.as_bytes().to_vec());
    }
    let n = toks.len();
    let mut specs: Vec<Option<TokenSpec>> = toks.into_iter().map(|bytes| Some(TokenSpec { bytes, special: false })).collect();
    specs.push(Some(TokenSpec { bytes: b"</s>".to_vec(), special: true }));
    Arc::new(Vocabulary::new(specs, vec![TokenId::new(n as u32)], Family::Raw, None).unwrap())
}

fn grammar(schema: &Value) -> Grammar {
    Grammar::from_json_schema(vocab(), schema, &JsonSchemaOptions::default(), &GrammarConfig::default())
        .unwrap_or_else(|e| panic!("{schema} failed: {e}"))
}

fn tree_schema() -> Value {
    json!({
        "$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
        }, "required": ["name", "children"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    })
}

/// A tree `depth` levels deep, in the compact form.
fn tree(depth: usize) -> String {
    if depth == 0 {
        return r#"{"name":"x","children":[]}"#.to_string();
    }
    format!(r#"{{"name":"x","children":[{},{}]}}"#, tree(depth - 1), tree(depth - 1))
}

#[test]
fn a_recursive_schema_nests_past_any_unrolled_depth() {
    let g = grammar(&tree_schema());
    assert!(g.is_pushdown());
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for depth in [0, 1, 4, 8] {
        let text = tree(depth);
        assert_eq!(g.check_text(text.as_bytes()), Ok(()), "depth {depth}");
    }
    // A chain twelve levels deep, far past the unrolled compile's default depth.
    let mut chain = r#"{"name":"x","children":[]}"#.to_string();
    for _ in 0..12 {
        chain = format!(r#"{{"name":"y","children":[{chain}]}}"#);
    }
    assert_eq!(g.check_text(chain.as_bytes()), Ok(()));
    // Wrong where the schema says so, however deep.
    let bad = chain.replacen(r#""name":"x""#, r#""name":"long""#, 1);
    let at = g.check_text(bad.as_bytes()).unwrap_err();
    assert_eq!(at, bad.find("long").unwrap() + 3, "the fourth character of the name is the first wrong byte");
    assert!(g.check_text(chain[..chain.len() - 1].as_bytes()).is_err(), "an unclosed tree is not whole");
    assert!(g.check_text(br#"{"name":"x","children":[{"name":"x"}]}"#).is_err(), "a child without children");
}

#[test]
fn a_large_definition_used_in_many_places_compiles_completable() {
    // Each use of `big` is a conjunction language over a thousand NFA states: it becomes a rule
    // of its own, shared by the five places that use it.
    let mut props = serde_json::Map::new();
    for i in 0..24 {
        props.insert(format!("field_{i}"), json!({"type": "string", "enum": [format!("alpha_{i}"), format!("beta_{i}")]}));
    }
    let big = json!({"type": "object", "properties": props, "additionalProperties": false});
    let schema = json!({
        "$defs": {"big": big},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/big"}, "b": {"$ref": "#/$defs/big"}, "c": {"$ref": "#/$defs/big"},
            "d": {"allOf": [{"$ref": "#/$defs/big"}, {"required": ["field_0"]}]},
            "e": {"type": "array", "items": {"$ref": "#/$defs/big"}}
        },
        "required": ["a", "e"],
        "additionalProperties": false
    });
    let g = grammar(&schema);
    for text in [
        r#"{"a":{},"e":[]}"#,
        r#"{"a":{"field_3":"beta_3"},"b":{"field_0":"alpha_0","field_23":"alpha_23"},"d":{"field_0":"beta_0"},"e":[{},{"field_1":"alpha_1"}]}"#,
    ] {
        assert_eq!(g.check_text(text.as_bytes()), Ok(()), "{text}");
    }
    for text in [r#"{"a":{"field_3":"alpha_4"},"e":[]}"#, r#"{"a":{},"d":{},"e":[]}"#, r#"{"e":[]}"#] {
        assert!(g.check_text(text.as_bytes()).is_err(), "{text}");
    }
}

#[test]
fn an_unconstrained_value_nests_without_a_depth_limit() {
    let g = grammar(&json!({"type": "object", "properties": {"data": {}}, "required": ["data"], "additionalProperties": false}));
    assert!(g.restriction().is_none());
    let deep = format!(r#"{{"data":{}1{}}}"#, "[".repeat(20), "]".repeat(20));
    assert_eq!(g.check_text(deep.as_bytes()), Ok(()));
    let objects = format!(r#"{{"data":{}null{}}}"#, r#"{"k":"#.repeat(15), "}".repeat(15));
    assert_eq!(g.check_text(objects.as_bytes()), Ok(()));
    let unbalanced = format!(r#"{{"data":{}1{}}}"#, "[".repeat(20), "]".repeat(19));
    assert!(g.check_text(unbalanced.as_bytes()).is_err());
}

/// A string of `n` characters mixing plain and escaped ones (the test vocabulary is ASCII), as
/// compact JSON.
fn string_of(n: usize) -> String {
    let chars = ['a', '\\', '\n', '"', 'z'];
    let s: String = (0..n).map(|i| chars[i % chars.len()]).collect();
    serde_json::to_string(&s).unwrap()
}

#[test]
fn a_long_max_length_is_exact_at_its_bounds() {
    for (min, max) in [(0usize, 65_535usize), (200, 1_000), (130, 130)] {
        let schema = json!({"type": "string", "minLength": min, "maxLength": max});
        let g = grammar(&schema);
        assert!(g.restriction().is_none(), "{schema}: restricted: {:?}", g.restriction());
        for n in [0, 1, 63, 64, 65, 127, 128, 129, 130, 199, 200, 201, 999, 1_000, 1_001, 65_535, 65_536] {
            let ok = (min..=max).contains(&n);
            assert_eq!(g.check_text(string_of(n).as_bytes()).is_ok(), ok, "{schema}: {n} characters");
        }
    }
}

#[test]
fn a_long_max_items_is_exact_at_its_bounds() {
    let schema = json!({"type": "array", "items": {"type": "integer"}, "minItems": 100, "maxItems": 30_000});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for n in [0usize, 99, 100, 101, 164, 1_000, 29_999, 30_000, 30_001] {
        let text = serde_json::to_string(&(0..n as i64).collect::<Vec<_>>()).unwrap();
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), (100..=30_000).contains(&n), "{n} items");
    }
    // Elements keep their own schema inside every chunk.
    let mut items: Vec<Value> = (0..500).map(|i| json!(i)).collect();
    items[321] = json!("x");
    assert!(g.check_text(serde_json::to_string(&items).unwrap().as_bytes()).is_err());
}

#[test]
fn long_strings_inside_objects_share_their_chunks_and_close_in_time() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 2_000},
        "b": {"type": "string", "maxLength": 5_000}
    }, "required": ["a", "b"], "additionalProperties": false});
    let g = grammar(&schema);
    assert!(g.restriction().is_none() && g.is_pushdown());
    let text = format!(r#"{{"a":{},"b":{}}}"#, string_of(2_000), string_of(5_000));
    assert_eq!(g.check_text(text.as_bytes()), Ok(()));
    let over = format!(r#"{{"a":{},"b":{}}}"#, string_of(2_001), string_of(10));
    assert!(g.check_text(over.as_bytes()).is_err());
    // Halfway through a long string, the nearest end is a closing quote and brace away.
    let mut s = g.initial_state();
    for &b in br#"{"a":"xyz"#.iter() {
        let tok = TokenId::new(u32::from(b) - 32);
        s = g.advance(s, tok).unwrap();
    }
    let close = g.min_tokens_to_accept(s).unwrap();
    assert!(close <= 10, "{close} tokens to close");
}

#[test]
fn one_of_branches_holding_rule_calls_keep_their_calls() {
    // Each branch holds an open array (a call of the any-value rule) and all three are the
    // same object: the difference that keeps `oneOf` branches apart meets rule calls, and the
    // calls must stay expressions (a DFA built over them would keep rule numbers that the
    // rule set later renumbers).
    let spec = json!({"type": "object", "properties": {"type": {"type": "string"}, "enum": {"type": "array"}}});
    let schema = json!({
        "$schema": "http://json-schema.org/draft-04/schema#",
        "definitions": {"P": {"oneOf": [{"$ref": "#/definitions/A"}, {"$ref": "#/definitions/B"}, {"$ref": "#/definitions/C"}]},
                        "A": spec.clone(), "B": spec.clone(), "C": spec},
        "properties": {"p": {"$ref": "#/definitions/P"}, "a": {"$ref": "#/definitions/A"}},
        "required": ["p", "a"]
    });
    let g = grammar(&schema);
    // Not an object: the properties do not apply.
    assert!(g.check_text(b"1").is_ok());
    // An object needs `p`, which no value can satisfy (the branches are equal).
    assert!(g.check_text(br#"{"p":{},"a":{}}"#).is_err());
}

#[test]
fn a_medium_max_items_of_large_elements_is_exact() {
    // 100 copies of an element of two counted strings would be one automaton of hundreds of
    // thousands of states: the element is called instead, once per count.
    let schema = json!({"type": "array", "maxItems": 100, "items": {"type": "object", "properties": {
        "key": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
        "value": {"type": "string", "minLength": 1, "maxLength": 255}
    }, "additionalProperties": false}});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    let item = |i: usize| format!(r#"{{"key":"{}","value":"{}"}}"#, "k".repeat(1 + i % 255), "v".repeat(255));
    for n in [0usize, 1, 17, 99, 100, 101] {
        let text = format!("[{}]", (0..n).map(item).collect::<Vec<_>>().join(","));
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), n <= 100, "{n} items");
    }
    // Each element keeps its own bounds.
    let long = format!(r#"[{},{{"value":"{}"}}]"#, item(0), "v".repeat(256));
    assert!(g.check_text(long.as_bytes()).is_err());
}

#[test]
fn a_one_of_branch_covered_by_another_is_proved_empty_not_restricted() {
    // Every value with `radius` also has `length` and `width` (the context requires them), so
    // it satisfies both branches: the second branch has no value, and dropping it is exact.
    let schema = json!({"type": "object", "properties": {
        "length": {"type": "number"}, "width": {"type": "number"}, "radius": {"type": "number"}
    }, "required": ["length", "width"], "oneOf": [{"required": ["length", "width"]}, {"required": ["radius"]}]});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    assert!(g.check_text(br#"{"length":1,"width":2}"#).is_ok());
    assert!(g.check_text(br#"{"length":1,"width":2,"radius":3}"#).is_err());
    // A branch of annotations only holds every value: the other branch is empty, exactly.
    let schema = json!({"type": "string", "oneOf": [{"_format": "date-time"}, {"enum": ["first", "latest"]}]});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    assert!(g.check_text(br#""template""#).is_ok());
    assert!(g.check_text(br#""first""#).is_err());
    // Where a proof is out of reach the restriction is still told.
    let schema = json!({"type": "object", "properties": {"thing": {"oneOf": [
        {"type": "object", "properties": {"red": {"type": "string"}}},
        {"type": "object", "properties": {"blue": {"type": "string"}}}
    ]}}});
    let g = grammar(&schema);
    assert!(g.restriction().is_some_and(|r| r.contains("oneOf")), "{:?}", g.restriction());
}

#[test]
fn cases_proved_empty_or_apart_through_references_kinds_and_member_counts() {
    let exact = |schema: &Value| {
        let g = grammar(schema);
        assert!(g.restriction().is_none(), "{schema}: restricted: {:?}", g.restriction());
        g
    };
    // An untyped object schema lets every array through: an array of its values satisfies it
    // too, so the array branch has no value under `oneOf`, exactly.
    let g = exact(&json!({"$defs": {"pkg": {"required": ["name"], "properties": {"name": {"type": "string"}}}},
        "oneOf": [{"$ref": "#/$defs/pkg"}, {"type": "array", "items": {"$ref": "#/$defs/pkg"}}]}));
    assert!(g.check_text(br#"{"name":"a"}"#).is_ok());
    assert!(g.check_text(br#"[{"name":"a"}]"#).is_err());
    // `not` of a schema every value satisfies admits nothing: that branch is empty.
    let g = exact(&json!({"oneOf": [{"not": {}}, {"enum": [false]}]}));
    assert!(g.check_text(b"false").is_ok());
    assert!(g.check_text(b"true").is_err());
    // An `else` whose values all pass the condition is empty: every array passes `required`.
    let g = exact(&json!({"if": {"required": ["x"]}, "then": {"type": "object"}, "else": {"type": "array"}}));
    assert!(g.check_text(br#"{"x":1}"#).is_ok());
    assert!(g.check_text(b"[1]").is_err());
    // Apart by a required member's value against `additionalProperties`, and by member counts:
    // a repository needs two members with a string `type`, a switch one member set to `false`.
    let repository = json!({"type": "object", "required": ["type", "url"],
        "properties": {"type": {"enum": ["git", "svn"]}, "url": {"type": "string"}}});
    let switch = json!({"type": "object", "additionalProperties": {"type": "boolean", "enum": [false]},
        "minProperties": 1, "maxProperties": 1});
    let g = exact(&json!({"type": "array", "items": {"oneOf": [repository, switch]}}));
    assert!(g.check_text(br#"[{"type":"git","url":"u"},{"packagist":false}]"#).is_ok());
    assert!(g.check_text(br#"[{"packagist":true}]"#).is_err());
}

#[test]
fn optional_scalar_members_and_array_elements_tell_cases_apart_exactly() {
    // `if` on an optional member: values that fail it have the member with another value.
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"enum": ["abc", "ghi"]}
    }, "if": {"properties": {"c": {"const": "ghi"}}}, "then": {"required": ["a", "b", "c"]}, "else": {"required": ["a", "c"]}});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (text, ok) in [(r#"{"a":"x","c":"abc"}"#, true), (r#"{"a":"x","b":1,"c":"abc"}"#, true), (r#"{"a":"x","b":1,"c":"ghi"}"#, true), (r#"{"a":"x","c":"ghi"}"#, false)] {
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), ok, "{text}");
    }
    // Members before the one that decides may hold containers with brackets, commas and the
    // same name inside; only the top-level member decides.
    let schema = json!({"type": "object", "properties": {"a": {"type": "object"}, "c": {"type": "string"}},
        "required": ["a", "c"], "additionalProperties": false, "not": {"properties": {"c": {"const": "x"}}}});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (text, ok) in [(r#"{"a":{"c":"x"},"c":"y"}"#, true), (r#"{"a":{},"c":"x"}"#, false), (r#"{"a":{"k":[1,"}"]},"c":"x"}"#, false), (r#"{"a":{"c":"y"},"c":"x"}"#, false)] {
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), ok, "{text}");
    }
    // Arrays of different elements: only the empty array is in both branches.
    let schema = json!({"oneOf": [{"type": "boolean"},
        {"type": "array", "items": {"enum": ["top", "left"]}}, {"type": "array", "items": {"enum": ["vertical"]}}]});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (text, ok) in [("true", true), (r#"["top","left"]"#, true), (r#"["vertical"]"#, true), ("[]", false), (r#"["top","vertical"]"#, false)] {
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), ok, "{text}");
    }
}

#[test]
fn a_one_of_beside_a_recursive_definition_keeps_the_recursion() {
    // The branches overlap (an object may hold both `r` and `side`), so they are kept apart by
    // a difference, and each calls rules: `point` (a reference) and the rule of any value (an
    // open member). Those calls are inlined for the difference, so the tree elsewhere in the
    // schema stays a recursive rule rather than a copy unrolled a few levels.
    let schema = json!({
        "$defs": {
            "node": tree_schema()["$defs"]["node"].clone(),
            "point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                      "required": ["x", "y"], "additionalProperties": false},
        },
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/node"},
            "shape": {"oneOf": [
                {"type": "object", "properties": {"r": {"type": "integer"}, "center": {"$ref": "#/$defs/point"}}, "required": ["r"]},
                {"type": "object", "properties": {"side": {"type": "integer"}, "meta": {}}, "required": ["side"]}
            ]}
        },
        "required": ["tree", "shape"],
        "additionalProperties": false
    });
    let g = grammar(&schema);
    assert!(g.is_pushdown(), "compiled without rules");
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    let mut chain = tree(1);
    for _ in 0..12 {
        chain = format!(r#"{{"name":"y","children":[{chain}]}}"#);
    }
    let with = |shape: &str| format!(r#"{{"tree":{chain},"shape":{shape}}}"#);
    for good in [r#"{"r":1}"#, r#"{"r":1,"center":{"x":2,"y":3}}"#, r#"{"side":2,"meta":{"a":[1,"b"]}}"#, r#"{"side":2,"meta":null}"#] {
        assert_eq!(g.check_text(with(good).as_bytes()), Ok(()), "{good}");
    }
    for bad in [r#"{"r":1,"side":2}"#, r#"{"side":2,"r":1}"#, r#"{"r":1,"center":{"x":2}}"#, r#"{}"#] {
        assert!(g.check_text(with(bad).as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn a_rule_too_large_for_one_automaton_keeps_its_largest_parts_as_calls() {
    // Forty definitions of a few hundred states each, each used once: small enough to be inlined
    // where they are used, but together past a low state limit. The object that uses them all
    // keeps its largest parts as calls instead of leaving its optional members out.
    let mut defs = serde_json::Map::new();
    let mut props = serde_json::Map::new();
    for d in 0..40 {
        let mut members = serde_json::Map::new();
        for m in 0..6 {
            members.insert(format!("m{m}"), json!({"type": "string", "enum": [format!("first_{d}_{m}"), format!("second_{d}_{m}")]}));
        }
        defs.insert(format!("d{d}"), json!({"type": "object", "properties": members, "additionalProperties": false}));
        props.insert(format!("p{d}"), json!({"$ref": format!("#/$defs/d{d}")}));
    }
    let schema = json!({"$defs": defs, "type": "object", "properties": props, "additionalProperties": false});
    let mut config = GrammarConfig::default();
    config.dfa.max_states = 3_000;
    let opts = JsonSchemaOptions { allow_restriction: false, ..JsonSchemaOptions::default() };
    let g = Grammar::from_json_schema(vocab(), &schema, &opts, &config).unwrap_or_else(|e| panic!("not exact: {e}"));
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    let member = |d: usize, m: usize, which: &str| format!(r#""m{m}":"{which}_{d}_{m}""#);
    let object = |d: usize| format!("{{{}}}", (0..6).map(|m| member(d, m, if m % 2 == 0 { "first" } else { "second" })).collect::<Vec<_>>().join(","));
    let full = format!("{{{}}}", (0..40).map(|d| format!(r#""p{d}":{}"#, object(d))).collect::<Vec<_>>().join(","));
    assert_eq!(g.check_text(full.as_bytes()), Ok(()));
    assert_eq!(g.check_text(br#"{"p39":{"m5":"second_39_5"}}"#), Ok(()));
    assert!(g.check_text(br#"{"p39":{"m5":"second_38_5"}}"#).is_err(), "a value of another definition");
    assert!(g.check_text(full.replace("first_20_2", "first_20_3").as_bytes()).is_err());
}

#[test]
fn a_recursion_through_a_wrapper_schema_nests_without_a_limit() {
    // The recursive reference is a branch of an `anyOf` beside `type`, not a schema that is only
    // a reference: the conjunction met again inside itself is the call.
    let schema = json!({
        "$defs": {
            "node": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 3},
                "kids": {"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/node"}, {"$ref": "#/$defs/leaf"}]}}
            }, "required": ["name"], "additionalProperties": false},
            "leaf": {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"], "additionalProperties": false}
        },
        "$ref": "#/$defs/node"
    });
    let opts = JsonSchemaOptions { allow_restriction: false, ..JsonSchemaOptions::default() };
    let g = Grammar::from_json_schema(vocab(), &schema, &opts, &GrammarConfig::default()).unwrap_or_else(|e| panic!("not exact: {e}"));
    assert!(g.is_pushdown());
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    let mut chain = r#"{"name":"x","kids":[{"value":7}]}"#.to_string();
    for _ in 0..12 {
        chain = format!(r#"{{"name":"y","kids":[{chain},{{"value":1}}]}}"#);
    }
    assert_eq!(g.check_text(chain.as_bytes()), Ok(()));
    let bad = chain.replacen(r#"{"value":7}"#, r#"{"value":"7"}"#, 1);
    assert!(g.check_text(bad.as_bytes()).is_err(), "a leaf of the wrong type, twelve levels down");
    assert!(g.check_text(chain.replacen(r#""name":"x""#, r#""nom":"x""#, 1).as_bytes()).is_err());
}

#[test]
fn a_large_object_that_calls_a_recursive_rule_is_a_rule_of_its_own() {
    // `person` (thirty optional members) reaches `photo`, which reaches `person` again through
    // `credits`, whose members match both `properties` and `patternProperties`: each such member
    // is a conjunction compiled in place, with calls inside. Inlined into `credits` they make
    // one automaton far past a low state limit; as rules of their own they fit, exactly.
    let mut members = serde_json::Map::new();
    for i in 0..30 {
        members.insert(format!("field_{i}"), json!({"type": "string"}));
    }
    members.insert("photo".into(), json!({"$ref": "#/$defs/photo"}));
    let people = json!({"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/person"}, {"$ref": "#/$defs/ref"}]}});
    let schema = json!({
        "$defs": {
            "person": {"type": "object", "properties": members, "required": ["field_0"], "additionalProperties": false},
            "ref": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false},
            "credits": {"type": "object", "properties": {"by": people.clone(), "photos_by": people.clone()},
                        "patternProperties": {"^[a-z_]*": people}},
            "photo": {"type": "object", "properties": {"url": {"type": "string"}, "credits": {"$ref": "#/$defs/credits"}},
                      "additionalProperties": false}
        },
        "$ref": "#/$defs/photo"
    });
    let mut config = GrammarConfig::default();
    config.dfa.max_states = 4_000;
    let opts = JsonSchemaOptions { allow_restriction: false, ..JsonSchemaOptions::default() };
    let g = Grammar::from_json_schema(vocab(), &schema, &opts, &config).unwrap_or_else(|e| panic!("not exact: {e}"));
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    let mut photo = r#"{"url":"u"}"#.to_string();
    for _ in 0..6 {
        photo = format!(r#"{{"url":"u","credits":{{"by":[{{"field_0":"a","field_29":"z","photo":{photo}}},{{"id":"r"}}],"others":[]}}}}"#);
    }
    assert_eq!(g.check_text(photo.as_bytes()), Ok(()));
    assert!(g.check_text(photo.replacen(r#""field_0":"a","#, "", 1).as_bytes()).is_err(), "a person without field_0");
    assert!(g.check_text(photo.replacen(r#""others":[]"#, r#""others":[1]"#, 1).as_bytes()).is_err(), "a number for a person");
}

#[test]
fn recursion_unrolled_where_cases_are_told_apart_is_told() {
    // Both branches overlap (an object may hold `kids` and `leaf`, and the first branch writes
    // both), so they are kept apart by a difference, and one of them contains the recursion:
    // the schema is compiled as one DFA, its recursion unrolled. That is a restriction, and the
    // grammar says so.
    let schema = json!({
        "$defs": {"node": {"oneOf": [
            {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}, "meta": {},
             "leaf": {"type": "integer"}}, "required": ["kids"]},
            {"type": "object", "properties": {"leaf": {"type": "integer"}, "kids": {"type": "array", "maxItems": 0}},
             "required": ["leaf"], "additionalProperties": false}
        ]}},
        "$ref": "#/$defs/node"
    });
    let g = grammar(&schema);
    assert!(!g.is_pushdown());
    let told = g.restriction().unwrap_or_else(|| panic!("an unrolled recursion told as exact"));
    assert!(told.contains("recursion through #/$defs/node unrolled"), "{told}");
    assert!(told.contains("values the schema leaves open nested at most"), "{told}");
    for text in [r#"{"kids":[]}"#, r#"{"kids":[{"kids":[]},{"kids":[]}]}"#, r#"{"leaf":2}"#] {
        assert_eq!(g.check_text(text.as_bytes()), Ok(()), "{text}");
    }
    assert!(g.check_text(br#"{"kids":[],"leaf":1}"#).is_err(), "in both branches");
    let opts = JsonSchemaOptions { allow_restriction: false, ..JsonSchemaOptions::default() };
    assert!(Grammar::from_json_schema(vocab(), &schema, &opts, &GrammarConfig::default()).is_err(), "exact only was asked for");
}

#[test]
fn a_member_nested_in_one_branch_does_not_count_as_another_branch_member() {
    // The second branch's `leaf` is a member of the value itself; a `leaf` inside the first
    // branch's array elements must not make the first branch's values match the second.
    let schema = json!({"oneOf": [
        {"type": "object", "properties": {"kids": {"type": "array", "items": {
            "type": "object", "properties": {"leaf": {"type": "integer"}}}}}, "required": ["kids"]},
        {"type": "object", "properties": {"leaf": {"type": "integer"}}, "required": ["leaf"],
         "additionalProperties": false}
    ]});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for ok in [r#"{"kids":[{"leaf":1}]}"#, r#"{"kids":[{"leaf":1},{}]}"#, r#"{"leaf":1}"#, r#"{"kids":[]}"#] {
        assert!(g.check_text(ok.as_bytes()).is_ok(), "{ok} refused");
    }
    assert!(g.check_text(br#"{"leaf":"x"}"#).is_err());
}

#[test]
fn a_long_max_length_beside_a_pattern_of_one_run_is_exact_at_its_bounds() {
    let quoted = |s: &str| serde_json::to_string(s).unwrap();
    // A head of several lengths, then a run of one class.
    let schema = json!({"type": "string", "maxLength": 32_767,
        "pattern": "^data:image/(jpg|jpeg|png|svg\\+xml);base64,[0-9a-zA-Z+/=]*$"});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for head in ["data:image/jpg;base64,", "data:image/svg+xml;base64,"] {
        for n in [0usize, 1, 63, 64, 65, 1_000, 32_767 - head.len(), 32_768 - head.len()] {
            let text = quoted(&format!("{head}{}", "A".repeat(n)));
            assert_eq!(g.check_text(text.as_bytes()).is_ok(), head.len() + n <= 32_767, "{head} and {n} characters");
        }
    }
    assert!(g.check_text(quoted("data:image/gif;base64,AA").as_bytes()).is_err());
    assert!(g.check_text(quoted("data:image/png;base64,A-A").as_bytes()).is_err());
    // A run of any character (escaped ones count one each), with minLength.
    let schema = json!({"type": "string", "minLength": 10, "maxLength": 20_000, "pattern": "^https?://.+$"});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (rest, ok) in [(2, false), (3, true), (19_992, true), (19_993, true), (19_994, false)] {
        let text: String = (0..rest).map(|i| ['"', 'x', '\\', '~'][i % 4]).collect();
        let text = quoted(&format!("http://{text}"));
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), ok, "http:// and {rest} characters");
    }
    assert!(g.check_text(quoted("https://").as_bytes()).is_err());
    // An unanchored end: the head, then any characters.
    let schema = json!({"type": "string", "maxLength": 20_000, "pattern": "^ab"});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (n, ok) in [(0usize, true), (19_998, true), (19_999, false)] {
        assert_eq!(g.check_text(quoted(&format!("ab{}", "\\".repeat(n))).as_bytes()).is_ok(), ok, "ab and {n} characters");
    }
    assert!(g.check_text(quoted("ba").as_bytes()).is_err());
    // A tail after the run, and a tail after any characters.
    let schema = json!({"type": "string", "maxLength": 20_000, "pattern": "^[a-z_]+\\.ya?ml$"});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (name, ok) in [("a.yml", true), ("a.yaml", true), (".yml", false), ("a.json", false), ("A.yml", false)] {
        assert_eq!(g.check_text(quoted(name).as_bytes()).is_ok(), ok, "{name}");
    }
    for (n, tail, ok) in [(19_996usize, ".yml", true), (19_996, ".yaml", false), (19_995, ".yaml", true)] {
        assert_eq!(g.check_text(quoted(&format!("{}{tail}", "x".repeat(n))).as_bytes()).is_ok(), ok, "{n} and {tail}");
    }
    let schema = json!({"type": "string", "maxLength": 20_000, "pattern": "\\.ya?ml$"});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for (n, tail, ok) in [(0usize, ".yml", true), (19_996, ".yml", true), (19_996, ".yaml", false), (5, ".json", false)] {
        assert_eq!(g.check_text(quoted(&format!("{}{tail}", "\"".repeat(n))).as_bytes()).is_ok(), ok, "{n} and {tail}");
    }
}

/// `{"a": …}` nested `depth` levels around `inner`.
fn nested_a(depth: usize, inner: &str) -> String {
    (0..depth).fold(inner.to_string(), |acc, _| format!(r#"{{"a":{acc}}}"#))
}

#[test]
fn a_recursive_case_that_never_writes_a_name_the_other_side_requires_keeps_its_recursion() {
    // oneOf: the first branch writes only `a` (its objects are open, so the schemas overlap,
    // but the compact output never writes `b` beside `a`).
    let schema = json!({"oneOf": [
        {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
    ]});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    for depth in [0, 1, 3, 20] {
        let text = nested_a(depth, r#"{"b":7}"#);
        assert!(g.check_text(text.as_bytes()).is_ok(), "{text} refused");
    }
    for bad in [r#"{"a":{"b":1},"b":2}"#, r#"{"a":1}"#, r#"{"a":{}}"#] {
        assert!(g.check_text(bad.as_bytes()).is_err(), "{bad} accepted");
    }
    // not, and the else case of if: the name the negated schema or the condition requires is
    // never written.
    let schema = json!({"type": "object", "properties": {"a": {"$ref": "#"}, "c": {"type": "integer"}},
        "not": {"required": ["b"], "properties": {"b": {"const": 1}}}});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    assert!(g.check_text(nested_a(20, r#"{"c":1}"#).as_bytes()).is_ok());
    let schema = json!({"type": "object", "properties": {"a": {"$ref": "#"}},
        "if": {"required": ["b"], "properties": {"b": {"const": 1}}}, "then": {"required": ["z"]}, "else": {"maxProperties": 1}});
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    assert!(g.check_text(nested_a(20, "{}").as_bytes()).is_ok());
}

#[test]
fn a_recursive_case_that_may_write_the_other_side_names_stays_told() {
    // The first branch declares `b` too, or invites any `x…` name: not proven apart, so the
    // difference still needs the recursion unrolled, and the restriction says so.
    for extra in [json!({"properties": {"b": {"type": "integer"}}}), json!({"patternProperties": {"^x": {"type": "integer"}}})] {
        let mut first = json!({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]});
        for (k, v) in extra.as_object().unwrap() {
            match k.as_str() {
                "properties" => {
                    first["properties"]["b"] = v["b"].clone();
                }
                _ => first[k] = v.clone(),
            }
        }
        let schema = json!({"oneOf": [first, {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]});
        let g = grammar(&schema);
        assert!(g.restriction().is_some(), "{schema}: not restricted");
        assert!(g.check_text(br#"{"a":{"b":1},"b":2}"#).is_err());
    }
}

#[test]
fn a_recursion_seen_again_only_a_level_deeper_is_still_a_call() {
    // JSON-LD's shape: the root is `allOf` of two definitions, so a member named in one is
    // also an extra member of the other, and the conjunction that recurs first shows up two
    // levels down.
    let schema = json!({
        "definitions": {
            "graph": {"properties": {"@graph": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/definitions/common"}},
                {"type": "object", "$ref": "#/definitions/common"}
            ]}}},
            "common": {"properties": {"@id": {"type": "string"}},
                       "additionalProperties": {"anyOf": [{"$ref": "#/definitions/common"}]}}
        },
        "type": "object",
        "allOf": [{"$ref": "#/definitions/graph"}, {"$ref": "#/definitions/common"}]
    });
    let g = grammar(&schema);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    let deep = (0..12).fold(r#"{"@id":"x"}"#.to_string(), |acc, _| format!(r#"{{"k":{acc}}}"#));
    for text in [format!(r#"{{"@graph":{deep}}}"#), format!(r#"{{"@graph":[{deep}]}}"#), deep.clone()] {
        assert!(g.check_text(text.as_bytes()).is_ok(), "{text} refused");
    }
    assert!(g.check_text(br#"{"@graph":{"@id":1}}"#).is_err());
}

#[test]
fn formats_whose_checkers_are_known_keep_one_of_branches_apart() {
    let g = |schema: Value| grammar(&schema);
    // `host-name` is no format (an annotation): every string meets that branch, so IP
    // literals meet two branches and are out, and every other string is in, exactly.
    let schema = json!({"type": "string", "oneOf": [{"format": "host-name"}, {"format": "ipv4"}, {"format": "ipv6"}]});
    let addr = g(schema);
    assert!(addr.restriction().is_none(), "restricted: {:?}", addr.restriction());
    assert_eq!(addr.check_text(br#""db.local""#), Ok(()));
    assert_eq!(addr.check_text(br#""10.0.0.256""#), Ok(()));
    for ip in [r#""10.0.0.1""#, r#""::1""#, r#""fe80::1:2""#] {
        assert!(addr.check_text(ip.as_bytes()).is_err(), "{ip}");
    }
    // A UUID against a pattern it cannot meet, read as 2020-12 (where `uuid` is checked).
    let schema = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
        "oneOf": [{"type": "string", "format": "uuid"}, {"type": "string", "pattern": "^\\$[A-Z]+$"}]});
    let id = g(schema);
    assert!(id.restriction().is_none(), "restricted: {:?}", id.restriction());
    assert_eq!(id.check_text(br#""$KEY""#), Ok(()));
    assert_eq!(id.check_text(br#""0f8fad5b-d9cb-469f-a165-70867728950e""#), Ok(()));
    // Draft 4 does not check `uuid`: there a UUID is any string, so the pattern branch's
    // values are in both and the approximation is told.
    let schema = json!({"$schema": "http://json-schema.org/draft-04/schema#",
        "oneOf": [{"type": "string", "format": "uuid"}, {"type": "string", "pattern": "^\\$[A-Z]+$"}]});
    assert!(g(schema).restriction().is_some_and(|r| r.contains("oneOf")));
    // `hostname` is checked only with an optional package: still an approximation, and told.
    let schema = json!({"type": "string", "oneOf": [{"format": "hostname"}, {"format": "ipv6"}]});
    assert!(g(schema).restriction().is_some_and(|r| r.contains("oneOf")));
}

#[test]
fn a_max_length_above_the_longest_email_needs_no_counting() {
    // Under maxLength 317 or more, an address is at most 64 + 1 + 252 characters: the bound
    // leaves the language as it is, uncounted.
    let long = grammar(&json!({"type": "string", "format": "email", "maxLength": 1024}));
    assert!(long.restriction().is_none(), "restricted: {:?}", long.restriction());
    let local = "a".repeat(64);
    let domain = format!("{}.{}.{}.{}", "b".repeat(63), "c".repeat(63), "d".repeat(63), "e".repeat(60));
    assert_eq!(domain.len(), 252);
    let ok = |g: &Grammar, text: &str| g.check_text(format!("\"{text}\"").as_bytes()).is_ok();
    assert!(ok(&long, &format!("{local}@{domain}")));
    assert!(!ok(&long, &format!("a{local}@x.org")));
    assert!(!ok(&long, &format!("{local}@{domain}.f")));
    // A quoted local part may hold `@`: the limit is on everything before the last one.
    let quoted = |n: usize| format!(r#"\"{}@{}\"@x.org"#, "b".repeat(n), "c".repeat(31));
    assert!(ok(&long, &quoted(30)));
    assert!(!ok(&long, &quoted(31)));
    // Without a bound the parts are not limited; a shorter bound counts characters.
    let free = grammar(&json!({"type": "string", "format": "email"}));
    assert!(ok(&free, &format!("a{local}@x.org")));
    // A `minLength` past the shortest address would be counted over the limited automaton,
    // which does not fit: there the parts stay unlimited and the bound is counted as before.
    let min = grammar(&json!({"type": "string", "format": "email", "minLength": 6, "maxLength": 1024}));
    assert!(ok(&min, &format!("a{local}@x.org")));
    assert!(!ok(&min, "a@b.c"));
    for (max, fits) in [(11, true), (10, false)] {
        let g = grammar(&json!({"type": "string", "format": "email", "maxLength": max}));
        assert_eq!(ok(&g, "ann@mail.io"), fits, "maxLength {max}");
    }
}

#[test]
fn not_of_names_only_keeps_the_names_out_exactly() {
    let exact = |schema: Value| {
        let g = grammar(&schema);
        assert!(g.restriction().is_none(), "{schema}: restricted: {:?}", g.restriction());
        g
    };
    let ok = |g: &Grammar, text: &str| g.check_text(text.as_bytes()).is_ok();
    // Neither name: `not` of an `anyOf` of two `required`.
    let neither = exact(json!({"properties": {"a": {"type": "integer"}},
        "not": {"anyOf": [{"required": ["ref"]}, {"required": ["err"]}]}}));
    assert!(ok(&neither, r#"{"a":1}"#) && ok(&neither, "{}"));
    for t in [r#"{"ref":1}"#, r#"{"a":1,"err":2}"#, "[]", "1", r#""x""#] {
        assert!(!ok(&neither, t), "{t}");
    }
    // Not both: `not` of an `allOf` (one case per name), and `not: {required: [site, app]}`.
    for schema in [
        json!({"properties": {"site": {"type": "integer"}, "app": {"type": "integer"}},
            "not": {"allOf": [{"required": ["site"]}, {"required": ["app"]}]}}),
        json!({"properties": {"site": {"type": "integer"}, "app": {"type": "integer"}},
            "not": {"required": ["site", "app"]}}),
    ] {
        let g = exact(schema);
        for t in [r#"{"site":1}"#, r#"{"app":2}"#, "{}"] {
            assert!(ok(&g, t), "{t}");
        }
        assert!(!ok(&g, r#"{"site":1,"app":2}"#));
        assert!(!ok(&g, "null"));
    }
    // Not all of three names: past two cases, one is kept and the restriction says so.
    let three = grammar(&json!({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "not": {"required": ["a", "b", "c"]}}));
    assert!(three.restriction().is_some_and(|r| r.starts_with("not at #/not")), "{:?}", three.restriction());
    assert!(ok(&three, r#"{"b":1,"c":2}"#));
    assert!(!ok(&three, r#"{"a":1,"b":1,"c":2}"#));
    assert!(!ok(&three, r#"{"a":1,"c":2}"#), "the case kept is `a` absent");
    // A name the rest requires cannot be the absent one.
    let g = exact(json!({"required": ["site"], "properties": {"site": {"type": "integer"}, "app": {"type": "integer"}},
        "not": {"required": ["site", "app"]}}));
    assert!(ok(&g, r#"{"site":1}"#));
    assert!(!ok(&g, r#"{"site":1,"app":2}"#));
    // `oneOf` branches apart by a name one requires and the other's `not` keeps out, with
    // recursion inside: no subtraction, so the calls stay.
    let g = exact(json!({"$defs": {"el": {"type": "object",
        "properties": {"code": {"type": "integer"}, "usages": {"type": "array", "items": {"$ref": "#/$defs/el"}}},
        "oneOf": [{"required": ["code", "usages"]}, {"allOf": [{"not": {"required": ["usages"]}}, {"required": ["code"]}]}]}},
        "$ref": "#/$defs/el"}));
    assert!(ok(&g, r#"{"code":1,"usages":[{"code":2,"usages":[{"code":3}]}]}"#));
    assert!(!ok(&g, r#"{"usages":[]}"#));
    // In draft 7 a `$ref` replaces its siblings: the `not` beside it proves no branch apart,
    // and a one-character string meets both branches.
    let g = grammar(&json!({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
        "oneOf": [{"$ref": "#/definitions/s", "not": {"required": ["a"]}}, {"type": "string", "maxLength": 1}]}));
    assert!(!ok(&g, r#""x""#));
    assert!(ok(&g, r#""xy""#));
}

#[test]
fn a_ref_is_its_target_alone_in_disjointness_proofs_where_it_replaces_its_siblings() {
    let schema = |dialect: &str| {
        json!({"$schema": dialect, "$defs": {"s": {"type": "string"}}, "definitions": {"s": {"type": "string"}},
            "oneOf": [{"$ref": "#/definitions/s", "type": "object"}, {"type": "string", "maxLength": 1}]})
    };
    // Draft 7: the first branch is every string, so a one-character string meets both.
    let seven = grammar(&schema("http://json-schema.org/draft-07/schema#"));
    assert!(seven.check_text(br#""x""#).is_err());
    assert!(seven.check_text(br#""xy""#).is_ok());
    // 2020-12: `type` applies beside the `$ref`, the first branch has no value.
    let now = grammar(&schema("https://json-schema.org/draft/2020-12/schema"));
    assert!(now.check_text(br#""x""#).is_ok());
    assert!(now.check_text(br#""xy""#).is_err());
}

#[test]
fn a_long_array_of_large_objects_counts_calls_of_one_element_rule() {
    // Every chunk of elements calls the element's rule: a chunk of copies of a large object
    // would be one DFA of 64 objects' states.
    let element = json!({"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[0-9a-f]{24}$"},
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "kind": {"enum": ["string", "number", "gps", "boolean", "blob"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 100},
        "size": {"type": "integer", "minimum": 0}
    }, "additionalProperties": false});
    let schema = json!({"type": "array", "items": element, "maxItems": 1_000});
    let g = grammar(&schema);
    assert!(g.restriction().is_none() && g.is_pushdown());
    assert!(g.memory_bytes() < 4 << 20, "{} bytes", g.memory_bytes());
    let one = r#"{"id":"0123456789abcdef01234567","name":"x","kind":"gps","tags":["a"],"size":3}"#;
    for n in [0usize, 1, 64, 65, 1_000, 1_001] {
        let text = format!("[{}]", vec![one; n].join(","));
        assert_eq!(g.check_text(text.as_bytes()).is_ok(), n <= 1_000, "{n} elements");
    }
    let wrong = format!("[{},{}]", vec![one; 70].join(","), one.replace("gps", "car"));
    assert!(g.check_text(wrong.as_bytes()).is_err());
}
