//! A pushdown grammar's masks: per rule state, the tokens that stay inside the rule (computed
//! once, whatever the stack), and per reading, the few that leave it.
//!
//! From a state of a rule, a token either
//! - is read entirely by that rule, possibly calling others and returning from them within the
//!   token: whether it is allowed does not depend on what called the rule, so it is decided
//!   once per rule state ([`LocalRow::mask`]); or
//! - reaches a point where the rule may end with bytes of the token left, which the caller
//!   must read: allowed or not depends on the stack. The trie nodes where that happens are
//!   kept ([`LocalRow::exits`]).
//!
//! A token that leaves the rule depends only on as many frames of the stack as it pops, so the
//! rest of a reading's mask is found a frame at a time ([`frame_row`]): with the top frame
//! known, walk only the subtrees at the exits, from the rule state with that frame under it;
//! the tokens read there are allowed, and the nodes where that frame's rule may end in turn
//! are the exits of the next frame. Each step depends on the rule state and the frames known
//! so far, not on the stack below them, so it is shared by every reading with the same top of
//! stack.
//!
//! Every walk is one pass over (part of) the vocabulary's trie carrying a set of heads (rather
//! than one DFA state, as a regular grammar's row does), with a scratch stack arena whose
//! bottom stands for whatever is below the frames known.
//!
//! Rows read from heads that keep nothing (see `super::distinct`): an element of an array of
//! distinct elements is read there as any text of its language. A reading whose heads keep a
//! memo takes from the rows only what does not depend on it (an element's tokens that do not
//! finish it) and walks the rest with its own heads.

use super::bounds::{heads_distance, stack_distance, Bounds, FAR};
use super::distinct::{Memo, Memory};
use super::rules::{Rtn, Rule};
use super::step::{step_byte, Arena, FirstBytes, Frame, Head, Overlay, StackId, Stacks};
use crate::automata::Dfa;
use crate::grammar::index::mask_words;
use crate::util::{RuleId, StateId};
use crate::vocab::Vocabulary;

/// What one rule state allows whatever called it.
#[derive(Debug)]
pub struct LocalRow {
    /// Tokens the rule reads entirely from this state (EOS not included: that depends on the
    /// stack).
    pub mask: Box<[u32]>,
    /// Trie nodes whose tokens (that node's and those below it) leave the rule before their
    /// last byte: the rule may end just before the node's byte.
    pub exits: Box<[u32]>,
    /// The largest distance to the end of the rule (in bytes, frames pushed inside the token
    /// included) after a token of `mask`.
    pub max_after: u32,
    /// For an element of an array of distinct elements: the trie nodes whose byte ends the
    /// element (their subtrees are the tokens whose value the array's set decides).
    pub closing: Box<[u32]>,
}

impl LocalRow {
    pub fn memory_bytes(&self) -> usize {
        (self.mask.len() + self.exits.len() + self.closing.len()) * 4 + 16
    }
}

/// The local row of `state` of `rule`.
pub fn local_row<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    vocab: &Vocabulary,
    bounds: &Bounds,
    dfa_of: &dyn Fn(RuleId) -> &'a Dfa,
    rule: RuleId,
    state: StateId,
) -> LocalRow {
    let empty = Stacks::new();
    let mut arena = Overlay::new(&empty);
    let mut mask = vec![0u32; mask_words(vocab.size())];
    let mut exits: Vec<u32> = Vec::new();
    let walk = TrieWalk { rtn, first, vocab, bounds, dfa_of, budget: None };
    let from = [Head::new(rule, state, StackId::EMPTY)];
    let max_after = walk.run(&mut arena, &from, None, &mut mask, Some(&mut exits));
    let closing = match rtn.rule(rule).memory {
        Memory::Element => closing_nodes(rtn.rule(rule), dfa_of(rule), vocab, state),
        _ => Vec::new(),
    };
    LocalRow { mask: mask.into_boxed_slice(), exits: exits.into_boxed_slice(), max_after: max_after.min(FAR), closing: closing.into_boxed_slice() }
}

/// The trie nodes whose byte takes `rule` (a rule without calls) from `state` into an
/// accepting state, through the DFA `dfa`; their subtrees are not walked further.
fn closing_nodes(rule: &Rule, dfa: &Dfa, vocab: &Vocabulary, state: StateId) -> Vec<u32> {
    let trie = vocab.trie();
    let nodes = trie.nodes();
    let mut states = vec![StateId::DEAD; trie.max_depth() + 1];
    states[0] = state;
    let mut out = Vec::new();
    let mut i = 0;
    while i < trie.num_nodes() {
        let node = nodes[i];
        let d = node.depth as usize;
        let t = dfa.next(states[d - 1], node.label);
        if t.is_dead() || !rule.live[t.as_usize()] {
            i = node.skip as usize;
            continue;
        }
        if rule.is_accepting(t) {
            out.push(i as u32);
            i = node.skip as usize;
            continue;
        }
        states[d] = t;
        i += 1;
    }
    out
}

