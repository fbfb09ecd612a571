//! `oneOf` without products: proving that two schemas share no valid value.
//!
//! A sound, incomplete check on the schemas' keywords (types, constants, required properties
//! with disjoint values, forbidden properties, item counts, lengths). When it proves every pair
//! of branches disjoint, `oneOf` is just their union; otherwise the walk subtracts the other
//! branches' over-languages.

use serde_json::{Map, Value};

use super::context::{Ctx, MAX_SCHEMA_DEPTH};
use super::objects::absent_cases;
use super::refs::Resolver;
use super::values::{json_equal, value_kind, JsonType, K_ALL, K_ARRAY, K_OBJECT, K_STRING};

/// How many steps the check of one pair of branches may take; past it the answer is "not
/// proven disjoint", which is always safe.
const MAX_DISJOINT_STEPS: usize = 20_000;

/// A sound, incomplete check that no JSON value validates against two schemas. "Not proven"
/// is always a safe answer; it is given when unsure, past the depth limit or past
/// [`MAX_DISJOINT_STEPS`].
pub(crate) struct Disjoint<'r, 'a> {
    resolver: &'r Resolver<'a>,
    base: &'r str,
    steps: usize,
    /// The kinds of value the context already allows (the branches of a `oneOf` next to
    /// `type: object` only need to be disjoint on objects).
    context: u8,
    /// Names the context requires of an object (the branches of a `oneOf` next to
    /// `required: ["kind"]` are disjoint when their `kind` schemas are).
    required: Vec<String>,
    /// Whether `const` constrains values in the reading (not in draft 4, nor when no `$schema`
    /// is given and draft 4's reading must hold too).
    consts: bool,
    /// Whether a `$ref` may replace its siblings in the reading (drafts 4 to 7): a schema with
    /// a `$ref` is then its target alone.
    ref_alone: bool,
}

impl<'r, 'a> Disjoint<'r, 'a> {
    pub(crate) fn new(resolver: &'r Resolver<'a>, base: &'r str) -> Self {
        Disjoint { resolver, base, steps: 0, context: K_ALL, required: Vec::new(), consts: true, ref_alone: false }
    }

    /// Whether a `$ref` may replace its siblings (see the field).
    pub(crate) fn with_ref_alone(mut self, ref_alone: bool) -> Self {
        self.ref_alone = ref_alone;
        self
    }

    /// Whether `const` counts (see the field).
    pub(crate) fn with_consts(mut self, consts: bool) -> Self {
        self.consts = consts;
        self
    }

    /// Objects of the context hold these names.
    pub(crate) fn requiring(mut self, names: Vec<String>) -> Self {
        self.required = names;
        self
    }

    /// Only values of these kinds count (the context rules the others out).
    pub(crate) fn within(mut self, kinds: u8) -> Self {
        self.context = kinds;
        self
    }

    /// Whether no value validates against both `a` and `b`.
    pub(crate) fn schemas(&mut self, a: &'a Value, b: &'a Value, depth: usize) -> bool {
        self.steps += 1;
        if self.steps > MAX_DISJOINT_STEPS || depth > MAX_SCHEMA_DEPTH {
            return false;
        }
        match (a, b) {
            (Value::Bool(false), _) | (_, Value::Bool(false)) => true,
            (Value::Object(am), Value::Object(bm)) => {
                if self.ref_alone && am.contains_key("$ref") {
                    return self.target(am).is_some_and(|t| self.schemas(t, b, depth + 1));
                }
                if self.ref_alone && bm.contains_key("$ref") {
                    return self.target(bm).is_some_and(|t| self.schemas(a, t, depth + 1));
                }
                self.through_implied(am, b, depth)
                    || self.through_implied(bm, a, depth)
                    || self.direct(am, bm, depth)
                    || self.direct(bm, am, depth)
            }
            _ => false,
        }
    }

