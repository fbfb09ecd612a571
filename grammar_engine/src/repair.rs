//! Validation and minimal-edit repair of a byte string against a [`Dfa`].
//!
//! [`validate`] says whether a text fully matches and, if not, where the match breaks.
//! [`repair`] finds a string of the DFA's language at the smallest weighted edit distance from
//! the text (byte insertions, deletions and substitutions, each with its own cost).
//!
//! # Search
//!
//! A* over nodes `(i, s)`: `i` text bytes consumed, DFA state `s`. From `(i, s)`:
//!
//! * keep `text[i]` when `next(s, text[i])` is live: cost 0, to `(i + 1, next)`;
//! * delete `text[i]`: `delete_cost`, to `(i + 1, s)`;
//! * substitute `text[i]` by a byte `b != text[i]` with a live transition: `substitute_cost`,
//!   to `(i + 1, next(s, b))`;
//! * insert a byte `b` with a live transition: `insert_cost`, to `(i, next(s, b))`.
//!
//! The goal is any `(len, s)` with `s` accepting. Since the DFA only accepts valid UTF-8 (it is
//! built in Unicode mode), every repaired text is valid UTF-8, whatever the input bytes were.
//!
//! Bytes are grouped per state by target: for the cost only the target state matters, so each
//! state's live transitions are collapsed (lazily, once per call) into one `(next, byte)` per
//! distinct `next`, the byte being a representative chosen for readability (lowercase letters,
//! then digits and capitals, then other printable ASCII, whitespace, other ASCII, and non-ASCII
//! last). A substitution into the group that contains `text[i]` is skipped (keeping is free and
//! reaches the same node); an insertion into that group writes `text[i]` itself.
//!
//! Among repairs of equal cost the search prefers the one that disturbs the text least (see
//! `Weights`): a missing quote is inserted rather than a letter overwritten, a trailing comma
//! deleted rather than a value invented.
//!
//! # Heuristic
//!
//! `h(i, s) = max(h_ins, h_chain, h_back)`, each consistent (so their max is too, and a closed
//! node is never reopened):
//!
//! * `h_ins = insert_cost * max(0, byte_distance(s) - (len - i))`. Reaching acceptance from `s`
//!   emits at least `byte_distance(s)` more bytes; keeps and substitutions emit one byte per
//!   remaining text byte (at most `len - i` of them), deletions none, so the rest must be
//!   insertions. Consistency, per move (`d` = byte distance, `r = len - i`): a keep or a
//!   substitution lowers `r` by one and `d` by at most one, a deletion lowers `r` by one and
//!   keeps `d`, so `d - r` never decreases and `h_ins` never drops; an insertion keeps `r` and
//!   lowers `d` by at most one, so `h_ins` drops by at most `insert_cost`, the move's cost.
//!   At a goal `d = 0`, so `h_ins = 0`.
//! * `h_chain = min(insert, delete, substitute cost)` when keeping the whole rest of the text
//!   from `(i, s)` does not end in an accepting state (the "keep chain" dies or stops short),
//!   else 0. If the chain fails, any completion makes at least one edit, so the bound holds.
//!   Consistency: keep moves follow the same deterministic chain, so both ends have the same
//!   value; every other move costs at least the minimum edit cost, which is all `h_chain` can
//!   drop. Chain outcomes are memoized in the node table, so each `(i, s)` is walked at most
//!   once per call.
//! * `h_back` comes from the backward phase (below): the exact cost-to-go `H(i, s)` for nodes
//!   it has closed, and its radius `R` for all others. It is a perimeter heuristic: Dijkstra
//!   closes nodes in order of `H`, so every node it has not closed has `H >= R` and every
//!   closed one `H <= R`, which makes the mix of exact values and `R` consistent (with the
//!   move `n -> m` of cost `c`: `H(n) <= c + H(m)` for exact values, `H(n) <= R <= c + R` from
//!   closed to open, and `R` against `R` for open nodes). (Nodes the backward phase skipped
//!   as useless, see below, may get a value above their `H`; no repair cheaper than the
//!   incumbent passes through them, so the optimum and the lower bounds are unaffected.)
//!
//! A node whose keep chain succeeds, or whose exact cost-to-go the backward phase knows, is a
//! complete solution; it becomes the incumbent without being expanded.
//!
//! # Two directions
//!
//! The forward search alone is fast when the errors are cheap to prove optimal, but weak when
//! the repair is expensive and far from where the search starts (a truncated text needs many
//! insertions at the very end, and every cheap detour at every position looks promising).
//! So when the forward search exceeds its allowance, it alternates with a backward Dijkstra
//! from the goals over reversed moves (predecessor lists built once per call from the grouped
//! transitions), doubling both allowances each round. The backward phase skips nodes that
//! cannot beat the incumbent: `H + h_rev >= incumbent`, where `h_rev(i, s)` bounds the cost
//! from the start (0 on the text's valid prefix, else one edit, and at least the insertions
//! that the distance from the start to `s` demands). It stops the whole search when it closes
//! the start node (whose `H` is then the optimum) or when its radius reaches the incumbent's
//! cost. Every node it closes that the forward search has reached gives a complete solution
//! (meet in the middle). Raising the heuristic mid-search is sound: open entries are re-filed
//! with their new `f` when they surface.
//!
//! # Bounds and anytime behaviour
//!
//! A greedy completion of the start node (keep what can be kept, otherwise the cheapest local
//! fix with a short look-ahead, then the shortest way to acceptance) is the first incumbent, so
//! a valid answer exists from the start; nodes with `f >= incumbent` are pruned, and so are
//! nodes with `f > max_cost`. When the deadline or the expansion budget (counting both
//! directions) runs out, the open nodes with the smallest `f` and the deepest expanded node are
//! completed greedily as well, and the best complete solution is returned together with a
//! proven lower bound: the smallest open `f`, or the backward radius if larger.
//!
//! The node tables are dense arrays over `(len + 1) * num_states` when that is small, hash maps
//! otherwise. The search space is finite, so the search always terminates.

use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use crate::dfa::{Dfa, DEAD};

/// Whether a text fully matches, and where it stops matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validation {
    /// The whole text is in the language.
    pub valid: bool,
    /// `None` when valid. Otherwise the offset of the first byte that makes a match impossible,
    /// or `text.len()` when every byte is fine but the text stops before a full match.
    pub error_offset: Option<usize>,
}

/// Checks `text` against `dfa` with full-match semantics.
pub fn validate(dfa: &Dfa, text: &[u8]) -> Validation {
    let mut state = dfa.start();
    for (offset, &b) in text.iter().enumerate() {
        state = dfa.next(state, b);
        if state == DEAD {
            return Validation { valid: false, error_offset: Some(offset) };
        }
    }
    if dfa.is_accepting(state) {
        Validation { valid: true, error_offset: None }
    } else {
        Validation { valid: false, error_offset: Some(text.len()) }
    }
}

