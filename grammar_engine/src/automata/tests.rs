//! Tests of the DFA's internals: byte cuts that keep state ids, minimization against Moore's
//! refinement on raw tables, and the state limit of tables too large to minimize.

use std::collections::HashMap;

use super::*;
use crate::error::GrammarError;
use crate::util::StateId;

fn dfa(p: &str) -> Dfa {
    Dfa::from_regex(p, &DfaConfig::default()).unwrap()
}

#[test]
fn cutting_bytes_keeps_state_ids() {
    let d = dfa("a[bc]+|x");
    let cut = d.with_bytes_cut(b"b");
    assert_eq!(cut.num_states(), d.num_states());
    let after_a = d.next(d.start(), b'a');
    assert_eq!(cut.next(d.start(), b'a'), after_a);
    assert_eq!(cut.next(after_a, b'b'), StateId::DEAD);
    assert_ne!(d.next(after_a, b'b'), StateId::DEAD);
    assert_eq!(cut.next(after_a, b'c'), d.next(after_a, b'c'));
    assert_eq!(cut.byte_distance(after_a), d.byte_distance(after_a));
}

/// Moore's refinement, the slow and obvious way: how many classes of equivalent live
/// states a pruned table has.
fn moore_classes(d: &Dfa) -> usize {
    let n = d.num_states();
    let mut block: Vec<usize> = (0..n).map(|s| d.is_accepting(StateId::from_index(s)) as usize).collect();
    loop {
        let mut ids: HashMap<Vec<usize>, usize> = HashMap::new();
        let next: Vec<usize> = (0..n)
            .map(|s| {
                let mut sig = vec![block[s]];
                sig.extend(d.row(StateId::from_index(s)).iter().map(|&t| if t.is_dead() { usize::MAX } else { block[t.as_usize()] }));
                let fresh = ids.len();
                *ids.entry(sig).or_insert(fresh)
            })
            .collect();
        if ids.len() == block.iter().collect::<std::collections::HashSet<_>>().len() {
            return ids.len();
        }
        block = next;
    }
}

/// A xorshift generator: `rand(m)` is a number below `m`.
fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    }
}

/// Bytes spread over `k` classes.
fn classes_of(k: usize) -> [u8; 256] {
    std::array::from_fn(|b| (b % k) as u8)
}

#[test]
fn minimization_agrees_with_moores_refinement_on_random_tables() {
    let mut rand = xorshift(0x9e37_79b9_7f4a_7c15);
    // Dense and sparse tables over few and many classes: minimization works on the live
    // transitions alone, so tables where most transitions are dead matter most.
    for _ in 0..900 {
        let k = 2 + rand(7) as usize;
        let dead_in_10 = 2 + rand(8);
        let classes = classes_of(k);
        let n = 1 + rand(40) as usize;
        let trans: Vec<StateId> =
            (0..n * k).map(|_| if rand(10) < dead_in_10 { StateId::DEAD } else { StateId::new(rand(n as u64) as u32) }).collect();
        let accepting: Vec<bool> = (0..n).map(|_| rand(3) == 0).collect();
        let Some(pruned) = Dfa::prune(classes, k, &trans, &accepting) else { continue };
        let want = moore_classes(&pruned);
        let min = pruned.clone().minimize();
        assert_eq!(min.num_states(), want, "{k} classes: {trans:?} {accepting:?}");
        // The same language: every string of up to 4 bytes over the classes (one byte each).
        let mut layer: Vec<Vec<u8>> = vec![vec![]];
        for _ in 0..=4 {
            for w in &layer {
                let (a, b) = (pruned.walk(pruned.start(), w), min.walk(min.start(), w));
                assert_eq!(!a.is_dead() && pruned.is_accepting(a), !b.is_dead() && min.is_accepting(b), "{w:?}");
            }
            layer = layer.iter().flat_map(|w| (0..k as u8).map(move |b| [w.as_slice(), &[b]].concat())).collect();
        }
    }
}

#[test]
fn minimization_agrees_with_moores_refinement_on_larger_tables() {
    let mut rand = xorshift(0x2545_f491_4f6c_dd1d);
    // Many classes and hundreds of states, with targets drawn from a few to make equivalent
    // states likely: the refinement splits blocks and cords many times over.
    for _ in 0..60 {
        let k = 2 + rand(60) as usize;
        let classes = classes_of(k);
        let n = 50 + rand(350) as usize;
        let targets = 1 + rand(n as u64);
        let trans: Vec<StateId> =
            (0..n * k).map(|_| if rand(10) < 7 { StateId::DEAD } else { StateId::new(rand(targets) as u32) }).collect();
        let accepting: Vec<bool> = (0..n).map(|_| rand(4) == 0).collect();
        let Some(pruned) = Dfa::prune(classes, k, &trans, &accepting) else { continue };
        let min = pruned.clone().minimize();
        assert_eq!(min.num_states(), moore_classes(&pruned), "{k} classes, {n} states");
        assert_eq!(min.start(), StateId::from_index(0));
        let again = min.clone().minimize();
        assert_eq!((again.trans, again.accepting), (min.trans.clone(), min.accepting.clone()), "minimal already");
        for _ in 0..200 {
            let w: Vec<u8> = (0..rand(12)).map(|_| rand(k as u64) as u8).collect();
            let (a, b) = (pruned.walk(pruned.start(), &w), min.walk(min.start(), &w));
            assert_eq!(!a.is_dead() && pruned.is_accepting(a), !b.is_dead() && min.is_accepting(b), "{w:?}");
        }
    }
}

