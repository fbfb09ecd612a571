//! The leaves of the walk: number and string languages, built once per what decides them, and
//! long counts split in chunk rules.

use serde_json::{Map, Value};

use super::super::context::Dialect;
use super::super::counted::{self, Chunks};
use super::super::formats;
use super::super::numbers::{number_expr, number_superset, NumberFacts};
use super::super::policy::Reading;
use super::super::canonical::CANONICAL_CHAR;
use super::super::pattern;
use super::super::respell;
use super::super::search;
use super::super::strings::{respelled, string_value_expr_noting, StringFacts};
use super::{Compiler, Conj, LENIENT_MAX_LENGTH};
use crate::automata::{DfaConfig, Expr};
use crate::error::{GrammarError, Result};

/// The restrictions a walk took on its own, whatever the ladder's step: a `maxLength` too long
/// to count, lowered to `lowered`, and `notes` in words.
#[derive(Debug, Clone, Default)]
pub(crate) struct Taken {
    pub lowered: Option<u64>,
    pub notes: Vec<String>,
}

impl<'a> Compiler<'a> {
    /// `unit{min,max}` as calls of chunk rules (see `counted`) when rules are on and the
    /// repetition is long; `None` otherwise. `key` names the unit's language: units of equal
    /// keys share their chunk rules. With `call_unit` (an array's elements), a unit large
    /// enough that a chunk of its copies would be large is called as a rule of its own in the
    /// chunks, so a chunk stays a DFA of about `CHUNK` states; a string's characters stay
    /// inline, since a call per character would cost most tokens a call and a return.
    pub(in crate::json_schema) fn chunked(&mut self, key: &str, unit: &Expr, min: u64, max: u64, call_unit: bool) -> Option<Expr> {
        if !counted::is_long(unit, min, max) {
            return None;
        }
        let unit = if call_unit && counted::is_large(unit, counted::CHUNK) { self.unit_rule(key, unit)? } else { unit.clone() };
        let builder = self.rules.as_mut()?;
        let chunks = match self.chunks.get(key) {
            Some(c) => c.clone(),
            None => {
                let (exactly, fewer) = counted::chunk_bodies(&unit);
                let e = builder.declare(&format!("{key}, a chunk"));
                builder.define(e, exactly);
                builder.always_call(e);
                let f = builder.declare(&format!("{key}, less than a chunk"));
                builder.define(f, fewer);
                builder.always_call(f);
                let c = Chunks { exactly: Expr::Call(e), fewer: Expr::Call(f) };
                self.chunks.insert(key.to_string(), c.clone());
                c
            }
        };
        Some(counted::counted(&unit, &chunks, min, max))
    }

    /// `unit{min,max}` with the unit called as a rule of its own once per count, when rules are
    /// on and the copies of the unit would be large (a count too short for chunks, of a large
    /// array element); `None` otherwise. Units of equal keys share the rule.
    pub(in crate::json_schema) fn called_each(&mut self, key: &str, unit: &Expr, min: u64, max: u64) -> Option<Expr> {
        if !counted::is_large(unit, max) {
            return None;
        }
        let call = self.unit_rule(key, unit)?;
        Some(Expr::repeat(call, counted::count(min), Some(counted::count(max))))
    }

    /// A call of a rule whose body is `unit` (a call stays itself), when rules are on; units of
    /// equal keys share the rule.
    fn unit_rule(&mut self, key: &str, unit: &Expr) -> Option<Expr> {
        if matches!(unit, Expr::Call(_)) {
            return Some(unit.clone());
        }
        let builder = self.rules.as_mut()?;
        Some(match self.unit_rules.get(key) {
            Some(c) => c.clone(),
            None => {
                let r = builder.declare(key);
                builder.define(r, unit.clone());
                builder.always_call(r);
                self.unit_rules.insert(key.to_string(), Expr::Call(r));
                Expr::Call(r)
            }
        })
    }

    /// The numbers of a conjunction. Where drafts disagree (is `1.0` an integer?) under reads
    /// as the strictest draft and over as the loosest, so both hold under every reading; over
    /// drops what the numbers module can only approximate from below (float `multipleOf`).
    pub(super) fn number(&mut self, conj: &Conj<'a>, integer: bool, over: bool) -> Result<Expr> {
        let dialect = if over { self.reading.loosest() } else { self.reading.strictest() };
        let mut facts = NumberFacts { integer, ..NumberFacts::default() };
        for (m, item) in conj.maps() {
            facts.merge(NumberFacts::from_keywords(m, self.keyword_dialect(m), &item.ctx)?);
        }
        let key = format!("number {over} {dialect:?} {}", facts.key());
        self.leaf(key, |config| if over { number_superset(&facts, dialect, config) } else { number_expr(&facts, dialect, config) })
    }

