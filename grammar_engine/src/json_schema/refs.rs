//! `$ref` resolution inside one schema document.
//!
//! The document is indexed once: every schema resource (a subschema with `$id`, or `id` before
//! draft 6) by its absolute URI, every anchor (`$anchor`, `$dynamicAnchor`, a draft-4/7 `id`
//! of the form `#name`) by `uri#name`, and every subschema's base URI. A reference is then
//! resolved against the base URI of the schema that holds it (RFC 3986 §5.2) and looked up:
//! a JSON pointer fragment walks from its resource, a plain-name fragment is an anchor. A
//! reference to a document that is not this one is an error: nothing is fetched.
//!
//! `$recursiveRef` and `$dynamicRef` are resolved like `$ref` (statically, from the
//! reference's own resource): exact for the usual single-document schemas, whose dynamic
//! anchors all live in the root.

use std::collections::HashMap;

use serde_json::Value;

use super::context::Ctx;
use super::policy::{Shape, SUBSCHEMA_KEYWORDS};
use crate::error::Result;

/// What a reference points to: the schema, its base URI (for references inside it) and its
/// location for messages.
pub(crate) struct Target<'a> {
    pub schema: &'a Value,
    pub base: String,
    pub path: String,
}

pub(crate) struct Resolver<'a> {
    root: &'a Value,
    resources: HashMap<String, (&'a Value, String)>,
    anchors: HashMap<String, (&'a Value, String)>,
    bases: HashMap<*const Value, String>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(root: &'a Value) -> Resolver<'a> {
        let mut r = Resolver { root, resources: HashMap::new(), anchors: HashMap::new(), bases: HashMap::new() };
        r.index(root, "", "#".to_string(), 0);
        r.resources.entry(String::new()).or_insert((root, "#".into()));
        r
    }

    /// The base URI of the document's root.
    pub(crate) fn root_base(&self) -> String {
        self.base_of(self.root).to_string()
    }

    /// The base URI that references inside `schema` resolve against.
    pub(crate) fn base_of(&self, schema: &Value) -> &str {
        self.bases.get(&(schema as *const Value)).map(String::as_str).unwrap_or("")
    }

    fn index(&mut self, schema: &'a Value, parent_base: &str, path: String, depth: usize) {
        let Value::Object(map) = schema else { return };
        if depth > 256 {
            return;
        }
        let mut base = parent_base.to_string();
        for key in ["$id", "id"] {
            let Some(id) = map.get(key).and_then(Value::as_str) else { continue };
            if key == "id" && map.contains_key("$id") {
                continue;
            }
            if let Some(name) = id.strip_prefix('#') {
                if !name.is_empty() && !name.starts_with('/') {
                    self.anchors.insert(format!("{}#{name}", strip_fragment(&base)), (schema, path.clone()));
                }
                continue;
            }
            base = strip_fragment(&resolve_uri(&base, id)).to_string();
            self.resources.entry(base.clone()).or_insert((schema, path.clone()));
        }
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(name) = map.get(key).and_then(Value::as_str) {
                self.anchors.entry(format!("{base}#{name}")).or_insert((schema, path.clone()));
            }
        }
        self.bases.insert(schema as *const Value, base.clone());
        for &(keyword, shape) in SUBSCHEMA_KEYWORDS {
            let Some(v) = map.get(keyword) else { continue };
            let here = format!("{path}/{keyword}");
            match (shape, v) {
                (Shape::Map, Value::Object(m)) => {
                    for (k, sub) in m {
                        self.index(sub, &base, format!("{here}/{}", pointer_token(k)), depth + 1);
                    }
                }
                (Shape::List | Shape::OneOrList, Value::Array(items)) => {
                    for (i, sub) in items.iter().enumerate() {
                        self.index(sub, &base, format!("{here}/{i}"), depth + 1);
                    }
                }
                (Shape::One | Shape::OneOrList, sub) => self.index(sub, &base, here, depth + 1),
                _ => {}
            }
        }
    }

    /// Resolves `reference` (the value of `keyword` in a schema whose base URI is `base`).
    pub(crate) fn resolve(&self, reference: &str, base: &str, keyword: &str, ctx: &Ctx) -> Result<Target<'a>> {
        let absolute = resolve_uri(base, reference);
        let (doc, fragment) = match absolute.split_once('#') {
            Some((d, f)) => (d.to_string(), f.to_string()),
            None => (absolute.clone(), String::new()),
        };
        let fragment = percent_decode(&fragment)
            .ok_or_else(|| ctx.invalid(format!("{keyword} '{reference}' has a malformed percent-encoding")))?;
        if !fragment.is_empty() && !fragment.starts_with('/') {
            let (schema, path) = self
                .anchors
                .get(&format!("{doc}#{fragment}"))
                .ok_or_else(|| ctx.invalid(format!("{keyword} '{reference}' names an anchor that does not exist")))?;
            return Ok(Target { schema, base: self.base_of(schema).to_string(), path: path.clone() });
        }
        let Some(&(resource, ref resource_path)) = self.resources.get(&doc) else {
            return Err(ctx.unsupported(
                keyword,
                format!("'{reference}' refers to another document ({doc}); only references inside this schema are resolved"),
            ));
        };
        let found = walk_pointer(resource, &fragment).map(|s| (s, resource_path.clone()));
        // A pointer that misses inside an embedded resource is often meant from the root.
        let (schema, start) = match found {
            Some(hit) => hit,
            None => walk_pointer(self.root, &fragment)
                .map(|s| (s, "#".to_string()))
                .ok_or_else(|| ctx.invalid(format!("{keyword} '{reference}' points to nothing in the schema")))?,
        };
        let path = if fragment.is_empty() { start } else { format!("{}{fragment}", start.trim_end_matches('#')) };
        let path = if path.starts_with('#') { path } else { format!("#{path}") };
        Ok(Target { schema, base: self.base_of(schema).to_string(), path })
    }
}

