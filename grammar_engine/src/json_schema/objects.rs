//! Objects: which members an object has, in which order, with which values.
//!
//! Output shape. Declared properties come first, in declaration order (required ones always,
//! optional ones possibly left out); then required names no schema declares; then extra
//! members, but only where the schema invites them: a `patternProperties` pattern, an
//! `additionalProperties` (or `unevaluatedProperties`) *schema*, or an object with no member
//! keywords at all (any object). `additionalProperties` absent or `true` next to declared
//! properties does not add extras: every output still validates, and a generator wants the
//! declared ones. A property's value must satisfy every schema that applies to its name in
//! every member of the conjunction: `properties`, the matching `patternProperties`, else
//! `additionalProperties`, else (when nothing evaluated it) `unevaluatedProperties`; and the
//! name must satisfy `propertyNames`.
//!
//! Extra names are never a declared, required or forbidden name. A name matching two patterns
//! is not generated (its value would need both schemas and the pattern regions would overlap).
//! When the extra names are a short finite list (a `propertyNames` enum, a pattern such as
//! `^x[0-2]$`), each is an optional member of its own, in byte order of the names, so none is
//! written twice. Otherwise one member language is repeated, and a regular language cannot
//! keep the repeated names distinct.
//!
//! Counts: `minProperties` above the required count makes optional members required, in order
//! (declared ones, then listed extra names; then one repeated extra member if need be);
//! `maxProperties` keeps the first optional ones that fit. Both are sound restrictions of the
//! exact rule.
//!
//! Dependencies (`dependentRequired`, `dependentSchemas`, draft-7 `dependencies`) split the
//! conjunction into "the name is absent" and "the name is present and so is what it needs".

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::policy::is_validation_keyword;
use super::refs::pointer_token;
use super::strings::{string_expr, string_literal, StringFacts};
use super::values::any_string;
use super::walk::{count_keyword, Compiler, Conj, Item, DONE_DEPENDENCIES};
use crate::automata::Expr;
use crate::automata::Dfa;
use crate::error::Result;

/// Largest number of dependency entries split on; past it, a dependent name is left out
/// (forbidden) unless something requires it.
const MAX_SPLIT_DEPENDENCIES: usize = 6;

/// What one member of the conjunction says about object members.
struct Rule<'a> {
    item: Item<'a>,
    properties: Option<&'a Map<String, Value>>,
    patterns: Vec<(&'a str, &'a Value)>,
    additional: Option<&'a Value>,
    unevaluated: Option<&'a Value>,
}

impl<'a> Rule<'a> {
    fn of(map: &'a Map<String, Value>, item: &Item<'a>) -> Result<Rule<'a>> {
        let properties = match map.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return Err(item.ctx.invalid("properties must be an object")),
        };
        let patterns = match map.get("patternProperties") {
            None => Vec::new(),
            Some(Value::Object(p)) => p.iter().map(|(k, v)| (k.as_str(), v)).collect(),
            Some(_) => return Err(item.ctx.invalid("patternProperties must be an object")),
        };
        Ok(Rule {
            item: item.clone(),
            properties,
            patterns,
            additional: map.get("additionalProperties"),
            unevaluated: map.get("unevaluatedProperties"),
        })
    }

    /// Whether the rule invites extra members (patterns or an additional schema).
    fn invites_extras(&self) -> bool {
        !self.patterns.is_empty() || self.additional.is_some_and(Value::is_object)
    }
}

/// One member slot of the object body.
enum Slot {
    Required(Expr),
    Optional(Expr),
    /// Extra members: `lo..=hi` of them (`hi` None: unbounded).
    Extras(Expr, u32, Option<u32>),
}

