//! Determinization by `regex-automata`'s lazy DFA, for NFAs with look-around assertions.
//!
//! The subset construction ([`super::subset`]) cannot track what `^`, `$` or an ASCII word
//! boundary needs to see; the lazy DFA can. It is driven breadth-first from here and its
//! states are copied into a raw table, which is then pruned and minimized like any other.

use regex_automata::hybrid::{self, LazyStateID};
use regex_automata::nfa::thompson;
use regex_automata::{Anchored, Input, MatchKind};

use super::build::{build_error, no_full_match};
use super::dfa::class_tables;
use super::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::util::int_hash::IntMap;
use crate::util::StateId;

impl Dfa {
    /// [`Dfa::from_nfa`] by `regex-automata`'s lazy DFA, driven breadth-first from here. Its
    /// cache holds every state (it is never cleared: a clear would invalidate the ids held
    /// here, so it gives up instead, which is a size error).
    pub(super) fn from_lazy_dfa(nfa: &thompson::NFA, config: &DfaConfig) -> Result<Dfa> {
        let lazy = hybrid::dfa::DFA::builder()
            .configure(
                hybrid::dfa::Config::new()
                    .match_kind(MatchKind::All)
                    .cache_capacity(config.build_size_limit)
                    .minimum_cache_clear_count(Some(0)),
            )
            .build_from_nfa(nfa.clone())
            .map_err(|e| build_error(&e.to_string(), config))?;
        let mut cache = lazy.create_cache();
        let cache_err = |e: hybrid::CacheError| build_error(&format!("determinization exceeded its memory limit: {e}"), config);
        let start = lazy
            .start_state_forward(&mut cache, &Input::new("").anchored(Anchored::Yes))
            .map_err(|e| GrammarError::UnsupportedRegex { construct: "start state".into(), reason: e.to_string() })?;
        let ra_classes = lazy.byte_classes();
        let mut classes = [0u8; 256];
        let mut stride = 0usize;
        for b in 0..=255u8 {
            classes[b as usize] = ra_classes.get(b);
            stride = stride.max(ra_classes.get(b) as usize + 1);
        }
        let (class_rep, _) = class_tables(&classes, stride);
        let limit = config.raw_state_limit(stride);

        // Breadth-first walk over the lazy DFA's non-dead states.
        let mut ids: IntMap<LazyStateID, StateId> = IntMap::default();
        let mut order: Vec<LazyStateID> = Vec::new();
        let mut raw_trans: Vec<StateId> = Vec::new();
        ids.insert(start, StateId::new(0));
        order.push(start);
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            if i % 256 == 0 {
                config.check_deadline("a DFA").inspect_err(|_| config.note_states(order.len()))?;
            }
            for &rep in class_rep.iter().take(stride) {
                let next = lazy.next_state(&mut cache, s, rep).map_err(cache_err)?;
                if next.is_dead() || next.is_quit() {
                    raw_trans.push(StateId::DEAD);
                    continue;
                }
                let id = match ids.get(&next) {
                    Some(&id) => id,
                    None => {
                        if order.len() >= limit {
                            return Err(config.determinization_overflow(order.len()));
                        }
                        let id = StateId::from_index(order.len());
                        ids.insert(next, id);
                        order.push(next);
                        id
                    }
                };
                raw_trans.push(id);
            }
        }
        let mut accepting = Vec::with_capacity(order.len());
        for &s in &order {
            accepting.push(lazy.next_eoi_state(&mut cache, s).map_err(cache_err)?.is_match());
        }
        config.check_deadline("a DFA")?;
        let dfa = Dfa::prune(classes, stride, &raw_trans, &accepting)
            .ok_or_else(no_full_match)?
            .minimize();
        config.check_built(&dfa)?;
        Ok(dfa)
    }
}
