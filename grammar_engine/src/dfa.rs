//! Regex to a compact byte DFA whose every state can still reach acceptance.
//!
//! `regex-automata` determinizes the pattern (anchored at the start, Unicode-aware, UTF-8 only).
//! We then walk its states once, keep those from which a full match is still reachable, and
//! store them in our own table: state ids are dense `u32`s, `DEAD` stands for "no valid
//! continuation", and a state is *accepting* when the bytes read so far fully match. Owning the
//! table lets the token index, jump-forward and repair read transitions without going through
//! `regex-automata`'s match-delay conventions.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use regex_automata::hybrid::{self, LazyStateID};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::{Anchored, Input, MatchKind};
use regex_syntax::ast::ErrorKind as AstErrorKind;

use crate::error::{GrammarError, Result};
use crate::int_hash::IntMap;
use crate::regex_memo::RegexMemo;
use crate::subset;

/// The transition target meaning "this byte makes a full match impossible".
pub const DEAD: u32 = u32::MAX;

/// Largest transition table (states × byte classes) [`Dfa::minimize`] works on.
const MINIMIZE_MAX_ENTRIES: usize = 4_000_000;

/// Size limits for compiling a regex.
#[derive(Debug, Clone)]
pub struct DfaConfig {
    /// Most DFA states kept after pruning.
    pub max_states: usize,
    /// Heap limit, in bytes, for building an NFA and determinizing it (regex-automata's
    /// Thompson NFA, the glued NFA of a grammar expression, the subset construction's sets).
    pub build_size_limit: usize,
    /// When set, determinization and products stop with a typed `TooLarge` error once it has
    /// passed (a pattern such as `.*a.{20}b` grows exponentially and would otherwise spend
    /// tens of seconds before the state limit triggers).
    pub deadline: Option<Deadline>,
    /// When set, an NFA with more states than this many times `max_states` is refused before
    /// determinizing (a typed `TooLarge` error). Measured on JSONSchemaBench's slowest schemas:
    /// of 46 automaton expressions past 4× the state limit none fitted, of 35 between 2× and 4×
    /// one did, and each took up to 3 s to find out. The JSON Schema compiler sets 2, since a
    /// more restricted retry follows.
    pub nfa_states_factor: Option<usize>,
    /// When set, the most states a determinization under this config reached: the live states
    /// of the DFA it built, or how many it had made when a limit stopped it. The JSON Schema
    /// compiler's restriction ladder predicts from it whether a smaller attempt can fit.
    pub states_reached: Option<Arc<AtomicU64>>,
    /// When set and raised, determinization and products stop as at the deadline. The JSON
    /// Schema compiler's restriction ladder raises it for attempts whose answer it no longer
    /// needs.
    pub cancel: Option<Arc<AtomicBool>>,
    /// When set, [`Dfa::from_regex`] builds each regex text once and copies it afterwards.
    /// The JSON Schema compiler sets one per compilation (see [`RegexMemo`]).
    pub memo: Option<Arc<RegexMemo>>,
}

impl Default for DfaConfig {
    fn default() -> Self {
        DfaConfig {
            max_states: 100_000,
            build_size_limit: 512 << 20,
            deadline: None,
            nfa_states_factor: None,
            states_reached: None,
            cancel: None,
            memo: None,
        }
    }
}

/// A point in time past which a compilation gives up, with the limit it came from (for the
/// error message).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub at: Instant,
    pub limit_ms: u64,
}

impl Deadline {
    /// `limit_ms` milliseconds from now.
    pub fn after_ms(limit_ms: u64) -> Deadline {
        Deadline { at: Instant::now() + Duration::from_millis(limit_ms), limit_ms }
    }
}

impl DfaConfig {
    /// With `nfa_states_factor` set: a typed `TooLarge` error when an NFA of `states` states
    /// (`estimated`: an estimate, allowed twice the room, see [`crate::algebra::Expr::to_dfa`])
    /// is past that many times `max_states`.
    pub(crate) fn check_nfa_states(&self, states: u64, estimated: bool) -> Result<()> {
        let Some(factor) = self.nfa_states_factor else { return Ok(()) };
        let most = self.max_states.saturating_mul(factor).saturating_mul(if estimated { 2 } else { 1 });
        if states <= most as u64 {
            return Ok(());
        }
        let has = if estimated { "would have about" } else { "has" };
        Err(GrammarError::TooLarge {
            what: "regex DFA",
            limit: self.max_states,
            detail: format!("its NFA {has} {states} states, past {factor}× the DFA state limit"),
        })
    }

    /// Records that a determinization reached `states` states (see `states_reached`).
    pub(crate) fn note_states(&self, states: usize) {
        if let Some(reached) = &self.states_reached {
            reached.fetch_max(states as u64, Ordering::Relaxed);
        }
    }

    /// A typed error when the deadline (if any) has passed or the work was cancelled. Cheap
    /// enough to call every few hundred states.
    pub(crate) fn check_deadline(&self, what: &str) -> Result<()> {
        if self.cancelled() {
            return Err(GrammarError::TooLarge {
                what: "compile time (ms)",
                limit: self.deadline.map_or(0, |d| d.limit_ms as usize),
                detail: format!("cancelled while building {what}"),
            });
        }
        match self.deadline {
            Some(d) if Instant::now() > d.at => Err(GrammarError::TooLarge {
                what: "compile time (ms)",
                limit: d.limit_ms as usize,
                detail: format!("gave up while building {what}"),
            }),
            _ => Ok(()),
        }
    }

