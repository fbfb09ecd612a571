//! The canonical spelling of JSON strings, and regexes over it.
//!
//! Every string the schema compiler produces is spelled exactly as Python's
//! `json.dumps(s, ensure_ascii=False)` spells it: raw UTF-8 for every character except `"` → `\"`,
//! `\` → `\\`, the five controls with short escapes (`\b \f \n \r \t`) and the other controls
//! U+0000–U+001F → `\u00xx` (lowercase hex). Nothing else is escaped (not `/`, not U+007F, not
//! U+2028). One value, one spelling: that is what lets lengths be counted exactly and lets
//! `oneOf`/`not` over strings be computed by automaton difference.
//!
//! A set of decoded characters becomes the set of their spellings: the *safe* characters (those
//! written raw) as a regex class or as UTF-8 byte ranges, plus the escape of each unsafe one.

use std::fmt::Write as _;

use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};

/// Regex text of any one canonical JSON string character (for keys and unconstrained strings).
pub(crate) const CANONICAL_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))"#;

/// The characters a canonical JSON string escapes.
pub(crate) fn unsafe_chars() -> ClassUnicode {
    ClassUnicode::new([
        ClassUnicodeRange::new('\u{0}', '\u{1F}'),
        ClassUnicodeRange::new('"', '"'),
        ClassUnicodeRange::new('\\', '\\'),
    ])
}

/// Appends the canonical spelling of `c` (as text, not as a regex).
pub(crate) fn push_spelling(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{8}' => out.push_str("\\b"),
        '\u{C}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c <= '\u{1F}' => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    }
}

/// The canonical spelling of a whole string, without the quotes.
pub(crate) fn spell(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    for c in value.chars() {
        push_spelling(&mut out, c);
    }
    out
}

/// A set of characters split by how they are spelled: the safe ones (raw UTF-8) and the
/// spellings of the unsafe ones.
pub(crate) struct Spellings {
    pub(crate) safe: ClassUnicode,
    pub(crate) escapes: Vec<String>,
}

pub(crate) fn spellings(set: &ClassUnicode) -> Spellings {
    let mut safe = set.clone();
    safe.difference(&unsafe_chars());
    let mut unsafe_part = set.clone();
    unsafe_part.intersect(&unsafe_chars());
    let mut escapes = Vec::new();
    for r in unsafe_part.ranges() {
        for code in r.start() as u32..=r.end() as u32 {
            if let Some(c) = char::from_u32(code) {
                let mut s = String::new();
                push_spelling(&mut s, c);
                escapes.push(s);
            }
        }
    }
    Spellings { safe, escapes }
}

/// Regex text (regex-automata syntax) matching the spelling of exactly one character of `set`.
/// The empty set gives a regex that matches nothing.
pub(crate) fn set_regex(set: &ClassUnicode) -> String {
    let Spellings { safe, escapes } = spellings(set);
    let mut parts: Vec<String> = Vec::new();
    if !safe.ranges().is_empty() {
        let mut text = String::from("[");
        for r in safe.ranges() {
            push_class_char(&mut text, r.start());
            if r.end() != r.start() {
                text.push('-');
                push_class_char(&mut text, r.end());
            }
        }
        text.push(']');
        parts.push(text);
    }
    for e in escapes {
        parts.push(regex_syntax::escape(&e));
    }
    match parts.len() {
        0 => "[^\\x00-\\x{10FFFF}]".to_string(),
        1 => parts.pop().unwrap_or_default(),
        _ => format!("(?:{})", parts.join("|")),
    }
}

/// Writes `c` for use inside a bracketed class: alphanumerics as themselves, the rest as
/// `\x{...}` so no character can act as class syntax.
fn push_class_char(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automata::{Dfa, DfaConfig};

    fn full_match(regex: &str, text: &str) -> bool {
        let d = Dfa::from_regex(regex, &DfaConfig::default()).unwrap();
        let s = d.walk(d.start(), text.as_bytes());
        !s.is_dead() && d.is_accepting(s)
    }

    #[test]
    fn spelling_follows_python_json_dumps() {
        assert_eq!(spell("a\"b\\c"), "a\\\"b\\\\c");
        assert_eq!(spell("\u{8}\u{c}\n\r\t"), "\\b\\f\\n\\r\\t");
        assert_eq!(spell("\u{0}\u{1}\u{b}\u{1f}"), "\\u0000\\u0001\\u000b\\u001f");
        assert_eq!(spell("/\u{7f}\u{2028}é😀"), "/\u{7f}\u{2028}é😀");
    }

    #[test]
    fn canonical_char_matches_each_spelling_once() {
        for code in 0..0x300u32 {
            let c = char::from_u32(code).unwrap();
            let mut s = String::new();
            push_spelling(&mut s, c);
            assert!(full_match(CANONICAL_CHAR, &s), "{code:#x}");
        }
        for bad in ["\\/", "\\u0041", "\\u001F", "\\u000a", "\"", "\\", "\n", "\\u00e9", "\\U0000"] {
            assert!(!full_match(CANONICAL_CHAR, bad), "{bad}");
        }
    }

    #[test]
    fn set_regex_spells_safe_and_unsafe_members() {
        let set = ClassUnicode::new([
            ClassUnicodeRange::new('\n', '\n'),
            ClassUnicodeRange::new('"', '"'),
            ClassUnicodeRange::new('a', 'c'),
            ClassUnicodeRange::new('-', '-'),
        ]);
        let r = set_regex(&set);
        for ok in ["\\n", "\\\"", "a", "c", "-"] {
            assert!(full_match(&r, ok), "{ok}");
        }
        for no in ["\n", "\"", "d", "\\u000a", "\\", "ab"] {
            assert!(!full_match(&r, no), "{no}");
        }
        let none = Dfa::from_regex(&set_regex(&ClassUnicode::empty()), &DfaConfig::default());
        assert!(matches!(none, Err(crate::error::GrammarError::EmptyLanguage { .. })));
    }
}
