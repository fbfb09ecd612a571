//! Arrays: how many elements, and what each position holds.
//!
//! Each member of the conjunction says, per position, which schema an element there must
//! satisfy: its tuple prefix (`prefixItems`, or the array form of `items` before 2020-12), then
//! its rest schema (`items`, or `additionalItems` after an array-form `items`), then, where no
//! member evaluated the position, `unevaluatedItems`. Position `p`'s element satisfies every
//! member's schema for `p`; positions past every prefix share one rest language. A position
//! whose language is empty caps the length.
//!
//! `contains` (with `minContains`/`maxContains`) is met by construction: the first
//! `minContains` elements match the `contains` schema (under), and with a `maxContains` every
//! later element does not (the element language minus the over of `contains`). `uniqueItems`
//! with a finite, small element language generates the values in one fixed order, each at most
//! once (the first `minItems` of them always). Over the strings of at least some length (no
//! upper bound, no pattern), with at most one element required, the array is a rule whose
//! elements are compared while the text is read (see `crate::pushdown`'s `distinct`), which is
//! exact. Over another infinite element language it allows at most one element, and asking for
//! two or more is an error. All three are sound restrictions: they keep a subset of the valid
//! arrays.

use std::rc::Rc;

use serde_json::Value;

use super::objects::subsequence;
use super::strings::{string_value_expr_noting, StringFacts};
use super::values::{json_equal, kind_superset, literal, JsonType};
use super::walk::{count_keyword, Compiler, Conj, Item, MAX_COUNT};
use crate::automata::Expr;
use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::pushdown::Memory;

/// Most distinct values `uniqueItems` enumerates from a finite element language.
const MAX_UNIQUE_VALUES: usize = 24;

/// Most DFA states of an element language `uniqueItems` tries to list: [`Dfa::strings`] lists at
/// most 4 × [`MAX_UNIQUE_VALUES`] texts, whose automaton is about as large as their bytes.
/// Past it the language is not listed, and is not determinized in full to find that out (an
/// array of unique objects would otherwise build the objects' whole automaton: 2.4 s for one
/// SARIF schema).
const MAX_LISTED_STATES: usize = 8_192;

/// Most elements an array of distinct strings checked at run time may be bounded to (each
/// bound position is a copy of the element's call in the array's automaton).
const MAX_DISTINCT_BOUND: u64 = 64;

/// The restriction taken where distinct elements cannot be listed.
const UNIQUE_ONE: &str = "uniqueItems arrays whose elements cannot be listed hold at most one element";

/// Takes the restriction to one element where distinct elements cannot be listed: a note, or
/// the error when restrictions are off.
pub(super) fn one_unique(c: &mut Compiler<'_>, ctx: &super::context::Ctx) -> Result<()> {
    if !c.opts.allow_restriction {
        return Err(ctx.unsupported("uniqueItems", format!("{UNIQUE_ONE} (allow_restriction is off)")));
    }
    c.note(UNIQUE_ONE);
    Ok(())
}

/// JSON texts written one way per value: strings escape only what must be escaped (`"`, `\\`,
/// the controls), as the canonical spelling does, and numbers have no exponent and no trailing
/// zero in their fraction (a number is followed by what may follow a value).
const ONE_TEXT_PER_VALUE: &str = concat!(
    r#"(?:"(?:[^"\\]|\\["\\bfnrt]|\\u00[01][0-9a-f])*""#,
    r#"|[^"0-9\-]"#,
    r#"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?[,\]} \t\n\r])*"#,
    r#"(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?)?"#
);

/// What one member says about positions.
struct Positions<'a> {
    prefix: Vec<Item<'a>>,
    /// The schema for positions past the prefix (None: any).
    rest: Option<Item<'a>>,
    unevaluated: Option<Item<'a>>,
}