/// Clears in `mask` the bits of the tokens in the subtrees of the trie nodes `at`.
pub fn clear_subtrees(vocab: &Vocabulary, at: &[u32], mask: &mut [u32]) {
    let trie = vocab.trie();
    let nodes = trie.nodes();
    for &node in at {
        for i in node as usize..nodes[node as usize].skip as usize {
            for &t in trie.tokens_at(i) {
                let t = t.as_u32();
                mask[(t >> 5) as usize] &= !(1 << (t & 31));
            }
        }
    }
}

/// What a rule state allows once the top frames of the stack under it are known: the tokens
/// that pop into those frames and are read entirely by them.
#[derive(Debug)]
pub struct FrameRow {
    /// Tokens allowed through the frames (some may also be in the rule state's local row).
    pub tokens: Box<[u32]>,
    /// Trie nodes whose tokens leave the deepest known frame's rule before their last byte.
    pub exits: Box<[u32]>,
    /// The largest distance (in bytes) to the end of the deepest known frame's rule after one
    /// of `tokens`.
    pub max_after: u32,
}

impl FrameRow {
    pub fn memory_bytes(&self) -> usize {
        (self.tokens.len() + self.exits.len()) * 4 + 40
    }
}

/// The frame row of `state` of `rule` under `frames` (top first, each a calling rule and the
/// state its call returns to), where `scope` are the exits found with one frame fewer: only
/// their subtrees are walked, so only tokens that pop the deepest frame are new.
#[allow(clippy::too_many_arguments)]
pub fn frame_row<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    vocab: &Vocabulary,
    bounds: &Bounds,
    dfa_of: &dyn Fn(RuleId) -> &'a Dfa,
    rule: RuleId,
    state: StateId,
    frames: &[(RuleId, StateId)],
    scope: &[u32],
) -> FrameRow {
    let empty = Stacks::new();
    let mut arena = Overlay::new(&empty);
    let mut stack = StackId::EMPTY;
    for &(r, ret) in frames.iter().rev() {
        stack = arena.push(Frame { rule: r, ret, memo: Memo::NONE, parent: stack });
    }
    let mut mask = vec![0u32; mask_words(vocab.size())];
    let mut exits: Vec<u32> = Vec::new();
    let walk = TrieWalk { rtn, first, vocab, bounds, dfa_of, budget: None };
    let from = [Head::new(rule, state, stack)];
    let max_after = walk.run(&mut arena, &from, Some(scope), &mut mask, Some(&mut exits));
    let mut tokens = Vec::new();
    for (w, &bits) in mask.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            tokens.push((w as u32) << 5 | b.trailing_zeros());
            b &= b - 1;
        }
    }
    FrameRow { tokens: tokens.into_boxed_slice(), exits: exits.into_boxed_slice(), max_after: max_after.min(FAR) }
}

/// The ordinary tokens `heads` (a reading, in the grammar's arena, its heads' memos included)
/// may read after which the end of the text is at most `budget` bytes away: their bits are set
/// in `mask`. One walk of the whole trie (only the subtrees at `scope`, when given): for the
/// steps where a budget cuts into a reading's mask, and with `FAR - 1` for the tokens a reading
/// with memos allows. Returns the largest distance to the end after one.
#[allow(clippy::too_many_arguments)]
pub fn within_walk<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    vocab: &Vocabulary,
    bounds: &Bounds,
    dfa_of: &dyn Fn(RuleId) -> &'a Dfa,
    stacks: &Stacks,
    heads: &[Head],
    budget: u32,
    scope: Option<&[u32]>,
    mask: &mut [u32],
) -> u32 {
    let mut arena = Overlay::new(stacks);
    let walk = TrieWalk { rtn, first, vocab, bounds, dfa_of, budget: Some(budget) };
    walk.run(&mut arena, heads, scope, mask, None)
}

/// One walk over (a subtree of) the vocabulary's trie, reading each token's bytes from a set
/// of heads.
struct TrieWalk<'w, 'a> {
    rtn: &'a Rtn,
    first: &'w FirstBytes,
    vocab: &'w Vocabulary,
    bounds: &'w Bounds,
    dfa_of: &'w dyn Fn(RuleId) -> &'a Dfa,
    /// Only tokens after which the end is at most this far (in bytes) are set.
    budget: Option<u32>,
}

/// Where a trie path leaves the reader: most of the vocabulary is read by one head whose state
/// neither calls a rule nor may end its rule and which keeps nothing, so a byte only moves it
/// along its DFA and its stack (and so the distance the stack adds) stays as it is;
/// elsewhere, a set of heads.
#[derive(Clone, Copy)]
enum Level {
    Plain { head: Head, below: u32 },
    Many,
}

