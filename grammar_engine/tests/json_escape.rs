//! The JSON string escape of languages: a DFA's, a recursive rule set's, and a structure's
//! `{"json_string": ...}` node. Sentences escaped as serde_json escapes them are accepted, and
//! what the escaped grammars generate decodes (serde_json) to sentences of the original;
//! unescaped quotes, lone backslashes, raw control bytes and other spellings are refused.

use std::sync::Arc;

use grammar_engine::{
    json_escape_bytes, Dfa, DfaConfig, Expr, Family, Grammar, GrammarConfig, GrammarError, JsonSchemaOptions, RtnBuilder,
    SpecialTokens, StateId, TokenId, TokenSpec, Vocabulary,
};
use serde_json::{json, Value};

/// Every byte as a token, and a special `<|end|>` (EOS) and `[TOOL_CALLS]`.
fn vocab() -> Arc<Vocabulary> {
    let mut specs: Vec<Option<TokenSpec>> = (0u8..=255).map(|b| Some(TokenSpec { bytes: vec![b], special: false })).collect();
    specs.push(Some(TokenSpec { bytes: b"[TOOL_CALLS]".to_vec(), special: true }));
    specs.push(Some(TokenSpec { bytes: b"<|end|>".to_vec(), special: true }));
    let eos = TokenId::new(specs.len() as u32 - 1);
    Arc::new(Vocabulary::new(specs, vec![eos], Family::Raw, None).unwrap())
}

/// A small xorshift generator (tests are deterministic).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The content of a JSON string as serde_json writes it.
fn serde_escape(text: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(text).unwrap();
    quoted.as_bytes()[1..quoted.len() - 1].to_vec()
}

/// A JSON string's content decoded, or None when it is not one.
fn decode(content: &[u8]) -> Option<String> {
    let mut quoted = vec![b'"'];
    quoted.extend_from_slice(content);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted).ok()
}

/// A random string of a DFA's language, at most about `len` bytes (shortest way out once past).
fn dfa_walk(d: &Dfa, rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut s = d.start();
    let mut out = Vec::new();
    loop {
        let mut edges: Vec<(u8, StateId)> = Vec::new();
        d.for_each_transition(s, |b, t| edges.push((b, t)));
        if d.is_accepting(s) && (edges.is_empty() || out.len() >= len || rng.below(6) == 0) {
            return out;
        }
        if out.len() >= len {
            let here = d.byte_distance(s);
            edges.retain(|&(_, t)| d.byte_distance(t) < here);
        }
        let (b, t) = edges[rng.below(edges.len())];
        out.push(b);
        s = t;
    }
}

/// A random string a grammar accepts (one byte per token), within `budget` tokens.
fn grammar_walk(g: &Grammar, rng: &mut Rng, budget: u32) -> Vec<u8> {
    let v = g.vocab().clone();
    let mut s = g.initial_state();
    let mut out = Vec::new();
    for left in (0..budget).rev() {
        let accepting = g.is_accepting(s).unwrap();
        let mask = g.token_bitmask_within(s, left).unwrap();
        let allowed: Vec<TokenId> = (0..v.size() as u32)
            .map(TokenId::new)
            .filter(|t| !v.is_eos(*t) && mask[t.as_usize() >> 5] >> (t.as_u32() & 31) & 1 == 1)
            .collect();
        if allowed.is_empty() || (accepting && rng.below(8) == 0) {
            break;
        }
        let t = allowed[rng.below(allowed.len())];
        out.extend_from_slice(v.token_bytes(t).unwrap());
        s = g.advance(s, t).unwrap();
    }
    assert!(g.is_accepting(s).unwrap(), "the walk ended outside the language: {:?}", String::from_utf8_lossy(&out));
    out
}

#[test]
fn the_escape_of_a_string_is_serde_jsons() {
    for b in 0u8..0x80 {
        let s = (b as char).to_string();
        assert_eq!(json_escape_bytes(s.as_bytes()), serde_escape(&s), "byte 0x{b:02X}");
    }
    let pool: Vec<char> = "ab\"\\/\n\r\t\u{8}\u{c}\u{0}\u{1b}\u{1f}\u{7f}é😀 ".chars().collect();
    let mut rng = Rng(7);
    for _ in 0..500 {
        let s: String = (0..rng.below(12)).map(|_| pool[rng.below(pool.len())]).collect();
        assert_eq!(json_escape_bytes(s.as_bytes()), serde_escape(&s), "{s:?}");
    }
}

