//! One state's row of the token index: which tokens keep the DFA alive, and where each goes.
//!
//! The row is found by one walk over the vocabulary's [`TokenTrie`] carrying the DFA state down
//! each edge. A byte that kills the DFA skips the whole subtree, so a state that allows few
//! tokens costs little, and one that allows almost everything (free text) costs one pass.

use crate::dfa::{Dfa, DEAD};
use crate::vocab::Vocabulary;

/// A computed row: the bitmask over all token ids, and the (token, next state) transitions of
/// the ordinary tokens it allows, in trie order.
#[derive(Debug)]
pub struct Row {
    pub mask: Box<[u32]>,
    pub tokens: Box<[u32]>,
    pub next: Box<[u32]>,
    /// The largest byte distance to acceptance over the states the allowed tokens lead to.
    /// When every byte is a token of its own, a state `d` bytes from acceptance is at most `d`
    /// tokens from it, so a budget of at least this many tokens needs no extra masking.
    pub max_next_distance: u32,
}

impl Row {
    pub fn memory_bytes(&self) -> usize {
        (self.mask.len() + self.tokens.len() + self.next.len()) * 4
    }
}

/// Words in a mask over `vocab_size` tokens.
pub fn mask_words(vocab_size: usize) -> usize {
    vocab_size.div_ceil(32)
}

/// Computes the row of `state`. A token is allowed when its bytes walk the DFA to a state for
/// which `live(next)` holds; EOS ids are allowed exactly when `state` is accepting.
pub fn compute_row(dfa: &Dfa, vocab: &Vocabulary, state: u32, live: impl Fn(u32) -> bool) -> Row {
    let trie = vocab.trie();
    let mut mask = vec![0u32; mask_words(vocab.size())];
    let mut tokens = Vec::new();
    let mut next = Vec::new();
    let mut max_next_distance = 0u32;
    // stack[d] is the DFA state after the first d bytes of the current trie path.
    let mut stack = vec![DEAD; trie.max_depth() + 1];
    stack[0] = state;
    let n = trie.num_nodes();
    let mut i = 0;
    while i < n {
        let d = trie.depth(i);
        let s = dfa.next(stack[d - 1], trie.label(i));
        if s == DEAD {
            i = trie.skip(i);
            continue;
        }
        stack[d] = s;
        let here = trie.tokens_at(i);
        if !here.is_empty() && live(s) {
            max_next_distance = max_next_distance.max(dfa.byte_distance(s));
            for &t in here {
                mask[(t >> 5) as usize] |= 1 << (t & 31);
                tokens.push(t);
                next.push(s);
            }
        }
        i += 1;
    }
    if dfa.is_accepting(state) {
        for &e in vocab.eos_ids() {
            mask[(e >> 5) as usize] |= 1 << (e & 31);
        }
    }
    Row {
        mask: mask.into_boxed_slice(),
        tokens: tokens.into_boxed_slice(),
        next: next.into_boxed_slice(),
        max_next_distance,
    }
}
