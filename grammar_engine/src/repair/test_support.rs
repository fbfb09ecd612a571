//! Shared helpers of the repair tests: an independent checker of results, a brute-force
//! reference search, and the regexes and JSON texts the tests repair.
//!
//! The reference tries all 256 bytes at every node with no grouping and no heuristic, so it
//! checks the grouped transitions, the heuristic and the schedules at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::cost::edit_cost;
use super::{
    repair, repair_impl, CostModel, Edit, EditKind, IntentWeights, RepairOptions, RepairResult, RepairStatus, Tuning,
};
use crate::automata::{Dfa, DfaConfig};
use crate::util::StateId;

pub(super) fn dfa(p: &str) -> Dfa {
    Dfa::from_regex(p, &DfaConfig::default()).unwrap()
}

pub(super) fn full_match(d: &Dfa, bytes: &[u8]) -> bool {
    let s = d.walk(d.start(), bytes);
    !s.is_dead() && d.is_accepting(s)
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
    let sum: u32 = match opts.model {
        CostModel::Edit => r.edits.iter().map(|e| edit_cost(e, opts)).sum(),
        CostModel::Intent(w) => intent_price(d, text, &w, &r.edits),
    };
    assert_eq!(r.cost, Some(sum));
    assert!(r.lower_bound <= sum);
    if r.status == RepairStatus::Optimal {
        assert_eq!(r.lower_bound, sum);
    }
    assert!(std::str::from_utf8(&out).is_ok());
    out
}

/// The intent model's prices, written again from its documentation (no shared code with
/// `cost` and `groups`): the class of a state by brute force over its 256 bytes.
pub(super) struct IntentPrices {
    w: IntentWeights,
    classes: Vec<u8>,
    tail: usize,
    /// Per text byte, whether keeping it costs `keep_outside`.
    outside: Vec<bool>,
    /// Per text byte, whether it is a `'` standing where a JSON quote would.
    quote_like: Vec<bool>,
}

const WS: &[u8] = b" \t\n\r";

impl IntentPrices {
    pub(super) fn new(d: &Dfa, text: &[u8], w: IntentWeights) -> Self {
        let mut before = vec![d.start()];
        let mut k = 0;
        while k < before.len() {
            for &b in WS {
                let t = d.next(before[k], b);
                if !t.is_dead() && !before.contains(&t) {
                    before.push(t);
                }
            }
            k += 1;
        }
        let quote_like = (0..text.len())
            .map(|i| {
                let prev = text[..i].iter().rev().find(|b| !WS.contains(b));
                let next = text[i + 1..].iter().find(|b| !WS.contains(b));
                text[i] == b'\''
                    && (prev.is_none()
                        || b"{[,:".contains(prev.unwrap())
                        || next.is_none()
                        || b"}],:".contains(next.unwrap()))
            })
            .collect();
        // 0 before the value, 1 after it, 2 in a free string, 3 in structure.
        let classes = (0..d.num_states() as u32)
            .map(StateId::new)
            .map(|s| {
                let live: Vec<u8> = (0..=255u8).filter(|&b| d.next(s, b) != StateId::DEAD).collect();
                if before.contains(&s) {
                    0
                } else if d.is_accepting(s) && live.iter().all(|b| WS.contains(b)) {
                    1
                } else if live.iter().filter(|&&b| (0x20..0x7f).contains(&b)).count() >= 80 {
                    2
                } else {
                    3
                }
            })
            .collect();
        // Where the first bracketed value closes, counted again.
        let mut tail = text.len();
        let (mut depth, mut in_string, mut skip) = (0i32, false, false);
        for (i, &b) in text.iter().enumerate() {
            if skip {
                skip = false;
            } else if in_string {
                skip = b == b'\\';
                in_string = b != b'"';
            } else if b == b'"' && depth > 0 {
                in_string = true;
            } else if b == b'{' || b == b'[' {
                depth += 1;
            } else if (b == b'}' || b == b']') && depth > 0 {
                depth -= 1;
                if depth == 0 {
                    tail = i + 1;
                    break;
                }
            }
        }
        // Top-level values: (start, end or None when the text ends inside).
        let mut values: Vec<(usize, Option<usize>)> = Vec::new();
        let (mut depth, mut in_string, mut skip) = (0i32, false, false);
        for (i, &b) in text.iter().enumerate() {
            if skip {
                skip = false;
            } else if in_string {
                skip = b == b'\\';
                in_string = b != b'"';
            } else if b == b'"' && depth > 0 {
                in_string = true;
            } else if b == b'{' || b == b'[' {
                if depth == 0 {
                    values.push((i, None));
                }
                depth += 1;
            } else if (b == b'}' || b == b']') && depth > 0 {
                depth -= 1;
                if depth == 0 {
                    values.last_mut().unwrap().1 = Some(i + 1);
                }
            }
        }
        let head = values.first().map_or(0, |v| v.0);
        let last_end = match values.last() {
            Some(&(_, Some(e))) => e,
            _ => text.len(),
        };
        let outside = (0..text.len()).map(|i| (i < head || i >= last_end) && !WS.contains(&text[i])).collect();
        IntentPrices { w, classes, quote_like, tail, outside }
    }

    fn class(&self, s: StateId) -> u8 {
        self.classes[s.as_usize()]
    }

