//! Lark's literals as languages: string literals evaluated as Lark evaluates them, and regex
//! literals (Python `re` syntax) translated to the `regex-automata` syntax the core compiles.
//!
//! Lark reads the text between the quotes or slashes through Python's string escapes first:
//! `\n`, `\t`, `\r`, `\f`, `\xHH`, `\uHHHH` and `\UHHHHHHHH` become their character, `\\` stays
//! an escaped backslash, and every other `\c` is kept as it is. In a string that is the final
//! text (with `\\` read as one backslash, `\"` as a quote). In a regex, the character an escape
//! stood for is then read as regex text: `/\x2e/` is `.`, any character, exactly as in Lark.
//!
//! The regex text is then Python's syntax, which differs from `regex-automata`'s in places the
//! translation rewrites: a `[` inside a class is a literal (not a nested class), `&&`, `--` and
//! `~~` are not class operations, a `{` that does not start a counted repetition is a literal,
//! `\Z` is the end, `\a`, `\v` and octal `\0` are characters, `(?#...)` is a comment, and in
//! verbose mode whitespace and `#` inside a class are literals. What a DFA over one terminal
//! cannot express is refused: look-around, backreferences, conditionals, and anchors or word
//! boundaries (`^`, `$`, `\b`, `\A`), which in Lark look at the text around the terminal.
//! Lazy quantifiers (`*?`) are read as their greedy forms: the language of strings the regex
//! matches whole is the same.

use regex_syntax::hir::Hir;

use crate::error::GrammarError;

/// The text a string literal's content (between its quotes, quotes excluded) stands for.
pub(super) fn string_text(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => return Err("the string ends in a lone `\\`".into()),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some(e) => match simple_escape(e, &mut chars)? {
                Some(ch) => out.push(ch),
                None => {
                    out.push('\\');
                    out.push(e);
                }
            },
        }
    }
    Ok(out)
}

/// The character of Python's string escapes `\n \t \r \f \xHH \uHHHH \UHHHHHHHH` (after the
/// backslash and `e`), or `None` for an escape Lark keeps as it is.
fn simple_escape(e: char, rest: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<Option<char>, String> {
    let digits = match e {
        'n' => return Ok(Some('\n')),
        't' => return Ok(Some('\t')),
        'r' => return Ok(Some('\r')),
        'f' => return Ok(Some('\x0C')),
        'x' => 2,
        'u' => 4,
        'U' => 8,
        _ => return Ok(None),
    };
    let mut hex = String::new();
    for _ in 0..digits {
        match rest.peek() {
            Some(&h) if h.is_ascii_hexdigit() => {
                hex.push(h);
                rest.next();
            }
            _ => return Err(format!("`\\{e}` needs {digits} hex digits")),
        }
    }
    let v = u32::from_str_radix(&hex, 16).map_err(|_| format!("`\\{e}{hex}` is not a number"))?;
    char::from_u32(v).map(Some).ok_or_else(|| format!("`\\{e}{hex}`: U+{v:X} is not a character"))
}

/// The escapes Lark evaluates before a regex is read (see the module docs): those of
/// [`simple_escape`] become their character, `\\` and every other escape stay.
fn evaluate_regex_escapes(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => return Err("the regex ends in a lone `\\`".into()),
            Some('"') => out.push('"'),
            Some(e) => match simple_escape(e, &mut chars)? {
                Some(ch) => out.push(ch),
                None => {
                    out.push('\\');
                    out.push(e);
                }
            },
        }
    }
    Ok(out)
}

/// A regex literal's content (between its slashes) and flags, as `regex-automata` syntax; the
/// error says what is wrong or not supported.
pub(super) fn translate(raw: &str, flags: &str) -> Result<String, String> {
    let mut inline = String::new();
    for f in flags.chars() {
        match f {
            'i' | 'm' | 's' | 'x' => {
                if !inline.contains(f) {
                    inline.push(f);
                }
            }
            'u' => {} // Python's patterns are Unicode already
            'l' => return Err("the `l` (locale) flag is not valid for a text pattern".into()),
            other => return Err(format!("unknown regex flag `{other}`")),
        }
    }
    if raw.contains('\n') && !inline.contains('x') {
        return Err("a regex may contain a newline only with the `x` (verbose) flag".into());
    }
    let text = evaluate_regex_escapes(raw)?;
    let mut body = python_to_rust(&text, inline.contains('x'))?;
    // A verbose comment runs to the end of the line: end it before the closing parenthesis.
    if inline.contains('x') || has_inline_verbose(&body) {
        body.push('\n');
    }
    let out = if inline.is_empty() { format!("(?:{body})") } else { format!("(?{inline}:{body})") };
    check(&out)?;
    Ok(out)
}