/// Edit costs and search limits for [`repair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairOptions {
    pub insert_cost: u32,
    pub delete_cost: u32,
    pub substitute_cost: u32,
    /// Give up (with [`RepairStatus::NoRepairWithinMaxCost`]) when every repair costs more.
    pub max_cost: Option<u32>,
    /// Wall-clock budget for the search, measured from the call.
    pub deadline: Option<Duration>,
    /// Budget of node expansions.
    pub max_expansions: Option<usize>,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            insert_cost: 1,
            delete_cost: 1,
            substitute_cost: 1,
            max_cost: None,
            deadline: None,
            max_expansions: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepairStatus {
    /// `text` is a cheapest repair; `cost == lower_bound`.
    Optimal,
    /// The deadline or the expansion budget ran out first: `text` is the best repair found so
    /// far, and its cost may exceed the optimum, which is at least `lower_bound`.
    Anytime,
    /// Every repair costs more than `max_cost`; no text.
    NoRepairWithinMaxCost,
    /// The budget ran out before any repair within `max_cost` was found; no text.
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EditKind {
    Insert,
    Delete,
    Substitute,
}

/// One edit. Offsets refer to the original text; an insertion at `offset` goes before the
/// original byte `text[offset]` (or at the end when `offset == text.len()`). Edits are listed
/// in text order, so applying them left to right rebuilds the repaired text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Edit {
    pub kind: EditKind,
    pub offset: usize,
    /// The original byte (deletions and substitutions).
    pub old: Option<u8>,
    /// The new byte (insertions and substitutions).
    pub new: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairResult {
    pub status: RepairStatus,
    /// The repaired text (fully matches the DFA); `None` for `NoRepairWithinMaxCost` and
    /// `NotFound`.
    pub text: Option<Vec<u8>>,
    /// Sum of the edit costs of `edits`; `None` when there is no text.
    pub cost: Option<u32>,
    /// A proven lower bound on the cost of an optimal repair.
    pub lower_bound: u32,
    /// The edits turning the input into `text`, in text order.
    pub edits: Vec<Edit>,
    /// Nodes expanded by the search.
    pub expansions: usize,
}

/// Finds a cheapest edit of `text` into the language of `dfa`. See the module documentation.
pub fn repair(dfa: &Dfa, text: &[u8], opts: &RepairOptions) -> RepairResult {
    repair_impl(dfa, text, opts, Tuning::for_len(text.len()))
}

// ---------------------------------------------------------------------------------------------
// Internals
// ---------------------------------------------------------------------------------------------

/// Largest `(len + 1) * num_states` for the dense node table (16 bytes per entry). Past this a
/// hash map is faster: the search touches few states per position, and a dense row per
/// position costs page faults.
const DENSE_MAX_ENTRIES: usize = 1 << 16;
/// How many bytes the greedy completion looks ahead when choosing a local fix.
const LOOKAHEAD: usize = 24;
/// How many open nodes are completed greedily when the budget runs out.
const ANYTIME_CANDIDATES: usize = 32;
/// Expansions between two reads of the clock.
const CLOCK_EVERY: usize = 64;

/// Expansion allowances of the first forward and backward phases; the search alternates
/// between the two directions, doubling both allowances each round.
#[derive(Debug, Clone, Copy)]
struct Tuning {
    forward_first: usize,
    backward_first: usize,
    /// Use the hash-map node table whatever the size.
    sparse: bool,
}

impl Tuning {
    fn for_len(len: usize) -> Self {
        Tuning { forward_first: 1024 + len, backward_first: 512 + len / 2, sparse: false }
    }
}

/// Internal costs are `u64`; `INF` means unseen / none.
const INF: u64 = u64::MAX;

const OP_NONE: u8 = 0;
const OP_KEEP: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_SUBSTITUTE: u8 = 3;
const OP_INSERT: u8 = 4;

const CHAIN_UNKNOWN: u8 = 0;
const CHAIN_OK: u8 = 1;
const CHAIN_FAIL: u8 = 2;

/// The search minimizes `(cost, damage)` lexicographically, where `damage` breaks ties between
/// repairs of equal cost in favour of the one that disturbs the text least: each edit counts 2
/// per "content" byte it removes or writes (ASCII letters and digits, and non-ASCII bytes) and
/// 1 per original byte it removes. So a missing quote is inserted (`"Ada}` becomes `"Ada"}`,
/// not `"Ad"}`) and a trailing comma is deleted (`[1,]` becomes `[1]`, not `[1,1]`).
///
/// Both parts are folded into one internal `u64`: `cost << 32 | damage`. Damage grows by at
/// most 5 per edit, so it stays below 2^32 on any path of fewer than 858 million edits, and
/// the order on internal values is the lexicographic order; an internal bound `x` bounds the
/// cost by `x >> 32`. Heuristic values are cost bounds shifted left (damage bound 0), which keeps them
/// consistent.
#[derive(Debug, Clone, Copy)]
struct Weights {
    ins: u64,
    del: u64,
    sub: u64,
}

#[inline]
fn content(b: u8) -> u64 {
    (b.is_ascii_alphanumeric() || b >= 0x80) as u64
}

/// A cost in internal units, `u64::MAX` (never reached) when it does not fit.
#[inline]
fn hi(cost: u64) -> u64 {
    if cost >= 1 << 32 {
        u64::MAX
    } else {
        cost << 32
    }
}

impl Weights {
    fn new(opts: &RepairOptions) -> Self {
        Weights {
            ins: hi(opts.insert_cost as u64),
            del: hi(opts.delete_cost as u64),
            sub: hi(opts.substitute_cost as u64),
        }
    }

    #[inline]
    fn insert(&self, new: u8) -> u64 {
        self.ins.saturating_add(2 * content(new))
    }

    #[inline]
    fn delete(&self, old: u8) -> u64 {
        self.del.saturating_add(1 + 2 * content(old))
    }

    #[inline]
    fn substitute(&self, old: u8, new: u8) -> u64 {
        self.sub.saturating_add(1 + 2 * content(old) + 2 * content(new))
    }

    /// The cost bound implied by an internal bound.
    fn cost_bound(internal: u64) -> u32 {
        (internal >> 32) as u32
    }
}

fn repair_impl(dfa: &Dfa, text: &[u8], opts: &RepairOptions, tuning: Tuning) -> RepairResult {
    let started = Instant::now();
    if validate(dfa, text).valid {
        return RepairResult {
            status: RepairStatus::Optimal,
            text: Some(text.to_vec()),
            cost: Some(0),
            lower_bound: 0,
            edits: Vec::new(),
            expansions: 0,
        };
    }
    let weights = Weights::new(opts);
    let mut groups = Groups::new(dfa.num_states());
    if text.len() >= (u32::MAX - 1) as usize {
        // Positions would not fit the node keys: answer with the greedy repair alone.
        let mut edits = Vec::new();
        greedy_tail(dfa, text, &mut groups, &weights, 0, dfa.start(), &mut edits);
        return finish(dfa, text, opts, RepairStatus::Anytime, 0, edits, 0);
    }
    let entries = (text.len() + 1).saturating_mul(dfa.num_states());
    if !tuning.sparse && entries <= DENSE_MAX_ENTRIES {
        Search::<DenseTable>::new(dfa, text, opts, weights, groups, started).run(tuning)
    } else {
        Search::<SparseTable>::new(dfa, text, opts, weights, groups, started).run(tuning)
    }
}

fn edit_cost(e: &Edit, opts: &RepairOptions) -> u32 {
    match e.kind {
        EditKind::Insert => opts.insert_cost,
        EditKind::Delete => opts.delete_cost,
        EditKind::Substitute => opts.substitute_cost,
    }
}

fn apply(text: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut pos = 0;
    for e in edits {
        out.extend_from_slice(&text[pos..e.offset]);
        pos = e.offset;
        match e.kind {
            EditKind::Insert => out.push(e.new.expect("insert has a byte")),
            EditKind::Delete => pos += 1,
            EditKind::Substitute => {
                out.push(e.new.expect("substitute has a byte"));
                pos += 1;
            }
        }
    }
    out.extend_from_slice(&text[pos..]);
    out
}

/// Builds the result for a solution given by its edits.
fn finish(
    dfa: &Dfa,
    text: &[u8],
    opts: &RepairOptions,
    status: RepairStatus,
    lower_bound: u32,
    edits: Vec<Edit>,
    expansions: usize,
) -> RepairResult {
    let cost = edits.iter().fold(0u32, |acc, e| acc.saturating_add(edit_cost(e, opts)));
    let out = apply(text, &edits);
    debug_assert!({
        let s = dfa.walk(dfa.start(), &out);
        s != DEAD && dfa.is_accepting(s)
    });
    let (status, lower_bound) = match status {
        RepairStatus::Optimal => (status, cost),
        _ if lower_bound >= cost => (RepairStatus::Optimal, cost),
        _ => (status, lower_bound),
    };
    RepairResult { status, text: Some(out), cost: Some(cost), lower_bound, edits, expansions }
}

fn byte_rank(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => 0,
        b'0'..=b'9' | b'A'..=b'Z' => 1,
        b' '..=b'~' => 2,
        b'\t' | b'\n' | b'\r' => 3,
        0..=0x7f => 4,
        _ => 5,
    }
}

/// Per state, its live transitions collapsed to one representative byte per target state,
/// best-ranked bytes first. Filled lazily.
struct Groups {
    off: Vec<u32>,
    len: Vec<u16>,
    pool: Vec<(u32, u8)>,
    /// Scratch: target state -> its index in the pool while a state's groups are built.
    slot: Vec<u32>,
}

impl Groups {
    fn new(num_states: usize) -> Self {
        Groups {
            off: vec![u32::MAX; num_states],
            len: vec![0; num_states],
            pool: Vec::new(),
            slot: vec![u32::MAX; num_states],
        }
    }

    /// The pool range holding `state`'s groups.
    #[inline]
    fn range(&mut self, dfa: &Dfa, state: u32) -> std::ops::Range<usize> {
        let s = state as usize;
        if self.off[s] == u32::MAX {
            let start = self.pool.len();
            let (pool, slot) = (&mut self.pool, &mut self.slot);
            dfa.for_each_transition(state, |b, next| {
                let k = slot[next as usize];
                if k == u32::MAX {
                    slot[next as usize] = pool.len() as u32;
                    pool.push((next, b));
                } else {
                    let entry = &mut pool[k as usize];
                    if (byte_rank(b), b) < (byte_rank(entry.1), entry.1) {
                        entry.1 = b;
                    }
                }
            });
            for &(n, _) in &self.pool[start..] {
                self.slot[n as usize] = u32::MAX;
            }
            self.pool[start..].sort_by_key(|&(_, b)| (byte_rank(b), b));
            self.off[s] = start as u32;
            self.len[s] = (self.pool.len() - start) as u16;
        }
        let start = self.off[s] as usize;
        start..start + self.len[s] as usize
    }
}