    /// Most raw states a determinization over `stride` byte classes makes before it gives up:
    /// twice `max_states` (minimizing may merge states), but only `max_states` (and 64) once
    /// the table is too large to minimize, since it will not shrink below the limit then (only pruning
    /// could: it dropped a single state in each of the 1,838 determinizations past 2,000
    /// states of JSONSchemaBench's slowest schemas).
    pub(crate) fn raw_state_limit(&self, stride: usize) -> usize {
        let unminimized = MINIMIZE_MAX_ENTRIES / stride.max(1);
        let limit = self.max_states.saturating_mul(2).saturating_add(64);
        limit.min(unminimized.max(self.max_states.saturating_add(64)))
    }

    /// The error of a determinization that reached `states` states and stopped (noted as
    /// reached).
    pub(crate) fn determinization_overflow(&self, states: usize) -> GrammarError {
        self.note_states(states);
        GrammarError::TooLarge {
            what: "regex DFA",
            limit: self.max_states,
            detail: format!("more than {states} states while determinizing"),
        }
    }

    /// Notes the states of a finished determinization; a typed error past the state limit.
    pub(crate) fn check_built(&self, dfa: &Dfa) -> Result<()> {
        self.note_states(dfa.num_states());
        if dfa.num_states() > self.max_states {
            return Err(GrammarError::TooLarge {
                what: "regex DFA",
                limit: self.max_states,
                detail: format!("{} live states", dfa.num_states()),
            });
        }
        Ok(())
    }

    /// This config with a memo: its own, or a new one (for one compilation).
    pub(crate) fn with_memo(&self) -> DfaConfig {
        DfaConfig { memo: Some(self.memo.clone().unwrap_or_default()), ..self.clone() }
    }

    /// Whether the cancel flag (if any) is raised.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// A DFA over bytes with only live states. State 0 is the start state.
#[derive(Debug, Clone)]
pub struct Dfa {
    classes: [u8; 256],
    /// Number of byte classes: the row length of `trans`.
    stride: usize,
    trans: Vec<u32>,
    accepting: Vec<bool>,
    /// Fewest bytes from each state to an accepting state.
    byte_distance: Vec<u32>,
    /// One byte of each class, and the class sizes, for enumerating transitions.
    class_rep: Vec<u8>,
    class_size: Vec<u16>,
}

impl Dfa {
    /// Compiles `pattern` with full-match semantics: a byte string is accepted when the whole
    /// string matches.
    pub fn from_regex(pattern: &str, config: &DfaConfig) -> Result<Dfa> {
        Self::shared_from_regex(pattern, config).map(Arc::unwrap_or_clone)
    }

    /// [`Dfa::from_regex`], shared with the config's memo (if any) rather than copied.
    pub(crate) fn shared_from_regex(pattern: &str, config: &DfaConfig) -> Result<Arc<Dfa>> {
        let Some(memo) = &config.memo else { return Self::build_regex(pattern, config).map(Arc::new) };
        if let Some(kept) = memo.get(pattern) {
            let Some(dfa) = kept else { return Err(no_full_match()) };
            config.check_built(&dfa)?;
            return Ok(dfa);
        }
        match Self::build_regex(pattern, config) {
            Ok(dfa) => Ok(memo.put(pattern, dfa)),
            Err(e @ GrammarError::EmptyLanguage { .. }) => {
                memo.put_empty(pattern);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// [`Dfa::from_regex`], determinized by the lazy DFA whatever the pattern (to check the
    /// subset construction against it).
    #[cfg(test)]
    pub(crate) fn from_regex_by_lazy_dfa(pattern: &str, config: &DfaConfig) -> Result<Dfa> {
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().which_captures(WhichCaptures::None))
            .build_from_hir(&parse(pattern)?)
            .map_err(|e| build_error(&e.to_string(), config))?;
        Self::from_lazy_dfa(&nfa, config)
    }

    /// [`Dfa::from_regex`] without the memo.
    fn build_regex(pattern: &str, config: &DfaConfig) -> Result<Dfa> {
        let hir = parse(pattern)?;
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(Some(config.build_size_limit)),
            )
            .build_from_hir(&hir)
            .map_err(|e| build_error(&e.to_string(), config))?;
        Self::from_nfa(&nfa, config)
    }

    /// Determinizes an NFA (anchored, full-match semantics), prunes and minimizes the result.
    ///
    /// The state limit ([`DfaConfig::raw_state_limit`]) and the deadline are checked as
    /// states appear. An NFA without look-around assertions goes through [`subset`]; one with
    /// them through `regex-automata`'s lazy DFA ([`Dfa::from_lazy_dfa`]), which tracks what
    /// an assertion needs to see.
    pub(crate) fn from_nfa(nfa: &thompson::NFA, config: &DfaConfig) -> Result<Dfa> {
        config.check_nfa_states(nfa.states().len() as u64, false)?;
        if !nfa.look_set_any().is_empty() {
            return Self::from_lazy_dfa(nfa, config);
        }
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            classes[b as usize] = nfa.byte_classes().get(b);
        }
        let reps = subset::representatives(&classes);
        subset::determinize(
            &subset::ThompsonView::new(nfa),
            nfa.start_anchored().as_u32(),
            classes,
            &reps,
            config,
        )
    }

