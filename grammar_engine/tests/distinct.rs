//! Arrays of distinct strings (`uniqueItems` over every string) checked while the text is read,
//! against an independent reference: walked at random over a vocabulary that makes repeats
//! likely, every token checked at every step (mask, advance, EOS, distance, budget).

use std::collections::HashSet;
use std::sync::Arc;

use grammar_engine::{Family, Grammar, GrammarConfig, JsonSchemaOptions, TokenId, TokenSpec, Vocabulary};
use serde_json::{json, Value};

/// A few characters (each a token) and tokens that finish, start or repeat elements.
fn vocab() -> Arc<Vocabulary> {
    let toks = [
        "[", "]", "\"", ",", "a", "b", "\\", "u", "0", "6", "1", "n", "{", "}", ":", "x", "\",\"", "\"]", "a\"", "\"a\"", "[\"", "\"a\",\"", "\\u000a",
        "a\",\"a", "{\"x\":", "\"]}", " ", "\", \"",
    ];
    let mut specs: Vec<Option<TokenSpec>> = toks.iter().map(|t| Some(TokenSpec { bytes: t.as_bytes().to_vec(), special: false })).collect();
    specs.push(Some(TokenSpec { bytes: b"</s>".to_vec(), special: true }));
    Arc::new(Vocabulary::new(specs, vec![TokenId::new(toks.len() as u32)], Family::Raw, None).unwrap())
}

fn grammar(v: &Arc<Vocabulary>, schema: &Value) -> Grammar {
    grammar_with(v, schema, 0)
}

fn grammar_with(v: &Arc<Vocabulary>, schema: &Value, max_whitespace: usize) -> Grammar {
    let opts = JsonSchemaOptions { max_whitespace, ..JsonSchemaOptions::default() };
    Grammar::from_json_schema(v.clone(), schema, &opts, &GrammarConfig::default()).unwrap_or_else(|e| panic!("{schema} failed: {e}"))
}

/// The string literals `text` has closed, decoded, in order, but member names (a literal
/// followed by `:`); the text is a prefix of the same schema without `uniqueItems`, so it is
/// well formed so far.
fn closed_strings(text: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < text.len() && text[i] != b'"' {
            i += if text[i] == b'\\' { 2 } else { 1 };
        }
        if i < text.len() {
            let name = text[i + 1..].iter().find(|&&c| c != b' ') == Some(&b':');
            if !name {
                out.push(serde_json::from_slice::<String>(&text[start..=i]).expect("a closed literal decodes"));
            }
        }
        i += 1;
    }
    out
}

/// The reference: `free` is the same schema without `uniqueItems`; a prefix is valid when it
/// is valid there and the elements it closed are distinct (every string language here can
/// always be made new, so a valid prefix is completable). Returns whether it is whole and the
/// fewest bytes that complete it (a search over the single-character tokens).
fn reference(free: &Grammar, text: &[u8]) -> Option<(bool, usize)> {
    let valid = |t: &[u8]| -> Option<bool> {
        let whole = match free.check_text(t) {
            Ok(()) => true,
            Err(at) if at == t.len() => false,
            Err(_) => return None,
        };
        let elements = closed_strings(t);
        let distinct: HashSet<&String> = elements.iter().collect();
        (distinct.len() == elements.len()).then_some(whole)
    };
    let whole = valid(text)?;
    let alphabet: &[u8] = b"[]\",abu016n{}:x\\ ";
    let mut layer = vec![text.to_vec()];
    for len in 0..12 {
        if layer.iter().any(|t| valid(t) == Some(true)) {
            return Some((whole, len));
        }
        let mut next = Vec::new();
        for t in &layer {
            for &c in alphabet {
                let mut u = t.clone();
                u.push(c);
                if valid(&u).is_some() {
                    next.push(u);
                }
            }
        }
        layer = next;
    }
    panic!("no completion of {:?} within 12 bytes", String::from_utf8_lossy(text));
}

fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    }
}

