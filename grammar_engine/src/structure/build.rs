//! Compiling a spec tree into one automaton expression, over rules where a grammar is embedded.
//!
//! Each node becomes an [`Expr`]: text a literal, a regex or a schema a DFA leaf compiled at
//! once (so an error carries the node's pointer), a grammar (GBNF, Lark) a call of its start
//! rule (its rules added to [`Builder::rules`]), a special token its marker byte, free text the
//! complement construction below, sequences, alternatives and repetitions the algebra's own
//! operators, and a JSON string the escape of its inner node ([`crate::json_escape`]) between
//! quotes. The caller compiles the whole as the start rule of those rules: one DFA when
//! no embedded grammar recurses.

use std::collections::HashMap;
use std::rc::Rc;

use super::spec::{Kind, Node, TokenName};
use super::special::{marker_expr, SpecialTokens};
use crate::automata::Expr;
use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::json_schema::{self, JsonSchemaOptions};
use crate::pushdown::RtnBuilder;
use crate::util::TokenId;
use crate::vocab::Vocabulary;

/// Any text: every string of Unicode scalar values, as UTF-8.
const ANY_TEXT: &str = "(?s:.)*";

/// What a named token turned out to be in this vocabulary.
enum Resolved {
    /// A special token: only that id, through its marker byte.
    Special(TokenId),
    /// An ordinary token: its text, spelled by any tokens.
    Text(String),
}

pub struct Builder<'a> {
    vocab: &'a Vocabulary,
    schema: &'a JsonSchemaOptions,
    config: &'a DfaConfig,
    pub specials: SpecialTokens,
    /// The rules of embedded grammars.
    pub rules: RtnBuilder,
    /// Free-text languages already built, by their sorted stop texts.
    free_text: HashMap<Vec<String>, Expr>,
}

impl<'a> Builder<'a> {
    pub fn new(vocab: &'a Vocabulary, schema: &'a JsonSchemaOptions, config: &'a DfaConfig) -> Self {
        Builder { vocab, schema, config, specials: SpecialTokens::default(), rules: RtnBuilder::new(), free_text: HashMap::new() }
    }

    pub fn expr(&mut self, node: &Node) -> Result<Expr> {
        let path = node.path.as_str();
        match &node.kind {
            Kind::Text(t) => Ok(Expr::literal(t)),
            Kind::Regex(r) => {
                let dfa = Dfa::from_regex(r, self.config).map_err(|e| e.in_structure(&format!("{path}/regex")))?;
                Ok(Expr::Dfa(Rc::new(dfa)))
            }
            Kind::JsonSchema { schema, max_whitespace, max_any_depth } => {
                let mut opts = self.schema.clone();
                opts.max_whitespace = max_whitespace.unwrap_or(opts.max_whitespace);
                opts.max_any_depth = max_any_depth.unwrap_or(opts.max_any_depth);
                let dfa = json_schema::compile(schema, &opts, self.config).map_err(|e| e.in_structure(&format!("{path}/json_schema")))?;
                Ok(Expr::Dfa(Rc::new(dfa)))
            }
            Kind::Gbnf(text) => {
                let start = crate::gbnf::parse_into(text, self.vocab, &mut self.rules, &mut self.specials)
                    .map_err(|e| e.in_structure(&format!("{path}/gbnf")))?;
                Ok(Expr::Call(start))
            }
            Kind::Lark(text) => {
                let start = crate::lark::parse_into(text, self.vocab, self.config, &mut self.rules, &mut self.specials)
                    .map_err(|e| e.in_structure(&format!("{path}/lark")))?;
                Ok(Expr::Call(start))
            }
            Kind::Token(name) => match self.resolve(name, &format!("{path}/token"))? {
                Resolved::Special(id) => Ok(marker_expr(self.specials.marker(id, path)?)),
                Resolved::Text(t) => Ok(Expr::literal(&t)),
            },
            Kind::FreeText { without } => self.free_text(without),
            Kind::Sequence(parts) => Ok(Expr::concat(parts.iter().map(|p| self.expr(p)).collect::<Result<Vec<_>>>()?)),
            Kind::AnyOf(parts) => Ok(Expr::union(parts.iter().map(|p| self.expr(p)).collect::<Result<Vec<_>>>()?)),
            Kind::Repeat { item, min, max, separator } => {
                let item = self.expr(item)?;
                match separator {
                    None => Ok(Expr::repeat(item, *min, *max)),
                    Some(sep) => {
                        // item (sep item){min-1, max-1}, optional as a whole when min is 0.
                        let sep = self.expr(sep)?;
                        if *max == Some(0) {
                            return Ok(Expr::epsilon());
                        }
                        let rest = Expr::repeat(Expr::concat(vec![sep, item.clone()]), min.saturating_sub(1), max.map(|m| m - 1));
                        let some = Expr::concat(vec![item, rest]);
                        Ok(if *min == 0 { Expr::optional(some) } else { some })
                    }
                }
            }
            Kind::Optional(inner) => Ok(Expr::optional(self.expr(inner)?)),
            Kind::JsonString(inner) => {
                // The escape of the inner language, calls of embedded grammars included (their
                // rules get escaped copies), between quotes.
                let inner = self.expr(inner)?;
                let escaped = self.rules.json_escape(&inner, self.config).map_err(|e| e.in_structure(&format!("{path}/json_string")))?;
                Ok(Expr::concat(vec![Expr::literal("\""), escaped, Expr::literal("\"")]))
            }
        }
    }

