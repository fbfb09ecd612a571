//! Special tokens inside a structure: each one a byte that no UTF-8 text contains.
//!
//! Grammars are byte DFAs, and ordinary grammars only accept valid UTF-8, so special and
//! control tokens (which write no text) never fit anywhere. A structure that names special
//! tokens (`[TOOL_CALLS]`, `<|python_tag|>`, ...) gives each one a *marker byte* inside that
//! grammar only: one of the 13 bytes that never occur in UTF-8 (0xC0, 0xC1, 0xF5 to 0xFF). The
//! structure's DFA reads the marker where the token may appear; the grammar then lets that token
//! id (and no ordinary token) take that transition. One byte per token keeps the DFA as small as
//! if the token were one character, and a token is one step of the DFA, so byte distances stay
//! token bounds for budget-aware masking.
//!
//! Ordinary tokens can contain these bytes (a byte-level vocabulary has a token for every byte),
//! so the grammar walks ordinary tokens through a copy of the DFA with the marker transitions
//! cut ([`crate::automata::Dfa::with_bytes_cut`]): no ordinary token can ever enter a marker.

use std::rc::Rc;

use crate::automata::Expr;
use crate::automata::Dfa;
use crate::error::{GrammarError, Result};
use crate::util::{StateId, TokenId};

/// The bytes that no valid UTF-8 text contains, in the order they are handed out.
pub const MARKER_BYTES: [u8; 13] = [0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF, 0xC0, 0xC1];

/// A special token a structure may emit, and the byte that stands for it in the grammar's DFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialToken {
    pub token: TokenId,
    pub byte: u8,
}

/// The special tokens of one structure, with their marker bytes.
#[derive(Debug, Clone, Default)]
pub struct SpecialTokens {
    tokens: Vec<SpecialToken>,
}

impl SpecialTokens {
    pub fn new(tokens: Vec<SpecialToken>) -> Self {
        SpecialTokens { tokens }
    }

    /// The marker of `token`, handing out the next free byte on first use.
    pub fn marker(&mut self, token: TokenId, path: &str) -> Result<u8> {
        if let Some(t) = self.tokens.iter().find(|t| t.token == token) {
            return Ok(t.byte);
        }
        let Some(&byte) = MARKER_BYTES.get(self.tokens.len()) else {
            return Err(GrammarError::invalid_structure(
                path,
                format!("a structure may name at most {} distinct special tokens", MARKER_BYTES.len()),
            ));
        };
        self.tokens.push(SpecialToken { token, byte });
        Ok(byte)
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &SpecialToken> {
        self.tokens.iter()
    }

    /// The marker byte of `token`, if the structure names it.
    pub fn byte_of(&self, token: TokenId) -> Option<u8> {
        self.tokens.iter().find(|t| t.token == token).map(|t| t.byte)
    }

    /// The token a marker byte stands for.
    pub fn token_of(&self, byte: u8) -> Option<TokenId> {
        self.tokens.iter().find(|t| t.byte == byte).map(|t| t.token)
    }

    /// Every marker byte in use.
    pub fn bytes(&self) -> Vec<u8> {
        self.tokens.iter().map(|t| t.byte).collect()
    }
}

/// The language of the single byte `byte` (a marker is not UTF-8, so it cannot be a regex).
pub(crate) fn marker_expr(byte: u8) -> Expr {
    let mut classes = [0u8; 256];
    classes[byte as usize] = 1;
    // State 0 reads the marker into state 1, which accepts.
    let trans = [StateId::DEAD, StateId::new(1), StateId::DEAD, StateId::DEAD];
    match Dfa::from_table(classes, 2, &trans, &[false, true]) {
        Some(d) => Expr::Dfa(Rc::new(d)),
        None => Expr::Empty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automata::DfaConfig;

    #[test]
    fn a_marker_composes_with_text() {
        let e = Expr::concat(vec![Expr::literal("a"), marker_expr(0xF5), Expr::literal("b")]);
        let d = e.to_dfa(&DfaConfig::default()).unwrap().unwrap();
        let end = d.walk(d.start(), &[b'a', 0xF5, b'b']);
        assert!(!end.is_dead() && d.is_accepting(end));
        assert_eq!(d.walk(d.start(), &[b'a', 0xF6]), StateId::DEAD);
    }
}