fn bit(mask: &[u32], t: TokenId) -> bool {
    let t = t.as_u32();
    mask[(t >> 5) as usize] >> (t & 31) & 1 == 1
}

/// Random walks through `schema`, every token checked at every step against the reference.
fn walks_agree(schema: Value, max_whitespace: usize, walks: usize, seed: u64, min_repeats: usize) {
    let v = vocab();
    let g = grammar_with(&v, &schema, max_whitespace);
    assert!(g.restriction().is_none(), "restricted: {:?}", g.restriction());
    assert!(g.is_pushdown());
    let mut free_schema = schema.clone();
    strip_unique(&mut free_schema);
    let free = grammar_with(&v, &free_schema, max_whitespace);
    let eos = v.eos_ids()[0];
    let mut rand = xorshift(seed);
    let mut repeats_refused = 0;
    for _walk in 0..walks {
        let mut s = g.initial_state();
        let mut text: Vec<u8> = Vec::new();
        for _step in 0..30 {
            let (whole, rest) = reference(&free, &text).expect("the walk stays valid");
            let mask = g.token_bitmask(s).unwrap().to_vec();
            assert_eq!(g.is_accepting(s).unwrap(), whole, "{:?}", String::from_utf8_lossy(&text));
            assert_eq!(bit(&mask, eos), whole);
            assert_eq!(g.min_tokens_to_accept(s).unwrap() as usize, rest, "after {:?}", String::from_utf8_lossy(&text));
            let mut allowed = Vec::new();
            for t in (0..v.size() as u32).map(TokenId::new).filter(|&t| !v.is_eos(t)) {
                let mut next = text.clone();
                next.extend_from_slice(v.token_bytes(t).unwrap());
                let ok = reference(&free, &next).is_some();
                assert_eq!(bit(&mask, t), ok, "token {:?} after {:?}", String::from_utf8_lossy(v.token_bytes(t).unwrap()), String::from_utf8_lossy(&text));
                assert_eq!(g.advance(s, t).is_ok(), ok);
                if ok {
                    allowed.push((t, next));
                } else if free.check_text(&next).err().is_none_or(|at| at == next.len()) {
                    repeats_refused += 1;
                }
            }
            for budget in 0..6u32 {
                let within = g.token_bitmask_within(s, budget).unwrap();
                let mut kept = 0;
                for (t, next) in &allowed {
                    if bit(&within, *t) {
                        kept += 1;
                        assert!(reference(&free, next).unwrap().1 <= budget as usize, "budget {budget}: {:?}", String::from_utf8_lossy(next));
                    }
                }
                if rest >= 1 && rest <= budget as usize + 1 {
                    assert!(kept > 0, "budget {budget} after {:?}", String::from_utf8_lossy(&text));
                }
            }
            if allowed.is_empty() || (whole && rand(4) == 0) {
                break;
            }
            let (t, next) = allowed.swap_remove(rand(allowed.len()));
            s = g.advance(s, t).unwrap();
            text = next;
        }
    }
    assert!(repeats_refused >= min_repeats, "the walks met too few repeats to test anything: {repeats_refused}");
}

fn strip_unique(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("uniqueItems");
            m.values_mut().for_each(strip_unique);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_unique),
        _ => {}
    }
}

#[test]
fn distinct_strings_agree_with_the_reference_at_every_token() {
    walks_agree(json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}), 0, 40, 7, 50);
}

#[test]
fn distinct_nonempty_strings_inside_an_object_agree_with_the_reference() {
    let schema = json!({
        "type": "object",
        "properties": {"x": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": true, "maxItems": 4}},
        "required": ["x"], "additionalProperties": false
    });
    walks_agree(schema, 0, 25, 11, 12);
}

#[test]
fn a_repeat_is_refused_however_it_is_spelled() {
    let v = vocab();
    let g = grammar(&v, &json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}));
    assert!(g.restriction().is_none());
    for ok in [r#"["a","b"]"#, r#"["ab","a"]"#, r#"[]"#, r#"["","a"]"#, r#"["a","b","ba"]"#] {
        assert_eq!(g.check_text(ok.as_bytes()), Ok(()), "{ok}");
    }
    for (bad, at) in [(r#"["a","a"]"#, 7), (r#"["\n","\u000a"]"#, 13), (r#"["",""]"#, 5), (r#"["a","b","a"]"#, 11)] {
        assert_eq!(g.check_text(bad.as_bytes()), Err(at), "{bad}");
    }
    // One element required: still exact.
    let two = grammar(&v, &json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 1}));
    assert!(two.restriction().is_none());
    assert!(two.check_text(b"[]").is_err());
}

