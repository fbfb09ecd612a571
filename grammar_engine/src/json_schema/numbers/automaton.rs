//! Number languages as DFAs built straight from a step function.
//!
//! The conditions on a number text (its comparison with a bound, its residue modulo a divisor,
//! how many significant digits it has) are each a small state carried from digit to digit.
//! Writing them as regexes means spelling out every case by hand; as a [`Walker`] each is a
//! few lines, and [`build`] explores the reachable states breadth first over the fifteen bytes
//! a number uses, then hands the table to [`Dfa::from_table`], which drops the states that
//! cannot reach acceptance and minimizes the rest.

use std::collections::HashMap;
use std::hash::Hash;

use crate::automata::{Dfa, DfaConfig};
use crate::util::StateId;
use crate::error::{GrammarError, Result};

/// The bytes of number text.
pub(crate) const ALPHABET: &[u8; 15] = b"-.0123456789+eE";

/// A deterministic automaton over [`ALPHABET`], given by its states and steps.
pub(crate) trait Walker {
    type State: Clone + Eq + Hash;
    fn start(&self) -> Self::State;
    /// The state after `byte`, or `None` when no accepted text continues this way.
    fn step(&self, state: &Self::State, byte: u8) -> Option<Self::State>;
    fn accepts(&self, state: &Self::State) -> bool;
}

/// The minimized DFA of a walker's language; `None` when it accepts nothing. `what` names the
/// language in the error raised past `config.max_states` explored states.
pub(crate) fn build<W: Walker>(walker: &W, what: &'static str, config: &DfaConfig) -> Result<Option<Dfa>> {
    // Class 0 is every byte outside the alphabet; class i + 1 is ALPHABET[i].
    let mut classes = [0u8; 256];
    for (i, &b) in ALPHABET.iter().enumerate() {
        classes[b as usize] = i as u8 + 1;
    }
    let stride = ALPHABET.len() + 1;
    let limit = config.max_states.saturating_mul(4);
    let mut ids: HashMap<W::State, StateId> = HashMap::new();
    let mut order = vec![walker.start()];
    ids.insert(walker.start(), StateId::new(0));
    let mut trans: Vec<StateId> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let state = order[i].clone();
        i += 1;
        trans.push(StateId::DEAD);
        for &b in ALPHABET {
            let Some(next) = walker.step(&state, b) else {
                trans.push(StateId::DEAD);
                continue;
            };
            let id = match ids.get(&next) {
                Some(&id) => id,
                None => {
                    if order.len() >= limit {
                        return Err(GrammarError::TooLarge {
                            what,
                            limit,
                            detail: format!("more than {limit} states while building the automaton"),
                        });
                    }
                    let id = StateId::from_index(order.len());
                    ids.insert(next.clone(), id);
                    order.push(next);
                    id
                }
            };
            trans.push(id);
        }
    }
    let accepting: Vec<bool> = order.iter().map(|s| walker.accepts(s)).collect();
    let dfa = Dfa::from_table(classes, stride, &trans, &accepting);
    if let Some(d) = &dfa {
        if d.num_states() > config.max_states {
            return Err(GrammarError::TooLarge {
                what,
                limit: config.max_states,
                detail: format!("{} states after minimization", d.num_states()),
            });
        }
    }
    Ok(dfa)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Digit strings whose digit sum is divisible by 3.
    struct DigitSum;

    impl Walker for DigitSum {
        type State = u8;
        fn start(&self) -> u8 {
            0
        }
        fn step(&self, s: &u8, b: u8) -> Option<u8> {
            b.is_ascii_digit().then(|| (s + b - b'0') % 3)
        }
        fn accepts(&self, s: &u8) -> bool {
            *s == 0
        }
    }

    #[test]
    fn builds_a_minimal_dfa() {
        let dfa = build(&DigitSum, "test", &DfaConfig::default()).unwrap().unwrap();
        assert_eq!(dfa.num_states(), 3);
        let run = |s: &str| {
            let t = dfa.walk(dfa.start(), s.as_bytes());
            !t.is_dead() && dfa.is_accepting(t)
        };
        assert!(run("") && run("111") && run("9") && !run("10") && !run("1.1") && !run("x"));
    }

    #[test]
    fn respects_the_state_limit() {
        struct Counter;
        impl Walker for Counter {
            type State = u32;
            fn start(&self) -> u32 {
                0
            }
            fn step(&self, s: &u32, _: u8) -> Option<u32> {
                Some(s + 1)
            }
            fn accepts(&self, _: &u32) -> bool {
                true
            }
        }
        let small = DfaConfig { max_states: 10, ..DfaConfig::default() };
        assert!(matches!(build(&Counter, "test", &small), Err(GrammarError::TooLarge { .. })));
    }
}