#[test]
fn an_escaped_dfa_accepts_exactly_the_escapes() {
    let config = DfaConfig::default();
    let pattern = "(?s:[a-c\"\\\\/\\n\\t\\x00-\\x1f\\x7fé😀]{0,5})";
    let original = Dfa::from_regex(pattern, &config).unwrap();
    let escaped = original.json_escaped(&config).unwrap();
    let mut rng = Rng(11);
    for _ in 0..400 {
        // A sentence of the original, escaped as serde_json does, is accepted.
        let w = dfa_walk(&original, &mut rng, 5);
        let text = String::from_utf8(w.clone()).unwrap();
        assert!(escaped.accepts(&serde_escape(&text)), "{text:?}");
        // What the escaped DFA generates decodes to a sentence of the original.
        let e = dfa_walk(&escaped, &mut rng, 30);
        let decoded = decode(&e).unwrap_or_else(|| panic!("{:?} is no JSON string content", String::from_utf8_lossy(&e)));
        assert!(original.accepts(decoded.as_bytes()), "{decoded:?}");
        assert_eq!(json_escape_bytes(decoded.as_bytes()), e);
    }
    for yes in [&br#"\"\\\n\t\u0000"#[..], br#"\u001b\u001f/"#, "é😀\u{7f}".as_bytes(), b""] {
        assert!(escaped.accepts(yes), "{:?}", String::from_utf8_lossy(yes));
    }
    // Raw quotes, lone backslashes, raw controls, and spellings other than serde_json's.
    for no in [&b"\""[..], b"a\"", b"\\", b"a\\", b"\n", b"\x01", br"\/", br"\u000a", br"\u001B", br"\u00", br"\x", br"\U001b", br"\u0061"] {
        assert!(!escaped.accepts(no), "{:?}", String::from_utf8_lossy(no));
    }
    // The length bound holds on the decoded text: six sentences' bytes, not six escapes'.
    assert!(escaped.accepts(br#"\"\"\"\"\""#) && !escaped.accepts(br#"\"\"\"\"\"\""#));
}

#[test]
fn an_escaped_dfa_keeps_the_state_limit() {
    let small = DfaConfig { max_states: 40, ..DfaConfig::default() };
    let d = Dfa::from_regex("[\\x00-\\x1f]{30}", &DfaConfig::default()).unwrap();
    assert!(d.num_states() <= 40);
    assert!(matches!(d.json_escaped(&small), Err(GrammarError::TooLarge { .. })));
}

/// s ::= item*; item ::= "(" s ")" | [a-c] | '"' | '\' | "\n" | 0x01 | "é": text over that
/// alphabet whose parentheses balance.
fn nested(b: &mut RtnBuilder) -> grammar_engine::RuleId {
    let s = b.declare("s");
    let item = b.declare("item");
    b.define(s, Expr::repeat(Expr::Call(item), 0, None));
    b.define(
        item,
        Expr::union(vec![
            Expr::concat(vec![Expr::literal("("), Expr::Call(s), Expr::literal(")")]),
            Expr::regex("[a-c\"\\\\\\n\\x01]|é"),
        ]),
    );
    s
}

fn nested_reference(text: &str) -> bool {
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            'a'..='c' | '"' | '\\' | '\n' | '\u{1}' | 'é' => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0
}

fn nested_sentence(rng: &mut Rng, depth: usize) -> String {
    let atoms = ["a", "b", "c", "\"", "\\", "\n", "\u{1}", "é"];
    (0..rng.below(4))
        .map(|_| {
            if depth > 0 && rng.below(3) == 0 {
                format!("({})", nested_sentence(rng, depth - 1))
            } else {
                atoms[rng.below(atoms.len())].to_string()
            }
        })
        .collect()
}

#[test]
fn escaping_rules_keeps_calls_as_calls() {
    let mut b = RtnBuilder::new();
    let s = nested(&mut b);
    let escaped = b.json_escape(&Expr::Call(s), &DfaConfig::default()).unwrap();
    let Expr::Call(start) = escaped else { panic!("the escape of a call is a call, got {escaped:?}") };
    assert_ne!(start, s);
    let build = |rule| Grammar::from_rules(vocab(), &b, rule, "test", String::new(), SpecialTokens::default(), &GrammarConfig::default()).unwrap();
    let (original, g) = (build(s), build(start));
    assert!(original.is_pushdown() && g.is_pushdown());
    let mut rng = Rng(3);
    for _ in 0..200 {
        let w = nested_sentence(&mut rng, 4);
        assert!(nested_reference(&w));
        assert_eq!(g.check_text(&serde_escape(&w)), Ok(()), "{w:?}");
        assert_eq!(original.check_text(w.as_bytes()), Ok(()), "{w:?}");
    }
    for _ in 0..60 {
        let e = grammar_walk(&g, &mut rng, 40);
        let decoded = decode(&e).unwrap_or_else(|| panic!("{:?} is no JSON string content", String::from_utf8_lossy(&e)));
        assert!(nested_reference(&decoded), "{decoded:?}");
    }
    // 30 levels deep, escaped inside: the recursion is unbounded still.
    let deep = format!("{}\"{}", "(".repeat(30), ")".repeat(30));
    assert_eq!(g.check_text(&serde_escape(&deep)), Ok(()));
    for no in [&b"(\")"[..], b"(\\)", b"(\n)", b"(a))", b"\\u0002"] {
        assert!(g.check_text(no).is_err(), "{:?}", String::from_utf8_lossy(no));
    }
}

#[test]
fn a_rule_without_a_body_stays_an_error_of_the_build() {
    let mut b = RtnBuilder::new();
    let a = b.declare("a");
    let missing = b.declare("missing");
    b.define(a, Expr::concat(vec![Expr::literal("\""), Expr::Call(missing)]));
    let Expr::Call(start) = b.json_escape(&Expr::Call(a), &DfaConfig::default()).unwrap() else { panic!() };
    let e = Grammar::from_rules(vocab(), &b, start, "test", String::new(), SpecialTokens::default(), &GrammarConfig::default()).unwrap_err();
    assert!(matches!(&e, GrammarError::InvalidGrammar { rule: Some(r), .. } if r == "missing"), "{e}");
    let e = b.json_escape(&Expr::Call(grammar_engine::RuleId::new(99)), &DfaConfig::default()).unwrap_err();
    assert!(matches!(e, GrammarError::InvalidGrammar { .. }), "{e}");
}

fn structure(spec: Value) -> Result<Grammar, GrammarError> {
    Grammar::from_structure(vocab(), &spec, &JsonSchemaOptions::default(), &GrammarConfig::default())
}

const SUMS: &str = r#"
start: sum
sum: term ("+" term)*
term: NAME | STRING | "(" sum ")"
NAME: /[a-z]+/
STRING: /"[^"\\\n]*"/
%ignore /[ \t\n]/
"#;

#[test]
fn a_lark_grammar_as_a_json_string() {
    let g = structure(json!(["{\"input\": ", {"json_string": {"lark": SUMS}}, "}"])).unwrap();
    assert!(g.is_pushdown());
    let original = Grammar::from_lark(vocab(), SUMS, &GrammarConfig::default()).unwrap();
    for sentence in ["a", "a + \"b c\"", "(x+\"y\")\t+\n(((z)))"] {
        assert_eq!(original.check_text(sentence.as_bytes()), Ok(()), "{sentence:?}");
        let call = serde_json::to_string(&json!({"input": sentence})).unwrap().replace("\":\"", "\": \"");
        assert_eq!(g.check_text(call.as_bytes()), Ok(()), "{call}");
    }
    assert!(g.check_text(br#"{"input": "a+"b""}"#).is_err());
    assert!(g.check_text(br#"{"input": "a +"}"#).is_err());
    let mut rng = Rng(5);
    for _ in 0..40 {
        let text = grammar_walk(&g, &mut rng, 60);
        let value: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&text)));
        let input = value["input"].as_str().unwrap();
        assert_eq!(original.check_text(input.as_bytes()), Ok(()), "{input:?}");
    }
}

#[test]
fn a_regex_and_free_text_as_json_strings() {
    let g = structure(json!({"json_string": {"regex": "[0-9]+\n[a-z\"]*"}})).unwrap();
    assert!(!g.is_pushdown());
    assert_eq!(g.check_text(br#""12\nab\"c""#), Ok(()));
    for no in [&br#""12\nab"c""#[..], b"\"12\nab\"", br#"12\nab"#, br#""12\u000aab""#] {
        assert!(g.check_text(no).is_err(), "{:?}", String::from_utf8_lossy(no));
    }
    let g = structure(json!({"json_string": {"free_text": true}})).unwrap();
    assert_eq!(g.check_text("\"any \\\"text\\\" \\u0007 é\"".as_bytes()), Ok(()));
    assert!(g.check_text(b"\"a\"b\"").is_err());
}

#[test]
fn errors_inside_a_json_string_are_located() {
    match structure(json!(["x", {"json_string": {"lark": "start: foo\n"}}])).unwrap_err() {
        GrammarError::InStructure { path, error } => {
            assert_eq!(path, "#/1/json_string/lark");
            assert!(matches!(*error, GrammarError::InvalidGrammar { .. }), "{error}");
        }
        other => panic!("{other}"),
    }
    match structure(json!({"json_string": ["a", {"token": "[TOOL_CALLS]"}]})).unwrap_err() {
        GrammarError::InStructure { path, error } => {
            assert_eq!(path, "#/json_string");
            assert!(matches!(*error, GrammarError::NotText { .. }), "{error}");
        }
        other => panic!("{other}"),
    }
    let e = structure(json!({"json_string": "a", "max": 3})).unwrap_err();
    assert!(matches!(e, GrammarError::InvalidStructure { .. }), "{e}");
}
