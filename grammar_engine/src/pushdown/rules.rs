//! Rules: a grammar as named automaton expressions that call each other, compiled to one byte
//! DFA per recursive rule with its calls read back out.
//!
//! A front end (GBNF, Lark, the JSON Schema compiler, a structure) declares rules on an
//! [`RtnBuilder`], gives each a body ([`Expr`], with [`Expr::Call`] where another rule is
//! used), and calls [`RtnBuilder::build`]. The build:
//!
//! 1. checks that every rule used is defined;
//! 2. inlines every rule that is not on a cycle of calls (most of a grammar: a string, a
//!    number, a keyword), except a large one used in several places or one too large to share
//!    a DFA with its callers ([`KEEP_SHARED`], [`KEEP_ALONE`]): so recursion and large shared
//!    definitions stay calls, and each remaining rule is one DFA of bounded size; a small
//!    grammar without recursion comes out as a single DFA, as a regex does. A rule whose DFA
//!    is still too large keeps its largest callees as calls, and the build starts again;
//! 3. compiles each remaining rule's body to a minimized DFA (calls spelled as bytes, see
//!    [`crate::automata::calls`]) and reads the calls back out, per state, as (rule, return
//!    state) pairs;
//! 4. finds the productive rules (those with a finite string) and drops calls of the others,
//!    finds the nullable rules, and refuses left recursion (a rule that can call itself before
//!    reading a byte), which no top-down reader can expand.

use std::collections::HashMap;

use super::distinct::Memory;
use super::incoming::Incoming;
use crate::automata::calls::{calls_of, CALL_OPENER};
use crate::automata::{Dfa, DfaConfig, Expr};
use crate::error::{GrammarError, Result};
use crate::util::{RuleId, StateId};

/// A rule used in two places or more stays a call from this size on (in the Thompson NFA
/// states of [`Expr::nfa_size_estimate`]): one copy of it instead of one per place.
pub const KEEP_SHARED: u64 = 1_000;
/// A rule stays a call from this size on wherever it is used: its callers' DFAs stay small.
pub const KEEP_ALONE: u64 = 20_000;

/// How many times one build may keep more callees as calls (see [`RtnBuilder::build`]).
const MAX_SPLITS: usize = 8;

/// What decides a rule's DFA in one build attempt (see `RtnBuilder::build_calling`).
type BuiltKey = (u32, Vec<u32>, Vec<(u32, u32)>);

/// Why a build attempt failed: `At` a rule whose DFA was too large, or another error.
enum Split {
    At(RuleId, GrammarError),
    No(GrammarError),
}

/// Rules under construction.
#[derive(Debug, Default)]
pub struct RtnBuilder {
    names: Vec<String>,
    bodies: Vec<Option<Expr>>,
    /// Rules that stay calls wherever they are used, whatever their size.
    always_called: Vec<bool>,
    /// What each rule keeps at run time (see `super::distinct`).
    memory: Vec<Memory>,
}

impl RtnBuilder {
    pub fn new() -> RtnBuilder {
        RtnBuilder::default()
    }

    /// A new rule named `name` (names are for messages; they need not be unique).
    pub fn declare(&mut self, name: &str) -> RuleId {
        self.names.push(name.to_string());
        self.bodies.push(None);
        self.always_called.push(false);
        self.memory.push(Memory::None);
        RuleId::new((self.names.len() - 1) as u32)
    }

    /// Sets the body of `rule`.
    pub fn define(&mut self, rule: RuleId, body: Expr) {
        self.bodies[rule.as_usize()] = Some(body);
    }

    /// Keeps `rule` a call wherever it is used, however small: for a rule called from many
    /// copies of the same place (a chunk of a long count), which inlining would copy as often.
    pub fn always_call(&mut self, rule: RuleId) {
        self.always_called[rule.as_usize()] = true;
    }

