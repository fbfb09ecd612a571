//! The structure spec as data: a JSON value read into a tree of typed [`Node`]s.
//!
//! Reading is separate from compiling so every shape error is found, with its JSON pointer,
//! before anything is built, and so the compiler works on closed enums rather than on
//! `serde_json::Value`s. The syntax (one kind key per object, shorthands for text and
//! sequences) is documented in [`super`].

use serde_json::{Map, Value};

use crate::error::{GrammarError, Result};
use crate::util::TokenId;

/// Deepest nesting of nodes accepted (the compiler recurses once per level).
const MAX_DEPTH: usize = 64;

/// Largest `min`/`max` of a `repeat` (each copy is a copy of the automaton).
pub const MAX_REPEAT: u64 = 1024;

/// One node of a spec, with the JSON pointer it came from.
#[derive(Debug, Clone)]
pub struct Node {
    pub path: String,
    pub kind: Kind,
}

/// What a node matches.
#[derive(Debug, Clone)]
pub enum Kind {
    /// Exactly this text.
    Text(String),
    /// The strings that fully match this regex.
    Regex(String),
    /// The strings of a GBNF grammar (its `root` rule).
    Gbnf(String),
    /// The strings of a Lark grammar (its start rule).
    Lark(String),
    /// The JSON texts valid under this schema; `None` options fall back to the compile call's.
    JsonSchema { schema: Value, max_whitespace: Option<usize>, max_any_depth: Option<usize> },
    /// One token, named by its text or id.
    Token(TokenName),
    /// Any text (valid UTF-8, no special token) containing none of `without`.
    FreeText { without: Vec<Node> },
    /// One string of each part, in order.
    Sequence(Vec<Node>),
    /// One string of any part.
    AnyOf(Vec<Node>),
    /// `min` to `max` (unbounded when `None`) strings of `item`, with `separator` between them.
    Repeat { item: Box<Node>, min: u32, max: Option<u32>, separator: Option<Box<Node>> },
    /// The inner node's strings, or nothing.
    Optional(Box<Node>),
    /// The inner node's strings written as JSON strings: quoted, their bytes escaped
    /// (`crate::json_escape`).
    JsonString(Box<Node>),
}

/// How a spec names a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenName {
    Id(TokenId),
    Text(String),
}

/// The kind keys, in the order error messages list them.
const KINDS: &[&str] =
    &["text", "regex", "json_schema", "gbnf", "lark", "token", "free_text", "until", "sequence", "any_of", "repeat", "optional", "json_string"];

/// Reads a whole spec.
pub fn parse(spec: &Value) -> Result<Node> {
    read(spec, "", 0)
}

fn read(v: &Value, path: &str, depth: usize) -> Result<Node> {
    if depth > MAX_DEPTH {
        return Err(GrammarError::invalid_structure(path, format!("nested deeper than {MAX_DEPTH} levels")));
    }
    let node = |kind| Ok(Node { path: path.to_string(), kind });
    match v {
        Value::String(s) => node(Kind::Text(s.clone())),
        Value::Array(items) => node(Kind::Sequence(read_list(items, path, depth)?)),
        Value::Object(obj) => read_object(obj, path, depth),
        other => Err(GrammarError::invalid_structure(
            path,
            format!("expected a string (text), a list (a sequence) or an object with one of the keys {}; got {}", KINDS.join(", "), type_name(other)),
        )),
    }
}

fn read_list(items: &[Value], path: &str, depth: usize) -> Result<Vec<Node>> {
    items.iter().enumerate().map(|(i, item)| read(item, &format!("{path}/{i}"), depth + 1)).collect()
}