pub(crate) fn array<'a>(c: &mut Compiler<'a>, conj: &Conj<'a>) -> Result<Expr> {
    let mut members: Vec<Positions<'a>> = Vec::new();
    let (mut lo, mut hi) = (0u64, None::<u64>);
    let mut unique = false;
    let mut contains: Vec<(Item<'a>, u64, Option<u64>)> = Vec::new();
    for (m, item) in conj.maps() {
        let mut pos = Positions { prefix: Vec::new(), rest: None, unevaluated: None };
        let legacy_tuple = matches!(m.get("items"), Some(Value::Array(_)));
        if let Some(p) = m.get("prefixItems") {
            let list = p.as_array().ok_or_else(|| item.ctx.invalid("prefixItems must be an array"))?;
            for (i, s) in list.iter().enumerate() {
                pos.prefix.push(item.child(s, &format!("prefixItems/{i}"), &c.resolver)?);
            }
        }
        match m.get("items") {
            Some(Value::Array(list)) => {
                if pos.prefix.is_empty() {
                    for (i, s) in list.iter().enumerate() {
                        pos.prefix.push(item.child(s, &format!("items/{i}"), &c.resolver)?);
                    }
                }
            }
            Some(s) => pos.rest = Some(item.child(s, "items", &c.resolver)?),
            None => {}
        }
        if legacy_tuple {
            if let Some(s) = m.get("additionalItems") {
                pos.rest = Some(item.child(s, "additionalItems", &c.resolver)?);
            }
        }
        if let Some(s) = m.get("unevaluatedItems") {
            pos.unevaluated = Some(item.child(s, "unevaluatedItems", &c.resolver)?);
        }
        if let Some(n) = count_keyword(m, "minItems", &item.ctx)? {
            lo = lo.max(n);
        }
        if let Some(n) = count_keyword(m, "maxItems", &item.ctx)? {
            hi = Some(hi.map_or(n, |x| x.min(n)));
        }
        match m.get("uniqueItems") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => unique = true,
            Some(_) => return Err(item.ctx.invalid("uniqueItems must be a boolean")),
        }
        if let Some(s) = m.get("contains") {
            let min = count_keyword(m, "minContains", &item.ctx)?.unwrap_or(1);
            let max = count_keyword(m, "maxContains", &item.ctx)?;
            contains.push((item.child(s, "contains", &c.resolver)?, min, max));
        }
        members.push(pos);
    }
    let ws = c.ws.clone();
    let ctx = conj.items.first().map(|i| i.ctx.clone()).unwrap_or_else(super::context::Ctx::root);
    if contains.len() > 1 && contains.iter().any(|(_, _, max)| max.is_some()) {
        return Err(ctx.unsupported("maxContains", "several contains schemas with maxContains are not supported"));
    }
    for (_, min, max) in &contains {
        if max.is_some_and(|m| m < *min) {
            return Ok(Expr::Empty);
        }
    }
    let needed: u64 = contains.iter().map(|(_, min, _)| *min).sum();
    lo = lo.max(needed);
    hi = c.cap(hi, lo);
    if c.pruning() && hi.is_none_or(|h| h > lo) {
        // Past the prune depth an array keeps only the elements it must have.
        c.note_pruned();
        hi = Some(lo);
    }
    if hi.is_some_and(|h| h < lo) {
        return Ok(Expr::Empty);
    }
    if lo > MAX_COUNT || hi.is_some_and(|h| h > MAX_COUNT && lo > 0) {
        return Err(ctx.unsupported("minItems", format!("at most {MAX_COUNT} required elements are supported")));
    }

    // The language at each position: prefixes, then the shared rest.
    let width = members.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
    let width = width.max(needed as usize);
    let mut at: Vec<Expr> = Vec::new();
    for p in 0..width {
        if hi.is_some_and(|h| p as u64 >= h) {
            break;
        }
        at.push(c.inside(|c| position(c, &members, Some(p)))?);
    }
    let mut rest = c.inside(|c| position(c, &members, None))?;

    // contains: the first elements match, and with maxContains the others do not.
    let mut next = 0usize;
    for (schema, min, max) in &contains {
        let want = c.inside(|c| c.compile_one(schema.clone()))?;
        let want = if *min > 0 { c.regular(&want)? } else { want };
        let want = if *min > 1 { want.built(c.config)? } else { want };
        for _ in 0..*min {
            if next >= at.len() {
                break;
            }
            at[next] = c.regular(&at[next])?.and(&want, c.config)?;
            next += 1;
        }
        if max.is_some() {
            // Built once: subtracted from every later element and the rest.
            let over = c.inside(|c| c.over(Conj::of(vec![schema.clone()])))?.built(c.config)?;
            for e in at.iter_mut().skip(next) {
                *e = c.regular(e)?.minus(&over, c.config)?;
            }
            rest = c.regular(&rest)?.minus(&over, c.config)?;
        }
    }

    // An empty position caps the length.
    if let Some(p) = at.iter().position(Expr::is_empty) {
        hi = Some(hi.map_or(p as u64, |h| h.min(p as u64)));
        at.truncate(p);
    }
    if rest.is_empty() {
        hi = Some(hi.map_or(at.len() as u64, |h| h.min(at.len() as u64)));
    }
    if hi.is_some_and(|h| h < lo) {
        return Ok(Expr::Empty);
    }

    if unique && hi.is_none_or(|h| h > 1) {
        return unique_array(c, at, rest, lo, hi, &ctx);
    }
    // A long run of elements is counted in chunk rules, keyed by the element language.
    let key = format!("an element {:?}", rest.identity());
    let mut repeat = |unit: Expr, min: u64, max: Option<u64>| -> Expr {
        if let Some(e) = max.and_then(|max| c.chunked(&key, &unit, min, max, true).or_else(|| c.called_each(&key, &unit, min, max))) {
            return e;
        }
        plain(unit, min, max)
    };
    Ok(wrap(elements(at, rest, lo, hi, &ws, &mut repeat), &ws))
}

