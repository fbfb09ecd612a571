//! The compiler walk: a conjunction of schemas → the language of the values valid under all
//! of them.
//!
//! A value must satisfy a *conjunction*: the schema at its place, the targets of its `$ref`s
//! and the members of its `allOf`s, plus whatever keys the object level forbids or requires.
//! [`Compiler::compile`] flattens the conjunction (following `$ref` and `allOf`), splits it on
//! the first disjunction (`anyOf`, `oneOf`, `not`, `if`, dependencies) and compiles each case,
//! and once nothing is left to split, merges the keywords of every member per type and emits
//! the union over the types allowed.
//!
//! Two languages per conjunction:
//! - **under** ([`Compiler::compile`]): every text in it is valid. It may leave valid texts
//!   out (property order is the declared one, unconstrained values are depth-bounded, ...).
//! - **over** ([`Compiler::over`]): it contains every canonical text that is valid. It may
//!   hold invalid texts too; whatever it cannot do exactly it drops (dropping a constraint
//!   only grows a set). Scalars are exact, so over = under for them.
//!
//! Negation needs both: `not S` is under(rest) minus over(S); `oneOf` branch i is
//! under(rest ∧ Sᵢ) minus the over of every other branch; `else` is under(rest ∧ else) minus
//! over(if). So every output validates, and scalar cases lose nothing.
//!
//! The splits themselves are in `split.rs` and the over-languages in `walk/over.rs`; this file
//! flattens conjunctions, caches what it compiled, and emits the merged keywords per type.
//!
//! Recursion: with rules on ([`Compiler::rules`]), a `$ref` to a target already being compiled
//! higher up, in a schema that is nothing but that reference, is a call of a rule whose body is
//! the target's language (compiled once, after the walk: [`Compiler::finish_rules`]), so a
//! recursive schema nests without a depth limit and the grammar is a pushdown one. So is a
//! conjunction met again while it is being compiled (the recursion runs through an `anyOf`
//! branch beside `type`, an `allOf` member, ...): the inner one is a call of the outer one's
//! rule ([`Compiler::compile_flat`]). Otherwise (rules off, in an over-language, or a
//! conjunction that carries names its object forbids or requires), a `$ref` target entered
//! more than `max_recursion_depth` times along the current path (two more with rules on, so
//! that a conjunction that first comes round a level or two down is still seen) compiles to
//! the empty language, so the deepest level admits only the non-recursive alternatives (an
//! optional property is left out, an array stays empty, an `anyOf` branch drops). When nothing
//! finite is left the schema is refused.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::arrays;
use super::context::Ctx;
use super::objects;
use super::policy::{accepts_every_value, keyword_type, Reading};
use super::refs::Resolver;
use super::split::with_done;
use super::counted::Chunks;
use super::values::{any_value_expr, any_value_over, json_equal, literal, type_kinds, value_kind, value_kind_name, K_ALL,
                    K_ARRAY, K_BOOL, K_FRACTION, K_INTEGER, K_NULL, K_OBJECT, K_STRING};
use super::JsonSchemaOptions;
use crate::automata::Expr;
use crate::automata::DfaConfig;
use crate::error::{GrammarError, Result};
use crate::pushdown::RtnBuilder;
use crate::util::RuleId;

mod inline;
mod leaves;
mod over;
pub(crate) use leaves::Taken;
pub(crate) use inline::Apart;

/// Levels a recursion may unroll past `max_recursion_depth` when rules are on (see `flatten`).
const RULES_EXTRA_LEVELS: u32 = 2;

/// Keywords of a member already applied by an enclosing split (so they are not applied again).
pub(crate) const DONE_REF: u16 = 1;
pub(crate) const DONE_ALL_OF: u16 = 2;
pub(crate) const DONE_ANY_OF: u16 = 4;
pub(crate) const DONE_ONE_OF: u16 = 8;
pub(crate) const DONE_NOT: u16 = 16;
pub(crate) const DONE_IF: u16 = 32;
pub(crate) const DONE_DEPENDENCIES: u16 = 64;


/// One schema of a conjunction, with its location and the base URI of its references.
#[derive(Clone)]
pub(crate) struct Item<'a> {
    pub schema: &'a Value,
    pub ctx: Ctx,
    pub base: Rc<str>,
    pub done: u16,
}