    /// Disjoint because something every value valid under `a` must also satisfy (its `$ref`
    /// target, an `allOf` member, one of its `anyOf`/`oneOf` branches) is disjoint from `b`.
    fn through_implied(&mut self, a: &'a Map<String, Value>, b: &'a Value, depth: usize) -> bool {
        if let Some(target) = self.target(a) {
            if self.schemas(target, b, depth + 1) {
                return true;
            }
        }
        if let Some(Value::Array(all)) = a.get("allOf") {
            if all.iter().any(|s| self.schemas(s, b, depth + 1)) {
                return true;
            }
        }
        for combinator in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = a.get(combinator) {
                if !branches.is_empty() && branches.iter().all(|s| self.schemas(s, b, depth + 1)) {
                    return true;
                }
            }
        }
        false
    }

    /// The target of a local `$ref` in `m`, if it resolves.
    fn target(&self, m: &Map<String, Value>) -> Option<&'a Value> {
        let reference = m.get("$ref")?.as_str()?;
        self.resolver.resolve(reference, self.base, "$ref", &Ctx::root()).ok().map(|t| t.schema)
    }

    /// Disjoint by the keywords of `a` and `b` themselves.
    fn direct(&mut self, a: &'a Map<String, Value>, b: &'a Map<String, Value>, depth: usize) -> bool {
        let context = if depth == 0 { self.context } else { K_ALL };
        let common = schema_kinds(a, self.consts) & schema_kinds(b, self.consts) & context;
        if common == 0 {
            return true;
        }
        if let Some(values) = value_set(a, self.consts) {
            if values.iter().all(|v| self.value_fails(v, SchemaRef::Map(b), depth + 1)) {
                return true;
            }
        }
        if common & !K_OBJECT == 0 {
            // Every common value is an object, so `required` and `properties` apply on both
            // sides: a property one side requires must satisfy both sides' schemas for it.
            let (ra, rb) = (names(a.get("required")), names(b.get("required")));
            let outer: Vec<String> = if depth == 0 { self.required.clone() } else { Vec::new() };
            for p in ra.iter().copied().chain(rb.iter().copied()).chain(outer.iter().map(String::as_str)) {
                if let (Some(pa), Some(pb)) = (member_schema(a, p), member_schema(b, p)) {
                    if self.schemas(pa, pb, depth + 1) {
                        return true;
                    }
                }
            }
            if rb.iter().any(|q| forbids_property(a, q)) || ra.iter().any(|q| forbids_property(b, q)) {
                return true;
            }
            // An object holds at least the names either side requires.
            let least = |r: &[&str], m: &Map<String, Value>| {
                let distinct = r.iter().enumerate().filter(|(i, n)| !r[..*i].contains(n)).count() as u64;
                count_bound(m, "minProperties").unwrap_or(0).max(distinct)
            };
            let most = |m: &Map<String, Value>| count_bound(m, "maxProperties");
            if most(b).is_some_and(|n| least(&ra, a) > n) || most(a).is_some_and(|n| least(&rb, b) > n) {
                return true;
            }
        }
        if common & !K_ARRAY == 0 {
            if ranges_disjoint(a, b, "minItems", "maxItems") {
                return true;
            }
            // A non-empty array's first element must satisfy both `items` schemas.
            let non_empty = count_bound(a, "minItems")
                .max(count_bound(b, "minItems"))
                .is_some_and(|n| n >= 1);
            if let (true, Some(ia), Some(ib)) = (non_empty, uniform_items(a), uniform_items(b)) {
                if self.schemas(ia, ib, depth + 1) {
                    return true;
                }
            }
        }
        if common & !K_STRING == 0 && ranges_disjoint(a, b, "minLength", "maxLength") {
            return true;
        }
        false
    }

    /// Whether the value `v` certainly fails `schema`.
    fn value_fails(&mut self, v: &Value, schema: SchemaRef<'a>, depth: usize) -> bool {
        self.steps += 1;
        if self.steps > MAX_DISJOINT_STEPS || depth > MAX_SCHEMA_DEPTH {
            return false;
        }
        let m = match schema {
            SchemaRef::Value(Value::Bool(b)) => return !*b,
            SchemaRef::Value(Value::Object(m)) | SchemaRef::Map(m) => m,
            SchemaRef::Value(_) => return false,
        };
        if value_kind(v) & schema_kinds(m, self.consts) == 0 {
            return true;
        }
        if let Some(values) = value_set(m, self.consts) {
            if !values.iter().any(|w| json_equal(v, w)) {
                return true;
            }
        }
        match v {
            Value::Object(o) => {
                if names(m.get("required")).iter().any(|r| !o.contains_key(*r)) {
                    return true;
                }
                for (key, value) in o {
                    if forbids_property(m, key) {
                        return true;
                    }
                    if let Some(sub) = property(m, key) {
                        if self.value_fails(value, SchemaRef::Value(sub), depth + 1) {
                            return true;
                        }
                    }
                }
            }
            Value::Array(items) => {
                if outside(items.len(), m, "minItems", "maxItems") {
                    return true;
                }
                if let Some(item_schema) = uniform_items(m) {
                    if items
                        .iter()
                        .any(|item| self.value_fails(item, SchemaRef::Value(item_schema), depth + 1))
                    {
                        return true;
                    }
                }
            }
            Value::String(s) if outside(s.chars().count(), m, "minLength", "maxLength") => return true,
            _ => {}
        }
        if let Some(target) = self.target(m) {
            if self.value_fails(v, SchemaRef::Value(target), depth + 1) {
                return true;
            }
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            if all.iter().any(|s| self.value_fails(v, SchemaRef::Value(s), depth + 1)) {
                return true;
            }
        }
        for combinator in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = m.get(combinator) {
                if !branches.is_empty()
                    && branches
                        .iter()
                        .all(|s| self.value_fails(v, SchemaRef::Value(s), depth + 1))
                {
                    return true;
                }
            }
        }
        false
    }
}

