//! One state's row of the token index: which tokens keep the DFA alive, and where each goes.
//!
//! The row is found by one walk over the vocabulary's [`TokenTrie`](crate::vocab::trie::TokenTrie) carrying the DFA state down
//! each edge. A byte that kills the DFA skips the whole subtree, so a state that allows few
//! tokens costs little, and one that allows almost everything (free text) costs one pass.

use crate::automata::Dfa;
use crate::util::{StateId, TokenId};
use crate::vocab::Vocabulary;

/// A computed row: the bitmask over all token ids, and for each allowed ordinary token, in
/// trie order, the state it leads to. The token ids themselves are not stored: they are the
/// trie's tokens in order, filtered by the mask (see [`Row::transitions`]), which halves the
/// work of building a row compared with storing (token, next) pairs.
#[derive(Debug)]
pub struct Row {
    pub(crate) mask: Box<[u32]>,
    pub(crate) next: NextStates,
    /// The largest byte distance to acceptance over the states the allowed tokens lead to.
    /// When every byte is a token of its own, a state `d` bytes from acceptance is at most `d`
    /// tokens from it, so a budget of at least this many tokens needs no extra masking.
    pub(crate) max_next_distance: u32,
    /// The (token, next state) pairs of the special tokens a structure allows here (they are not
    /// in the trie, so [`Row::next`] cannot hold them).
    pub(crate) special: Box<[(TokenId, StateId)]>,
}

/// Next states of a row, two bytes each when the grammar has at most 65,536 states.
#[derive(Debug)]
pub(crate) enum NextStates {
    Narrow(Box<[u16]>),
    Wide(Box<[StateId]>),
}

impl NextStates {
    pub fn iter(&self) -> Box<dyn Iterator<Item = StateId> + '_> {
        match self {
            NextStates::Narrow(v) => Box::new(v.iter().map(|&x| StateId::new(x as u32))),
            NextStates::Wide(v) => Box::new(v.iter().copied()),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            NextStates::Narrow(v) => v.len() * 2,
            NextStates::Wide(v) => v.len() * 4,
        }
    }
}

impl Row {
    /// The allowed-token bitmask: `ceil(V / 32)` words, bit `t % 32` of word `t / 32`.
    #[inline]
    pub fn mask(&self) -> &[u32] {
        &self.mask
    }

    pub fn memory_bytes(&self) -> usize {
        self.mask.len() * 4 + self.next.bytes() + self.special.len() * 8
    }

    #[inline]
    pub fn allows(&self, token: TokenId) -> bool {
        let t = token.as_u32();
        self.mask.get((t >> 5) as usize).is_some_and(|w| w >> (t & 31) & 1 == 1)
    }

    /// The (token, next state) pairs of the allowed tokens (EOS aside): the ordinary ones in
    /// trie order, then the special ones.
    pub fn transitions<'a>(&'a self, vocab: &'a Vocabulary) -> impl Iterator<Item = (TokenId, StateId)> + 'a {
        let ordinary = vocab.trie().token_order().iter().copied().filter(|&t| self.allows(t)).zip(self.next.iter());
        ordinary.chain(self.special.iter().copied())
    }

    /// Every next state, with repeats (ordinary tokens, then special ones).
    pub fn next_states(&self) -> impl Iterator<Item = StateId> + '_ {
        self.next.iter().chain(self.special.iter().map(|&(_, n)| n))
    }
}

/// Words in a mask over `vocab_size` tokens.
pub(crate) fn mask_words(vocab_size: usize) -> usize {
    vocab_size.div_ceil(32)
}

/// Computes the row of `state`. A token is allowed when its bytes walk the DFA to a state for
/// which `live(next)` holds; EOS ids are allowed exactly when `state` is accepting.
pub(crate) fn compute_row(dfa: &Dfa, vocab: &Vocabulary, state: StateId, live: impl Fn(StateId) -> bool) -> Row {
    if dfa.num_states() <= 1 << 16 {
        let mut next: Vec<u16> = Vec::new();
        let (mask, max_next_distance) = walk(dfa, vocab, state, live, |s| next.push(s.as_u32() as u16));
        Row { mask, next: NextStates::Narrow(next.into_boxed_slice()), max_next_distance, special: Box::new([]) }
    } else {
        let mut next: Vec<StateId> = Vec::new();
        let (mask, max_next_distance) = walk(dfa, vocab, state, live, |s| next.push(s));
        Row { mask, next: NextStates::Wide(next.into_boxed_slice()), max_next_distance, special: Box::new([]) }
    }
}

/// The trie walk behind [`compute_row`]: sets mask bits and reports each allowed token's next
/// state, in trie order.
#[inline]
fn walk(
    dfa: &Dfa,
    vocab: &Vocabulary,
    state: StateId,
    live: impl Fn(StateId) -> bool,
    mut on_token: impl FnMut(StateId),
) -> (Box<[u32]>, u32) {
    let trie = vocab.trie();
    let mut mask = vec![0u32; mask_words(vocab.size())];
    let mut max_next_distance = 0u32;
    // stack[d] is the DFA state after the first d bytes of the current trie path.
    let mut stack = vec![StateId::DEAD; trie.max_depth() + 1];
    stack[0] = state;
    let nodes = trie.nodes();
    let tokens = trie.token_order();
    let n = trie.num_nodes();
    let mut i = 0;
    while i < n {
        let node = nodes[i];
        let d = node.depth as usize;
        let s = dfa.next(stack[d - 1], node.label);
        if s.is_dead() {
            i = node.skip as usize;
            continue;
        }
        stack[d] = s;
        let (lo, hi) = (node.token_start as usize, nodes[i + 1].token_start as usize);
        if lo < hi && live(s) {
            max_next_distance = max_next_distance.max(dfa.byte_distance(s));
            for &t in &tokens[lo..hi] {
                let t = t.as_u32();
                mask[(t >> 5) as usize] |= 1 << (t & 31);
                on_token(s);
            }
        }
        i += 1;
    }
    if dfa.is_accepting(state) {
        for &e in vocab.eos_ids() {
            let e = e.as_u32();
            mask[(e >> 5) as usize] |= 1 << (e & 31);
        }
    }
    (mask.into_boxed_slice(), max_next_distance)
}