/// `unit{min,max}` as one repetition.
fn plain(unit: Expr, min: u64, max: Option<u64>) -> Expr {
    Expr::repeat(unit, clamp(min), max.map(clamp))
}

fn clamp(n: u64) -> u32 {
    n.min(u64::from(u32::MAX)) as u32
}

/// A language holding every canonical array text valid under the conjunction (an
/// over-language, see `walk`): any array; when over-languages are precise, arrays whose
/// elements are in the over-language of the `items` schemas that apply to every position (a
/// member with a prefix or the tuple form constrains no such position), at least one when
/// `minItems` asks for it.
pub(crate) fn over<'a>(c: &mut Compiler<'a>, conj: &Conj<'a>) -> Result<Expr> {
    if !c.precise_over {
        return Ok(Expr::regex(kind_superset(JsonType::Array)));
    }
    let mut items = Vec::new();
    let mut lo = 0;
    for (m, item) in conj.maps() {
        if let Some(s @ (Value::Object(_) | Value::Bool(_))) = m.get("items") {
            if !m.contains_key("prefixItems") {
                items.push(item.child(s, "items", &c.resolver)?);
            }
        }
        lo = lo.max(count_keyword(m, "minItems", &item.ctx)?.unwrap_or(0));
    }
    if items.is_empty() {
        return Ok(Expr::regex(kind_superset(JsonType::Array)));
    }
    // One level deep: the elements' own over-languages are the plain ones.
    c.precise_over = false;
    let element = c.over(Conj::of(items));
    c.precise_over = true;
    let element = element?;
    let ws = c.ws.clone();
    let more = Expr::repeat(Expr::concat(vec![Expr::regex(format!("{ws},{ws}")), element.clone()]), 0, None);
    let some = Expr::concat(vec![element, more]);
    let inner = if lo == 0 { Expr::optional(some) } else { some };
    Ok(wrap(inner, &ws))
}

/// Every member's schema for position `p` (None: a position past every prefix).
fn position<'a>(c: &mut Compiler<'a>, members: &[Positions<'a>], p: Option<usize>) -> Result<Expr> {
    let mut items = Vec::new();
    let mut evaluated = false;
    for m in members {
        match p {
            Some(i) if i < m.prefix.len() => {
                items.push(m.prefix[i].clone());
                evaluated = true;
            }
            _ => {
                if let Some(r) = &m.rest {
                    items.push(r.clone());
                    evaluated = true;
                }
            }
        }
    }
    if !evaluated {
        items.extend(members.iter().filter_map(|m| m.unevaluated.clone()));
    }
    if items.is_empty() {
        let depth = c.opts.max_any_depth.saturating_sub(1);
        return Ok(c.any(depth));
    }
    c.compile(Conj::of(items))
}

fn wrap(inner: Expr, ws: &str) -> Expr {
    Expr::concat(vec![Expr::regex(format!(r"\[{ws}")), inner, Expr::regex(format!(r"{ws}\]"))])
}

