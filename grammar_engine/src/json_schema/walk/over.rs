//! Over-languages: a regular language containing every canonical text valid under a
//! conjunction (see the module docs of `walk`).

use serde_json::Value;

use super::super::arrays;
use super::super::object_over;
use super::super::values::{kind_superset, literal, one_order, value_kind, JsonType, K_ARRAY, K_BOOL, K_FRACTION, K_INTEGER, K_NULL, K_OBJECT, K_STRING};
use super::{enum_values, nonempty_list, too_deep, with_done, Compiler, Conj, Flat, DONE_ANY_OF, DONE_ONE_OF};
use crate::automata::Expr;
use crate::error::Result;

impl<'a> Compiler<'a> {
    /// A language containing every canonical text valid under the conjunction (see the module
    /// docs). Disjunctions are dropped but for `anyOf`/`oneOf` (the union of the branches'
    /// overs); objects are any object narrowed by the keys they require and the constant values
    /// of those keys, arrays any array of elements in their `items` over-language.
    pub(crate) fn over(&mut self, conj: Conj<'a>) -> Result<Expr> {
        let result = self.within_flattened(conj, true, |this, flat| match flat? {
            Flat::Cut => Ok(Expr::Empty),
            Flat::Conj(flat) => this.over_flat(flat),
            // Over-languages never call (see `flatten`).
            Flat::Call(_) => Ok(Expr::regex("(?s:.)*")),
        });
        match result {
            // Too deep to follow: every text is a superset.
            Err(e) if too_deep(&e) => Ok(Expr::regex("(?s:.)*")),
            other => other,
        }
    }

    fn over_flat(&mut self, conj: Conj<'a>) -> Result<Expr> {
        for (idx, item) in conj.items.iter().enumerate() {
            let Some(map) = item.map() else { continue };
            for (keyword, bit) in [("anyOf", DONE_ANY_OF), ("oneOf", DONE_ONE_OF)] {
                if item.done & bit != 0 {
                    continue;
                }
                let Some(v) = map.get(keyword) else { continue };
                let branches = nonempty_list(v, keyword, &item.ctx)?;
                let rest = with_done(&conj, idx, bit);
                if branches.len() > 16 {
                    return self.over_flat(rest);
                }
                let mut parts = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    let case = self.with_item(&rest, item.child(b, &format!("{keyword}/{i}"), &self.resolver)?)?;
                    parts.push(self.over(case)?);
                }
                return Ok(Expr::union(parts));
            }
        }
        let kinds = self.kinds(&conj, false)? & !conj.excluded;
        let values = enum_values(&conj, self.reading.knows_const())?;
        let mut parts = Vec::new();
        if let Some(values) = values {
            for v in values.iter().filter(|v| value_kind(v) & kinds != 0) {
                parts.push(match v {
                    // A literal spells objects in one member order; it covers every text of
                    // the value only when no object inside has two members.
                    v if one_order(v) => literal(v, &self.ws)?,
                    Value::Object(_) => Expr::regex(kind_superset(JsonType::Object)),
                    Value::Array(_) => Expr::regex(kind_superset(JsonType::Array)),
                    v => literal(v, &self.ws)?,
                });
            }
            return Ok(Expr::union(parts));
        }
        if kinds & K_NULL != 0 {
            parts.push(Expr::literal("null"));
        }
        if kinds & K_BOOL != 0 {
            parts.push(Expr::regex("true|false"));
        }
        if kinds & (K_INTEGER | K_FRACTION) != 0 {
            parts.push(self.number(&conj, kinds & K_FRACTION == 0, true)?);
        }
        if kinds & K_STRING != 0 {
            parts.push(self.string(&conj, true)?);
        }
        if kinds & K_OBJECT != 0 {
            parts.push(object_over::over(self, &conj)?);
        }
        if kinds & K_ARRAY != 0 {
            parts.push(arrays::over(self, &conj)?);
        }
        Ok(Expr::union(parts))
    }
}
