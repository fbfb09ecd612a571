//! Shared helpers of the repair tests: an independent checker of results, a brute-force
//! reference search, and the regexes and JSON texts the tests repair.
//!
//! The reference tries all 256 bytes at every node with no grouping and no heuristic, so it
//! checks the grouped transitions, the heuristic and the schedules at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::cost::edit_cost;
use super::{repair, repair_impl, Edit, EditKind, RepairOptions, RepairResult, RepairStatus, Tuning};
use crate::dfa::{Dfa, DfaConfig, DEAD};

pub(super) fn dfa(p: &str) -> Dfa {
    Dfa::from_regex(p, &DfaConfig::default()).unwrap()
}

pub(super) fn full_match(d: &Dfa, bytes: &[u8]) -> bool {
    let s = d.walk(d.start(), bytes);
    s != DEAD && d.is_accepting(s)
}

/// Applies edits to the original text, independently of the crate's own helper.
pub(super) fn apply_edits(text: &[u8], edits: &[Edit]) -> Vec<u8> {
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
pub(super) fn check(d: &Dfa, text: &[u8], opts: &RepairOptions, r: &RepairResult) -> Vec<u8> {
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
pub(super) fn reference_cost(d: &Dfa, text: &[u8], opts: &RepairOptions) -> u32 {
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
pub(super) fn levenshtein(a: &[u8], b: &[u8], opts: &RepairOptions) -> u32 {
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
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Search schedules to cross-check: the hash-map table, the backward phase from the start,
/// tight interleaving, and the backward phase alone.
pub(super) fn tunings(len: usize) -> Vec<Tuning> {
    let default = Tuning::for_len(len);
    vec![
        Tuning { sparse: true, ..default },
        Tuning { forward_first: 0, backward_first: 0, sparse: false },
        Tuning { forward_first: 2, backward_first: 1, sparse: true },
        Tuning { forward_first: 0, backward_first: usize::MAX / 4, sparse: false },
    ]
}

pub(super) const SMALL_REGEXES: &[(&str, &[u8])] = &[
    ("(ab|c)*a?", b"abc"),
    ("a(b|c)*d", b"abcd"),
    ("[ab]{2,4}c?", b"abc"),
    ("(a|bc)+(d|e)?", b"abcde"),
    ("a*b*c*", b"abc"),
    ("(aa|bb)*", b"ab"),
    ("abc|abd|b", b"abcd"),
    ("((ab)*c){2}", b"abc"),
];

pub(super) fn enumerate(d: &Dfa, alphabet: &[u8], max_len: usize, word: &mut Vec<u8>, f: &mut impl FnMut(&[u8])) {
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
pub(super) fn json_object_dfa() -> Dfa {
    let ws = r"[ \t\n\r]*";
    let s = r#""([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#;
    let num = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?";
    let scalar = format!("({s}|{num}|true|false|null)");
    let arr = format!(r"\[{ws}({scalar}{ws}(,{ws}{scalar}{ws})*)?\]");
    let member = format!("{s}{ws}:{ws}({scalar}|{arr})");
    dfa(&format!(r"{ws}\{{{ws}({member}{ws}(,{ws}{member}{ws})*)?\}}{ws}"))
}

pub(super) fn repair_json(d: &Dfa, text: &str) -> (RepairResult, String) {
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

pub(super) fn long_json(n_items: usize, errors: bool) -> String {
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