/// The elements between the brackets: position languages `at`, then `rest`, `lo..=hi` of them.
/// `repeat(unit, min, max)` is `unit{min,max}`.
fn elements(at: Vec<Expr>, rest: Expr, lo: u64, hi: Option<u64>, ws: &str, repeat: &mut dyn FnMut(Expr, u64, Option<u64>) -> Expr) -> Expr {
    let sep = || Expr::regex(format!("{ws},{ws}"));
    let total_hi = hi;
    // Optional tail after position i (the array may stop before any position >= lo).
    let mut rest_after = |count: u64| -> Expr {
        // Elements from the rest language, after `count` elements are there.
        let min = lo.saturating_sub(count);
        let max = total_hi.map(|h| h.saturating_sub(count));
        repeat(Expr::concat(vec![sep(), rest.clone()]), min, max)
    };
    let n = at.len();
    // Build from the innermost position outwards: tail(i) = what may follow element i-1.
    let mut tail = rest_after(n as u64);
    for i in (0..n).rev() {
        let elem = Expr::concat(vec![if i == 0 { Expr::epsilon() } else { sep() }, at[i].clone(), tail]);
        tail = if (i as u64) < lo { elem } else { Expr::optional(elem) };
    }
    if n == 0 {
        // No positional element: the first element of the rest has no separator.
        if total_hi == Some(0) {
            return Expr::epsilon();
        }
        let first = Expr::concat(vec![rest.clone(), rest_after(1)]);
        return if lo == 0 { Expr::optional(first) } else { first };
    }
    tail
}

/// `uniqueItems`: distinct values, each at most once, in a fixed order.
fn unique_array<'a>(c: &mut Compiler<'a>, at: Vec<Expr>, rest: Expr, lo: u64, hi: Option<u64>, ctx: &super::context::Ctx) -> Result<Expr> {
    let ws = c.ws.clone();
    if !at.is_empty() {
        if lo <= 1 {
            // At most one element in all (the first position's): two tuple positions could
            // hold equal values.
            one_unique(c, ctx)?;
            let one = elements(at.into_iter().take(1).collect(), rest, lo, Some(0), &ws, &mut plain);
            return Ok(wrap(one, &ws));
        }
        return Err(ctx.unsupported("uniqueItems", "uniqueItems together with a tuple (prefixItems) is not supported"));
    }
    // Values are listed from one text each (a string or a number value has many spellings,
    // which would make a short enum look too large to list); each is then written in every
    // spelling the element language has for it.
    let element = listable(c, &rest, "an element language")?.flatten().map(|d| Expr::Dfa(Rc::new(d)));
    let values = match &element {
        Some(e) => match e.and(&Expr::regex(ONE_TEXT_PER_VALUE), c.config)? {
            Expr::Dfa(d) => finite_values(&d),
            _ => None,
        },
        None => None,
    };
    let (Some(values), Some(element)) = (values, element.clone()) else {
        if let Some(checked) = distinct_strings(c, element.as_ref(), lo, hi, ctx)? {
            return Ok(checked);
        }
        if lo <= 1 {
            one_unique(c, ctx)?;
            return Ok(wrap(elements(Vec::new(), rest, lo, Some(1), &ws, &mut plain), &ws));
        }
        return Err(ctx.unsupported(
            "uniqueItems",
            format!("minItems {lo} with uniqueItems needs that many distinct elements, and the element language is infinite or too large to list"),
        ));
    };
    let max = hi.map_or(values.len() as u64, |h| h.min(values.len() as u64));
    if lo > max {
        return Ok(Expr::Empty);
    }
    // Distinct values in list order, each at most once: the first `lo` of the first `max`
    // values always, then any ordered selection of the others (at most `max` in all).
    // A value's literal holds every text equal to it, some of which the element language may
    // refuse (`1.0` for a draft 4 integer): keep the ones it accepts, and the listed text
    // itself (an object's literal writes its members in another order).
    let mut lits: Vec<Expr> = Vec::new();
    for (v, text) in &values[..max as usize] {
        let listed = Expr::literal(&String::from_utf8_lossy(text));
        lits.push(Expr::union(vec![literal(v, &ws)?.and(&element, c.config)?, listed]));
    }
    let (required, optional) = lits.split_at(lo as usize);
    let sep = || Expr::regex(format!("{ws},{ws}"));
    let mut parts = Vec::new();
    for (i, v) in required.iter().enumerate() {
        if i > 0 {
            parts.push(sep());
        }
        parts.push(v.clone());
    }
    if !optional.is_empty() {
        let chosen = subsequence(optional, &ws);
        parts.push(if required.is_empty() {
            Expr::optional(chosen)
        } else {
            Expr::optional(Expr::concat(vec![sep(), chosen]))
        });
    }
    Ok(wrap(Expr::concat(parts), &ws))
}

