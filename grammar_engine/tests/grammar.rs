//! A grammar's step API over a small vocabulary: masks, transitions, EOS, budgets, the eager
//! build, token-level liveness and the index size limit.

use std::sync::Arc;

use grammar_engine::{Family, Grammar, GrammarConfig, GrammarError, StateId, TokenId, TokenSpec, Vocabulary};

fn vocab(tokens: &[&str], eos: u32) -> Arc<Vocabulary> {
    let mut specs: Vec<Option<TokenSpec>> =
        tokens.iter().map(|t| Some(TokenSpec { bytes: t.as_bytes().to_vec(), special: false })).collect();
    specs.push(Some(TokenSpec { bytes: b"</s>".to_vec(), special: true }));
    let _ = eos;
    Arc::new(Vocabulary::new(specs, vec![TokenId::new(tokens.len() as u32)], Family::Raw, None).unwrap())
}

fn ascii_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<String> = (32u8..127).map(|b| (b as char).to_string()).collect();
    toks.extend(["12", "123", "ab", "abc", "\"", "{\"", "\":", "\"}"].iter().map(|s| s.to_string()));
    let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
    vocab(&refs, 0)
}

fn bit(mask: &[u32], t: TokenId) -> bool {
    let t = t.as_u32();
    mask[(t >> 5) as usize] >> (t & 31) & 1 == 1
}

#[test]
fn masks_transitions_and_eos() {
    let v = ascii_vocab();
    let eos = *v.eos_ids().first().unwrap();
    let g = Grammar::from_regex(v.clone(), "[0-9]{3}", &GrammarConfig::default()).unwrap();
    let s0 = g.initial_state();
    let allowed = g.allowed_token_ids(s0).unwrap();
    let texts: Vec<&[u8]> = allowed.iter().map(|&t| v.token_bytes(t).unwrap()).collect();
    assert!(texts.contains(&&b"123"[..]) && texts.contains(&&b"7"[..]));
    assert!(!texts.contains(&&b"a"[..]));
    assert!(!bit(&g.token_bitmask(s0).unwrap(), eos));
    let id_123 = allowed.iter().copied().find(|&t| v.token_bytes(t) == Some(b"123")).unwrap();
    let s = g.advance(s0, id_123).unwrap();
    assert!(g.is_accepting(s).unwrap());
    assert_eq!(g.allowed_token_ids(s).unwrap(), vec![eos]);
    assert_eq!(g.advance(s, eos).unwrap(), s);
    assert!(g.advance(s0, eos).is_err());
    assert!(g.advance(s, id_123).is_err());
    assert!(g.advance(StateId::new(9999), TokenId::new(0)).is_err());
    assert_eq!(g.min_tokens_to_accept(s0).unwrap(), 1);
    assert_eq!(g.min_tokens_to_accept(s).unwrap(), 0);
    let row = g.row(s0).unwrap();
    assert_eq!(row.transitions(&v).count(), g.allowed_token_ids(s0).unwrap().len());
    for (t, n) in row.transitions(&v) {
        assert_eq!(g.advance(s0, t).unwrap(), n);
    }
}

#[test]
fn budget_restricts_only_when_needed() {
    let v = ascii_vocab();
    let g = Grammar::from_regex(v.clone(), "[0-9]{1,2}|[a-z]{5}", &GrammarConfig::default()).unwrap();
    let s0 = g.initial_state();
    let plain = g.token_bitmask(s0).unwrap().to_vec();
    assert!(!g.token_bitmask_within(s0, 10).unwrap().is_restricted());
    // With no token left after this one, only tokens that complete a match remain.
    let tight = g.token_bitmask_within(s0, 0).unwrap();
    let allowed: Vec<TokenId> = (0..v.size() as u32).map(TokenId::new).filter(|&t| bit(&tight, t)).collect();
    assert!(!allowed.is_empty());
    for &t in &allowed {
        let n = g.advance(s0, t).unwrap();
        assert!(g.is_accepting(n).unwrap(), "token {t} leaves acceptance out of reach");
        assert!(bit(&plain, t));
    }
    let one = g.token_bitmask_within(s0, 1).unwrap();
    for t in (0..v.size() as u32).map(TokenId::new) {
        if bit(&one, t) {
            assert!(g.min_tokens_to_accept(g.advance(s0, t).unwrap()).unwrap() <= 1);
        }
    }
}