    /// [`Dfa::from_nfa`] by `regex-automata`'s lazy DFA, driven breadth-first from here. Its
    /// cache holds every state (it is never cleared: a clear would invalidate the ids held
    /// here, so it gives up instead, which is a size error).
    fn from_lazy_dfa(nfa: &thompson::NFA, config: &DfaConfig) -> Result<Dfa> {
        let lazy = hybrid::dfa::DFA::builder()
            .configure(
                hybrid::dfa::Config::new()
                    .match_kind(MatchKind::All)
                    .cache_capacity(config.build_size_limit)
                    .minimum_cache_clear_count(Some(0)),
            )
            .build_from_nfa(nfa.clone())
            .map_err(|e| build_error(&e.to_string(), config))?;
        let mut cache = lazy.create_cache();
        let cache_err = |e: hybrid::CacheError| build_error(&format!("determinization exceeded its memory limit: {e}"), config);
        let start = lazy
            .start_state_forward(&mut cache, &Input::new("").anchored(Anchored::Yes))
            .map_err(|e| GrammarError::UnsupportedRegex { construct: "start state".into(), reason: e.to_string() })?;
        let ra_classes = lazy.byte_classes();
        let mut classes = [0u8; 256];
        let mut stride = 0usize;
        for b in 0..=255u8 {
            classes[b as usize] = ra_classes.get(b);
            stride = stride.max(ra_classes.get(b) as usize + 1);
        }
        let (class_rep, _) = class_tables(&classes, stride);
        let limit = config.raw_state_limit(stride);

        // Breadth-first walk over the lazy DFA's non-dead states.
        let mut ids: IntMap<LazyStateID, u32> = IntMap::default();
        let mut order: Vec<LazyStateID> = Vec::new();
        let mut raw_trans: Vec<u32> = Vec::new();
        ids.insert(start, 0);
        order.push(start);
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            if i % 256 == 0 {
                config.check_deadline("a DFA").inspect_err(|_| config.note_states(order.len()))?;
            }
            for &rep in class_rep.iter().take(stride) {
                let next = lazy.next_state(&mut cache, s, rep).map_err(cache_err)?;
                if next.is_dead() || next.is_quit() {
                    raw_trans.push(DEAD);
                    continue;
                }
                let id = match ids.get(&next) {
                    Some(&id) => id,
                    None => {
                        if order.len() >= limit {
                            return Err(config.determinization_overflow(order.len()));
                        }
                        let id = order.len() as u32;
                        ids.insert(next, id);
                        order.push(next);
                        id
                    }
                };
                raw_trans.push(id);
            }
        }
        let mut accepting = Vec::with_capacity(order.len());
        for &s in &order {
            accepting.push(lazy.next_eoi_state(&mut cache, s).map_err(cache_err)?.is_match());
        }
        config.check_deadline("a DFA")?;
        let dfa = Dfa::prune(classes, stride, &raw_trans, &accepting)
            .ok_or_else(no_full_match)?
            .minimize();
        config.check_built(&dfa)?;
        Ok(dfa)
    }

    /// A pruned, minimized DFA from a raw transition table (state 0 = start, rows of `stride`
    /// targets indexed by `classes`, [`DEAD`] for no transition); `None` when no string is
    /// accepted. Used by the automaton algebra, whose products come out in this form.
    pub(crate) fn from_table(classes: [u8; 256], stride: usize, trans: &[u32], accepting: &[bool]) -> Option<Dfa> {
        Dfa::prune(classes, stride, trans, accepting).map(Dfa::minimize)
    }

    /// The byte class of `byte`: transitions are stored per class.
    #[inline]
    pub(crate) fn class(&self, byte: u8) -> usize {
        self.classes[byte as usize] as usize
    }

    /// The targets of `state`, one per byte class ([`DEAD`] for none).
    #[inline]
    pub(crate) fn row(&self, state: u32) -> &[u32] {
        &self.trans[state as usize * self.stride..(state as usize + 1) * self.stride]
    }