/// An array of distinct strings whose values are compared at run time: a rule that keeps the
/// set of elements read (see `crate::pushdown`'s `distinct`), when rules are on, at most one
/// element is required, and `element` (the element language's automaton) is every string of at
/// least some length: one more character then always makes a new value, so no text of the
/// array is a dead end and the fewest bytes to its end stay easy to find.
fn distinct_strings(c: &mut Compiler<'_>, element: Option<&Expr>, lo: u64, hi: Option<u64>, ctx: &super::context::Ctx) -> Result<Option<Expr>> {
    let Some(Expr::Dfa(d)) = element else { return Ok(None) };
    if lo > 1 || hi.is_some_and(|h| h > MAX_DISTINCT_BOUND) || c.rules.is_none() {
        return Ok(None);
    }
    let Some(shortest) = shortest_len(d) else { return Ok(None) };
    // The shortest string of `n` characters is `n` ASCII bytes in quotes.
    let facts = StringFacts { min_length: shortest.saturating_sub(2) as u64, ..StringFacts::default() };
    let (strings, lowered) = string_value_expr_noting(&facts, c.config)?;
    if lowered.is_some() || !Expr::Dfa(d.clone()).minus(&strings, c.config)?.is_empty() || !strings.minus(&Expr::Dfa(d.clone()), c.config)?.is_empty() {
        return Ok(None);
    }
    let ws = c.ws.clone();
    let Some(rules) = c.rules.as_mut() else { return Ok(None) };
    let each = rules.declare(&format!("{} (an element)", ctx.path));
    rules.define(each, Expr::Dfa(d.clone()));
    rules.remember(each, Memory::Element);
    let array = rules.declare(&ctx.path);
    rules.define(array, wrap(elements(Vec::new(), Expr::Call(each), lo, hi, &ws, &mut plain), &ws));
    rules.remember(array, Memory::Distinct);
    let one = wrap(elements(Vec::new(), Expr::Dfa(d.clone()), lo, Some(1), &ws, &mut plain), &ws);
    c.distinct_forms.insert(array, (one, ctx.clone()));
    Ok(Some(Expr::Call(array)))
}

/// The length of the shortest string of `d` (`None`: it has none).
fn shortest_len(d: &Dfa) -> Option<usize> {
    let mut seen = vec![false; d.num_states()];
    let mut layer = vec![d.start()];
    seen[d.start().as_usize()] = true;
    for len in 0.. {
        if layer.is_empty() {
            return None;
        }
        if layer.iter().any(|&s| d.is_accepting(s)) {
            return Some(len);
        }
        let mut next = Vec::new();
        for &s in &layer {
            for &t in d.row(s).iter() {
                if !t.is_dead() && !seen[t.as_usize()] {
                    seen[t.as_usize()] = true;
                    next.push(t);
                }
            }
        }
        layer = next;
    }
    None
}

/// `e`'s automaton when it is small enough to list its strings: `None` past
/// [`MAX_LISTED_STATES`] states (found without determinizing it in full), unless it was the
/// compile time that ran out (an error); `Some(None)` for the empty language.
pub(super) fn listable(c: &Compiler<'_>, e: &Expr, what: &str) -> Result<Option<Option<Dfa>>> {
    let probe = DfaConfig { max_states: MAX_LISTED_STATES, ..c.config.clone() };
    match e.to_dfa(&probe) {
        Ok(d) => Ok(Some(d)),
        Err(GrammarError::TooLarge { .. }) => {
            c.config.check_deadline(what)?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The distinct JSON values of a finite language, one per value with its first text (`None`: infinite or more
/// than [`MAX_UNIQUE_VALUES`]).
fn finite_values(d: &Dfa) -> Option<Vec<(Value, Vec<u8>)>> {
    let texts = d.strings(4 * MAX_UNIQUE_VALUES)?;
    let mut values: Vec<(Value, Vec<u8>)> = Vec::new();
    for t in texts {
        let v: Value = serde_json::from_slice(&t).ok()?;
        if !values.iter().any(|(w, _)| json_equal(w, &v)) {
            values.push((v, t));
        }
        if values.len() > MAX_UNIQUE_VALUES {
            return None;
        }
    }
    Some(values)
}
