//! Which keywords constrain values, and in which dialect a schema is read.
//!
//! The JSON Schema specification makes every keyword outside the vocabularies in use an
//! annotation: a validator ignores it, so output that ignores it still validates. The
//! compiler therefore enforces the validation and applicator keywords of drafts 4, 6, 7,
//! 2019-09 and 2020-12 (the ones listed here), and ignores everything else: identifiers,
//! metadata, `x-*` extensions, misspellings and unknown names. (Unknown `format` names are
//! annotations too; the strings module decides which formats it knows.)
//!
//! Dialect. An explicit `$schema` naming a known draft is honoured. Without one, the schema is
//! taken as written for the drafts that define every keyword it uses (one with `const` is not
//! a draft 4 schema, one with `prefixItems` a 2020-12 one: [`oldest_draft_for`]), and read so
//! that its output validates under each of those drafts' readings: every keyword any draft
//! enforces is enforced (a keyword only newer drafts know is harmless to older readers, and the
//! reverse), a keyword *form* only one draft allows is read as that draft does (draft 4's
//! boolean `exclusiveMinimum`, the array form of `items`), and `integer` excludes `1.0`, which
//! draft 4 does not count as an integer.

use serde_json::Value;

use super::context::{Ctx, Dialect};
use super::values::{type_kinds, JsonType, K_ALL, K_FRACTION, K_INTEGER};

/// How a schema's keywords are read when it names no dialect (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// `$schema` names this draft.
    Draft(Dialect),
    /// No (known) `$schema`: satisfy the reading of every draft from this one on (the oldest
    /// that defines every keyword the schema uses).
    Since(Dialect),
}

impl Reading {
    /// The dialect whose rules decide a question where drafts disagree and the answer must
    /// hold under all of them: the oldest for an unspecified reading.
    pub(crate) fn strictest(self) -> Dialect {
        match self {
            Reading::Draft(d) | Reading::Since(d) => d,
        }
    }

    /// The dialect for questions where an over-approximation must hold under every reading:
    /// the newest (2020-12: `1.0` is an integer) for an unspecified reading.
    pub(crate) fn loosest(self) -> Dialect {
        match self {
            Reading::Draft(d) => d,
            Reading::Since(_) => Dialect::Draft2020,
        }
    }

    /// Whether `const` constrains values under every reading: draft 4 does not know it, so
    /// where a larger language must be assumed (over-languages, `oneOf` disjointness) it counts
    /// only when every reading is draft 6 or later.
    pub(crate) fn knows_const(self) -> bool {
        matches!(self, Reading::Draft(d) | Reading::Since(d) if d >= Dialect::Draft6)
    }

    /// Whether `$ref` replaces its siblings under some reading (drafts 4 to 7): where a larger
    /// language must be assumed (`oneOf` disjointness), its siblings then prove nothing.
    pub(crate) fn ref_may_override_siblings(self) -> bool {
        matches!(self, Reading::Draft(d) | Reading::Since(d) if d <= Dialect::Draft7)
    }

    /// Whether `$ref` replaces its siblings (drafts 4 to 7) rather than being applied beside
    /// them. Unspecified: applied beside them, which satisfies both readings.
    pub(crate) fn ref_overrides_siblings(self) -> bool {
        matches!(self, Reading::Draft(d) if d <= Dialect::Draft7)
    }
}

/// The reading of a root schema from its `$schema`.
pub(crate) fn reading_of(root: &Value) -> Reading {
    let Some(uri) = root.get("$schema").and_then(Value::as_str) else { return Reading::Since(oldest_draft_for(root)) };
    let uri = uri.trim_end_matches('#');
    let dialect = if uri.contains("draft-04") {
        Dialect::Draft4
    } else if uri.contains("draft-06") {
        Dialect::Draft6
    } else if uri.contains("draft-07") {
        Dialect::Draft7
    } else if uri.contains("2019-09") {
        Dialect::Draft2019
    } else if uri.contains("2020-12") {
        Dialect::Draft2020
    } else {
        return Reading::Since(oldest_draft_for(root));
    };
    Reading::Draft(dialect)
}

