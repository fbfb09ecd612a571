//! Regex to DFA through the public face: full-match semantics, live states, forced bytes,
//! byte restriction, minimization, the states-reached counter and typed errors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use grammar_engine::{Dfa, DfaConfig, GrammarError, StateId};

fn dfa(p: &str) -> Dfa {
    Dfa::from_regex(p, &DfaConfig::default()).unwrap()
}

fn full_match(d: &Dfa, s: &str) -> bool {
    let t = d.walk(d.start(), s.as_bytes());
    !t.is_dead() && d.is_accepting(t)
}

#[test]
fn full_match_semantics() {
    let d = dfa("[0-9]{4}");
    assert!(full_match(&d, "2024"));
    assert!(!full_match(&d, "202"));
    assert!(!full_match(&d, "20245"));
    assert_eq!(d.walk(d.start(), b"20245"), StateId::DEAD);
    assert_eq!(d.walk(d.start(), b"x"), StateId::DEAD);
    assert_eq!(d.byte_distance(d.start()), 4);
    let d = dfa("a|ab");
    assert!(full_match(&d, "a") && full_match(&d, "ab"));
}

#[test]
fn every_state_is_live() {
    let d = dfa("(ab|cd)*e|f[0-9]+");
    for s in (0..d.num_states() as u32).map(StateId::new) {
        assert!(d.byte_distance(s) != u32::MAX);
    }
}