/// The states of a raw table reached from state 0, in their order.
fn reached_part(trans: &[StateId], accepting: &[bool], k: usize) -> (Vec<StateId>, Vec<bool>) {
    let mut seen = vec![false; accepting.len()];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(s) = stack.pop() {
        for t in &trans[s * k..(s + 1) * k] {
            if !t.is_dead() && !seen[t.as_usize()] {
                seen[t.as_usize()] = true;
                stack.push(t.as_usize());
            }
        }
    }
    let mut ids = vec![StateId::DEAD; accepting.len()];
    let kept: Vec<usize> = (0..accepting.len()).filter(|&s| seen[s]).collect();
    for (i, &s) in kept.iter().enumerate() {
        ids[s] = StateId::from_index(i);
    }
    let trans = kept.iter().flat_map(|&s| trans[s * k..(s + 1) * k].iter().map(|t| if t.is_dead() { *t } else { ids[t.as_usize()] })).collect();
    (trans, kept.iter().map(|&s| accepting[s]).collect())
}

#[test]
fn tables_without_cycles_minimized_by_hashing_match_refinement() {
    let mut rand = xorshift(0x9e37_79b9_7f4a_7c15);
    // Layered tables (state 0, then layers of a few states, each state's edges leading to the
    // first states of the next layer), every state reached: few distinct rows, so many
    // equivalent states. Two rounds in three add a few edges back (cycles). Hashes keep two
    // bits in tests, so rows of different classes are compared too.
    let (mut hashed, mut merged) = (0, 0);
    for round in 0..300 {
        let k = 1 + rand(if round % 2 == 0 { 3 } else { 12 }) as usize;
        let classes = classes_of(k);
        let mut layers = vec![0..1];
        while layers.len() < 2 + rand(40) as usize {
            let start = layers.last().map_or(0, |l| l.end);
            layers.push(start..start + 1 + rand(6) as usize);
        }
        let n = layers.last().map_or(0, |l| l.end);
        let back = if round % 3 == 0 { 0 } else { 1 + rand(60) };
        let mut trans = vec![StateId::DEAD; n * k];
        for w in layers.windows(2) {
            let (here, next) = (w[0].clone(), w[1].clone());
            let pool = next.len().min(2) as u64;
            for s in here.clone() {
                for c in 0..k {
                    if rand(2) == 0 {
                        trans[s * k + c] = StateId::from_index(next.start + rand(pool) as usize);
                    }
                }
            }
            // Most states of the next layer entered from this one (the others are dropped).
            for t in next {
                let s = here.start + rand(here.len() as u64) as usize;
                trans[s * k + rand(k as u64) as usize] = StateId::from_index(t);
            }
        }
        for (i, t) in trans.iter_mut().enumerate() {
            if !t.is_dead() && rand(1000) < back {
                *t = StateId::from_index(rand(i as u64 / k as u64 + 1) as usize);
            }
        }
        let last = layers.last().cloned().unwrap_or(0..0);
        let accepting: Vec<bool> = (0..n).map(|s| last.contains(&s) || rand(3) == 0).collect();
        let (trans, accepting) = reached_part(&trans, &accepting, k);
        let Some(pruned) = Dfa::prune(classes, k, &trans, &accepting) else { continue };
        let min = pruned.clone().minimize();
        let refined = pruned.clone().refine();
        assert_eq!(min.num_states(), moore_classes(&pruned), "{k} classes, {n} states");
        assert_eq!(
            (&min.trans, &min.accepting, &min.byte_distance),
            (&refined.trans, &refined.accepting, &refined.byte_distance),
            "{k} classes, {n} states"
        );
        if pruned.clone().minimize_acyclic().is_ok() {
            hashed += 1;
            merged += (min.num_states() < pruned.num_states()) as usize;
        }
    }
    assert!(hashed >= 80 && merged >= 60, "{hashed} tables hashed, {merged} with states merged");
}

#[test]
fn a_table_too_large_to_minimize_stops_at_the_state_limit() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    // Doubled letters and digits split the bytes into over 60 classes; then 2^17 states.
    let lits: Vec<String> = (b'0'..=b'z').filter(u8::is_ascii_alphanumeric).map(|b| format!("{0}{0}", b as char)).collect();
    let prefix = format!("(?:{})", lits.join("|"));
    assert!(Dfa::from_regex(&prefix, &DfaConfig::default()).unwrap().stride > 60);
    let reached = Arc::new(AtomicU64::new(0));
    let config = DfaConfig { max_states: 70_000, states_reached: Some(reached.clone()), ..DfaConfig::default() };
    let err = Dfa::from_regex(&format!("{prefix}[ab]*a[ab]{{16}}"), &config).unwrap_err();
    assert!(matches!(err, GrammarError::TooLarge { .. }), "{err}");
    let states = reached.load(Ordering::Relaxed);
    assert!(states <= 70_065, "went on to {states} states");
    // A table small enough to minimize gets twice the room: the same blow-up, few classes.
    reached.store(0, Ordering::Relaxed);
    assert!(Dfa::from_regex("[ab]*a[ab]{16}", &config).is_err());
    let states = reached.load(Ordering::Relaxed);
    assert!(states > 70_065, "stopped at {states} states");
}