/// The language of the objects valid under the conjunction.
pub(crate) fn object<'a>(c: &mut Compiler<'a>, conj: &Conj<'a>) -> Result<Expr> {
    let mut rules = Vec::new();
    let mut names_items: Vec<Item<'a>> = Vec::new();
    let mut required: Vec<String> = Vec::new();
    let (mut min_props, mut max_props) = (0u64, None::<u64>);
    for (m, item) in conj.maps() {
        rules.push(Rule::of(m, item)?);
        if let Some(r) = m.get("required") {
            for name in required_names(r, item)? {
                if !required.contains(&name) {
                    required.push(name);
                }
            }
        }
        if let Some(p) = m.get("propertyNames") {
            names_items.push(item.child(p, "propertyNames", &c.resolver)?);
        }
        if let Some(n) = count_keyword(m, "minProperties", &item.ctx)? {
            min_props = min_props.max(n);
        }
        if let Some(n) = count_keyword(m, "maxProperties", &item.ctx)? {
            max_props = Some(max_props.map_or(n, |x| x.min(n)));
        }
    }
    for name in &conj.required {
        if !required.contains(name) {
            required.push(name.clone());
        }
    }
    let ctx = conj.items.first().map(|i| i.ctx.clone()).unwrap_or_else(super::context::Ctx::root);
    // The names propertyNames allows (None: any).
    let names: Option<Dfa> = if names_items.is_empty() {
        None
    } else {
        match c.compile(Conj::of(names_items))?.to_dfa(c.config)? {
            Some(d) => Some(d),
            None if required.is_empty() => return Ok(Expr::regex(format!(r"\{{{ws}\}}", ws = c.ws))),
            None => return Ok(Expr::Empty),
        }
    };

    // Declared names in order, then required names nobody declares.
    let mut order: Vec<String> = Vec::new();
    for r in &rules {
        for name in r.properties.into_iter().flat_map(|p| p.keys()) {
            if !order.contains(name) {
                order.push(name.clone());
            }
        }
    }
    for name in &required {
        if !order.contains(name) {
            order.push(name.clone());
        }
    }
    let mut forbidden: HashSet<String> = conj.forbidden.iter().cloned().collect();
    let ws = c.ws.clone();
    // Each member with whether it is required.
    let mut members: Vec<(Expr, bool)> = Vec::new();
    // Past the prune depth only the members the counts need are kept (required ones, and as
    // many optional ones as `minProperties` asks for).
    let prune = c.pruning();
    let mut optional_room = min_props.saturating_sub(required.len() as u64);
    for name in &order {
        let is_required = required.contains(name);
        if prune && !is_required && !forbidden.contains(name) {
            if optional_room == 0 {
                c.note_pruned();
                forbidden.insert(name.clone());
                continue;
            }
            optional_room -= 1;
        }
        let allowed = !forbidden.contains(name) && names.as_ref().is_none_or(|d| accepts(d, &string_literal_text(name)));
        let value = if allowed { c.inside(|c| value_of(c, &rules, name))? } else { None };
        match value {
            Some(v) if !v.is_empty() => {
                let member = Expr::concat(vec![string_literal(name), Expr::regex(format!("{ws}:{ws}")), v]);
                members.push((member, is_required));
            }
            _ if is_required => return Ok(Expr::Empty),
            _ => {
                forbidden.insert(name.clone());
            }
        }
    }

    // Extra members.
    let taken: Vec<&str> = order.iter().map(String::as_str).chain(forbidden.iter().map(String::as_str)).collect();
    // Extras too, unless the kept members may fall short of `minProperties`.
    let extras = if prune && members.len() as u64 >= min_props {
        if rules.iter().any(Rule::invites_extras) {
            c.note_pruned();
        }
        Extras::Named(Vec::new())
    } else {
        c.inside(|c| extra_members(c, &rules, &taken, names.as_ref()))?
    };
    let extras = match extras {
        Extras::Repeated(e) => Some(e),
        // Listed extras are optional members after the declared ones.
        Extras::Named(list) => {
            members.extend(list.into_iter().map(|m| (m, false)));
            None
        }
    };

    // Counts.
    let n_required = members.iter().filter(|m| m.1).count() as u64;
    if max_props.is_some_and(|hi| n_required > hi) {
        return Ok(Expr::Empty);
    }
    let mut need = min_props.saturating_sub(n_required);
    for m in members.iter_mut() {
        if need == 0 {
            break;
        }
        if !m.1 {
            m.1 = true;
            need -= 1;
        }
    }
    let (mut extra_lo, mut extra_hi) = (0u64, None::<u64>);
    if need > 0 {
        match &extras {
            Some(e) if !e.is_empty() && need == 1 => extra_lo = need,
            Some(_) => {
                return Err(ctx.unsupported(
                    "minProperties",
                    format!("{need} more properties than the schema names are needed; their names come from a set too large to list, and a grammar cannot keep such names distinct"),
                ))
            }
            None => {
                return Err(ctx.unsupported(
                    "minProperties",
                    format!("{need} more properties are needed than the names the schema lets Onyx generate"),
                ))
            }
        }
    }
    if let Some(hi) = max_props {
        let mut room = hi - members.iter().filter(|m| m.1).count() as u64;
        members.retain(|m| {
            if m.1 {
                return true;
            }
            if room > 0 {
                room -= 1;
                true
            } else {
                false
            }
        });
        extra_hi = Some(room);
        if extra_lo > room {
            return Ok(Expr::Empty);
        }
    }

    let mut slots: Vec<Slot> = members
        .into_iter()
        .map(|(e, req)| if req { Slot::Required(e) } else { Slot::Optional(e) })
        .collect();
    if let Some(extras) = extras.filter(|e| !e.is_empty() && extra_hi != Some(0)) {
        let lo = u32::try_from(extra_lo).unwrap_or(u32::MAX);
        let hi = extra_hi.map(|h| u32::try_from(h.min(super::walk::MAX_COUNT)).unwrap_or(u32::MAX));
        slots.push(Slot::Extras(extras, lo, hi));
    }
    Ok(Expr::concat(vec![Expr::regex(format!(r"\{{{ws}")), body(slots, &ws), Expr::regex(format!(r"{ws}\}}"))]))
}

