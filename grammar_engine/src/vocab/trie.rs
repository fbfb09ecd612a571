//! A trie over the bytes of every allowed token, laid out flat in depth-first preorder.
//!
//! Computing a state's mask walks this trie once, carrying a DFA state down each edge; when a
//! byte kills the DFA the whole subtree is skipped in one jump, so tokens sharing a prefix
//! share the work. The preorder layout makes the walk a forward scan over a few arrays.

use crate::error::{GrammarError, Result};
use crate::util::TokenId;

/// One trie node, packed so a walk reads one array front to back.
#[derive(Debug, Clone, Copy, Default)]
pub struct Node {
    /// Index of the first node after this node's subtree.
    pub skip: u32,
    /// Start of this node's tokens in `token_ids` (they end at the next node's start).
    pub token_start: u32,
    /// 1 for children of the root.
    pub depth: u16,
    /// The byte on the edge into this node.
    pub label: u8,
}

/// The flat trie: `nodes` in preorder plus one sentinel whose `token_start` closes the last
/// node's token range. The tokens whose bytes end exactly at node `i` are
/// `token_ids[nodes[i].token_start..nodes[i + 1].token_start]`.
#[derive(Debug, Default)]
pub struct TokenTrie {
    nodes: Vec<Node>,
    token_ids: Vec<TokenId>,
    max_depth: usize,
}

impl TokenTrie {
    /// Builds the trie of `ids`, where `bytes_of(id)` gives a token's bytes (never empty).
    pub fn build<'a>(ids: &[TokenId], bytes_of: impl Fn(TokenId) -> &'a [u8]) -> Result<Self> {
        let mut sorted: Vec<TokenId> = ids.to_vec();
        sorted.sort_by(|&a, &b| bytes_of(a).cmp(bytes_of(b)).then(a.cmp(&b)));
        let mut t = TokenTrie::default();
        // `path[d]` is the node at depth d + 1 on the path to the previous token.
        let mut path: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        for &id in &sorted {
            let cur = bytes_of(id);
            if cur.len() > u16::MAX as usize {
                return Err(GrammarError::vocab(format!("token {id} is longer than 65535 bytes")));
            }
            let lcp = prev.iter().zip(cur).take_while(|(a, b)| a == b).count();
            // Close the nodes below the common prefix: their subtrees end here.
            while path.len() > lcp {
                if let Some(node) = path.pop() {
                    t.nodes[node].skip = t.nodes.len() as u32;
                }
            }
            for (d, &byte) in cur.iter().enumerate().skip(lcp) {
                path.push(t.nodes.len());
                t.nodes.push(Node { skip: 0, token_start: t.token_ids.len() as u32, depth: (d + 1) as u16, label: byte });
            }
            t.token_ids.push(id);
            t.max_depth = t.max_depth.max(cur.len());
            prev = cur;
        }
        let end = t.nodes.len() as u32;
        while let Some(node) = path.pop() {
            t.nodes[node].skip = end;
        }
        t.nodes.push(Node { skip: end, token_start: t.token_ids.len() as u32, depth: 0, label: 0 });
        // Tokens were pushed as they ended, so node i's tokens run up to node i + 1's start.
        Ok(t)
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len() - 1
    }

    /// The nodes in preorder, followed by the sentinel.
    #[inline]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    #[inline]
    pub fn label(&self, node: usize) -> u8 {
        self.nodes[node].label
    }

    #[inline]
    pub fn depth(&self, node: usize) -> usize {
        self.nodes[node].depth as usize
    }

    #[inline]
    pub fn skip(&self, node: usize) -> usize {
        self.nodes[node].skip as usize
    }

    /// Token ids whose bytes end exactly at `node`.
    #[inline]
    pub fn tokens_at(&self, node: usize) -> &[TokenId] {
        &self.token_ids[self.nodes[node].token_start as usize..self.nodes[node + 1].token_start as usize]
    }

    /// Every token id, in the order a preorder walk meets them.
    pub fn token_order(&self) -> &[TokenId] {
        &self.token_ids
    }

    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>() + self.token_ids.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preorder_layout_groups_shared_prefixes() {
        let toks: Vec<&[u8]> = vec![b"ab", b"a", b"b", b"abc", b"ab"];
        let ids: Vec<TokenId> = (0..toks.len() as u32).map(TokenId::new).collect();
        let t = TokenTrie::build(&ids, |i| toks[i.as_usize()]).unwrap();
        // a, ab, abc, b
        assert_eq!(t.num_nodes(), 4);
        assert_eq!(t.label(0), b'a');
        let id = TokenId::new;
        assert_eq!(t.tokens_at(0), &[id(1)]);
        assert_eq!(t.tokens_at(1), &[id(0), id(4)]);
        assert_eq!(t.tokens_at(2), &[id(3)]);
        assert_eq!(t.depth(2), 3);
        assert_eq!(t.skip(0), 3);
        assert_eq!(t.skip(1), 3);
        assert_eq!(t.skip(3), 4);
        assert_eq!(t.max_depth(), 3);
        assert_eq!(t.num_tokens(), 5);
    }
}