    /// Keeps the states of a raw table (state 0 = start) from which an accepting state is
    /// reachable, renumbered in order with the start first, and computes byte distances to
    /// acceptance. `None` when the start state cannot reach acceptance.
    fn prune(classes: [u8; 256], stride: usize, raw_trans: &[u32], accepting: &[bool]) -> Option<Dfa> {
        let n = accepting.len();
        // Predecessors in CSR form: `rev[rev_start[t]..rev_start[t + 1]]` lead to `t`.
        let mut rev_start = vec![0u32; n + 1];
        for &t in &raw_trans[..n * stride] {
            if t != DEAD {
                rev_start[t as usize + 1] += 1;
            }
        }
        for i in 1..=n {
            rev_start[i] += rev_start[i - 1];
        }
        let mut fill = rev_start.clone();
        let mut rev = vec![0u32; rev_start[n] as usize];
        for s in 0..n {
            for &t in &raw_trans[s * stride..(s + 1) * stride] {
                if t != DEAD {
                    rev[fill[t as usize] as usize] = s as u32;
                    fill[t as usize] += 1;
                }
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue: VecDeque<u32> = VecDeque::new();
        for s in 0..n {
            if accepting[s] {
                dist[s] = 0;
                queue.push_back(s as u32);
            }
        }
        while let Some(t) = queue.pop_front() {
            for &s in &rev[rev_start[t as usize] as usize..rev_start[t as usize + 1] as usize] {
                if dist[s as usize] == u32::MAX {
                    dist[s as usize] = dist[t as usize] + 1;
                    queue.push_back(s);
                }
            }
        }
        if dist.first().copied().unwrap_or(u32::MAX) == u32::MAX {
            return None;
        }
        let mut new_id = vec![DEAD; n];
        let mut live = Vec::new();
        for s in 0..n {
            if dist[s] != u32::MAX {
                new_id[s] = live.len() as u32;
                live.push(s);
            }
        }
        let mut trans = Vec::with_capacity(live.len() * stride);
        for &s in &live {
            for &t in &raw_trans[s * stride..(s + 1) * stride] {
                trans.push(if t == DEAD { DEAD } else { new_id[t as usize] });
            }
        }
        let (class_rep, class_size) = class_tables(&classes, stride);
        Some(Dfa {
            classes,
            stride,
            trans,
            accepting: live.iter().map(|&s| accepting[s]).collect(),
            byte_distance: live.iter().map(|&s| dist[s]).collect(),
            class_rep,
            class_size,
        })
    }

    /// Merges equivalent states (Hopcroft's partition refinement). Fewer states means fewer
    /// rows to index: Unicode classes and counted repeats leave many duplicates behind, and each
    /// free-text state costs a full walk of the token trie. Skipped for tables of more than
    /// [`MINIMIZE_MAX_ENTRIES`] transitions.
    pub fn minimize(self) -> Dfa {
        let n = self.num_states();
        let k = self.stride;
        if n <= 1 || n.saturating_mul(k) > MINIMIZE_MAX_ENTRIES {
            return self;
        }
        // State n is an explicit dead sink, so every state has a transition on every class.
        let total = n + 1;
        let target = |s: usize, c: usize| -> usize {
            if s == n {
                return n;
            }
            let t = self.trans[s * k + c];
            if t == DEAD { n } else { t as usize }
        };
        // Predecessors by class, in CSR form: pred[pred_start[c*total+t]..] = states s with
        // s --c--> t.
        let mut counts = vec![0u32; k * total + 1];
        for s in 0..total {
            for c in 0..k {
                counts[c * total + target(s, c) + 1] += 1;
            }
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let pred_start = counts.clone();
        let mut fill = counts;
        let mut pred = vec![0u32; k * total];
        for s in 0..total {
            for c in 0..k {
                let slot = &mut fill[c * total + target(s, c)];
                pred[*slot as usize] = s as u32;
                *slot += 1;
            }
        }
        let mut part = Partition::new(total, |s| s < n && self.accepting[s]);
        let mut queued = vec![false; 0];
        let mut work: Vec<(u32, u32)> = Vec::new();
        let ensure = |queued: &mut Vec<bool>, blocks: usize| {
            if queued.len() < blocks * k {
                queued.resize(blocks * k, false);
            }
        };
        ensure(&mut queued, part.num_blocks());
        // Splitting by one of two complementary blocks splits as the other would (Hopcroft):
        // the smaller initial block is enough, which keeps the dead sink's long predecessor
        // lists out of the work unless a split makes its block the smaller half.
        let first = (0..part.num_blocks()).min_by_key(|&b| part.size(b)).unwrap_or(0);
        for c in 0..k {
            queued[first * k + c] = true;
            work.push((first as u32, c as u32));
        }
        let mut touched: Vec<u32> = Vec::new();
        let mut members: Vec<u32> = Vec::new();
        while let Some((b, c)) = work.pop() {
            queued[b as usize * k + c as usize] = false;
            // Mark every state that moves into block b on class c.
            touched.clear();
            members.clear();
            members.extend_from_slice(part.members(b as usize));
            for &t in &members {
                let lo = pred_start[c as usize * total + t as usize] as usize;
                let hi = pred_start[c as usize * total + t as usize + 1] as usize;
                for &s in &pred[lo..hi] {
                    if part.mark(s as usize) {
                        touched.push(part.block_of(s as usize) as u32);
                    }
                }
            }
            touched.sort_unstable();
            touched.dedup();
            for &y in &touched {
                if let Some(new) = part.split(y as usize) {
                    ensure(&mut queued, part.num_blocks());
                    let (small, large_size) = (part.size(new), part.size(y as usize));
                    for d in 0..k {
                        if queued[y as usize * k + d] {
                            queued[new * k + d] = true;
                            work.push((new as u32, d as u32));
                        } else {
                            let pick = if small <= large_size { new } else { y as usize };
                            queued[pick * k + d] = true;
                            work.push((pick as u32, d as u32));
                        }
                    }
                }
            }
        }
        if part.num_blocks() == total {
            return self;
        }
        // Renumber live blocks in order of their first state, so the start stays state 0.
        let dead_block = part.block_of(n);
        let mut renum = vec![DEAD; part.num_blocks()];
        let mut reps = Vec::new();
        for s in 0..n {
            let b = part.block_of(s);
            if b != dead_block && renum[b] == DEAD {
                renum[b] = reps.len() as u32;
                reps.push(s);
            }
        }
        let mut trans = Vec::with_capacity(reps.len() * k);
        for &s in &reps {
            for c in 0..k {
                let t = target(s, c);
                let b = part.block_of(t);
                trans.push(if b == dead_block { DEAD } else { renum[b] });
            }
        }
        Dfa {
            classes: self.classes,
            stride: self.stride,
            trans,
            accepting: reps.iter().map(|&s| self.accepting[s]).collect(),
            byte_distance: reps.iter().map(|&s| self.byte_distance[s]).collect(),
            class_rep: self.class_rep,
            class_size: self.class_size,
        }
    }

    /// The same language without the strings that use a byte outside `allowed`: transitions on
    /// those bytes are removed and states that can no longer reach acceptance are pruned.
    /// `None` when nothing is left. Used to drop bytes that no token of a vocabulary contains.
    pub fn restrict_bytes(&self, allowed: &[bool; 256]) -> Option<Dfa> {
        // Refine the byte classes so no class mixes allowed and removed bytes.
        let mut key_to_class: HashMap<(u8, bool), u8> = HashMap::new();
        let mut classes = [0u8; 256];
        for b in 0..256usize {
            let key = (self.classes[b], allowed[b]);
            let next_id = key_to_class.len() as u8;
            classes[b] = *key_to_class.entry(key).or_insert(next_id);
        }
        let stride = key_to_class.len();
        let mut class_old = vec![(0u8, false); stride];
        for (&key, &c) in &key_to_class {
            class_old[c as usize] = key;
        }
        let mut raw = Vec::with_capacity(self.num_states() * stride);
        for s in 0..self.num_states() {
            for &(old, ok) in &class_old {
                raw.push(if ok { self.trans[s * self.stride + old as usize] } else { DEAD });
            }
        }
        Dfa::prune(classes, stride, &raw, &self.accepting).map(Dfa::minimize)
    }

    /// The same table with every transition on `removed` bytes cut, and nothing else changed:
    /// the states keep their ids, acceptance and byte distances (those of this DFA's language),
    /// and no state is pruned. A structure's grammar walks ordinary tokens through this copy, so
    /// the bytes that stand for special tokens can only be read by those tokens.
    pub(crate) fn with_bytes_cut(&self, removed: &[u8]) -> Dfa {
        let mut key_to_class: HashMap<(u8, bool), u8> = HashMap::new();
        let mut classes = [0u8; 256];
        for (b, class) in classes.iter_mut().enumerate() {
            let key = (self.classes[b], removed.contains(&(b as u8)));
            let next_id = key_to_class.len() as u8;
            *class = *key_to_class.entry(key).or_insert(next_id);
        }
        let stride = key_to_class.len();
        let mut class_old = vec![(0u8, false); stride];
        for (&key, &c) in &key_to_class {
            class_old[c as usize] = key;
        }
        let mut trans = Vec::with_capacity(self.num_states() * stride);
        for s in 0..self.num_states() {
            for &(old, cut) in &class_old {
                trans.push(if cut { DEAD } else { self.trans[s * self.stride + old as usize] });
            }
        }
        let (class_rep, class_size) = class_tables(&classes, stride);
        Dfa {
            classes,
            stride,
            trans,
            accepting: self.accepting.clone(),
            byte_distance: self.byte_distance.clone(),
            class_rep,
            class_size,
        }
    }

    /// True when some live transition reads byte `b`.
    pub fn uses_byte(&self, b: u8) -> bool {
        let c = self.classes[b as usize] as usize;
        (0..self.num_states()).any(|s| self.trans[s * self.stride + c] != DEAD)
    }

    pub const fn start(&self) -> u32 {
        0
    }

    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    /// The state after reading `byte` in `state`, or [`DEAD`].
    #[inline(always)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * self.stride + self.classes[byte as usize] as usize]
    }

    /// Walks `bytes` from `state`; [`DEAD`] as soon as one byte leaves the language.
    #[inline]
    pub fn walk(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            state = self.next(state, b);
            if state == DEAD {
                return DEAD;
            }
        }
        state
    }

    /// True when the bytes that led to `state` fully match.
    #[inline]
    pub fn is_accepting(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// Fewest bytes from `state` to a full match.
    pub fn byte_distance(&self, state: u32) -> u32 {
        self.byte_distance[state as usize]
    }

    /// Calls `f(byte, next)` for every byte with a live transition out of `state`.
    pub fn for_each_transition(&self, state: u32, mut f: impl FnMut(u8, u32)) {
        let row = &self.trans[state as usize * self.stride..(state as usize + 1) * self.stride];
        for b in 0..=255u8 {
            let t = row[self.classes[b as usize] as usize];
            if t != DEAD {
                f(b, t);
            }
        }
    }

    /// The longest byte string every full match continuing from `state` begins with: follow
    /// the state's only live byte while there is exactly one and the state is not accepting.
    pub fn forced_bytes(&self, mut state: u32) -> Vec<u8> {
        let mut out = Vec::new();
        // A forced chain cannot revisit a state (it would never accept), so it is shorter
        // than the number of states.
        while out.len() <= self.num_states() && !self.is_accepting(state) {
            let row = &self.trans[state as usize * self.stride..(state as usize + 1) * self.stride];
            let mut only: Option<(u8, u32)> = None;
            let mut count = 0usize;
            for (c, &t) in row.iter().enumerate() {
                if t != DEAD {
                    count += self.class_size[c] as usize;
                    only = Some((self.class_rep[c], t));
                }
            }
            match only {
                Some((b, t)) if count == 1 => {
                    out.push(b);
                    state = t;
                }
                _ => break,
            }
        }
        out
    }

    /// Every string of a finite language, in depth-first byte order, or `None` when the
    /// language is infinite or has more than `max` strings. Each state is live (it reaches a
    /// match), so a cycle on the current path means infinitely many strings.
    pub(crate) fn strings(&self, max: usize) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut on_path = vec![false; self.num_states()];
        self.list_from(self.start(), &mut Vec::new(), &mut on_path, max, &mut out).then_some(out)
    }

    fn list_from(&self, s: u32, path: &mut Vec<u8>, on_path: &mut [bool], max: usize, out: &mut Vec<Vec<u8>>) -> bool {
        if on_path[s as usize] || path.len() > 4096 {
            return false;
        }
        if self.is_accepting(s) {
            if out.len() == max {
                return false;
            }
            out.push(path.clone());
        }
        on_path[s as usize] = true;
        let mut edges = Vec::new();
        self.for_each_transition(s, |b, t| edges.push((b, t)));
        let ok = edges.into_iter().all(|(b, t)| {
            path.push(b);
            let ok = self.list_from(t, path, on_path, max, out);
            path.pop();
            ok
        });
        on_path[s as usize] = false;
        ok
    }

    pub fn memory_bytes(&self) -> usize {
        256 + self.trans.len() * 4 + self.accepting.len() + self.byte_distance.len() * 4 + self.class_rep.len() * 3
    }
}

/// A partition of `0..n` into blocks, each a contiguous range of `elems`, with marking: marked
/// members are swapped to the front of their block, and `split` makes them a block of their own.
struct Partition {
    elems: Vec<u32>,
    loc: Vec<u32>,
    block: Vec<u32>,
    start: Vec<u32>,
    end: Vec<u32>,
    marked: Vec<u32>,
}

impl Partition {
    fn new(n: usize, first: impl Fn(usize) -> bool) -> Self {
        let mut elems: Vec<u32> = (0..n as u32).filter(|&s| first(s as usize)).collect();
        let split = elems.len() as u32;
        elems.extend((0..n as u32).filter(|&s| !first(s as usize)));
        let mut p = Partition { loc: vec![0; n], block: vec![0; n], elems, start: vec![], end: vec![], marked: vec![] };
        let ranges: Vec<(u32, u32)> = [(0, split), (split, n as u32)].into_iter().filter(|(a, b)| a < b).collect();
        for (b, &(lo, hi)) in ranges.iter().enumerate() {
            p.start.push(lo);
            p.end.push(hi);
            p.marked.push(0);
            for i in lo..hi {
                let s = p.elems[i as usize] as usize;
                p.loc[s] = i;
                p.block[s] = b as u32;
            }
        }
        p
    }