/// The value language of a named member: every schema that applies to the name, in every
/// rule; `None` when some rule forbids the name.
fn value_of<'a>(c: &mut Compiler<'a>, rules: &[Rule<'a>], name: &str) -> Result<Option<Expr>> {
    let mut items = Vec::new();
    let mut evaluated = false;
    for r in rules {
        // `properties` and every matching `patternProperties` apply together.
        let mut matched = false;
        if let Some(sub) = r.properties.and_then(|p| p.get(name)) {
            items.push(r.item.child(sub, &format!("properties/{}", pointer_token(name)), &c.resolver)?);
            evaluated = true;
            matched = true;
        }
        for &(pattern, sub) in &r.patterns {
            if c.pattern_matches(pattern, name, &r.item.ctx) {
                items.push(r.item.child(sub, &format!("patternProperties/{}", pointer_token(pattern)), &c.resolver)?);
                matched = true;
            }
        }
        if matched {
            evaluated = true;
            continue;
        }
        match r.additional {
            Some(Value::Bool(false)) => return Ok(None),
            Some(sub) => {
                items.push(r.item.child(sub, "additionalProperties", &c.resolver)?);
                evaluated = true;
            }
            None => {}
        }
    }
    if !evaluated {
        for r in rules {
            match r.unevaluated {
                Some(Value::Bool(false)) => return Ok(None),
                Some(sub) => items.push(r.item.child(sub, "unevaluatedProperties", &c.resolver)?),
                None => {}
            }
        }
    }
    if items.is_empty() {
        let depth = c.opts.max_any_depth.saturating_sub(1);
        return Ok(Some(c.any(depth)));
    }
    Ok(Some(c.compile(Conj::of(items))?))
}

/// Most extra member names listed one by one (see [`Extras::Named`]).
const MAX_NAMED_EXTRAS: usize = 16;

/// The members an object may have beyond its declared and required names.
enum Extras {
    /// The extra names are few and known: one optional member each (name, colon, value), in
    /// byte order of the names, so each name is written at most once. Empty: no extras.
    Named(Vec<Expr>),
    /// Infinitely (or too) many names: one member language, repeated. A regular language
    /// cannot keep the repeated names distinct.
    Repeated(Expr),
}