    /// Text containing none of the stop texts: the complement, within all text, of
    /// `text · (stop | stop | ...) · text`. Special-token stops need nothing: text never holds
    /// a special token.
    fn free_text(&mut self, without: &[Node]) -> Result<Expr> {
        let mut stops: Vec<String> = Vec::new();
        for stop in without {
            let text = match &stop.kind {
                Kind::Text(t) => Some(t.clone()),
                Kind::Token(name) => match self.resolve(name, &format!("{}/token", stop.path))? {
                    Resolved::Special(_) => None,
                    Resolved::Text(t) => Some(t),
                },
                _ => return Err(GrammarError::invalid_structure(&stop.path, "a stop is a text or a {\"token\": ...}")),
            };
            stops.extend(text);
        }
        stops.sort();
        stops.dedup();
        if let Some(hit) = self.free_text.get(&stops) {
            return Ok(hit.clone());
        }
        let any = Expr::regex(ANY_TEXT);
        let expr = if stops.is_empty() {
            any
        } else {
            let containing = Expr::concat(vec![
                Expr::regex(ANY_TEXT),
                Expr::union(stops.iter().map(|s| Expr::literal(s)).collect()),
                Expr::regex(ANY_TEXT),
            ]);
            any.minus(&containing, self.config)?
        };
        self.free_text.insert(stops, expr.clone());
        Ok(expr)
    }

    fn resolve(&self, name: &TokenName, path: &str) -> Result<Resolved> {
        let v = self.vocab;
        let id = match name {
            TokenName::Id(id) => {
                if id.as_usize() >= v.size() {
                    return Err(GrammarError::invalid_structure(path, format!("token id {id} is outside the vocabulary of {}", v.size())));
                }
                *id
            }
            TokenName::Text(text) => {
                let ids = v.find_tokens(text.as_bytes());
                match ids.iter().copied().find(|&id| !v.is_eos(id)) {
                    Some(id) => id,
                    None if !ids.is_empty() => return Err(end_token(path, text)),
                    None => return Err(GrammarError::invalid_structure(path, format!("no token of this vocabulary is {text:?}"))),
                }
            }
        };
        let text = v.token_bytes(id).unwrap_or_default();
        if v.is_eos(id) {
            return Err(end_token(path, &String::from_utf8_lossy(text)));
        }
        if v.is_special(id) {
            if text.is_empty() {
                return Err(GrammarError::invalid_structure(path, format!("token id {id} has no token (padding)")));
            }
            return Ok(Resolved::Special(id));
        }
        match std::str::from_utf8(text) {
            Ok(t) => Ok(Resolved::Text(t.to_string())),
            Err(_) => Err(GrammarError::invalid_structure(
                path,
                format!("token {id} is an ordinary token whose bytes are not UTF-8 text; name its text instead"),
            )),
        }
    }
}

fn end_token(path: &str, text: &str) -> GrammarError {
    GrammarError::invalid_structure(path, format!("{text:?} ends generation (EOS): a structure ends where its language accepts, so it cannot name it"))
}