/// Whether `pattern` turns verbose mode on with an inline flag group (`(?x)`, `(?ix:`).
fn has_inline_verbose(pattern: &str) -> bool {
    pattern.match_indices("(?").any(|(i, _)| {
        pattern[i + 2..].chars().take_while(|c| c.is_ascii_alphabetic() || *c == '-').any(|c| c == 'x')
    })
}

/// Parses the translated pattern and refuses what a DFA over one terminal cannot express.
fn check(pattern: &str) -> Result<(), String> {
    let hir: Hir = crate::automata::parse::parse(pattern).map_err(|e| match e {
        GrammarError::InvalidRegex { reason, .. } => format!("invalid regex: {reason}"),
        GrammarError::UnsupportedRegex { construct, reason } => format!("{construct}: {reason}"),
        other => other.to_string(),
    })?;
    if !hir.properties().look_set().is_empty() {
        return Err(
            "anchors and word boundaries (`^`, `$`, `\\b`, `\\A`, `\\Z`) look at the text around the terminal, which a terminal's automaton does not see"
                .into(),
        );
    }
    Ok(())
}

/// Python `re` syntax to `regex-automata` syntax (see the module docs).
fn python_to_rust(p: &str, verbose: bool) -> Result<String, String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 8);
    let mut i = 0;
    let mut verbose = verbose;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let (text, used) = escape(&chars, i, false)?;
                out.push_str(&text);
                i += used;
            }
            '[' => {
                let (text, used) = class(&chars, i, verbose)?;
                out.push_str(&text);
                i += used;
            }
            '(' if chars.get(i + 1) == Some(&'?') => {
                let rest: String = chars[i + 2..].iter().take(3).collect();
                if rest.starts_with('#') {
                    // A comment group: up to the first `)`.
                    let end = chars[i..].iter().position(|&c| c == ')').ok_or("unterminated `(?#` comment")?;
                    i += end + 1;
                    continue;
                }
                if rest.starts_with('=') || rest.starts_with('!') || rest.starts_with("<=") || rest.starts_with("<!") {
                    return Err("look-around (`(?=`, `(?!`, `(?<=`, `(?<!`) cannot be expressed by a DFA".into());
                }
                if rest.starts_with("P=") {
                    return Err("backreferences (`(?P=name)`) cannot be expressed by a DFA".into());
                }
                if rest.starts_with('(') {
                    return Err("conditional groups (`(?(id)yes|no)`) cannot be expressed by a DFA".into());
                }
                if rest.starts_with('>') {
                    return Err("atomic groups (`(?>...)`) are not supported".into());
                }
                // Inline flags: Python's `a` and `L` change what classes mean; `u` is the default.
                let flags: String = chars[i + 2..].iter().take_while(|c| c.is_ascii_alphabetic() || **c == '-').collect();
                if flags.contains('a') || flags.contains('L') {
                    return Err("the inline flags `a` (ASCII) and `L` (locale) are not supported".into());
                }
                if !flags.starts_with('P') && flags.split('-').next().is_some_and(|on| on.contains('x')) {
                    verbose = true;
                }
                let kept: String = flags.chars().filter(|&f| f != 'u').collect();
                out.push_str("(?");
                out.push_str(&kept);
                i += 2 + flags.chars().count();
            }
            '{' => {
                let (text, used) = brace(&chars, i);
                out.push_str(&text);
                i += used;
            }
            '}' => {
                out.push_str("\\}");
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// A `{` at `i`: a counted repetition as `regex-automata` writes it, or an escaped literal
/// (Python reads a `{` that starts no `{m}`, `{m,}`, `{,n}`, `{m,n}` as itself).
fn brace(chars: &[char], i: usize) -> (String, usize) {
    let mut j = i + 1;
    let lo: String = chars[j..].iter().take_while(|c| c.is_ascii_digit()).collect();
    j += lo.len();
    let comma = chars.get(j) == Some(&',');
    let mut hi = String::new();
    if comma {
        j += 1;
        hi = chars[j..].iter().take_while(|c| c.is_ascii_digit()).collect();
        j += hi.len();
    }
    if chars.get(j) != Some(&'}') || (lo.is_empty() && !comma) {
        return ("\\{".into(), 1);
    }
    let lo = if lo.is_empty() { "0".to_string() } else { lo };
    let text = if comma { format!("{{{lo},{hi}}}") } else { format!("{{{lo}}}") };
    (text, j + 1 - i)
}

/// A character class starting at the `[` at `i`: its translation and how many characters it
/// took.
fn class(chars: &[char], i: usize, verbose: bool) -> Result<(String, usize), String> {
    let mut out = String::from("[");
    let mut j = i + 1;
    if chars.get(j) == Some(&'^') {
        out.push('^');
        j += 1;
    }
    // A `]` first in the class is a literal.
    if chars.get(j) == Some(&']') {
        out.push_str("\\]");
        j += 1;
    }
    loop {
        let Some(&c) = chars.get(j) else { return Err("unterminated character class `[`".into()) };
        match c {
            ']' => {
                out.push(']');
                return Ok((out, j + 1 - i));
            }
            '\\' => {
                let (text, used) = escape(chars, j, true)?;
                out.push_str(&text);
                j += used;
            }
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c);
                j += 1;
            }
            '-' if chars.get(j + 1) == Some(&'-') => {
                out.push_str("\\-");
                j += 1;
            }
            c if verbose && (c.is_whitespace() || c == '#') => {
                out.push_str(&format!("\\x{{{:X}}}", c as u32));
                j += 1;
            }
            c => {
                out.push(c);
                j += 1;
            }
        }
    }
}

