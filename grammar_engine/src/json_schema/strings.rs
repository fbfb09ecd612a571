//! String schemas: what `minLength`, `maxLength`, `pattern` and `format` say about a string,
//! compiled to the canonical JSON texts (quotes included) of the strings satisfying all of it.
//!
//! Patterns ([`super::search`]) and formats ([`super::formats`]) each give a language over
//! canonical string bodies; several of them (from `allOf`) are intersected. Length bounds count
//! code points of the decoded string. Alone they are a counted repetition of
//! [`CANONICAL_CHAR`]; next to a pattern or format they are applied by a product of the
//! language's DFA with a character counter, which counts a character at each byte that starts
//! one (not a UTF-8 continuation byte, not inside an escape). The product only creates the
//! (state, count) pairs that occur, so a bound the language already implies costs little.
//!
//! Counting costs states: up to one copy of the language's DFA per count. A bare long bound is
//! counted in chunk rules when the schema is compiled as rules (see `super::counted`). Otherwise,
//! when counting up to `maxLength` would exceed about `max_states` states, the upper bound is
//! lowered to the largest that fits (a sound restriction: only shorter strings are generated),
//! and [`string_expr_noting`] says to what, so the grammar's `restriction` can tell; a
//! `minLength` that does not fit is a typed `TooLarge` error.

use serde_json::{Map, Value};

use super::canonical;
use super::context::Ctx;
use super::values::count;
use super::formats;
use super::pattern::{self, PatternError};
use super::respell;
use super::search;
use crate::automata::Expr;
use crate::automata::{Dfa, DfaConfig};
use crate::util::StateId;
use crate::error::{GrammarError, Result};

pub(crate) use super::canonical::CANONICAL_CHAR;

/// DFA states a length bound costs per counted character when nothing else constrains the
/// string (a boundary state, UTF-8 continuation states and escape states), for refusing
/// bounds no DFA within the limits can count up to.
const STATES_PER_CHAR: u64 = 14;

/// What a (merged) schema says about a string. Several patterns/formats may come from allOf.
#[derive(Debug, Clone, Default)]
pub(crate) struct StringFacts {
    /// ECMA-262 patterns (search semantics), with location.
    pub patterns: Vec<(String, Ctx)>,
    /// Format names, with location.
    pub formats: Vec<(String, Ctx)>,
    /// Code points.
    pub min_length: u64,
    pub max_length: Option<u64>,
}

impl StringFacts {
    /// What decides the language of these facts, as text: everything but where the patterns
    /// and formats were written (equal keys, equal languages).
    pub(crate) fn key(&self) -> String {
        let patterns: Vec<&String> = self.patterns.iter().map(|(p, _)| p).collect();
        let formats: Vec<&String> = self.formats.iter().map(|(f, _)| f).collect();
        format!("{} {:?} {patterns:?} {formats:?}", self.min_length, self.max_length)
    }

    /// Reads `minLength`, `maxLength`, `pattern` and `format` from one schema object.
    pub(crate) fn from_keywords(map: &Map<String, Value>, ctx: &Ctx) -> Result<StringFacts> {
        let mut facts = StringFacts::default();
        if let Some(v) = map.get("minLength") {
            facts.min_length = count(v, "minLength", ctx)?;
        }
        if let Some(v) = map.get("maxLength") {
            facts.max_length = Some(count(v, "maxLength", ctx)?);
        }
        match map.get("pattern") {
            None => {}
            Some(Value::String(p)) => facts.patterns.push((p.clone(), ctx.clone())),
            Some(_) => return Err(ctx.invalid("pattern must be a string")),
        }
        match map.get("format") {
            None => {}
            Some(Value::String(f)) => facts.formats.push((f.clone(), ctx.clone())),
            Some(_) => return Err(ctx.invalid("format must be a string")),
        }
        Ok(facts)
    }