#[test]
fn unicode_and_forced_bytes() {
    let d = dfa("é+");
    assert!(full_match(&d, "éé"));
    assert_eq!(d.forced_bytes(d.start()), "é".as_bytes());
    let d = dfa(r#"\{"name":"[a-z]+"\}"#);
    assert_eq!(d.forced_bytes(d.start()), br#"{"name":""#);
    let d = dfa("abc|abd");
    assert_eq!(d.forced_bytes(d.start()), b"ab");
    let d = dfa("x?");
    assert_eq!(d.forced_bytes(d.start()), b"");
}

#[test]
fn restricting_bytes_prunes_what_needs_them() {
    let d = dfa("a[bc]+|x");
    let mut allowed = [true; 256];
    allowed[b'b' as usize] = false;
    let r = d.restrict_bytes(&allowed).unwrap();
    assert!(full_match(&r, "acc") && full_match(&r, "x") && !full_match(&r, "ab"));
    assert_eq!(r.walk(r.start(), b"ab"), StateId::DEAD);
    allowed[b'c' as usize] = false;
    allowed[b'x' as usize] = false;
    assert!(d.restrict_bytes(&allowed).is_none());
    assert!(d.uses_byte(b'b') && !d.uses_byte(b'z'));
}

#[test]
fn minimization_merges_equivalent_states_and_keeps_the_language() {
    // Both branches continue identically after their first byte.
    let d = dfa("(a|b)[0-9]{3}|c[0-9]{3}");
    assert_eq!(d.num_states(), 5);
    for (s, ok) in [("a123", true), ("c999", true), ("b12", false), ("d123", false)] {
        assert_eq!(full_match(&d, s), ok, "{s}");
    }
}

#[test]
fn a_determinization_notes_the_states_it_reached() {
    let reached = Arc::new(AtomicU64::new(0));
    let config = DfaConfig { states_reached: Some(reached.clone()), ..DfaConfig::default() };
    let d = Dfa::from_regex("[a-z]{1,5}@x", &config).unwrap();
    assert_eq!(reached.load(Ordering::Relaxed), d.num_states() as u64);
    let small = DfaConfig { max_states: 10, states_reached: Some(reached.clone()), ..DfaConfig::default() };
    reached.store(0, Ordering::Relaxed);
    assert!(Dfa::from_regex("[a-z]{1,40}", &small).is_err());
    assert!(reached.load(Ordering::Relaxed) > 10, "the failed attempt's size is known");
}

#[test]
fn errors() {
    let cfg = DfaConfig::default();
    match Dfa::from_regex("ab(c", &cfg) {
        Err(GrammarError::InvalidRegex { offset, .. }) => assert_eq!(offset, 2),
        other => panic!("{other:?}"),
    }
    assert!(matches!(Dfa::from_regex(r"(a)\1", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
    assert!(matches!(Dfa::from_regex(r"a(?=b)", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
    assert!(matches!(Dfa::from_regex(r"\bfoo", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
    assert!(matches!(Dfa::from_regex(r"[^\s\S]", &cfg), Err(GrammarError::EmptyLanguage { .. })));
    let small = DfaConfig { max_states: 10, ..DfaConfig::default() };
    assert!(matches!(Dfa::from_regex("[a-z]{40}", &small), Err(GrammarError::TooLarge { .. })));
    let tiny = DfaConfig { max_states: 100_000, build_size_limit: 10_000, ..DfaConfig::default() };
    assert!(matches!(Dfa::from_regex("[a-z]{500}", &tiny), Err(GrammarError::TooLarge { .. })));
}

/// Every non-empty ordered subsequence of `items` joined by `sep`, spelled as strings.
fn subsequences(items: &[&str], sep: &str) -> Vec<String> {
    (1u32..1 << items.len())
        .map(|set| items.iter().enumerate().filter(|(i, _)| set >> i & 1 == 1).map(|(_, s)| *s).collect::<Vec<_>>().join(sep))
        .collect()
}

#[test]
fn a_subsequence_is_every_ordered_choice_of_its_items() {
    use grammar_engine::Expr;
    let config = DfaConfig::default();
    let sep = || Expr::regex(" ?, ?");
    // Items that share prefixes and suffixes, so a wrong join of first and later items shows.
    let items = ["ab", "a", "b", "ba", "abc", "c", "cab"];
    for k in 1..=items.len() {
        let exprs: Vec<Expr> = items[..k].iter().map(|s| Expr::literal(s)).collect();
        let d = Expr::subsequence(exprs, sep()).to_dfa(&config).unwrap().unwrap();
        // The same language as the union of every choice, listed.
        let listed: Vec<Expr> = subsequences(&items[..k], " , ").iter().map(|s| Expr::regex(s.replace(' ', " ?"))).collect();
        let want = Expr::union(listed).to_dfa(&config).unwrap().unwrap();
        for (a, b) in [(&d, &want), (&want, &d)] {
            let extra = Expr::Dfa(std::rc::Rc::new(a.clone())).minus(&Expr::Dfa(std::rc::Rc::new(b.clone())), &config).unwrap();
            assert!(extra.is_empty(), "{k} items: the languages differ");
        }
        for s in subsequences(&items[..k], ",") {
            assert!(full_match(&d, &s), "{s}");
        }
        assert!(!full_match(&d, ""));
        if k >= 2 {
            assert!(!full_match(&d, &format!("{},{}", items[1], items[0])), "out of order");
            assert!(!full_match(&d, &format!("{},", items[0])), "a trailing separator");
        }
    }
}

/// Whether two DFAs accept the same strings: neither minus the other has a string.
fn same_language(a: Dfa, b: Dfa) -> bool {
    use grammar_engine::Expr;
    let config = DfaConfig::default();
    let (a, b) = (Expr::Dfa(std::rc::Rc::new(a)), Expr::Dfa(std::rc::Rc::new(b)));
    a.minus(&b, &config).unwrap().is_empty() && b.minus(&a, &config).unwrap().is_empty()
}

#[test]
fn regex_trees_compile_to_the_language_their_text_spells() {
    use grammar_engine::Expr;
    let config = DfaConfig::default();
    let string = r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#;
    // Leaves of every kind under every operator: literals, Unicode classes, an inline flag that
    // ends with its leaf, counted and open repeats, a union inside a repeat.
    let tree = Expr::concat(vec![
        Expr::regex(r"\{"),
        Expr::union(vec![Expr::literal("\"a\""), Expr::regex(string), Expr::regex(r"\p{Greek}+")]),
        Expr::regex(":"),
        Expr::repeat(Expr::regex("[0-9]"), 1, Some(3)),
        Expr::regex("(?i)ab"),
        Expr::regex("c"),
        Expr::repeat(Expr::union(vec![Expr::regex(","), Expr::regex("[é-ü]")]), 0, None),
        Expr::regex(r"\}"),
    ]);
    let text = format!(r#"\{{(?:"a"|{string}|\p{{Greek}}+):[0-9]{{1,3}}(?i:ab)c(?:,|[é-ü])*\}}"#);
    let built = tree.to_dfa(&config).unwrap().unwrap();
    assert!(built.accepts("{\"x\":12ABc,ü}".as_bytes()) && !built.accepts(b"{\"x\":12abC}"));
    assert!(same_language(built, dfa(&text)));
    // The same tree beside a DFA leaf: its regex-only parts are built on their own, then glued.
    let glued = Expr::concat(vec![tree.clone(), Expr::Dfa(std::rc::Rc::new(dfa("!")))]);
    assert!(same_language(glued.to_dfa(&config).unwrap().unwrap(), dfa(&format!("{text}!"))));
    // A leaf that does not parse is the whole regex's error, as its text would give.
    let bad = Expr::concat(vec![Expr::regex("a"), Expr::regex("b(")]);
    assert!(matches!(bad.to_dfa(&config), Err(GrammarError::InvalidRegex { .. })));
    // No string: an empty leaf in a sequence.
    assert!(Expr::Concat(vec![Expr::regex("a"), Expr::Empty].into()).to_dfa(&config).unwrap().is_none());
    // A tree nested deeper than trees are put together from their leaves: parsed as text.
    let mut deep = Expr::regex("a");
    for _ in 0..80 {
        deep = Expr::union(vec![Expr::concat(vec![Expr::literal("x"), deep]), Expr::literal("b")]);
    }
    assert!(same_language(deep.to_dfa(&config).unwrap().unwrap(), dfa("x{80}a|x{0,79}b")));
}