/// The draft that introduced a validation keyword, for those newer than draft 4.
fn introduced_in(keyword: &str) -> Option<Dialect> {
    Some(match keyword {
        "const" | "contains" | "propertyNames" => Dialect::Draft6,
        "if" | "then" | "else" => Dialect::Draft7,
        "$defs" | "dependentRequired" | "dependentSchemas" | "unevaluatedProperties" | "unevaluatedItems"
        | "minContains" | "maxContains" | "$anchor" | "$recursiveRef" => Dialect::Draft2019,
        "prefixItems" | "$dynamicRef" | "$dynamicAnchor" => Dialect::Draft2020,
        _ => return None,
    })
}

/// The oldest draft that defines every keyword the schema uses (in schema positions: a
/// property *named* `const` is not the keyword), draft 4 when it uses none of the newer ones.
pub(crate) fn oldest_draft_for(root: &Value) -> Dialect {
    fn visit(v: &Value, depth: usize, oldest: &mut Dialect) {
        let Value::Object(map) = v else { return };
        if depth > super::context::MAX_SCHEMA_DEPTH * 4 {
            return;
        }
        for k in map.keys() {
            if let Some(d) = introduced_in(k) {
                *oldest = (*oldest).max(d);
            }
        }
        for &(keyword, shape) in SUBSCHEMA_KEYWORDS {
            match (shape, map.get(keyword)) {
                (Shape::Map, Some(Value::Object(m))) => m.values().for_each(|sub| visit(sub, depth + 1, oldest)),
                (Shape::List | Shape::OneOrList, Some(Value::Array(items))) => items.iter().for_each(|sub| visit(sub, depth + 1, oldest)),
                (Shape::One | Shape::OneOrList, Some(sub)) => visit(sub, depth + 1, oldest),
                _ => {}
            }
        }
    }
    let mut oldest = Dialect::Draft4;
    visit(root, 0, &mut oldest);
    oldest
}