    /// Adds the facts of another schema that must hold too (`allOf`).
    pub(crate) fn merge(&mut self, other: StringFacts) {
        self.patterns.extend(other.patterns);
        self.formats.extend(other.formats);
        self.min_length = self.min_length.max(other.min_length);
        self.max_length = match (self.max_length, other.max_length) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The canonical JSON text of one string, as a literal Expr (quotes included): how object
/// member names are written.
pub(crate) fn string_literal(value: &str) -> Expr {
    Expr::literal(&format!("\"{}\"", canonical::spell(value)))
}

/// Every JSON text of one string value (quotes included): each character in each of its
/// spellings (see [`respell`]).
pub(crate) fn string_value_literal(value: &str) -> Expr {
    let body: String = value.chars().map(respell::char_regex).collect();
    Expr::regex(format!("\"{body}\""))
}

/// Every JSON text of any string value (quotes included).
pub(crate) fn any_string_value() -> String {
    format!("\"{}*\"", respell::ANY_CHAR)
}

/// The string bodies of `min..=max` code points, canonical or (`spelled`) in every spelling, as
/// a DFA leaf kept per thread. Length bounds are the most common string facts (`maxLength:
/// 1024` on every field of some schemas); compiling `c{0,1024}` from regex text each time,
/// through a Unicode class expanded into UTF-8 automata a thousand times, dominated those
/// schemas' compile time.
fn length_bounded(min: u64, max: Option<u64>, spelled: bool, config: &DfaConfig) -> Result<Expr> {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<(u64, Option<u64>, bool), std::rc::Rc<Dfa>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if let Some(d) = CACHE.with(|c| c.borrow().get(&(min, max, spelled)).cloned()) {
        return Ok(Expr::Dfa(d));
    }
    let upper = max.map_or(String::new(), |m| m.to_string());
    let lang = Expr::regex(format!("{CANONICAL_CHAR}{{{min},{upper}}}"));
    // Built without the caller's deadline: the result is shared by every later compilation.
    let unbounded = DfaConfig { deadline: None, cancel: None, ..config.clone() };
    let Some(d) = lang.to_dfa(&unbounded)? else { return Ok(Expr::Empty) };
    let d = if spelled {
        match respelled_dfa(d, &unbounded)? {
            Some(spelled) => spelled,
            None => return Ok(Expr::Empty),
        }
    } else {
        d
    };
    let d = std::rc::Rc::new(d);
    CACHE.with(|c| c.borrow_mut().insert((min, max, spelled), d.clone()));
    Ok(Expr::Dfa(d))
}

/// The canonical JSON texts (quotes included) of the strings satisfying every fact: the
/// language of object member names. An unsatisfiable combination is [`Expr::Empty`], not an
/// error.
pub(crate) fn string_expr(facts: &StringFacts, config: &DfaConfig) -> Result<Expr> {
    Ok(quoted(string_body(facts, false, config)?.0))
}

/// Every JSON text (quotes included) of the strings satisfying every fact: the language of
/// string values, whose characters may be escaped (see [`respell`]); and the bound `maxLength`
/// was lowered to when counting it did not fit (`None`: the exact language).
pub(crate) fn string_value_expr_noting(facts: &StringFacts, config: &DfaConfig) -> Result<(Expr, Option<u64>)> {
    let (body, low) = string_body(facts, true, config)?;
    Ok((quoted(body), low))
}

fn quoted(body: Expr) -> Expr {
    if body.is_empty() {
        return Expr::Empty;
    }
    Expr::concat(vec![Expr::literal("\""), body, Expr::literal("\"")])
}

/// The bodies (between the quotes) of the strings satisfying every fact, canonical or
/// (`spelled`) in every spelling, and the bound `maxLength` was lowered to.
fn string_body(facts: &StringFacts, spelled: bool, config: &DfaConfig) -> Result<(Expr, Option<u64>)> {
    let (min, max) = (facts.min_length, facts.max_length);
    if max.is_some_and(|max| max < min) {
        return Ok((Expr::Empty, None));
    }
    let mut parts = Vec::new();
    for (p, ctx) in &facts.patterns {
        let node = pattern::parse(p).map_err(|e| pattern_error(p, &e, ctx))?;
        parts.push(search::search_language(&node, ctx, config)?);
    }
    for (name, ctx) in &facts.formats {
        if let Some(e) = formats::format_expr(name, min, max, ctx, config)? {
            parts.push(e);
        }
    }
    let bounded = min > 0 || max.is_some();
    let mut low = None;
    let body = match parts.len() {
        0 if !bounded && spelled => return Ok((Expr::regex(format!("{}*", respell::ANY_CHAR)), None)),
        0 if !bounded => return Ok((Expr::regex(format!("{CANONICAL_CHAR}*")), None)),
        0 => {
            let used = fitting_max(min, max, STATES_PER_CHAR, config)?;
            return Ok((length_bounded(min, used, spelled, config)?, lowered(max, used)));
        }
        _ => {
            let mut parts = parts.into_iter();
            let mut body = parts.next().unwrap_or(Expr::Empty);
            for p in parts {
                body = body.and(&p, config)?;
            }
            if bounded && !body.is_empty() {
                let (bounded, used) = bound_length(&body, min, max, config)?;
                body = bounded;
                low = lowered(max, used);
            }
            body
        }
    };
    if !spelled || body.is_empty() {
        return Ok((body, low));
    }
    Ok(match respelled(&body, config)? {
        Some(spelled) => (spelled, low),
        None => (Expr::Empty, None),
    })
}

/// The string bodies of `canonical` in every spelling (see [`respell`]), or in their canonical
/// spelling alone where the respelled automaton would be too large; `None` for no string.
pub(crate) fn respelled(canonical: &Expr, config: &DfaConfig) -> Result<Option<Expr>> {
    let Some(dfa) = canonical.to_dfa(config)? else { return Ok(None) };
    Ok(respelled_dfa(dfa, config)?.map(|d| Expr::Dfa(std::rc::Rc::new(d))))
}

/// [`respelled`] of a built automaton of canonical string bodies.
fn respelled_dfa(canonical: Dfa, config: &DfaConfig) -> Result<Option<Dfa>> {
    match respell::respell(&canonical, config) {
        Ok(spelled) => Ok(spelled),
        // Every value keeps its canonical text: the same values, fewer spellings.
        Err(GrammarError::TooLarge { .. }) => Ok(Some(canonical)),
        Err(e) => Err(e),
    }
}

/// The bound used, when it is lower than the one asked for.
fn lowered(asked: Option<u64>, used: Option<u64>) -> Option<u64> {
    (used != asked).then_some(used).flatten()
}

fn pattern_error(pattern: &str, e: &PatternError, ctx: &Ctx) -> GrammarError {
    match e {
        PatternError::Invalid { .. } => ctx.invalid(format!("pattern {pattern:?} is not an ECMA-262 regex: {e}")),
        PatternError::Unsupported { .. } => ctx.unsupported("pattern", format!("pattern {pattern:?}: {e}")),
    }
}

/// The upper length bound actually used: `max` when counting to it fits in about
/// `config.max_states` states (at `per_char` states per counted character), else the largest
/// bound that does (a sound restriction: shorter strings only). Too large when even `min`
/// does not fit.
fn fitting_max(min: u64, max: Option<u64>, per_char: u64, config: &DfaConfig) -> Result<Option<u64>> {
    let fit = (config.max_states.saturating_sub(64) as u64 / per_char.max(1)).saturating_sub(1);
    if min > fit {
        return Err(GrammarError::TooLarge {
            what: "string length bound",
            limit: config.max_states,
            detail: format!("a DFA counting {min} characters needs about {} states", min.saturating_mul(per_char)),
        });
    }
    Ok(max.map(|m| m.min(fit)))
}

/// Where the character counter is inside one canonical character.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Between characters (or inside a UTF-8 sequence, whose continuation bytes count nothing).
    Between,
    /// After the `\` of an escape.
    Escape,
    /// Inside `\uXXXX`, with this many hex digits to go.
    Hex(u8),
}

impl Phase {
    /// The next phase, and whether `byte` starts a character.
    fn step(self, byte: u8) -> (Phase, bool) {
        match self {
            Phase::Between if byte == b'\\' => (Phase::Escape, true),
            Phase::Between => (Phase::Between, !(0x80..=0xBF).contains(&byte)),
            Phase::Escape if byte == b'u' => (Phase::Hex(4), false),
            Phase::Escape | Phase::Hex(1) => (Phase::Between, false),
            Phase::Hex(n) => (Phase::Hex(n - 1), false),
        }
    }
}

/// The bytes the counter tells apart: `\`, `u`, continuation bytes, the rest.
fn counter_class(byte: u8) -> u8 {
    match byte {
        b'\\' => 0,
        b'u' => 1,
        0x80..=0xBF => 2,
        _ => 3,
    }
}

/// The fewest and most characters (`None`: unbounded) of the canonical string bodies a DFA
/// accepts, over the graph of (state, phase) pairs whose edges count the characters they start.
fn length_range(dfa: &Dfa) -> (u64, Option<u64>) {
    let phases = [Phase::Between, Phase::Escape, Phase::Hex(4), Phase::Hex(3), Phase::Hex(2), Phase::Hex(1)];
    let index = |p: Phase| phases.iter().position(|&q| q == p).unwrap_or(0);
    let n = dfa.num_states() * phases.len();
    let node = |s: StateId, p: Phase| s.as_usize() * phases.len() + index(p);
    let mut edges: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
    let mut seen = vec![false; n];
    let mut stack = vec![(dfa.start(), Phase::Between)];
    seen[node(dfa.start(), Phase::Between)] = true;
    while let Some((s, p)) = stack.pop() {
        let from = node(s, p);
        dfa.for_each_transition(s, |byte, t| {
            let (q, starts) = p.step(byte);
            let to = node(t, q);
            edges[from].push((to, u64::from(starts)));
            if !seen[to] {
                seen[to] = true;
                stack.push((t, q));
            }
        });
    }
    let accepting = |v: usize| v.is_multiple_of(phases.len()) && dfa.is_accepting(StateId::from_index(v / phases.len()));
    // Shortest: 0-1 BFS.
    let mut dist = vec![u64::MAX; n];
    let mut deque = std::collections::VecDeque::from([node(dfa.start(), Phase::Between)]);
    dist[node(dfa.start(), Phase::Between)] = 0;
    while let Some(v) = deque.pop_front() {
        for &(w, c) in &edges[v] {
            if dist[v] + c < dist[w] {
                dist[w] = dist[v] + c;
                if c == 0 { deque.push_front(w) } else { deque.push_back(w) }
            }
        }
    }
    let shortest = (0..n).filter(|&v| accepting(v)).map(|v| dist[v]).min().unwrap_or(0);
    // Longest: over a topological order; any reachable cycle makes it unbounded.
    let mut indegree = vec![0usize; n];
    for list in &edges {
        for &(w, _) in list {
            indegree[w] += 1;
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&v| seen[v] && indegree[v] == 0).collect();
    let mut longest = vec![0u64; n];
    let mut done = 0;
    while done < order.len() {
        let v = order[done];
        done += 1;
        for &(w, c) in &edges[v] {
            longest[w] = longest[w].max(longest[v] + c);
            indegree[w] -= 1;
            if indegree[w] == 0 {
                order.push(w);
            }
        }
    }
    if done < seen.iter().filter(|&&b| b).count() {
        return (shortest, None);
    }
    (shortest, (0..n).filter(|&v| seen[v] && accepting(v)).map(|v| longest[v]).max())
}

/// The texts of `body` (canonical string bodies) with `min` to `max` characters.
fn bound_length(body: &Expr, min: u64, max: Option<u64>, config: &DfaConfig) -> Result<(Expr, Option<u64>)> {
    let Some(dfa) = body.to_dfa(config)? else { return Ok((Expr::Empty, max)) };
    let (shortest, longest) = length_range(&dfa);
    if shortest >= min && longest.is_some_and(|l| max.is_none_or(|m| l <= m)) {
        return Ok((body.clone(), max));
    }
    let max = fitting_max(min, max, dfa.num_states() as u64, config)?;
    // Product byte classes: pairs of (DFA class, counter class), with a representative byte.
    let mut classes = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut seen: std::collections::HashMap<(usize, u8), u8> = std::collections::HashMap::new();
    for byte in 0..=255u8 {
        let key = (dfa.class(byte), counter_class(byte));
        let next = reps.len() as u8;
        classes[byte as usize] = *seen.entry(key).or_insert_with(|| {
            reps.push(byte);
            next
        });
    }
    let cap = max.unwrap_or(min);
    let limit = config.max_states.saturating_mul(2).saturating_add(64);
    let mut ids: std::collections::HashMap<(StateId, u64, Phase), StateId> = std::collections::HashMap::new();
    let mut order = vec![(dfa.start(), 0u64, Phase::Between)];
    ids.insert(order[0], StateId::new(0));
    let mut trans: Vec<StateId> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let (s, n, phase) = order[i];
        i += 1;
        for &byte in &reps {
            let t = dfa.next(s, byte);
            let (next_phase, starts) = phase.step(byte);
            let count = n + u64::from(starts);
            if t.is_dead() || (max.is_some() && count > cap) {
                trans.push(StateId::DEAD);
                continue;
            }
            let key = (t, count.min(cap), next_phase);
            let id = match ids.get(&key) {
                Some(&id) => id,
                None => {
                    if order.len() >= limit {
                        return Err(GrammarError::TooLarge {
                            what: "string length bound",
                            limit: config.max_states,
                            detail: format!("more than {} states counting up to {cap} characters", order.len()),
                        });
                    }
                    let id = StateId::from_index(order.len());
                    ids.insert(key, id);
                    order.push(key);
                    id
                }
            };
            trans.push(id);
        }
    }
    let accepting: Vec<bool> =
        order.iter().map(|&(s, n, phase)| phase == Phase::Between && n >= min && dfa.is_accepting(s)).collect();
    match Dfa::from_table(classes, reps.len(), &trans, &accepting) {
        None => Ok((Expr::Empty, max)),
        Some(d) if d.num_states() > config.max_states => Err(GrammarError::TooLarge {
            what: "string length bound",
            limit: config.max_states,
            detail: format!("{} states", d.num_states()),
        }),
        Some(d) => Ok((Expr::Dfa(std::rc::Rc::new(d)), max)),
    }
}

#[cfg(test)]
mod tests;


/// The official JSON Schema Test Suite's string cases (draft 2020-12: `pattern`, `format`,
/// `minLength`, `maxLength`, the ECMA-262 regex and format files), run through
/// [`string_expr`]. Needs the suite: `JSON_SCHEMA_TEST_SUITE=<suite>/tests/draft2020-12 cargo
/// test --release string_suite -- --ignored --nocapture` (the `jsonschema` sdist ships it under
/// `json/tests/`). No instance the suite calls invalid may be accepted; valid ones refused are
/// counted (formats are assertions here, leap seconds and non-ASCII hostnames are left out).
#[cfg(test)]
mod suite {
    use super::*;