/// How many text bytes from `i` can be kept from `state` (capped at [`LOOKAHEAD`]); reaching
/// the end counts as the cap, plus one when the end is accepting.
fn keep_run(dfa: &Dfa, text: &[u8], mut i: usize, mut state: u32) -> usize {
    let mut n = 0;
    while n < LOOKAHEAD {
        if i == text.len() {
            return LOOKAHEAD + dfa.is_accepting(state) as usize;
        }
        state = dfa.next(state, text[i]);
        if state == DEAD {
            return n;
        }
        i += 1;
        n += 1;
    }
    n
}

/// Completes `(i, state)` into a full match without search: keep every byte that can be kept;
/// at a byte that cannot, take the local fix (deletion, substitution, or an insertion that lets
/// the byte be kept) after which the most text can be kept, cheaper first on ties; finally
/// append a shortest path to acceptance. Pushes the edits and returns their internal cost.
fn greedy_tail(
    dfa: &Dfa,
    text: &[u8],
    groups: &mut Groups,
    w: &Weights,
    mut i: usize,
    mut state: u32,
    edits: &mut Vec<Edit>,
) -> u64 {
    let mut cost = 0u64;
    while i < text.len() {
        let b = text[i];
        let t = dfa.next(state, b);
        if t != DEAD {
            state = t;
            i += 1;
            continue;
        }
        // (progress, cost, edit, byte, next position, next state): most progress, then cheapest.
        let mut best = (keep_run(dfa, text, i + 1, state), w.delete(b), EditKind::Delete, 0u8, i + 1, state);
        for k in groups.range(dfa, state) {
            let (n, rep) = groups.pool[k];
            let p = keep_run(dfa, text, i + 1, n);
            if p > best.0 || (p == best.0 && w.substitute(b, rep) < best.1) {
                best = (p, w.substitute(b, rep), EditKind::Substitute, rep, i + 1, n);
            }
            let t2 = dfa.next(n, b);
            if t2 != DEAD {
                let p = 1 + keep_run(dfa, text, i + 1, t2);
                if p > best.0 || (p == best.0 && w.insert(rep) < best.1) {
                    // Insert, then keep `b`.
                    best = (p, w.insert(rep), EditKind::Insert, rep, i + 1, t2);
                }
            }
        }
        let (_, c, kind, byte, next_i, next_state) = best;
        cost = cost.saturating_add(c);
        edits.push(match kind {
            EditKind::Delete => Edit { kind, offset: i, old: Some(b), new: None },
            EditKind::Substitute => Edit { kind, offset: i, old: Some(b), new: Some(byte) },
            EditKind::Insert => Edit { kind, offset: i, old: None, new: Some(byte) },
        });
        i = next_i;
        state = next_state;
    }
    while !dfa.is_accepting(state) {
        let want = dfa.byte_distance(state) - 1;
        let r = groups.range(dfa, state);
        let &(n, rep) = groups.pool[r]
            .iter()
            .find(|&&(n, _)| dfa.byte_distance(n) == want)
            .expect("a live non-accepting state has a transition one step closer to acceptance");
        edits.push(Edit { kind: EditKind::Insert, offset: text.len(), old: None, new: Some(rep) });
        cost = cost.saturating_add(w.insert(rep));
        state = n;
    }
    cost
}

// --- node tables -----------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Node {
    /// Best internal cost found so far from the start, `INF` when unseen.
    g: u64,
    /// The predecessor's state; its position follows from `op`.
    parent: u32,
    op: u8,
    byte: u8,
    closed: bool,
    chain: u8,
}

const UNSEEN: Node = Node { g: INF, parent: 0, op: OP_NONE, byte: 0, closed: false, chain: CHAIN_UNKNOWN };

trait Table {
    /// A table for `positions * num_states` nodes.
    fn with_size(num_states: usize, positions: usize) -> Self;
    fn get(&self, i: u32, s: u32) -> Node;
    fn set(&mut self, i: u32, s: u32, node: Node);
}

/// Parallel arrays whose all-zero value means "unseen", so the allocator can hand out lazily
/// zeroed pages.
struct DenseTable {
    num_states: usize,
    /// `g + 1`, 0 when unseen.
    g1: Vec<u64>,
    parent: Vec<u32>,
    /// `op | byte << 8 | closed << 16 | chain << 17`.
    meta: Vec<u32>,
}

impl Table for DenseTable {
    fn with_size(num_states: usize, positions: usize) -> Self {
        let entries = num_states * positions;
        DenseTable { num_states, g1: vec![0; entries], parent: vec![0; entries], meta: vec![0; entries] }
    }

    #[inline]
    fn get(&self, i: u32, s: u32) -> Node {
        let k = i as usize * self.num_states + s as usize;
        let m = self.meta[k];
        Node {
            g: self.g1[k].wrapping_sub(1),
            parent: self.parent[k],
            op: m as u8,
            byte: (m >> 8) as u8,
            closed: (m >> 16) & 1 == 1,
            chain: ((m >> 17) & 3) as u8,
        }
    }

    #[inline]
    fn set(&mut self, i: u32, s: u32, node: Node) {
        let k = i as usize * self.num_states + s as usize;
        self.g1[k] = node.g.wrapping_add(1);
        self.parent[k] = node.parent;
        self.meta[k] =
            node.op as u32 | (node.byte as u32) << 8 | (node.closed as u32) << 16 | (node.chain as u32) << 17;
    }
}

/// A small multiplicative hasher for the `u64` node keys (FxHash-style).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

#[derive(Default)]
struct SparseTable(HashMap<u64, Node, BuildHasherDefault<KeyHasher>>);

impl Table for SparseTable {
    fn with_size(_num_states: usize, _positions: usize) -> Self {
        SparseTable::default()
    }

    #[inline]
    fn get(&self, i: u32, s: u32) -> Node {
        self.0.get(&((i as u64) << 32 | s as u64)).copied().unwrap_or(UNSEEN)
    }

    #[inline]
    fn set(&mut self, i: u32, s: u32, node: Node) {
        self.0.insert((i as u64) << 32 | s as u64, node);
    }
}

// --- the search ------------------------------------------------------------------------------

/// Forward heap key: smallest `f` first, then deepest `i`.
#[inline]
fn key(f: u64, i: u32, s: u32) -> u128 {
    ((!f as u128) << 64) | ((i as u128) << 32) | s as u128
}

#[inline]
fn unkey(k: u128) -> (u64, u32, u32) {
    (!((k >> 64) as u64), (k >> 32) as u32, k as u32)
}

/// Backward heap key: smallest cost-to-go first, then smallest `i` (dive toward the start).
#[inline]
fn back_key(g: u64, i: u32, s: u32) -> u128 {
    ((!g as u128) << 64) | ((!i as u128) << 32) | s as u128
}

#[inline]
fn back_unkey(k: u128) -> (u64, u32, u32) {
    (!((k >> 64) as u64), !((k >> 32) as u32), k as u32)
}

/// How an incumbent node is completed into a full repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Completion {
    /// [`greedy_tail`] (exact when the node's keep chain succeeds).
    Greedy,
    /// The backward search's optimal path from the node to a goal.
    Backward,
}

enum Stop {
    /// Every useful node was expanded: the incumbent (if within `max_cost`) is optimal.
    Exhausted,
    /// The caller's budget ran out; the argument is a proven lower bound (internal units).
    Budget(u64),
    /// The current phase's own expansion allowance ran out.
    Phase,
}

/// The backward phase: Dijkstra from the goals over reversed moves, computing exact
/// costs-to-go. Once it stops, every node whose cost-to-go is below `radius` is closed (or is
/// useless: it cannot lie on a repair cheaper than the incumbent), so the forward heuristic may
/// use the exact cost-to-go of closed nodes and `radius` for all others.
struct Backward<T> {
    table: T,
    heap: BinaryHeap<u128>,
    /// Predecessors of each state as CSR: `(p, byte)` for each group `p --byte--> t`.
    pred_off: Vec<u32>,
    pred: Vec<(u32, u8)>,
    /// Fewest bytes from the start to each state.
    from_start: Vec<u32>,
    /// `main[i]`: the state after keeping `text[..i]`, for the longest prefix that survives.
    main: Vec<u32>,
    radius: u64,
}

struct Search<'a, T: Table> {
    dfa: &'a Dfa,
    text: &'a [u8],
    len: u32,
    opts: &'a RepairOptions,
    w: Weights,
    table: T,
    groups: Groups,
    heap: BinaryHeap<u128>,
    back: Option<Backward<T>>,
    /// The cheapest single edit (internal cost): the chain heuristic's value.
    min_edit: u64,
    /// Internal cost of the incumbent (`INF` when none).
    best: u64,
    /// The incumbent: a node, completed as said, for a total internal cost of `best`.
    incumbent: Option<(u32, u32, Completion)>,
    /// Smallest internal cost whose cost exceeds `max_cost` (`INF` without one).
    cost_cap: u64,
    /// Nodes with `f >= bound` are pruned: `min(best, cost_cap)`.
    bound: u64,
    chain_buf: Vec<(u32, u32)>,
    fwd_expansions: usize,
    back_expansions: usize,
    deadline: Option<Instant>,
    /// Deepest expanded node (largest `i`, then smallest `g`): `(i, g, s)`.
    deepest: (u32, u64, u32),
}