    /// Makes `rule` keep `memory` at run time (see `super::distinct`); such a rule is always
    /// a call. A [`Memory::Distinct`] rule may call only [`Memory::Element`] rules, and those
    /// no rule, and nothing may follow their accepting states (checked by the build).
    pub(crate) fn remember(&mut self, rule: RuleId, memory: Memory) {
        self.always_called[rule.as_usize()] = true;
        self.memory[rule.as_usize()] = memory;
    }

    /// What `rule` keeps at run time.
    pub(crate) fn memory(&self, rule: RuleId) -> Memory {
        self.memory.get(rule.as_usize()).copied().unwrap_or_default()
    }

    /// The body of `rule`, when it has one.
    pub fn definition(&self, rule: RuleId) -> Option<&Expr> {
        self.bodies.get(rule.as_usize()).and_then(Option::as_ref)
    }

    pub fn is_defined(&self, rule: RuleId) -> bool {
        self.bodies.get(rule.as_usize()).is_some_and(Option::is_some)
    }

    pub fn name(&self, rule: RuleId) -> &str {
        &self.names[rule.as_usize()]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Adds the rules of `other` to these (renumbered after them); returns the new id of
    /// `other`'s rule `start`.
    pub fn absorb(&mut self, other: RtnBuilder, start: RuleId) -> RuleId {
        let offset = self.names.len() as u32;
        let shift = |r: RuleId| Some(RuleId::new(r.as_u32() + offset));
        for (((name, body), always), memory) in other.names.into_iter().zip(other.bodies).zip(other.always_called).zip(other.memory) {
            self.names.push(name);
            self.bodies.push(body.map(|b| b.renumber(&shift)));
            self.always_called.push(always);
            self.memory.push(memory);
        }
        RuleId::new(start.as_u32() + offset)
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Compiles the rules reachable from `start`. `syntax` names the grammar language in
    /// errors. Returns [`Compiled::Regular`] when no recursion is left after inlining.
    pub fn build(&self, start: RuleId, syntax: &'static str, config: &DfaConfig) -> Result<Compiled> {
        let order = self.reachable(start, syntax)?;
        let recursive = self.recursive(&order);
        let uses = self.uses(&order);
        let mut call: Vec<bool> = recursive.iter().zip(&self.always_called).map(|(&r, &a)| r || a).collect();
        let mut built = HashMap::new();
        for split in 0.. {
            match self.build_calling(start, &order, &uses, &mut call, &mut built, syntax, config) {
                // A rule too large for one DFA with its callees inlined keeps the largest of
                // them as calls, and the build starts again.
                Err(Split::At(rule, e)) => {
                    if split == MAX_SPLITS || !self.split(rule, &order, &mut call, config) {
                        return Err(e);
                    }
                }
                Err(Split::No(e)) => return Err(e),
                Ok(compiled) => return Ok(compiled),
            }
        }
        unreachable!("the loop returns")
    }

    /// [`RtnBuilder::build`] with the rules `call` marks kept as calls (more are marked by
    /// size); [`Split::At`] names a rule whose DFA was too large. `built` holds the DFAs a
    /// failed attempt built, by what decides them: the rule, the rules inlined into it and the
    /// numbers of the rules it calls.
    #[allow(clippy::too_many_arguments)]
    fn build_calling(&self, start: RuleId, order: &[RuleId], uses: &[u64], call: &mut [bool], built: &mut HashMap<BuiltKey, Dfa>,
                     syntax: &'static str, config: &DfaConfig) -> std::result::Result<Compiled, Split> {
        // Inline the non-recursive rules, callees first (`order` is a post-order of the calls,
        // so every callee not on a cycle comes before its callers), but for the ones kept.
        let mut inlined: HashMap<RuleId, Expr> = HashMap::new();
        let mut inside: HashMap<RuleId, Vec<u32>> = HashMap::new();
        let mut kept: Vec<RuleId> = Vec::new();
        for &r in order {
            let body = self.body(r).substitute(&|c| if call[c.as_usize()] { None } else { inlined.get(&c).cloned() });
            if !call[r.as_usize()] && r != start {
                let size = body.nfa_size_estimate(&mut HashMap::new());
                if size >= KEEP_ALONE || (uses[r.as_usize()] >= 2 && size >= KEEP_SHARED) {
                    call[r.as_usize()] = true;
                }
            }
            if call[r.as_usize()] || r == start {
                kept.push(r);
            }
            let mut within: Vec<u32> = Vec::new();
            for c in self.body(r).calls().into_iter().filter(|c| !call[c.as_usize()]) {
                within.push(c.as_u32());
                within.extend(inside.get(&c).into_iter().flatten());
            }
            within.sort_unstable();
            within.dedup();
            inside.insert(r, within);
            inlined.insert(r, body);
        }
        // The start rule first; the others in the order found.
        kept.sort_by_key(|&r| (r != start, order.iter().position(|&o| o == r)));
        let number: HashMap<RuleId, RuleId> =
            kept.iter().enumerate().map(|(i, &r)| (r, RuleId::new(i as u32))).collect();
        let too_large = |r: RuleId| move |e: GrammarError| match e {
            GrammarError::TooLarge { .. } => Split::At(r, e),
            e => Split::No(e),
        };
        // A rule past the estimate `to_dfa` refuses fails before any other is determinized.
        for &r in &kept {
            config.check_nfa_states(inlined[&r].nfa_size_estimate(&mut HashMap::new()), true).map_err(too_large(r))?;
        }
        let start_body = &inlined[&start];
        if kept.len() == 1 && !start_body.has_calls() {
            let dfa = start_body.to_dfa(config).map_err(too_large(start))?.ok_or_else(|| {
                Split::No(GrammarError::EmptyLanguage { detail: format!("the start rule '{}' matches no string", self.name(start)) })
            })?;
            return Ok(Compiled::Regular(dfa));
        }
        // Every kept rule's DFA first; a failure hands the ones built so far to the next attempt.
        let mut raw: Vec<(BuiltKey, Option<Dfa>)> = Vec::with_capacity(kept.len());
        for &r in &kept {
            let calls = inlined[&r].calls().iter().map(|c| (c.as_u32(), number.get(c).map_or(u32::MAX, |n| n.as_u32()))).collect();
            let key = (r.as_u32(), inside[&r].clone(), calls);
            let dfa = match built.remove(&key) {
                Some(d) => Some(d),
                None => match inlined[&r].renumber(&|c| number.get(&c).copied()).to_dfa(config) {
                    Ok(d) => d,
                    Err(e) => {
                        built.extend(raw.into_iter().filter_map(|(k, d)| d.map(|d| (k, d))));
                        return Err(too_large(r)(e));
                    }
                },
            };
            raw.push((key, dfa));
        }
        let mut rules = Vec::with_capacity(kept.len());
        for (&r, (_, dfa)) in kept.iter().zip(raw) {
            // No path at all, not even through calls: an unproductive rule, left with no state a
            // caller could enter (found unproductive below).
            let dfa = dfa.unwrap_or_else(|| crate::automata::calls::bytes_dfa(&[CALL_OPENER, CALL_OPENER]));
            rules.push(Rule::new(self.name(r).to_string(), dfa, self.memory(r)));
        }
        let mut rtn = Rtn { rules };
        rtn.analyse(syntax).map_err(Split::No)?;
        rtn.check_memory().map_err(Split::No)?;
        Ok(Compiled::Pushdown(rtn))
    }

    /// Marks as calls the largest callees `rule` inlines, until the estimate of what is left of
    /// it is under `config.max_states` NFA states; false when it inlines none, or when what is
    /// left is still estimated past twice that (the estimate runs about twice an NFA's size and
    /// a DFA is about as large as its NFA: another build would most likely fail the same way).
    fn split(&self, rule: RuleId, order: &[RuleId], call: &mut [bool], config: &DfaConfig) -> bool {
        let estimate = |e: &Expr| e.nfa_size_estimate(&mut HashMap::new());
        let inlined = self.inlined_into(rule, order, call);
        let mut callees: Vec<(u64, RuleId)> = self
            .body(rule)
            .calls()
            .into_iter()
            .filter(|c| !call[c.as_usize()])
            .map(|c| (inlined.get(&c).map_or(0, estimate), c))
            .collect();
        if callees.is_empty() {
            return false;
        }
        callees.sort_unstable_by(|a, b| b.cmp(a));
        let mut left = u64::MAX;
        for (_, c) in callees {
            call[c.as_usize()] = true;
            left = estimate(&self.body(rule).substitute(&|r| if call[r.as_usize()] { None } else { inlined.get(&r).cloned() }));
            if left < config.max_states as u64 {
                break;
            }
        }
        left <= (config.max_states as u64).saturating_mul(2)
    }

    /// The bodies of the rules `rule` inlines (directly or through others), with the rules
    /// `call` keeps left as calls; `order` is the build's post-order.
    fn inlined_into(&self, rule: RuleId, order: &[RuleId], call: &[bool]) -> HashMap<RuleId, Expr> {
        let mut wanted = vec![false; self.names.len()];
        let mut stack = vec![rule];
        while let Some(r) = stack.pop() {
            for c in self.body(r).calls() {
                if !call[c.as_usize()] && !wanted[c.as_usize()] {
                    wanted[c.as_usize()] = true;
                    stack.push(c);
                }
            }
        }
        let mut inlined: HashMap<RuleId, Expr> = HashMap::new();
        for &r in order.iter().filter(|r| wanted[r.as_usize()]) {
            let body = self.body(r).substitute(&|c| if call[c.as_usize()] { None } else { inlined.get(&c).cloned() });
            inlined.insert(r, body);
        }
        inlined
    }

    fn body(&self, rule: RuleId) -> &Expr {
        self.bodies[rule.as_usize()].as_ref().unwrap_or(&Expr::Empty)
    }

    /// The rules reachable from `start`, callees before callers (a depth-first post-order).
    fn reachable(&self, start: RuleId, syntax: &'static str) -> Result<Vec<RuleId>> {
        let mut state = vec![0u8; self.names.len()]; // 0 new, 1 on the path, 2 done
        let mut order = Vec::new();
        let mut stack: Vec<(RuleId, Vec<RuleId>, usize)> = Vec::new();
        let enter = |r: RuleId, this: &Self| -> Result<(RuleId, Vec<RuleId>, usize)> {
            match &this.bodies[r.as_usize()] {
                Some(b) => Ok((r, b.calls(), 0)),
                None => Err(GrammarError::invalid_grammar(syntax, 0, 0, Some(this.name(r)), "the rule is used but never defined")),
            }
        };
        state[start.as_usize()] = 1;
        stack.push(enter(start, self)?);
        while let Some((r, calls, i)) = stack.last_mut() {
            if *i < calls.len() {
                let c = calls[*i];
                *i += 1;
                if state[c.as_usize()] == 0 {
                    state[c.as_usize()] = 1;
                    let frame = enter(c, self)?;
                    stack.push(frame);
                }
            } else {
                let r = *r;
                state[r.as_usize()] = 2;
                order.push(r);
                stack.pop();
            }
        }
        Ok(order)
    }

    /// How many times each rule is called in the bodies of the rules in `order` (a call in a
    /// shared subexpression counted at each use).
    fn uses(&self, order: &[RuleId]) -> Vec<u64> {
        fn count(e: &Expr, memo: &mut HashMap<usize, Vec<(u32, u64)>>) -> Vec<(u32, u64)> {
            let key = match e {
                Expr::Call(r) => return vec![(r.as_u32(), 1)],
                Expr::Regex(_) | Expr::Dfa(_) | Expr::Empty => return Vec::new(),
                Expr::Concat(p) | Expr::Union(p) | Expr::Subsequence(p) => p.as_ptr() as usize,
                // A loop is one place in the automaton, however many times it is read; a counted
                // repeat is one copy of its inner language per count.
                Expr::Repeat(inner, min, max) => {
                    let copies = u64::from(max.unwrap_or(*min).max(1));
                    return count(inner, memo).into_iter().map(|(r, n)| (r, n.saturating_mul(copies))).collect();
                }
            };
            if let Some(hit) = memo.get(&key) {
                return hit.clone();
            }
            let parts: Vec<Vec<(u32, u64)>> = match e {
                Expr::Concat(p) | Expr::Union(p) => p.iter().map(|x| count(x, memo)).collect(),
                // A subsequence writes its separator between each two items.
                Expr::Subsequence(p) => {
                    let between = p.len().saturating_sub(2) as u64;
                    let mut parts: Vec<_> = p.iter().map(|x| count(x, memo)).collect();
                    if let Some(sep) = parts.first_mut() {
                        sep.iter_mut().for_each(|(_, n)| *n = n.saturating_mul(between));
                    }
                    parts
                }
                _ => Vec::new(),
            };
            let mut total: HashMap<u32, u64> = HashMap::new();
            for part in parts {
                for (r, n) in part {
                    let e = total.entry(r).or_insert(0);
                    *e = e.saturating_add(n);
                }
            }
            let out: Vec<(u32, u64)> = total.into_iter().collect();
            memo.insert(key, out.clone());
            out
        }
        let mut uses = vec![0u64; self.names.len()];
        let mut memo = HashMap::new();
        for &r in order {
            for (c, n) in count(self.body(r), &mut memo) {
                uses[c as usize] = uses[c as usize].saturating_add(n);
            }
        }
        uses
    }

    /// Which rules are on a cycle of calls (Tarjan's strongly connected components over the
    /// reachable rules).
    fn recursive(&self, order: &[RuleId]) -> Vec<bool> {
        let n = self.names.len();
        let calls: Vec<Vec<RuleId>> = (0..n).map(|r| self.bodies[r].as_ref().map_or_else(Vec::new, Expr::calls)).collect();
        let mut index = vec![u32::MAX; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut out = vec![false; n];
        let mut next = 0u32;
        for &root in order {
            if index[root.as_usize()] != u32::MAX {
                continue;
            }
            // Iterative Tarjan: (node, next edge).
            let mut work: Vec<(usize, usize)> = vec![(root.as_usize(), 0)];
            while let Some(&mut (v, ref mut e)) = work.last_mut() {
                if *e == 0 && index[v] == u32::MAX {
                    index[v] = next;
                    low[v] = next;
                    next += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                if *e < calls[v].len() {
                    let w = calls[v][*e].as_usize();
                    *e += 1;
                    if index[w] == u32::MAX {
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut members = Vec::new();
                    loop {
                        let w = stack.pop().unwrap_or(v);
                        on_stack[w] = false;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    let cyclic = members.len() > 1 || calls[v].iter().any(|c| c.as_usize() == v);
                    for w in members {
                        out[w] = cyclic;
                    }
                }
            }
        }
        out
    }
}

impl Expr {
    /// The same expression with every call's rule renamed by `to` (calls it has no name for
    /// stay as they are).
    pub(crate) fn renumber(&self, to: &dyn Fn(RuleId) -> Option<RuleId>) -> Expr {
        self.substitute(&|r| to(r).map(Expr::Call))
    }
}

/// What a rule set compiles to.
#[derive(Debug)]
pub enum Compiled {
    /// No recursion: one DFA, as a regex or a schema compiles.
    Regular(Dfa),
    /// Recursive rules: a pushdown grammar.
    Pushdown(Rtn),
}

/// One rule of a compiled pushdown grammar.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    /// The body's DFA over bytes, calls cut out (they are in `calls`).
    pub dfa: Dfa,
    /// Per state, the calls out of it: (rule called, state the call returns to).
    pub calls: Vec<Box<[(RuleId, StateId)]>>,
    /// Per state: can the rule still end from here (through bytes and calls of productive
    /// rules)?
    pub live: Vec<bool>,
    /// The rule has a finite string.
    pub productive: bool,
    /// The rule matches the empty string.
    pub nullable: bool,
    /// What the rule keeps at run time.
    pub memory: Memory,
}

impl Rule {
    fn new(name: String, with_calls: Dfa, memory: Memory) -> Rule {
        let calls = calls_of(&with_calls);
        let cut = with_calls.with_bytes_cut(&[CALL_OPENER]);
        // Keep the states reachable through bytes and call returns: the ones a call's digits
        // led through are never entered once the calls are read out.
        let mut keep = vec![false; cut.num_states()];
        let mut todo = vec![cut.start()];
        keep[cut.start().as_usize()] = true;
        while let Some(s) = todo.pop() {
            let returns = calls[s.as_usize()].iter().map(|&(_, ret)| ret);
            for t in returns.chain(cut.row(s).iter().copied().filter(|t| !t.is_dead())) {
                if !keep[t.as_usize()] {
                    keep[t.as_usize()] = true;
                    todo.push(t);
                }
            }
        }
        let (dfa, new_id) = cut.retain_states(&keep);
        let mut renumbered: Vec<Box<[(RuleId, StateId)]>> = vec![Box::new([]); dfa.num_states()];
        for (old, cs) in calls.into_iter().enumerate() {
            if keep[old] {
                renumbered[new_id[old].as_usize()] = cs.into_iter().map(|(r, ret)| (r, new_id[ret.as_usize()])).collect();
            }
        }
        let n = dfa.num_states();
        Rule { name, dfa, calls: renumbered, live: vec![true; n], productive: true, nullable: false, memory }
    }

    pub fn start(&self) -> StateId {
        self.dfa.start()
    }

    #[inline]
    pub fn is_accepting(&self, s: StateId) -> bool {
        self.dfa.is_accepting(s)
    }

    #[inline]
    pub fn calls_at(&self, s: StateId) -> &[(RuleId, StateId)] {
        &self.calls[s.as_usize()]
    }
}

/// A compiled pushdown grammar: rule 0 is the start.
#[derive(Debug)]
pub struct Rtn {
    pub rules: Vec<Rule>,
}

impl Rtn {
    pub fn start(&self) -> RuleId {
        RuleId::new(0)
    }

    #[inline]
    pub fn rule(&self, r: RuleId) -> &Rule {
        &self.rules[r.as_usize()]
    }

    pub fn memory_bytes(&self) -> usize {
        self.rules.iter().map(|r| r.dfa.memory_bytes() + r.calls.len() * 16 + r.live.len()).sum()
    }

    /// Checks what [`RtnBuilder::remember`] asks of rules that keep something.
    fn check_memory(&self) -> Result<()> {
        let broken = |rule: &Rule, what: &str| Err(GrammarError::invalid_grammar("pushdown rules", 0, 0, Some(&rule.name), what));
        if self.rules[0].memory != Memory::None {
            return broken(&self.rules[0], "the start rule cannot keep distinct elements");
        }
        for rule in &self.rules {
            let mut callees = rule.calls.iter().flat_map(|c| c.iter()).map(|&(c, _)| c);
            match rule.memory {
                Memory::None => {
                    if callees.any(|c| self.rule(c).memory == Memory::Element) {
                        return broken(rule, "only an array of distinct elements may call its element");
                    }
                }
                Memory::Distinct => {
                    let first = rule.calls.iter().flat_map(|c| c.iter()).map(|&(c, _)| c).next();
                    if callees.any(|c| Some(c) != first || self.rule(c).memory != Memory::Element) {
                        return broken(rule, "an array of distinct elements may only call its element");
                    }
                }
                Memory::Element => {
                    if rule.calls.iter().any(|c| !c.is_empty()) || rule.nullable {
                        return broken(rule, "an element of an array of distinct elements must read a byte and call no rule");
                    }
                    let ends_open = (0..rule.dfa.num_states()).map(StateId::from_index).any(|s| rule.is_accepting(s) && rule.dfa.row(s).iter().any(|t| !t.is_dead()));
                    if ends_open {
                        return broken(rule, "an element of an array of distinct elements must end where it may end");
                    }
                }
            }
        }
        Ok(())
    }

    /// Keeps only the strings whose bytes are all in `allowed` (a vocabulary's producible bytes
    /// and a structure's markers: text needing another byte can never be written), then finds
    /// the productive, live and nullable parts again where a rule lost a transition (the
    /// build has found them for the rules as they were). [`GrammarError::NotCompletable`] when
    /// the start rule has no string left.
    pub fn keep_bytes(&mut self, allowed: &[bool; 256], syntax: &'static str) -> Result<()> {
        let removed: Vec<u8> = (0..=255u8).filter(|&b| !allowed[b as usize]).collect();
        if removed.is_empty() {
            return Ok(());
        }
        // A rule that reads none of the removed bytes keeps its table; when no rule reads one,
        // the build's analysis stands.
        let mut cut = false;
        for rule in &mut self.rules {
            crate::util::background::pause_point();
            if rule.dfa.reads_any_of(&removed) {
                rule.dfa = rule.dfa.with_bytes_cut(&removed);
                cut = true;
            }
        }
        if !cut {
            return Ok(());
        }
        match self.analyse(syntax) {
            Err(GrammarError::EmptyLanguage { .. }) => Err(GrammarError::NotCompletable {
                detail: format!("every string of the start rule '{}' needs a byte that no token contains", self.rules[0].name),
            }),
            other => other,
        }
    }

    /// Productivity, liveness, nullability, then the left-recursion check.
    fn analyse(&mut self, syntax: &'static str) -> Result<()> {
        self.find_productive();
        if !self.rules[0].productive {
            return Err(GrammarError::EmptyLanguage {
                detail: format!("the start rule '{}' has no finite string (every way through it recurses forever)", self.rules[0].name),
            });
        }
        // Calls of unproductive rules can never return: drop them, then find the live states.
        let productive: Vec<bool> = self.rules.iter().map(|r| r.productive).collect();
        for rule in &mut self.rules {
            for calls in &mut rule.calls {
                if calls.iter().any(|(c, _)| !productive[c.as_usize()]) {
                    *calls = calls.iter().copied().filter(|(c, _)| productive[c.as_usize()]).collect();
                }
            }
            crate::util::background::pause_point();
            rule.live = rule_liveness(rule);
        }
        self.find_nullable();
        self.check_left_recursion(syntax)
    }

    /// A rule is productive when an accepting state is reachable from its start through bytes
    /// and calls of productive rules (a least fixpoint).
    fn find_productive(&mut self) {
        let n = self.rules.len();
        let mut productive = vec![false; n];
        loop {
            let mut changed = false;
            for r in 0..n {
                if productive[r] {
                    continue;
                }
                crate::util::background::pause_point();
                let rule = &self.rules[r];
                if reaches_accept(rule, |c| productive[c.as_usize()], true) {
                    productive[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for (rule, p) in self.rules.iter_mut().zip(productive) {
            rule.productive = p;
        }
    }

    /// A rule is nullable when an accepting state is reachable from its start through calls of
    /// nullable rules alone.
    fn find_nullable(&mut self) {
        let n = self.rules.len();
        let mut nullable = vec![false; n];
        loop {
            let mut changed = false;
            for r in 0..n {
                crate::util::background::pause_point();
                if !nullable[r] && reaches_accept(&self.rules[r], |c| nullable[c.as_usize()], false) {
                    nullable[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for (rule, v) in self.rules.iter_mut().zip(nullable) {
            rule.nullable = v;
        }
    }

    /// Refuses a rule that can call itself, directly or through others, before any byte is read.
    fn check_left_recursion(&self, syntax: &'static str) -> Result<()> {
        let n = self.rules.len();
        // left[r]: the rules r may call before reading a byte.
        let left: Vec<Vec<RuleId>> = (0..n).map(|r| self.first_calls(RuleId::new(r as u32))).collect();
        let mut state = vec![0u8; n];
        for root in 0..n {
            let mut path = Vec::new();
            if let Some(cycle) = find_cycle(root, &left, &mut state, &mut path) {
                let names: Vec<&str> = cycle.iter().map(|&r| self.rules[r].name.as_str()).collect();
                return Err(GrammarError::invalid_grammar(
                    syntax,
                    0,
                    0,
                    Some(names[0]),
                    format!("left recursion ({}): a rule must read something before it uses itself again", names.join(" -> ")),
                ));
            }
        }
        Ok(())
    }

    /// The rules `r` may call before reading a byte: calls at its start, and at the states
    /// reached from there through calls of nullable rules.
    fn first_calls(&self, r: RuleId) -> Vec<RuleId> {
        let rule = self.rule(r);
        let mut seen = vec![false; rule.dfa.num_states()];
        let mut todo = vec![rule.start()];
        seen[rule.start().as_usize()] = true;
        let mut out = Vec::new();
        while let Some(s) = todo.pop() {
            for &(c, ret) in rule.calls_at(s) {
                if !out.contains(&c) {
                    out.push(c);
                }
                if self.rule(c).nullable && !seen[ret.as_usize()] {
                    seen[ret.as_usize()] = true;
                    todo.push(ret);
                }
            }
        }
        out
    }
}

/// Whether an accepting state of `rule` is reachable from its start through calls of rules
/// for which `ok` holds, and through bytes when `bytes` is set.
fn reaches_accept(rule: &Rule, ok: impl Fn(RuleId) -> bool, bytes: bool) -> bool {
    let n = rule.dfa.num_states();
    let mut seen = vec![false; n];
    let mut todo = vec![rule.start()];
    seen[rule.start().as_usize()] = true;
    while let Some(s) = todo.pop() {
        if rule.is_accepting(s) {
            return true;
        }
        let mut push = |t: StateId, todo: &mut Vec<StateId>| {
            if !t.is_dead() && !seen[t.as_usize()] {
                seen[t.as_usize()] = true;
                todo.push(t);
            }
        };
        for &(c, ret) in rule.calls_at(s) {
            if ok(c) {
                push(ret, &mut todo);
            }
        }
        if bytes {
            for &t in rule.dfa.row(s) {
                push(t, &mut todo);
            }
        }
    }
    false
}

/// The states of `rule` from which an accepting state is reachable through bytes and its
/// (remaining, productive) calls.
fn rule_liveness(rule: &Rule) -> Vec<bool> {
    let n = rule.dfa.num_states();
    let incoming = Incoming::new(rule);
    let mut live: Vec<bool> = (0..n).map(|s| rule.is_accepting(StateId::from_index(s))).collect();
    let mut todo: Vec<usize> = (0..n).filter(|&s| live[s]).collect();
    while let Some(t) = todo.pop() {
        for &(s, _) in incoming.to(t) {
            if !live[s as usize] {
                live[s as usize] = true;
                todo.push(s as usize);
            }
        }
    }
    live
}

/// A cycle through `v` in `edges` (depth-first; `state`: 0 new, 1 on the path, 2 done).
fn find_cycle(v: usize, edges: &[Vec<RuleId>], state: &mut [u8], path: &mut Vec<usize>) -> Option<Vec<usize>> {
    if state[v] == 2 {
        return None;
    }
    if state[v] == 1 {
        let at = path.iter().position(|&p| p == v).unwrap_or(0);
        let mut cycle = path[at..].to_vec();
        cycle.push(v);
        return Some(cycle);
    }
    state[v] = 1;
    path.push(v);
    for &w in &edges[v] {
        if let Some(c) = find_cycle(w.as_usize(), edges, state, path) {
            return Some(c);
        }
    }
    path.pop();
    state[v] = 2;
    None
}