/// The extra members, from the regions where the schemas treat names alike.
fn extra_members<'a>(c: &mut Compiler<'a>, rules: &[Rule<'a>], taken: &[&str], names: Option<&Dfa>) -> Result<Extras> {
    let ws = c.ws.clone();
    let free = rules.iter().all(|r| r.properties.is_none() && r.patterns.is_empty() && r.additional.is_none() && r.unevaluated.is_none());
    let mut regions: Vec<(Expr, Vec<Item<'a>>)> = Vec::new();
    if free {
        regions.push((Expr::regex(any_string()), Vec::new()));
    } else if rules.iter().any(Rule::invites_extras) || rules.iter().any(|r| r.unevaluated.is_some_and(Value::is_object)) {
        // Every pattern of every rule, for excluding the names other patterns match.
        let mut all_patterns: Vec<(&'a str, Expr)> = Vec::new();
        for r in rules {
            for &(p, _) in &r.patterns {
                if all_patterns.iter().any(|(q, _)| *q == p) {
                    continue; // the same pattern in another member of the conjunction
                }
                match pattern_names(c, p) {
                    // Built once: each is subtracted from the others' names and the rest.
                    Some(e) => all_patterns.push((p, e.built(c.config)?)),
                    // A pattern we cannot read: its names cannot be told apart, so no extras.
                    None => return Ok(Extras::Named(Vec::new())),
                }
            }
        }
        // One region per distinct pattern: the names it matches and no other pattern does. A
        // member of the conjunction with that pattern applies its schema there; one without it
        // applies its additionalProperties.
        for (p, own) in &all_patterns {
            let mut names_here = own.clone();
            for (q, other) in &all_patterns {
                if q != p {
                    names_here = names_here.minus(other, c.config)?;
                }
            }
            let mut items = Vec::new();
            let mut ok = true;
            for r in rules {
                if let Some(&(_, sub)) = r.patterns.iter().find(|(q, _)| q == p) {
                    items.push(r.item.child(sub, &format!("patternProperties/{}", pointer_token(p)), &c.resolver)?);
                    continue;
                }
                match r.additional {
                    Some(Value::Bool(false)) => ok = false,
                    Some(s @ Value::Object(_)) => items.push(r.item.child(s, "additionalProperties", &c.resolver)?),
                    _ => {}
                }
            }
            if ok {
                regions.push((names_here, items));
            }
        }
        // Names no pattern matches: every rule's additionalProperties, else unevaluatedProperties.
        let mut any_additional = false;
        let mut items = Vec::new();
        let mut ok = true;
        for r in rules {
            match r.additional {
                Some(Value::Bool(false)) => ok = false,
                Some(s @ Value::Object(_)) => {
                    items.push(r.item.child(s, "additionalProperties", &c.resolver)?);
                    any_additional = true;
                }
                Some(_) => any_additional = true,
                None => {}
            }
        }
        if !any_additional {
            for r in rules {
                match r.unevaluated {
                    Some(Value::Bool(false)) => ok = false,
                    Some(s @ Value::Object(_)) => items.push(r.item.child(s, "unevaluatedProperties", &c.resolver)?),
                    _ => {}
                }
            }
        }
        if ok && !items.is_empty() {
            let mut rest = Expr::regex(any_string());
            for (_, e) in &all_patterns {
                rest = rest.minus(e, c.config)?;
            }
            regions.push((rest, items));
        }
    }
    let mut excluded: Vec<Expr> = taken.iter().map(|n| string_literal(n)).collect();
    excluded.dedup_by(|a, b| format!("{a:?}") == format!("{b:?}"));
    let excluded = Expr::union(excluded);
    let mut parts = Vec::new();
    for (mut key, items) in regions {
        if !excluded.is_empty() {
            key = key.minus(&excluded, c.config)?;
        }
        if let Some(d) = names {
            key = key.and(&Expr::Dfa(std::rc::Rc::new(d.clone())), c.config)?;
        }
        if key.is_empty() {
            continue;
        }
        let value = if items.is_empty() {
            let depth = c.opts.max_any_depth.saturating_sub(1);
            c.any(depth)
        } else {
            c.compile(Conj::of(items))?
        };
        if value.is_empty() {
            continue;
        }
        parts.push((key, value));
    }
    let colon = || Expr::regex(format!("{ws}:{ws}"));
    // A short finite list of names: one member per name, so that none is written twice. (The
    // regions are disjoint; a name listed twice would still be kept once.)
    let mut named = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for (key, value) in &parts {
        let Some(texts) = listed_names(c, key, MAX_NAMED_EXTRAS - listed.len())? else {
            let repeated = parts.into_iter().map(|(k, v)| Expr::concat(vec![k, colon(), v])).collect();
            return Ok(Extras::Repeated(Expr::union(repeated)));
        };
        for t in texts {
            if !listed.contains(&t) {
                named.push(Expr::concat(vec![Expr::literal(&t), colon(), value.clone()]));
                listed.push(t);
            }
        }
    }
    Ok(Extras::Named(named))
}

/// The quoted names of a finite key language of at most `max` names, in byte order (`None`:
/// infinite, too many, or too large to list).
fn listed_names(c: &Compiler<'_>, key: &Expr, max: usize) -> Result<Option<Vec<String>>> {
    let Some(dfa) = super::arrays::listable(c, key, "a property-name language")? else { return Ok(None) };
    let Some(dfa) = dfa else { return Ok(Some(Vec::new())) };
    // Key texts are canonical JSON strings: one text per name, valid UTF-8.
    Ok(dfa.strings(max).map(|texts| texts.into_iter().map(|t| String::from_utf8_lossy(&t).into_owned()).collect()))
}

/// The quoted names a pattern matches (`None` when the pattern cannot be compiled).
fn pattern_names<'a>(c: &mut Compiler<'a>, pattern: &str) -> Option<Expr> {
    let facts = StringFacts {
        patterns: vec![(pattern.to_string(), super::context::Ctx::root())],
        formats: Vec::new(),
        min_length: 0,
        max_length: None,
    };
    string_expr(&facts, c.config).ok()
}

impl<'a> Compiler<'a> {
    /// Whether `pattern` matches the name. A pattern that cannot be compiled counts as matching
    /// (its schema then applies too: stricter, so still sound).
    pub(crate) fn pattern_matches(&mut self, pattern: &str, name: &str, _ctx: &super::context::Ctx) -> bool {
        match pattern_names(self, pattern).and_then(|e| e.to_dfa(self.config).ok().flatten()) {
            Some(d) => accepts(&d, &string_literal_text(name)),
            None => true,
        }
    }
}

/// The canonical JSON text of a string (quotes included).
pub(super) fn string_literal_text(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn accepts(d: &Dfa, text: &str) -> bool {
    d.accepts(text.as_bytes())
}

/// The body between the braces: the slots' members in order, separated by commas.
///
/// With `r` the first required slot, the body is `(P ,)? m_r` followed by the later slots
/// (`,m` when required, `(?:,m)?` when optional, `(?:,m){lo,hi}` for extras), where `P` is a
/// non-empty ordered subsequence of the optional slots before `r`. Without a required slot it
/// is `P?` over all of them.
fn body(slots: Vec<Slot>, ws: &str) -> Expr {
    let sep = || Expr::regex(format!("{ws},{ws}"));
    let first_required = slots.iter().position(|s| match s {
        Slot::Required(_) => true,
        Slot::Extras(_, lo, _) => *lo > 0,
        Slot::Optional(_) => false,
    });
    let mut leading: Vec<Expr> = Vec::new();
    let mut iter = slots.into_iter();
    let mut parts: Vec<Expr> = Vec::new();
    let start = first_required.unwrap_or(usize::MAX);
    let mut index = 0;
    for slot in iter.by_ref() {
        if index == start {
            let head = match slot {
                Slot::Required(m) => m,
                Slot::Extras(m, lo, hi) => Expr::concat(vec![
                    m.clone(),
                    Expr::repeat(Expr::concat(vec![sep(), m]), lo - 1, hi.map(|h| h.saturating_sub(1))),
                ]),
                Slot::Optional(m) => m,
            };
            if !leading.is_empty() {
                parts.push(Expr::optional(Expr::concat(vec![subsequence(&leading, ws), sep()])));
            }
            parts.push(head);
            break;
        }
        match slot {
            Slot::Optional(m) => leading.push(m),
            Slot::Extras(m, 0, hi) => {
                // A trailing run of extras: as an optional item of the subsequence.
                leading.push(Expr::concat(vec![
                    m.clone(),
                    Expr::repeat(Expr::concat(vec![sep(), m]), 0, hi.map(|h| h.saturating_sub(1))),
                ]));
            }
            Slot::Required(_) | Slot::Extras(..) => unreachable!("the first required slot is handled above"),
        }
        index += 1;
    }
    if first_required.is_none() {
        return if leading.is_empty() { Expr::epsilon() } else { Expr::optional(subsequence(&leading, ws)) };
    }
    for slot in iter {
        parts.push(match slot {
            Slot::Required(m) => Expr::concat(vec![sep(), m]),
            Slot::Optional(m) => Expr::optional(Expr::concat(vec![sep(), m])),
            Slot::Extras(m, lo, hi) => Expr::repeat(Expr::concat(vec![sep(), m]), lo, hi),
        });
    }
    Expr::concat(parts)
}

/// The non-empty ordered subsequences of `items`, separated by commas (see
/// [`Expr::subsequence`]).
pub(crate) fn subsequence(items: &[Expr], ws: &str) -> Expr {
    Expr::subsequence(items.to_vec(), Expr::regex(format!("{ws},{ws}")))
}

/// The names of a `required` array.
fn required_names(v: &Value, item: &Item) -> Result<Vec<String>> {
    match v {
        Value::Array(names) => names
            .iter()
            .map(|n| n.as_str().map(str::to_string).ok_or_else(|| item.ctx.invalid("required must be an array of strings")))
            .collect(),
        // Draft 3's boolean `required` inside properties: not a draft this compiler reads.
        Value::Bool(_) => Ok(Vec::new()),
        _ => Err(item.ctx.invalid("required must be an array of strings")),
    }
}

/// The names a conjunction requires.
pub(crate) fn required_by(conj: &Conj) -> HashSet<String> {
    let mut out: HashSet<String> = conj.required.iter().cloned().collect();
    for (m, _) in conj.maps() {
        if let Some(Value::Array(names)) = m.get("required") {
            out.extend(names.iter().filter_map(Value::as_str).map(str::to_string));
        }
    }
    out
}

/// The names of a schema whose only validation keyword is `required`.
pub(crate) fn required_only(schema: &Value) -> Option<Vec<String>> {
    let m = schema.as_object()?;
    if m.keys().any(|k| k != "required" && is_validation_keyword(k)) {
        return None;
    }
    let names = m.get("required")?.as_array()?;
    names.iter().map(|n| n.as_str().map(str::to_string)).collect()
}

/// Most cases [`absent_cases`] lists.
const MAX_ABSENT_CASES: usize = 64;

/// What `not: schema` asks when `schema` asks only for member names (`required`, and `anyOf`
/// or `allOf` of such schemas): the value is an object (every other value satisfies
/// `required`), and one of the cases holds, each a set of names all absent. `required: [a, b]`
/// gives the cases `[a]` and `[b]`; `anyOf` of two such schemas gives every union of one case of
/// each (each must fail); `allOf`, the cases of either. No case: `not` of a schema every value
/// satisfies. `None` for any other schema, or too many cases.
pub(crate) fn absent_cases(schema: &Value) -> Option<Vec<Vec<String>>> {
    if let Some(mut names) = required_only(schema) {
        let mut seen = HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        return Some(names.into_iter().map(|n| vec![n]).collect());
    }
    let m = schema.as_object()?;
    let mut keys = m.keys().filter(|k| is_validation_keyword(k));
    let (Some(key), None) = (keys.next(), keys.next()) else { return None };
    let branches = m.get(key)?.as_array()?;
    match key.as_str() {
        "allOf" => {
            let mut cases = Vec::new();
            for b in branches {
                cases.extend(absent_cases(b)?);
            }
            (cases.len() <= MAX_ABSENT_CASES).then_some(cases)
        }
        "anyOf" if !branches.is_empty() => {
            let mut cases: Vec<Vec<String>> = vec![Vec::new()];
            for b in branches {
                let each = absent_cases(b)?;
                if cases.len().saturating_mul(each.len()) > MAX_ABSENT_CASES {
                    return None;
                }
                cases = cases
                    .iter()
                    .flat_map(|c| {
                        each.iter().map(move |e| {
                            let mut u = c.clone();
                            u.extend(e.iter().filter(|n| !c.contains(n)).cloned());
                            u
                        })
                    })
                    .collect();
            }
            Some(cases)
        }
        _ => None,
    }
}

pub(crate) fn has_dependencies(m: &Map<String, Value>) -> bool {
    ["dependentRequired", "dependentSchemas", "dependencies"].iter().any(|k| m.get(*k).is_some_and(|v| v.as_object().is_some_and(|o| !o.is_empty())))
}

/// What one dependency entry asks when its name is present.
enum Need<'a> {
    Names(Vec<String>),
    Schema(Item<'a>),
}

/// Splits on every dependency of `item`: each name is either absent, or present together with
/// what it needs.
pub(crate) fn dependencies<'a>(c: &mut Compiler<'a>, rest: Conj<'a>, item: Item<'a>) -> Result<Expr> {
    let Some(m) = item.map() else { return c.compile(rest) };
    let mut entries: Vec<(String, Need<'a>)> = Vec::new();
    for keyword in ["dependentRequired", "dependentSchemas", "dependencies"] {
        let Some(v) = m.get(keyword) else { continue };
        let map = v.as_object().ok_or_else(|| item.ctx.invalid(format!("{keyword} must be an object")))?;
        for (name, need) in map {
            let need = match need {
                Value::Array(names) => Need::Names(
                    names
                        .iter()
                        .map(|n| n.as_str().map(str::to_string).ok_or_else(|| item.ctx.invalid(format!("{keyword} lists must hold strings"))))
                        .collect::<Result<_>>()?,
                ),
                schema if keyword != "dependentRequired" => {
                    Need::Schema(item.child(schema, &format!("{keyword}/{}", pointer_token(name)), &c.resolver)?)
                }
                _ => return Err(item.ctx.invalid("dependentRequired values must be arrays of names")),
            };
            entries.push((name.clone(), need));
        }
    }
    let mut base = rest;
    let mut me = item;
    me.done |= DONE_DEPENDENCIES;
    base.items.push(me);
    split_dependencies(c, base, entries)
}

fn split_dependencies<'a>(c: &mut Compiler<'a>, conj: Conj<'a>, mut entries: Vec<(String, Need<'a>)>) -> Result<Expr> {
    let Some((name, need)) = entries.pop() else { return c.compile(conj) };
    let required = required_by(&conj);
    let declared = conj.maps().any(|(m, _)| m.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(&name)));
    let present = |c: &mut Compiler<'a>, conj: &Conj<'a>| -> Result<Conj<'a>> {
        let mut case = conj.clone();
        if !case.required.contains(&name) {
            case.required.push(name.clone());
        }
        match &need {
            Need::Names(names) => {
                for n in names {
                    if !case.required.contains(n) {
                        case.required.push(n.clone());
                    }
                }
            }
            Need::Schema(s) => {
                c.count_case(&s.ctx)?;
                case.items.push(s.clone());
            }
        }
        Ok(case)
    };
    if required.contains(&name) {
        let case = present(c, &conj)?;
        return split_dependencies(c, case, entries);
    }
    let mut absent = conj.clone();
    if !absent.forbidden.contains(&name) {
        absent.forbidden.push(name.clone());
    }
    if conj.forbidden.contains(&name) || !declared || entries.len() >= MAX_SPLIT_DEPENDENCIES {
        return split_dependencies(c, absent, entries);
    }
    let case = present(c, &conj)?;
    let with = split_dependencies(c, case, entries.iter().map(|(n, d)| (n.clone(), clone_need(d))).collect())?;
    c.count_case(&conj.items[0].ctx)?;
    let without = split_dependencies(c, absent, entries)?;
    Ok(Expr::union(vec![with, without]))
}

fn clone_need<'a>(n: &Need<'a>) -> Need<'a> {
    match n {
        Need::Names(v) => Need::Names(v.clone()),
        Need::Schema(i) => Need::Schema(i.clone()),
    }
}