impl<'a> Item<'a> {
    pub(crate) fn map(&self) -> Option<&'a Map<String, Value>> {
        self.schema.as_object()
    }

    /// The subschema at `keyword` (and optionally a key or index below it) as an item.
    pub(crate) fn child(&self, schema: &'a Value, segments: &str, base_of: &Resolver<'a>) -> Result<Item<'a>> {
        let base = base_of.base_of(schema);
        Ok(Item {
            schema,
            ctx: self.ctx.child(segments)?,
            base: if base.is_empty() { self.base.clone() } else { Rc::from(base) },
            done: 0,
        })
    }
}

/// A conjunction: the members every value must satisfy, plus object keys that must be absent
/// or present (from `not: {required}` and dependencies) and kinds of value ruled out.
#[derive(Clone, Default)]
pub(crate) struct Conj<'a> {
    pub items: Vec<Item<'a>>,
    pub forbidden: Vec<String>,
    pub required: Vec<String>,
    pub excluded: u8,
}

impl<'a> Conj<'a> {
    pub(crate) fn of(items: Vec<Item<'a>>) -> Conj<'a> {
        Conj { items, ..Conj::default() }
    }

    /// The members' object maps.
    pub(crate) fn maps(&self) -> impl Iterator<Item = (&'a Map<String, Value>, &Item<'a>)> + '_ {
        self.items.iter().filter_map(|i| i.map().map(|m| (m, i)))
    }
}

/// What following the references and `allOf`s of a conjunction leaves.
pub(crate) enum Flat<'a> {
    /// No value is valid (a `false` member, or a recursion cut).
    Cut,
    /// The members, every one a plain schema object.
    Conj(Conj<'a>),
    /// The conjunction is one reference (when rules are on): a call of the target's rule.
    Call(RuleId),
}

/// A conjunction as a cache key: its members (schema address, keywords done) and how far the
/// prune depth is below it.
type ConjKey = Vec<(usize, u16)>;

pub(crate) struct Compiler<'a> {
    pub resolver: Resolver<'a>,
    pub reading: Reading,
    pub opts: &'a JsonSchemaOptions,
    pub config: &'a DfaConfig,
    /// Whitespace allowed between tokens (empty when compact).
    pub ws: String,
    /// `$ref` targets on the current path, with how many times each is entered.
    active: HashMap<*const Value, u32>,
    /// Recursion cuts so far (a result compiled without any is context-free and cached).
    cuts: u64,
    cache: HashMap<ConjKey, Expr>,
    /// Results that cut a recursion, by the conjunction and the reference depths (target
    /// address, times entered) they were compiled at.
    deep_cache: HashMap<(ConjKey, Vec<(usize, u32)>), Expr>,
    pub(super) cases: usize,
    started: Instant,
    /// Object names that do not discriminate (see `one_of`); over-languages prefer others.
    pub common_names: HashSet<String>,
    /// When set, upper count bounds (`maxItems`, `maxLength`) above it are lowered to it (but
    /// never below the lower bound): see `RESTRICTIONS` in `mod.rs`.
    pub count_cap: Option<u64>,
    /// Whether some bound is large enough that a cap would lower it.
    large_bounds: std::cell::Cell<bool>,
    /// When set, objects nested at least this deep (the root value is at depth 0) keep only
    /// their required members, and arrays that deep only their required elements: see
    /// `RESTRICTIONS` in `mod.rs`.
    pub prune_depth: Option<usize>,
    /// Containers (objects and arrays) around the value being compiled.
    value_depth: usize,
    /// Whether `prune_depth` left some optional member or element out.
    pruned: bool,
    /// Number and string languages built so far, by what decides them ([`NumberFacts::key`],
    /// [`StringFacts::key`]): a schema of money amounts repeats `"multipleOf": 0.01` at every
    /// one, an event schema the same date-time or pattern, and each costs a few automata.
    leaves: HashMap<String, Expr>,
    /// When set, recursive references become calls of rules (see the module docs).
    pub rules: Option<RtnBuilder>,
    /// The rule of each `$ref` target called, and the targets whose bodies are still to be
    /// compiled (with the item to compile).
    rule_of: HashMap<*const Value, RuleId>,
    pending: Vec<(RuleId, Item<'a>)>,
    /// The rule of any JSON value, once declared.
    any_rule: Option<RuleId>,
    /// Per array of distinct elements checked at run time, its form for products (at most one
    /// element: see `arrays`) and where it is.
    pub(super) distinct_forms: HashMap<RuleId, (Expr, Ctx)>,
    /// The chunk rules of each unit a long repetition was split on (see `counted`), by the
    /// unit's key.
    chunks: HashMap<String, Chunks>,
    /// Whether over-languages narrow objects by their scalar members and arrays by their
    /// elements: more exact, dearer to build (see `split`, where it is tried).
    pub(super) precise_over: bool,
    /// Cases that tried precise over-languages so far (see `split`).
    pub(super) precise_tries: usize,
    /// Units called as rules of their own, by the same keys (see `Compiler::called_each`).
    unit_rules: HashMap<String, Expr>,
    /// The conjunctions being compiled on the current path (when rules are on), each with the
    /// rule declared once the walk met it again inside itself (see `Compiler::compile_flat`).
    open_conjs: HashMap<ConjKey, Option<RuleId>>,
    /// The lowest bound a `maxLength` was lowered to (see `lowered`), and the string
    /// languages built with a lowered bound, by leaf key.
    lowered: Option<u64>,
    lowered_leaves: HashMap<String, u64>,
    /// Other restrictions the walk took, in words (see [`Taken`]).
    notes: Vec<String>,
    /// Where an approximation (a subtraction of an over-language that holds more than the
    /// schema allows) removed every value of a case: the refusal to give if nothing is left.
    emptied: Option<GrammarError>,
}


