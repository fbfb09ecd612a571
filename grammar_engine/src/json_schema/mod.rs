//! Compile a JSON Schema into a regex whose full-match language is a set of JSON texts the
//! schema allows.
//!
//! The output is plain regex text for `regex-automata` (Unicode mode, UTF-8 on, no look-around).
//! The caller anchors it at both ends. Every string the regex matches is a JSON text that
//! Python's `json.loads` parses and that validates against the schema (with format checking on);
//! the converse holds up to formatting: values are emitted compactly (or with the configured
//! whitespace), object properties in the schema's declared order, and values the schema leaves
//! unconstrained nest at most [`JsonSchemaOptions::max_any_depth`] levels deep.
//!
//! Everything the compiler cannot express exactly or soundly is an error, never a silent
//! relaxation: an unknown keyword, a `pattern` next to length bounds, a `oneOf` whose branches
//! may overlap, a recursive `$ref`, and so on. See [`schema_to_regex`] for the list.
//!
//! The module has four parts: the schema walker (`Compiler`), the rewriting of `pattern`
//! regexes into the JSON-encoded form of the strings they match (`pattern_body`), the regexes
//! of numeric ranges (`bounded_number`) and the conservative disjointness check behind `oneOf`
//! (`Disjoint`).

use std::fmt::Write as _;

use regex_syntax::ast::{self, Ast, ClassPerl, ClassPerlKind, ClassSet, ClassSetBinaryOpKind, ClassSetItem};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look};
use serde_json::{Map, Number, Value};

use crate::error::{GrammarError, Result};

mod context;
pub(crate) mod numbers;

use context::{Ctx, MAX_SCHEMA_DEPTH};

/// Options for compiling JSON Schema.
#[derive(Debug, Clone)]
pub struct JsonSchemaOptions {
    /// Most whitespace characters allowed at each place JSON allows whitespace (between tokens:
    /// after `{` `[` `,` `:` and before `}` `]` `,` `:`). 0 = compact output (the default): no
    /// whitespace at all. N>0: `[ \t\n\r]{0,N}`.
    pub max_whitespace: usize,
    /// Nesting depth allowed for values the schema leaves unconstrained (`{}`, `true`,
    /// `{"type":"object"}` with no properties, `{"type":"array"}` with no items). Default 3.
    pub max_any_depth: usize,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            max_whitespace: 0,
            max_any_depth: 3,
        }
    }
}

/// Compiles `schema` into a regex (without `^`/`$`) whose full matches are JSON texts valid
/// under the schema.
///
/// Supported: `type` (a name or a list), `enum`, `const`, `properties`, `required`,
/// `additionalProperties` (`true`/`false`), `items`, `minItems`, `maxItems`, `uniqueItems: false`,
/// `minLength`, `maxLength`, `pattern`, `format` (date, time, date-time, email, uuid, uri),
/// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (integers: any bounds; numbers:
/// integral bounds), `anyOf`, `oneOf` (branches must be provably disjoint), `allOf` with one
/// element, local `$ref` (non-recursive). Annotations (`title`, `description`, ...) are ignored.
/// Anything else is an error naming the keyword.
pub fn schema_to_regex(schema: &Value, opts: &JsonSchemaOptions) -> Result<String> {
    let mut compiler = Compiler::new(schema, opts);
    compiler.compile(schema, &Ctx::root())
}

/// How many steps the disjointness check of one pair of `oneOf` branches may take; past it the
/// answer is "not provably disjoint", which is always safe.
const MAX_DISJOINT_STEPS: usize = 20_000;

/// Longest regex text produced. Nested arrays and objects double the text per level, so
/// without a cap a modest schema could ask for gigabytes.
const MAX_REGEX_LEN: usize = 16 << 20;

/// Largest repetition count (`minItems`, `maxLength`, ...) put into a regex. Larger counts would
/// build automata far beyond any size limit, so they are reported instead.
const MAX_REPEAT: u64 = 100_000;

/// Largest magnitude of a bound on a `number`: below 2^53 every integer is a double, so the
/// decimal strings we emit compare with the bound in Python exactly as they do as decimals.
const MAX_NUMBER_BOUND: i128 = 1 << 53;

/// Largest magnitude of a bound on an `integer` (far below `i128::MAX`; Python compares ints
/// exactly, so only our arithmetic limits it).
const MAX_INTEGER_BOUND: i128 = 1_000_000_000_000_000_000_000_000_000_000;

/// One character of a JSON string as written in JSON: any character but `"`, `\` and the
/// controls U+0000–U+001F, or an escape. `\u` escapes of UTF-16 surrogates are left out, so
/// every character written decodes to exactly one code point (which keeps lengths exact).
const JSON_CHAR: &str =
    r#"(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u(?:[0-9A-Ca-cE-Fe-f][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2})))"#;

/// A JSON integer (JSON forbids leading zeros).
const INTEGER: &str = r"-?(?:0|[1-9][0-9]*)";

/// A JSON number: integer part, optional fraction, optional exponent.
const NUMBER: &str = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";

/// Keywords that never affect validation. `discriminator` (OpenAPI, emitted by Pydantic) is a
/// hint that validators ignore, so it is one too.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "examples",
    "default",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$defs",
    "definitions",
    "discriminator",
];

/// Validation keywords this compiler implements.
const SUPPORTED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
];

/// Keywords that only constrain strings, numbers, objects and arrays respectively. A schema
/// without `type` that uses some of them is compiled as the union of those types (a sound
/// restriction: other types would be valid too, but a generator wants the intended one).
const STRING_KEYWORDS: &[&str] = &["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYWORDS: &[&str] = &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
const OBJECT_KEYWORDS: &[&str] = &["properties", "required", "additionalProperties"];
const ARRAY_KEYWORDS: &[&str] = &["items", "minItems", "maxItems", "uniqueItems"];

fn is_annotation(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword)
}

// ---------------------------------------------------------------------------------------------
// JSON types
// ---------------------------------------------------------------------------------------------

/// A JSON Schema type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Null,
    Boolean,
    Object,
    Array,
    String,
    Integer,
    Number,
}

impl JsonType {
    fn from_name(name: &str) -> Option<JsonType> {
        Some(match name {
            "null" => JsonType::Null,
            "boolean" => JsonType::Boolean,
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            _ => return None,
        })
    }

    /// The kinds of JSON value this type admits (see the `K_*` constants).
    fn kinds(self) -> u8 {
        match self {
            JsonType::Null => K_NULL,
            JsonType::Boolean => K_BOOL,
            JsonType::Object => K_OBJECT,
            JsonType::Array => K_ARRAY,
            JsonType::String => K_STRING,
            JsonType::Integer => K_INTEGER,
            JsonType::Number => K_INTEGER | K_FRACTION,
        }
    }
}

/// Disjoint kinds of JSON values, as a bit set. Numbers split into integral ones (which
/// `integer` admits, `1.0` included, as Python's `jsonschema` has it) and the rest.
const K_NULL: u8 = 1;
const K_BOOL: u8 = 2;
const K_OBJECT: u8 = 4;
const K_ARRAY: u8 = 8;
const K_STRING: u8 = 16;
const K_INTEGER: u8 = 32;
const K_FRACTION: u8 = 64;
const K_ALL: u8 = 127;

/// The kind of a JSON value.
fn value_kind(v: &Value) -> u8 {
    match v {
        Value::Null => K_NULL,
        Value::Bool(_) => K_BOOL,
        Value::Object(_) => K_OBJECT,
        Value::Array(_) => K_ARRAY,
        Value::String(_) => K_STRING,
        Value::Number(n) => match exact_number(n) {
            Exact::Int(_) => K_INTEGER,
            Exact::Float(f) if f.fract() == 0.0 => K_INTEGER,
            Exact::Float(_) => K_FRACTION,
        },
    }
}

fn value_kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
    }
}

/// A JSON number as serde_json holds it: an exact integer or a double.
#[derive(Debug, Clone, Copy)]
enum Exact {
    Int(i128),
    Float(f64),
}