    #[test]
    #[ignore]
    fn string_suite() {
        let dir = std::env::var("JSON_SCHEMA_TEST_SUITE").expect("JSON_SCHEMA_TEST_SUITE: the suite's draft2020-12 folder");
        let mut files: Vec<String> = ["pattern.json", "format.json", "minLength.json", "maxLength.json", "optional/ecmascript-regex.json", "optional/non-bmp-regex.json"]
            .iter()
            .map(|f| format!("{dir}/{f}"))
            .collect();
        let mut formats: Vec<String> = std::fs::read_dir(format!("{dir}/optional/format"))
            .expect("optional/format folder")
            .map(|e| e.expect("entry").path().display().to_string())
            .collect();
        formats.sort();
        files.extend(formats);
        let config = DfaConfig::default();
        let (mut accepted_valid, mut refused_invalid, mut refused_valid, mut false_positives) = (0, 0, 0, Vec::new());
        for file in &files {
            let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(file).expect("read")).expect("json");
            for group in groups {
                let Some(schema) = group["schema"].as_object() else { continue };
                let string_only = schema.keys().all(|k| {
                    matches!(k.as_str(), "$schema" | "description" | "pattern" | "format" | "minLength" | "maxLength")
                        || (k == "type" && schema[k] == "string")
                });
                if !string_only || schema.keys().all(|k| matches!(k.as_str(), "$schema" | "description" | "type")) {
                    continue;
                }
                let facts = StringFacts::from_keywords(schema, &Ctx::root()).expect("facts");
                let dfa = string_expr(&facts, &config).expect("compiles").to_dfa(&config).expect("dfa");
                for test in group["tests"].as_array().expect("tests") {
                    let Some(data) = test["data"].as_str() else { continue };
                    let text = format!("\"{}\"", canonical::spell(data));
                    let accepted = dfa.as_ref().is_some_and(|d| {
                        let t = d.walk(d.start(), text.as_bytes());
                        !t.is_dead() && d.is_accepting(t)
                    });
                    match (test["valid"].as_bool() == Some(true), accepted) {
                        (true, true) => accepted_valid += 1,
                        (true, false) => refused_valid += 1,
                        (false, false) => refused_invalid += 1,
                        (false, true) => false_positives.push(format!("{file}: {} {data:?}", Value::Object(schema.clone()))),
                    }
                }
            }
        }
        eprintln!(
            "string suite: {accepted_valid} valid accepted, {refused_invalid} invalid refused, {refused_valid} valid refused, {} invalid accepted",
            false_positives.len()
        );
        assert!(accepted_valid + refused_invalid > 300, "too few cases found under {dir}");
        assert!(false_positives.is_empty(), "invalid instances accepted: {false_positives:#?}");
    }
}