/// An escape at `chars[i] == '\\'`, inside a class or not: its translation and length.
fn escape(chars: &[char], i: usize, in_class: bool) -> Result<(String, usize), String> {
    let Some(&e) = chars.get(i + 1) else { return Err("the regex ends in a lone `\\`".into()) };
    let text = match e {
        'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'n' | 't' | 'r' | 'f' => format!("\\{e}"),
        'b' if in_class => "\\x08".into(),
        'b' | 'B' | 'A' => format!("\\{e}"),
        'Z' => "\\z".into(),
        'a' => "\\x07".into(),
        'v' => "\\x0B".into(),
        '0' => {
            // Octal: `\0` and up to two more octal digits.
            let digits: String = chars[i + 2..].iter().take(2).take_while(|c| ('0'..='7').contains(c)).collect();
            let v = u32::from_str_radix(&format!("0{digits}"), 8).unwrap_or(0);
            return Ok((format!("\\x{{{v:X}}}"), 2 + digits.len()));
        }
        '1'..='9' => return Err(format!("backreferences (`\\{e}`) cannot be expressed by a DFA")),
        'N' => return Err("named characters (`\\N{...}`) are not supported".into()),
        c if c.is_ascii_alphanumeric() => return Err(format!("unknown escape `\\{c}`")),
        // An escaped space stays a space in verbose mode.
        c if c.is_whitespace() => format!("\\x{{{:X}}}", c as u32),
        c => regex_syntax::escape(&c.to_string()),
    };
    Ok((text, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_take_lark_escapes() {
        assert_eq!(string_text(r#"a\"b\\c\n\x41\u00e9"#).unwrap(), "a\"b\\c\nA\u{e9}");
        assert_eq!(string_text(r"\d").unwrap(), "\\d");
        assert!(string_text(r"\x4").is_err());
    }

    #[test]
    fn python_regexes_translate() {
        assert_eq!(translate(r"[^[\]]", "").unwrap(), r"(?:[^\[\]])");
        assert_eq!(translate(r"a{,3}b{2}c{x", "").unwrap(), r"(?:a{0,3}b{2}c\{x)");
        assert_eq!(translate(r"\/\Z?", "").map_err(|e| e.contains("anchors")), Err(true));
        assert_eq!(translate(r"\x2e", "").unwrap(), "(?:.)");
        assert_eq!(translate("a # c", "x").unwrap(), "(?x:a # c\n)");
        assert_eq!(translate("[ #]", "x").unwrap(), "(?x:[\\x{20}\\x{23}]\n)");
        assert!(translate(r"(?<=a)b", "").unwrap_err().contains("look-around"));
        assert!(translate(r"(a)\1", "").unwrap_err().contains("backreference"));
        assert!(translate(r"^a", "").unwrap_err().contains("anchors"));
        assert_eq!(translate(r"a(?#note)b", "i").unwrap(), "(?i:ab)");
        assert_eq!(translate(r"\0\a", "").unwrap(), "(?:\\x{0}\\x07)");
    }
}