    fn num_blocks(&self) -> usize {
        self.start.len()
    }

    fn block_of(&self, s: usize) -> usize {
        self.block[s] as usize
    }

    fn size(&self, b: usize) -> usize {
        (self.end[b] - self.start[b]) as usize
    }

    fn members(&self, b: usize) -> &[u32] {
        &self.elems[self.start[b] as usize..self.end[b] as usize]
    }

    /// Marks `s`; returns true the first time its block gets a mark.
    fn mark(&mut self, s: usize) -> bool {
        let b = self.block[s] as usize;
        let pos = self.loc[s];
        let front = self.start[b] + self.marked[b];
        if pos < front {
            return false; // already marked
        }
        let other = self.elems[front as usize];
        self.elems.swap(pos as usize, front as usize);
        self.loc[other as usize] = pos;
        self.loc[s] = front;
        self.marked[b] += 1;
        self.marked[b] == 1
    }

    /// Splits the marked members of `b` off into a new block, unless all or none are marked.
    /// Returns the new block's id.
    fn split(&mut self, b: usize) -> Option<usize> {
        let m = self.marked[b];
        self.marked[b] = 0;
        if m == 0 || m == self.end[b] - self.start[b] {
            return None;
        }
        let new = self.start.len();
        let (lo, mid) = (self.start[b], self.start[b] + m);
        self.start.push(lo);
        self.end.push(mid);
        self.marked.push(0);
        self.start[b] = mid;
        for i in lo..mid {
            self.block[self.elems[i as usize] as usize] = new as u32;
        }
        Some(new)
    }
}

/// One byte of each class, and the number of bytes in each class.
pub(crate) fn class_tables(classes: &[u8; 256], stride: usize) -> (Vec<u8>, Vec<u16>) {
    let mut rep = vec![0u8; stride];
    let mut size = vec![0u16; stride];
    for b in (0..=255u8).rev() {
        rep[classes[b as usize] as usize] = b;
        size[classes[b as usize] as usize] += 1;
    }
    (rep, size)
}

/// Parses with `regex-syntax` first, so errors carry the offset where the pattern goes wrong.
pub(crate) fn parse(pattern: &str) -> Result<regex_syntax::hir::Hir> {
    let mut parser = regex_syntax::ParserBuilder::new().unicode(true).utf8(true).nest_limit(250).build();
    parser.parse(pattern).map_err(|e| match e {
        regex_syntax::Error::Parse(e) => {
            let construct = match e.kind() {
                AstErrorKind::UnsupportedBackreference => Some("backreference"),
                AstErrorKind::UnsupportedLookAround => Some("look-around"),
                _ => None,
            };
            match construct {
                Some(c) => GrammarError::UnsupportedRegex {
                    construct: c.into(),
                    reason: format!("{} (at byte {}); a DFA cannot express it", e.kind(), e.span().start.offset),
                },
                None => GrammarError::InvalidRegex {
                    pattern: pattern.to_string(),
                    offset: e.span().start.offset,
                    reason: e.kind().to_string(),
                },
            }
        }
        regex_syntax::Error::Translate(e) => GrammarError::InvalidRegex {
            pattern: pattern.to_string(),
            offset: e.span().start.offset,
            reason: e.kind().to_string(),
        },
        other => GrammarError::InvalidRegex { pattern: pattern.to_string(), offset: 0, reason: other.to_string() },
    })
}

/// The error for a pattern that no string fully matches.
pub(crate) fn no_full_match() -> GrammarError {
    GrammarError::EmptyLanguage { detail: "no string fully matches the pattern".into() }
}

fn build_error(msg: &str, config: &DfaConfig) -> GrammarError {
    if msg.contains("word boundar") {
        GrammarError::UnsupportedRegex {
            construct: "Unicode word boundary".into(),
            reason: "a DFA cannot express \\b in Unicode mode; use (?-u:\\b) for ASCII word boundaries".into(),
        }
    } else if msg.contains("exceeded") || msg.contains("limit") || msg.contains("too many") {
        GrammarError::TooLarge {
            what: "regex DFA",
            limit: config.max_states,
            detail: format!("{msg} (raise max_states, or simplify the pattern: bounded repeats of wide classes grow the DFA)"),
        }
    } else {
        GrammarError::UnsupportedRegex { construct: "pattern".into(), reason: msg.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(p: &str) -> Dfa {
        Dfa::from_regex(p, &DfaConfig::default()).unwrap()
    }

    fn full_match(d: &Dfa, s: &str) -> bool {
        let t = d.walk(d.start(), s.as_bytes());
        t != DEAD && d.is_accepting(t)
    }

    #[test]
    fn full_match_semantics() {
        let d = dfa("[0-9]{4}");
        assert!(full_match(&d, "2024"));
        assert!(!full_match(&d, "202"));
        assert!(!full_match(&d, "20245"));
        assert_eq!(d.walk(0, b"20245"), DEAD);
        assert_eq!(d.walk(0, b"x"), DEAD);
        assert_eq!(d.byte_distance(0), 4);
        let d = dfa("a|ab");
        assert!(full_match(&d, "a") && full_match(&d, "ab"));
    }

    #[test]
    fn every_state_is_live() {
        let d = dfa("(ab|cd)*e|f[0-9]+");
        for s in 0..d.num_states() as u32 {
            assert!(d.byte_distance(s) != u32::MAX);
        }
    }

    #[test]
    fn unicode_and_forced_bytes() {
        let d = dfa("é+");
        assert!(full_match(&d, "éé"));
        assert_eq!(d.forced_bytes(0), "é".as_bytes());
        let d = dfa(r#"\{"name":"[a-z]+"\}"#);
        assert_eq!(d.forced_bytes(0), br#"{"name":""#);
        assert_eq!(dfa("abc|abd").forced_bytes(0), b"ab");
        assert_eq!(dfa("x?").forced_bytes(0), b"");
    }

    #[test]
    fn restricting_bytes_prunes_what_needs_them() {
        let d = dfa("a[bc]+|x");
        let mut allowed = [true; 256];
        allowed[b'b' as usize] = false;
        let r = d.restrict_bytes(&allowed).unwrap();
        assert!(full_match(&r, "acc") && full_match(&r, "x") && !full_match(&r, "ab"));
        assert_eq!(r.walk(0, b"ab"), DEAD);
        allowed[b'c' as usize] = false;
        allowed[b'x' as usize] = false;
        assert!(d.restrict_bytes(&allowed).is_none());
        assert!(d.uses_byte(b'b') && !d.uses_byte(b'z'));
    }

    #[test]
    fn cutting_bytes_keeps_state_ids() {
        let d = dfa("a[bc]+|x");
        let cut = d.with_bytes_cut(b"b");
        assert_eq!(cut.num_states(), d.num_states());
        let after_a = d.next(0, b'a');
        assert_eq!(cut.next(0, b'a'), after_a);
        assert_eq!(cut.next(after_a, b'b'), DEAD);
        assert_ne!(d.next(after_a, b'b'), DEAD);
        assert_eq!(cut.next(after_a, b'c'), d.next(after_a, b'c'));
        assert_eq!(cut.byte_distance(after_a), d.byte_distance(after_a));
    }

    #[test]
    fn minimization_merges_equivalent_states_and_keeps_the_language() {
        // Both branches continue identically after their first byte.
        let d = dfa("(a|b)[0-9]{3}|c[0-9]{3}");
        assert_eq!(d.num_states(), 5);
        for (s, ok) in [("a123", true), ("c999", true), ("b12", false), ("d123", false)] {
            assert_eq!(full_match(&d, s), ok, "{s}");
        }
    }

    /// Moore's refinement, the slow and obvious way: how many classes of equivalent live
    /// states a pruned table has.
    fn moore_classes(d: &Dfa) -> usize {
        let n = d.num_states();
        let mut block: Vec<usize> = (0..n).map(|s| d.is_accepting(s as u32) as usize).collect();
        loop {
            let mut ids: HashMap<Vec<usize>, usize> = HashMap::new();
            let next: Vec<usize> = (0..n)
                .map(|s| {
                    let mut sig = vec![block[s]];
                    sig.extend(d.row(s as u32).iter().map(|&t| if t == DEAD { usize::MAX } else { block[t as usize] }));
                    let fresh = ids.len();
                    *ids.entry(sig).or_insert(fresh)
                })
                .collect();
            if ids.len() == block.iter().collect::<std::collections::HashSet<_>>().len() {
                return ids.len();
            }
            block = next;
        }
    }

    #[test]
    fn minimization_agrees_with_moores_refinement_on_random_tables() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut classes = [0u8; 256];
        for (b, c) in classes.iter_mut().enumerate() {
            *c = (b % 3) as u8;
        }
        for _ in 0..300 {
            let n = 1 + rand(40) as usize;
            let trans: Vec<u32> = (0..n * 3).map(|_| if rand(4) == 0 { DEAD } else { rand(n as u64) as u32 }).collect();
            let accepting: Vec<bool> = (0..n).map(|_| rand(3) == 0).collect();
            let Some(pruned) = Dfa::prune(classes, 3, &trans, &accepting) else { continue };
            let want = moore_classes(&pruned);
            let min = pruned.clone().minimize();
            assert_eq!(min.num_states(), want, "{trans:?} {accepting:?}");
            // The same language: every string of up to 6 bytes over the three classes.
            let mut layer: Vec<Vec<u8>> = vec![vec![]];
            for _ in 0..=6 {
                for w in &layer {
                    let (a, b) = (pruned.walk(0, w), min.walk(0, w));
                    assert_eq!(a != DEAD && pruned.is_accepting(a), b != DEAD && min.is_accepting(b), "{w:?}");
                }
                layer = layer.iter().flat_map(|w| (0..3u8).map(move |b| [w.as_slice(), &[b]].concat())).collect();
            }
        }
    }

    #[test]
    fn a_table_too_large_to_minimize_stops_at_the_state_limit() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        // Doubled letters and digits split the bytes into over 60 classes; then 2^17 states.
        let lits: Vec<String> = (b'0'..=b'z').filter(u8::is_ascii_alphanumeric).map(|b| format!("{0}{0}", b as char)).collect();
        let prefix = format!("(?:{})", lits.join("|"));
        assert!(Dfa::from_regex(&prefix, &DfaConfig::default()).unwrap().stride > 60);
        let reached = Arc::new(AtomicU64::new(0));
        let config = DfaConfig { max_states: 70_000, states_reached: Some(reached.clone()), ..DfaConfig::default() };
        let err = Dfa::from_regex(&format!("{prefix}[ab]*a[ab]{{16}}"), &config).unwrap_err();
        assert!(matches!(err, GrammarError::TooLarge { .. }), "{err}");
        let states = reached.load(Ordering::Relaxed);
        assert!(states <= 70_065, "went on to {states} states");
        // A table small enough to minimize gets twice the room: the same blow-up, few classes.
        reached.store(0, Ordering::Relaxed);
        assert!(Dfa::from_regex("[ab]*a[ab]{16}", &config).is_err());
        let states = reached.load(Ordering::Relaxed);
        assert!(states > 70_065, "stopped at {states} states");
    }

    #[test]
    fn a_determinization_notes_the_states_it_reached() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let reached = Arc::new(AtomicU64::new(0));
        let config = DfaConfig { states_reached: Some(reached.clone()), ..DfaConfig::default() };
        let d = Dfa::from_regex("[a-z]{1,5}@x", &config).unwrap();
        assert_eq!(reached.load(Ordering::Relaxed), d.num_states() as u64);
        let small = DfaConfig { max_states: 10, states_reached: Some(reached.clone()), ..DfaConfig::default() };
        reached.store(0, Ordering::Relaxed);
        assert!(Dfa::from_regex("[a-z]{1,40}", &small).is_err());
        assert!(reached.load(Ordering::Relaxed) > 10, "the failed attempt's size is known");
    }

    #[test]
    fn errors() {
        let cfg = DfaConfig::default();
        match Dfa::from_regex("ab(c", &cfg) {
            Err(GrammarError::InvalidRegex { offset, .. }) => assert_eq!(offset, 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(Dfa::from_regex(r"(a)\1", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
        assert!(matches!(Dfa::from_regex(r"a(?=b)", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
        assert!(matches!(Dfa::from_regex(r"\bfoo", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
        assert!(matches!(Dfa::from_regex(r"[^\s\S]", &cfg), Err(GrammarError::EmptyLanguage { .. })));
        let small = DfaConfig { max_states: 10, ..DfaConfig::default() };
        assert!(matches!(Dfa::from_regex("[a-z]{40}", &small), Err(GrammarError::TooLarge { .. })));
        let tiny = DfaConfig { max_states: 100_000, build_size_limit: 10_000, ..DfaConfig::default() };
        assert!(matches!(Dfa::from_regex("[a-z]{500}", &tiny), Err(GrammarError::TooLarge { .. })));
    }
}
