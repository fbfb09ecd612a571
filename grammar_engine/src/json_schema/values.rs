//! JSON values as the compiler sees them: their types and kinds, equality as `jsonschema`
//! decides `enum`/`const`, and the languages of one value (a literal) and of any value.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Number, Value};

use super::numbers::{number_literal, python_value_text, universe_regex};
use super::strings::{any_string_value, string_literal, string_value_literal, CANONICAL_CHAR};
use crate::automata::Expr;
use crate::automata::{Dfa, DfaConfig};
use super::context::Ctx;
use crate::error::Result;

/// A JSON Schema type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum JsonType {
    Null,
    Boolean,
    Object,
    Array,
    String,
    Integer,
    Number,
}

impl JsonType {
    pub(crate) fn from_name(name: &str) -> Option<JsonType> {
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
    pub(crate) fn kinds(self) -> u8 {
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
/// `integer` admits) and the rest.
pub(crate) const K_NULL: u8 = 1;
pub(crate) const K_BOOL: u8 = 2;
pub(crate) const K_OBJECT: u8 = 4;
pub(crate) const K_ARRAY: u8 = 8;
pub(crate) const K_STRING: u8 = 16;
pub(crate) const K_INTEGER: u8 = 32;
pub(crate) const K_FRACTION: u8 = 64;
pub(crate) const K_ALL: u8 = 127;

/// The kind of a JSON value.
pub(crate) fn value_kind(v: &Value) -> u8 {
    match v {
        Value::Null => K_NULL,
        Value::Bool(_) => K_BOOL,
        Value::Object(_) => K_OBJECT,
        Value::Array(_) => K_ARRAY,
        Value::String(_) => K_STRING,
        Value::Number(n) => {
            if NumberKey::of(n).is_some_and(|k| k.is_integral()) {
                K_INTEGER
            } else {
                K_FRACTION
            }
        }
    }
}

pub(crate) fn value_kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
    }
}

/// A number's value in a normal form, for exact comparison: sign, significant digits without
/// leading or trailing zeros, and the power of ten of the last digit (`12.5` is
/// `(false, "125", -1)`; zero is `(false, "", 0)`). [`NumberKey::of`] takes the value Python
/// holds (a double for a text with a fraction or an exponent), as `jsonschema` compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NumberKey {
    negative: bool,
    digits: String,
    exponent: i64,
}

impl NumberKey {
    /// The key of the value Python holds for `n`; `None` for a double that overflows.
    pub(crate) fn of(n: &Number) -> Option<NumberKey> {
        NumberKey::parse(&python_value_text(n)?)
    }

    /// Parses JSON number text (`-?int(.frac)?([eE][+-]?exp)?`).
    pub(crate) fn parse(text: &str) -> Option<NumberKey> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if mantissa.contains('.') && frac.is_empty() {
            return None;
        }
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let all: String = format!("{int}{frac}");
        let mut exponent = exp.checked_sub(frac.len() as i64)?;
        let trimmed_end = all.trim_end_matches('0');
        exponent = exponent.checked_add((all.len() - trimmed_end.len()) as i64)?;
        let digits = trimmed_end.trim_start_matches('0').to_string();
        if digits.is_empty() {
            return Some(NumberKey { negative: false, digits, exponent: 0 });
        }
        Some(NumberKey { negative, digits, exponent })
    }

    pub(crate) fn is_integral(&self) -> bool {
        self.exponent >= 0
    }
}

impl PartialOrd for NumberKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for NumberKey {
    fn cmp(&self, other: &Self) -> Ordering {
        let sign = |k: &NumberKey| if k.digits.is_empty() { 0 } else if k.negative { -1 } else { 1 };
        let (sa, sb) = (sign(self), sign(other));
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        // Same sign, both non-zero: compare magnitudes by order of magnitude, then digits.
        let mag = |k: &NumberKey| k.digits.len() as i64 + k.exponent;
        let by_magnitude = mag(self).cmp(&mag(other)).then_with(|| {
            let (a, b) = (self.digits.as_bytes(), other.digits.as_bytes());
            let n = a.len().max(b.len());
            (0..n)
                .map(|i| a.get(i).copied().unwrap_or(b'0').cmp(&b.get(i).copied().unwrap_or(b'0')))
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        });
        if sa < 0 { by_magnitude.reverse() } else { by_magnitude }
    }
}

/// Equality of JSON values as `jsonschema` decides `enum`/`const`: numbers by the value Python
/// holds (`1 == 1.0`, but `1e23 != 10**23`: the double is another integer), booleans never
/// equal to numbers, containers element by element.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => NumberKey::of(x) == NumberKey::of(y),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| json_equal(v, w)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => false,
    }
}

