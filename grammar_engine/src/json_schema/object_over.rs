//! The over-language of objects (see `walk`): a regular language holding every canonical
//! object text valid under a conjunction, narrowed where that is cheap and certain.
//!
//! A value is a scalar, or a container written as any text between its brackets: a
//! container's own commas and braces may then be read in more than one way, but its true
//! reading is always one of them, so every valid text is in and the language only grows.

use serde_json::Value;

use super::objects::string_literal_text;
use super::strings::{any_string_value, string_value_literal};
use super::values::{kind_superset, JsonType, ANY_NUMBER, K_ARRAY, K_OBJECT};
use super::walk::{Compiler, Conj};
use crate::automata::Expr;
use crate::error::Result;

/// Most declared members whose values narrow an object's over-language.
const MAX_SCALAR_MEMBERS: usize = 16;

/// The over-language of objects: any object, narrowed by the declared names closed by
/// `additionalProperties: false`, by the values of declared members that hold scalars when
/// over-languages are precise (see [`scalar_members`]), and by up to three required names (an
/// object holding name `k` contains `"k"` then `:`), preferring those whose values are
/// constants.
pub(crate) fn over<'a>(c: &mut Compiler<'a>, conj: &Conj<'a>) -> Result<Expr> {
    let ws = c.ws.clone();
    let mut lang = Expr::regex(kind_superset(JsonType::Object));
    let mut keyed: Vec<(String, Option<&'a Value>)> = Vec::new();
    for (m, item) in conj.maps() {
        let names: Vec<&str> = match m.get("required") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        for name in names {
            let constant = m.get("properties").and_then(|p| p.get(name)).and_then(|s| constant_values(c, s, &item.base));
            if !keyed.iter().any(|(n, _)| n == name) {
                keyed.push((name.to_string(), constant));
            }
        }
    }
    // A member with `additionalProperties: false` (and no `patternProperties`) closes the
    // names: every member's name is a declared one, followed by some value.
    for (m, _) in conj.maps() {
        if !matches!(m.get("additionalProperties"), Some(Value::Bool(false))) || m.contains_key("patternProperties") {
            continue;
        }
        let declared: Vec<String> = m
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(|k| regex_syntax::escape(&string_literal_text(k))).collect())
            .unwrap_or_default();
        let closed = if declared.is_empty() {
            Expr::regex(format!(r"\{{{ws}\}}"))
        } else {
            let member = format!("(?:{}){ws}:{ws}{}", declared.join("|"), any_value());
            Expr::regex(format!(r"\{{{ws}(?:{member}(?:{ws},{ws}{member})*{ws})?\}}"))
        };
        lang = lang.and(&closed, c.config)?;
        break;
    }
    if c.precise_over {
        if let Some(members) = scalar_members(c, conj)? {
            lang = lang.and(&members, c.config)?;
        }
    }
    keyed.sort_by_key(|(n, v)| (c.common_names.contains(n), v.is_none()));
    for (name, constant) in keyed.into_iter().take(3) {
        let key = regex_syntax::escape(&string_literal_text(&name));
        let value = match constant {
            Some(Value::Array(values)) => {
                let alts: Vec<String> = values.iter().map(scalar_regex).collect();
                format!("(?:{})", alts.join("|"))
            }
            Some(v) => scalar_regex(v),
            None => String::new(),
        };
        let needle = Expr::regex(format!(r"(?s:.)*{key}{ws}:{ws}{value}(?s:.)*"));
        lang = lang.and(&needle, c.config)?;
    }
    Ok(lang)
}

/// The scalar constants a property schema allows (`const`, or an `enum` of up to 8 scalars),
/// through `$ref`s.
fn constant_values<'a>(c: &Compiler<'a>, schema: &'a Value, base: &str) -> Option<&'a Value> {
    let m = through_refs(c, schema, base)?;
    let v = m
        .get("const")
        .filter(|_| c.reading.knows_const())
        .or_else(|| m.get("enum").filter(|e| e.as_array().is_some_and(|a| a.len() <= 8)))?;
    match v {
        Value::Array(a) if m.contains_key("enum") => a.iter().all(is_scalar).then_some(v),
        v if is_scalar(v) => Some(v),
        _ => None,
    }
}

/// The schema object at the end of `schema`'s `$ref` chain (up to 8 references), if any.
fn through_refs<'a>(c: &Compiler<'a>, schema: &'a Value, base: &str) -> Option<&'a serde_json::Map<String, Value>> {
    let mut s = schema;
    for _ in 0..8 {
        let m = s.as_object()?;
        match m.get("$ref").and_then(Value::as_str) {
            Some(r) => s = c.resolver.resolve(r, base, "$ref", &super::context::Ctx::root()).ok()?.schema,
            None => return Some(m),
        }
    }
    None
}

fn is_scalar(v: &Value) -> bool {
    !v.is_object() && !v.is_array()
}

