//! A pushdown grammar's masks: per rule state, the tokens that stay inside the rule (computed
//! once, whatever the stack), and per reading, the few that leave it.
//!
//! From a state of a rule, a token either
//! - is read entirely by that rule, possibly calling others and returning from them within the
//!   token: whether it is allowed does not depend on what called the rule, so it is decided
//!   once per rule state ([`LocalRow::mask`]); or
//! - reaches a point where the rule may end with bytes of the token left, which the caller
//!   must read: allowed or not depends on the stack. The trie nodes where that happens are
//!   kept ([`LocalRow::exits`]); a reading's mask walks only those subtrees, from the states
//!   its stack returns to ([`exit_walk`]).
//!
//! Both are one walk over the vocabulary's trie carrying a set of heads (rather than one DFA
//! state, as a regular grammar's row does), with a scratch stack arena whose bottom stands for
//! the caller.

use super::bounds::{heads_distance, FAR};
use super::rules::Rtn;
use super::step::{step_byte, Arena, FirstBytes, Head, Overlay, StackId, Stacks};
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
}

impl LocalRow {
    pub fn memory_bytes(&self) -> usize {
        self.mask.len() * 4 + self.exits.len() * 4 + 16
    }
}

/// The local row of `state` of `rule`.
pub fn local_row<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    vocab: &Vocabulary,
    bounds: &[Vec<u32>],
    dfa_of: &dyn Fn(RuleId) -> &'a Dfa,
    rule: RuleId,
    state: StateId,
) -> LocalRow {
    let empty = Stacks::new();
    let mut arena = Overlay::new(&empty);
    let trie = vocab.trie();
    let nodes = trie.nodes();
    let n = trie.num_nodes();
    let mut mask = vec![0u32; mask_words(vocab.size())];
    let mut exits: Vec<u32> = Vec::new();
    let mut max_after = 0u32;
    // heads[d]: the heads after the first d bytes of the current trie path.
    let mut heads: Vec<Vec<Head>> = vec![Vec::new(); trie.max_depth() + 1];
    heads[0].push(Head { rule, state, stack: StackId::EMPTY });
    let mut next = Vec::new();
    let mut i = 0;
    while i < n {
        let node = nodes[i];
        let d = node.depth as usize;
        let left = step_byte(rtn, first, &mut arena, &heads[d - 1], node.label, dfa_of, &mut next);
        if left {
            exits.push(i as u32);
        }
        if next.is_empty() {
            i = node.skip as usize;
            continue;
        }
        std::mem::swap(&mut heads[d], &mut next);
        let tokens = trie.tokens_at(i);
        if !tokens.is_empty() {
            max_after = max_after.max(heads_distance(bounds, &arena, &heads[d]));
            for &t in tokens {
                let t = t.as_u32();
                mask[(t >> 5) as usize] |= 1 << (t & 31);
            }
        }
        i += 1;
    }
    LocalRow { mask: mask.into_boxed_slice(), exits: exits.into_boxed_slice(), max_after: max_after.min(FAR) }
}

/// The tokens of the subtree at trie node `node` that `from` (the heads a caller resumes at,
/// in the grammar's arena) reads entirely, the node's byte first: their bits are set in
/// `mask`. Returns the largest distance to the end of the text after one of them.
#[allow(clippy::too_many_arguments)]
pub fn exit_walk<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    vocab: &Vocabulary,
    bounds: &[Vec<u32>],
    dfa_of: &dyn Fn(RuleId) -> &'a Dfa,
    stacks: &Stacks,
    from: &[Head],
    node: usize,
    mask: &mut [u32],
) -> u32 {
    let mut arena = Overlay::new(stacks);
    let trie = vocab.trie();
    let nodes = trie.nodes();
    let base = trie.depth(node);
    let end = trie.skip(node);
    let mut heads: Vec<Vec<Head>> = vec![Vec::new(); trie.max_depth() + 1];
    heads[base - 1] = from.to_vec();
    let mut next = Vec::new();
    let mut max_after = 0u32;
    let mut i = node;
    while i < end {
        let nd = nodes[i];
        let d = nd.depth as usize;
        step_byte(rtn, first, &mut arena, &heads[d - 1], nd.label, dfa_of, &mut next);
        if next.is_empty() {
            i = nd.skip as usize;
            continue;
        }
        std::mem::swap(&mut heads[d], &mut next);
        let tokens = trie.tokens_at(i);
        if !tokens.is_empty() {
            max_after = max_after.max(heads_distance(bounds, &arena, &heads[d]));
            for &t in tokens {
                let t = t.as_u32();
                mask[(t >> 5) as usize] |= 1 << (t & 31);
            }
        }
        i += 1;
    }
    max_after
}

/// The heads a rule resumes at when the head `h` ends its rule: the frame under it, popped.
/// Empty when `h` is at the bottom of its stack (nothing follows the text's end).
pub fn resumed(stacks: &dyn Arena, h: Head) -> Vec<Head> {
    match stacks.top(h.stack) {
        Some(f) => vec![Head { rule: f.rule, state: f.ret, stack: f.parent }],
        None => Vec::new(),
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