/// Keywords that apply subschemas or references to the same value.
pub(crate) const IN_PLACE: &[&str] =
    &["$ref", "$recursiveRef", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"];

/// Keywords that constrain one type of value only: a schema without `type` that uses some of
/// them is generated as those types (a sound restriction: values of other types would be
/// valid too, but a generator wants the intended one).
pub(crate) fn keyword_type(keyword: &str) -> Option<JsonType> {
    Some(match keyword {
        "minLength" | "maxLength" | "pattern" | "format" => JsonType::String,
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => JsonType::Number,
        "properties" | "required" | "additionalProperties" | "patternProperties" | "propertyNames"
        | "minProperties" | "maxProperties" | "dependencies" | "dependentRequired" | "dependentSchemas"
        | "unevaluatedProperties" => JsonType::Object,
        "items" | "additionalItems" | "prefixItems" | "minItems" | "maxItems" | "uniqueItems" | "contains"
        | "minContains" | "maxContains" | "unevaluatedItems" => JsonType::Array,
        _ => return None,
    })
}

/// Whether a keyword constrains values in some draft (everything else is an annotation).
pub(crate) fn is_validation_keyword(keyword: &str) -> bool {
    keyword_type(keyword).is_some() || IN_PLACE.contains(&keyword) || matches!(keyword, "type" | "enum" | "const")
}

/// Whether every value satisfies `schema` on its own: `true`, or keywords that admit every
/// value (annotations, a `type` naming every type).
pub(crate) fn accepts_every_value(schema: &Value) -> bool {
    accepts_every_value_of(schema, K_ALL)
}

/// Whether every value of the given kinds (`K_*` bits) satisfies `schema` on its own: `true`,
/// or a schema each of whose keywords does (see [`keyword_accepts_kinds`]).
pub(crate) fn accepts_every_value_of(schema: &Value, kinds: u8) -> bool {
    match schema {
        Value::Object(map) => map.iter().all(|(k, v)| keyword_accepts_kinds(k, v, kinds)),
        other => matches!(other, Value::Bool(true)),
    }
}

/// Whether keyword `k` with value `v` lets every value of the given kinds through: an
/// annotation, a keyword that constrains other kinds only, or a `type` that admits those kinds
/// (numbers only as `number`, which holds every spelling of a number). Keywords that hold
/// subschemas in place (`$ref`, `allOf`, ...) do not.
pub(crate) fn keyword_accepts_kinds(k: &str, v: &Value, kinds: u8) -> bool {
    const K_NUMBERS: u8 = K_INTEGER | K_FRACTION;
    if k == "type" {
        let wanted = if kinds & K_NUMBERS != 0 { kinds | K_NUMBERS } else { kinds };
        return type_kinds(v, &Ctx::root()).is_ok_and(|admitted| admitted & wanted == wanted);
    }
    match keyword_type(k) {
        Some(t) => t.kinds() & kinds == 0,
        None => !is_validation_keyword(k),
    }
}

/// The subschema-holding keywords, for walking a schema document: (keyword, shape).
pub(crate) const SUBSCHEMA_KEYWORDS: &[(&str, Shape)] = &[
    ("allOf", Shape::List),
    ("anyOf", Shape::List),
    ("oneOf", Shape::List),
    ("not", Shape::One),
    ("if", Shape::One),
    ("then", Shape::One),
    ("else", Shape::One),
    ("items", Shape::OneOrList),
    ("prefixItems", Shape::List),
    ("additionalItems", Shape::One),
    ("contains", Shape::One),
    ("unevaluatedItems", Shape::One),
    ("properties", Shape::Map),
    ("patternProperties", Shape::Map),
    ("additionalProperties", Shape::One),
    ("propertyNames", Shape::One),
    ("dependentSchemas", Shape::Map),
    ("dependencies", Shape::Map),
    ("unevaluatedProperties", Shape::One),
    ("$defs", Shape::Map),
    ("definitions", Shape::Map),
];

/// How a keyword holds its subschemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    One,
    List,
    OneOrList,
    Map,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dialects() {
        assert_eq!(reading_of(&json!({"$schema": "http://json-schema.org/draft-04/schema#"})), Reading::Draft(Dialect::Draft4));
        assert_eq!(reading_of(&json!({"$schema": "https://json-schema.org/draft/2020-12/schema"})), Reading::Draft(Dialect::Draft2020));
        assert_eq!(reading_of(&json!({"type": "string"})), Reading::Since(Dialect::Draft4));
        assert_eq!(reading_of(&json!({"$schema": "https://example.com/custom"})), Reading::Since(Dialect::Draft4));
        // Without `$schema`, the keywords used decide the oldest draft the schema can be for.
        assert_eq!(reading_of(&json!({"oneOf": [{"const": 0}, {"const": 1}]})), Reading::Since(Dialect::Draft6));
        assert_eq!(reading_of(&json!({"properties": {"a": {"if": {}, "then": {}}}})), Reading::Since(Dialect::Draft7));
        assert_eq!(reading_of(&json!({"items": [{"prefixItems": []}]})), Reading::Since(Dialect::Draft2020));
        // A property named like a keyword is not the keyword.
        assert_eq!(reading_of(&json!({"properties": {"const": {"type": "string"}}})), Reading::Since(Dialect::Draft4));
        assert!(Reading::Draft(Dialect::Draft7).ref_overrides_siblings());
        assert!(!Reading::Since(Dialect::Draft4).ref_overrides_siblings());
    }

    #[test]
    fn annotations_are_not_validation_keywords() {
        for k in ["title", "x-kubernetes-group-version-kind", "_format", "readonly", "example", "id", "links"] {
            assert!(!is_validation_keyword(k), "{k}");
        }
        for k in ["type", "properties", "multipleOf", "dependentRequired", "unevaluatedItems", "$ref", "not"] {
            assert!(is_validation_keyword(k), "{k}");
        }
        assert!(accepts_every_value(&json!({"_format": "date-time", "title": "t"})));
        assert!(accepts_every_value(&json!(true)));
        assert!(!accepts_every_value(&json!({"format": "date-time"})));
        assert!(!accepts_every_value(&json!(false)));
    }
}