/// The texts of exactly one value: every spelling of its numbers and strings, member names in
/// canonical spelling and in the value's own key order, with `ws` between tokens.
pub(crate) fn literal(v: &Value, ws: &str) -> Result<Expr> {
    Ok(match v {
        Value::Null => Expr::literal("null"),
        Value::Bool(true) => Expr::literal("true"),
        Value::Bool(false) => Expr::literal("false"),
        Value::String(s) => string_value_literal(s),
        Value::Number(n) => number_literal(n)?,
        Value::Array(items) => {
            let mut parts = vec![Expr::regex(format!(r"\[{ws}"))];
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    parts.push(Expr::regex(format!("{ws},{ws}")));
                }
                parts.push(literal(item, ws)?);
            }
            parts.push(Expr::regex(format!(r"{ws}\]")));
            Expr::concat(parts)
        }
        Value::Object(members) => {
            let mut parts = vec![Expr::regex(format!(r"\{{{ws}"))];
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    parts.push(Expr::regex(format!("{ws},{ws}")));
                }
                parts.push(string_literal(key));
                parts.push(Expr::regex(format!("{ws}:{ws}")));
                parts.push(literal(value, ws)?);
            }
            parts.push(Expr::regex(format!(r"{ws}\}}")));
            Expr::concat(parts)
        }
    })
}

/// Regex of any canonical JSON string: how member names are written.
pub(crate) fn any_string() -> String {
    format!("\"(?:{CANONICAL_CHAR})*\"")
}

/// Regex of any JSON number (a superset of the numbers universe).
pub(crate) const ANY_NUMBER: &str = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";

/// Regex of any JSON value with at most `depth` levels of containers (0: scalars only), with
/// `ws` between tokens. The size grows as 4^depth: containers write the level below twice.
pub(crate) fn any_value(depth: usize, ws: &str) -> String {
    // Numbers from the universe of the numbers module, so an unconstrained value never holds a
    // number whose double Python rounds (see numbers/).
    let scalar = format!("(?:{}|{}|true|false|null)", any_string_value(), universe_regex());
    if depth == 0 {
        return scalar;
    }
    let inner = any_value(depth - 1, ws);
    let member = format!("{}{ws}:{ws}{inner}", any_string());
    let object = format!(r"\{{{ws}(?:{member}(?:{ws},{ws}{member})*{ws})?\}}");
    let array = format!(r"\[{ws}(?:{inner}(?:{ws},{ws}{inner})*{ws})?\]");
    format!("(?:{scalar}|{object}|{array})")
}

fn any_scalar_expr() -> Expr {
    Expr::regex(format!("(?:{}|{}|true|false|null)", any_string_value(), universe_regex()))
}

/// Any JSON value whose containers hold values of `inner` (any scalar, or an object or an
/// array of `inner`s), with `ws` between tokens. With `inner` a call of the rule this is the
/// body of, it is any JSON value, nested without a depth limit.
pub(crate) fn any_value_over(inner: Expr, ws: &str) -> Expr {
    let sep = || Expr::regex(format!("{ws},{ws}"));
    let member = Expr::concat(vec![Expr::regex(format!("{}{ws}:{ws}", any_string())), inner.clone()]);
    let seq = |m: Expr| Expr::optional(Expr::concat(vec![m.clone(), Expr::repeat(Expr::concat(vec![sep(), m]), 0, None)]));
    let object = Expr::concat(vec![Expr::regex(format!(r"\{{{ws}")), seq(member), Expr::regex(format!(r"{ws}\}}"))]);
    let array = Expr::concat(vec![Expr::regex(format!(r"\[{ws}")), seq(inner), Expr::regex(format!(r"{ws}\]"))]);
    Expr::union(vec![any_scalar_expr(), object, array])
}

/// Any JSON value with at most `depth` levels of containers, as a DFA leaf: the same language
/// as [`any_value`], built level by level (each level embeds the one below as a DFA, so the
/// text is never expanded 4^depth times) and kept per thread. An unconstrained value is the
/// most common leaf of real schemas; compiling its regex each time cost most of their compile
/// time.
pub(crate) fn any_value_expr(depth: usize, ws: &str, config: &DfaConfig) -> Expr {
    thread_local! {
        static CACHE: RefCell<HashMap<(usize, String), Rc<Dfa>>> = RefCell::new(HashMap::new());
    }
    if let Some(d) = CACHE.with(|c| c.borrow().get(&(depth, ws.to_string())).cloned()) {
        return Expr::Dfa(d);
    }
    let lang = if depth == 0 { any_scalar_expr() } else { any_value_over(any_value_expr(depth - 1, ws, config), ws) };
    // Built without the caller's deadline: the result is shared by every later compilation.
    let unbounded = DfaConfig { deadline: None, cancel: None, ..config.clone() };
    match lang.to_dfa(&unbounded) {
        Ok(Some(d)) => {
            let d = Rc::new(d);
            CACHE.with(|c| c.borrow_mut().insert((depth, ws.to_string()), d.clone()));
            Expr::Dfa(d)
        }
        _ => Expr::regex(any_value(depth, ws)),
    }
}