    /// The language `build` makes, or the one it made before under the same key.
    pub(super) fn leaf(&mut self, key: String, build: impl FnOnce(&DfaConfig) -> Result<Expr>) -> Result<Expr> {
        if let Some(e) = self.leaves.get(&key) {
            return Ok(e.clone());
        }
        let e = build(self.config)?;
        self.leaves.insert(key, e.clone());
        Ok(e)
    }

    /// The dialect whose form of the numeric keywords a schema object uses: its declared one,
    /// else draft 4 when `exclusiveMinimum`/`exclusiveMaximum` is a boolean (the only draft
    /// where it is), else 2020-12.
    pub(super) fn keyword_dialect(&self, m: &Map<String, Value>) -> Dialect {
        match self.reading {
            Reading::Draft(d) => d,
            Reading::Since(_) if ["exclusiveMinimum", "exclusiveMaximum"].iter().any(|k| m.get(*k).is_some_and(Value::is_boolean)) => {
                Dialect::Draft4
            }
            Reading::Since(_) => Dialect::Draft2020,
        }
    }

    /// The strings of a conjunction; `lenient` (for over) replaces formats by their
    /// over-patterns or drops them, and drops patterns if they cannot be compiled: a superset
    /// either way.
    pub(super) fn string(&mut self, conj: &Conj<'a>, lenient: bool) -> Result<Expr> {
        let mut facts = StringFacts::default();
        for (m, item) in conj.maps() {
            facts.merge(StringFacts::from_keywords(m, &item.ctx)?);
        }
        if facts.max_length.is_some_and(|max| max < facts.min_length) {
            return Ok(Expr::Empty);
        }
        facts.max_length = self.cap(facts.max_length, facts.min_length);
        if !lenient && facts.patterns.is_empty() && facts.formats.is_empty() {
            if let Some(max) = facts.max_length {
                let key = format!("long string {} {max}", facts.min_length);
                if let Some(e) = self.leaves.get(&key) {
                    return Ok(e.clone());
                }
                let unit = Expr::regex(respell::ANY_CHAR);
                if let Some(body) = self.chunked("a string's character", &unit, facts.min_length, max, false) {
                    let e = Expr::concat(vec![Expr::literal("\""), body, Expr::literal("\"")]);
                    self.leaves.insert(key, e.clone());
                    return Ok(e);
                }
            }
        }
        if !lenient && facts.patterns.len() == 1 && facts.formats.is_empty() {
            if let Some(max) = facts.max_length {
                if let Some(e) = self.long_pattern_string(&facts, max)? {
                    return Ok(e);
                }
            }
        }
        if lenient {
            // A format stays only as a superset of what every reading's checker accepts.
            let oldest = self.reading.strictest();
            for (name, ctx) in std::mem::take(&mut facts.formats) {
                if let Some(p) = formats::over_pattern(&name, oldest) {
                    facts.patterns.push((p, ctx));
                }
            }
            // A superset: a bound too long to count is dropped.
            if facts.max_length.is_some_and(|m| m > LENIENT_MAX_LENGTH) {
                facts.max_length = None;
            }
        }
        let key = format!("string {lenient} {}", facts.key());
        if let Some(e) = self.leaves.get(&key).cloned() {
            if let Some(&to) = self.lowered_leaves.get(&key) {
                self.note_lowered(to);
            }
            return Ok(e);
        }
        let (e, low) = match string_value_expr_noting(&facts, self.config) {
            // An over-approximation may not lower a bound (that is a subset): it drops it.
            Ok((_, Some(_))) if lenient => {
                facts.max_length = None;
                string_value_expr_noting(&facts, self.config)?
            }
            Err(_) if lenient => {
                facts.patterns.clear();
                string_value_expr_noting(&facts, self.config)?
            }
            other => other?,
        };
        if let Some(to) = low {
            self.note_lowered(to);
            self.lowered_leaves.insert(key.clone(), to);
        }
        self.leaves.insert(key, e.clone());
        Ok(e)
    }