#[test]
fn arrays_the_check_does_not_cover_keep_the_one_element_restriction() {
    let v = vocab();
    // An upper length bound can leave no new value; two required elements need two distinct
    // ones found ahead; neither is checked at run time.
    for schema in [
        json!({"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": "string", "pattern": "^a+$"}, "uniqueItems": true}),
    ] {
        let g = grammar(&v, &schema);
        assert!(g.restriction().is_some_and(|r| r.contains("at most one element")), "{schema}: {:?}", g.restriction());
    }
    let err = Grammar::from_json_schema(v.clone(), &json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 2}), &JsonSchemaOptions::default(), &GrammarConfig::default());
    assert!(err.is_err());
}

#[test]
fn distinct_strings_with_whitespace_agree_with_the_reference() {
    walks_agree(json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 5}), 1, 25, 3, 30);
}

#[test]
fn once_every_short_value_is_taken_the_next_element_is_longer() {
    // The vocabulary's one-byte characters that a string takes: with each of them and the
    // empty string taken, the shortest new element has two characters.
    let v = vocab();
    let g = grammar(&v, &json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}));
    let chars: Vec<u8> = b"[],abu016n{}:x ".to_vec();
    let mut text = String::from(r#"["""#);
    for &c in &chars {
        text.push_str(&format!(r#","{}""#, c as char));
    }
    text.push(',');
    let tok = |b: u8| (0..v.size() as u32).map(TokenId::new).find(|&t| v.token_bytes(t) == Some(&[b][..])).unwrap();
    let mut s = g.initial_state();
    for b in text.bytes() {
        s = g.advance(s, tok(b)).unwrap();
    }
    let after_comma = s;
    assert_eq!(g.min_tokens_to_accept(s).unwrap(), 5, "after {text}: a two-character string and the bracket");
    s = g.advance(s, tok(b'"')).unwrap();
    s = g.advance(s, tok(b'a')).unwrap();
    assert_eq!(g.min_tokens_to_accept(s).unwrap(), 3);
    assert!(g.advance(s, tok(b'"')).is_err(), "\"a\" is taken");
    // A budget keeps exactly the tokens after which the end is within it.
    for state in [after_comma, s] {
        for budget in 0..8u32 {
            let within = g.token_bitmask_within(state, budget).unwrap();
            for t in (0..v.size() as u32).map(TokenId::new).filter(|&t| !v.is_eos(t)) {
                let fits = g.advance(state, t).is_ok_and(|n| g.min_tokens_to_accept(n).unwrap() <= budget);
                assert_eq!(bit(&within, t), fits, "budget {budget}, token {:?}", String::from_utf8_lossy(v.token_bytes(t).unwrap()));
            }
        }
    }
}

#[test]
fn the_regular_form_repair_walks_is_a_subset_the_vocabulary_can_write() {
    // The vocabulary has no `z`: the regular form may not take one either, or a repair into it
    // would be text the grammar refuses.
    let v = vocab();
    let g = grammar(&v, &json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}));
    let form = g.regular_dfa().unwrap();
    assert!(grammar_engine::validate(form, br#"["a"]"#).valid);
    assert!(!grammar_engine::validate(form, br#"["z"]"#).valid);
    assert!(!grammar_engine::validate(form, br#"["a","b"]"#).valid, "the regular form holds one element");
    assert_eq!(g.check_text(br#"["z"]"#), Err(2));
}
