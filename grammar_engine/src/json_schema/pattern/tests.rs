use super::*;

fn set_of(pattern: &str) -> ClassUnicode {
    match parse(pattern).unwrap() {
        Node::Set(s) => s,
        other => panic!("{pattern}: not a set: {other:?}"),
    }
}

fn contains(set: &ClassUnicode, c: char) -> bool {
    set.ranges().iter().any(|r| r.start() <= c && c <= r.end())
}

fn invalid(pattern: &str) -> bool {
    matches!(parse(pattern), Err(PatternError::Invalid { .. }))
}

fn unsupported(pattern: &str) -> bool {
    matches!(parse(pattern), Err(PatternError::Unsupported { .. }))
}

#[test]
fn ecma_class_escapes() {
    let d = set_of(r"\d");
    assert!(contains(&d, '7') && !contains(&d, '\u{7C0}') && !contains(&d, '٣'));
    let nd = set_of(r"\D");
    assert!(!contains(&nd, '7') && !contains(&nd, '\u{7C0}') && contains(&nd, 'a'));
    let w = set_of(r"\w");
    assert!(contains(&w, '_') && contains(&w, 'Z') && !contains(&w, 'é'));
    let nw = set_of(r"\W");
    assert!(!contains(&nw, 'é') && !contains(&nw, 'a') && contains(&nw, '-'));
    let s = set_of(r"\s");
    for c in ['\t', '\n', '\u{B}', '\u{C}', '\r', ' ', '\u{A0}', '\u{1680}', '\u{2000}', '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}', '\u{3000}'] {
        assert!(contains(&s, c), "{c:?}");
    }
    assert!(!contains(&s, '\u{FEFF}') && !contains(&s, '\u{1C}') && !contains(&s, '\u{85}'));
    let ns = set_of(r"\S");
    for c in ['\u{FEFF}', '\u{1C}', '\u{85}', ' ', '\u{2003}'] {
        assert!(!contains(&ns, c), "{c:?}");
    }
    assert!(contains(&ns, '\u{1}') && contains(&ns, '–'));
    let dot = set_of(".");
    assert!(!contains(&dot, '\n') && !contains(&dot, '\r') && !contains(&dot, '\u{2028}') && contains(&dot, '\u{85}'));
}

#[test]
fn classes() {
    let c = set_of(r"[^\d]");
    assert!(!contains(&c, '5') && !contains(&c, '٣') && contains(&c, 'x'));
    let c = set_of(r"[^\D]");
    assert!(contains(&c, '5') && !contains(&c, '٣'));
    assert!(set_of("[]").ranges().is_empty());
    assert!(contains(&set_of("[^]"), '\n'));
    let c = set_of(r"[a-c\-\]x-]");
    for ch in ['a', 'b', 'c', '-', ']', 'x'] {
        assert!(contains(&c, ch));
    }
    assert!(!contains(&c, 'd'));
    assert!(contains(&set_of(r"[\b]"), '\u{8}'));
    assert!(contains(&set_of("[[]"), '['));
    assert!(invalid(r"[\w-.]") && invalid("[z-a]") && invalid("[abc"));
    assert!(contains(&set_of(r"\p{Letter}"), 'é') && !contains(&set_of(r"\P{L}"), 'é'));
    assert!(contains(&set_of(r"\p{digit}"), '৪'));
}

#[test]
fn escapes() {
    assert!(contains(&set_of(r"\cC"), '\u{3}') && contains(&set_of(r"\cc"), '\u{3}'));
    assert!(contains(&set_of(r"\0"), '\0') && contains(&set_of(r"\012"), '\n'));
    assert!(contains(&set_of(r"\x41"), 'A') && contains(&set_of(r"\u00e9"), 'é'));
    assert!(contains(&set_of(r"\u{1F432}"), '🐲') && set_of(r"\uD83D\uDE00").ranges().is_empty());
    assert!(set_of(r"[\uD83D\uDE00]").ranges().is_empty() && !contains(&set_of(r"[^\uD83D\uDE00]"), '😀'));
    assert!(contains(&set_of(r"\/"), '/') && contains(&set_of(r"\-"), '-') && contains(&set_of(r"\."), '.'));
    assert!(contains(&set_of(r"\t"), '\t') && contains(&set_of(r"\v"), '\u{B}'));
    assert!(invalid(r"\a") && invalid(r"\e") && invalid(r"\x4") && invalid(r"\u12") && invalid(r"\c1"));
    assert!(invalid("\\"));
}

#[test]
fn structure() {
    assert!(matches!(parse("a|b").unwrap(), Node::Alt(v) if v.len() == 2));
    assert!(matches!(parse("(?:ab)*?").unwrap(), Node::Repeat(_, 0, None)));
    assert!(matches!(parse("a{2,5}").unwrap(), Node::Repeat(_, 2, Some(5))));
    assert!(matches!(parse("a{3,}").unwrap(), Node::Repeat(_, 3, None)));
    assert!(matches!(parse("(?<year>a)").unwrap(), Node::Set(_)));
    assert!(matches!(parse("x{a}").unwrap(), Node::Concat(v) if v.len() == 4));
    assert!(matches!(parse("a{}").unwrap(), Node::Concat(v) if v.len() == 3));
    assert!(matches!(parse("^a$").unwrap(), Node::Concat(v) if matches!(v[0], Node::Look(Look::Start))));
    assert!(matches!(parse("(?!a)").unwrap(), Node::Around(Around { ahead: true, negate: true }, _)));
    assert!(matches!(parse(r"\bx\B").unwrap(), Node::Concat(v) if matches!(v[2], Node::Look(Look::NotWordBoundary))));
    assert!(matches!(parse("").unwrap(), Node::Empty));
    assert!(matches!(parse("a||").unwrap(), Node::Alt(v) if v.len() == 3));
}

#[test]
fn refusals() {
    for p in ["*a", "a**", "a{2}{3}", "^*", "(?=a)+", "a{5,2}", "(a", "a)", "{1}", "a{,5}", "x{,}", "(?<1a>x)"] {
        assert!(invalid(p), "{p}");
    }
    for p in [r"(a)\1", r"(?<n>a)\k<n>", "(?i:a)", "(?i)a"] {
        assert!(unsupported(p), "{p}");
    }
    assert!(invalid("a{100001}"));
    let deep = "(".repeat(300) + &")".repeat(300);
    assert!(unsupported(&deep));
}
