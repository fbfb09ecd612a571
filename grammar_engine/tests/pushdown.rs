//! Pushdown grammars against an independent recognizer: nested lists of numbers, walked at
//! random, every token of the vocabulary checked at every step (mask, advance, EOS, budget);
//! and the typed refusals (undefined rules, left recursion, no finite string).

use std::sync::Arc;

use grammar_engine::{Expr, Family, Grammar, GrammarConfig, GrammarError, RtnBuilder, SpecialTokens, StateId, TokenId, TokenSpec, Vocabulary};

fn vocab(tokens: &[&str]) -> Arc<Vocabulary> {
    let mut specs: Vec<Option<TokenSpec>> =
        tokens.iter().map(|t| Some(TokenSpec { bytes: t.as_bytes().to_vec(), special: false })).collect();
    specs.push(Some(TokenSpec { bytes: b"</s>".to_vec(), special: true }));
    Arc::new(Vocabulary::new(specs, vec![TokenId::new(tokens.len() as u32)], Family::Raw, None).unwrap())
}

/// Single characters (so every byte is a token) and tokens that span nesting levels.
fn list_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<String> = (32u8..127).map(|b| (b as char).to_string()).collect();
    for t in ["[[", "]]", "],", ",[", "1]", "11", "[1", "]]]", "1,1", "[]", "],[", "[[[", "1]]", "]x"] {
        toks.push(t.to_string());
    }
    let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
    vocab(&refs)
}

/// v ::= "[" (v ("," v)*)? "]" | "1"+
fn list_grammar(v: &Arc<Vocabulary>) -> Grammar {
    let mut b = RtnBuilder::new();
    let value = b.declare("value");
    let items = Expr::concat(vec![Expr::Call(value), Expr::repeat(Expr::concat(vec![Expr::literal(","), Expr::Call(value)]), 0, None)]);
    let list = Expr::concat(vec![Expr::literal("["), Expr::optional(items), Expr::literal("]")]);
    b.define(value, Expr::union(vec![list, Expr::regex("1+")]));
    Grammar::from_rules(v.clone(), &b, value, "test", "v".into(), SpecialTokens::default(), &GrammarConfig::default()).unwrap()
}

/// The reference: is `text` a prefix of a nested list, is it a whole one, and how many bytes
/// at least complete it.
fn reference(text: &[u8]) -> Option<(bool, usize)> {
    // Expect: 0 a value, 1 after a value ("," or "]" inside a list), 2 after "[" (a value or "]"),
    // 3 inside digits.
    let mut depth = 0usize;
    let mut expect = 0u8;
    for &c in text {
        match (expect, c) {
            (0 | 2, b'[') => {
                depth += 1;
                expect = 2;
            }
            (2, b']') => {
                depth -= 1;
                expect = 1;
            }
            (0 | 2, b'1') => expect = 3,
            (3, b'1') => {}
            (1 | 3, b',') if depth > 0 => expect = 0,
            (1 | 3, b']') if depth > 0 => {
                depth -= 1;
                expect = 1;
            }
            _ => return None,
        }
    }
    let whole = depth == 0 && (expect == 1 || expect == 3);
    let rest = match expect {
        0 => 1 + depth,
        2 => depth,
        _ => depth,
    };
    Some((whole, rest))
}

/// A seeded generator of indices below `n`.
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