fn read_object(obj: &Map<String, Value>, path: &str, depth: usize) -> Result<Node> {
    let kinds: Vec<&str> = KINDS.iter().copied().filter(|k| obj.contains_key(*k)).collect();
    let kind = match kinds.as_slice() {
        [one] => *one,
        [] => {
            return Err(GrammarError::invalid_structure(
                path,
                format!("an object needs one of the keys {}; it has {}", KINDS.join(", "), key_list(obj)),
            ))
        }
        several => {
            return Err(GrammarError::invalid_structure(path, format!("an object takes one kind key; this one has {}", several.join(" and "))))
        }
    };
    let allowed: &[&str] = match kind {
        "json_schema" => &["json_schema", "max_whitespace", "max_any_depth"],
        "repeat" => &["repeat", "min", "max", "separator"],
        _ => &[],
    };
    if let Some(extra) = obj.keys().find(|k| k.as_str() != kind && !allowed.contains(&k.as_str())) {
        return Err(GrammarError::invalid_structure(&format!("{path}/{}", escape(extra)), format!("unknown key '{extra}' in a '{kind}' node")));
    }
    let here = format!("{path}/{kind}");
    let value = &obj[kind];
    let node = |kind| Ok(Node { path: path.to_string(), kind });
    match kind {
        "text" => node(Kind::Text(string(value, &here)?)),
        "regex" => node(Kind::Regex(string(value, &here)?)),
        "gbnf" => node(Kind::Gbnf(string(value, &here)?)),
        "lark" => node(Kind::Lark(string(value, &here)?)),
        "json_schema" => {
            if !value.is_object() && !value.is_boolean() {
                return Err(GrammarError::invalid_structure(&here, format!("a JSON Schema is an object or a boolean, not {}", type_name(value))));
            }
            node(Kind::JsonSchema {
                schema: value.clone(),
                max_whitespace: count(obj.get("max_whitespace"), &format!("{path}/max_whitespace"), 64)?.map(|n| n as usize),
                max_any_depth: count(obj.get("max_any_depth"), &format!("{path}/max_any_depth"), 16)?.map(|n| n as usize),
            })
        }
        "token" => node(Kind::Token(token_name(value, &here)?)),
        "free_text" => node(Kind::FreeText { without: free_text_stops(value, &here, depth)? }),
        "until" => {
            // Sugar: free text without the stops, then one of them.
            let stops = stop_list(value, &here, depth)?;
            let last = if stops.len() == 1 { stops[0].clone() } else { Node { path: here.clone(), kind: Kind::AnyOf(stops.clone()) } };
            let free = Node { path: here.clone(), kind: Kind::FreeText { without: stops } };
            node(Kind::Sequence(vec![free, last]))
        }
        "sequence" => match value {
            Value::Array(items) => node(Kind::Sequence(read_list(items, &here, depth)?)),
            other => Err(GrammarError::invalid_structure(&here, format!("expected a list, got {}", type_name(other)))),
        },
        "any_of" => match value {
            Value::Array(items) if !items.is_empty() => node(Kind::AnyOf(read_list(items, &here, depth)?)),
            Value::Array(_) => Err(GrammarError::invalid_structure(&here, "any_of needs at least one alternative")),
            other => Err(GrammarError::invalid_structure(&here, format!("expected a list, got {}", type_name(other)))),
        },
        "repeat" => {
            let item = Box::new(read(value, &here, depth + 1)?);
            let min = count(obj.get("min"), &format!("{path}/min"), MAX_REPEAT)?.unwrap_or(0) as u32;
            let max = count(obj.get("max"), &format!("{path}/max"), MAX_REPEAT)?.map(|m| m as u32);
            if let Some(max) = max {
                if max < min {
                    return Err(GrammarError::invalid_structure(&format!("{path}/max"), format!("max ({max}) is below min ({min})")));
                }
            }
            let separator = match obj.get("separator") {
                None | Some(Value::Null) => None,
                Some(sep) => Some(Box::new(read(sep, &format!("{path}/separator"), depth + 1)?)),
            };
            node(Kind::Repeat { item, min, max, separator })
        }
        "optional" => node(Kind::Optional(Box::new(read(value, &here, depth + 1)?))),
        "json_string" => node(Kind::JsonString(Box::new(read(value, &here, depth + 1)?))),
        _ => unreachable!("every kind key is handled"),
    }
}

/// `true`, or `{"without": [stop, ...]}`.
fn free_text_stops(v: &Value, path: &str, depth: usize) -> Result<Vec<Node>> {
    match v {
        Value::Bool(true) => Ok(Vec::new()),
        Value::Object(obj) => {
            if let Some(extra) = obj.keys().find(|k| k.as_str() != "without") {
                return Err(GrammarError::invalid_structure(&format!("{path}/{}", escape(extra)), format!("unknown key '{extra}' in free_text (only 'without')")));
            }
            match obj.get("without") {
                None => Ok(Vec::new()),
                Some(w) => stop_list(w, &format!("{path}/without"), depth),
            }
        }
        other => Err(GrammarError::invalid_structure(path, format!("expected true or {{\"without\": [...]}}, got {}", type_name(other)))),
    }
}

/// A stop (text, or `{"token": ...}`) or a non-empty list of them.
fn stop_list(v: &Value, path: &str, depth: usize) -> Result<Vec<Node>> {
    let stops = match v {
        Value::Array(items) if items.is_empty() => return Err(GrammarError::invalid_structure(path, "the list of stops is empty")),
        Value::Array(items) => items.iter().enumerate().map(|(i, s)| stop(s, &format!("{path}/{i}"), depth)).collect::<Result<Vec<_>>>()?,
        single => vec![stop(single, path, depth)?],
    };
    Ok(stops)
}

fn stop(v: &Value, path: &str, depth: usize) -> Result<Node> {
    let node = read(v, path, depth + 1)?;
    match &node.kind {
        Kind::Text(t) if t.is_empty() => Err(GrammarError::invalid_structure(path, "a stop text cannot be empty (every text contains it)")),
        Kind::Text(_) | Kind::Token(_) => Ok(node),
        _ => Err(GrammarError::invalid_structure(path, "a stop is a text or a {\"token\": ...}")),
    }
}

fn token_name(v: &Value, path: &str) -> Result<TokenName> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(TokenName::Text(s.clone())),
        Value::Number(n) => n
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .map(|id| TokenName::Id(TokenId::new(id)))
            .ok_or_else(|| GrammarError::invalid_structure(path, format!("a token id is a non-negative integer, not {n}"))),
        other => Err(GrammarError::invalid_structure(path, format!("a token is named by its text or its id, not {}", type_name(other)))),
    }
}

fn string(v: &Value, path: &str) -> Result<String> {
    v.as_str().map(str::to_string).ok_or_else(|| GrammarError::invalid_structure(path, format!("expected a string, got {}", type_name(v))))
}

/// An optional non-negative integer up to `limit` (`null` counts as absent).
fn count(v: Option<&Value>, path: &str, limit: u64) -> Result<Option<u64>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(x) if x <= limit => Ok(Some(x)),
            _ => Err(GrammarError::invalid_structure(path, format!("expected an integer from 0 to {limit}, got {n}"))),
        },
        Some(other) => Err(GrammarError::invalid_structure(path, format!("expected an integer, got {}", type_name(other)))),
    }
}

fn key_list(obj: &Map<String, Value>) -> String {
    if obj.is_empty() {
        "no key".to_string()
    } else {
        obj.keys().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(", ")
    }
}

/// A key as a JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