#[test]
fn eager_equals_lazy() {
    let v = ascii_vocab();
    let lazy = Grammar::from_regex(v.clone(), r#"\{"[a-c]+":[0-9]{1,3}\}"#, &GrammarConfig::default()).unwrap();
    let eager = Grammar::from_regex(v, r#"\{"[a-c]+":[0-9]{1,3}\}"#, &GrammarConfig::default()).unwrap();
    eager.build_all().unwrap();
    assert_eq!(eager.rows_built(), eager.num_states());
    for s in (0..lazy.num_states() as u32).map(StateId::new) {
        assert_eq!(&lazy.token_bitmask(s).unwrap()[..], &eager.token_bitmask(s).unwrap()[..]);
    }
}

#[test]
fn vocabulary_that_cannot_complete() {
    // "c" is not a token, so "abc" can only be written as "abc" or "ab"+... : "ab" then "c"
    // is impossible, and "x" is not writable at all.
    let v = vocab(&["a", "b", "abc"], 0);
    assert!(matches!(Grammar::from_regex(v.clone(), "x", &GrammarConfig::default()), Err(GrammarError::NotCompletable { .. })));
    let g = Grammar::from_regex(v.clone(), "ab?c", &GrammarConfig::default()).unwrap();
    // "a" leads to a state needing "c" or "bc": not token-completable, so only "abc" is allowed.
    let s0 = g.initial_state();
    let allowed = g.allowed_token_ids(s0).unwrap();
    assert_eq!(allowed, vec![TokenId::new(2)]);
    assert!(g.advance(s0, TokenId::new(0)).is_err());
}

#[test]
fn index_size_limit() {
    let v = ascii_vocab();
    let cfg = GrammarConfig { max_index_bytes: 8, ..GrammarConfig::default() };
    let g = Grammar::from_regex(v, "[a-z ]+", &cfg).unwrap();
    assert!(matches!(g.token_bitmask(g.initial_state()), Err(GrammarError::TooLarge { .. })));
}

#[test]
fn index_kept_within_its_budget() {
    // Room for about three rows of this grammar: walking all its states drops rows, and every
    // mask, transition and budget mask stays the one an unbounded index gives.
    let v = ascii_vocab();
    let pattern = "[a-c]{0,30}x";
    let free = Grammar::from_regex(v.clone(), pattern, &GrammarConfig::default()).unwrap();
    free.build_all().unwrap();
    let one_row = free.memory_bytes() / free.num_states();
    let cfg = GrammarConfig { max_index_bytes: 3 * one_row, ..GrammarConfig::default() };
    let g = Grammar::from_regex(v.clone(), pattern, &cfg).unwrap();
    let base = g.memory_bytes();
    let mut held = Vec::new();
    for round in 0..2 {
        for s in (0..g.num_states() as u32).map(StateId::new) {
            let mask = g.token_bitmask(s).unwrap();
            assert_eq!(&mask[..], &free.token_bitmask(s).unwrap()[..], "state {s:?}, round {round}");
            assert_eq!(g.transitions(s).unwrap(), free.transitions(s).unwrap());
            assert_eq!(&g.token_bitmask_within(s, 2).unwrap()[..], &free.token_bitmask_within(s, 2).unwrap()[..]);
            assert!(g.memory_bytes() - base <= cfg.max_index_bytes, "{} bytes of rows kept", g.memory_bytes() - base);
            assert!(g.rows_built() < g.num_states() / 2);
            held.push(mask);
        }
    }
    assert!(g.rows_dropped() >= g.num_states());
    // A mask handed out stays valid after its row is dropped from the index.
    for (i, m) in held.iter().enumerate() {
        let s = StateId::new((i % g.num_states()) as u32);
        assert_eq!(&m[..], &free.token_bitmask(s).unwrap()[..]);
    }
    // All rows at once do not fit: a typed error, and the grammar still answers.
    assert!(matches!(g.build_all(), Err(GrammarError::TooLarge { .. })));
    assert_eq!(&g.token_bitmask(g.initial_state()).unwrap()[..], &free.token_bitmask(free.initial_state()).unwrap()[..]);
}

#[test]
fn ids_from_outside_are_checked_never_trusted() {
    let v = ascii_vocab();
    let g = Grammar::from_regex(v.clone(), "[0-9]{3}", &GrammarConfig::default()).unwrap();
    let n = g.num_states();
    assert_eq!(g.state(0).unwrap(), g.initial_state());
    for bad in [-1, n as i64, i64::from(u32::MAX), 1 << 40] {
        match g.state(bad) {
            Err(GrammarError::InvalidState { state, num_states }) => assert_eq!((state, num_states), (bad, n)),
            other => panic!("state {bad}: {other:?}"),
        }
    }
    let err = g.state(-1).unwrap_err().to_string();
    assert_eq!(err, format!("state -1 does not exist (the grammar has {n} states)"));
    // The dead state is no state of a grammar: every call refuses it with a typed error.
    let one = TokenId::new(u32::from(b'1') - 32);
    assert!(StateId::DEAD.is_dead() && !g.initial_state().is_dead());
    assert!(matches!(g.advance(StateId::DEAD, one), Err(GrammarError::InvalidState { .. })));
    assert!(matches!(g.token_bitmask(StateId::DEAD), Err(GrammarError::InvalidState { .. })));
    assert!(matches!(g.is_accepting(StateId::DEAD), Err(GrammarError::InvalidState { .. })));
    assert!(matches!(g.min_tokens_to_accept(StateId::DEAD), Err(GrammarError::InvalidState { .. })));
    // A token past the vocabulary is refused, naming the id.
    let past = TokenId::new(v.size() as u32 + 7);
    match g.advance(g.initial_state(), past) {
        Err(e @ GrammarError::TokenNotAllowed { .. }) => {
            assert!(e.to_string().contains(&format!("token {past} ")) && e.to_string().contains("outside the vocabulary"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(v.token_bytes(one), Some(&b"1"[..]));
}

#[test]
fn the_fewest_tokens_to_accept_do_not_fill_the_index() {
    // Distances come from the token graph (a few states per state), not from rows kept in the
    // index: after them, only the rows asked for are built, and they agree with the distances
    // an eagerly built index gives.
    let toks: Vec<String> = (b'a'..=b'z').map(|b| (b as char).to_string()).chain(["ab", "abc", "xyz", "zz"].map(String::from)).collect();
    let refs: Vec<&str> = toks.iter().map(String::as_str).collect();
    let v = vocab(&refs, 0);
    let pattern = "(abc|xyz)[a-z]{0,5}z{3}";
    let lazy = Grammar::from_regex(v.clone(), pattern, &GrammarConfig::default()).unwrap();
    let eager = Grammar::from_regex(v, pattern, &GrammarConfig::default()).unwrap();
    eager.build_all().unwrap();
    let s0 = lazy.initial_state();
    assert_eq!(lazy.min_tokens_to_accept(s0).unwrap(), 3);
    assert_eq!(lazy.rows_built(), 0);
    for s in (0..lazy.num_states() as u32).map(StateId::new) {
        assert_eq!(lazy.min_tokens_to_accept(s).unwrap(), eager.min_tokens_to_accept(s).unwrap());
    }
    assert_eq!(lazy.rows_built(), 0);
    let within = lazy.token_bitmask_within(s0, 3).unwrap();
    assert_eq!(&within[..], &eager.token_bitmask_within(s0, 3).unwrap()[..]);
    assert_eq!(lazy.rows_built(), 1);
}