#[test]
fn random_walks_agree_with_the_reference_at_every_token() {
    let v = list_vocab();
    let g = list_grammar(&v);
    assert!(g.is_pushdown());
    let eos = v.eos_ids()[0];
    let mut rand = xorshift(12345u64);
    for _walk in 0..60 {
        let mut s = g.initial_state();
        let mut text: Vec<u8> = Vec::new();
        for _step in 0..40 {
            let mask = g.token_bitmask(s).unwrap().to_vec();
            let (whole, rest) = reference(&text).unwrap();
            assert_eq!(g.is_accepting(s).unwrap(), whole, "{:?}", String::from_utf8_lossy(&text));
            assert_eq!(bit(&mask, eos), whole);
            assert_eq!(g.min_tokens_to_accept(s).unwrap() as usize, rest, "{:?}", String::from_utf8_lossy(&text));
            let mut allowed = Vec::new();
            for t in 0..v.size() as u32 {
                let t = TokenId::new(t);
                if v.is_eos(t) {
                    continue;
                }
                let mut next = text.clone();
                next.extend_from_slice(v.token_bytes(t).unwrap());
                let ok = reference(&next).is_some();
                assert_eq!(bit(&mask, t), ok, "token {:?} after {:?}", String::from_utf8_lossy(v.token_bytes(t).unwrap()), String::from_utf8_lossy(&text));
                assert_eq!(g.advance(s, t).is_ok(), ok);
                if ok {
                    allowed.push(t);
                }
            }
            // The budget-aware mask: every token it keeps can still finish in time, and it keeps
            // one whenever the output can finish at all.
            for budget in 0..6u32 {
                let within = g.token_bitmask_within(s, budget).unwrap();
                let mut kept = 0;
                for &t in &allowed {
                    if bit(&within, t) {
                        kept += 1;
                        let mut next = text.clone();
                        next.extend_from_slice(v.token_bytes(t).unwrap());
                        assert!(reference(&next).unwrap().1 <= budget as usize);
                    }
                }
                if rest >= 1 && rest <= budget as usize + 1 {
                    assert!(kept > 0, "budget {budget} after {:?}", String::from_utf8_lossy(&text));
                }
            }
            if allowed.is_empty() || (whole && rand(4) == 0) {
                break;
            }
            let t = allowed[rand(allowed.len())];
            s = g.advance(s, t).unwrap();
            text.extend_from_slice(v.token_bytes(t).unwrap());
        }
        assert_eq!(g.check_text(&text).is_ok(), reference(&text).unwrap().0);
    }
    // Deep nesting has no limit but the text: 40 levels in and out.
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    assert!(g.check_text(deep.as_bytes()).is_ok());
    assert_eq!(g.check_text(format!("{}1{}", "[".repeat(40), "]".repeat(39)).as_bytes()), Err(80));
    assert_eq!(g.check_text(b"[1]]"), Err(3));
}

#[test]
fn the_same_reading_is_the_same_state_and_masks_are_shared() {
    let v = list_vocab();
    let g = list_grammar(&v);
    let tok = |s: &str| (0..v.size() as u32).map(TokenId::new).find(|&t| v.token_bytes(t) == Some(s.as_bytes())).unwrap();
    let walk = |toks: &[&str]| toks.iter().fold(g.initial_state(), |s, t| g.advance(s, tok(t)).unwrap());
    assert_eq!(walk(&["[", "[", "1"]), walk(&["[[", "1"]));
    assert_eq!(walk(&["[1", ",", "1"]), walk(&["[", "1,1"]));
    let (a, b) = (walk(&["[", "[", "1"]), walk(&["[", "[", "[", "1"]));
    assert_ne!(a, b);
    // Inside digits, deeper than the longest run of closing brackets a token holds (3), the same
    // tokens are allowed: one mask; shallower, "]]]" is allowed or not.
    let at = |depth: usize| g.mask_id(walk(&vec!["["; depth].into_iter().chain(["1"]).collect::<Vec<_>>())).unwrap();
    assert_eq!(at(4), at(5));
    assert_ne!(at(2), at(3));
    assert!(g.state(g.num_states() as i64).is_err() && g.state(-1).is_err());
    let s: StateId = walk(&["[", "1"]);
    assert_eq!(g.forced_bytes(walk(&["[", "1", ","])).unwrap(), b"");
    assert_eq!(g.forced_bytes(s).unwrap(), b"");
}

fn build(rules: &[(&str, Expr)], start: usize) -> Result<Grammar, GrammarError> {
    let v = list_vocab();
    let mut b = RtnBuilder::new();
    let ids: Vec<_> = rules.iter().map(|(n, _)| b.declare(n)).collect();
    for (id, (_, body)) in ids.iter().zip(rules) {
        b.define(*id, body.clone());
    }
    Grammar::from_rules(v, &b, ids[start], "test", String::new(), SpecialTokens::default(), &GrammarConfig::default())
}