/// A schema seen either as a JSON value (possibly boolean) or as an object's map.
#[derive(Clone, Copy)]
enum SchemaRef<'a> {
    Value(&'a Value),
    Map(&'a Map<String, Value>),
}

/// The kinds of value a schema object can accept: its `type` (all if absent or malformed),
/// narrowed by the kinds of its `enum`/`const` values.
fn schema_kinds(m: &Map<String, Value>, consts: bool) -> u8 {
    let declared = match m.get("type") {
        None => K_ALL,
        Some(t) => {
            let names: Vec<&Value> = match t {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            let mut kinds = 0;
            for name in names {
                match name.as_str().and_then(JsonType::from_name) {
                    Some(t) => kinds |= t.kinds(),
                    None => return K_ALL,
                }
            }
            kinds
        }
    };
    // `not` of a schema that asks only for names holds for objects alone.
    let declared = if m.get("not").is_some_and(|n| absent_cases(n).is_some()) { declared & K_OBJECT } else { declared };
    match value_set(m, consts) {
        Some(values) => declared & values.iter().fold(0, |k, v| k | value_kind(v)),
        None => declared,
    }
}

/// The only values a schema object accepts, if it has `const` or `enum`.
fn value_set(m: &Map<String, Value>, consts: bool) -> Option<Vec<&Value>> {
    if let Some(c) = m.get("const").filter(|_| consts) {
        return Some(vec![c]);
    }
    match m.get("enum") {
        Some(Value::Array(values)) => Some(values.iter().collect()),
        _ => None,
    }
}

/// The strings of a `required`-like array (empty if malformed).
fn names(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The declared schema of property `name`.
fn property<'m>(m: &'m Map<String, Value>, name: &str) -> Option<&'m Value> {
    m.get("properties")?.as_object()?.get(name)
}

/// The schema a member named `name` of an object valid under `m` satisfies: its declared one,
/// or else `additionalProperties` when no `patternProperties` could claim the name.
fn member_schema<'m>(m: &'m Map<String, Value>, name: &str) -> Option<&'m Value> {
    property(m, name).or_else(|| m.get("additionalProperties").filter(|_| !m.contains_key("patternProperties")))
}

/// Whether an object valid under `m` cannot have property `name`: its schema there is `false`,
/// or it is undeclared while `additionalProperties` is `false` (and no `patternProperties`), or
/// `m`'s `not` keeps it out in every case (`not: {required: [name]}`).
fn forbids_property(m: &Map<String, Value>, name: &str) -> bool {
    if m.get("not").and_then(absent_cases).is_some_and(|cases| cases.iter().all(|c| c.iter().any(|n| n == name))) {
        return true;
    }
    match property(m, name) {
        Some(Value::Bool(false)) => true,
        Some(_) => false,
        None => {
            matches!(m.get("additionalProperties"), Some(Value::Bool(false))) && !m.contains_key("patternProperties")
        }
    }
}

/// The `items` schema of `m` when it applies to every element (not the tuple forms).
fn uniform_items(m: &Map<String, Value>) -> Option<&Value> {
    m.get("items")
        .filter(|s| !s.is_array() && !m.contains_key("prefixItems"))
}

/// A count bound such as `minItems` as a number, if well formed.
fn count_bound(m: &Map<String, Value>, keyword: &str) -> Option<u64> {
    let n = m.get(keyword)?.as_number()?;
    n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e18).map(|f| f as u64))
}

/// Whether the `[min, max]` ranges of two schemas (e.g. item counts) do not meet.
fn ranges_disjoint(a: &Map<String, Value>, b: &Map<String, Value>, min: &str, max: &str) -> bool {
    let below = |x: &Map<String, Value>, y: &Map<String, Value>| match (count_bound(x, max), count_bound(y, min)) {
        (Some(hi), Some(lo)) => hi < lo,
        _ => false,
    };
    below(a, b) || below(b, a)
}

/// Whether `n` lies outside the `[min, max]` of a schema.
fn outside(n: usize, m: &Map<String, Value>, min: &str, max: &str) -> bool {
    let n = n as u64;
    count_bound(m, min).is_some_and(|lo| n < lo) || count_bound(m, max).is_some_and(|hi| n > hi)
}