impl<'a, T: Table> Search<'a, T> {
    fn new(
        dfa: &'a Dfa,
        text: &'a [u8],
        opts: &'a RepairOptions,
        w: Weights,
        groups: Groups,
        started: Instant,
    ) -> Self {
        let cost_cap = opts.max_cost.map_or(INF, |c| hi(c as u64 + 1));
        Search {
            dfa,
            text,
            len: text.len() as u32,
            opts,
            w,
            table: T::with_size(dfa.num_states(), text.len() + 1),
            groups,
            heap: BinaryHeap::new(),
            back: None,
            min_edit: w.ins.min(w.del).min(w.sub),
            best: INF,
            incumbent: None,
            cost_cap,
            bound: cost_cap,
            chain_buf: Vec::new(),
            fwd_expansions: 0,
            back_expansions: 0,
            deadline: opts.deadline.map(|d| started + d),
            deepest: (0, 0, dfa.start()),
        }
    }

    fn expansions(&self) -> usize {
        self.fwd_expansions + self.back_expansions
    }

    fn offer(&mut self, cost: u64, i: u32, s: u32, how: Completion) {
        if cost < self.best {
            self.best = cost;
            self.incumbent = Some((i, s, how));
            self.bound = self.best.min(self.cost_cap);
        }
    }

    fn budget_exhausted(&self) -> bool {
        let n = self.expansions();
        if let Some(max) = self.opts.max_expansions {
            if n >= max {
                return true;
            }
        }
        if let Some(d) = self.deadline {
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() >= d {
                return true;
            }
        }
        false
    }

    /// Whether keeping all of `text[i..]` from `s` ends in an accepting state; memoized for
    /// every node of the walk.
    fn chain(&mut self, i: u32, s: u32) -> u8 {
        let (mut i, mut s) = (i, s);
        self.chain_buf.clear();
        let outcome = loop {
            let node = self.table.get(i, s);
            if node.chain != CHAIN_UNKNOWN {
                break node.chain;
            }
            self.chain_buf.push((i, s));
            if i == self.len {
                break if self.dfa.is_accepting(s) { CHAIN_OK } else { CHAIN_FAIL };
            }
            let t = self.dfa.next(s, self.text[i as usize]);
            if t == DEAD {
                break CHAIN_FAIL;
            }
            i += 1;
            s = t;
        };
        for k in 0..self.chain_buf.len() {
            let (i, s) = self.chain_buf[k];
            let mut node = self.table.get(i, s);
            node.chain = outcome;
            self.table.set(i, s, node);
        }
        outcome
    }

    /// The forward heuristic (see the module documentation), in internal units.
    #[inline]
    fn h(&self, i: u32, s: u32, chain: u8) -> u64 {
        let missing = self.dfa.byte_distance(s).saturating_sub(self.len - i);
        let h_ins = hi(self.opts.insert_cost as u64 * missing as u64);
        let h_chain = if chain == CHAIN_FAIL { self.min_edit } else { 0 };
        let h = h_ins.max(h_chain);
        match &self.back {
            None => h,
            Some(b) => {
                let node = b.table.get(i, s);
                h.max(if node.closed { node.g } else { b.radius })
            }
        }
    }

    /// Records a path of internal cost `g` to `(i, s)` if it is the best so far, and opens the
    /// node.
    #[inline]
    fn relax(&mut self, i: u32, s: u32, g: u64, parent: u32, op: u8, byte: u8) {
        let mut node = self.table.get(i, s);
        if node.closed || g >= node.g || g >= self.bound {
            return;
        }
        if node.chain == CHAIN_UNKNOWN {
            node.chain = self.chain(i, s);
        }
        node.g = g;
        node.parent = parent;
        node.op = op;
        node.byte = byte;
        self.table.set(i, s, node);
        if node.chain == CHAIN_OK {
            // Keeping the rest is a full solution of cost `g`: no need to expand.
            self.offer(g, i, s, Completion::Greedy);
            return;
        }
        if let Some(b) = &self.back {
            let bn = b.table.get(i, s);
            if bn.closed {
                // The backward search knows the exact rest: a full solution, no need to expand.
                let total = g.saturating_add(bn.g);
                self.offer(total, i, s, Completion::Backward);
                return;
            }
        }
        let f = g.saturating_add(self.h(i, s, node.chain));
        if f < self.bound {
            self.heap.push(key(f, i, s));
        }
    }

    /// Drops stale heap entries and re-files entries whose `f` grew (the heuristic grows when
    /// the backward phase has run); returns the top live node as `(f, i, s, node)`.
    fn peek_live(&mut self) -> Option<(u64, u32, u32, Node)> {
        while let Some(&top) = self.heap.peek() {
            let (fk, i, s) = unkey(top);
            let node = self.table.get(i, s);
            if node.closed || node.g == INF {
                self.heap.pop();
                continue;
            }
            if let Some(b) = &self.back {
                let bn = b.table.get(i, s);
                if bn.closed {
                    // The backward search has since found this node's exact rest.
                    self.heap.pop();
                    let total = node.g.saturating_add(bn.g);
                    self.offer(total, i, s, Completion::Backward);
                    continue;
                }
            }
            let f = node.g.saturating_add(self.h(i, s, node.chain));
            if f > fk {
                self.heap.pop();
                if f < self.bound {
                    self.heap.push(key(f, i, s));
                }
                continue;
            }
            return Some((f, i, s, node));
        }
        None
    }

    fn start_forward(&mut self) {
        let start = self.dfa.start();
        let chain = self.chain(0, start);
        self.table.set(0, start, Node { g: 0, chain, ..UNSEEN });
        // The greedy completion of the start node is the first incumbent.
        let mut scratch = Vec::new();
        let c0 = greedy_tail(self.dfa, self.text, &mut self.groups, &self.w, 0, start, &mut scratch);
        self.offer(c0, 0, start, Completion::Greedy);
        let f0 = self.h(0, start, chain);
        if f0 < self.bound {
            self.heap.push(key(f0, 0, start));
        }
    }

    /// Forward A*, until done, out of budget, or `limit` forward expansions in all.
    fn forward(&mut self, limit: Option<usize>) -> Stop {
        while let Some((f, i, s, mut node)) = self.peek_live() {
            if f >= self.bound {
                return Stop::Exhausted;
            }
            if self.budget_exhausted() {
                return Stop::Budget(self.lower_bound(f));
            }
            if limit.is_some_and(|l| self.fwd_expansions >= l) {
                return Stop::Phase;
            }
            self.heap.pop();
            let g = node.g;
            node.closed = true;
            self.table.set(i, s, node);
            self.fwd_expansions += 1;
            if i > self.deepest.0 || (i == self.deepest.0 && g < self.deepest.1) {
                self.deepest = (i, g, s);
            }
            if i == self.len && self.dfa.is_accepting(s) {
                // Not reached in practice (goals are caught as chain successes), but harmless.
                self.offer(g, i, s, Completion::Greedy);
                continue;
            }
            let w = self.w;
            let range = self.groups.range(self.dfa, s);
            let (kept, b) = if i < self.len {
                let b = self.text[i as usize];
                let t = self.dfa.next(s, b);
                if t != DEAD {
                    self.relax(i + 1, t, g, s, OP_KEEP, b);
                }
                self.relax(i + 1, s, g.saturating_add(w.delete(b)), s, OP_DELETE, 0);
                for k in range.clone() {
                    let (n, rep) = self.groups.pool[k];
                    if n != t {
                        self.relax(i + 1, n, g.saturating_add(w.substitute(b, rep)), s, OP_SUBSTITUTE, rep);
                    }
                }
                (t, b)
            } else {
                (DEAD, 0)
            };
            for k in range {
                let (n, rep) = self.groups.pool[k];
                if n != s {
                    let byte = if n == kept { b } else { rep };
                    self.relax(i, n, g.saturating_add(w.insert(byte)), s, OP_INSERT, byte);
                }
            }
        }
        Stop::Exhausted
    }

    /// A proven lower bound on the optimum, given the forward search's smallest open `f`.
    fn lower_bound(&self, f: u64) -> u64 {
        match &self.back {
            Some(b) => f.max(b.radius.min(self.best)),
            None => f,
        }
    }