impl<'a> Compiler<'a> {
    pub(crate) fn new(root: &'a Value, opts: &'a JsonSchemaOptions, config: &'a DfaConfig) -> Compiler<'a> {
        let ws = if opts.max_whitespace == 0 { String::new() } else { format!(r"[ \t\n\r]{{0,{}}}", opts.max_whitespace) };
        let mut active = HashMap::new();
        active.insert(root as *const Value, 1);
        Compiler {
            resolver: Resolver::new(root),
            reading: super::policy::reading_of(root),
            opts,
            config,
            ws,
            active,
            cuts: 0,
            cache: HashMap::new(),
            deep_cache: HashMap::new(),
            cases: 0,
            started: Instant::now(),
            common_names: HashSet::new(),
            count_cap: None,
            large_bounds: std::cell::Cell::new(false),
            prune_depth: None,
            value_depth: 0,
            pruned: false,
            leaves: HashMap::new(),
            rules: None,
            rule_of: HashMap::new(),
            pending: Vec::new(),
            any_rule: None,
            distinct_forms: HashMap::new(),
            chunks: HashMap::new(),
            unit_rules: HashMap::new(),
            open_conjs: HashMap::new(),
            precise_over: false,
            precise_tries: 0,
            lowered: None,
            lowered_leaves: HashMap::new(),
            notes: Vec::new(),
            emptied: None,
        }
    }

    /// Compiles the bodies of the rules the walk called (each may call more), then the grammar:
    /// `root` is the language of the whole schema. `None` when no rule was called (the language
    /// is regular: `root` itself).
    pub(crate) fn finish_rules(&mut self, root: Expr) -> Result<Option<(RtnBuilder, RuleId)>> {
        if self.rules.as_ref().is_none_or(|b| b.is_empty()) {
            return Ok(None);
        }
        while let Some((rule, item)) = self.pending.pop() {
            self.define_queued(rule, item)?;
        }
        let Some(mut builder) = self.rules.take() else { return Ok(None) };
        let start = builder.declare("#");
        builder.define(start, root);
        Ok(Some((builder, start)))
    }

    /// Compiles the body of `rule`, a `$ref` target taken off the queue, and defines the rule.
    pub(crate) fn define_queued(&mut self, rule: RuleId, item: Item<'a>) -> Result<Expr> {
        let address = item.schema as *const Value;
        // The target is being compiled: a reference to it inside is a call.
        *self.active.entry(address).or_insert(0) += 1;
        let body = self.compile_one(item);
        if let Some(n) = self.active.get_mut(&address) {
            *n -= 1;
        }
        let body = body?;
        if let Some(b) = self.rules.as_mut() {
            b.define(rule, body.clone());
        }
        Ok(body)
    }

    /// A large language compiled for a conjunction, as a call of a rule of its own (when rules
    /// are on): the conjunction's cache hands the same call to every place it occurs, and the
    /// rule set later inlines it again unless it is large and shared (see `crate::pushdown`),
    /// so a definition referenced from many places is one automaton, not one copy per place.
    /// A language that calls other rules qualifies too: a large object that reaches a
    /// recursive definition is then one rule beside it, not a part of every caller's automaton.
    fn as_rule(&mut self, lang: Expr, path: &str) -> Expr {
        const RULE_MIN_ESTIMATE: u64 = 1_000;
        if self.prune_depth.is_some() {
            return lang;
        }
        let Some(builder) = self.rules.as_mut() else { return lang };
        if lang.nfa_size_estimate(&mut HashMap::new()) < RULE_MIN_ESTIMATE {
            return lang;
        }
        let r = builder.declare(path);
        builder.define(r, lang);
        Expr::Call(r)
    }

    /// The rule that stands for `target`'s language, declared (and its body queued) on first use.
    fn rule_for(&mut self, target: &Item<'a>) -> Option<RuleId> {
        let address = target.schema as *const Value;
        if let Some(&r) = self.rule_of.get(&address) {
            return Some(r);
        }
        let builder = self.rules.as_mut()?;
        let r = builder.declare(&target.ctx.path);
        self.rule_of.insert(address, r);
        self.pending.push((r, target.clone()));
        Some(r)
    }

    /// The root's item.
    pub(crate) fn root_item(&self, root: &'a Value) -> Item<'a> {
        Item { schema: root, ctx: Ctx::root_in(self.reading.strictest()), base: Rc::from(self.resolver.root_base()), done: 0 }
    }

    /// An upper count bound after the cap (see `count_cap`); `lo` is the matching lower bound.
    pub(crate) fn cap(&self, hi: Option<u64>, lo: u64) -> Option<u64> {
        let hi = hi?;
        if hi > 4 && hi > lo {
            self.large_bounds.set(true);
        }
        Some(match self.count_cap {
            Some(cap) if hi > cap => cap.max(lo),
            _ => hi,
        })
    }

    /// Whether the walk met an upper count bound a cap would lower (`maxItems`, `maxLength`
    /// above 4 and above their lower bound).
    pub(crate) fn has_large_bounds(&self) -> bool {
        self.large_bounds.get()
    }

    /// Whether the value being compiled is past `prune_depth` (its optional members and
    /// elements are left out).
    pub(crate) fn pruning(&self) -> bool {
        self.prune_depth.is_some_and(|d| self.value_depth >= d)
    }

    /// Notes that pruning left something out (so a shallower prune depth may help).
    pub(crate) fn note_pruned(&mut self) {
        self.pruned = true;
    }

    /// Whether pruning left anything out in this attempt.
    pub(crate) fn pruned(&self) -> bool {
        self.pruned
    }

    /// Runs `f` one container deeper (for the members of an object or the elements of an
    /// array).
    pub(crate) fn inside<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.value_depth += 1;
        let out = f(self);
        self.value_depth -= 1;
        out
    }

    fn check_time(&self, ctx: &Ctx) -> Result<()> {
        let ms = self.started.elapsed().as_millis() as u64;
        let past = self.config.cancelled()
            || match self.config.deadline {
                Some(d) => d.passed(),
                None => ms > self.opts.max_compile_ms,
            };
        if past {
            return Err(GrammarError::TooLarge {
                what: "compile CPU time (ms)",
                limit: self.opts.max_compile_ms as usize,
                detail: format!("still compiling at {} after {ms} ms", ctx.path),
            });
        }
        Ok(())
    }

    /// Any value (the language of `true` / `{}`): with rules, a call of the rule of any JSON
    /// value, nested without a limit; without, at most `depth` levels of containers.
    pub(crate) fn any(&mut self, depth: usize) -> Expr {
        if self.prune_depth.is_none() {
            if let Some(builder) = self.rules.as_mut() {
                let rule = *self.any_rule.get_or_insert_with(|| builder.declare("any JSON value"));
                if !builder.is_defined(rule) {
                    builder.define(rule, any_value_over(Expr::Call(rule), &self.ws));
                }
                return Expr::Call(rule);
            }
            self.note(format!("values the schema leaves open nested at most {depth} levels"));
        }
        any_value_expr(depth, &self.ws, self.config)
    }

    // -- under -------------------------------------------------------------------------------

    /// The under-language of one schema.
    pub(crate) fn compile_one(&mut self, item: Item<'a>) -> Result<Expr> {
        self.compile(Conj::of(vec![item]))
    }

    /// The under-language of a conjunction (see the module docs).
    pub(crate) fn compile(&mut self, conj: Conj<'a>) -> Result<Expr> {
        let ctx = conj.items.first().map(|i| i.ctx.clone()).unwrap_or_else(Ctx::root);
        self.check_time(&ctx)?;
        let result = self.within_flattened(conj, false, |this, flat| match flat? {
            Flat::Cut => Ok(Expr::Empty),
            Flat::Call(rule) => Ok(Expr::Call(rule)),
            Flat::Conj(flat) => this.compile_flat(flat),
        });
        match result {
            // Too deep (a recursive schema unrolled through many levels): no value from here,
            // like a recursion cut; the enclosing optional property, array or branch drops.
            Err(e) if too_deep(&e) => {
                self.cuts += 1;
                self.note(format!("subschemas nested too deep at {} left out", ctx.path));
                Ok(Expr::Empty)
            }
            other => other,
        }
    }

    /// Runs `then` on the flattened `conj` (see [`Compiler::flatten`]), then leaves the
    /// reference targets flattening entered, so they are open only while `then` runs.
    pub(crate) fn within_flattened<T>(&mut self, conj: Conj<'a>, over: bool, then: impl FnOnce(&mut Self, Result<Flat<'a>>) -> T) -> T {
        let mut entered: Vec<*const Value> = Vec::new();
        let flat = self.flatten(conj, &mut entered, over);
        let out = then(self, flat);
        for t in entered {
            if let Some(n) = self.active.get_mut(&t) {
                *n -= 1;
            }
        }
        out
    }

