//! Lark grammars: what each construct accepts (literals, regexes, ranges, repetition counts,
//! `%ignore`, `%import common`, terminals built from terminals, `%json`, left recursion read as
//! repetition), and the typed errors with their line, column and rule.

use std::sync::Arc;

use grammar_engine::{Family, Grammar, GrammarConfig, GrammarError, TokenId, TokenSpec, Vocabulary};

/// Every byte as a token (as in a byte-level vocabulary), a few words, and `<|end|>` as a
/// special token and the end token.
fn vocab() -> Arc<Vocabulary> {
    let mut specs: Vec<Option<TokenSpec>> = (1u8..=255)
        .map(|b| Some(TokenSpec { bytes: vec![b], special: false }))
        .collect();
    for word in ["SELECT", "true", "null"] {
        specs.push(Some(TokenSpec { bytes: word.as_bytes().to_vec(), special: false }));
    }
    specs.push(Some(TokenSpec { bytes: "é".as_bytes().to_vec(), special: false }));
    specs.push(Some(TokenSpec { bytes: b"<|end|>".to_vec(), special: true }));
    let eos = TokenId::new(specs.len() as u32 - 1);
    Arc::new(Vocabulary::new(specs, vec![eos], Family::Raw, None).unwrap())
}

fn compile(text: &str) -> Grammar {
    match Grammar::from_lark(vocab(), text, &GrammarConfig::default()) {
        Ok(g) => g,
        Err(e) => panic!("{text:?} does not compile: {e}"),
    }
}

fn error(text: &str) -> (usize, usize, Option<String>, String) {
    match Grammar::from_lark(vocab(), text, &GrammarConfig::default()) {
        Ok(_) => panic!("{text:?} compiles"),
        Err(GrammarError::InvalidGrammar { syntax, line, column, rule, reason }) => {
            assert_eq!(syntax, "Lark");
            (line, column, rule, reason)
        }
        Err(other) => panic!("{text:?}: not an InvalidGrammar error: {other}"),
    }
}

#[track_caller]
fn accepts(g: &Grammar, yes: &[&str], no: &[&str]) {
    for t in yes {
        assert_eq!(g.check_text(t.as_bytes()), Ok(()), "should accept {t:?}");
    }
    for t in no {
        assert!(g.check_text(t.as_bytes()).is_err(), "should refuse {t:?}");
    }
}

