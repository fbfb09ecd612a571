//! Placeholder: the numbers engineer's `numbers.rs` replaces this file (exact bounds,
//! multipleOf, integers per dialect). Only what the core needs to build meanwhile.

use serde_json::{Map, Number, Value};

use super::context::{Ctx, Dialect};
use crate::algebra::Expr;
use crate::dfa::DfaConfig;
use crate::error::Result;

#[derive(Debug, Clone, Default)]
pub(crate) struct NumberFacts {
    pub integer: bool,
}

impl NumberFacts {
    pub(crate) fn from_keywords(map: &Map<String, Value>, _dialect: Dialect, ctx: &Ctx) -> Result<NumberFacts> {
        for k in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"] {
            if map.contains_key(k) {
                return Err(ctx.unsupported(k, "not yet"));
            }
        }
        Ok(NumberFacts::default())
    }

    pub(crate) fn merge(&mut self, other: NumberFacts) {
        self.integer |= other.integer;
    }
}

pub(crate) fn number_expr(facts: &NumberFacts, dialect: Dialect, _config: &DfaConfig) -> Result<Expr> {
    Ok(Expr::regex(match (facts.integer, dialect >= Dialect::Draft6) {
        (true, false) => r"-?(?:0|[1-9][0-9]*)",
        (true, true) => r"-?(?:0|[1-9][0-9]*)(?:\.0+)?",
        (false, _) => r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?",
    }))
}

pub(crate) fn number_literal(n: &Number) -> Result<Expr> {
    Ok(Expr::literal(&n.to_string()))
}