#[test]
fn bad_rule_sets_are_typed_errors() {
    use grammar_engine::RuleId;
    // Left recursion: a ::= a "x" | "y".
    let a = RuleId::new(0);
    let e = build(&[("a", Expr::union(vec![Expr::concat(vec![Expr::Call(a), Expr::literal("x")]), Expr::literal("y")]))], 0).unwrap_err();
    assert!(matches!(&e, GrammarError::InvalidGrammar { rule: Some(r), .. } if r == "a"), "{e}");
    // Through a nullable rule: a ::= b a "x" | "y"; b ::= "" | "(" b ")".
    let (a, b) = (RuleId::new(0), RuleId::new(1));
    let e = build(
        &[
            ("a", Expr::union(vec![Expr::concat(vec![Expr::Call(b), Expr::Call(a), Expr::literal("x")]), Expr::literal("y")])),
            ("b", Expr::union(vec![Expr::epsilon(), Expr::concat(vec![Expr::literal("("), Expr::Call(b), Expr::literal(")")])])),
        ],
        0,
    )
    .unwrap_err();
    assert!(e.to_string().contains("left recursion"), "{e}");
    // No finite string: a ::= "(" a ")".
    let e = build(&[("a", Expr::concat(vec![Expr::literal("("), Expr::Call(a), Expr::literal(")")]))], 0).unwrap_err();
    assert!(matches!(e, GrammarError::EmptyLanguage { .. }), "{e}");
    // A rule used and never defined.
    let mut bld = RtnBuilder::new();
    let a = bld.declare("a");
    let missing = bld.declare("missing");
    bld.define(a, Expr::concat(vec![Expr::literal("x"), Expr::Call(missing)]));
    let e = Grammar::from_rules(list_vocab(), &bld, a, "test", String::new(), SpecialTokens::default(), &GrammarConfig::default()).unwrap_err();
    assert!(matches!(&e, GrammarError::InvalidGrammar { rule: Some(r), .. } if r == "missing"), "{e}");
    // Without recursion, rules inline into one DFA.
    let b = RuleId::new(1);
    let g = build(&[("a", Expr::concat(vec![Expr::Call(b), Expr::literal("!")])), ("b", Expr::regex("[0-9]+"))], 0).unwrap();
    assert!(!g.is_pushdown() && g.check_text(b"12!").is_ok());
}

