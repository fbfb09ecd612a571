//! A finite set of number values as a DFA accepting every text of each value.
//!
//! Multiples that have to be checked one by one (a float `multipleOf` near zero, an integer
//! divisor too large for a residue automaton) come as tens of thousands of values. A regex
//! union of that many alternatives takes seconds to determinize; a trie of their shortest
//! texts is already deterministic, and minimizing it is quick. The other spellings of a value
//! are its shortest text followed by zeros (after a point, which an integer gains), so the trie
//! only has to let zeros through: a node reached by a zero in a fraction stands for the same
//! value as its parent, and where the trie has no zero to follow, only zeros can follow.

use super::decimal::Decimal;
use super::universe::representable;
use crate::automata::Dfa;
use crate::util::StateId;

/// Most trie nodes: minimization handles tables up to about 300 000 states of this alphabet.
pub(crate) const MAX_NODES: usize = 250_000;

/// The texts of `values` (their universe spellings) as a minimized DFA; `None` when there is
/// none. Values past [`MAX_NODES`] trie nodes are left out, so the result is the texts of a
/// prefix of `values`; the flag says whether all of them made it.
pub(crate) fn values_dfa(values: &[Decimal]) -> (Option<Dfa>, bool) {
    let mut trie = Trie::new();
    let mut complete = true;
    for v in values.iter().filter(|v| representable(v)) {
        if trie.nodes() >= MAX_NODES {
            complete = false;
            break;
        }
        let text = v.to_text();
        trie.insert(text.as_bytes());
        if v.is_zero() {
            trie.insert(b"-0");
        }
    }
    (trie.into_dfa(), complete)
}

const ALPHABET: &[u8; 12] = b"-.0123456789";

fn symbol(b: u8) -> usize {
    match b {
        b'-' => 0,
        b'.' => 1,
        _ => usize::from(b - b'0') + 2,
    }
}

/// Shortest texts of values, as a trie: node 0 is the root, and a node is created after its
/// parent, so index order visits parents first.
struct Trie {
    children: Vec<[StateId; 12]>,
    /// The edge into each node: its parent and byte.
    parent: Vec<(StateId, u8)>,
    /// The text up to this node is one of the inserted ones.
    end: Vec<bool>,
    /// The text up to this node contains a point.
    frac: Vec<bool>,
}

impl Trie {
    fn new() -> Trie {
        Trie { children: vec![[StateId::DEAD; 12]], parent: vec![(StateId::new(0), 0)], end: vec![false], frac: vec![false] }
    }

    fn nodes(&self) -> usize {
        self.end.len()
    }

    fn child(&mut self, node: StateId, byte: u8) -> StateId {
        let slot = self.children[node.as_usize()][symbol(byte)];
        if !slot.is_dead() {
            return slot;
        }
        let c = StateId::from_index(self.end.len());
        self.children.push([StateId::DEAD; 12]);
        self.parent.push((node, byte));
        self.end.push(false);
        self.frac.push(self.frac[node.as_usize()] || byte == b'.');
        self.children[node.as_usize()][symbol(byte)] = c;
        c
    }

    fn insert(&mut self, text: &[u8]) {
        let mut node = StateId::new(0);
        for &b in text {
            node = self.child(node, b);
        }
        self.end[node.as_usize()] = true;
    }

    /// The DFA: each trie node a state, plus one accepting state for "only zeros follow".
    fn into_dfa(mut self) -> Option<Dfa> {
        // An integer that is a value needs a point to spell `K.0`.
        for node in 0..self.nodes() {
            if self.end[node] && !self.frac[node] {
                self.child(StateId::from_index(node), b'.');
            }
        }
        let n = self.nodes();
        // accept[k]: the node's text, trailing fraction zeros dropped, is a value's text.
        // zero_ok[k]: in a fraction, appending zeros gives a value's text.
        let mut accept = vec![false; n];
        let mut zero_ok = vec![false; n];
        for c in 1..n {
            let (p, b) = self.parent[c];
            let p = p.as_usize();
            if b == b'.' {
                zero_ok[c] = self.end[p];
            } else if self.frac[c] {
                accept[c] = self.end[c] || (b == b'0' && zero_ok[p]);
                zero_ok[c] = accept[c];
            } else {
                accept[c] = self.end[c];
            }
        }
        let zeros = StateId::from_index(n);
        let mut classes = [0u8; 256];
        for (k, &b) in ALPHABET.iter().enumerate() {
            classes[b as usize] = k as u8 + 1;
        }
        let stride = ALPHABET.len() + 1;
        let mut trans = vec![StateId::DEAD; (n + 1) * stride];
        for node in 0..n {
            for (k, &c) in self.children[node].iter().enumerate() {
                trans[node * stride + k + 1] = c;
            }
            let zero = node * stride + symbol(b'0') + 1;
            if self.frac[node] && trans[zero].is_dead() && zero_ok[node] {
                trans[zero] = zeros;
            }
        }
        trans[n * stride + symbol(b'0') + 1] = zeros;
        accept.push(true);
        Dfa::from_table(classes, stride, &trans, &accept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(d: &Option<Dfa>, s: &str) -> bool {
        let Some(d) = d else { return false };
        let t = d.walk(d.start(), s.as_bytes());
        !t.is_dead() && d.is_accepting(t)
    }

    #[test]
    fn every_spelling_of_every_value() {
        let values: Vec<Decimal> = ["1.5", "1.505", "2", "-3.25", "0", "20", "0.05"].iter().map(|s| Decimal::parse(s).unwrap()).collect();
        let (d, complete) = values_dfa(&values);
        assert!(complete);
        let yes = ["1.5", "1.50", "1.500", "1.505", "1.5050", "2", "2.0", "2.000", "-3.25", "-3.250", "0", "-0", "0.0", "-0.00", "20", "20.0", "0.05", "0.050"];
        let no = ["1.55", "1.50505", "1.", "2.", "3.25", "-2", "200", "0.5", "0.005", "02", "-", "", "1.501", "21", "2.01", "0.0501"];
        for t in yes {
            assert!(run(&d, t), "{t}");
        }
        for t in no {
            assert!(!run(&d, t), "{t}");
        }
        assert!(values_dfa(&[]).0.is_none());
        assert!(values_dfa(&[Decimal::parse("1e20").unwrap()]).0.is_none());
    }
}