/// Follows a JSON pointer (already percent-decoded) from `node`.
fn walk_pointer<'v>(mut node: &'v Value, pointer: &str) -> Option<&'v Value> {
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        node = match node {
            Value::Object(m) => m.get(&token)?,
            Value::Array(a) => a.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Escapes one JSON Pointer reference token (`~` → `~0`, `/` → `~1`).
pub(crate) fn pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn strip_fragment(uri: &str) -> &str {
    uri.split_once('#').map_or(uri, |(d, _)| d)
}

/// Decodes `%XX` escapes; `None` if one is malformed or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(s.get(i + 1..i + 3)?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The parts of a URI reference (RFC 3986 §3): scheme, authority, path, query, fragment.
struct Parts<'u> {
    scheme: Option<&'u str>,
    authority: Option<&'u str>,
    path: &'u str,
    query: Option<&'u str>,
    fragment: Option<&'u str>,
}

fn split(uri: &str) -> Parts<'_> {
    let (rest, fragment) = match uri.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (uri, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (scheme, rest) = match rest.find(':') {
        Some(i)
            if i > 0
                && rest[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && rest[..i].chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (Some(&rest[..i]), &rest[i + 1..])
        }
        _ => (None, rest),
    };
    let (authority, path) = match rest.strip_prefix("//") {
        Some(r) => match r.find('/') {
            Some(i) => (Some(&r[..i]), &r[i..]),
            None => (Some(r), ""),
        },
        None => (None, rest),
    };
    Parts { scheme, authority, path, query, fragment }
}

/// Resolves a URI reference against a base (RFC 3986 §5.2.2, with dot segments removed).
pub(crate) fn resolve_uri(base: &str, reference: &str) -> String {
    let r = split(reference);
    let b = split(base);
    let (scheme, authority, path, query);
    if r.scheme.is_some() {
        (scheme, authority, path, query) = (r.scheme, r.authority, remove_dots(r.path), r.query);
    } else if r.authority.is_some() {
        (scheme, authority, path, query) = (b.scheme, r.authority, remove_dots(r.path), r.query);
    } else if r.path.is_empty() {
        (scheme, authority, path, query) = (b.scheme, b.authority, b.path.to_string(), r.query.or(b.query));
    } else if r.path.starts_with('/') {
        (scheme, authority, path, query) = (b.scheme, b.authority, remove_dots(r.path), r.query);
    } else {
        let merged = if b.authority.is_some() && b.path.is_empty() {
            format!("/{}", r.path)
        } else {
            match b.path.rfind('/') {
                Some(i) => format!("{}{}", &b.path[..=i], r.path),
                None => r.path.to_string(),
            }
        };
        (scheme, authority, path, query) = (b.scheme, b.authority, remove_dots(&merged), r.query);
    }
    let mut out = String::new();
    if let Some(s) = scheme {
        out.push_str(s);
        out.push(':');
    }
    if let Some(a) = authority {
        out.push_str("//");
        out.push_str(a);
    }
    out.push_str(&path);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    if let Some(f) = r.fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

fn remove_dots(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let absolute = path.starts_with('/');
    let segments: Vec<&str> = path.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > usize::from(absolute) {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uri_resolution() {
        assert_eq!(resolve_uri("http://a/b/c/d;p?q", "g"), "http://a/b/c/g");
        assert_eq!(resolve_uri("http://a/b/c/d;p?q", "../g"), "http://a/b/g");
        assert_eq!(resolve_uri("http://a/b/c/d;p?q", "#s"), "http://a/b/c/d;p?q#s");
        assert_eq!(resolve_uri("http://a/b/c/d", "/g"), "http://a/g");
        assert_eq!(resolve_uri("", "#/definitions/x"), "#/definitions/x");
        assert_eq!(resolve_uri("http://x/root.json", "item.json"), "http://x/item.json");
        assert_eq!(resolve_uri("urn:example:root", "#foo"), "urn:example:root#foo");
    }

    #[test]
    fn resolves_pointers_ids_and_anchors() {
        let doc = json!({
            "$id": "http://example.com/root.json",
            "$defs": {
                "a": {"type": "integer"},
                "b": {"$id": "item.json", "$defs": {"c": {"type": "string"}}},
                "d": {"$anchor": "dee", "type": "null"},
                "e~/f": {"type": "boolean"}
            }
        });
        let r = Resolver::new(&doc);
        let ctx = Ctx::root();
        let base = r.root_base();
        assert_eq!(base, "http://example.com/root.json");
        assert_eq!(r.resolve("#/$defs/a", &base, "$ref", &ctx).unwrap().schema, &json!({"type": "integer"}));
        let t = r.resolve("item.json#/$defs/c", &base, "$ref", &ctx).unwrap();
        assert_eq!(t.schema, &json!({"type": "string"}));
        assert_eq!(t.base, "http://example.com/item.json");
        assert_eq!(r.resolve("#dee", &base, "$ref", &ctx).unwrap().schema["type"], "null");
        assert_eq!(r.resolve("#/$defs/e~0~1f", &base, "$ref", &ctx).unwrap().schema["type"], "boolean");
        assert!(r.resolve("http://other.com/x.json", &base, "$ref", &ctx).is_err());
        assert!(r.resolve("#/$defs/zz", &base, "$ref", &ctx).is_err());
        assert!(r.resolve("#/$defs/%zz", &base, "$ref", &ctx).is_err());
    }
}