fn exact_number(n: &Number) -> Exact {
    if let Some(i) = n.as_i64() {
        Exact::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Exact::Int(i128::from(u))
    } else {
        Exact::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Numeric equality as Python has it: ints and floats compare by value, exactly.
fn numbers_equal(a: &Number, b: &Number) -> bool {
    match (exact_number(a), exact_number(b)) {
        (Exact::Int(x), Exact::Int(y)) => x == y,
        (Exact::Float(x), Exact::Float(y)) => x == y,
        (Exact::Int(i), Exact::Float(f)) | (Exact::Float(f), Exact::Int(i)) => {
            f.fract() == 0.0 && f.abs() < 1e38 && f as i128 == i
        }
    }
}

/// Equality of JSON values as `jsonschema` decides `enum`/`const`: numbers by value
/// (`1 == 1.0`), booleans never equal to numbers, containers element by element.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| json_equal(v, w)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Small regex-text helpers
// ---------------------------------------------------------------------------------------------

/// `(?:a|b|...)`, or the single alternative as it is. Every regex this module returns is safe
/// to concatenate and to put under a group; only repetition needs an extra group.
fn alternation(mut parts: Vec<String>) -> String {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    format!("(?:{})", parts.join("|"))
}

/// `unit` repeated between `min` and `max` (`None` = unbounded) times. `unit` must be a single
/// atom or group.
fn repeat(unit: &str, min: u64, max: Option<u64>) -> String {
    match (min, max) {
        (_, Some(0)) => String::new(),
        (0, None) => format!("{unit}*"),
        (1, None) => format!("{unit}+"),
        (0, Some(1)) => format!("{unit}?"),
        (1, Some(1)) => unit.to_string(),
        (n, None) => format!("{unit}{{{n},}}"),
        (n, Some(m)) if n == m => format!("{unit}{{{n}}}"),
        (n, Some(m)) => format!("{unit}{{{n},{m}}}"),
    }
}

/// A JSON string literal for `s`, exactly as serde_json writes it, escaped for a regex.
fn json_literal_regex(v: &Value) -> String {
    let text = serde_json::to_string(v).unwrap_or_default();
    regex_syntax::escape(&text)
}

/// Escapes one JSON Pointer reference token (`~` → `~0`, `/` → `~1`).
fn pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

// ---------------------------------------------------------------------------------------------
// The schema walker
// ---------------------------------------------------------------------------------------------

/// Walks a schema and returns the regex of each subschema.
struct Compiler<'a> {
    /// The whole schema, which local `$ref`s point into.
    root: &'a Value,
    opts: &'a JsonSchemaOptions,
    /// The whitespace allowed between two tokens (empty when compact).
    ws: String,
    /// The `$ref` targets being compiled right now (the root first): reaching one again is
    /// recursion. Compared by address, so two spellings of one location are one target.
    ref_stack: Vec<*const Value>,
    /// `any_cache[d]` is `any_value(d)` once built.
    any_cache: Vec<String>,
}

impl<'a> Compiler<'a> {
    fn new(root: &'a Value, opts: &'a JsonSchemaOptions) -> Self {
        let ws = if opts.max_whitespace == 0 {
            String::new()
        } else {
            format!(r"[ \t\n\r]{{0,{}}}", opts.max_whitespace)
        };
        Compiler {
            root,
            opts,
            ws,
            ref_stack: vec![root as *const Value],
            any_cache: Vec::new(),
        }
    }

    /// The regex of any schema (boolean or object).
    fn compile(&mut self, schema: &'a Value, ctx: &Ctx) -> Result<String> {
        match schema {
            Value::Bool(true) => self.any_value(self.opts.max_any_depth),
            Value::Bool(false) => Err(ctx.invalid("schema false matches nothing")),
            Value::Object(map) => {
                let regex = self.compile_map(schema, map, ctx)?;
                check_size(regex, &ctx.path)
            }
            other => Err(ctx.invalid(format!(
                "a schema must be an object or a boolean, not {}",
                value_kind_name(other)
            ))),
        }
    }

    /// The regex of an object schema: dispatches on `$ref`, the combinators, `enum`/`const`,
    /// and otherwise on the types.
    fn compile_map(&mut self, schema: &'a Value, map: &'a Map<String, Value>, ctx: &Ctx) -> Result<String> {
        check_keywords(map, ctx)?;
        let mut ctx = ctx.clone();
        if map.contains_key("$id") && !std::ptr::eq(schema, self.root) {
            ctx.in_embedded_resource = true;
        }
        let ctx = &ctx;
        if let Some(reference) = map.get("$ref") {
            reject_siblings(map, "$ref", &[], ctx)?;
            return self.compile_ref(reference, ctx);
        }
        for combinator in ["anyOf", "oneOf", "allOf"] {
            let Some(value) = map.get(combinator) else { continue };
            reject_siblings(map, combinator, &[], ctx)?;
            let branches = match value {
                Value::Array(a) if !a.is_empty() => a,
                _ => return Err(ctx.invalid(format!("{combinator} must be a non-empty array of schemas"))),
            };
            return match combinator {
                "anyOf" => self.compile_any_of(branches, ctx),
                "oneOf" => self.compile_one_of(branches, ctx),
                _ => self.compile_all_of(branches, ctx),
            };
        }
        if map.contains_key("enum") || map.contains_key("const") {
            let keyword = if map.contains_key("enum") { "enum" } else { "const" };
            reject_siblings(map, keyword, &["type", "enum", "const"], ctx)?;
            return self.compile_enum(map, ctx);
        }
        let types = match declared_types(map, ctx)? {
            Some(types) => types,
            None => {
                let inferred = inferred_types(map);
                if inferred.is_empty() {
                    return self.any_value(self.opts.max_any_depth);
                }
                inferred
            }
        };
        let mut parts = Vec::with_capacity(types.len());
        for t in types {
            parts.push(self.compile_type(t, map, ctx)?);
        }
        Ok(alternation(parts))
    }

    /// The regex of the values of one type under the type-specific keywords of `map`.
    fn compile_type(&mut self, t: JsonType, map: &'a Map<String, Value>, ctx: &Ctx) -> Result<String> {
        match t {
            JsonType::Null => Ok("null".to_string()),
            JsonType::Boolean => Ok("(?:true|false)".to_string()),
            JsonType::Integer => number_regex(map, ctx, true),
            JsonType::Number => number_regex(map, ctx, false),
            JsonType::String => string_regex(map, ctx),
            JsonType::Object => self.object_regex(map, ctx),
            JsonType::Array => self.array_regex(map, ctx),
        }
    }

    /// `$ref`: a local JSON pointer, compiled in place; recursion is an error.
    fn compile_ref(&mut self, reference: &Value, ctx: &Ctx) -> Result<String> {
        let Value::String(reference) = reference else {
            return Err(ctx.invalid("$ref must be a string"));
        };
        if ctx.in_embedded_resource {
            return Err(ctx.unsupported(
                "$ref",
                "a $ref inside a subschema that has its own $id resolves against that $id; only references into the root document are supported",
            ));
        }
        let target = resolve_ref(self.root, reference, ctx)?;
        let address = target as *const Value;
        if self.ref_stack.contains(&address) {
            return Err(ctx.unsupported(
                "$ref",
                format!("'{reference}' refers to a schema that contains it: recursive schemas are not supported (a regex cannot match unbounded nesting)"),
            ));
        }
        let target_ctx = ctx.at_path(reference.clone())?;
        self.ref_stack.push(address);
        let result = self.compile(target, &target_ctx);
        self.ref_stack.pop();
        result
    }

    /// `anyOf`: the alternation of the branches (`false` branches match nothing and drop out).
    fn compile_any_of(&mut self, branches: &'a [Value], ctx: &Ctx) -> Result<String> {
        let mut parts = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            if matches!(branch, Value::Bool(false)) {
                continue;
            }
            parts.push(self.compile(branch, &ctx.child(&format!("anyOf/{i}"))?)?);
        }
        if parts.is_empty() {
            return Err(ctx.invalid("every anyOf branch is false: the schema matches nothing"));
        }
        Ok(alternation(parts))
    }

    /// `oneOf`: like `anyOf`, but only when no value can validate against two branches, which
    /// [`Disjoint`] must prove for every pair.
    fn compile_one_of(&mut self, branches: &'a [Value], ctx: &Ctx) -> Result<String> {
        let mut parts = Vec::new();
        let mut live = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            if matches!(branch, Value::Bool(false)) {
                continue;
            }
            parts.push(self.compile(branch, &ctx.child(&format!("oneOf/{i}"))?)?);
            live.push((i, branch));
        }
        if parts.is_empty() {
            return Err(ctx.invalid("every oneOf branch is false: the schema matches nothing"));
        }
        for (x, &(i, a)) in live.iter().enumerate() {
            for &(j, b) in &live[x + 1..] {
                let mut check = Disjoint {
                    root: self.root,
                    steps: 0,
                };
                if !check.schemas(a, b, 0) {
                    return Err(ctx.unsupported(
                        "oneOf",
                        format!(
                            "branches {i} and {j} may overlap (cannot prove that no value validates against both, and oneOf rejects such values); \
                             use anyOf if an overlap is acceptable, or give each branch a required discriminating property with a different const"
                        ),
                    ));
                }
            }
        }
        Ok(alternation(parts))
    }

    /// `allOf` with one schema is that schema; more would need regex intersection.
    fn compile_all_of(&mut self, branches: &'a [Value], ctx: &Ctx) -> Result<String> {
        if branches.len() != 1 {
            return Err(ctx.unsupported(
                "allOf",
                format!("allOf with {} schemas needs an intersection of regexes; only allOf with a single schema is supported", branches.len()),
            ));
        }
        self.compile(&branches[0], &ctx.child("allOf/0")?)
    }

    /// `enum` / `const`: the alternation of the values serialized as compact JSON, keeping only
    /// values of the declared `type` (if any) and, with both keywords, values in both.
    fn compile_enum(&mut self, map: &'a Map<String, Value>, ctx: &Ctx) -> Result<String> {
        let mut values: Vec<&Value> = match map.get("enum") {
            Some(Value::Array(a)) if !a.is_empty() => a.iter().collect(),
            Some(Value::Array(_)) => return Err(ctx.invalid("enum has no values: the schema matches nothing")),
            Some(_) => return Err(ctx.invalid("enum must be an array")),
            None => Vec::new(),
        };
        if let Some(c) = map.get("const") {
            if map.contains_key("enum") {
                values.retain(|v| json_equal(v, c));
                if values.is_empty() {
                    return Err(ctx.invalid("const is not one of the enum values: the schema matches nothing"));
                }
            } else {
                values.push(c);
            }
        }
        if let Some(types) = declared_types(map, ctx)? {
            let mask = types.iter().fold(0, |m, t| m | t.kinds());
            values.retain(|v| value_kind(v) & mask != 0);
            if values.is_empty() {
                return Err(ctx.invalid("no enum/const value has the declared type: the schema matches nothing"));
            }
        }
        let mut parts: Vec<String> = Vec::new();
        for v in values {
            let re = json_literal_regex(v);
            if !parts.contains(&re) {
                parts.push(re);
            }
        }
        Ok(alternation(parts))
    }

    /// An object: declared properties in declared order, required ones always present,
    /// optional ones possibly omitted. Without `properties`, any object.
    fn object_regex(&mut self, map: &'a Map<String, Value>, ctx: &Ctx) -> Result<String> {
        let properties = match map.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return Err(ctx.invalid("properties must be an object")),
        };
        let required = required_names(map, ctx)?;
        let closed = match map.get("additionalProperties") {
            None | Some(Value::Bool(true)) => false,
            Some(Value::Bool(false)) => true,
            Some(Value::Object(_)) => {
                return Err(ctx.unsupported(
                    "additionalProperties",
                    "only additionalProperties true or false is supported (the compiler emits the declared properties only), not a schema",
                ))
            }
            Some(_) => return Err(ctx.invalid("additionalProperties must be a boolean or a schema")),
        };
        let ws = self.ws.clone();
        let properties = properties.filter(|p| !p.is_empty());
        for name in &required {
            if properties.is_some_and(|p| p.contains_key(*name)) {
                continue;
            }
            return Err(if closed {
                ctx.invalid(format!(
                    "property '{name}' is required but not declared in properties while additionalProperties is false: no object satisfies this schema"
                ))
            } else {
                ctx.unsupported(
                    "required",
                    format!("property '{name}' is required but not declared in properties; the compiler only emits declared properties, so declare it under properties"),
                )
            });
        }
        let Some(properties) = properties else {
            return Ok(if closed {
                format!(r"\{{{ws}\}}")
            } else {
                self.any_object(self.opts.max_any_depth.max(1))?
            });
        };
        let mut members = Vec::new();
        for (name, sub) in properties {
            let is_required = required.contains(&name.as_str());
            if matches!(sub, Value::Bool(false)) {
                if is_required {
                    return Err(ctx.invalid(format!(
                        "property '{name}' is required but its schema is false: no object satisfies this schema"
                    )));
                }
                continue;
            }
            let value = self.compile(sub, &ctx.child(&format!("properties/{}", pointer_token(name)))?)?;
            let key = json_literal_regex(&Value::String(name.clone()));
            members.push((format!("{key}{ws}:{ws}{value}"), is_required));
        }
        Ok(object_of_members(&members, &ws))
    }

    /// An array of `items` with `minItems`..`maxItems` elements.
    fn array_regex(&mut self, map: &'a Map<String, Value>, ctx: &Ctx) -> Result<String> {
        let min = count_keyword(map, "minItems", ctx)?.unwrap_or(0);
        let max = count_keyword(map, "maxItems", ctx)?;
        if max.is_some_and(|max| max < min) {
            return Err(ctx.invalid(format!(
                "minItems {min} exceeds maxItems {}: no array satisfies this schema",
                max.unwrap_or(0)
            )));
        }
        match map.get("uniqueItems") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => {
                return Err(ctx.unsupported("uniqueItems", "uniqueItems true cannot be expressed by a regex"))
            }
            Some(_) => return Err(ctx.invalid("uniqueItems must be a boolean")),
        }
        let item = match map.get("items") {
            None | Some(Value::Bool(true)) => Some(self.any_value(self.opts.max_any_depth.max(1) - 1)?),
            Some(Value::Bool(false)) => None,
            Some(Value::Array(_)) => {
                return Err(ctx.unsupported(
                    "items",
                    "the array form of items (a tuple) is not supported; use a single schema",
                ))
            }
            Some(schema @ Value::Object(_)) => Some(self.compile(schema, &ctx.child("items")?)?),
            Some(_) => return Err(ctx.invalid("items must be a schema")),
        };
        let ws = &self.ws;
        let Some(item) = item.filter(|_| max != Some(0)) else {
            if min > 0 {
                return Err(ctx.invalid("items is false but minItems > 0: no array satisfies this schema"));
            }
            return Ok(format!(r"\[{ws}\]"));
        };
        let rest = repeat(
            &format!("(?:{ws},{ws}{item})"),
            min.saturating_sub(1),
            max.map(|m| m - 1),
        );
        Ok(if min == 0 {
            format!(r"\[{ws}(?:{item}{rest}{ws})?\]")
        } else {
            format!(r"\[{ws}{item}{rest}{ws}\]")
        })
    }

    /// Any JSON value with at most `depth` levels of containers (0: scalars only).
    ///
    /// Each level writes the one below four times (objects and arrays, first and later
    /// elements), so the size grows as 4^depth and is checked.
    fn any_value(&mut self, depth: usize) -> Result<String> {
        while self.any_cache.len() <= depth {
            let d = self.any_cache.len();
            let scalar = format!("(?:\"{JSON_CHAR}*\"|{NUMBER}|true|false|null)");
            let value = if d == 0 {
                scalar
            } else {
                let object = self.any_object(d)?;
                let array = self.any_array(d)?;
                format!("(?:{scalar}|{object}|{array})")
            };
            let value = check_size(value, &format!("unconstrained values of depth {d} (max_any_depth)"))?;
            self.any_cache.push(value);
        }
        Ok(self.any_cache[depth].clone())
    }

    /// Any JSON object whose values nest at most `depth - 1` levels (`depth >= 1`).
    fn any_object(&mut self, depth: usize) -> Result<String> {
        let value = self.any_value(depth.saturating_sub(1))?;
        let ws = &self.ws;
        let member = format!("\"{JSON_CHAR}*\"{ws}:{ws}{value}");
        Ok(format!(r"\{{{ws}(?:{member}(?:{ws},{ws}{member})*{ws})?\}}"))
    }

    /// Any JSON array whose elements nest at most `depth - 1` levels (`depth >= 1`).
    fn any_array(&mut self, depth: usize) -> Result<String> {
        let value = self.any_value(depth.saturating_sub(1))?;
        let ws = &self.ws;
        Ok(format!(r"\[{ws}(?:{value}(?:{ws},{ws}{value})*{ws})?\]"))
    }
}

/// Passes `regex` through unless it is longer than [`MAX_REGEX_LEN`]. Every subschema is
/// checked, so sizes that double per nesting level (arrays and objects write an element
/// regex twice) stop early instead of exhausting memory.
fn check_size(regex: String, location: &str) -> Result<String> {
    if regex.len() > MAX_REGEX_LEN {
        return Err(GrammarError::TooLarge {
            what: "regex compiled from the JSON Schema",
            limit: MAX_REGEX_LEN,
            detail: format!("the regex for {location} is already {} bytes long", regex.len()),
        });
    }
    Ok(regex)
}

/// Errors on the first keyword that is neither an annotation nor supported.
fn check_keywords(map: &Map<String, Value>, ctx: &Ctx) -> Result<()> {
    for keyword in map.keys() {
        if is_annotation(keyword) || SUPPORTED.contains(&keyword.as_str()) {
            continue;
        }
        let reason = match keyword.as_str() {
            "prefixItems" | "additionalItems" | "unevaluatedItems" => {
                "tuple-style arrays are not supported; use a single items schema"
            }
            "contains" | "minContains" | "maxContains" => "array containment constraints are not supported",
            "multipleOf" => "divisibility constraints are not supported",
            "not" => "negated schemas are not supported",
            "if" | "then" | "else" => "conditional schemas are not supported",
            "patternProperties" | "propertyNames" | "unevaluatedProperties" | "dependentRequired"
            | "dependentSchemas" | "dependencies" | "minProperties" | "maxProperties" => {
                "objects support only properties, required and additionalProperties true/false"
            }
            "$dynamicRef" | "$recursiveRef" | "$anchor" | "$dynamicAnchor" | "$recursiveAnchor" => {
                "only $ref to a local JSON pointer (#/...) is supported"
            }
            _ => "this keyword is not supported (it is not a known annotation, so it may constrain values and cannot be ignored)",
        };
        return Err(ctx.unsupported(keyword, reason));
    }
    Ok(())
}

/// Errors if `map` has a validation keyword other than `keyword` and `allowed`: combining them
/// would need an intersection of regexes.
fn reject_siblings(map: &Map<String, Value>, keyword: &str, allowed: &[&str], ctx: &Ctx) -> Result<()> {
    for other in map.keys() {
        if other == keyword || allowed.contains(&other.as_str()) || is_annotation(other) {
            continue;
        }
        return Err(ctx.unsupported(
            other,
            format!("'{other}' next to '{keyword}' is not supported: the two would have to be intersected; move '{other}' into the schema(s) of '{keyword}'"),
        ));
    }
    Ok(())
}

