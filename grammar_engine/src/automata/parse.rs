//! Regex parsing, with errors that say where a pattern goes wrong.
//!
//! `regex-syntax` parses first (Unicode on, UTF-8 only, nesting limited), so a syntax error
//! carries the byte offset of the problem, and constructs a DFA cannot express
//! (backreferences, look-around) become [`GrammarError::UnsupportedRegex`] rather than an
//! invalid-pattern error.

use regex_syntax::ast::ErrorKind as AstErrorKind;

use crate::error::{GrammarError, Result};

/// Parses with `regex-syntax` first, so errors carry the offset where the pattern goes wrong.
pub(crate) fn parse(pattern: &str) -> Result<regex_syntax::hir::Hir> {
    let mut parser = regex_syntax::ParserBuilder::new().unicode(true).utf8(true).nest_limit(250).build();
    parser.parse(pattern).map_err(|e| match e {
        regex_syntax::Error::Parse(e) => {
            let construct = match e.kind() {
                AstErrorKind::UnsupportedBackreference => Some("backreference"),
                AstErrorKind::UnsupportedLookAround => Some("look-around"),
                _ => None,
            };
            match construct {
                Some(c) => GrammarError::UnsupportedRegex {
                    construct: c.into(),
                    reason: format!("{} (at byte {}); a DFA cannot express it", e.kind(), e.span().start.offset),
                },
                None => GrammarError::InvalidRegex {
                    pattern: pattern.to_string(),
                    offset: e.span().start.offset,
                    reason: e.kind().to_string(),
                },
            }
        }
        regex_syntax::Error::Translate(e) => GrammarError::InvalidRegex {
            pattern: pattern.to_string(),
            offset: e.span().start.offset,
            reason: e.kind().to_string(),
        },
        other => GrammarError::InvalidRegex { pattern: pattern.to_string(), offset: 0, reason: other.to_string() },
    })
}
