//! Placeholder: the strings engineer's `strings.rs` replaces this file (canonical string
//! encoding, `pattern`, `format`, lengths). Only what the core needs to build meanwhile.

use super::context::Ctx;
use crate::algebra::Expr;
use crate::dfa::DfaConfig;
use crate::error::Result;

/// One character of a canonical JSON string (see `schema_design`): raw except `"`, `\` and
/// controls, which have one escape each.
pub(crate) const CANONICAL_CHAR: &str =
    r#"[^"\\\x00-\x1F]|\\["\\bfnrt]|\\u00(?:0[0-7]|0b|0e|0f|1[0-9a-f])"#;

pub(crate) struct StringFacts {
    pub patterns: Vec<(String, Ctx)>,
    pub formats: Vec<(String, Ctx)>,
    pub min_length: u64,
    pub max_length: Option<u64>,
}

pub(crate) fn string_expr(facts: &StringFacts, _config: &DfaConfig) -> Result<Expr> {
    if let Some((_, ctx)) = facts.patterns.first() {
        return Err(ctx.unsupported("pattern", "not yet"));
    }
    let body = Expr::repeat(Expr::regex(format!("(?:{CANONICAL_CHAR})")), facts.min_length as u32,
                            facts.max_length.map(|m| m as u32));
    Ok(Expr::concat(vec![Expr::literal("\""), body, Expr::literal("\"")]))
}

pub(crate) fn string_literal(value: &str) -> Expr {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    Expr::literal(&out)
}