/// A regex of a prefix of every text of a scalar (numbers: any spelling's common start).
fn scalar_regex(v: &Value) -> String {
    match v {
        Value::Number(_) => String::from("-?[0-9]"),
        Value::String(s) => match string_value_literal(s) {
            Expr::Regex(r) => r.to_string(),
            _ => String::from("\""),
        },
        other => regex_syntax::escape(&serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Any JSON value, a container as any text in its brackets.
fn any_value() -> String {
    format!(r"(?:null|true|false|{}|{}|{}|{})", ANY_NUMBER, any_string_value(), kind_superset(JsonType::Object), kind_superset(JsonType::Array))
}

/// Objects whose members named like a declared property that holds only scalars have a value
/// in that property's over-language, in any order, beside any other members; the members no
/// `properties` names are narrowed in the same way by an `additionalProperties` that holds
/// only scalars (see [`additional_scalars`]). `None` when nothing holds only scalars. A
/// declared member whose schema may hold a container is left free (its over-language would
/// cost a walk of the whole subschema).
fn scalar_members<'a>(c: &mut Compiler<'a>, conj: &Conj<'a>) -> Result<Option<Expr>> {
    let mut names: Vec<(&'a str, Vec<super::walk::Item<'a>>)> = Vec::new();
    for (m, item) in conj.maps() {
        let Some(Value::Object(props)) = m.get("properties") else { continue };
        for (name, s) in props {
            let child = item.child(s, &format!("properties/{}", super::refs::pointer_token(name)), &c.resolver)?;
            match names.iter_mut().find(|(n, _)| *n == name.as_str()) {
                Some((_, items)) => items.push(child),
                None => names.push((name.as_str(), vec![child])),
            }
        }
    }
    let ws = c.ws.clone();
    let mut keys = Vec::new();
    let mut members = Vec::new();
    // Declared names left free: their values are any value, whatever `additionalProperties` says.
    let mut free = Vec::new();
    for (name, items) in names {
        let key = Expr::literal(&string_literal_text(name));
        if members.len() == MAX_SCALAR_MEMBERS || !items.iter().all(|i| holds_only_scalars(c, i.schema, &i.base)) {
            free.push(key);
            continue;
        }
        let value = c.over(Conj::of(items))?;
        members.push(Expr::concat(vec![key.clone(), Expr::regex(format!("{ws}:{ws}")), value]));
        keys.push(key);
    }
    let any_member = || Expr::regex(format!("{ws}:{ws}{}", any_value()));
    let other_value = match additional_scalars(c, conj)? {
        Some(value) => {
            if !free.is_empty() {
                members.push(Expr::concat(vec![Expr::union(free.clone()), any_member()]));
                keys.append(&mut free);
            }
            Expr::concat(vec![Expr::regex(format!("{ws}:{ws}")), value])
        }
        None if members.is_empty() => return Ok(None),
        None => any_member(),
    };
    let other_key = Expr::regex(any_string_value()).minus(&Expr::union(keys), c.config)?;
    members.push(Expr::concat(vec![other_key, other_value]));
    let member = Expr::union(members);
    let more = Expr::repeat(Expr::concat(vec![Expr::regex(format!("{ws},{ws}")), member.clone()]), 0, None);
    let body = Expr::optional(Expr::concat(vec![member, more]));
    Ok(Some(Expr::concat(vec![Expr::regex(format!(r"\{{{ws}")), body, Expr::regex(format!(r"{ws}\}}"))])))
}

/// The over-language of the values of members no `properties` names, when one member of the
/// conjunction gives them an `additionalProperties` schema that holds only scalars and no
/// `patternProperties` (so it applies to every name it does not declare): such a value
/// satisfies that schema, whatever else applies to it.
fn additional_scalars<'a>(c: &mut Compiler<'a>, conj: &Conj<'a>) -> Result<Option<Expr>> {
    for (m, item) in conj.maps() {
        let Some(extra) = m.get("additionalProperties").filter(|v| v.is_object()) else { continue };
        if m.contains_key("patternProperties") || !holds_only_scalars(c, extra, &item.base) {
            continue;
        }
        let child = item.child(extra, "additionalProperties", &c.resolver)?;
        return Ok(Some(c.over(Conj::of(vec![child]))?));
    }
    Ok(None)
}

/// Whether a property schema (through `$ref`s) allows scalars only: a `type` without
/// `object` and `array`, or an `enum`/`const` of scalars.
fn holds_only_scalars<'a>(c: &Compiler<'a>, schema: &'a Value, base: &str) -> bool {
    let Some(m) = through_refs(c, schema, base) else { return false };
    if let Some(t) = m.get("type") {
        let kinds = super::values::type_kinds(t, &super::context::Ctx::root()).unwrap_or(K_OBJECT);
        return kinds & (K_OBJECT | K_ARRAY) == 0;
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        return values.iter().all(is_scalar);
    }
    m.get("const").filter(|_| c.reading.knows_const()).is_some_and(is_scalar)
}