impl<'w, 'a> TrieWalk<'w, 'a> {
    fn is_plain(&self, h: Head) -> bool {
        let rule = self.rtn.rule(h.rule);
        h.memo == Memo::NONE && rule.calls_at(h.state).is_empty() && !rule.is_accepting(h.state)
    }

    fn level(&self, arena: &Overlay<'_>, heads: &[Head]) -> Level {
        match heads {
            [h] if self.is_plain(*h) => Level::Plain { head: *h, below: stack_distance(self.bounds, arena, h.stack) },
            _ => Level::Many,
        }
    }

    /// Walks the trie reading from `from`; sets the bits of the tokens read entirely and returns
    /// the largest distance to the end after one. With `scope` (trie nodes in walk order), only
    /// the subtrees at those nodes are walked (and the paths down to them) and only their tokens
    /// are set. With `exits`, notes the nodes whose byte some head could only read by leaving
    /// the bottom of its stack.
    fn run(&self, arena: &mut Overlay<'_>, from: &[Head], scope: Option<&[u32]>, mask: &mut [u32], mut exits: Option<&mut Vec<u32>>) -> u32 {
        let trie = self.vocab.trie();
        let nodes = trie.nodes();
        let end = trie.num_nodes();
        let mut levels = vec![Level::Many; trie.max_depth() + 1];
        let mut heads: Vec<Vec<Head>> = vec![Vec::new(); trie.max_depth() + 1];
        heads[0] = from.to_vec();
        levels[0] = self.level(arena, from);
        let mut next = Vec::new();
        let mut max_after = 0u32;
        // Within scope: the next scope node not before this one, and where the subtree of the
        // last scope node entered ends.
        let mut next_scope = 0usize;
        let mut covered_to = 0usize;
        let mut i = 0;
        while i < end {
            let node = nodes[i];
            let d = node.depth as usize;
            if let Some(scope) = scope {
                while next_scope < scope.len() && (scope[next_scope] as usize) < i {
                    next_scope += 1;
                }
                if next_scope < scope.len() && scope[next_scope] as usize == i {
                    covered_to = covered_to.max(node.skip as usize);
                }
                if i >= covered_to && !(next_scope < scope.len() && (scope[next_scope] as usize) < node.skip as usize) {
                    i = node.skip as usize;
                    continue;
                }
            }
            let after = match levels[d - 1] {
                Level::Plain { head, below } => {
                    let rule = self.rtn.rule(head.rule);
                    let t = (self.dfa_of)(head.rule).next(head.state, node.label);
                    if t.is_dead() || !rule.live[t.as_usize()] {
                        i = node.skip as usize;
                        continue;
                    }
                    let moved = Head { state: t, ..head };
                    if self.is_plain(moved) {
                        levels[d] = Level::Plain { head: moved, below };
                    } else {
                        heads[d].clear();
                        heads[d].push(moved);
                        levels[d] = Level::Many;
                    }
                    self.bounds[head.rule.as_usize()][t.as_usize()].saturating_add(below)
                }
                Level::Many => {
                    let left = step_byte(self.rtn, self.first, arena, &heads[d - 1], node.label, self.dfa_of, &mut next);
                    if left {
                        if let Some(e) = exits.as_deref_mut() {
                            e.push(i as u32);
                        }
                    }
                    if next.is_empty() {
                        i = node.skip as usize;
                        continue;
                    }
                    std::mem::swap(&mut heads[d], &mut next);
                    levels[d] = self.level(arena, &heads[d]);
                    match levels[d] {
                        Level::Plain { head, below } => self.bounds[head.rule.as_usize()][head.state.as_usize()].saturating_add(below),
                        Level::Many => heads_distance(self.rtn, self.bounds, arena, &heads[d]),
                    }
                }
            };
            let tokens = trie.tokens_at(i);
            if !tokens.is_empty() && self.budget.is_none_or(|b| after <= b) && (scope.is_none() || i < covered_to) {
                max_after = max_after.max(after.min(FAR));
                for &t in tokens {
                    let t = t.as_u32();
                    mask[(t >> 5) as usize] |= 1 << (t & 31);
                }
            }
            i += 1;
        }
        max_after
    }
}

/// Reads `bytes` from `heads` in `arena`; the heads after them (empty: refused).
pub fn read<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    arena: &mut dyn Arena,
    heads: &[Head],
    bytes: &[u8],
    dfa_of: &dyn Fn(RuleId) -> &'a Dfa,
) -> Vec<Head> {
    let mut cur = heads.to_vec();
    let mut next = Vec::new();
    for &b in bytes {
        step_byte(rtn, first, arena, &cur, b, dfa_of, &mut next);
        std::mem::swap(&mut cur, &mut next);
        if cur.is_empty() {
            break;
        }
    }
    cur
}