    /// The strings of one pattern that is a head, a run of one class and a tail (see
    /// `search::Run`) under a long `maxLength`: an alternative per head and tail length, each
    /// with its run counted in chunk rules. `None` when the pattern has another form, or its
    /// heads and tails have too many lengths, or nothing is long enough for chunks.
    fn long_pattern_string(&mut self, facts: &StringFacts, max: u64) -> Result<Option<Expr>> {
        /// Most (head length, tail length) pairs taken apart.
        const MAX_PAIRS: u64 = 32;
        if self.rules.is_none() {
            return Ok(None);
        }
        let key = format!("long pattern string {}", facts.key());
        if let Some(e) = self.leaves.get(&key) {
            return Ok(Some(e.clone()));
        }
        let (p, ctx) = &facts.patterns[0];
        let Some(form) = pattern::parse(p).ok().and_then(|node| search::run_of(&node, ctx)) else {
            return Ok(None);
        };
        let ((h0, h1), (t0, t1)) = (form.head_lengths, form.tail_lengths);
        if h0 + t0 > max || (h1 - h0 + 1).saturating_mul(t1 - t0 + 1) > MAX_PAIRS {
            return Ok(None);
        }
        let run = |fixed: u64| {
            let lo = form.min.max(facts.min_length.saturating_sub(fixed));
            let hi = form.max.map_or(max - fixed, |m| m.min(max - fixed));
            (lo, hi)
        };
        let Some(unit) = respelled(&Expr::regex(form.char.clone()), self.config)? else { return Ok(None) };
        let (lo, hi) = run(h0 + t0);
        if !counted::is_long(&unit, lo, hi) {
            return Ok(None);
        }
        let config = self.config;
        let of_length = |regex: &str, length: u64| {
            let exactly = Expr::regex(format!("(?:{CANONICAL_CHAR}){{{length}}}"));
            respelled(&Expr::regex(regex.to_string()).and(&exactly, config)?, config)
        };
        let chunk_key = format!("a string's character in {}", form.char);
        let mut alternatives = Vec::new();
        for h in h0..=h1 {
            let Some(head) = of_length(&form.head, h)? else { continue };
            for t in t0..=t1 {
                let (lo, hi) = run(h + t);
                if h + t > max || lo > hi {
                    continue;
                }
                let Some(tail) = of_length(&form.tail, t)? else { continue };
                let body = match self.chunked(&chunk_key, &unit, lo, hi, false) {
                    Some(b) => b,
                    None => Expr::repeat(unit.clone(), counted::count(lo), Some(counted::count(hi))),
                };
                alternatives.push(Expr::concat(vec![head.clone(), body, tail]));
            }
        }
        let e = match alternatives.is_empty() {
            true => Expr::Empty,
            false => Expr::concat(vec![Expr::literal("\""), Expr::union(alternatives), Expr::literal("\"")]),
        };
        self.leaves.insert(key, e.clone());
        Ok(Some(e))
    }

    /// Notes that a `maxLength` was lowered to `to` because counting it did not fit.
    fn note_lowered(&mut self, to: u64) {
        self.lowered = Some(self.lowered.map_or(to, |l| l.min(to)));
    }

    /// Notes a restriction the walk takes (a subset of the schema's values), in words.
    pub(in crate::json_schema) fn note(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.notes.contains(&what) {
            self.notes.push(what);
        }
    }

    /// After subtracting the over-languages of `subtracted` removed every value of a case
    /// (`before`, built): a proof that the case has no value when each of its values is
    /// certainly one of theirs (in the union of their under-languages, whose texts all
    /// validate). Without the proof the case may have lost valid values to an approximation:
    /// noted as a restriction, and kept as the refusal to give (naming `keyword` at `ctx`) if no
    /// value is left at all.
    pub(in crate::json_schema) fn emptied_by(&mut self, keyword: &str, ctx: &super::Ctx, before: &Expr, subtracted: Vec<super::Conj<'a>>) {
        // The proof's compiles count no case of the schema's. What they note stays noted: their
        // results are cached, and a later use of them must not hide a restriction.
        let cases = self.cases;
        let unders: Result<Vec<Expr>> = subtracted.into_iter().map(|conj| self.compile(conj).and_then(|e| self.regular(&e))).collect();
        self.cases = cases;
        let proved = unders.is_ok_and(|u| before.minus(&Expr::union(u), self.config).is_ok_and(|rest| rest.is_empty()));
        if proved {
            return;
        }
        let what = match keyword {
            "oneOf" => "a branch was dropped, its values not told apart exactly from the other branches'",
            "if" => "the values that fail the condition were dropped, not told apart exactly from those that pass",
            _ => "the values it allows were dropped, not told apart exactly from those it forbids",
        };
        self.note(format!("{keyword} at {}: {what}", ctx.path));
        self.emptied.get_or_insert_with(|| {
            ctx.unsupported(
                keyword,
                "the compiler cannot tell this keyword's cases apart exactly (it approximates them), and no value \
                 survived the approximation; valid values may exist",
            )
        });
    }

    /// The refusal to give when the language is empty (see [`Compiler::emptied_by`]).
    pub(crate) fn emptied(&self) -> Option<GrammarError> {
        self.emptied.clone()
    }

    /// The restrictions the walk took on its own: the lowest `maxLength` a bound was lowered
    /// to because counting it did not fit (see `strings`), and the notes.
    pub(crate) fn taken(&self) -> Taken {
        Taken { lowered: self.lowered, notes: self.notes.clone() }
    }
}
