#[cfg(test)]
mod tests {
    use super::super::*;
    use std::collections::HashMap;
    use crate::error::GrammarError;

    fn dfa(p: &str) -> Dfa {
        Dfa::from_regex(p, &DfaConfig::default()).unwrap()
    }

    fn full_match(d: &Dfa, s: &str) -> bool {
        let t = d.walk(d.start(), s.as_bytes());
        t != DEAD && d.is_accepting(t)
    }

    #[test]
    fn full_match_semantics() {
        let d = dfa("[0-9]{4}");
        assert!(full_match(&d, "2024"));
        assert!(!full_match(&d, "202"));
        assert!(!full_match(&d, "20245"));
        assert_eq!(d.walk(0, b"20245"), DEAD);
        assert_eq!(d.walk(0, b"x"), DEAD);
        assert_eq!(d.byte_distance(0), 4);
        let d = dfa("a|ab");
        assert!(full_match(&d, "a") && full_match(&d, "ab"));
    }

    #[test]
    fn every_state_is_live() {
        let d = dfa("(ab|cd)*e|f[0-9]+");
        for s in 0..d.num_states() as u32 {
            assert!(d.byte_distance(s) != u32::MAX);
        }
    }

    #[test]
    fn unicode_and_forced_bytes() {
        let d = dfa("é+");
        assert!(full_match(&d, "éé"));
        assert_eq!(d.forced_bytes(0), "é".as_bytes());
        let d = dfa(r#"\{"name":"[a-z]+"\}"#);
        assert_eq!(d.forced_bytes(0), br#"{"name":""#);
        assert_eq!(dfa("abc|abd").forced_bytes(0), b"ab");
        assert_eq!(dfa("x?").forced_bytes(0), b"");
    }

    #[test]
    fn restricting_bytes_prunes_what_needs_them() {
        let d = dfa("a[bc]+|x");
        let mut allowed = [true; 256];
        allowed[b'b' as usize] = false;
        let r = d.restrict_bytes(&allowed).unwrap();
        assert!(full_match(&r, "acc") && full_match(&r, "x") && !full_match(&r, "ab"));
        assert_eq!(r.walk(0, b"ab"), DEAD);
        allowed[b'c' as usize] = false;
        allowed[b'x' as usize] = false;
        assert!(d.restrict_bytes(&allowed).is_none());
        assert!(d.uses_byte(b'b') && !d.uses_byte(b'z'));
    }

    #[test]
    fn cutting_bytes_keeps_state_ids() {
        let d = dfa("a[bc]+|x");
        let cut = d.with_bytes_cut(b"b");
        assert_eq!(cut.num_states(), d.num_states());
        let after_a = d.next(0, b'a');
        assert_eq!(cut.next(0, b'a'), after_a);
        assert_eq!(cut.next(after_a, b'b'), DEAD);
        assert_ne!(d.next(after_a, b'b'), DEAD);
        assert_eq!(cut.next(after_a, b'c'), d.next(after_a, b'c'));
        assert_eq!(cut.byte_distance(after_a), d.byte_distance(after_a));
    }

    #[test]
    fn minimization_merges_equivalent_states_and_keeps_the_language() {
        // Both branches continue identically after their first byte.
        let d = dfa("(a|b)[0-9]{3}|c[0-9]{3}");
        assert_eq!(d.num_states(), 5);
        for (s, ok) in [("a123", true), ("c999", true), ("b12", false), ("d123", false)] {
            assert_eq!(full_match(&d, s), ok, "{s}");
        }
    }

    /// Moore's refinement, the slow and obvious way: how many classes of equivalent live
    /// states a pruned table has.
    fn moore_classes(d: &Dfa) -> usize {
        let n = d.num_states();
        let mut block: Vec<usize> = (0..n).map(|s| d.is_accepting(s as u32) as usize).collect();
        loop {
            let mut ids: HashMap<Vec<usize>, usize> = HashMap::new();
            let next: Vec<usize> = (0..n)
                .map(|s| {
                    let mut sig = vec![block[s]];
                    sig.extend(d.row(s as u32).iter().map(|&t| if t == DEAD { usize::MAX } else { block[t as usize] }));
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

    #[test]
    fn minimization_agrees_with_moores_refinement_on_random_tables() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut classes = [0u8; 256];
        for (b, c) in classes.iter_mut().enumerate() {
            *c = (b % 3) as u8;
        }
        for _ in 0..300 {
            let n = 1 + rand(40) as usize;
            let trans: Vec<u32> = (0..n * 3).map(|_| if rand(4) == 0 { DEAD } else { rand(n as u64) as u32 }).collect();
            let accepting: Vec<bool> = (0..n).map(|_| rand(3) == 0).collect();
            let Some(pruned) = Dfa::prune(classes, 3, &trans, &accepting) else { continue };
            let want = moore_classes(&pruned);
            let min = pruned.clone().minimize();
            assert_eq!(min.num_states(), want, "{trans:?} {accepting:?}");
            // The same language: every string of up to 6 bytes over the three classes.
            let mut layer: Vec<Vec<u8>> = vec![vec![]];
            for _ in 0..=6 {
                for w in &layer {
                    let (a, b) = (pruned.walk(0, w), min.walk(0, w));
                    assert_eq!(a != DEAD && pruned.is_accepting(a), b != DEAD && min.is_accepting(b), "{w:?}");
                }
                layer = layer.iter().flat_map(|w| (0..3u8).map(move |b| [w.as_slice(), &[b]].concat())).collect();
            }
        }
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

    #[test]
    fn a_determinization_notes_the_states_it_reached() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let reached = Arc::new(AtomicU64::new(0));
        let config = DfaConfig { states_reached: Some(reached.clone()), ..DfaConfig::default() };
        let d = Dfa::from_regex("[a-z]{1,5}@x", &config).unwrap();
        assert_eq!(reached.load(Ordering::Relaxed), d.num_states() as u64);
        let small = DfaConfig { max_states: 10, states_reached: Some(reached.clone()), ..DfaConfig::default() };
        reached.store(0, Ordering::Relaxed);
        assert!(Dfa::from_regex("[a-z]{1,40}", &small).is_err());
        assert!(reached.load(Ordering::Relaxed) > 10, "the failed attempt's size is known");
    }

    #[test]
    fn errors() {
        let cfg = DfaConfig::default();
        match Dfa::from_regex("ab(c", &cfg) {
            Err(GrammarError::InvalidRegex { offset, .. }) => assert_eq!(offset, 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(Dfa::from_regex(r"(a)\1", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
        assert!(matches!(Dfa::from_regex(r"a(?=b)", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
        assert!(matches!(Dfa::from_regex(r"\bfoo", &cfg), Err(GrammarError::UnsupportedRegex { .. })));
        assert!(matches!(Dfa::from_regex(r"[^\s\S]", &cfg), Err(GrammarError::EmptyLanguage { .. })));
        let small = DfaConfig { max_states: 10, ..DfaConfig::default() };
        assert!(matches!(Dfa::from_regex("[a-z]{40}", &small), Err(GrammarError::TooLarge { .. })));
        let tiny = DfaConfig { max_states: 100_000, build_size_limit: 10_000, ..DfaConfig::default() };
        assert!(matches!(Dfa::from_regex("[a-z]{500}", &tiny), Err(GrammarError::TooLarge { .. })));
    }
}