#[test]
fn literals_and_case_insensitive_literals() {
    let g = compile("start: \"ab\" \"c\"i\n");
    accepts(&g, &["abc", "abC"], &["ab", "Abc", "ab c", "abcc"]);
    let g = compile(r#"start: "a\"b\\c\n\x41""# /* no final newline */);
    accepts(&g, &["a\"b\\c\nA"], &["a\"b\\c\\nA"]);
}

#[test]
fn regex_terminals_with_flags() {
    let g = compile("start: NAME \"=\" /[0-9]+/\nNAME: /[a-z_]\\w*/\n");
    accepts(&g, &["x=1", "a_b9=42"], &["x=", "9=1", "x = 1"]);
    let g = compile("start: /abc/i\n");
    accepts(&g, &["ABC", "aBc"], &["ab"]);
    let g = compile("start: /a.b/s\n");
    accepts(&g, &["a\nb", "axb"], &[]);
    let g = compile("start: /a.b/\n");
    accepts(&g, &["axb"], &["a\nb"]);
    // Verbose: blanks and comments vanish, blanks in a class stay.
    let g = compile("start: /a [ ]  b # the rest\n  c/x\n");
    accepts(&g, &["a bc"], &["abc", "a b c"]);
    // Python's syntax: a `[` in a class, a `{` that counts nothing, `\/`.
    let g = compile(r"start: /[[x]+\{\/}/" );
    accepts(&g, &["[x[{/}"], &[]);
}

#[test]
fn ranges_groups_and_optional_items() {
    let g = compile("start: (\"a\"..\"c\" | \"x\")+ [\"!\"] \"?\"?\n");
    accepts(&g, &["abc", "cx!", "a?", "b!?"], &["d", "!", "a!!"]);
}

#[test]
fn repetition_counts() {
    let g = compile("start: \"a\" ~ 3 \"b\"~1..2 \"c\"{2,} \"d\"{,1}\n");
    accepts(&g, &["aaabcc", "aaabbccccd"], &["aabcc", "aaabbbcc", "aaabc", "aaabccdd"]);
}

#[test]
fn multi_line_rules_and_comments() {
    let text = "// a comment\nstart: a\n     | b   // trailing\n\n     # another comment\n     | \"c\" -> see\n?a: \"a\"\n!b.2: \"b\"\n";
    let g = compile(text);
    accepts(&g, &["a", "b", "c"], &["d", "ab"]);
}

#[test]
fn terminals_from_terminals_and_literals() {
    let g = compile("start: NUM\nNUM: SIGN? DIGITS (\".\" DIGITS)?\nSIGN: \"+\" | \"-\"\nDIGITS: DIGIT+\nDIGIT: \"0\"..\"9\"\n%ignore \" \"\n");
    // Ignored text never enters a terminal.
    accepts(&g, &["-1.5", "  7  ", "+12"], &["- 1", "1 .5", "1."]);
}

#[test]
fn ignore_goes_before_every_terminal_and_at_the_end() {
    let g = compile("start: \"(\" item* \")\"\nitem: WORD | \"[\" item* \"]\"\nWORD: /[a-z]+/\n%ignore /[ \\t]+/\n%ignore COMMENT\nCOMMENT: /#[^\\n]*\\n/\n");
    assert!(g.is_pushdown());
    accepts(&g, &["(a b)", "  ( a [ b [c ] ] d )  ", "(a#note\n b)", "( #x\n)#y\n"], &["(a b) c", "(a b", "(ab c]"]);
    // No ignored text inside a terminal.
    let g = compile("start: \"ab\" WORD\nWORD: /[a-z]+/\n%ignore \" \"\n");
    accepts(&g, &["abc", "ab c", " ab c "], &["a bc", "ab c d"]);
}

#[test]
fn the_start_rule_gets_trailing_ignored_text_only_at_the_end() {
    // `start` is also called from inside: the inner call takes no trailing text of its own,
    // but ignored text before the inner terminals is there anyway.
    let g = compile("start: \"x\" | \"(\" start \")\"\n%ignore \" \"\n");
    accepts(&g, &["( x ) ", " ((x))", "x"], &["(x", ""]);
}

#[test]
fn imports_from_common() {
    let g = compile("start: SIGNED_NUMBER (\",\" SIGNED_NUMBER)*\n%import common.SIGNED_NUMBER\n%import common.WS\n%ignore WS\n");
    accepts(&g, &["1", "-2.5e3, 4 ,.5", "7., +8"], &["1,", "e5", "1 2"]);
    let g = compile("start: S\n%import common.ESCAPED_STRING -> S\n");
    accepts(&g, &[r#""""#, r#""a\"b""#, r#""\\""#], &[r#""a"b""#, r#""\""#, "\"a\nb\""]);
    let g = compile("start: (CNAME | INT | C_COMMENT)+\n%import common (CNAME, INT, C_COMMENT)\n");
    accepts(&g, &["_a1", "12/* x * / */", "/***/"], &["/* a */ */"]);
}

#[test]
fn recursion_stays_pushdown_and_direct_left_recursion_is_repetition() {
    let text = "?start: sum\n?sum: sum \"+\" product | sum \"-\" product | product\n?product: product \"*\" atom | atom\n?atom: INT | \"(\" sum \")\"\n%import common.INT\n%import common.WS_INLINE\n%ignore WS_INLINE\n";
    let g = compile(text);
    assert!(g.is_pushdown());
    accepts(&g, &["1+2*3", " ( 1 + 2 ) * 3 - 4 ", "((((7))))"], &["1+", "(1", "1 2", "+1"]);
}

#[test]
fn json_schema_inside_a_rule() {
    let g = compile("start: \"call \" %json {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}, \"required\": [\"n\"], \"additionalProperties\": false}\n");
    accepts(&g, &["call {\"n\":1}", "call {\"n\":-20}"], &["call {}", "call {\"n\":\"x\"}", "{\"n\":1}"]);
}

#[test]
fn token_references() {
    let g = compile("start: /[a-z]+/ <|end|>\n");
    assert!(!g.special_tokens().is_empty());
    let err = error("start: \"a\" <|nope|>\n");
    assert!(err.3.contains("no single token"), "{err:?}");
}

#[test]
fn non_ascii_text() {
    let g = compile("start: \"é\"+ /[à-ÿ]/\n");
    accepts(&g, &["éé\u{e0}"], &["e"]);
}

#[test]
fn syntax_errors_name_line_column_and_rule() {
    let cases: &[(&str, (usize, usize), Option<&str>, &str)] = &[
        ("start: \"a\"\n  | \"b\n", (2, 5), Some("start"), "unterminated string"),
        ("start: item\n", (1, 8), Some("item"), "never defined"),
        ("start: ITEM\n", (1, 8), Some("ITEM"), "never defined"),
        ("begin: \"x\"\n", (0, 0), None, "no `start` rule"),
        ("start: \"z\"..\"a\"\n", (1, 8), Some("start"), "backwards"),
        ("start: \"a\" ~ 3..2\n", (1, 12), Some("start"), "below its minimum"),
        ("start: (\"a\" | \"b\"\n", (1, 8), Some("start"), "never closed"),
        ("start: \"a\"\nA: \"x\" A?\n", (2, 1), Some("A"), "recursive"),
        ("start: A\nA: B\nB: \"b\" A\n", (2, 1), Some("A"), "A -> B -> A"),
        ("start: A\nA: \"x\" start\n", (2, 8), Some("A"), "uses the rule `start`"),
        ("start: /(?<=a)b/\n", (1, 8), Some("start"), "look-around"),
        ("start: /(a)\\1/\n", (1, 8), Some("start"), "backreference"),
        ("start: /^a$/\n", (1, 8), Some("start"), "anchors"),
        ("start: /a(/\n", (1, 8), Some("start"), "invalid regex"),
        ("start: A\nA.2: \"a\"\n", (2, 2), Some("A"), "terminal priorities"),
        ("start: x{\"a\"}\nx{p}: p\n", (1, 9), Some("start"), "templates"),
        ("start: \"a\"\n%declare X\n", (2, 1), None, "%declare"),
        ("start: \"a\"\n%override start: \"b\"\n", (2, 1), None, "%override"),
        ("start: \"a\"\n%import python.NAME\n", (2, 9), None, "only Lark's `common`"),
        ("start: X\n%import common.NOPE -> X\n", (2, 9), Some("NOPE"), "no terminal `NOPE`"),
        ("start: \"a\"\nstart: \"b\"\n", (2, 1), Some("start"), "defined twice (first on line 1)"),
        ("start: ?\"a\"\n", (1, 8), Some("start"), "needs an item before it"),
        ("start: \"a\"+*\n", (1, 12), Some("start"), "misplaced operator"),
        ("Start: \"a\"\n", (1, 1), None, "neither"),
        ("start: %json {\"type\": \n", (1, 14), Some("start"), "invalid JSON"),
        ("start: %json {\"type\": \"nope\"}\n", (1, 8), Some("start"), "in `%json`"),
        ("start: A\nA: %json {}\n", (2, 4), Some("A"), "`%json` is a rule"),
        ("start: a\na: b \"x\" | \"y\"\nb: a \"z\"\n", (2, 1), Some("a"), "left recursion"),
        ("start: \"a\" name[lazy]\n", (1, 12), Some("name"), "never defined"),
        ("start[lazy]: \"a\"\n", (1, 6), Some("start"), "rule options"),
    ];
    for (text, (line, col), rule, fragment) in cases {
        let (l, c, r, reason) = error(text);
        assert!(reason.contains(fragment), "{text:?}: {reason:?} lacks {fragment:?}");
        assert_eq!((l, c, r.as_deref()), (*line, *col, *rule), "{text:?}: {reason}");
    }
}

#[test]
fn no_finite_string_is_an_empty_language() {
    let r = Grammar::from_lark(vocab(), "start: \"(\" start \")\"\n", &GrammarConfig::default());
    assert!(matches!(r, Err(GrammarError::EmptyLanguage { .. })), "{r:?}");
}
