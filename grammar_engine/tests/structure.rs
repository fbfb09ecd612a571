//! Structures end to end: languages, special tokens in the token index, budgets across
//! segments, and errors located in the spec.

use std::sync::Arc;

use grammar_engine::{
    Family, Grammar, GrammarConfig, GrammarError, JsonSchemaOptions, SpecialTokens, StateId, TokenId, TokenSpec, Vocabulary,
    MARKER_BYTES,
};
use serde_json::{json, Value};

/// Printable ASCII one byte per token, some longer tokens, an ordinary `<tool_call>`, an
/// ordinary token holding the byte 0xF5 (as byte-level vocabularies have), two special tokens
/// and EOS last.
fn vocab() -> Arc<Vocabulary> {
    let mut specs: Vec<Option<TokenSpec>> = (32u8..127).map(|b| Some(TokenSpec { bytes: vec![b], special: false })).collect();
    for t in ["<tool_call>", "</tool_call>", "ab", "{\"", "\":", "\"}", "\n"] {
        specs.push(Some(TokenSpec { bytes: t.as_bytes().to_vec(), special: false }));
    }
    specs.push(Some(TokenSpec { bytes: vec![0xF5], special: false }));
    specs.push(Some(TokenSpec { bytes: b"[TOOL_CALLS]".to_vec(), special: true }));
    specs.push(Some(TokenSpec { bytes: b"<|python_tag|>".to_vec(), special: true }));
    specs.push(Some(TokenSpec { bytes: b"</s>".to_vec(), special: true }));
    let eos = TokenId::new(specs.len() as u32 - 1);
    Arc::new(Vocabulary::new(specs, vec![eos], Family::Raw, None).unwrap())
}

fn id(v: &Vocabulary, text: &[u8]) -> TokenId {
    v.find_tokens(text)[0]
}

fn grammar(spec: Value) -> Grammar {
    Grammar::from_structure(vocab(), &spec, &JsonSchemaOptions::default(), &GrammarConfig::default()).unwrap()
}

fn error(spec: Value) -> GrammarError {
    Grammar::from_structure(vocab(), &spec, &JsonSchemaOptions::default(), &GrammarConfig::default()).unwrap_err()
}

fn accepts(g: &Grammar, bytes: &[u8]) -> bool {
    g.dfa().accepts(bytes)
}

/// Advances through `tokens`; `None` as soon as one is refused.
fn walk(g: &Grammar, tokens: &[TokenId]) -> Option<StateId> {
    let mut s = g.initial_state();
    for &t in tokens {
        s = g.advance(s, t).ok()?;
    }
    Some(s)
}

fn text_tokens(v: &Vocabulary, text: &str) -> Vec<TokenId> {
    text.bytes().map(|b| id(v, &[b])).collect()
}

#[test]
fn until_is_free_text_then_the_trigger_once() {
    let g = grammar(json!([{"until": "<tool_call>"}, {"regex": "[0-9]+"}]));
    assert!(accepts(&g, b"hello <tool_call>42"));
    assert!(accepts(&g, b"<tool_call>7"));
    assert!(accepts(&g, b"<tool_cal <tool_call>7"));
    assert!(!accepts(&g, b"a <tool_call> b <tool_call>7"));
    assert!(!accepts(&g, b"hello 42"));
    // The trigger cannot be written inside the free text, by its token or by pieces.
    let v = g.vocab().clone();
    let trigger = id(&v, b"<tool_call>");
    let s = walk(&g, &text_tokens(&v, "hi <tool_cal")).unwrap();
    assert!(g.advance(s, id(&v, b"l")).is_ok());
    let after = walk(&g, &[trigger]).unwrap();
    assert!(g.advance(after, trigger).is_err());
    assert!(g.advance(after, id(&v, b"5")).is_ok());
}

#[test]
fn free_text_stops_and_alternatives() {
    let g = grammar(json!({"free_text": {"without": ["</think>", "<tool_call>"]}}));
    assert!(accepts(&g, b"") && accepts(&g, b"think </thin> <tool_cal>"));
    assert!(!accepts(&g, b"x </think>") && !accepts(&g, b"<tool_call>"));
    let g = grammar(json!({"any_of": ["none", [{"text": "call:"}, {"regex": "[a-z]+"}]]}));
    assert!(accepts(&g, b"none") && accepts(&g, b"call:abc") && !accepts(&g, b"call:"));
    let g = grammar(json!({"repeat": {"regex": "[0-9]"}, "min": 2, "max": 3, "separator": ", "}));
    assert!(accepts(&g, b"1, 2") && accepts(&g, b"1, 2, 3") && !accepts(&g, b"1") && !accepts(&g, b"1, 2, 3, 4"));
    assert!(!accepts(&g, b"12"));
    let g = grammar(json!({"repeat": "x", "separator": "-"}));
    assert!(accepts(&g, b"") && accepts(&g, b"x-x-x") && !accepts(&g, b"x-"));
    let g = grammar(json!(["a", {"optional": "b"}, "c"]));
    assert!(accepts(&g, b"ac") && accepts(&g, b"abc") && !accepts(&g, b"abbc"));
}

