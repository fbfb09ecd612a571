use super::*;

fn lang(pattern: &str) -> Option<Dfa> {
    let node = pattern::parse(pattern).unwrap();
    search_language(&node, &Ctx::root(), &DfaConfig::default()).unwrap().to_dfa(&DfaConfig::default()).unwrap()
}

/// Checks the pattern against decoded strings (spelled canonically here).
fn check(pattern: &str, yes: &[&str], no: &[&str]) {
    let d = lang(pattern);
    let accepts = |s: &str| {
        d.as_ref().is_some_and(|d| {
            let t = d.walk(d.start(), canonical::spell(s).as_bytes());
            !t.is_dead() && d.is_accepting(t)
        })
    };
    for s in yes {
        assert!(accepts(s), "{pattern:?} should match {s:?}");
    }
    for s in no {
        assert!(!accepts(s), "{pattern:?} should not match {s:?}");
    }
}

#[test]
fn plain_alternatives_share_one_search() {
    let words = ["Red", "Blue", "Yellow", "Gold", "Silver", "Crystal", "Ruby", "Sapphire", "Emerald", "Pearl", "Black", "White"];
    let pattern = words.join("|");
    check(&pattern, &["Red", "a Pearl!", "GoldRuby", "xxWhite"], &["", "Re d", "gold", "Whit"]);
    // Built as one union of `any*word any*`, the determinization tracks which words have
    // matched so far (up to 2^12 subsets) and runs past a small state limit; as
    // `any*(w1|w2|…)any*` it needs about as many states as the words have letters.
    let small = DfaConfig { max_states: 1_000, ..DfaConfig::default() };
    let node = pattern::parse(&pattern).unwrap();
    let d = search_language(&node, &Ctx::root(), &small).unwrap().to_dfa(&small).unwrap().unwrap();
    assert!(d.num_states() < 100, "{} states", d.num_states());
    // Anchored and unanchored alternatives keep their own anchors.
    check("^ab|cd$|ef", &["abx", "xcd", "xefx"], &["xab", "cdx", "e f"]);
}

#[test]
fn search_is_unanchored_unless_anchored() {
    check("a+", &["a", "xxaayy", "ba"], &["", "bbb"]);
    check("^a", &["a", "abc"], &["ba", ""]);
    check("a$", &["a", "ba"], &["ab", "a\n"]);
    check("^abc$", &["abc"], &["abc\n", "xabc", "abcx"]);
    check("^a|b$", &["ab", "xb", "a", "axx"], &["ba", "xbx", "x"]);
    check("^(a|b)$", &["a", "b"], &["ab", "xa"]);
    check("", &["", "anything"], &[]);
}

#[test]
fn encoded_characters() {
    check("^a\"b$", &["a\"b"], &["ab", "a\\\"b"]);
    check("^\\t$", &["\t"], &["\\t", "t"]);
    check("^\\\\$", &["\\"], &["\\\\", ""]);
    check("^.$", &["\u{1}", "é", "\u{7f}"], &["\n", "\r", "\u{2028}", "ab"]);
    check("^[^a]$", &["\n", "\"", "\u{0}"], &["a"]);
    check("^🐲*$", &["", "🐲", "🐲🐲"], &["🐉", "D"]);
}

#[test]
fn assertions_in_the_middle() {
    check("(^|,)x(,|$)", &["x", "a,x", "x,b", "a,x,b"], &["ax", "xa", "a,xb"]);
    check("a^b", &[], &["ab", "a^b", ""]);
    check("a$|b", &["a", "xa", "b", "bx"], &["ax"]);
    check(r"\bcat\b", &["cat", "a cat.", "(cat)"], &["cats", "concat", "écat", "caté"]);
    check(r"\Bat", &["cat"], &["at", " at", "éat"]);
    check(r"^\B$", &[], &[""]);
    check(r"^x\B", &["xy"], &["x", "x y"]);
}

#[test]
fn lookaround_at_the_edges() {
    check("^(?=.*[A-Z])(?=.*[0-9]).{4,}$", &["abC1", "1XYZ"], &["abc1", "ABCD", "A1"]);
    check("^(?!foo).*$", &["fo", "bar", "xfoo"], &["foo", "foobar"]);
    check("^.*(?<!\\.)$", &["a", "", "a.b"], &["a."]);
    check("^[a-z]+(?<=x)$", &["ax", "x"], &["xa"]);
    check("^(?!(?=a)b)c", &["c"], &["b"]);
    let node = pattern::parse("a(?=b)").unwrap();
    assert!(matches!(
        search_language(&node, &Ctx::root(), &DfaConfig::default()),
        Err(GrammarError::UnsupportedSchemaKeyword { .. })
    ));
}

#[test]
fn empty_classes_and_dead_patterns() {
    assert!(lang("[]").is_none());
    assert!(lang("^$a").is_none());
    check("[^]", &["\n", "x"], &[""]);
}
