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
