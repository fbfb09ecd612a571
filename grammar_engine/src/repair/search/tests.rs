use std::time::Duration;

use crate::repair::test_support::*;
use crate::repair::{repair, repair_impl, RepairOptions, RepairStatus};

#[test]
fn matches_reference_on_random_cases() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0;
    for &(pattern, alphabet) in SMALL_REGEXES {
        let d = dfa(pattern);
        for _ in 0..150 {
            let len = rng.below(9) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| match rng.below(10) {
                    0 => b'x',
                    1 => 0xff,
                    _ => alphabet[rng.below(alphabet.len() as u64) as usize],
                })
                .collect();
            let opts = if rng.below(2) == 0 {
                RepairOptions::default()
            } else {
                RepairOptions {
                    insert_cost: 1 + rng.below(3) as u32,
                    delete_cost: 1 + rng.below(3) as u32,
                    substitute_cost: 1 + rng.below(4) as u32,
                    ..RepairOptions::default()
                }
            };
            let want = reference_cost(&d, &text, &opts);
            let r = repair(&d, &text, &opts);
            assert_eq!(r.status, RepairStatus::Optimal);
            assert_eq!(r.cost, Some(want), "{pattern} {:?} {opts:?}", String::from_utf8_lossy(&text));
            let out = check(&d, &text, &opts, &r);
            assert_eq!(levenshtein(&text, &out, &opts), want);
            // Every schedule (hash table, early and interleaved backward phases, backward
            // only) finds the same optimum.
            for tuning in tunings(len) {
                let other = repair_impl(&d, &text, &opts, tuning);
                assert_eq!(other.status, RepairStatus::Optimal);
                assert_eq!(
                    other.cost,
                    Some(want),
                    "{pattern} {:?} {opts:?} {tuning:?}",
                    String::from_utf8_lossy(&text)
                );
                check(&d, &text, &opts, &other);
            }
            cases += 1;
        }
    }
    assert_eq!(cases, 150 * SMALL_REGEXES.len());
}

/// Enumerates the language up to the length any cheaper repair could have, and checks no
/// string is closer than the returned cost.
#[test]
fn matches_enumeration_on_tiny_cases() {
    let mut rng = Rng(12345);
    let opts = RepairOptions::default();
    for &(pattern, alphabet) in SMALL_REGEXES {
        let d = dfa(pattern);
        for _ in 0..25 {
            let len = rng.below(5) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| if rng.below(6) == 0 { b'x' } else { alphabet[rng.below(alphabet.len() as u64) as usize] })
                .collect();
            let r = repair(&d, &text, &opts);
            let cost = r.cost.unwrap();
            let out = check(&d, &text, &opts, &r);
            assert_eq!(levenshtein(&text, &out, &opts), cost);
            // Any string at distance < cost has fewer than len + cost bytes.
            let max_len = len + cost as usize;
            if alphabet.len().pow(max_len as u32) > 200_000 {
                continue;
            }
            let mut best = u32::MAX;
            let mut word = Vec::new();
            enumerate(&d, alphabet, max_len, &mut word, &mut |w| {
                best = best.min(levenshtein(&text, w, &opts));
            });
            assert_eq!(best, cost, "{pattern} {:?}", String::from_utf8_lossy(&text));
        }
    }
}

/// Random corruptions of JSON texts: the optimum matches the reference under every schedule.
#[test]
fn random_json_corruptions_match_reference() {
    let d = json_object_dfa();
    let bases = [
        r#"{"name": "Ada", "age": 36, "tags": ["x", "y"]}"#,
        r#"{"a":1,"b":[true,false,null],"c":"q\"z"}"#,
        r#" { "k" : -1.5e3 , "l" : [ ] } "#,
    ];
    let junk = b"{}[]\",: x1\\\xc3";
    let mut rng = Rng(0xdead_beef);
    for _ in 0..60 {
        let mut text = bases[rng.below(bases.len() as u64) as usize].as_bytes().to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(text.len() as u64 + 1) as usize;
            let byte = junk[rng.below(junk.len() as u64) as usize];
            match rng.below(3) {
                0 if at < text.len() => {
                    text.remove(at);
                }
                1 if at < text.len() => text[at] = byte,
                _ => text.insert(at, byte),
            }
        }
        let opts = RepairOptions::default();
        let want = reference_cost(&d, &text, &opts);
        let r = repair(&d, &text, &opts);
        assert_eq!(r.cost, Some(want), "{:?}", String::from_utf8_lossy(&text));
        check(&d, &text, &opts, &r);
        for tuning in tunings(text.len()) {
            let other = repair_impl(&d, &text, &opts, tuning);
            assert_eq!(other.cost, Some(want), "{:?} {tuning:?}", String::from_utf8_lossy(&text));
            check(&d, &text, &opts, &other);
        }
    }
}

#[test]
fn expansion_budget_gives_anytime_answer() {
    let d = json_object_dfa();
    let text = long_json(40, true);
    let full = repair(&d, text.as_bytes(), &RepairOptions::default());
    assert_eq!(full.status, RepairStatus::Optimal);
    for budget in [0, 5, 50] {
        let opts = RepairOptions { max_expansions: Some(budget), ..RepairOptions::default() };
        let r = repair(&d, text.as_bytes(), &opts);
        assert_eq!(r.status, RepairStatus::Anytime, "budget {budget}");
        assert!(r.expansions <= budget);
        let cost = r.cost.unwrap();
        check(&d, text.as_bytes(), &opts, &r);
        assert!(r.lower_bound <= full.cost.unwrap() && full.cost.unwrap() <= cost);
    }
    let opts = RepairOptions { deadline: Some(Duration::ZERO), ..RepairOptions::default() };
    let r = repair(&d, text.as_bytes(), &opts);
    assert_eq!(r.status, RepairStatus::Anytime);
    check(&d, text.as_bytes(), &opts, &r);
    // A budget too small with a max_cost below the greedy answer: nothing found yet.
    let opts =
        RepairOptions { max_expansions: Some(0), max_cost: Some(full.cost.unwrap()), ..RepairOptions::default() };
    let r = repair(&d, text.as_bytes(), &opts);
    assert!(matches!(r.status, RepairStatus::NotFound | RepairStatus::Anytime));
    if r.status == RepairStatus::NotFound {
        assert_eq!(r.text, None);
    }
}
