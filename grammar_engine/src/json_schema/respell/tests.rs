use super::*;
use crate::automata::Expr;
use crate::json_schema::canonical::{spell, CANONICAL_CHAR};

fn cfg() -> DfaConfig {
    DfaConfig::default()
}

fn canonical(regex: &str) -> Dfa {
    Dfa::from_regex(regex, &cfg()).unwrap()
}

fn respelled(regex: &str) -> Dfa {
    respell(&canonical(regex), &cfg()).unwrap().unwrap()
}

fn same(a: &Dfa, b: &Expr) {
    let a = Expr::Dfa(Rc::new(a.clone()));
    assert!(a.minus(b, &cfg()).unwrap().is_empty(), "more than expected");
    assert!(b.minus(&a, &cfg()).unwrap().is_empty(), "less than expected");
}

/// The string a body spells (`None`: not a JSON string body, or a lone surrogate).
fn decode(body: &str) -> Option<String> {
    serde_json::from_str::<String>(&format!("\"{body}\"")).ok()
}

/// Spellings of `s`: canonical, every character escaped (lower and upper hex), and mixed.
fn spellings_of(s: &str) -> Vec<String> {
    let u = |c: char, upper: bool| -> String {
        let mut units = [0u16; 2];
        c.encode_utf16(&mut units)
            .iter()
            .map(|unit| if upper { format!("\\u{unit:04X}") } else { format!("\\u{unit:04x}") })
            .collect()
    };
    // A character without a generated `\u` form (see `U_ESCAPED`) keeps its canonical text.
    let esc = |c: char, upper: bool| if u_escaped(c as u32) { u(c, upper) } else { spell(&c.to_string()) };
    let mut out = vec![spell(s), s.chars().map(|c| esc(c, false)).collect(), s.chars().map(|c| esc(c, true)).collect()];
    out.push(s.chars().enumerate().map(|(i, c)| if i % 2 == 0 { esc(c, i % 4 == 0) } else { spell(&c.to_string()) }).collect());
    out.push(s.chars().map(|c| if c == '/' { "\\/".to_string() } else { spell(&c.to_string()) }).collect());
    out
}

#[test]
fn any_character_is_any_spelling() {
    same(&respelled(&format!("{CANONICAL_CHAR}*")), &Expr::regex(format!("{ANY_CHAR}*")));
}

#[test]
fn a_literal_is_every_spelling_of_its_characters() {
    for s in ["abc", "a\"b\\c/d", "é😀\n\u{1}\u{7f}\u{2028}", "", "\u{FFFF}\u{10000}\u{10FFFF}"] {
        let lit = respelled(&regex_syntax::escape(&spell(s)));
        let body: String = s.chars().map(char_regex).collect();
        same(&lit, &Expr::regex(body));
        for t in spellings_of(s) {
            assert!(lit.accepts(t.as_bytes()), "{s:?}: {t}");
        }
    }
}

#[test]
fn escapes_are_judged_by_what_they_decode_to() {
    // Languages over canonical bodies, and texts judged by decoding them.
    let cases: &[(&str, &[&str])] = &[
        ("[a-z]+", &["abc", "z", "", "A", "é", "a1"]),
        (r"[0-9]{4}-[0-9]{2}", &["2024-01", "2024_01", "202401"]),
        ("(?:é|😀|\\\\n)x", &["éx", "😀x", "\nx", "ex", "😁x"]),
        (r#"[^"\\\x00-\x1F]{0,3}"#, &["abc", "😀😀😀", "abcd", "\"", "/"]),
    ];
    for (regex, strings) in cases {
        let canon = canonical(regex);
        let all = respell(&canon, &cfg()).unwrap().unwrap();
        for s in *strings {
            let member = canon.accepts(spell(s).as_bytes());
            for t in spellings_of(s) {
                assert_eq!(decode(&t).as_deref(), Some(*s), "{t}");
                assert_eq!(all.accepts(t.as_bytes()), member, "{regex} on {t} ({s:?})");
            }
        }
    }
}

#[test]
fn broken_escapes_are_refused() {
    let all = respelled(&format!("{CANONICAL_CHAR}*"));
    for bad in [r"\ud83d", r"\ude00", r"\ud83dx", r"\ud83d\u0041", r"\u12", r"\x41", r"\U0041", "\\", "\"", "\n", r"\ud83d\ud83d"] {
        assert!(!all.accepts(bad.as_bytes()), "{bad}");
        assert!(decode(bad).is_none() || bad.contains("\\ud83d") || bad.contains("\\ude00"), "{bad}");
    }
    for good in [r"\ud83d\ude00", r"\uD83D\uDE00", r"\u0000", r"\/", r"\b\f\n\r\t", "\u{7f}"] {
        assert!(all.accepts(good.as_bytes()), "{good}");
    }
}

#[test]
fn writers_escapes_are_read_and_ascii_letters_keep_one_spelling() {
    let all = respelled(&format!("{CANONICAL_CHAR}*"));
    // Python's ensure_ascii, Go's HTML-safe encoder, JavaScript's control escapes.
    for good in [r"caf\u00e9", r"\u003cb\u003e \u0026 \u0027", r"\u001f\u007F", r"\u2028"] {
        assert!(all.accepts(good.as_bytes()), "{good}");
    }
    // The same values, but no writer spells them so: not generated.
    for other in [r"\u0041", r"\u0030", r"\u002F"] {
        assert!(decode(other).is_some());
        assert!(!all.accepts(other.as_bytes()), "{other}");
    }
}

#[test]
fn classes_cost_states_per_target_not_per_character() {
    // A class of thousands of characters leading to one place: a few escape states only.
    let canon = canonical(r"[\x{4E00}-\x{9FFF}]x");
    let all = respell(&canon, &cfg()).unwrap().unwrap();
    assert!(all.num_states() < canon.num_states() + 16, "{} states from {}", all.num_states(), canon.num_states());
}

#[test]
fn respelled_automata_of_minimal_ones_need_no_minimization() {
    // Patterns, formats and counted lengths as the compiler writes them over canonical bodies.
    let c = CANONICAL_CHAR;
    let cases = [
        format!("{c}*"),
        format!("{c}{{0,40}}"),
        format!("(?:[a-z0-9._%+-]|{c}){{1,30}}@[a-z]+\\.(?:com|org)"),
        r"[A-Z]{3}-[0-9]{4}".to_string(),
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}".to_string(),
        r"(?:[\x{4E00}-\x{9FFF}]|[a-z]){2,9}".to_string(),
        r#"(?:\\n|\\t|\\"|&|<|[a-z]){1,12}"#.to_string(),
        format!("(?:\\\\u00(?:0[0-7bef]|1[0-9a-f])|{c}){{3}}x"),
        r"(?:caf[é]|na[ï]ve|\x{1F600}+)".to_string(),
    ];
    for regex in &cases {
        let spelled = respelled(regex);
        let min = spelled.clone().minimize();
        assert_eq!(min.num_states(), spelled.num_states(), "{regex}");
    }
    // A trie state can read the same as a canonical state (one hex digit, then `z`): one row
    // more than the minimal automaton, the same texts.
    let odd = r"(?:[\x{100}-\x{10FF}]|q[0-9a-fA-F])z";
    let spelled = respelled(odd);
    let min = spelled.clone().minimize();
    assert_eq!(min.num_states() + 1, spelled.num_states());
    same(&spelled, &Expr::Dfa(Rc::new(min)));
}
