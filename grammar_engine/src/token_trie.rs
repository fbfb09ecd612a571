//! A trie over the bytes of every allowed token, laid out flat in depth-first preorder.
//!
//! Computing a state's mask walks this trie once, carrying a DFA state down each edge; when a
//! byte kills the DFA the whole subtree is skipped in one jump, so tokens sharing a prefix
//! share the work. The preorder layout makes the walk a forward scan over a few arrays.

use crate::error::{GrammarError, Result};

/// The flat trie. Node `i` sits at depth `depth[i]` (1 for children of the root), is reached
/// by byte `label[i]`, and its subtree ends just before node `skip[i]`. The tokens whose bytes
/// end exactly at node `i` are `token_ids[token_start[i]..token_start[i + 1]]`.
#[derive(Debug, Default)]
pub struct TokenTrie {
    label: Vec<u8>,
    depth: Vec<u16>,
    skip: Vec<u32>,
    token_start: Vec<u32>,
    token_ids: Vec<u32>,
    max_depth: usize,
}

impl TokenTrie {
    /// Builds the trie of `ids`, where `bytes_of(id)` gives a token's bytes (never empty).
    pub fn build<'a>(ids: &[u32], bytes_of: impl Fn(u32) -> &'a [u8]) -> Result<Self> {
        let mut sorted: Vec<u32> = ids.to_vec();
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
                    t.skip[node] = t.label.len() as u32;
                }
            }
            for (d, &byte) in cur.iter().enumerate().skip(lcp) {
                let node = t.label.len();
                t.label.push(byte);
                t.depth.push((d + 1) as u16);
                t.skip.push(0);
                t.token_start.push(t.token_ids.len() as u32);
                path.push(node);
            }
            t.token_ids.push(id);
            t.max_depth = t.max_depth.max(cur.len());
            prev = cur;
        }
        while let Some(node) = path.pop() {
            t.skip[node] = t.label.len() as u32;
        }
        t.token_start.push(t.token_ids.len() as u32);
        // Tokens were pushed as they ended, so node i's tokens run up to node i + 1's start.
        Ok(t)
    }

    pub fn num_nodes(&self) -> usize {
        self.label.len()
    }

    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    #[inline]
    pub fn label(&self, node: usize) -> u8 {
        self.label[node]
    }

    #[inline]
    pub fn depth(&self, node: usize) -> usize {
        self.depth[node] as usize
    }

    #[inline]
    pub fn skip(&self, node: usize) -> usize {
        self.skip[node] as usize
    }

    /// Token ids whose bytes end exactly at `node`.
    #[inline]
    pub fn tokens_at(&self, node: usize) -> &[u32] {
        &self.token_ids[self.token_start[node] as usize..self.token_start[node + 1] as usize]
    }

    pub fn memory_bytes(&self) -> usize {
        self.label.len() + self.depth.len() * 2 + self.skip.len() * 4 + self.token_start.len() * 4 + self.token_ids.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preorder_layout_groups_shared_prefixes() {
        let toks: Vec<&[u8]> = vec![b"ab", b"a", b"b", b"abc", b"ab"];
        let ids: Vec<u32> = (0..toks.len() as u32).collect();
        let t = TokenTrie::build(&ids, |i| toks[i as usize]).unwrap();
        // a, ab, abc, b
        assert_eq!(t.num_nodes(), 4);
        assert_eq!(t.label(0), b'a');
        assert_eq!(t.tokens_at(0), &[1]);
        assert_eq!(t.tokens_at(1), &[0, 4]);
        assert_eq!(t.tokens_at(2), &[3]);
        assert_eq!(t.depth(2), 3);
        assert_eq!(t.skip(0), 3);
        assert_eq!(t.skip(1), 3);
        assert_eq!(t.skip(3), 4);
        assert_eq!(t.max_depth(), 3);
        assert_eq!(t.num_tokens(), 5);
    }
}