    fn start_backward(&mut self) {
        let dfa = self.dfa;
        let n = dfa.num_states();
        let start = dfa.start();
        let mut pred_off = vec![0u32; n + 1];
        for p in 0..n as u32 {
            for k in self.groups.range(dfa, p) {
                pred_off[self.groups.pool[k].0 as usize + 1] += 1;
            }
        }
        for t in 0..n {
            pred_off[t + 1] += pred_off[t];
        }
        let mut cursor = pred_off.clone();
        let mut pred = vec![(0u32, 0u8); pred_off[n] as usize];
        for p in 0..n as u32 {
            for k in self.groups.range(dfa, p) {
                let (t, rep) = self.groups.pool[k];
                pred[cursor[t as usize] as usize] = (p, rep);
                cursor[t as usize] += 1;
            }
        }
        let mut from_start = vec![u32::MAX; n];
        from_start[start as usize] = 0;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for k in self.groups.range(dfa, s) {
                let t = self.groups.pool[k].0;
                if from_start[t as usize] == u32::MAX {
                    from_start[t as usize] = from_start[s as usize] + 1;
                    queue.push_back(t);
                }
            }
        }
        let mut main = vec![start];
        let mut s = start;
        for &b in self.text {
            s = dfa.next(s, b);
            if s == DEAD {
                break;
            }
            main.push(s);
        }
        let mut back = Backward {
            table: T::with_size(n, self.text.len() + 1),
            heap: BinaryHeap::new(),
            pred_off,
            pred,
            from_start,
            main,
            radius: 0,
        };
        for a in 0..n as u32 {
            if dfa.is_accepting(a) {
                self.relax_back(&mut back, self.len, a, 0, a, OP_NONE, 0);
            }
        }
        self.back = Some(back);
    }

    /// A lower bound on the cost of reaching `(i, s)` from the start: 0 on the text's valid
    /// prefix, otherwise at least one edit, and at least the insertions the distance from the
    /// start demands.
    #[inline]
    fn h_rev(&self, back: &Backward<T>, i: u32, s: u32) -> u64 {
        if back.main.get(i as usize) == Some(&s) {
            return 0;
        }
        let missing = back.from_start[s as usize].saturating_sub(i);
        self.min_edit.max(hi(self.opts.insert_cost as u64 * missing as u64))
    }

    /// Backward relaxation: a path of internal cost `g` from `(i, s)` to a goal whose first
    /// move (`op`, `byte`) leads to state `succ`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn relax_back(&self, back: &mut Backward<T>, i: u32, s: u32, g: u64, succ: u32, op: u8, byte: u8) {
        let mut node = back.table.get(i, s);
        if node.closed || g >= node.g {
            return;
        }
        if g.saturating_add(self.h_rev(back, i, s)) >= self.bound {
            return; // useless: every repair through it costs at least the incumbent
        }
        node.g = g;
        node.parent = succ;
        node.op = op;
        node.byte = byte;
        back.table.set(i, s, node);
        back.heap.push(back_key(g, i, s));
    }

    /// Backward Dijkstra until `limit` backward expansions in all. `Exhausted` means the
    /// incumbent is proven optimal.
    fn backward(&mut self, limit: usize) -> Stop {
        let mut back = self.back.take().expect("backward phase started");
        let stop = self.backward_steps(&mut back, limit);
        self.back = Some(back);
        match stop {
            Stop::Budget(_) => {
                let f = self.peek_live().map_or(self.best, |(f, ..)| f);
                Stop::Budget(self.lower_bound(f))
            }
            other => other,
        }
    }

    fn backward_steps(&mut self, back: &mut Backward<T>, limit: usize) -> Stop {
        let dfa = self.dfa;
        let start = dfa.start();
        loop {
            let Some(&top) = back.heap.peek() else {
                back.radius = INF;
                return Stop::Exhausted;
            };
            let (g, i, t) = back_unkey(top);
            let mut node = back.table.get(i, t);
            if node.closed || node.g != g {
                back.heap.pop();
                continue;
            }
            back.radius = g;
            if g >= self.bound {
                return Stop::Exhausted;
            }
            if self.budget_exhausted() {
                return Stop::Budget(0);
            }
            if self.back_expansions >= limit {
                return Stop::Phase;
            }
            back.heap.pop();
            node.closed = true;
            back.table.set(i, t, node);
            self.back_expansions += 1;
            let fwd = self.table.get(i, t);
            if fwd.g != INF {
                self.offer(fwd.g.saturating_add(g), i, t, Completion::Backward);
            }
            if i == 0 && t == start {
                return Stop::Exhausted; // g is the exact optimum, and it was just offered
            }
            let w = self.w;
            let preds = back.pred_off[t as usize] as usize..back.pred_off[t as usize + 1] as usize;
            if i > 0 {
                let x = self.text[i as usize - 1];
                self.relax_back(back, i - 1, t, g.saturating_add(w.delete(x)), t, OP_DELETE, 0);
                for k in preds.clone() {
                    let (p, rep) = back.pred[k];
                    if dfa.next(p, x) == t {
                        self.relax_back(back, i - 1, p, g, t, OP_KEEP, x);
                    } else {
                        self.relax_back(back, i - 1, p, g.saturating_add(w.substitute(x, rep)), t, OP_SUBSTITUTE, rep);
                    }
                }
            }
            for k in preds {
                let (p, rep) = back.pred[k];
                if p != t {
                    let byte = match self.text.get(i as usize) {
                        Some(&b) if dfa.next(p, b) == t => b,
                        _ => rep,
                    };
                    self.relax_back(back, i, p, g.saturating_add(w.insert(byte)), t, OP_INSERT, byte);
                }
            }
        }
    }

    /// Forward A* first (most repairs are local and cheap to prove); when it takes long,
    /// alternate with the backward phase, doubling both allowances each round, so the
    /// heuristic keeps improving and neither direction wastes more than a constant factor.
    fn search(&mut self, tuning: Tuning) -> Stop {
        self.start_forward();
        let (mut forward_limit, mut backward_limit) = (tuning.forward_first, tuning.backward_first);
        loop {
            match self.forward(Some(forward_limit)) {
                Stop::Phase => {}
                other => return other,
            }
            if self.back.is_none() {
                self.start_backward();
            }
            match self.backward(backward_limit) {
                Stop::Phase => {}
                other => return other,
            }
            forward_limit = forward_limit.saturating_mul(2).max(1);
            backward_limit = backward_limit.saturating_mul(2).max(1);
        }
    }

    /// The edits of the recorded forward path from the start to `(i, s)`.
    fn path_edits(&self, mut i: u32, mut s: u32) -> Vec<Edit> {
        let mut edits = Vec::new();
        loop {
            let node = self.table.get(i, s);
            match node.op {
                OP_NONE => break,
                OP_KEEP => i -= 1,
                OP_DELETE => {
                    i -= 1;
                    let old = Some(self.text[i as usize]);
                    edits.push(Edit { kind: EditKind::Delete, offset: i as usize, old, new: None });
                }
                OP_SUBSTITUTE => {
                    i -= 1;
                    let old = Some(self.text[i as usize]);
                    edits.push(Edit { kind: EditKind::Substitute, offset: i as usize, old, new: Some(node.byte) });
                }
                _ => {
                    edits.push(Edit { kind: EditKind::Insert, offset: i as usize, old: None, new: Some(node.byte) });
                }
            }
            s = node.parent;
        }
        edits.reverse();
        edits
    }

    /// Appends the edits of the backward search's path from `(i, s)` to a goal.
    fn backward_edits(&self, mut i: u32, mut s: u32, edits: &mut Vec<Edit>) {
        let back = self.back.as_ref().expect("backward phase ran");
        loop {
            let node = back.table.get(i, s);
            let offset = i as usize;
            match node.op {
                OP_NONE => break,
                OP_KEEP => i += 1,
                OP_DELETE => {
                    edits.push(Edit { kind: EditKind::Delete, offset, old: Some(self.text[offset]), new: None });
                    i += 1;
                }
                OP_SUBSTITUTE => {
                    let old = Some(self.text[offset]);
                    edits.push(Edit { kind: EditKind::Substitute, offset, old, new: Some(node.byte) });
                    i += 1;
                }
                _ => edits.push(Edit { kind: EditKind::Insert, offset, old: None, new: Some(node.byte) }),
            }
            s = node.parent;
        }
    }

    fn incumbent_edits(&mut self) -> Vec<Edit> {
        let (i, s, how) = self.incumbent.expect("an incumbent exists");
        let mut edits = self.path_edits(i, s);
        match how {
            Completion::Greedy => {
                greedy_tail(self.dfa, self.text, &mut self.groups, &self.w, i as usize, s, &mut edits);
            }
            Completion::Backward => self.backward_edits(i, s, &mut edits),
        }
        edits
    }

    /// Completes a few promising nodes greedily, keeping the best as the incumbent.
    fn improve_incumbent(&mut self) {
        let mut candidates = vec![(self.deepest.0, self.deepest.2)];
        while candidates.len() <= ANYTIME_CANDIDATES {
            let Some((_, i, s, _)) = self.peek_live() else { break };
            self.heap.pop();
            candidates.push((i, s));
        }
        let mut scratch = Vec::new();
        for (i, s) in candidates {
            let g = self.table.get(i, s).g;
            if g == INF {
                continue;
            }
            scratch.clear();
            let c = greedy_tail(self.dfa, self.text, &mut self.groups, &self.w, i as usize, s, &mut scratch);
            self.offer(g.saturating_add(c), i, s, Completion::Greedy);
        }
    }

    fn run(mut self, tuning: Tuning) -> RepairResult {
        match self.search(tuning) {
            Stop::Exhausted | Stop::Phase => {
                if self.best < self.cost_cap {
                    let edits = self.incumbent_edits();
                    finish(self.dfa, self.text, self.opts, RepairStatus::Optimal, 0, edits, self.expansions())
                } else {
                    let lower_bound = Weights::cost_bound(self.cost_cap);
                    self.no_text(RepairStatus::NoRepairWithinMaxCost, lower_bound)
                }
            }
            Stop::Budget(lb) => {
                self.improve_incumbent();
                let lower_bound = Weights::cost_bound(lb.min(self.best));
                if self.best < self.cost_cap {
                    let edits = self.incumbent_edits();
                    finish(self.dfa, self.text, self.opts, RepairStatus::Anytime, lower_bound, edits, self.expansions())
                } else {
                    self.no_text(RepairStatus::NotFound, lower_bound)
                }
            }
        }
    }

    fn no_text(&self, status: RepairStatus, lower_bound: u32) -> RepairResult {
        RepairResult { status, text: None, cost: None, lower_bound, edits: Vec::new(), expansions: self.expansions() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::DfaConfig;
    use std::cmp::Reverse;

    fn dfa(p: &str) -> Dfa {
        Dfa::from_regex(p, &DfaConfig::default()).unwrap()
    }

    fn full_match(d: &Dfa, bytes: &[u8]) -> bool {
        let s = d.walk(d.start(), bytes);
        s != DEAD && d.is_accepting(s)
    }

    /// Applies edits to the original text, independently of the crate's own helper.
    fn apply_edits(text: &[u8], edits: &[Edit]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut next = 0usize; // next original byte not yet copied or consumed
        let mut last_offset = 0usize;
        for e in edits {
            assert!(e.offset >= last_offset, "edits out of order: {edits:?}");
            last_offset = e.offset;
            assert!(e.offset >= next, "edit at {} overlaps a consumed byte", e.offset);
            out.extend_from_slice(&text[next..e.offset]);
            next = e.offset;
            match e.kind {
                EditKind::Insert => {
                    assert!(e.old.is_none());
                    out.push(e.new.unwrap());
                }
                EditKind::Delete => {
                    assert_eq!(e.old, Some(text[e.offset]));
                    assert!(e.new.is_none());
                    next += 1;
                }
                EditKind::Substitute => {
                    assert_eq!(e.old, Some(text[e.offset]));
                    assert_ne!(e.new, e.old);
                    out.push(e.new.unwrap());
                    next += 1;
                }
            }
        }
        out.extend_from_slice(&text[next..]);
        out
    }

    /// Checks every invariant of a result that carries a text.
    fn check(d: &Dfa, text: &[u8], opts: &RepairOptions, r: &RepairResult) -> Vec<u8> {
        let out = r.text.clone().expect("a text");
        assert!(full_match(d, &out), "repaired text does not match: {:?}", String::from_utf8_lossy(&out));
        assert_eq!(apply_edits(text, &r.edits), out);
        let sum: u32 = r.edits.iter().map(|e| edit_cost(e, opts)).sum();
        assert_eq!(r.cost, Some(sum));
        assert!(r.lower_bound <= sum);
        if r.status == RepairStatus::Optimal {
            assert_eq!(r.lower_bound, sum);
        }
        assert!(std::str::from_utf8(&out).is_ok());
        out
    }

    /// Reference: Dijkstra over (i, s) trying all 256 bytes, no grouping, no heuristic.
    fn reference_cost(d: &Dfa, text: &[u8], opts: &RepairOptions) -> u32 {
        let n = d.num_states();
        let idx = |i: usize, s: u32| i * n + s as usize;
        let mut dist = vec![u32::MAX; (text.len() + 1) * n];
        let mut heap = BinaryHeap::new();
        dist[idx(0, d.start())] = 0;
        heap.push(Reverse((0u32, 0usize, d.start())));
        while let Some(Reverse((g, i, s))) = heap.pop() {
            if g > dist[idx(i, s)] {
                continue;
            }
            if i == text.len() && d.is_accepting(s) {
                return g;
            }
            let mut push = |g2: u32, i2: usize, s2: u32, heap: &mut BinaryHeap<Reverse<(u32, usize, u32)>>| {
                if g2 < dist[idx(i2, s2)] {
                    dist[idx(i2, s2)] = g2;
                    heap.push(Reverse((g2, i2, s2)));
                }
            };
            if i < text.len() {
                let t = d.next(s, text[i]);
                if t != DEAD {
                    push(g, i + 1, t, &mut heap);
                }
                push(g + opts.delete_cost, i + 1, s, &mut heap);
            }
            for b in 0..=255u8 {
                let t = d.next(s, b);
                if t == DEAD {
                    continue;
                }
                if i < text.len() && b != text[i] {
                    push(g + opts.substitute_cost, i + 1, t, &mut heap);
                }
                push(g + opts.insert_cost, i, t, &mut heap);
            }
        }
        unreachable!("every DFA state is live, so a repair always exists")
    }

    /// Weighted Levenshtein distance.
    fn levenshtein(a: &[u8], b: &[u8], opts: &RepairOptions) -> u32 {
        let mut prev: Vec<u32> = (0..=b.len() as u32).map(|j| j * opts.insert_cost).collect();
        for i in 1..=a.len() {
            let mut cur = vec![i as u32 * opts.delete_cost; b.len() + 1];
            for j in 1..=b.len() {
                let sub = if a[i - 1] == b[j - 1] { 0 } else { opts.substitute_cost };
                cur[j] = (prev[j - 1] + sub).min(prev[j] + opts.delete_cost).min(cur[j - 1] + opts.insert_cost);
            }
            prev = cur;
        }
        prev[b.len()]
    }

    /// A tiny deterministic PRNG (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Search schedules to cross-check: the hash-map table, the backward phase from the start,
    /// tight interleaving, and the backward phase alone.
    fn tunings(len: usize) -> Vec<Tuning> {
        let default = Tuning::for_len(len);
        vec![
            Tuning { sparse: true, ..default },
            Tuning { forward_first: 0, backward_first: 0, sparse: false },
            Tuning { forward_first: 2, backward_first: 1, sparse: true },
            Tuning { forward_first: 0, backward_first: usize::MAX / 4, sparse: false },
        ]
    }

    const SMALL_REGEXES: &[(&str, &[u8])] = &[
        ("(ab|c)*a?", b"abc"),
        ("a(b|c)*d", b"abcd"),
        ("[ab]{2,4}c?", b"abc"),
        ("(a|bc)+(d|e)?", b"abcde"),
        ("a*b*c*", b"abc"),
        ("(aa|bb)*", b"ab"),
        ("abc|abd|b", b"abcd"),
        ("((ab)*c){2}", b"abc"),
    ];

    #[test]
    fn validate_reports_offsets() {
        let d = dfa("[0-9]{3}-[a-z]+");
        assert_eq!(validate(&d, b"123-abc"), Validation { valid: true, error_offset: None });
        assert_eq!(validate(&d, b"12x-abc"), Validation { valid: false, error_offset: Some(2) });
        assert_eq!(validate(&d, b"123-"), Validation { valid: false, error_offset: Some(4) });
        assert_eq!(validate(&d, b""), Validation { valid: false, error_offset: Some(0) });
        assert_eq!(validate(&d, b"123-ab\xff"), Validation { valid: false, error_offset: Some(6) });
    }

    #[test]
    fn valid_text_is_unchanged() {
        let d = dfa("[0-9]{3}-[a-z]+");
        let opts = RepairOptions::default();
        let r = repair(&d, b"123-abc", &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        assert_eq!(r.text.as_deref(), Some(&b"123-abc"[..]));
        assert_eq!(r.cost, Some(0));
        assert_eq!(r.lower_bound, 0);
        assert!(r.edits.is_empty());
    }

    #[test]
    fn simple_repairs() {
        let d = dfa("[0-9]{3}-[a-z]+");
        let opts = RepairOptions::default();
        for (text, cost) in
            [(&b"12-abc"[..], 1), (b"123abc", 1), (b"1234-abc", 1), (b"123-", 1), (b"", 5), (b"x23-ab", 1)]
        {
            let r = repair(&d, text, &opts);
            assert_eq!(r.status, RepairStatus::Optimal);
            assert_eq!(r.cost, Some(cost), "{:?}", String::from_utf8_lossy(text));
            check(&d, text, &opts, &r);
        }
        let r = repair(&d, b"123abc", &opts);
        assert_eq!(r.edits, vec![Edit { kind: EditKind::Insert, offset: 3, old: None, new: Some(b'-') }]);
        let r = repair(&d, b"12x-abc", &opts);
        assert_eq!(r.edits.len(), 1);
        assert_eq!(r.edits[0].kind, EditKind::Substitute);
        assert_eq!(r.edits[0].offset, 2);
    }

    #[test]
    fn matches_reference_on_random_cases() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut cases = 0;
        for &(pattern, alphabet) in SMALL_REGEXES {
            let d = dfa(pattern);
            for _ in 0..150 {
                let len = rng.below(9) as usize;
                let text: Vec<u8> = (0..len)
                    .map(|_| match rng.below(10) {
                        0 => b'x',
                        1 => 0xff,
                        _ => alphabet[rng.below(alphabet.len() as u64) as usize],
                    })
                    .collect();
                let opts = if rng.below(2) == 0 {
                    RepairOptions::default()
                } else {
                    RepairOptions {
                        insert_cost: 1 + rng.below(3) as u32,
                        delete_cost: 1 + rng.below(3) as u32,
                        substitute_cost: 1 + rng.below(4) as u32,
                        ..RepairOptions::default()
                    }
                };
                let want = reference_cost(&d, &text, &opts);
                let r = repair(&d, &text, &opts);
                assert_eq!(r.status, RepairStatus::Optimal);
                assert_eq!(r.cost, Some(want), "{pattern} {:?} {opts:?}", String::from_utf8_lossy(&text));
                let out = check(&d, &text, &opts, &r);
                assert_eq!(levenshtein(&text, &out, &opts), want);
                // Every schedule (hash table, early and interleaved backward phases, backward
                // only) finds the same optimum.
                for tuning in tunings(len) {
                    let other = repair_impl(&d, &text, &opts, tuning);
                    assert_eq!(other.status, RepairStatus::Optimal);
                    assert_eq!(
                        other.cost,
                        Some(want),
                        "{pattern} {:?} {opts:?} {tuning:?}",
                        String::from_utf8_lossy(&text)
                    );
                    check(&d, &text, &opts, &other);
                }
                cases += 1;
            }
        }
        assert_eq!(cases, 150 * SMALL_REGEXES.len());
    }

    /// Enumerates the language up to the length any cheaper repair could have, and checks no
    /// string is closer than the returned cost.
    #[test]
    fn matches_enumeration_on_tiny_cases() {
        let mut rng = Rng(12345);
        let opts = RepairOptions::default();
        for &(pattern, alphabet) in SMALL_REGEXES {
            let d = dfa(pattern);
            for _ in 0..25 {
                let len = rng.below(5) as usize;
                let text: Vec<u8> = (0..len)
                    .map(|_| if rng.below(6) == 0 { b'x' } else { alphabet[rng.below(alphabet.len() as u64) as usize] })
                    .collect();
                let r = repair(&d, &text, &opts);
                let cost = r.cost.unwrap();
                let out = check(&d, &text, &opts, &r);
                assert_eq!(levenshtein(&text, &out, &opts), cost);
                // Any string at distance < cost has fewer than len + cost bytes.
                let max_len = len + cost as usize;
                if alphabet.len().pow(max_len as u32) > 200_000 {
                    continue;
                }
                let mut best = u32::MAX;
                let mut word = Vec::new();
                enumerate(&d, alphabet, max_len, &mut word, &mut |w| {
                    best = best.min(levenshtein(&text, w, &opts));
                });
                assert_eq!(best, cost, "{pattern} {:?}", String::from_utf8_lossy(&text));
            }
        }
    }

    fn enumerate(d: &Dfa, alphabet: &[u8], max_len: usize, word: &mut Vec<u8>, f: &mut impl FnMut(&[u8])) {
        if full_match(d, word) {
            f(word);
        }
        if word.len() == max_len {
            return;
        }
        for &b in alphabet {
            word.push(b);
            if d.walk(d.start(), word) != DEAD {
                enumerate(d, alphabet, max_len, word, f);
            }
            word.pop();
        }
    }

    /// A flat JSON object: string keys, values are scalars or arrays of scalars.
    fn json_object_dfa() -> Dfa {
        let ws = r"[ \t\n\r]*";
        let s = r#""([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#;
        let num = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?";
        let scalar = format!("({s}|{num}|true|false|null)");
        let arr = format!(r"\[{ws}({scalar}{ws}(,{ws}{scalar}{ws})*)?\]");
        let member = format!("{s}{ws}:{ws}({scalar}|{arr})");
        dfa(&format!(r"{ws}\{{{ws}({member}{ws}(,{ws}{member}{ws})*)?\}}{ws}"))
    }

    fn repair_json(d: &Dfa, text: &str) -> (RepairResult, String) {
        let opts = RepairOptions::default();
        let r = repair(d, text.as_bytes(), &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        let out = check(d, text.as_bytes(), &opts, &r);
        assert_eq!(r.cost, Some(reference_cost(d, text.as_bytes(), &opts)), "{text}");
        for tuning in tunings(text.len()) {
            let other = repair_impl(d, text.as_bytes(), &opts, tuning);
            assert_eq!(other.status, RepairStatus::Optimal);
            assert_eq!(other.cost, r.cost, "{text} {tuning:?}");
            check(d, text.as_bytes(), &opts, &other);
        }
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn json_trailing_comma() {
        let d = json_object_dfa();
        let (r, out) = repair_json(&d, r#"{"name": "Ada", "tags": ["x", "y",], "age": 36,}"#);
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, r#"{"name": "Ada", "tags": ["x", "y"], "age": 36}"#);
        assert!(r.edits.iter().all(|e| e.kind == EditKind::Delete && e.old == Some(b',')));
    }

    #[test]
    fn json_missing_brace_and_quote() {
        let d = json_object_dfa();
        let (r, out) = repair_json(&d, r#"{"name": "Ada", "age": 36"#);
        assert_eq!(r.cost, Some(1));
        assert_eq!(out, r#"{"name": "Ada", "age": 36}"#);
        let (r, out) = repair_json(&d, r#"{"name": "Ada}"#);
        assert_eq!(r.cost, Some(1));
        assert_eq!(out, r#"{"name": "Ada"}"#);
        let (r, out) = repair_json(&d, r#"{"name": "Ada"#);
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, r#"{"name": "Ada"}"#);
        let (r, _) = repair_json(&d, r#"{"name": Ada", "ok": true}"#);
        assert_eq!(r.cost, Some(1));
    }

    #[test]
    fn json_surrounding_prose() {
        // Minimal edit distance may absorb prose into a string rather than delete it; the
        // reference search confirms each cost is optimal.
        let d = json_object_dfa();
        for text in [
            r#"Note: {"a": 1}"#,
            "{\"a\": [1, 2]}\nHope it helps!",
            "Sure:\n{\"a\": true} ok",
            "Here you go!\n\n{\"name\": \"Ada\", \"age\": 36}\n\nLet me know.",
        ] {
            let (r, _) = repair_json(&d, text);
            assert!(r.cost.unwrap() > 0);
        }
        // Making insertions and substitutions dearer than deletions strips the prose instead.
        let opts = RepairOptions { insert_cost: 10, substitute_cost: 10, ..RepairOptions::default() };
        let text = "Here you go!\n\n{\"name\": \"Ada\", \"age\": 36}\n\nLet me know.";
        let r = repair(&d, text.as_bytes(), &opts);
        assert_eq!(r.cost, Some(reference_cost(&d, text.as_bytes(), &opts)));
        let out = String::from_utf8(check(&d, text.as_bytes(), &opts, &r)).unwrap();
        assert_eq!(out.trim(), r#"{"name": "Ada", "age": 36}"#);
        assert!(r.edits.iter().all(|e| e.kind == EditKind::Delete));
        let (r, out) = repair_json(&d, r#"ok {"a": 1}"#);
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, r#" {"a": 1}"#);
        let (r, out) = repair_json(&d, "{\"a\": 1} ok");
        assert_eq!(r.cost, Some(2));
        assert_eq!(out, "{\"a\": 1} ");
    }

    #[test]
    fn broken_utf8_gives_valid_utf8() {
        let d = dfa("[é日]+");
        let opts = RepairOptions::default();
        let inputs: [&[u8]; 6] =
            [b"\xc3\xa9\xc3\xe6\x97\xa5", b"\xe6\x97", b"\xff\xfe", b"", b"\xc3\xa9x\xe6\x97\xa5\xa5", b"\xa9\xc3"];
        for text in inputs {
            let r = repair(&d, text, &opts);
            assert_eq!(r.status, RepairStatus::Optimal);
            let out = check(&d, text, &opts, &r);
            let s = std::str::from_utf8(&out).expect("valid UTF-8");
            assert!(!s.is_empty() && s.chars().all(|c| c == 'é' || c == '日'));
            assert_eq!(r.cost, Some(reference_cost(&d, text, &opts)));
            for tuning in tunings(text.len()) {
                let other = repair_impl(&d, text, &opts, tuning);
                assert_eq!(other.cost, r.cost);
                assert!(std::str::from_utf8(&check(&d, text, &opts, &other)).is_ok());
            }
        }
        // One missing continuation byte costs one insertion.
        let r = repair(&d, b"\xc3\xa9\xe6\x97", &opts);
        assert_eq!(r.cost, Some(1));
        assert_eq!(r.text.as_deref(), Some("é日".as_bytes()));
    }

    #[test]
    fn max_cost() {
        let d = dfa("[0-9]{3}-[a-z]+");
        let text = b"1x3+abc"; // needs 2 substitutions
        let tight = RepairOptions { max_cost: Some(1), ..RepairOptions::default() };
        let r = repair(&d, text, &tight);
        assert_eq!(r.status, RepairStatus::NoRepairWithinMaxCost);
        assert_eq!(r.text, None);
        assert_eq!(r.cost, None);
        assert!(r.edits.is_empty());
        assert_eq!(r.lower_bound, 2);
        let exact = RepairOptions { max_cost: Some(2), ..RepairOptions::default() };
        let r = repair(&d, text, &exact);
        assert_eq!(r.status, RepairStatus::Optimal);
        assert_eq!(r.cost, Some(2));
        check(&d, text, &exact, &r);
        let zero = RepairOptions { max_cost: Some(0), ..RepairOptions::default() };
        assert_eq!(repair(&d, text, &zero).status, RepairStatus::NoRepairWithinMaxCost);
        assert_eq!(repair(&d, b"123-abc", &zero).status, RepairStatus::Optimal);
    }

    fn long_json(n_items: usize, errors: bool) -> String {
        let mut s = String::from("{");
        for k in 0..n_items {
            if k > 0 {
                s.push_str(", ");
            }
            s.push_str(&format!("\"key{k}\": \"value number {k} with some text\""));
            if errors && k % 7 == 3 {
                s.push(','); // a stray comma
            }
        }
        if !errors {
            s.push('}');
        }
        s
    }

    #[test]
    fn expansion_budget_gives_anytime_answer() {
        let d = json_object_dfa();
        let text = long_json(40, true);
        let full = repair(&d, text.as_bytes(), &RepairOptions::default());
        assert_eq!(full.status, RepairStatus::Optimal);
        for budget in [0, 5, 50] {
            let opts = RepairOptions { max_expansions: Some(budget), ..RepairOptions::default() };
            let r = repair(&d, text.as_bytes(), &opts);
            assert_eq!(r.status, RepairStatus::Anytime, "budget {budget}");
            assert!(r.expansions <= budget);
            let cost = r.cost.unwrap();
            check(&d, text.as_bytes(), &opts, &r);
            assert!(r.lower_bound <= full.cost.unwrap() && full.cost.unwrap() <= cost);
        }
        let opts = RepairOptions { deadline: Some(Duration::ZERO), ..RepairOptions::default() };
        let r = repair(&d, text.as_bytes(), &opts);
        assert_eq!(r.status, RepairStatus::Anytime);
        check(&d, text.as_bytes(), &opts, &r);
        // A budget too small with a max_cost below the greedy answer: nothing found yet.
        let opts =
            RepairOptions { max_expansions: Some(0), max_cost: Some(full.cost.unwrap()), ..RepairOptions::default() };
        let r = repair(&d, text.as_bytes(), &opts);
        assert!(matches!(r.status, RepairStatus::NotFound | RepairStatus::Anytime));
        if r.status == RepairStatus::NotFound {
            assert_eq!(r.text, None);
        }
    }

    /// Random corruptions of JSON texts: the optimum matches the reference under every schedule.
    #[test]
    fn random_json_corruptions_match_reference() {
        let d = json_object_dfa();
        let bases = [
            r#"{"name": "Ada", "age": 36, "tags": ["x", "y"]}"#,
            r#"{"a":1,"b":[true,false,null],"c":"q\"z"}"#,
            r#" { "k" : -1.5e3 , "l" : [ ] } "#,
        ];
        let junk = b"{}[]\",: x1\\\xc3";
        let mut rng = Rng(0xdead_beef);
        for _ in 0..60 {
            let mut text = bases[rng.below(bases.len() as u64) as usize].as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(text.len() as u64 + 1) as usize;
                let byte = junk[rng.below(junk.len() as u64) as usize];
                match rng.below(3) {
                    0 if at < text.len() => {
                        text.remove(at);
                    }
                    1 if at < text.len() => text[at] = byte,
                    _ => text.insert(at, byte),
                }
            }
            let opts = RepairOptions::default();
            let want = reference_cost(&d, &text, &opts);
            let r = repair(&d, &text, &opts);
            assert_eq!(r.cost, Some(want), "{:?}", String::from_utf8_lossy(&text));
            check(&d, &text, &opts, &r);
            for tuning in tunings(text.len()) {
                let other = repair_impl(&d, &text, &opts, tuning);
                assert_eq!(other.cost, Some(want), "{:?} {tuning:?}", String::from_utf8_lossy(&text));
                check(&d, &text, &opts, &other);
            }
        }
    }

    /// A truncated text (the costly case for the forward search alone: every position allows
    /// cheap detours) is repaired by appending the missing closers.
    #[test]
    fn truncated_json_is_completed() {
        let d = json_object_dfa();
        let valid = long_json(30, false);
        let cut = &valid[..valid.len() - 20];
        let opts = RepairOptions::default();
        let r = repair(&d, cut.as_bytes(), &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        let out = check(&d, cut.as_bytes(), &opts, &r);
        assert!(out.starts_with(cut.as_bytes()));
        assert!(r.edits.iter().all(|e| e.kind == EditKind::Insert && e.offset == cut.len()));
        assert_eq!(r.cost, Some(2)); // `"}`
        let forward_only = Tuning { forward_first: usize::MAX / 4, ..Tuning::for_len(cut.len()) };
        assert_eq!(repair_impl(&d, cut.as_bytes(), &opts, forward_only).cost, r.cost);
    }

    /// Budgets that run out in either phase still give a valid text and a sound lower bound.
    #[test]
    fn budgets_in_both_phases() {
        let d = json_object_dfa();
        let mut text = long_json(12, true);
        text.truncate(text.len() - 9);
        text.insert_str(0, "Result: ");
        let bytes = text.as_bytes();
        let optimum = repair(&d, bytes, &RepairOptions::default()).cost.unwrap();
        assert_eq!(Some(optimum), Some(reference_cost(&d, bytes, &RepairOptions::default())));
        for tuning in [Tuning::for_len(bytes.len()), Tuning { forward_first: 5, backward_first: 5, sparse: false }] {
            for budget in [0, 1, 3, 10, 30, 100, 300, 1000, 3000] {
                let opts = RepairOptions { max_expansions: Some(budget), ..RepairOptions::default() };
                let r = repair_impl(&d, bytes, &opts, tuning);
                assert!(matches!(r.status, RepairStatus::Anytime | RepairStatus::Optimal), "{budget} {:?}", r.status);
                assert!(r.expansions <= budget);
                let cost = r.cost.unwrap();
                check(&d, bytes, &opts, &r);
                assert!(
                    r.lower_bound <= optimum && optimum <= cost,
                    "{budget} {tuning:?}: {} {optimum} {cost}",
                    r.lower_bound
                );
                if r.status == RepairStatus::Optimal {
                    assert_eq!(cost, optimum);
                }
            }
        }
    }

    #[test]
    fn costs_steer_the_repair() {
        let d = dfa("ab");
        // Substitution cheaper than delete + insert.
        let r = repair(&d, b"xb", &RepairOptions::default());
        assert_eq!(r.cost, Some(1));
        assert_eq!(r.edits[0].kind, EditKind::Substitute);
        // Substitution dearer than delete + insert.
        let opts = RepairOptions { substitute_cost: 5, ..RepairOptions::default() };
        let r = repair(&d, b"xb", &opts);
        assert_eq!(r.cost, Some(2));
        check(&d, b"xb", &opts, &r);
        assert!(r.edits.iter().all(|e| e.kind != EditKind::Substitute));
        // Expensive deletions: keep the bytes by inserting around them when the language allows.
        let d = dfa("a[a-z]*b");
        let opts = RepairOptions { delete_cost: 10, substitute_cost: 10, ..RepairOptions::default() };
        let r = repair(&d, b"xyz", &opts);
        assert_eq!(r.cost, Some(2));
        assert_eq!(check(&d, b"xyz", &opts, &r), b"axyzb");
    }

    #[test]
    fn invalid_utf8_against_ascii_grammar() {
        let d = dfa("[a-z]+(,[a-z]+)*");
        let opts = RepairOptions::default();
        let text = b"ab\xff\xfecd,,e\x80";
        let r = repair(&d, text, &opts);
        assert_eq!(r.cost, Some(reference_cost(&d, text, &opts)));
        assert_eq!(r.cost, Some(4));
        check(&d, text, &opts, &r);
    }
}
