//! The terminals of Lark's `common` library (`%import common.NAME`), each written here as one
//! regex in `regex-automata` syntax.
//!
//! Each is the language Lark's dynamic lexer can match for that terminal. Two of Lark's
//! definitions use a lazy regex and a look-behind (`ESCAPED_STRING`, `C_COMMENT`); a lazy
//! match ends at the first closing delimiter, so they are written as "no closing delimiter
//! inside": a string ends at its first quote not escaped by a backslash, a comment at its first
//! `*/`.

/// The regex of the `common` terminal `name`, if there is one.
pub(super) fn terminal(name: &str) -> Option<&'static str> {
    Some(match name {
        "DIGIT" => "[0-9]",
        "HEXDIGIT" => "[0-9a-fA-F]",
        "INT" => "[0-9]+",
        "SIGNED_INT" => "[+\\-]?[0-9]+",
        "DECIMAL" => "[0-9]+\\.[0-9]*|\\.[0-9]+",
        // An integer with an exponent, or a decimal with an optional one.
        "FLOAT" => "[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?",
        "SIGNED_FLOAT" => "[+\\-]?(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?)",
        "NUMBER" => "[0-9]+(?:[eE][+\\-]?[0-9]+)?|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?",
        "SIGNED_NUMBER" => "[+\\-]?(?:[0-9]+(?:[eE][+\\-]?[0-9]+)?|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?)",
        // A quote, then characters other than a newline where a backslash takes the next one
        // with it, up to the first quote not so taken.
        "ESCAPED_STRING" => "\"(?:[^\"\\\\\\n]|\\\\[^\\n])*\"",
        "LCASE_LETTER" => "[a-z]",
        "UCASE_LETTER" => "[A-Z]",
        "LETTER" => "[A-Za-z]",
        "WORD" => "[A-Za-z]+",
        "CNAME" => "[_A-Za-z][_A-Za-z0-9]*",
        "WS_INLINE" => "[ \\t]+",
        "WS" => "[ \\t\\x0C\\r\\n]+",
        "CR" => "\\r",
        "LF" => "\\n",
        "NEWLINE" => "(?:\\r?\\n)+",
        "SH_COMMENT" => "\\#[^\\n]*",
        "CPP_COMMENT" => "//[^\\n]*",
        // `/*`, then anything without `*/`, then `*/`.
        "C_COMMENT" => "/\\*(?:[^*]|\\*+[^*/])*\\*+/",
        "SQL_COMMENT" => "\\-\\-[^\\n]*",
        _ => return None,
    })
}

/// The names [`terminal`] knows, for messages.
pub(super) const NAMES: &str = "DIGIT, HEXDIGIT, INT, SIGNED_INT, DECIMAL, FLOAT, SIGNED_FLOAT, NUMBER, SIGNED_NUMBER, \
ESCAPED_STRING, LCASE_LETTER, UCASE_LETTER, LETTER, WORD, CNAME, WS_INLINE, WS, CR, LF, NEWLINE, SH_COMMENT, CPP_COMMENT, \
C_COMMENT, SQL_COMMENT";