    pub(super) fn keep(&self, i: usize) -> u32 {
        let cap = self.w.substitute.min(self.w.substitute_string);
        let outside = if self.outside[i] { self.w.keep_outside.min(cap) } else { 0 };
        if self.quote_like[i] {
            (outside + self.w.keep_quote).min(cap)
        } else {
            outside
        }
    }

    pub(super) fn delete(&self, s: StateId, old: u8, at: usize) -> u32 {
        match self.class(s) {
            0 => self.w.delete_before,
            1 if at >= self.tail => self.w.delete_after,
            1 => self.w.delete_structure,
            2 => self.w.delete_string,
            _ if WS.contains(&old) => self.w.delete_space,
            _ => self.w.delete_structure,
        }
    }

    pub(super) fn insert(&self, new: u8) -> u32 {
        match new {
            b'"' => self.w.insert_quote,
            b'\\' => self.w.insert_escape,
            b'{' | b'}' | b'[' | b']' | b',' | b':' => self.w.insert_punct,
            _ => self.w.insert_other,
        }
    }

    pub(super) fn substitute(&self, s: StateId, old: u8, new: u8) -> u32 {
        if new == b'"' && (old == b'\'' || old == b'`') {
            self.w.substitute_quote
        } else if (old.is_ascii_alphabetic() && new == old ^ 0x20)
            || (self.class(s) != 2 && matches!((old, new), (b'\n', b'n') | (b'\t', b't') | (b'\r', b'r')))
        {
            self.w.substitute_near
        } else if self.class(s) == 2 {
            self.w.substitute_string
        } else {
            self.w.substitute
        }
    }
}

/// The intent model's price of a repair given by its edits.
pub(super) fn intent_price(d: &Dfa, text: &[u8], w: &IntentWeights, edits: &[Edit]) -> u32 {
    let p = IntentPrices::new(d, text, *w);
    let (mut total, mut s, mut pos) = (0u32, d.start(), 0usize);
    for e in edits {
        while pos < e.offset {
            total += p.keep(pos);
            s = d.next(s, text[pos]);
            pos += 1;
        }
        match e.kind {
            EditKind::Insert => {
                total += p.insert(e.new.unwrap());
                s = d.next(s, e.new.unwrap());
            }
            EditKind::Delete => {
                total += p.delete(s, text[pos], pos);
                pos += 1;
            }
            EditKind::Substitute => {
                total += p.substitute(s, text[pos], e.new.unwrap());
                s = d.next(s, e.new.unwrap());
                pos += 1;
            }
        }
    }
    while pos < text.len() {
        total += p.keep(pos);
        pos += 1;
    }
    total
}

/// Reference: Dijkstra over (i, s) trying all 256 bytes, no grouping, no heuristic.
pub(super) fn reference_cost(d: &Dfa, text: &[u8], opts: &RepairOptions) -> u32 {
    if let CostModel::Intent(w) = opts.model {
        return reference_intent_cost(d, text, w);
    }
    let n = d.num_states();
    let idx = |i: usize, s: StateId| i * n + s.as_usize();
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
        let mut push = |g2: u32, i2: usize, s2: StateId, heap: &mut BinaryHeap<Reverse<(u32, usize, StateId)>>| {
            if g2 < dist[idx(i2, s2)] {
                dist[idx(i2, s2)] = g2;
                heap.push(Reverse((g2, i2, s2)));
            }
        };
        if i < text.len() {
            let t = d.next(s, text[i]);
            if !t.is_dead() {
                push(g, i + 1, t, &mut heap);
            }
            push(g + opts.delete_cost, i + 1, s, &mut heap);
        }
        for b in 0..=255u8 {
            let t = d.next(s, b);
            if t.is_dead() {
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
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
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
        if d.walk(d.start(), word) != StateId::DEAD {
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

/// Reference for the intent model: the same brute-force Dijkstra, priced by [`IntentPrices`].
fn reference_intent_cost(d: &Dfa, text: &[u8], w: IntentWeights) -> u32 {
    let p = IntentPrices::new(d, text, w);
    let n = d.num_states();
    let idx = |i: usize, s: StateId| i * n + s.as_usize();
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
        let mut push = |g2: u32, i2: usize, s2: StateId, heap: &mut BinaryHeap<Reverse<(u32, usize, StateId)>>| {
            if g2 < dist[idx(i2, s2)] {
                dist[idx(i2, s2)] = g2;
                heap.push(Reverse((g2, i2, s2)));
            }
        };
        if i < text.len() {
            let t = d.next(s, text[i]);
            if !t.is_dead() {
                push(g + p.keep(i), i + 1, t, &mut heap);
            }
            push(g + p.delete(s, text[i], i), i + 1, s, &mut heap);
        }
        for b in 0..=255u8 {
            let t = d.next(s, b);
            if t.is_dead() {
                continue;
            }
            if i < text.len() && b != text[i] {
                push(g + p.substitute(s, text[i], b), i + 1, t, &mut heap);
            }
            push(g + p.insert(b), i, t, &mut heap);
        }
    }
    unreachable!("every DFA state is live, so a repair always exists")
}

/// Options for the intent model with its default weights.
pub(super) fn intent() -> RepairOptions {
    RepairOptions { model: CostModel::Intent(IntentWeights::DEFAULT), ..RepairOptions::default() }
}