/// Regex of every text that starts like a value of `kind` would: a superset of that kind's
/// canonical texts, however deep (for over-approximations).
pub(crate) fn kind_superset(kind: JsonType) -> String {
    match kind {
        JsonType::Null => "null".into(),
        JsonType::Boolean => "true|false".into(),
        JsonType::Object => r"\{(?s:.)*\}".into(),
        JsonType::Array => r"\[(?s:.)*\]".into(),
        JsonType::String => any_string_value(),
        JsonType::Integer | JsonType::Number => ANY_NUMBER.into(),
    }
}

/// A non-negative integer keyword value (`2.0` and `2e1` count as integers); saturates at
/// `u64::MAX`, which no string reaches.
pub(crate) fn count(v: &Value, keyword: &str, ctx: &Ctx) -> Result<u64> {
    let bad = || ctx.invalid(format!("{keyword} must be a non-negative integer"));
    let Value::Number(n) = v else { return Err(bad()) };
    integer_value(n).ok_or_else(bad)
}

fn integer_value(n: &Number) -> Option<u64> {
    if let Some(u) = n.as_u64() {
        return Some(u);
    }
    let text = n.to_string();
    if let Some(magnitude) = text.strip_prefix('-') {
        // "-0" and "-0.0" are zero; any other negative is not a count.
        return magnitude.chars().all(|c| c == '0' || c == '.').then_some(0);
    }
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i64>().ok()?),
        None => (text.as_str(), 0),
    };
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int_part}{frac}");
    let point = int_part.len() as i64 + exponent; // digits before the decimal point
    let (whole, rest) = if point <= 0 {
        ("", digits.as_str())
    } else if point as usize >= digits.len() {
        (digits.as_str(), "")
    } else {
        digits.split_at(point as usize)
    };
    if rest.chars().any(|c| c != '0') {
        return None;
    }
    let zeros = (point.max(0) as usize).saturating_sub(digits.len());
    let whole = whole.trim_start_matches('0');
    if whole.is_empty() {
        return Some(0);
    }
    if whole.len() + zeros > 19 {
        return Some(u64::MAX);
    }
    let base: u64 = whole.parse().ok()?;
    Some(base.saturating_mul(10u64.saturating_pow(zeros as u32)))
}

/// Whether a value has one canonical text up to number spelling: no object in it has two or
/// more members (whose order could vary).
pub(crate) fn one_order(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.len() <= 1 && m.values().all(one_order),
        Value::Array(a) => a.iter().all(one_order),
        _ => true,
    }
}

/// The kinds a `type` keyword admits.
pub(crate) fn type_kinds(t: &Value, ctx: &Ctx) -> Result<u8> {
    let names: Vec<&Value> = match t {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let mut kinds = 0;
    for name in names {
        let ty = name
            .as_str()
            .and_then(JsonType::from_name)
            .ok_or_else(|| ctx.invalid(format!("unknown type {name}")))?;
        kinds |= ty.kinds();
    }
    Ok(kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> NumberKey {
        NumberKey::parse(s).unwrap()
    }

    #[test]
    fn number_keys_compare_by_value() {
        assert_eq!(key("1"), key("1.0"));
        assert_eq!(key("100"), key("1e2"));
        assert_eq!(key("0"), key("-0.0"));
        assert_eq!(key("0.5"), key("5e-1"));
        assert!(key("1.5") > key("1.25"));
        assert!(key("-1.5") < key("-1.25"));
        assert!(key("10") > key("9.99"));
        assert!(key("-10") < key("9"));
        assert!(key("0.001") < key("0.01"));
        assert!(key("1.0").is_integral() && key("1e3").is_integral() && !key("1.5").is_integral());
        assert!(NumberKey::parse("1.").is_none() && NumberKey::parse("abc").is_none());
    }

    #[test]
    fn json_equality_is_by_value() {
        use serde_json::json;
        assert!(json_equal(&json!(1), &serde_json::from_str::<Value>("1.0").unwrap()));
        assert!(!json_equal(&json!(1), &json!(true)));
        assert!(json_equal(&json!({"a": [1, "x"]}), &json!({"a": [1, "x"]})));
        assert!(!json_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn integer_values() {
        let n = |s: &str| integer_value(&serde_json::from_str::<Number>(s).unwrap());
        assert_eq!(n("3"), Some(3));
        assert_eq!(n("3.0"), Some(3));
        assert_eq!(n("3e2"), Some(300));
        assert_eq!(n("2.5e1"), Some(25));
        assert_eq!(n("2.55e1"), None);
        assert_eq!(n("-0"), Some(0));
        assert_eq!(n("-1"), None);
        assert_eq!(n("1e30"), Some(u64::MAX));
        assert_eq!(n("0.5"), None);
    }
}