#[test]
fn ambiguity_and_nullable_rules_are_read_exactly() {
    use grammar_engine::RuleId;
    // s ::= a | c; a ::= "{" a "}" | "x"; c ::= "{" c "]" | "x": both readings until the close.
    let (s, a, c) = (RuleId::new(0), RuleId::new(1), RuleId::new(2));
    let g = build(
        &[
            ("s", Expr::union(vec![Expr::Call(a), Expr::Call(c)])),
            ("a", Expr::union(vec![Expr::concat(vec![Expr::literal("{"), Expr::Call(a), Expr::literal("}")]), Expr::literal("x")])),
            ("c", Expr::union(vec![Expr::concat(vec![Expr::literal("{"), Expr::Call(c), Expr::literal("]")]), Expr::literal("x")])),
        ],
        0,
    )
    .unwrap();
    let _ = s;
    assert!(g.check_text(b"{{x}}").is_ok() && g.check_text(b"{{x]]").is_ok());
    assert_eq!(g.check_text(b"{{x}]"), Err(4));
    // n ::= m "x"; m ::= "" | "(" m ")": a nullable recursive callee.
    let (n, m) = (RuleId::new(0), RuleId::new(1));
    let g = build(
        &[
            ("n", Expr::concat(vec![Expr::Call(m), Expr::literal("x")])),
            ("m", Expr::union(vec![Expr::epsilon(), Expr::concat(vec![Expr::literal("("), Expr::Call(m), Expr::literal(")")])])),
        ],
        0,
    )
    .unwrap();
    let _ = n;
    for ok in ["x", "()x", "((()))x"] {
        assert!(g.check_text(ok.as_bytes()).is_ok(), "{ok}");
    }
    for bad in ["", "(x", "())x", "()"] {
        assert!(g.check_text(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn shared_parts_of_an_expression_are_walked_once() {
    use grammar_engine::RuleId;
    // Each level uses the one below twice: 2^48 paths through 48 shared parts. Walking it as
    // a tree would not finish.
    let a = RuleId::new(0);
    let mut e = Expr::union(vec![Expr::Call(a), Expr::literal("z")]);
    for _ in 0..48 {
        e = Expr::union(vec![
            Expr::concat(vec![Expr::literal("x"), e.clone(), Expr::literal("y")]),
            Expr::concat(vec![Expr::literal("w"), e]),
        ]);
    }
    assert!(e.has_calls());
    assert_eq!(e.calls(), vec![a]);
    let replaced = e.substitute(&|r| (r == a).then(|| Expr::literal("q")));
    assert!(!replaced.has_calls());
    assert!(replaced.calls().is_empty());
    let kept = e.substitute(&|_| None);
    assert_eq!(kept.calls(), vec![a]);
}

/// A reference recognizer for the statement grammar of the next test: Earley's algorithm over
/// a grammar written out by hand (rules of symbols, a terminal being a byte test). Returns
/// whether `text` is a prefix of some sentence, and whether it is one.
fn earley(text: &[u8]) -> (bool, bool) {
    #[derive(Clone, Copy)]
    enum Sym {
        T(fn(u8) -> bool),
        N(usize),
    }
    use Sym::{N, T};
    // 0 root → stmt+, 1 stmts → ε | stmt stmts, 2 stmt, 3 expr, 4 term, 5 ident.
    let rules: Vec<(usize, Vec<Sym>)> = vec![
        (0, vec![N(2)]),
        (0, vec![N(2), N(0)]),
        (1, vec![]),
        (1, vec![N(2), N(1)]),
        (2, vec![T(|b| b == b'{'), N(1), T(|b| b == b'}')]),
        (2, vec![N(5), T(|b| b == b'='), N(3), T(|b| b == b';')]),
        (3, vec![N(4)]),
        (3, vec![N(4), T(|b| b == b'+'), N(3)]),
        (4, vec![N(5)]),
        (4, vec![T(|b| b == b'-'), N(4)]),
        (4, vec![T(|b| b == b'('), N(3), T(|b| b == b')')]),
        (5, vec![T(|b| b.is_ascii_lowercase())]),
        (5, vec![T(|b| b.is_ascii_lowercase()), N(5)]),
    ];
    let nullable = |n: usize| n == 1;
    // An item: (rule, dot, origin).
    let mut sets: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); text.len() + 1];
    for (r, (lhs, _)) in rules.iter().enumerate() {
        if *lhs == 0 {
            sets[0].push((r, 0, 0));
        }
    }
    for i in 0..=text.len() {
        let mut k = 0;
        while k < sets[i].len() {
            let (r, dot, origin) = sets[i][k];
            k += 1;
            let body = &rules[r].1;
            let add = |set: &mut Vec<(usize, usize, usize)>, item| {
                if !set.contains(&item) {
                    set.push(item);
                }
            };
            if dot == body.len() {
                let lhs = rules[r].0;
                let parents: Vec<_> = sets[origin].iter().copied().filter(|&(pr, pd, _)| matches!(rules[pr].1.get(pd), Some(N(n)) if *n == lhs)).collect();
                for (pr, pd, po) in parents {
                    add(&mut sets[i], (pr, pd + 1, po));
                }
                continue;
            }
            match body[dot] {
                N(n) => {
                    for (q, (lhs, _)) in rules.iter().enumerate() {
                        if *lhs == n {
                            add(&mut sets[i], (q, 0, i));
                        }
                    }
                    if nullable(n) {
                        add(&mut sets[i], (r, dot + 1, origin));
                    }
                }
                T(test) => {
                    if i < text.len() && test(text[i]) {
                        let item = (r, dot + 1, origin);
                        add(&mut sets[i + 1], item);
                    }
                }
            }
        }
        if i < text.len() && sets[i + 1].is_empty() {
            return (false, false);
        }
    }
    let whole = sets[text.len()].iter().any(|&(r, dot, origin)| rules[r].0 == 0 && dot == rules[r].1.len() && origin == 0);
    (true, whole)
}

#[test]
fn masks_of_tokens_that_pop_many_frames_agree_with_a_reference() {
    // Right recursion (tail calls: `-` term, expr's last term), a nullable repeat, and tokens that
    // end several rules at once (`a)));}}`): every mask is checked token by token against an
    // Earley recognizer, along random walks and down a deep fixed prefix.
    let mut toks: Vec<String> = "{}=;+-()abc".chars().map(String::from).collect();
    for t in ["a;", ";}", ");", "))", "a)", "a))", "})", "}}", ";}}", "--", "-(", "((", "a+", "+a", "ab", ")+", "=-", "a=", "{a", "a;}", "));}", ")+(", "a)));}}", "b;}}}", "ab=", "=(", "+-", "a+a"] {
        toks.push(t.to_string());
    }
    let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
    let v = vocab(&refs);
    let gbnf = "root ::= stmt+\nstmt ::= \"{\" stmt* \"}\" | ident \"=\" expr \";\"\nexpr ::= term (\"+\" term)*\nterm ::= ident | \"-\" term | \"(\" expr \")\"\nident ::= [a-z]+\n";
    let g = Grammar::from_gbnf(v.clone(), gbnf, &GrammarConfig::default()).unwrap();
    assert!(g.is_pushdown());
    let eos = v.eos_ids()[0];
    let check = |s: StateId, text: &[u8]| -> Vec<TokenId> {
        let mask = g.token_bitmask(s).unwrap().to_vec();
        let (prefix, whole) = earley(text);
        assert!(prefix);
        assert_eq!(bit(&mask, eos), whole, "EOS after {:?}", String::from_utf8_lossy(text));
        let mut allowed = Vec::new();
        for t in (0..v.size() as u32).map(TokenId::new).filter(|&t| !v.is_eos(t)) {
            let mut next = text.to_vec();
            next.extend_from_slice(v.token_bytes(t).unwrap());
            let ok = earley(&next).0;
            assert_eq!(bit(&mask, t), ok, "token {:?} after {:?}", String::from_utf8_lossy(v.token_bytes(t).unwrap()), String::from_utf8_lossy(text));
            if ok {
                allowed.push(t);
            }
        }
        // The budget-aware mask keeps only tokens after which the end is within the budget.
        for budget in 0..8u32 {
            let within = g.token_bitmask_within(s, budget).unwrap();
            for &t in &allowed {
                if bit(&within, t) {
                    assert!(g.min_tokens_to_accept(g.advance(s, t).unwrap()).unwrap() <= budget);
                }
            }
        }
        allowed
    };
    let mut rand = xorshift(99u64);
    for _walk in 0..40 {
        let (mut s, mut text) = (g.initial_state(), Vec::new());
        for _step in 0..40 {
            let allowed = check(s, &text);
            let t = allowed[rand(allowed.len())];
            s = g.advance(s, t).unwrap();
            text.extend_from_slice(v.token_bytes(t).unwrap());
        }
    }
    let tok = |s: &str| (0..v.size() as u32).map(TokenId::new).find(|&t| v.token_bytes(t) == Some(s.as_bytes())).unwrap();
    let deep = ["{", "{", "{", "a=", "(", "(", "-", "-", "(", "-(", "a", "+", "-", "-(", "(", "a"];
    let (mut s, mut text) = (g.initial_state(), Vec::new());
    for t in deep {
        check(s, &text);
        s = g.advance(s, tok(t)).unwrap();
        text.extend_from_slice(t.as_bytes());
    }
    check(s, &text);
}

#[test]
fn bytes_no_token_contains_are_cut_from_every_rule_and_the_rules_read_again() {
    // root ::= "(" inner ")"; inner ::= root | "b" "c" | "a" | "cc", with no token holding
    // "c": after the cut, "b" leads nowhere (a state that was live is not), and the
    // shortest way through "(" is "(a)", not "(cc)" priced as two bytes.
    let v = vocab(&["(", ")", "a", "b", "aaa"]);
    let mut b = RtnBuilder::new();
    let (root, inner) = (b.declare("root"), b.declare("inner"));
    b.define(root, Expr::concat(vec![Expr::literal("("), Expr::Call(inner), Expr::literal(")")]));
    b.define(inner, Expr::union(vec![Expr::Call(root), Expr::literal("bc"), Expr::literal("a"), Expr::literal("cc")]));
    let g = Grammar::from_rules(v.clone(), &b, root, "test", String::new(), SpecialTokens::default(), &GrammarConfig::default()).unwrap();
    assert!(g.is_pushdown());
    let tok = |s: &str| (0..v.size() as u32).map(TokenId::new).find(|&t| v.token_bytes(t) == Some(s.as_bytes())).unwrap();
    let open = g.advance(g.initial_state(), tok("(")).unwrap();
    let allowed: Vec<TokenId> = g.allowed_token_ids(open).unwrap();
    assert_eq!(allowed, vec![tok("("), tok("a")]);
    assert!(g.advance(open, tok("b")).is_err());
    assert_eq!(g.min_tokens_to_accept(open).unwrap(), 2);
    assert_eq!(g.min_tokens_to_accept(g.initial_state()).unwrap(), 3);
    let deeper = g.advance(open, tok("(")).unwrap();
    assert_eq!(g.min_tokens_to_accept(deeper).unwrap(), 3);
    assert!(!bit(&g.token_bitmask_within(deeper, 3).unwrap().to_vec(), tok("(")));
    // A grammar whose only string needs "c" has none left.
    let mut b = RtnBuilder::new();
    let (root, inner) = (b.declare("root"), b.declare("inner"));
    b.define(root, Expr::concat(vec![Expr::literal("("), Expr::Call(inner), Expr::literal(")")]));
    b.define(inner, Expr::union(vec![Expr::Call(root), Expr::literal("c")]));
    let e = Grammar::from_rules(v, &b, root, "test", String::new(), SpecialTokens::default(), &GrammarConfig::default()).unwrap_err();
    assert!(matches!(e, GrammarError::NotCompletable { .. }), "{e}");
}