    /// Follows `$ref`s and `allOf`s until every member is a plain schema object. `None` when
    /// some member is `false` or a recursive reference is cut (under), in which case no value
    /// is valid. In `over` mode a cut member is simply dropped (a superset).
    fn flatten(&mut self, conj: Conj<'a>, entered: &mut Vec<*const Value>, over: bool) -> Result<Flat<'a>> {
        let Conj { items, forbidden, required, excluded } = conj;
        let mut out = Conj { items: Vec::new(), forbidden, required, excluded };
        let mut seen: HashSet<(*const Value, u16)> = HashSet::new();
        let mut work: Vec<Item<'a>> = items.into_iter().rev().collect();
        while let Some(mut item) = work.pop() {
            let map = match item.schema {
                Value::Bool(true) => continue,
                Value::Bool(false) => return Ok(Flat::Cut),
                // `not` of a schema every value satisfies: no value satisfies this one.
                Value::Object(m) if m.get("not").is_some_and(accepts_every_value) => return Ok(Flat::Cut),
                Value::Object(m) => m,
                other => {
                    return Err(item.ctx.invalid(format!(
                        "a schema must be an object or a boolean, not {}",
                        value_kind_name(other)
                    )))
                }
            };
            if !seen.insert((item.schema as *const Value, item.done)) {
                continue;
            }
            let mut keep_siblings = true;
            if item.done & DONE_REF == 0 {
                for keyword in ["$ref", "$recursiveRef", "$dynamicRef"] {
                    let Some(reference) = map.get(keyword) else { continue };
                    if keyword != "$ref" {
                        // Resolved by the dynamic scope (the path of references taken), not
                        // by the document: reading it as `$ref` accepts invalid values.
                        return Err(item.ctx.unsupported(keyword, "dynamic references are not supported"));
                    }
                    let reference = reference
                        .as_str()
                        .ok_or_else(|| item.ctx.invalid(format!("{keyword} must be a string")))?;
                    let target = self.resolver.resolve(reference, &item.base, keyword, &item.ctx)?;
                    let address = target.schema as *const Value;
                    let count = self.active.get(&address).copied().unwrap_or(0);
                    if !over && self.rules.is_some() && self.prune_depth.is_none() && work.is_empty()
                        && out.items.is_empty() && out.forbidden.is_empty() && out.required.is_empty() && out.excluded == 0
                        && only_reference(map, keyword)
                    {
                        // A schema that is only a reference: a call of the target's rule, so the
                        // target is compiled once however many places use it, and recursion
                        // nests without a limit (the rule set inlines the small ones again).
                        let target_item = Item {
                            schema: target.schema,
                            ctx: item.ctx.at_path(target.path.clone())?,
                            base: Rc::from(target.base.as_str()),
                            done: 0,
                        };
                        if let Some(rule) = self.rule_for(&target_item) {
                            return Ok(Flat::Call(rule));
                        }
                    }
                    // With rules a conjunction that comes round again is a call (see
                    // `compile_flat`); it may first come round a level or two down.
                    let limit = self.opts.max_recursion_depth.max(1) + if self.rules.is_some() { RULES_EXTRA_LEVELS } else { 0 };
                    if count >= limit {
                        if over {
                            continue;
                        }
                        self.cuts += 1;
                        self.note(format!("recursion through {} unrolled {count} levels, deeper values left out", target.path));
                        return Ok(Flat::Cut);
                    }
                    *self.active.entry(address).or_insert(0) += 1;
                    entered.push(address);
                    work.push(Item {
                        schema: target.schema,
                        ctx: item.ctx.at_path(target.path)?,
                        base: Rc::from(target.base.as_str()),
                        done: 0,
                    });
                    if self.reading.ref_overrides_siblings() && keyword == "$ref" {
                        keep_siblings = false;
                    }
                }
                item.done |= DONE_REF;
            }
            if !keep_siblings {
                continue;
            }
            if item.done & DONE_ALL_OF == 0 {
                if let Some(all) = map.get("allOf") {
                    let branches = nonempty_list(all, "allOf", &item.ctx)?;
                    for (i, b) in branches.iter().enumerate().rev() {
                        work.push(item.child(b, &format!("allOf/{i}"), &self.resolver)?);
                    }
                }
                item.done |= DONE_ALL_OF;
            }
            out.items.push(item);
        }
        Ok(Flat::Conj(out))
    }

    /// Splits on the first disjunction left, or compiles the merged keywords.
    fn compile_flat(&mut self, conj: Conj<'a>) -> Result<Expr> {
        let key: Option<ConjKey> = (conj.forbidden.is_empty() && conj.required.is_empty() && conj.excluded == 0).then(|| {
            let mut k: Vec<(usize, u16)> = conj.items.iter().map(|i| (i.schema as *const Value as usize, i.done)).collect();
            k.sort_unstable();
            // Pruning depends on how far below the value the prune depth is.
            let to_prune = self.prune_depth.map_or(0, |d| d.saturating_sub(self.value_depth) + 1);
            k.push((0, u16::try_from(to_prune).unwrap_or(u16::MAX)));
            k
        });
        if let Some(hit) = key.as_ref().and_then(|k| self.cache.get(k)) {
            return Ok(hit.clone());
        }
        // A conjunction met again inside itself (a recursion through wrappers a lone `$ref` does
        // not catch: `{"type": "object", "anyOf": [{"$ref": ...}]}`): a call of its rule.
        let recursive_key = key.clone().filter(|_| self.prune_depth.is_none());
        if let (Some(k), Some(rules)) = (&recursive_key, self.rules.as_mut()) {
            if let Some(open) = self.open_conjs.get_mut(k) {
                let path = conj.items.first().map(|i| i.ctx.path.as_str()).unwrap_or("#");
                let rule = *open.get_or_insert_with(|| rules.declare(path));
                return Ok(Expr::Call(rule));
            }
            self.open_conjs.insert(k.clone(), None);
            let result = self.compile_flat_open(conj, key.clone());
            let Some(rule) = self.open_conjs.remove(k).flatten() else { return result };
            // On an error, calls made inside may be cached: they call a rule of no string.
            let body = result.as_ref().map_or(Expr::Empty, Expr::clone);
            if let Some(rules) = self.rules.as_mut() {
                rules.define(rule, body);
            }
            let call = Expr::Call(rule);
            if result.is_ok() {
                self.cache.insert(k.clone(), call.clone());
            }
            return result.map(|_| call);
        }
        self.compile_flat_open(conj, key)
    }

    /// [`Compiler::compile_flat`] past the cache and the recursion check.
    fn compile_flat_open(&mut self, conj: Conj<'a>, key: Option<ConjKey>) -> Result<Expr> {
        // A result that cut a recursion depends on how deep in each reference the walk is.
        let deep_key = key.as_ref().map(|k| {
            let mut depths: Vec<(usize, u32)> = self.active.iter().filter(|(_, &n)| n > 0).map(|(&t, &n)| (t as usize, n)).collect();
            depths.sort_unstable();
            (k.clone(), depths)
        });
        if let Some(hit) = deep_key.as_ref().and_then(|k| self.deep_cache.get(k)) {
            self.cuts += 1;
            return Ok(hit.clone());
        }
        let cuts_before = self.cuts;
        let path = conj.items.first().map(|i| i.ctx.path.clone()).unwrap_or_default();
        let mut result = self.split_or_emit(conj)?;
        if key.is_some() && self.cuts == cuts_before {
            result = self.as_rule(result, &path);
        }
        match (key, deep_key) {
            (Some(k), _) if self.cuts == cuts_before => {
                self.cache.insert(k, result.clone());
            }
            (_, Some(k)) => {
                self.deep_cache.insert(k, result.clone());
            }
            _ => {}
        }
        Ok(result)
    }

    /// The merged keywords of a split-free conjunction, per type.
    ///
    /// `unevaluatedProperties`/`unevaluatedItems` are read here as the rest of one schema's
    /// own members; that is their meaning only when no other schema (an `allOf` member, a
    /// `$ref` target, a branch) applies to the same value, so otherwise they are refused.
    ///
    /// Without `type`, values are generated as the types the keywords constrain (see
    /// `policy::keyword_type`); when those admit no value (`required` names that
    /// `additionalProperties: false` forbids, say), values of the other types are generated
    /// instead: the keywords do not apply to them, so they are valid.
    pub(super) fn emit(&mut self, conj: Conj<'a>) -> Result<Expr> {
        if conj.items.len() > 1 {
            for (m, item) in conj.maps() {
                for keyword in ["unevaluatedProperties", "unevaluatedItems"] {
                    if m.get(keyword).is_some_and(|v| v != &Value::Bool(true)) {
                        return Err(item.ctx.unsupported(
                            keyword,
                            "beside other schemas that apply to the same value (allOf, $ref, anyOf/oneOf/if branches), which may evaluate members",
                        ));
                    }
                }
            }
        }
        let all = self.kinds(&conj, false)? & !conj.excluded;
        let kinds = self.kinds(&conj, true)? & !conj.excluded;
        let lang = self.emit_kinds(&conj, kinds)?;
        if lang.is_empty() && all & !kinds != 0 {
            return self.emit_kinds(&conj, all & !kinds);
        }
        Ok(lang)
    }

    fn emit_kinds(&mut self, conj: &Conj<'a>, kinds: u8) -> Result<Expr> {
        if kinds == 0 {
            return Ok(Expr::Empty);
        }
        let values = enum_values(conj, true)?;
        // A number literal is written in every spelling of its value (`1`, `1.0`, ...); where
        // only integers are allowed, the typed language says which spellings count (draft 4
        // does not count `1.0` as an integer).
        let integer_literals = kinds & K_FRACTION == 0
            && values.as_ref().is_some_and(|vs| vs.iter().any(|v| matches!(v, Value::Number(_))));
        let constrained = conj.maps().any(|(m, _)| m.keys().any(|k| keyword_type(k).is_some()))
            || !conj.forbidden.is_empty()
            || !conj.required.is_empty()
            || integer_literals;
        if let Some(values) = &values {
            let mut lits = Vec::new();
            for v in values.iter().filter(|v| value_kind(v) & kinds != 0) {
                lits.push(literal(v, &self.ws)?);
            }
            let lits = Expr::union(lits);
            if !constrained || lits.is_empty() {
                return Ok(lits);
            }
            let typed = self.typed(conj, kinds)?;
            return lits.and(&typed, self.config);
        }
        self.typed(conj, kinds)
    }

    /// The union over the allowed kinds of each type's language.
    fn typed(&mut self, conj: &Conj<'a>, kinds: u8) -> Result<Expr> {
        let mut parts = Vec::new();
        if kinds & K_NULL != 0 {
            parts.push(Expr::literal("null"));
        }
        if kinds & K_BOOL != 0 {
            parts.push(Expr::regex("true|false"));
        }
        if kinds & (K_INTEGER | K_FRACTION) != 0 {
            parts.push(self.number(conj, kinds & K_FRACTION == 0, false)?);
        }
        if kinds & K_STRING != 0 {
            parts.push(self.string(conj, false)?);
        }
        if kinds & K_OBJECT != 0 {
            parts.push(objects::object(self, conj)?);
        }
        if kinds & K_ARRAY != 0 {
            parts.push(arrays::array(self, conj)?);
        }
        Ok(Expr::union(parts))
    }

    /// The kinds of value the conjunction admits: its `type`s intersected, else (with `infer`,
    /// for under) the types its keywords constrain, else every kind.
    pub(super) fn kinds(&self, conj: &Conj<'a>, infer: bool) -> Result<u8> {
        let mut declared: Option<u8> = None;
        let mut inferred = 0u8;
        for (m, item) in conj.maps() {
            if let Some(t) = m.get("type") {
                let k = type_kinds(t, &item.ctx)?;
                declared = Some(declared.map_or(k, |d| d & k));
            }
            for k in m.keys() {
                if let Some(t) = keyword_type(k) {
                    inferred |= t.kinds();
                }
            }
        }
        if !conj.required.is_empty() || !conj.forbidden.is_empty() {
            inferred |= K_OBJECT;
        }
        Ok(match declared {
            Some(d) => d,
            None if infer && inferred != 0 => inferred,
            None => K_ALL,
        })
    }
}

/// Whether an error is the schema nesting limit (see `context::MAX_SCHEMA_DEPTH`).
/// True when `map` constrains nothing but through `keyword` (a reference): every other key is
/// an annotation or a place for definitions.
fn only_reference(map: &Map<String, Value>, keyword: &str) -> bool {
    const INERT: [&str; 12] =
        ["$id", "$schema", "$anchor", "$comment", "$defs", "definitions", "title", "description", "default", "examples", "deprecated", "$vocabulary"];
    map.keys().all(|k| k == keyword || INERT.contains(&k.as_str()))
}

fn too_deep(e: &GrammarError) -> bool {
    matches!(e, GrammarError::TooLarge { what, .. } if *what == super::context::NESTING_LIMIT)
}

/// The values `enum`/`const` allow across the conjunction (`None` when no member has either).
/// `consts`: whether `const` counts (over-languages must hold under every reading, and draft 4
/// does not know `const`).
fn enum_values<'a>(conj: &Conj<'a>, consts: bool) -> Result<Option<Vec<&'a Value>>> {
    let mut values: Option<Vec<&'a Value>> = None;
    for (m, item) in conj.maps() {
        let mut mine: Option<Vec<&'a Value>> = None;
        if let Some(e) = m.get("enum") {
            let list = e.as_array().ok_or_else(|| item.ctx.invalid("enum must be an array"))?;
            mine = Some(list.iter().collect());
        }
        if let Some(c) = m.get("const").filter(|_| consts) {
            mine = Some(match mine {
                Some(list) => list.into_iter().filter(|v| json_equal(v, c)).collect(),
                None => vec![c],
            });
        }
        if let Some(mine) = mine {
            values = Some(match values {
                None => mine,
                Some(prev) => prev.into_iter().filter(|v| mine.iter().any(|w| json_equal(v, w))).collect(),
            });
        }
    }
    Ok(values.map(|mut v| {
        let mut unique: Vec<&Value> = Vec::new();
        v.retain(|x| {
            let fresh = !unique.iter().any(|u| json_equal(u, x));
            if fresh {
                unique.push(x);
            }
            fresh
        });
        v
    }))
}

/// A non-empty array of schemas.
pub(crate) fn nonempty_list<'v>(v: &'v Value, keyword: &str, ctx: &Ctx) -> Result<&'v [Value]> {
    match v {
        Value::Array(a) if !a.is_empty() => Ok(a),
        _ => Err(ctx.invalid(format!("{keyword} must be a non-empty array of schemas"))),
    }
}

/// Largest count (`minItems`, `maxLength`, ...) expanded into an automaton.
pub(crate) const MAX_COUNT: u64 = 100_000;

/// The longest `maxLength` an over-approximation counts; past it, any length.
const LENIENT_MAX_LENGTH: u64 = 256;

/// A non-negative integer keyword such as `minItems` (`2.0` is accepted as 2), if present.
pub(crate) fn count_keyword(map: &Map<String, Value>, keyword: &str, ctx: &Ctx) -> Result<Option<u64>> {
    map.get(keyword).map(|v| super::values::count(v, keyword, ctx)).transpose()
}
