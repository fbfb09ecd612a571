//! Calls spelled as bytes: how a rule's body, compiled to an ordinary byte DFA, says "here
//! another rule is called".
//!
//! A pushdown grammar (`crate::pushdown`) is a set of rules whose bodies are automaton
//! expressions that may call rules. A call is written into the body as a short byte string
//! that no UTF-8 text contains: the opener [`CALL_OPENER`] (0xC0, never valid UTF-8), then the
//! rule id in base 6 with every digit but the last from [`INNER_DIGITS`] and the last from
//! [`LAST_DIGITS`], so that no call's spelling is a prefix of another's. The body then goes
//! through the usual construction (regex leaves, products, subset construction,
//! minimization), which treats a call as six or so bytes and so keeps calls apart exactly: two
//! paths that call different rules diverge at a digit. [`calls_of`] reads the calls back out of
//! the finished DFA, as (rule, return state) pairs per state.
//!
//! Special-token markers (`crate::structure::MARKER_BYTES`) never use 0xC0, and a marker is
//! one byte read where a call's opener would be, so the two spellings never meet.

use crate::automata::Dfa;
use crate::util::{RuleId, StateId};

/// The byte that opens a call's spelling.
pub const CALL_OPENER: u8 = 0xC0;

/// Digits of a rule id before its last digit.
const INNER_DIGITS: [u8; 6] = [0xC1, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9];

/// The last digit of a rule id.
const LAST_DIGITS: [u8; 6] = [0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF];

/// The bytes of the call of `rule`: the opener and the rule id's digits.
pub fn call_bytes(rule: RuleId) -> Vec<u8> {
    let mut digits = Vec::new();
    let mut n = rule.as_u32();
    loop {
        digits.push((n % 6) as usize);
        n /= 6;
        if n == 0 {
            break;
        }
    }
    let mut out = vec![CALL_OPENER];
    // Most significant digit first; the least significant one is written last, from LAST_DIGITS.
    for (i, &d) in digits.iter().enumerate().rev() {
        out.push(if i == 0 { LAST_DIGITS[d] } else { INNER_DIGITS[d] });
    }
    out
}

/// The DFA of exactly one byte string.
pub(crate) fn bytes_dfa(bytes: &[u8]) -> Dfa {
    let mut classes = [0u8; 256];
    let mut next_class = 1u8;
    for &b in bytes {
        if classes[b as usize] == 0 {
            classes[b as usize] = next_class;
            next_class += 1;
        }
    }
    let stride = next_class as usize;
    let n = bytes.len() + 1;
    let mut trans = vec![StateId::DEAD; n * stride];
    for (i, &b) in bytes.iter().enumerate() {
        trans[i * stride + classes[b as usize] as usize] = StateId::from_index(i + 1);
    }
    let mut accepting = vec![false; n];
    accepting[n - 1] = true;
    Dfa::from_table(classes, stride, &trans, &accepting).expect("a byte string's DFA accepts that string")
}

/// The calls out of every state of `dfa`: `out[s]` lists (rule, the state the call returns
/// to), found by following the opener and the digits of each call spelled from `s`.
pub fn calls_of(dfa: &Dfa) -> Vec<Vec<(RuleId, StateId)>> {
    let mut out = vec![Vec::new(); dfa.num_states()];
    for (s, calls) in out.iter_mut().enumerate() {
        let after_opener = dfa.next(StateId::from_index(s), CALL_OPENER);
        if after_opener.is_dead() {
            continue;
        }
        read_digits(dfa, after_opener, 0, calls);
        calls.sort_unstable();
    }
    out
}

/// Follows every digit path from `state` (the digits read so far give `value`), recording a
/// call at each last digit.
fn read_digits(dfa: &Dfa, state: StateId, value: u32, calls: &mut Vec<(RuleId, StateId)>) {
    for (d, &b) in LAST_DIGITS.iter().enumerate() {
        let ret = dfa.next(state, b);
        if !ret.is_dead() {
            calls.push((RuleId::new(value * 6 + d as u32), ret));
        }
    }
    for (d, &b) in INNER_DIGITS.iter().enumerate() {
        let next = dfa.next(state, b);
        if !next.is_dead() {
            read_digits(dfa, next, value * 6 + d as u32, calls);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automata::{DfaConfig, Expr};

    #[test]
    fn call_spellings_are_prefix_free_and_read_back() {
        let ids: Vec<u32> = (0..300).chain([1295, 1296, 77_777]).collect();
        let spelled: Vec<Vec<u8>> = ids.iter().map(|&i| call_bytes(RuleId::new(i))).collect();
        for (i, a) in spelled.iter().enumerate() {
            assert!(std::str::from_utf8(a).is_err());
            for (j, b) in spelled.iter().enumerate() {
                assert!(i == j || !b.starts_with(a), "{:?} is a prefix of {:?}", a, b);
            }
        }
        let e = Expr::concat(vec![
            Expr::literal("a"),
            Expr::union(vec![Expr::Call(RuleId::new(3)), Expr::Call(RuleId::new(77_777))]),
            Expr::literal("b"),
        ]);
        let d = e.to_dfa(&DfaConfig::default()).unwrap().unwrap();
        let after_a = d.next(d.start(), b'a');
        let calls = calls_of(&d);
        let found: Vec<u32> = calls[after_a.as_usize()].iter().map(|(r, _)| r.as_u32()).collect();
        assert_eq!(found, vec![3, 77_777]);
        let (_, ret) = calls[after_a.as_usize()][0];
        assert!(d.is_accepting(d.next(ret, b'b')));
    }
}