/// The `type` keyword as a list of types (`None` when absent). `number` absorbs `integer`.
fn declared_types(map: &Map<String, Value>, ctx: &Ctx) -> Result<Option<Vec<JsonType>>> {
    let names: Vec<&Value> = match map.get("type") {
        None => return Ok(None),
        Some(Value::Array(a)) if !a.is_empty() => a.iter().collect(),
        Some(Value::Array(_)) => return Err(ctx.invalid("type is an empty list: the schema matches nothing")),
        Some(v) => vec![v],
    };
    let mut types = Vec::new();
    for name in names {
        let t = name
            .as_str()
            .and_then(JsonType::from_name)
            .ok_or_else(|| ctx.invalid(format!("unknown type {name}")))?;
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.contains(&JsonType::Number) {
        types.retain(|&t| t != JsonType::Integer);
    }
    Ok(Some(types))
}

/// The types a schema without `type` is compiled as: those its type-specific keywords
/// constrain; empty when it has none (then it is any value).
fn inferred_types(map: &Map<String, Value>) -> Vec<JsonType> {
    let has = |keywords: &[&str]| keywords.iter().any(|k| map.contains_key(*k));
    let mut types = Vec::new();
    if has(OBJECT_KEYWORDS) {
        types.push(JsonType::Object);
    }
    if has(ARRAY_KEYWORDS) {
        types.push(JsonType::Array);
    }
    if has(STRING_KEYWORDS) {
        types.push(JsonType::String);
    }
    if has(NUMBER_KEYWORDS) {
        types.push(JsonType::Number);
    }
    types
}

/// The names in `required`.
fn required_names<'m>(map: &'m Map<String, Value>, ctx: &Ctx) -> Result<Vec<&'m str>> {
    match map.get("required") {
        None => Ok(Vec::new()),
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| {
                n.as_str()
                    .ok_or_else(|| ctx.invalid("required must be an array of strings"))
            })
            .collect(),
        Some(_) => Err(ctx.invalid("required must be an array of strings")),
    }
}

/// A non-negative integer keyword such as `minItems` (`2.0` is accepted as 2).
fn count_keyword(map: &Map<String, Value>, keyword: &str, ctx: &Ctx) -> Result<Option<u64>> {
    let Some(v) = map.get(keyword) else { return Ok(None) };
    let n = match v.as_number().map(exact_number) {
        Some(Exact::Int(i)) if i >= 0 => u64::try_from(i).unwrap_or(u64::MAX),
        Some(Exact::Float(f)) if f >= 0.0 && f.fract() == 0.0 => {
            if f > u64::MAX as f64 {
                u64::MAX
            } else {
                f as u64
            }
        }
        _ => return Err(ctx.invalid(format!("{keyword} must be a non-negative integer, not {v}"))),
    };
    if n > MAX_REPEAT {
        return Err(GrammarError::TooLarge {
            what: "JSON Schema count bound",
            limit: MAX_REPEAT as usize,
            detail: format!("{keyword} {n} at {}", ctx.path),
        });
    }
    Ok(Some(n))
}

/// The body of an object with these `(member regex, required)` pairs, in order, any subset of
/// the optional ones present, commas only between members.
///
/// With `r` the first required member, the body is `(P ,)? m_r` followed by the later members
/// (`,m` when required, `(?:,m)?` when optional), where `P` is a non-empty ordered subsequence
/// of the optional members before `r`; with no required member it is `P?` over all of them.
fn object_of_members(members: &[(String, bool)], ws: &str) -> String {
    let sep = format!("{ws},{ws}");
    let Some(first) = members.iter().position(|(_, required)| *required) else {
        if members.is_empty() {
            return format!(r"\{{{ws}\}}");
        }
        let all: Vec<&str> = members.iter().map(|(m, _)| m.as_str()).collect();
        return format!(r"\{{{ws}(?:{}{ws})?\}}", nonempty_subsequence(&all, &sep));
    };
    let mut body = String::new();
    if first > 0 {
        let leading: Vec<&str> = members[..first].iter().map(|(m, _)| m.as_str()).collect();
        let _ = write!(body, "(?:{}{sep})?", nonempty_subsequence(&leading, &sep));
    }
    body.push_str(&members[first].0);
    for (member, required) in &members[first + 1..] {
        if *required {
            let _ = write!(body, "{sep}{member}");
        } else {
            let _ = write!(body, "(?:{sep}{member})?");
        }
    }
    format!(r"\{{{ws}{body}{ws}\}}")
}

/// The non-empty ordered subsequences of `items`, joined by `sep`.
///
/// Built as `N(k) = (?:N(k-1)(?:sep m_k)?|m_k)`, which writes each item at most twice but
/// nests one group per item; past [`SUBSEQUENCE_CHUNK`] items it splits in halves,
/// `N(A++B) = N(A) P(B) | N(B)` with `P(B)` every `(?:sep m)?` of `B`, so nesting stays
/// logarithmic (regex parsers limit nesting) at a logarithmic factor in size.
fn nonempty_subsequence(items: &[&str], sep: &str) -> String {
    if items.len() > SUBSEQUENCE_CHUNK {
        let (a, b) = items.split_at(items.len() / 2);
        let tail: String = b.iter().map(|m| format!("(?:{sep}{m})?")).collect();
        return format!(
            "(?:{}{tail}|{})",
            nonempty_subsequence(a, sep),
            nonempty_subsequence(b, sep)
        );
    }
    let mut acc = items.first().map(|m| m.to_string()).unwrap_or_default();
    for m in items.iter().skip(1) {
        acc = format!("(?:{acc}(?:{sep}{m})?|{m})");
    }
    acc
}

/// See [`nonempty_subsequence`].
const SUBSEQUENCE_CHUNK: usize = 8;

/// Resolves a local `$ref` (`#` or `#/json/pointer`, percent-encoded as a URI fragment).
fn resolve_ref<'v>(root: &'v Value, reference: &str, ctx: &Ctx) -> Result<&'v Value> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(ctx.unsupported(
            "$ref",
            format!("'{reference}' is not a local reference; only '#/...' references are supported"),
        ));
    };
    if !fragment.is_empty() && !fragment.starts_with('/') {
        return Err(ctx.unsupported(
            "$ref",
            format!("'{reference}' names an anchor; only JSON pointer references ('#/...') are supported"),
        ));
    }
    let fragment = percent_decode(fragment)
        .ok_or_else(|| ctx.invalid(format!("$ref '{reference}' has a malformed percent-encoding")))?;
    let mut node = root;
    for token in fragment.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match node {
            Value::Object(m) => m.get(&token),
            Value::Array(a) => token.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        node = next.ok_or_else(|| ctx.invalid(format!("$ref '{reference}' points to nothing in the schema")))?;
    }
    Ok(node)
}

/// Decodes `%XX` escapes; `None` if one is malformed or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

// ---------------------------------------------------------------------------------------------
// Strings
// ---------------------------------------------------------------------------------------------

/// A JSON string under `minLength`, `maxLength`, `pattern` and `format`.
fn string_regex(map: &Map<String, Value>, ctx: &Ctx) -> Result<String> {
    let min = count_keyword(map, "minLength", ctx)?.unwrap_or(0);
    let max = count_keyword(map, "maxLength", ctx)?;
    if max.is_some_and(|max| max < min) {
        return Err(ctx.invalid(format!(
            "minLength {min} exceeds maxLength {}: no string satisfies this schema",
            max.unwrap_or(0)
        )));
    }
    let length_bounded = min > 0 || max.is_some();
    let pattern = match map.get("pattern") {
        None => None,
        Some(Value::String(p)) => Some(p.as_str()),
        Some(_) => return Err(ctx.invalid("pattern must be a string")),
    };
    let format = match map.get("format") {
        None => None,
        Some(Value::String(f)) => Some(f.as_str()),
        Some(_) => return Err(ctx.invalid("format must be a string")),
    };
    let body = match (pattern, format) {
        (Some(_), Some(_)) => {
            return Err(ctx.unsupported(
                "pattern",
                "pattern together with format is not supported: the two regexes cannot be intersected",
            ))
        }
        (Some(p), None) => {
            if length_bounded {
                return Err(ctx.unsupported(
                    "pattern",
                    "pattern together with minLength/maxLength is not supported: the regex cannot be intersected with a length bound; put the length into the pattern instead (e.g. ^.{2,5}$)",
                ));
            }
            pattern_body(p, ctx)?
        }
        (None, Some(f)) => {
            let (body, natural_min, natural_max) = format_body(f).ok_or_else(|| {
                ctx.unsupported(
                    "format",
                    format!("format '{f}' is not supported (supported: date, time, date-time, email, uuid, uri)"),
                )
            })?;
            let implied = min <= natural_min && max.is_none_or(|max| natural_max.is_some_and(|n| n <= max));
            if !implied {
                return Err(ctx.unsupported(
                    "format",
                    format!("format '{f}' together with minLength/maxLength is not supported: the format's regex cannot be intersected with that length bound"),
                ));
            }
            body.to_string()
        }
        (None, None) => repeat(JSON_CHAR, min, max),
    };
    Ok(format!("\"{body}\""))
}

/// The regex of a `format` (all ASCII, so written as is inside a JSON string) with the least
/// and greatest lengths of its strings (`None`: unbounded).
///
/// Each is a subset of what Python's `jsonschema` format checker accepts: dates are real
/// calendar dates from year 0001 (leap years included), times have seconds 00–59 (its RFC 3339
/// checker rejects leap seconds), e-mails are dot-atoms at a dotted domain, URIs follow the
/// RFC 3986 grammar without IP-literal hosts.
fn format_body(format: &str) -> Option<(&'static str, u64, Option<u64>)> {
    Some(match format {
        "date" => (DATE, 10, Some(10)),
        "time" => (TIME, 9, None),
        "date-time" => (DATE_TIME, 20, None),
        "email" => (EMAIL, 6, None),
        "uuid" => (UUID, 36, Some(36)),
        "uri" => (URI, 2, None),
        _ => return None,
    })
}

/// `YYYY-MM-DD`, a real date: days 29/30/31 only in months that have them, February 29th only
/// in leap years, no year 0000.
const DATE: &str = concat!(
    "(?:",
    "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-",
    "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)",
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29",
    ")"
);

/// RFC 3339 full-time: `HH:MM:SS(.fraction)?` and `Z` or `±HH:MM`.
const TIME: &str = concat!(
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?",
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
);

/// RFC 3339 date-time: date `T` time.
const DATE_TIME: &str = concat!(
    "(?:",
    "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-",
    "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)",
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29",
    ")",
    "[Tt]",
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?",
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
);

/// `local@domain`: a dot-atom local part, then dot-separated hostname labels ending in an
/// alphabetic top-level label of two or more letters.
const EMAIL: &str = concat!(
    "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+)*",
    "@(?:[A-Za-z0-9](?:[A-Za-z0-9\\-]*[A-Za-z0-9])?\\.)+[A-Za-z]{2,}"
);

/// 8-4-4-4-12 hexadecimal digits.
const UUID: &str = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}";

/// An absolute URI per RFC 3986: `scheme:` then `//authority` and a path, or a path, then an
/// optional query and fragment. ASCII only; `%` only as `%XX`; hosts are registered names (which
/// include dotted IPv4), not IP literals.
const URI: &str = concat!(
    "[A-Za-z][A-Za-z0-9+.\\-]*:",
    "(?:",
    // "//" authority path-abempty
    "//(?:(?:[A-Za-z0-9\\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*@)?",
    "(?:[A-Za-z0-9\\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*",
    "(?::[0-9]*)?",
    "(?:/(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*",
    // path-absolute
    "|/(?:(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+(?:/(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)?",
    // path-rootless
    "|(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+(?:/(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*",
    // path-empty
    "|",
    ")",
    "(?:\\?(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?",
    "(?:#(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?"
);

// ---------------------------------------------------------------------------------------------
// `pattern`: a regex over decoded strings, rewritten over their JSON encodings
// ---------------------------------------------------------------------------------------------

/// The body of a JSON string (between the quotes) whose decoded value contains a match of
/// `pattern` (JSON Schema's `pattern` is an unanchored search).
///
/// The pattern is parsed by regex-syntax after [`portable_perl_classes`] and its HIR is
/// rewritten by [`encode_search`]: each character becomes its JSON spellings, `^`/`$` at the
/// ends anchor, and elsewhere the pattern is padded with "any JSON string content".
fn pattern_body(pattern: &str, ctx: &Ctx) -> Result<String> {
    let invalid = |e: &dyn std::fmt::Display| ctx.invalid(format!("pattern {pattern:?} does not parse: {e}"));
    let ast = ast::parse::Parser::new().parse(pattern).map_err(|e| invalid(&e))?;
    let portable = portable_perl_classes(pattern, &ast, ctx)?;
    let parse = |p: &str| {
        regex_syntax::ParserBuilder::new()
            .unicode(true)
            .utf8(true)
            .build()
            .parse(p)
            .map_err(|e| e.to_string())
    };
    let hir = match parse(&portable) {
        Ok(hir) => hir,
        Err(e) => {
            parse(pattern).map_err(|e| invalid(&e))?;
            // Only the rewrite fails: its Unicode classes are not allowed under (?-u).
            return Err(ctx.unsupported("pattern", format!("pattern {pattern:?}: \\D, \\W, \\S or a negated class of \\d/\\w/\\s is not supported in non-Unicode mode ((?-u)): {e}")));
        }
    };
    encode_search(&hir, &Encoding::new(pattern, ctx))
}