#[test]
fn json_schema_segments_follow_their_schema() {
    let schema = json!({"type": "object", "properties": {"city": {"enum": ["ab", "cd"]}}, "required": ["city"], "additionalProperties": false});
    let g = grammar(json!(["<tool_call>", {"json_schema": schema}, "</tool_call>"]));
    assert!(accepts(&g, br#"<tool_call>{"city":"ab"}</tool_call>"#));
    assert!(!accepts(&g, br#"<tool_call>{"city":"xy"}</tool_call>"#));
    let spaced = grammar(json!({"json_schema": schema, "max_whitespace": 1}));
    assert!(accepts(&spaced, br#"{"city": "ab"}"#));
}

#[test]
fn special_tokens_are_allowed_exactly_where_named() {
    let v = vocab();
    let calls = id(&v, b"[TOOL_CALLS]");
    let tag = id(&v, b"<|python_tag|>");
    let byte_f5 = id(&v, &[0xF5]);
    let eos = v.eos_ids()[0];
    let g = grammar(json!([{"until": {"token": "[TOOL_CALLS]"}}, {"regex": "[a-z]+"}]));
    assert_eq!(g.special_tokens().byte_of(calls), Some(MARKER_BYTES[0]));
    let s0 = g.initial_state();
    let mask = g.token_bitmask(s0).unwrap().to_vec();
    let allowed = |m: &[u32], t: TokenId| m[(t.as_u32() >> 5) as usize] >> (t.as_u32() & 31) & 1 == 1;
    assert!(allowed(&mask, calls));
    assert!(!allowed(&mask, tag) && !allowed(&mask, byte_f5) && !allowed(&mask, eos));
    // Free text may hold the special token's text (it is not the token) but never the token.
    let s = walk(&g, &text_tokens(&v, "say [TOOL_CALLS] ")).unwrap();
    let s = g.advance(s, calls).unwrap();
    assert!(g.advance(s, calls).is_err() && g.advance(s, byte_f5).is_err() && g.advance(s, tag).is_err());
    let s = g.advance(s, id(&v, b"x")).unwrap();
    assert!(g.is_accepting(s).unwrap());
    assert!(allowed(&g.token_bitmask(s).unwrap(), eos));
    // No ordinary token ever shows up where only the special token fits.
    for t in g.allowed_token_ids(walk(&g, &text_tokens(&v, "abc")).unwrap()).unwrap() {
        assert!(t == calls || !v.is_special(t), "{t}");
        assert_ne!(t, byte_f5);
    }
    assert_eq!(g.spell(&[id(&v, b"h"), calls, id(&v, b"q"), eos]), vec![b'h', MARKER_BYTES[0], b'q']);
    // A grammar that names no special token refuses them all.
    let plain = grammar(json!({"free_text": true}));
    let start = plain.initial_state();
    assert!(plain.advance(start, calls).is_err() && plain.advance(start, byte_f5).is_err());
}

#[test]
fn transitions_and_min_tokens_see_special_tokens() {
    let v = vocab();
    let calls = id(&v, b"[TOOL_CALLS]");
    let g = grammar(json!([{"token": "[TOOL_CALLS]"}, "ab"]));
    let s0 = g.initial_state();
    assert_eq!(g.min_tokens_to_accept(s0).unwrap(), 2);
    let t: Vec<(TokenId, StateId)> = g.transitions(s0).unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, calls);
    assert_eq!(g.allowed_token_ids(s0).unwrap(), vec![calls]);
    assert_eq!(g.forced_bytes(s0).unwrap(), vec![MARKER_BYTES[0], b'a', b'b']);
}

#[test]
fn budgets_reach_across_segments() {
    let v = vocab();
    let g = grammar(json!([{"until": "<tool_call>"}, {"json_schema": {"enum": ["ab"]}}, "</tool_call>"]));
    let s0 = g.initial_state();
    // Shortest: <tool_call> " ab " </tool_call> as tokens: <tool_call>, ", ab, ", </tool_call>.
    assert_eq!(g.min_tokens_to_accept(s0).unwrap(), 5);
    let tight = g.token_bitmask_within(s0, 4).unwrap();
    let allowed: Vec<TokenId> =
        (0..v.size() as u32).filter(|&t| tight[(t >> 5) as usize] >> (t & 31) & 1 == 1).map(TokenId::new).collect();
    assert_eq!(allowed, vec![id(&v, b"<tool_call>")]);
    // With room to spare, free text is allowed again.
    let loose = g.token_bitmask_within(s0, 6).unwrap();
    let x = id(&v, b"x").as_u32();
    assert!(loose[(x >> 5) as usize] >> (x & 31) & 1 == 1);
}

#[test]
fn ordinary_tokens_named_as_tokens_stand_for_their_text() {
    let g = grammar(json!([{"token": "<tool_call>"}, "x"]));
    assert!(g.special_tokens().is_empty());
    assert!(accepts(&g, b"<tool_call>x"));
    let v = g.vocab().clone();
    assert!(walk(&g, &text_tokens(&v, "<tool_call>x")).is_some());
}

#[test]
fn errors_name_the_place_in_the_spec() {
    let path_of = |e: GrammarError| match e {
        GrammarError::InvalidStructure { path, .. } | GrammarError::InStructure { path, .. } => path,
        other => panic!("{other:?}"),
    };
    assert_eq!(path_of(error(json!(["a", {"regex": "("}]))), "#/1/regex");
    match error(json!(["a", {"regex": "ab("}])) {
        GrammarError::InStructure { error, .. } => assert!(matches!(*error, GrammarError::InvalidRegex { offset: 2, .. })),
        other => panic!("{other:?}"),
    }
    match error(json!({"any_of": [{"json_schema": {"$ref": "http://elsewhere.com/x.json"}}]})) {
        GrammarError::InStructure { path, error } => {
            assert_eq!(path, "#/any_of/0/json_schema");
            assert!(matches!(*error, GrammarError::UnsupportedSchemaKeyword { .. }), "{error:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(path_of(error(json!([{"text": "a", "regex": "b"}]))), "#/0");
    assert_eq!(path_of(error(json!({"repeat": "a", "mim": 1}))), "#/mim");
    assert_eq!(path_of(error(json!({"repeat": "a", "min": 3, "max": 2}))), "#/max");
    assert_eq!(path_of(error(json!({"any_of": []}))), "#/any_of");
    assert_eq!(path_of(error(json!(["a", 5]))), "#/1");
    assert_eq!(path_of(error(json!({"token": "<nope>"}))), "#/token");
    assert_eq!(path_of(error(json!({"token": "</s>"}))), "#/token");
    assert_eq!(path_of(error(json!({"until": ""}))), "#/until");
    assert_eq!(path_of(error(json!({"free_text": {"without": [{"regex": "a"}]}}))), "#/free_text/without/0");
    assert!(matches!(error(json!([{"json_schema": {"type": "string"}}, {"json_schema": {"not": {}}}])), GrammarError::InStructure { .. }));
    // Thirteen special tokens fit; a fourteenth does not.
    let many: Vec<Value> = (0..14).map(|i| json!({"token": i})).collect();
    let mut specs: Vec<Option<TokenSpec>> = (0..14).map(|i| Some(TokenSpec { bytes: format!("<s{i}>").into_bytes(), special: true })).collect();
    specs.push(Some(TokenSpec { bytes: b"a".to_vec(), special: false }));
    let v = Arc::new(Vocabulary::new(specs, vec![], Family::Raw, None).unwrap());
    let cfg = GrammarConfig::default();
    let opts = JsonSchemaOptions::default();
    assert!(Grammar::from_structure(v.clone(), &json!({"any_of": many[..13]}), &opts, &cfg).is_ok());
    assert!(matches!(Grammar::from_structure(v, &json!({"any_of": many}), &opts, &cfg), Err(GrammarError::InvalidStructure { .. })));
}

#[test]
fn markers_are_handed_out_once_and_never_utf8() {
    let mut s = SpecialTokens::default();
    let t = TokenId::new;
    assert_eq!(s.marker(t(7), "").unwrap(), 0xF5);
    assert_eq!(s.marker(t(9), "").unwrap(), 0xF6);
    assert_eq!(s.marker(t(7), "").unwrap(), 0xF5);
    assert_eq!(s.token_of(0xF6), Some(t(9)));
    assert_eq!(s.byte_of(t(9)), Some(0xF6));
    for k in 10..21 {
        s.marker(t(k), "").unwrap();
    }
    assert!(matches!(s.marker(t(99), "#/3"), Err(GrammarError::InvalidStructure { .. })));
    for b in MARKER_BYTES {
        assert!(std::str::from_utf8(&[b]).is_err());
        // Not even as a continuation or a lead byte of a longer sequence.
        assert!(std::str::from_utf8(&[b, 0x80, 0x80, 0x80]).is_err());
        assert!(std::str::from_utf8(&[0xE2, b, 0x80]).is_err());
    }
}