/// What the HIR rewriting needs besides the HIR.
struct Encoding<'c> {
    ctx: &'c Ctx,
    /// Characters left out of every class. Under case-insensitive matching Python's `re`
    /// equates a few characters that Unicode simple case folding keeps apart (`İ`/`ı` with `i`,
    /// ...), so a negated class of regex-syntax would admit characters Python's excludes; when
    /// the pattern may set flags, those characters are dropped (only ever shrinking a class).
    excluded: ClassUnicode,
}

impl<'c> Encoding<'c> {
    fn new(pattern: &str, ctx: &'c Ctx) -> Self {
        let mut excluded = ClassUnicode::empty();
        if pattern.contains("(?") {
            for c in [
                '\u{130}', '\u{131}', '\u{390}', '\u{3B0}', '\u{1FD3}', '\u{1FE3}', '\u{FB05}', '\u{FB06}',
            ] {
                excluded.push(ClassUnicodeRange::new(c, c));
            }
        }
        Encoding { ctx, excluded }
    }
}

/// Rewrites `\d`, `\w`, `\s` and their negations so that what regex-syntax matches is a
/// subset of what Python's `re` (which `jsonschema` uses) and ECMA-262 match.
///
/// Where a class counts positively it becomes the intersection of the engines' readings
/// (`\d` → `[0-9]`, `\w` → `[0-9A-Za-z_]`, `\s` → Unicode White_Space); where it counts
/// negatively (`\D`, inside `[^...]`, right of `--`) it becomes the complement of their union
/// (`\D` → not Unicode Nd, `\W` → not word/letter/number, `\S` → not White_Space nor
/// U+001C–U+001F, which Python counts as space).
fn portable_perl_classes(pattern: &str, ast: &Ast, ctx: &Ctx) -> Result<String> {
    let mut edits: Vec<(usize, usize, &'static str)> = Vec::new();
    collect_perl_edits(ast, &mut edits, ctx)?;
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(pattern.len() + 16 * edits.len());
    let mut at = 0;
    for (start, end, text) in edits {
        let (Some(before), true) = (pattern.get(at..start), start >= at) else {
            return Err(ctx.invalid(format!("pattern {pattern:?} could not be rewritten")));
        };
        out.push_str(before);
        out.push_str(text);
        at = end;
    }
    out.push_str(pattern.get(at..).unwrap_or_default());
    Ok(out)
}

/// Collects `(start, end, replacement)` for every Perl class in `ast`.
fn collect_perl_edits(ast: &Ast, edits: &mut Vec<(usize, usize, &'static str)>, ctx: &Ctx) -> Result<()> {
    match ast {
        Ast::ClassPerl(class) => edits.push(perl_edit(class, true)),
        Ast::ClassBracketed(class) => collect_set_edits(&class.kind, !class.negated, edits, ctx)?,
        Ast::Repetition(rep) => collect_perl_edits(&rep.ast, edits, ctx)?,
        Ast::Group(group) => collect_perl_edits(&group.ast, edits, ctx)?,
        Ast::Alternation(alt) => {
            for sub in &alt.asts {
                collect_perl_edits(sub, edits, ctx)?;
            }
        }
        Ast::Concat(concat) => {
            for sub in &concat.asts {
                collect_perl_edits(sub, edits, ctx)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// [`collect_perl_edits`] inside a bracketed class; `positive` says whether the set being
/// built counts positively in the final class.
fn collect_set_edits(
    set: &ClassSet,
    positive: bool,
    edits: &mut Vec<(usize, usize, &'static str)>,
    ctx: &Ctx,
) -> Result<()> {
    match set {
        ClassSet::Item(item) => collect_item_edits(item, positive, edits, ctx),
        ClassSet::BinaryOp(op) => match op.kind {
            ClassSetBinaryOpKind::Intersection => {
                collect_set_edits(&op.lhs, positive, edits, ctx)?;
                collect_set_edits(&op.rhs, positive, edits, ctx)
            }
            ClassSetBinaryOpKind::Difference => {
                collect_set_edits(&op.lhs, positive, edits, ctx)?;
                collect_set_edits(&op.rhs, !positive, edits, ctx)
            }
            ClassSetBinaryOpKind::SymmetricDifference => {
                let before = edits.len();
                collect_set_edits(&op.lhs, positive, edits, ctx)?;
                collect_set_edits(&op.rhs, positive, edits, ctx)?;
                if edits.len() != before {
                    return Err(ctx.unsupported(
                        "pattern",
                        "\\d, \\w or \\s inside a symmetric difference (~~) is not supported",
                    ));
                }
                Ok(())
            }
        },
    }
}

fn collect_item_edits(
    item: &ClassSetItem,
    positive: bool,
    edits: &mut Vec<(usize, usize, &'static str)>,
    ctx: &Ctx,
) -> Result<()> {
    match item {
        ClassSetItem::Perl(class) => edits.push(perl_edit(class, positive)),
        ClassSetItem::Bracketed(class) => collect_set_edits(&class.kind, positive != class.negated, edits, ctx)?,
        ClassSetItem::Union(union) => {
            for sub in &union.items {
                collect_item_edits(sub, positive, edits, ctx)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The replacement of one Perl class. `positive` is the polarity of its context; a negated
/// class (`\D`) flips it once more for the base class. A bracketed class is valid both on its
/// own and nested inside another bracketed class.
fn perl_edit(class: &ClassPerl, positive: bool) -> (usize, usize, &'static str) {
    let base_positive = positive != class.negated;
    let text = match (class.kind.clone(), base_positive, class.negated) {
        (ClassPerlKind::Digit, true, false) => "[0-9]",
        (ClassPerlKind::Digit, true, true) => "[^0-9]",
        (ClassPerlKind::Digit, false, false) => r"[\p{Nd}]",
        (ClassPerlKind::Digit, false, true) => r"[^\p{Nd}]",
        (ClassPerlKind::Word, true, false) => "[0-9A-Za-z_]",
        (ClassPerlKind::Word, true, true) => "[^0-9A-Za-z_]",
        (ClassPerlKind::Word, false, false) => r"[\w\p{L}\p{N}]",
        (ClassPerlKind::Word, false, true) => r"[^\w\p{L}\p{N}]",
        (ClassPerlKind::Space, true, false) => r"[\s]",
        (ClassPerlKind::Space, true, true) => r"[^\s]",
        (ClassPerlKind::Space, false, false) => r"[\s\x1C-\x1F]",
        (ClassPerlKind::Space, false, true) => r"[^\s\x1C-\x1F]",
    };
    (class.span.start.offset, class.span.end.offset, text)
}

/// The search semantics of a parsed pattern over JSON string bodies: anchored where the
/// pattern starts with `^` / ends with `$`, padded with any content elsewhere. Alternations
/// and groups at the top are searched branch by branch.
fn encode_search(hir: &Hir, enc: &Encoding) -> Result<String> {
    let any = format!("{JSON_CHAR}*");
    match hir.kind() {
        HirKind::Alternation(subs) => {
            let parts = subs.iter().map(|s| encode_search(s, enc)).collect::<Result<Vec<_>>>()?;
            Ok(alternation(parts))
        }
        HirKind::Capture(cap) => encode_search(&cap.sub, enc),
        HirKind::Look(Look::Start) | HirKind::Look(Look::End) => Ok(any),
        HirKind::Concat(_) => {
            let mut items = Vec::new();
            flatten_concat(hir, &mut items);
            let mut start = 0;
            while items.get(start).is_some_and(|h| is_look(h, Look::Start)) {
                start += 1;
            }
            let mut end = items.len();
            while end > start && is_look(items[end - 1], Look::End) {
                end -= 1;
            }
            let mut out = String::new();
            if start == 0 {
                out.push_str(&any);
            }
            for item in &items[start..end] {
                out.push_str(&encode_hir(item, enc)?);
            }
            if end == items.len() {
                out.push_str(&any);
            }
            Ok(format!("(?:{out})"))
        }
        _ => Ok(format!("(?:{any}{}{any})", encode_hir(hir, enc)?)),
    }
}

/// The elements of a concatenation, looking through capture groups (which do not matter to
/// matching) so that `(^a)$` is seen as anchored.
fn flatten_concat<'h>(hir: &'h Hir, out: &mut Vec<&'h Hir>) {
    match hir.kind() {
        HirKind::Concat(subs) => subs.iter().for_each(|s| flatten_concat(s, out)),
        HirKind::Capture(cap) => flatten_concat(&cap.sub, out),
        _ => out.push(hir),
    }
}

fn is_look(hir: &Hir, look: Look) -> bool {
    matches!(hir.kind(), HirKind::Look(l) if *l == look)
}

/// The regex of the JSON encodings of the strings `hir` matches.
fn encode_hir(hir: &Hir, enc: &Encoding) -> Result<String> {
    Ok(match hir.kind() {
        HirKind::Empty => "(?:)".to_string(),
        HirKind::Literal(lit) => {
            let text = std::str::from_utf8(&lit.0)
                .map_err(|_| enc.ctx.unsupported("pattern", "the pattern matches bytes that are not UTF-8"))?;
            let mut out = String::new();
            for c in text.chars() {
                out.push_str(&encode_char(c));
            }
            format!("(?:{out})")
        }
        HirKind::Class(Class::Unicode(class)) => encode_class(class, &enc.excluded),
        HirKind::Class(Class::Bytes(class)) => {
            let mut ranges = Vec::new();
            for r in class.ranges() {
                if !r.end().is_ascii() {
                    return Err(enc.ctx.unsupported("pattern", "a byte class beyond ASCII ((?-u) mode) is not supported"));
                }
                ranges.push(ClassUnicodeRange::new(char::from(r.start()), char::from(r.end())));
            }
            encode_class(&ClassUnicode::new(ranges), &enc.excluded)
        }
        HirKind::Look(look) => {
            return Err(enc.ctx.unsupported(
                "pattern",
                format!("the assertion {look:?} is not supported: only ^ at the start and $ at the end of the pattern (no word boundaries, multi-line anchors or anchors elsewhere)"),
            ))
        }
        HirKind::Repetition(rep) => {
            let sub = encode_hir(&rep.sub, enc)?;
            let max = rep.max.map(u64::from);
            let mut text = repeat(&format!("(?:{sub})"), u64::from(rep.min), max);
            if text.is_empty() {
                text = "(?:)".to_string();
            }
            text
        }
        HirKind::Capture(cap) => format!("(?:{})", encode_hir(&cap.sub, enc)?),
        HirKind::Concat(subs) => {
            let parts = subs.iter().map(|s| encode_hir(s, enc)).collect::<Result<Vec<_>>>()?;
            format!("(?:{})", parts.concat())
        }
        HirKind::Alternation(subs) => {
            let parts = subs.iter().map(|s| encode_hir(s, enc)).collect::<Result<Vec<_>>>()?;
            format!("(?:{})", parts.join("|"))
        }
    })
}

/// True for characters written as themselves inside a JSON string.
fn is_json_safe(c: char) -> bool {
    !(c == '"' || c == '\\' || c <= '\u{1F}')
}

/// The characters that must be escaped inside a JSON string.
fn json_unsafe_class() -> ClassUnicode {
    ClassUnicode::new([
        ClassUnicodeRange::new('\u{0}', '\u{1F}'),
        ClassUnicodeRange::new('"', '"'),
        ClassUnicodeRange::new('\\', '\\'),
    ])
}

/// The regex of every JSON spelling of one character: itself if safe, else its short escape
/// (if it has one) and its `\u00XX` escape in either hex case.
fn encode_char(c: char) -> String {
    if is_json_safe(c) {
        let mut buf = [0; 4];
        return regex_syntax::escape(c.encode_utf8(&mut buf));
    }
    let code = c as u32;
    let hex = |d: u32| {
        let digit = char::from(b"0123456789abcdef"[(d & 0xF) as usize]);
        if digit.is_ascii_digit() {
            digit.to_string()
        } else {
            format!("[{digit}{}]", digit.to_ascii_uppercase())
        }
    };
    let long = format!(r"\\u00{}{}", hex(code >> 4), hex(code));
    let short = match c {
        '"' => Some(r#"\\""#),
        '\\' => Some(r"\\\\"),
        '\u{8}' => Some(r"\\b"),
        '\u{C}' => Some(r"\\f"),
        '\n' => Some(r"\\n"),
        '\r' => Some(r"\\r"),
        '\t' => Some(r"\\t"),
        _ => None,
    };
    match short {
        Some(short) => format!("(?:{short}|{long})"),
        None => long,
    }
}

/// The regex of the JSON spellings of any character of `class` but `excluded`: its safe part
/// as a class, plus the escapes of each unsafe character it contains.
fn encode_class(class: &ClassUnicode, excluded: &ClassUnicode) -> String {
    let unsafe_chars = json_unsafe_class();
    let mut class = class.clone();
    class.difference(excluded);
    let mut safe = class.clone();
    safe.difference(&unsafe_chars);
    let mut escaped = class.clone();
    escaped.intersect(&unsafe_chars);
    let mut parts = Vec::new();
    if !safe.ranges().is_empty() {
        let mut text = String::from("[");
        for r in safe.ranges() {
            push_class_char(&mut text, r.start());
            if r.end() != r.start() {
                text.push('-');
                push_class_char(&mut text, r.end());
            }
        }
        text.push(']');
        parts.push(text);
    }
    for r in escaped.ranges() {
        for code in u32::from(r.start())..=u32::from(r.end()) {
            if let Some(c) = char::from_u32(code) {
                parts.push(encode_char(c));
            }
        }
    }
    if parts.is_empty() {
        // The empty class: matches nothing.
        return "[a&&b]".to_string();
    }
    format!("(?:{})", parts.join("|"))
}

/// Writes `c` for use inside a bracketed class: alphanumerics as themselves, the rest as
/// `\x{...}` so no character can act as class syntax.
fn push_class_char(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------

/// A bound on a number: its value and whether it is exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bound {
    value: i128,
    exclusive: bool,
}

/// An `integer` (`integer` true) or `number` under `minimum`/`maximum`/`exclusive*`.
fn number_regex(map: &Map<String, Value>, ctx: &Ctx, integer: bool) -> Result<String> {
    let (lower, upper) = numeric_bounds(map, ctx, integer)?;
    if lower.is_none() && upper.is_none() {
        return Ok(if integer { INTEGER } else { NUMBER }.to_string());
    }
    bounded_number(lower, upper, integer).ok_or_else(|| {
        ctx.invalid(format!(
            "no {} lies within the bounds: the schema matches nothing",
            if integer { "integer" } else { "number" }
        ))
    })
}

/// The tightest lower and upper bound of the four bound keywords. For integers the bounds are
/// rounded inward to inclusive integers; for numbers they must be integral (at most 2^53 in
/// magnitude).
fn numeric_bounds(map: &Map<String, Value>, ctx: &Ctx, integer: bool) -> Result<(Option<Bound>, Option<Bound>)> {
    let mut lower: Option<Bound> = None;
    let mut upper: Option<Bound> = None;
    for (keyword, is_lower, exclusive) in [
        ("minimum", true, false),
        ("exclusiveMinimum", true, true),
        ("maximum", false, false),
        ("exclusiveMaximum", false, true),
    ] {
        let Some(v) = map.get(keyword) else { continue };
        let n = match v {
            Value::Number(n) => exact_number(n),
            Value::Bool(_) => {
                return Err(ctx.unsupported(
                    keyword,
                    "a boolean exclusiveMinimum/exclusiveMaximum is draft-4 syntax; give the bound as a number",
                ))
            }
            _ => return Err(ctx.invalid(format!("{keyword} must be a number"))),
        };
        let limit = if integer { MAX_INTEGER_BOUND } else { MAX_NUMBER_BOUND };
        let too_large = || ctx.unsupported(keyword, format!("bounds beyond ±{limit} are not supported"));
        let bound = if integer {
            let value = match n {
                Exact::Int(i) => i128::from(exclusive) * if is_lower { 1 } else { -1 } + i,
                Exact::Float(f) => {
                    let rounded = match (is_lower, exclusive) {
                        (true, false) => f.ceil(),
                        (true, true) => f.floor() + 1.0,
                        (false, false) => f.floor(),
                        (false, true) => f.ceil() - 1.0,
                    };
                    // NaN and infinities fail this too.
                    if rounded.is_nan() || rounded.abs() > limit as f64 {
                        return Err(too_large());
                    }
                    rounded as i128
                }
            };
            if value.abs() > limit {
                return Err(too_large());
            }
            Bound {
                value,
                exclusive: false,
            }
        } else {
            let value = match n {
                Exact::Int(i) => i,
                Exact::Float(f) if f.fract() == 0.0 && f.abs() <= limit as f64 => f as i128,
                Exact::Float(f) if f.is_finite() && f.abs() <= limit as f64 => {
                    return Err(ctx.unsupported(
                        keyword,
                        format!(
                        "the fractional bound {f} on a number is not supported; use an integral bound or type integer"
                    ),
                    ))
                }
                Exact::Float(_) => return Err(too_large()),
            };
            if value.abs() > limit {
                return Err(too_large());
            }
            Bound { value, exclusive }
        };
        let slot = if is_lower { &mut lower } else { &mut upper };
        *slot = Some(match *slot {
            None => bound,
            Some(old) => tighter(old, bound, is_lower),
        });
    }
    Ok((lower, upper))
}

/// The tighter of two lower (or upper) bounds; at equal values the exclusive one.
fn tighter(a: Bound, b: Bound, lower: bool) -> Bound {
    if a.value == b.value {
        return Bound {
            value: a.value,
            exclusive: a.exclusive || b.exclusive,
        };
    }
    if (a.value > b.value) == lower {
        a
    } else {
        b
    }
}

/// The regex of the numbers between the bounds, written without exponents (integers without
/// fraction); `None` if there are none. Non-negative values and negative ones are handled as
/// magnitude ranges by [`magnitude_range`].
fn bounded_number(lower: Option<Bound>, upper: Option<Bound>, integer: bool) -> Option<String> {
    let mut parts = Vec::new();
    // x >= 0.
    if upper.is_none_or(|u| u.value >= 0) {
        let low = match lower {
            Some(l) if l.value >= 0 => (l.value.unsigned_abs(), l.exclusive),
            _ => (0, false),
        };
        let high = upper.map(|u| (u.value.unsigned_abs(), u.exclusive));
        if let Some(re) = magnitude_range(low, high, integer) {
            parts.push(re);
        }
    }
    // x < 0, written as '-' and a magnitude.
    if lower.is_none_or(|l| l.value < 0) {
        let low = match upper {
            Some(u) if u.value < 0 => (u.value.unsigned_abs(), u.exclusive),
            _ => (0, true),
        };
        let high = lower.map(|l| (l.value.unsigned_abs(), l.exclusive));
        if let Some(re) = magnitude_range(low, high, integer) {
            parts.push(format!("-{re}"));
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(alternation(parts))
    }
}

/// Significant decimal digits a double keeps exactly: a decimal with at most this many
/// significant digits never rounds onto a different one with as few.
const DOUBLE_DIGITS: usize = 15;

/// The regex of the non-negative decimals `m` with `low <= m <= high` (each bound a value and
/// whether it is exclusive; `high` `None` is unbounded), as `(?:...)`.
///
/// A decimal with integer part `k` and fraction `f` is in range when `k` is strictly between
/// the bounds (any fraction), or `k` is the lower bound (fraction non-zero if exclusive), or `k`
/// is the upper bound (fraction zero, inclusive only). Python parses fractions as doubles, so
/// next to an exclusive bound the fraction is kept short enough that it cannot round onto it.
fn magnitude_range(low: (u128, bool), high: Option<(u128, bool)>, integer: bool) -> Option<String> {
    let (a, a_exclusive) = low;
    if integer {
        let start = a + u128::from(a_exclusive);
        let end = match high {
            Some((b, true)) => Some(b.checked_sub(1)?),
            Some((b, false)) => Some(b),
            None => None,
        };
        return uint_range(start, end);
    }
    const ANY_FRACTION: &str = r"(?:\.[0-9]+)?";
    const ZERO_FRACTION: &str = r"(?:\.0+)?";
    let mut parts = Vec::new();
    match high {
        Some((b, _)) if b < a => return None,
        Some((b, b_exclusive)) if b == a => {
            return (!a_exclusive && !b_exclusive).then(|| format!("(?:{a}{ZERO_FRACTION})"));
        }
        _ => {}
    }
    // k == a.
    let just_below_exclusive_high = high == Some((a + 1, true));
    let limit = (a_exclusive || just_below_exclusive_high).then(|| DOUBLE_DIGITS.saturating_sub(significant_digits(a)));
    if let Some(fraction) = fraction_regex(a_exclusive, limit) {
        parts.push(format!("{a}{fraction}"));
    }
    // a < k < b, and k == b.
    match high {
        None => {
            if let Some(ks) = uint_range(a + 1, None) {
                parts.push(format!("{ks}{ANY_FRACTION}"));
            }
        }
        Some((b, true)) => {
            if let Some(ks) = b.checked_sub(2).and_then(|end| uint_range(a + 1, Some(end))) {
                parts.push(format!("{ks}{ANY_FRACTION}"));
            }
            if b - 1 > a {
                let limit = DOUBLE_DIGITS.saturating_sub(significant_digits(b - 1));
                if let Some(fraction) = fraction_regex(false, Some(limit)) {
                    parts.push(format!("{}{fraction}", b - 1));
                }
            }
        }
        Some((b, false)) => {
            if let Some(ks) = uint_range(a + 1, Some(b - 1)) {
                parts.push(format!("{ks}{ANY_FRACTION}"));
            }
            parts.push(format!("{b}{ZERO_FRACTION}"));
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(format!("(?:{})", parts.join("|")))
    }
}

/// The regex of an optional fraction (`.ddd`): `nonzero` requires a non-zero digit (then it is
/// not optional), `limit` caps the number of digits.
fn fraction_regex(nonzero: bool, limit: Option<usize>) -> Option<String> {
    Some(match (nonzero, limit) {
        (false, None) => r"(?:\.[0-9]+)?".to_string(),
        (false, Some(0)) => String::new(),
        (false, Some(d)) => format!(r"(?:\.[0-9]{{1,{d}}})?"),
        (true, None) => r"\.[0-9]*[1-9][0-9]*".to_string(),
        (true, Some(0)) => return None,
        (true, Some(d)) => {
            // j leading zeros, a non-zero digit, then at most d-1-j more digits.
            let alts: Vec<String> = (0..d)
                .map(|j| format!("0{{{j}}}[1-9][0-9]{{0,{}}}", d - 1 - j))
                .collect();
            format!(r"\.(?:{})", alts.join("|"))
        }
    })
}

/// Decimal digits of `k` that count as significant (none for 0).
fn significant_digits(k: u128) -> usize {
    if k == 0 {
        0
    } else {
        k.to_string().len()
    }
}

/// The regex of the decimal integers in `[a, b]` (`b` `None`: unbounded) without leading
/// zeros, as `(?:...)`; `None` if the range is empty.
fn uint_range(a: u128, b: Option<u128>) -> Option<String> {
    if b.is_some_and(|b| b < a) {
        return None;
    }
    let mut parts = Vec::new();
    let mut a = a;
    if a == 0 {
        parts.push("0".to_string());
        if b == Some(0) {
            return Some("(?:0)".to_string());
        }
        a = 1;
    }
    let a_digits = a.to_string().len();
    let b_digits = b.map(|b| b.to_string().len());
    let last = b_digits.unwrap_or(a_digits);
    for digits in a_digits..=last {
        let low = a.max(10u128.pow(digits as u32 - 1));
        let high = 10u128.pow(digits as u32) - 1;
        let high = b.map_or(high, |b| b.min(high));
        parts.push(same_length_range(&low.to_string(), &high.to_string()));
    }
    if b.is_none() {
        parts.push(format!("[1-9][0-9]{{{a_digits},}}"));
    }
    Some(format!("(?:{})", parts.join("|")))
}

/// The regex of the decimal strings between `x` and `y` (same length, `x <= y`).
fn same_length_range(x: &str, y: &str) -> String {
    let (xb, yb) = (x.as_bytes(), y.as_bytes());
    if xb.is_empty() {
        return String::new();
    }
    let (x0, y0) = (xb[0], yb[0]);
    let (x_rest, y_rest) = (&x[1..], &y[1..]);
    if x0 == y0 {
        return format!("{}{}", char::from(x0), same_length_range(x_rest, y_rest));
    }
    let n = x_rest.len();
    let x_rest_min = x_rest.bytes().all(|d| d == b'0');
    let y_rest_max = y_rest.bytes().all(|d| d == b'9');
    let digit_class = |lo: u8, hi: u8| {
        if lo == hi {
            char::from(lo).to_string()
        } else {
            format!("[{}-{}]", char::from(lo), char::from(hi))
        }
    };
    let any_digits = if n == 0 { String::new() } else { format!("[0-9]{{{n}}}") };
    let mut parts = Vec::new();
    if !x_rest_min {
        parts.push(format!(
            "{}{}",
            char::from(x0),
            same_length_range(x_rest, &"9".repeat(n))
        ));
    }
    let lo = if x_rest_min { x0 } else { x0 + 1 };
    let hi = if y_rest_max { y0 } else { y0 - 1 };
    if lo <= hi {
        parts.push(format!("{}{any_digits}", digit_class(lo, hi)));
    }
    if !y_rest_max {
        parts.push(format!(
            "{}{}",
            char::from(y0),
            same_length_range(&"0".repeat(n), y_rest)
        ));
    }
    alternation(parts)
}

// ---------------------------------------------------------------------------------------------
// `oneOf`: proving that two schemas share no valid value
// ---------------------------------------------------------------------------------------------

/// A sound, incomplete check that no JSON value validates against two schemas. "Not proven"
/// is always a safe answer; it is given when unsure, past the depth limit or past
/// [`MAX_DISJOINT_STEPS`].
struct Disjoint<'a> {
    root: &'a Value,
    steps: usize,
}

impl<'a> Disjoint<'a> {
    /// Whether no value validates against both `a` and `b`.
    fn schemas(&mut self, a: &'a Value, b: &'a Value, depth: usize) -> bool {
        self.steps += 1;
        if self.steps > MAX_DISJOINT_STEPS || depth > MAX_SCHEMA_DEPTH {
            return false;
        }
        match (a, b) {
            (Value::Bool(false), _) | (_, Value::Bool(false)) => true,
            (Value::Object(am), Value::Object(bm)) => {
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
        resolve_ref(self.root, reference, &Ctx::root()).ok()
    }

    /// Disjoint by the keywords of `a` and `b` themselves.
    fn direct(&mut self, a: &'a Map<String, Value>, b: &'a Map<String, Value>, depth: usize) -> bool {
        let common = schema_kinds(a) & schema_kinds(b);
        if common == 0 {
            return true;
        }
        if let Some(values) = value_set(a) {
            if values.iter().all(|v| self.value_fails(v, SchemaRef::Map(b), depth + 1)) {
                return true;
            }
        }
        if common & !K_OBJECT == 0 {
            // Every common value is an object, so `required` and `properties` apply on both
            // sides: a property one side requires must satisfy both sides' schemas for it.
            let (ra, rb) = (names(a.get("required")), names(b.get("required")));
            for p in ra.iter().chain(&rb) {
                if let (Some(pa), Some(pb)) = (property(a, p), property(b, p)) {
                    if self.schemas(pa, pb, depth + 1) {
                        return true;
                    }
                }
            }
            if rb.iter().any(|q| forbids_property(a, q)) || ra.iter().any(|q| forbids_property(b, q)) {
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
        if value_kind(v) & schema_kinds(m) == 0 {
            return true;
        }
        if let Some(values) = value_set(m) {
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
fn schema_kinds(m: &Map<String, Value>) -> u8 {
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
    match value_set(m) {
        Some(values) => declared & values.iter().fold(0, |k, v| k | value_kind(v)),
        None => declared,
    }
}

/// The only values a schema object accepts, if it has `const` or `enum`.
fn value_set(m: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(c) = m.get("const") {
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

/// Whether an object valid under `m` cannot have property `name`: its schema there is `false`,
/// or it is undeclared while `additionalProperties` is `false` (and no `patternProperties`).
fn forbids_property(m: &Map<String, Value>, name: &str) -> bool {
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
    match m.get(keyword)?.as_number().map(exact_number)? {
        Exact::Int(i) => u64::try_from(i).ok(),
        Exact::Float(f) if f >= 0.0 && f.fract() == 0.0 && f < 1e18 => Some(f as u64),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::dfa::{dense, Automaton};
    use regex_automata::{Anchored, Input};
    use serde_json::json;

    /// A compiled schema regex, matched in full.
    struct Matcher {
        regex: String,
        dfa: dense::DFA<Vec<u32>>,
    }

    impl Matcher {
        /// The regex, shortened for failure messages.
        fn shown(&self) -> &str {
            self.regex.get(..2000).unwrap_or(&self.regex)
        }

        fn is_match(&self, s: &str) -> bool {
            let input = Input::new(s).anchored(Anchored::Yes);
            matches!(self.dfa.try_search_fwd(&input), Ok(Some(m)) if m.offset() == s.len())
        }

        /// Asserts each text matches, and (as every match must be) parses as JSON.
        fn accepts(&self, texts: &[&str]) -> &Self {
            for text in texts {
                assert!(self.is_match(text), "should accept {text:?}\nregex: {}", self.shown());
                assert!(
                    serde_json::from_str::<Value>(text).is_ok(),
                    "accepted non-JSON {text:?}"
                );
            }
            self
        }

        fn rejects(&self, texts: &[&str]) -> &Self {
            for text in texts {
                assert!(!self.is_match(text), "should reject {text:?}\nregex: {}", self.shown());
            }
            self
        }
    }

    fn opts(max_whitespace: usize, max_any_depth: usize) -> JsonSchemaOptions {
        JsonSchemaOptions {
            max_whitespace,
            max_any_depth,
        }
    }

    fn compile_with(schema: Value, options: &JsonSchemaOptions) -> Matcher {
        let regex = schema_to_regex(&schema, options).unwrap_or_else(|e| panic!("{schema} failed: {e}"));
        // The same parser settings as the DFA builder of this crate.
        regex_syntax::ParserBuilder::new()
            .nest_limit(250)
            .build()
            .parse(&regex)
            .unwrap_or_else(|e| panic!("output regex does not parse: {e}\n{regex}"));
        let dfa = dense::DFA::new(&format!("^(?:{regex})$")).unwrap_or_else(|e| panic!("{e}\n{regex}"));
        Matcher { regex, dfa }
    }

    fn compile(schema: Value) -> Matcher {
        compile_with(schema, &opts(0, 2))
    }

    fn error(schema: Value) -> GrammarError {
        match schema_to_regex(&schema, &JsonSchemaOptions::default()) {
            Ok(re) => panic!("{schema} should fail, compiled to {re}"),
            Err(e) => e,
        }
    }

    /// Asserts `schema` is rejected as unsupported, naming `keyword`.
    fn unsupported(schema: Value, keyword: &str) -> String {
        match error(schema) {
            GrammarError::UnsupportedSchemaKeyword {
                keyword: k,
                path,
                reason,
            } => {
                assert_eq!(k, keyword, "{reason}");
                format!("{path}: {reason}")
            }
            other => panic!("expected unsupported '{keyword}', got {other:?}"),
        }
    }

    fn invalid(schema: Value) -> String {
        match error(schema) {
            GrammarError::InvalidSchema { path, reason } => format!("{path}: {reason}"),
            other => panic!("expected InvalidSchema, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let o = JsonSchemaOptions::default();
        assert_eq!((o.max_whitespace, o.max_any_depth), (0, 3));
    }

    #[test]
    fn scalar_types() {
        compile(json!({"type": "string"}))
            .accepts(&[r#""""#, r#""abc""#, r#""a\"b\\c\/\n\t\u00e9\uFFFF""#, "\"é☃😀\""])
            .rejects(&[
                r#""a"b""#,
                r#""\x""#,
                r#""\ud800""#,
                r#""\uDFFF""#,
                "\"a\nb\"",
                "\"\u{1}\"",
                "abc",
                "1",
            ]);
        compile(json!({"type": "integer"}))
            .accepts(&["0", "-0", "7", "-123", "98765432109876543210"])
            .rejects(&["01", "1.0", "1e3", "+1", "-", "", " 1"]);
        compile(json!({"type": "number"}))
            .accepts(&["0", "-1", "3.25", "-0.5", "1e10", "2.5E-3", "1E+2"])
            .rejects(&["01", ".5", "1.", "1e", "NaN", "Infinity", "--1"]);
        compile(json!({"type": "boolean"}))
            .accepts(&["true", "false"])
            .rejects(&["True", "1", "null"]);
        compile(json!({"type": "null"}))
            .accepts(&["null"])
            .rejects(&["None", "\"null\""]);
        compile(json!({"type": ["string", "null"]}))
            .accepts(&["null", "\"x\""])
            .rejects(&["1", "{}"]);
        compile(json!({"type": ["integer", "number"]})).accepts(&["1", "1.5"]);
        assert!(invalid(json!({"type": "str"})).contains("unknown type"));
        assert!(invalid(json!({"type": []})).contains("empty"));
    }

    #[test]
    fn unconstrained_values_have_bounded_depth() {
        for schema in [json!({}), json!(true), json!({"title": "anything"})] {
            compile_with(schema, &opts(0, 2))
                .accepts(&[
                    "1",
                    "\"s\"",
                    "null",
                    "[]",
                    "{}",
                    "[[1]]",
                    r#"{"a":[true,1]}"#,
                    r#"{"a":{"b":2}}"#,
                ])
                .rejects(&[
                    "[[[1]]]",
                    r#"{"a":{"b":{}}}"#,
                    r#"{"a":[true,{}]}"#,
                    "[1,]",
                    "{,}",
                    r#"{"a"}"#,
                ]);
        }
        compile_with(json!({}), &opts(0, 0))
            .accepts(&["1", "\"x\"", "true"])
            .rejects(&["[]", "{}"]);
        compile_with(json!({"type": "object"}), &opts(0, 0))
            .accepts(&["{}", r#"{"a":1}"#])
            .rejects(&[r#"{"a":[]}"#, "1"]);
        compile_with(json!({"type": "array"}), &opts(0, 1))
            .accepts(&["[]", "[1,\"a\"]"])
            .rejects(&["[[]]", "{}"]);
        let m = compile_with(json!({}), &JsonSchemaOptions::default());
        m.accepts(&["[[[1]]]", r#"{"a":[{"b":null}]}"#]).rejects(&["[[[[1]]]]"]);
    }

    #[test]
    fn compact_output_has_no_whitespace() {
        compile_with(json!({}), &opts(0, 2)).rejects(&[" 1", "[1, 2]", "[ ]", "{ }", r#"{"a": 1}"#, "[1\n]"]);
        compile(json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}))
            .accepts(&[r#"{"a":[1,2]}"#])
            .rejects(&[
                r#"{"a": [1,2]}"#,
                r#"{ "a":[1,2]}"#,
                r#"{"a":[1, 2]}"#,
                r#"{"a":[1,2] }"#,
            ]);
    }

    #[test]
    fn whitespace_option() {
        let m = compile_with(
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {}}, "required": ["a"]}),
            &opts(2, 1),
        );
        m.accepts(&[
            r#"{"a":[1,2]}"#,
            "{ \"a\" :\t[ 1 ,\n2 ]\r\n}",
            "{\"a\":[  ]  ,  \"b\"  :  [ 1 , \"x\" ]}",
        ])
        .rejects(&["{   \"a\":[]}", "{\"a\":[1,   2]}", " {\"a\":[]}", "{\"a\":[]\u{b}}"]);
        compile_with(json!({"enum": ["x", 1]}), &opts(2, 1)).accepts(&["\"x\"", "1"]);
    }

    #[test]
    fn optional_properties_any_subset_in_order() {
        let m = compile(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}
        }));
        let members = [r#""a":1"#, r#""b":"x""#, r#""c":true"#];
        for mask in 0..8 {
            let chosen: Vec<&str> = (0..3).filter(|i| mask & (1 << i) != 0).map(|i| members[i]).collect();
            m.accepts(&[&format!("{{{}}}", chosen.join(","))]);
        }
        m.rejects(&[
            r#"{,"a":1}"#,
            r#"{"a":1,}"#,
            r#"{"a":1,,"c":true}"#,
            r#"{"b":"x","a":1}"#,
            r#"{"a":1,"a":1}"#,
            r#"{"d":1}"#,
        ]);
    }

    #[test]
    fn required_and_optional_combinations() {
        let m = compile(json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"},
                "d": {"type": "null"}, "e": {"type": "integer"}
            },
            "required": ["d", "b"],
        }));
        let members = [r#""a":1"#, r#""b":"x""#, r#""c":true"#, r#""d":null"#, r#""e":2"#];
        for mask in 0..32u32 {
            let chosen: Vec<&str> = (0..5).filter(|i| mask & (1 << i) != 0).map(|i| members[i]).collect();
            let text = format!("{{{}}}", chosen.join(","));
            let valid = mask & 0b1010 == 0b1010;
            assert_eq!(m.is_match(&text), valid, "{text}");
        }
        compile(json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}))
            .accepts(&[r#"{"a":1}"#])
            .rejects(&["{}", r#"{"a":1,}"#]);
    }

    #[test]
    fn many_optional_properties_stay_shallow() {
        let mut props = Map::new();
        for i in 0..60 {
            props.insert(format!("p{i}"), json!({"type": "integer"}));
        }
        let m = compile(json!({"type": "object", "properties": props, "additionalProperties": false}));
        let all: Vec<String> = (0..60).map(|i| format!(r#""p{i}":{i}"#)).collect();
        m.accepts(&[
            "{}",
            &format!("{{{}}}", all.join(",")),
            r#"{"p59":1}"#,
            r#"{"p0":1}"#,
            r#"{"p3":1,"p17":2,"p40":3,"p59":4}"#,
        ]);
        m.rejects(&[r#"{"p17":2,"p3":1}"#, r#"{"p3":1,}"#, r#"{,"p3":1}"#]);
        let picked: Vec<String> = (0..60).filter(|i| i % 7 == 3).map(|i| format!(r#""p{i}":0"#)).collect();
        m.accepts(&[&format!("{{{}}}", picked.join(","))]);

        // Optional members before and after a required one.
        let mut props = Map::new();
        for i in 0..30 {
            props.insert(format!("p{i}"), json!({"type": "integer"}));
        }
        let m = compile(json!({"type": "object", "properties": props, "required": ["p20"]}));
        m.accepts(&[
            r#"{"p20":1}"#,
            r#"{"p0":1,"p20":1}"#,
            r#"{"p19":1,"p20":1,"p29":1}"#,
            r#"{"p3":1,"p11":1,"p20":1,"p21":1}"#,
        ]);
        m.rejects(&[
            "{}",
            r#"{"p19":1}"#,
            r#"{"p20":1,"p19":1}"#,
            r#"{"p19":1,,"p20":1}"#,
            r#"{"p20":1,}"#,
        ]);
    }

    #[test]
    fn object_without_properties_is_any_object() {
        compile(json!({"type": "object"}))
            .accepts(&["{}", r#"{"x":[1]}"#, r#"{"a":1,"b":"c"}"#])
            .rejects(&["[]", r#"{"a":1,}"#]);
        compile(json!({"type": "object", "additionalProperties": false}))
            .accepts(&["{}"])
            .rejects(&[r#"{"a":1}"#]);
        compile(json!({"properties": {"a": {"const": 1}}}))
            .accepts(&["{}", r#"{"a":1}"#])
            .rejects(&["1"]);
    }

    #[test]
    fn required_problems() {
        let e = invalid(
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": false}),
        );
        assert!(e.contains("'b'") && e.contains("additionalProperties is false"), "{e}");
        let e = unsupported(
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            "required",
        );
        assert!(e.contains("'b'") && e.contains("declare it"), "{e}");
        unsupported(json!({"type": "object", "required": ["b"]}), "required");
        assert!(invalid(json!({"type": "object", "properties": {"a": false}, "required": ["a"]})).contains("false"));
        compile(json!({"type": "object", "properties": {"a": false, "b": {"type": "integer"}}}))
            .accepts(&["{}", r#"{"b":1}"#])
            .rejects(&[r#"{"a":1}"#]);
    }

    #[test]
    fn additional_properties_schema_is_unsupported() {
        let e = unsupported(
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}),
            "additionalProperties",
        );
        assert!(e.contains("true or false"), "{e}");
    }

    #[test]
    fn keys_are_json_escaped() {
        compile(json!({
            "type": "object",
            "properties": {"q\"uo\\te.*": {"type": "integer"}, "tab\there": {"type": "integer"}, "é/~": {"type": "integer"}},
            "required": ["q\"uo\\te.*"]
        }))
        .accepts(&[r#"{"q\"uo\\te.*":1}"#, r#"{"q\"uo\\te.*":1,"tab\there":2,"é/~":3}"#])
        .rejects(&[r#"{"q"uo\te.*":1}"#, r#"{"q\"uo\\teXX":1}"#, "{\"q\\\"uo\\\\te.*\":1,\"tab\there\":2}"]);
    }

    #[test]
    fn enum_and_const() {
        compile(json!({"enum": ["a\"b", "c\\d", "new\nline", "\u{1}", "é", 1, 2.5, null, true, [1, "x"], {"k": "v"}]}))
            .accepts(&[
                r#""a\"b""#,
                r#""c\\d""#,
                r#""new\nline""#,
                r#""\u0001""#,
                "\"é\"",
                "1",
                "2.5",
                "null",
                "true",
                r#"[1,"x"]"#,
                r#"{"k":"v"}"#,
            ])
            .rejects(&[
                r#""a"b""#,
                r#""c\d""#,
                "\"new\nline\"",
                "\"\"",
                "2",
                "false",
                r#"[1, "x"]"#,
            ]);
        compile(json!({"const": "tab\there"}))
            .accepts(&[r#""tab\there""#])
            .rejects(&["\"tab\there\""]);
        compile(json!({"enum": ["a", 1, null], "type": "string"}))
            .accepts(&["\"a\""])
            .rejects(&["1", "null"]);
        compile(json!({"enum": [1, 1.0, 2.5, true], "type": "integer"}))
            .accepts(&["1", "1.0"])
            .rejects(&["2.5", "true"]);
        compile(json!({"enum": ["a", "b"], "const": "b"}))
            .accepts(&["\"b\""])
            .rejects(&["\"a\""]);
        assert!(invalid(json!({"enum": ["a"], "type": "integer"})).contains("type"));
        assert!(invalid(json!({"enum": []})).contains("no values"));
        assert!(invalid(json!({"enum": ["a"], "const": "b"})).contains("const"));
        unsupported(json!({"enum": ["a"], "minLength": 1}), "minLength");
    }

    #[test]
    fn string_lengths_count_characters() {
        let m = compile(json!({"type": "string", "minLength": 2, "maxLength": 3}));
        m.accepts(&[
            r#""ab""#,
            r#""abc""#,
            r#""\n\"""#,
            r#""\u00e9\\x""#,
            "\"é😀\"",
            r#""a\/""#,
        ])
        .rejects(&[
            r#""a""#,
            r#""abcd""#,
            r#""\n""#,
            r#""\u00e9""#,
            r#""\uD83D\uDE00""#,
            "\"😀\"",
        ]);
        compile(json!({"type": "string", "maxLength": 0}))
            .accepts(&[r#""""#])
            .rejects(&[r#""a""#]);
        compile(json!({"type": "string", "minLength": 1}))
            .accepts(&[r#""a""#, r#""ab""#])
            .rejects(&[r#""""#]);
        assert!(invalid(json!({"type": "string", "minLength": 3, "maxLength": 2})).contains("exceeds"));
        assert!(invalid(json!({"type": "string", "minLength": -1})).contains("non-negative"));
    }

    #[test]
    fn pattern_search_and_anchors() {
        compile(json!({"type": "string", "pattern": "^[a-z]+[0-9]{2}$"}))
            .accepts(&[r#""ab12""#, r#""z00""#])
            .rejects(&[r#""ab1""#, r#""Ab12""#, r#""xab12 ""#, r#"" ab12""#]);
        compile(json!({"type": "string", "pattern": "ab"}))
            .accepts(&[r#""ab""#, r#""xxabyy""#, r#""\n\"ab\\""#])
            .rejects(&[r#""a b""#, r#""""#]);
        compile(json!({"type": "string", "pattern": "^ab"}))
            .accepts(&[r#""abc""#])
            .rejects(&[r#""cab""#]);
        compile(json!({"type": "string", "pattern": "ab$"}))
            .accepts(&[r#""cab""#])
            .rejects(&[r#""abc""#]);
        compile(json!({"type": "string", "pattern": "x|^y$"}))
            .accepts(&[r#""axb""#, r#""y""#])
            .rejects(&[r#""yy""#]);
        compile(json!({"type": "string", "pattern": "(^a)$"}))
            .accepts(&[r#""a""#])
            .rejects(&[r#""ba""#, r#""ab""#]);
        compile(json!({"type": "string", "pattern": ""})).accepts(&[r#""""#, r#""any\"thing""#]);
    }

    #[test]
    fn pattern_characters_are_json_encoded() {
        compile(json!({"type": "string", "pattern": "^say \"hi\"$"}))
            .accepts(&[r#""say \"hi\"""#, r#""say \u0022hi\u0022""#])
            .rejects(&[r#""say "hi"""#, r#""say hi""#]);
        compile(json!({"type": "string", "pattern": "^a\\\\b\\nc$"}))
            .accepts(&[r#""a\\b\nc""#, r#""a\u005Cb\u000ac""#])
            .rejects(&[r#""a\b\nc""#, "\"a\\\\b\nc\""]);
        compile(json!({"type": "string", "pattern": "^[\\x00-\\x7F]{2}$"}))
            .accepts(&[r#""ab""#, r#""\"\\""#, r#""\t\u001f""#, r#""\b\f""#, "\"\u{7f}a\""])
            .rejects(&[r#""é1""#, "\"\t1\"", r#""abc""#]);
        compile(json!({"type": "string", "pattern": "^.$"}))
            .accepts(&[r#""\"""#, r#""\t""#, "\"é\""])
            .rejects(&[r#""\n""#, r#""ab""#]);
        compile(json!({"type": "string", "pattern": "^[^a]$"}))
            .accepts(&[r#""\\""#, r#""b""#])
            .rejects(&[r#""a""#]);
    }

    #[test]
    fn pattern_perl_classes_are_portable() {
        // \d and \w are ASCII (what ECMA-262 and Python agree on); negations exclude all of
        // Python's Unicode digits / word characters / spaces.
        compile(json!({"type": "string", "pattern": "^\\d\\w$"}))
            .accepts(&[r#""1a""#, r#""9_""#])
            .rejects(&["\"١a\"", "\"1é\""]);
        compile(json!({"type": "string", "pattern": "^\\D\\W\\S$"}))
            .accepts(&[r#""a-x""#, "\"a x\"".replace(' ', "!").as_str()])
            .rejects(&["\"١-x\"", "\"aé-\"", "\"a-\\u001c\"", "\"a- \""]);
        compile(json!({"type": "string", "pattern": "^[^\\d]$"}))
            .accepts(&[r#""a""#])
            .rejects(&["\"١\"", r#""1""#]);
        compile(json!({"type": "string", "pattern": "^[\\w--\\d]+$"}))
            .accepts(&[r#""ab_""#])
            .rejects(&[r#""a1""#]);
        // Python's case-insensitive matching equates `ı` with `i`; Unicode simple folding does not.
        compile(json!({"type": "string", "pattern": "(?i)^[^a-z]$"}))
            .accepts(&[r#""1""#, "\"é\""])
            .rejects(&["\"ı\"", "\"İ\"", "\"\u{212A}\"", r#""A""#]);
        compile(json!({"type": "string", "pattern": "^\\s$"}))
            .accepts(&[r#"" ""#, r#""\n""#, "\"\u{a0}\""])
            .rejects(&[r#""\u001c""#]);
    }

    #[test]
    fn pattern_errors() {
        let e = invalid(json!({"type": "string", "pattern": "(unclosed"}));
        assert!(e.contains("does not parse"), "{e}");
        assert!(unsupported(json!({"type": "string", "pattern": "\\bword"}), "pattern").contains("assertion"));
        unsupported(json!({"type": "string", "pattern": "(?m)^a"}), "pattern");
        unsupported(json!({"type": "string", "pattern": "a^b"}), "pattern");
        let e = unsupported(json!({"type": "string", "pattern": "a", "maxLength": 3}), "pattern");
        assert!(e.contains("minLength/maxLength"), "{e}");
        unsupported(json!({"type": "string", "pattern": "a", "format": "date"}), "pattern");
    }

    #[test]
    fn formats() {
        let check = |format: &str, good: &[&str], bad: &[&str]| {
            let quote = |s: &&str| format!("\"{s}\"");
            let good: Vec<String> = good.iter().map(quote).collect();
            let bad: Vec<String> = bad.iter().map(quote).collect();
            let m = compile(json!({"type": "string", "format": format}));
            m.accepts(&good.iter().map(String::as_str).collect::<Vec<_>>());
            m.rejects(&bad.iter().map(String::as_str).collect::<Vec<_>>());
        };
        check(
            "date",
            &["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01", "2023-04-30"],
            &[
                "2023-02-29",
                "1900-02-29",
                "2023-04-31",
                "2023-13-01",
                "2023-00-10",
                "2023-01-00",
                "0000-01-01",
                "2023-1-01",
                "20230101",
            ],
        );
        check(
            "time",
            &["00:00:00Z", "23:59:59.123+05:30", "12:30:00-08:00", "12:30:00z"],
            &[
                "24:00:00Z",
                "12:60:00Z",
                "12:00:60Z",
                "12:00:00",
                "12:00Z",
                "12:00:00+24:00",
                "12:00:00.Z",
            ],
        );
        check(
            "date-time",
            &[
                "2024-01-15T10:20:30Z",
                "2024-02-29T00:00:00.5+01:00",
                "2024-01-15t10:20:30z",
            ],
            &["2024-01-15 10:20:30Z", "2024-01-15T10:20:30", "2023-02-29T00:00:00Z"],
        );
        check(
            "email",
            &["a@b.co", "first.last+tag@sub.example.org", "x_y-z@a-b.io"],
            &["a@b", "@b.co", "a@.co", "a..b@c.co", "a b@c.co", "a@b.c", "a@-b.co"],
        );
        check(
            "uuid",
            &[
                "123e4567-e89b-12d3-a456-426614174000",
                "ABCDEF01-2345-6789-ABCD-EF0123456789",
            ],
            &[
                "123e4567e89b12d3a456426614174000",
                "123e4567-e89b-12d3-a456-42661417400",
                "g23e4567-e89b-12d3-a456-426614174000",
            ],
        );
        check(
            "uri",
            &[
                "https://example.com/a/b?x=1&y=2#frag",
                "mailto:someone@example.com",
                "urn:isbn:0451450523",
                "http://u:p@h:8080/%20x",
                "a:",
            ],
            &[
                "example.com",
                "1http://x",
                "http://exa mple.com",
                "http://x/%zz",
                "http://x/\\\\y",
                "/relative",
            ],
        );
        let e = unsupported(json!({"type": "string", "format": "hostname"}), "format");
        assert!(e.contains("hostname"), "{e}");
        compile(json!({"type": "string", "format": "date", "minLength": 10, "maxLength": 10}))
            .accepts(&[r#""2020-01-01""#]);
        unsupported(json!({"type": "string", "format": "uri", "maxLength": 100}), "format");
    }

    #[test]
    fn arrays() {
        compile(json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}))
            .accepts(&["[1,2]", "[1,2,3]", "[1,2,3,4]"])
            .rejects(&["[]", "[1]", "[1,2,3,4,5]", "[1,\"a\"]", "[1,2,]", "[,1,2]"]);
        compile(json!({"type": "array", "items": {"type": "string"}}))
            .accepts(&["[]", r#"["a"]"#, r#"["a","b","c"]"#])
            .rejects(&["[1]", r#"["a",]"#]);
        compile(json!({"type": "array", "items": {"type": "string"}, "maxItems": 1}))
            .accepts(&["[]", r#"["a"]"#])
            .rejects(&[r#"["a","b"]"#]);
        compile(json!({"type": "array", "minItems": 1}))
            .accepts(&["[1]", "[[2],{}]"])
            .rejects(&["[]"]);
        compile(json!({"type": "array", "items": false}))
            .accepts(&["[]"])
            .rejects(&["[1]"]);
        compile(json!({"type": "array", "maxItems": 0}))
            .accepts(&["[]"])
            .rejects(&["[1]"]);
        compile(json!({"type": "array", "uniqueItems": false})).accepts(&["[1,1]"]);
        assert!(invalid(json!({"type": "array", "minItems": 3, "maxItems": 2})).contains("exceeds"));
        unsupported(json!({"type": "array", "prefixItems": [{}]}), "prefixItems");
        unsupported(json!({"type": "array", "items": [{}]}), "items");
        unsupported(json!({"type": "array", "uniqueItems": true}), "uniqueItems");
    }

    #[test]
    fn any_of_and_all_of() {
        compile(json!({"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "x"}))
            .accepts(&["\"a\"", "1"])
            .rejects(&["null", "1.5"]);
        compile(json!({"anyOf": [{"type": "integer"}, {"type": "number"}]})).accepts(&["1", "1.5"]);
        compile(json!({"anyOf": [false, {"type": "null"}]})).accepts(&["null"]);
        compile(json!({"allOf": [{"type": "boolean"}]}))
            .accepts(&["true"])
            .rejects(&["1"]);
        unsupported(json!({"allOf": [{"type": "boolean"}, {"const": true}]}), "allOf");
        unsupported(json!({"anyOf": [{"type": "string"}], "type": "string"}), "type");
        assert!(invalid(json!({"anyOf": []})).contains("non-empty"));
    }

    #[test]
    fn one_of_disjoint_by_type() {
        compile(json!({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}))
            .accepts(&["\"a\"", "1", "null"])
            .rejects(&["1.5", "true"]);
        compile(json!({"oneOf": [{"type": "integer"}, {"type": "boolean"}, {"enum": ["x", "y"]}]}))
            .accepts(&["1", "true", "\"x\""]);
        compile(json!({"oneOf": [{"const": 1}, {"const": 2}, {"enum": [3, "3"]}]})).accepts(&["1", "2", "3", "\"3\""]);
        compile(json!({"oneOf": [{"type": "array", "maxItems": 1}, {"type": "array", "minItems": 2}]}))
            .accepts(&["[]", "[1,2]"]);
        compile(json!({"oneOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "integer"}]}))
            .accepts(&["null", "1"]);
    }

    #[test]
    fn one_of_disjoint_by_discriminator() {
        let m = compile(json!({
            "$defs": {
                "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}}, "required": ["kind"]},
                "Dog": {"type": "object", "properties": {"kind": {"enum": ["dog"]}, "good": {"type": "boolean"}}, "required": ["kind", "good"]}
            },
            "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
            "discriminator": {"propertyName": "kind"}
        }));
        m.accepts(&[
            r#"{"kind":"cat"}"#,
            r#"{"kind":"cat","lives":9}"#,
            r#"{"kind":"dog","good":true}"#,
        ])
        .rejects(&[r#"{"kind":"dog"}"#, r#"{"kind":"cow"}"#]);
        // One branch closes its properties, the other requires one the first cannot have.
        compile(json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false},
            {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
        ]}))
        .accepts(&["{}", r#"{"b":1}"#]);
        // A property one branch requires must satisfy both branches' schemas for it.
        compile(json!({"oneOf": [
            {"type": "object", "properties": {"x": {"type": "integer"}}},
            {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
        ]}))
        .accepts(&["{}", r#"{"x":1}"#, r#"{"x":"s"}"#]);
        // A non-empty array's elements must satisfy both items schemas.
        compile(json!({"oneOf": [
            {"type": "array", "items": {"type": "integer"}},
            {"type": "array", "items": {"type": "string"}, "minItems": 1}
        ]}))
        .accepts(&["[]", "[1]", r#"["a"]"#]);
        unsupported(
            json!({"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "string"}}]}),
            "oneOf",
        );
    }

    #[test]
    fn one_of_overlap_is_refused() {
        let e = unsupported(json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}), "oneOf");
        assert!(
            e.contains("branches 0 and 1") && e.contains("anyOf") && e.contains("const"),
            "{e}"
        );
        unsupported(
            json!({"oneOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "object", "properties": {"b": {"type": "string"}}}
            ]}),
            "oneOf",
        );
        unsupported(
            json!({"oneOf": [{"type": "string"}, {"type": "integer"}, {"minLength": 1}]}),
            "oneOf",
        );
        unsupported(json!({"oneOf": [{"const": 1}, {"const": 1.0}]}), "oneOf");
        unsupported(
            json!({"oneOf": [{"type": "string", "minLength": 1}, {"type": "string", "maxLength": 3}]}),
            "oneOf",
        );
        // `required` alone does not make a non-object branch disjoint.
        unsupported(
            json!({"oneOf": [
                {"type": ["object", "string"], "properties": {"k": {"const": 1}}, "required": ["k"]},
                {"type": ["object", "string"], "properties": {"k": {"const": 2}}, "required": ["k"]}
            ]}),
            "oneOf",
        );
    }

    #[test]
    fn refs() {
        compile(json!({
            "definitions": {"N": {"type": "integer"}},
            "$defs": {"a/b": {"type": "object", "properties": {"n": {"$ref": "#/definitions/N"}}, "required": ["n"]}},
            "type": "array",
            "items": {"$ref": "#/$defs/a~1b"}
        }))
        .accepts(&["[]", r#"[{"n":1},{"n":2}]"#])
        .rejects(&[r#"[{"n":"x"}]"#, "[{}]"]);
        compile(json!({"properties": {"x": {"type": "string"}, "y": {"$ref": "#/properties/x"}}}))
            .accepts(&[r#"{"x":"a","y":"b"}"#]);
        compile(json!({"$defs": {"A": {"type": "null"}}, "anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}))
            .accepts(&["null"]);
        compile(json!({"$defs": {"A": {"type": "null"}}, "$ref": "#/$defs/A", "description": "d"})).accepts(&["null"]);
        unsupported(
            json!({"$defs": {"A": {"type": "null"}}, "$ref": "#/$defs/A", "type": "null"}),
            "type",
        );
    }

    #[test]
    fn recursive_and_foreign_refs_are_errors() {
        let e = unsupported(
            json!({"$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}, "$ref": "#/$defs/Node"}),
            "$ref",
        );
        assert!(e.contains("recursive"), "{e}");
        unsupported(json!({"type": "array", "items": {"$ref": "#"}}), "$ref");
        unsupported(
            json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"type": "array", "items": {"$ref": "#/$defs/A"}}}, "$ref": "#/$defs/A"}),
            "$ref",
        );
        unsupported(json!({"$ref": "https://example.com/schema.json"}), "$ref");
        unsupported(json!({"$ref": "#anchor"}), "$ref");
        assert!(invalid(json!({"$ref": "#/$defs/Missing"})).contains("points to nothing"));
    }

    #[test]
    fn unsupported_keywords_are_named() {
        for (schema, keyword) in [
            (json!({"not": {"type": "string"}}), "not"),
            (json!({"type": "integer", "multipleOf": 2}), "multipleOf"),
            (json!({"type": "object", "patternProperties": {}}), "patternProperties"),
            (json!({"type": "object", "minProperties": 1}), "minProperties"),
            (json!({"if": {}, "then": {}}), "if"),
            (json!({"type": "string", "frobnicate": 1}), "frobnicate"),
            (
                json!({"properties": {"a": {"type": "string", "contentMediaType": "x"}}}),
                "contentMediaType",
            ),
        ] {
            let e = unsupported(schema, keyword);
            assert!(!e.is_empty());
        }
        match error(json!({"properties": {"age": {"type": "integer", "multipleOf": 2}}})) {
            GrammarError::UnsupportedSchemaKeyword { path, .. } => assert_eq!(path, "#/properties/age"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn annotations_are_ignored() {
        compile(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://x/y", "title": "T",
            "description": "D", "$comment": "c", "examples": [1], "default": 1, "readOnly": true,
            "writeOnly": false, "deprecated": false, "type": "integer"
        }))
        .accepts(&["1"]);
    }

    #[test]
    fn false_schema() {
        assert!(invalid(json!(false)).contains("schema false matches nothing"));
        assert!(invalid(json!({"type": "array", "items": false, "minItems": 1})).contains("items is false"));
        assert!(invalid(json!(3)).contains("object or a boolean"));
    }

    #[test]
    fn deep_schemas_are_bounded() {
        let mut schema = json!({"type": "integer"});
        for _ in 0..100 {
            schema = json!({"type": "array", "items": schema});
        }
        assert!(matches!(
            schema_to_regex(&schema, &JsonSchemaOptions::default()),
            Err(GrammarError::TooLarge { .. })
        ));
        let mut schema = json!({"type": "integer"});
        for _ in 0..10 {
            schema = json!({"type": "array", "items": schema});
        }
        compile(schema).accepts(&["[[[[[[[[[[1]]]]]]]]]]"]);
        assert!(matches!(
            schema_to_regex(
                &json!({"type": "string", "maxLength": 1_000_000_000u64}),
                &JsonSchemaOptions::default()
            ),
            Err(GrammarError::TooLarge { .. })
        ));
        // Nested arrays write their items twice per level: the size cap stops the doubling.
        let mut schema = json!({"type": "integer"});
        for _ in 0..50 {
            schema = json!({"type": "array", "items": schema});
        }
        assert!(matches!(
            schema_to_regex(&schema, &JsonSchemaOptions::default()),
            Err(GrammarError::TooLarge { .. })
        ));
        assert!(matches!(
            schema_to_regex(&json!({}), &opts(0, 40)),
            Err(GrammarError::TooLarge { .. })
        ));
    }

    #[test]
    fn embedded_id_blocks_refs() {
        unsupported(
            json!({"$defs": {"A": {"type": "null"}}, "properties": {"x": {"$id": "https://other/", "properties": {"y": {"$ref": "#/$defs/A"}}}}}),
            "$ref",
        );
    }

    /// Integers in `lo..=hi` per a bounds schema, checked one by one.
    fn check_integer_range(schema: Value, valid: impl Fn(i64) -> bool) {
        let m = compile(schema.clone());
        for x in -1200..=1200 {
            assert_eq!(m.is_match(&x.to_string()), valid(x), "{x} under {schema}");
        }
    }

    #[test]
    fn integer_bounds() {
        check_integer_range(json!({"type": "integer", "minimum": 0}), |x| x >= 0);
        check_integer_range(json!({"type": "integer", "minimum": -17, "maximum": 1034}), |x| {
            (-17..=1034).contains(&x)
        });
        check_integer_range(
            json!({"type": "integer", "exclusiveMinimum": -5.5, "exclusiveMaximum": 99}),
            |x| x > -6 && x < 99,
        );
        check_integer_range(json!({"type": "integer", "maximum": -3}), |x| x <= -3);
        check_integer_range(
            json!({"type": "integer", "minimum": 10, "exclusiveMinimum": 10, "maximum": 1000}),
            |x| x > 10 && x <= 1000,
        );
        check_integer_range(json!({"type": "integer", "minimum": 0.5, "maximum": 7.9}), |x| {
            (1..=7).contains(&x)
        });
        check_integer_range(json!({"type": "integer", "minimum": 123, "maximum": 987}), |x| {
            (123..=987).contains(&x)
        });
        let m = compile(json!({"type": "integer", "minimum": 5}));
        m.accepts(&["5", "123456789012345678901234567890"])
            .rejects(&["05", "-0", "5.0", "-123456789012345678901"]);
        assert!(invalid(json!({"type": "integer", "minimum": 5, "maximum": 4})).contains("no integer"));
        unsupported(
            json!({"type": "integer", "exclusiveMinimum": true, "minimum": 1}),
            "exclusiveMinimum",
        );
    }

    #[test]
    fn uint_ranges_exhaustive() {
        let bounds = [
            0u128, 1, 2, 8, 9, 10, 11, 19, 20, 55, 99, 100, 101, 109, 110, 199, 200, 999, 1000, 1001,
        ];
        for (i, &a) in bounds.iter().enumerate() {
            for &b in &bounds[i..] {
                let re = uint_range(a, Some(b)).unwrap_or_default();
                let dfa = dense::DFA::new(&format!("^(?:{re})$")).unwrap();
                for x in 0..=1100u128 {
                    let s = x.to_string();
                    let hit = matches!(dfa.try_search_fwd(&Input::new(&s).anchored(Anchored::Yes)), Ok(Some(_)));
                    assert_eq!(hit, a <= x && x <= b, "{x} in [{a},{b}]: {re}");
                }
            }
        }
        assert!(uint_range(5, Some(4)).is_none());
    }

    #[test]
    fn number_bounds() {
        compile(json!({"type": "number", "minimum": 0, "maximum": 1}))
            .accepts(&["0", "0.5", "1", "1.0", "1.000", "0.999999999999999999999"])
            .rejects(&["-0.1", "1.01", "2", "-0", "1e0", "-1"]);
        compile(json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}))
            .accepts(&["0.5", "0.000000000000001", "0.999999999999999"])
            .rejects(&["0", "0.0", "1", "0.9999999999999999999", "0.0000000000000000001"]);
        compile(json!({"type": "number", "exclusiveMinimum": -3, "maximum": 250}))
            .accepts(&["-2.5", "-2.999", "0", "250", "249.99", "-0.5", "12"])
            .rejects(&["-3", "-3.0", "-3.5", "250.01", "251"]);
        compile(json!({"type": "number", "exclusiveMaximum": 100}))
            .accepts(&["99.5", "-1000000.25", "0"])
            .rejects(&["100", "100.0", "100.5"]);
        compile(json!({"type": "number", "minimum": -1, "exclusiveMaximum": 0}))
            .accepts(&["-1", "-1.0", "-0.5"])
            .rejects(&["0", "-1.5", "-0"]);
        unsupported(json!({"type": "number", "minimum": 0.5}), "minimum");
        unsupported(json!({"type": "number", "maximum": 1e300}), "maximum");
        unsupported(json!({"minimum": 0.25}), "minimum");
    }

    #[test]
    fn realistic_schema() {
        let m = compile_with(
            json!({
                "title": "Person",
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "email": {"type": "string", "format": "email"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                    "pet": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}], "default": null}
                },
                "required": ["name", "age"],
                "$defs": {"Pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}}, "required": ["kind"]}}
            }),
            &JsonSchemaOptions::default(),
        );
        m.accepts(&[
            r#"{"name":"Ann","age":30}"#,
            r#"{"name":"Bo","age":0,"email":"b@x.io","tags":["a","b"],"pet":{"kind":"cat"}}"#,
            r#"{"name":"C","age":150,"pet":null}"#,
        ])
        .rejects(&[
            r#"{"name":"","age":1}"#,
            r#"{"name":"A","age":151}"#,
            r#"{"age":1,"name":"A"}"#,
            r#"{"name":"A","age":1,"pet":{}}"#,
        ]);
    }
}
