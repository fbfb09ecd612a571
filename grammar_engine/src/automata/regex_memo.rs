//! Regexes already determinized, by their text.
//!
//! A JSON Schema compiles to many small automata, and the same ones again and again: a
//! definition reached through `$ref` from forty places is one regex built forty times, and each
//! attempt of the restriction ladder walks the schema anew. On JSONSchemaBench's slow schemas
//! the walk determinized 3,240 regexes of which 77 were distinct. The memo keeps each result
//! once (DFA or empty language) and hands out copies.
//!
//! A memo belongs to one compilation, under one set of limits: a stored DFA is only checked
//! against the state limit of the config it is read under, not rebuilt. Errors are not stored
//! (a deadline or a cancel depends on when, not on what). It is shared by the ladder's threads.
//!
//! Different schemas share pieces too (a string, a number, an enum of the same names), so one
//! more memo, [`RegexMemo::process`], keeps the small results of every compilation in the
//! process, within a few megabytes; when it is full it is emptied and fills again with what is
//! in use. A result is a function of the pattern text alone, so reading it from there gives
//! the same grammar as building it; only the time spent differs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::automata::Dfa;

/// Largest DFA a compilation's memo keeps, in states: big automata are built once anyway (the
/// final grammar), and small ones are what repeats.
const MAX_KEPT_STATES: usize = 20_000;

/// Most bytes of DFA tables a compilation's memo keeps in all; past it, new results are not
/// stored.
const MAX_KEPT_BYTES: usize = 256 << 20;

/// Largest DFA the process's memo keeps, in states: the pieces schemas share are small.
const PROCESS_MAX_STATES: usize = 2_048;

/// Most bytes the process's memo keeps; past it, it is emptied.
const PROCESS_MAX_BYTES: usize = 32 << 20;

/// Determinized regexes by text; see the module docs.
pub struct RegexMemo {
    inner: Mutex<Kept>,
    max_states: usize,
    max_bytes: usize,
    /// When full: empty it and go on storing (the process's memo), rather than store no more.
    renew: bool,
}

impl Default for RegexMemo {
    /// A memo for one compilation.
    fn default() -> Self {
        RegexMemo { inner: Mutex::default(), max_states: MAX_KEPT_STATES, max_bytes: MAX_KEPT_BYTES, renew: false }
    }
}

static PROCESS: OnceLock<RegexMemo> = OnceLock::new();

#[derive(Default)]
struct Kept {
    /// `None`: the regex matches no string.
    dfas: HashMap<Box<str>, Option<Arc<Dfa>>>,
    bytes: usize,
}

impl RegexMemo {
    /// The memo every compilation of the process shares (small DFAs only; see the module docs).
    pub(crate) fn process() -> &'static RegexMemo {
        PROCESS.get_or_init(|| RegexMemo {
            inner: Mutex::default(),
            max_states: PROCESS_MAX_STATES,
            max_bytes: PROCESS_MAX_BYTES,
            renew: true,
        })
    }

    /// The stored result for `pattern`: `Some(None)` when it was found to match no string.
    pub(crate) fn get(&self, pattern: &str) -> Option<Option<Arc<Dfa>>> {
        self.kept().dfas.get(pattern).cloned()
    }

    /// Stores `dfa` for `pattern` (unless it is too large or the memo is full); the DFA, now
    /// shared.
    pub(crate) fn put(&self, pattern: &str, dfa: Dfa) -> Arc<Dfa> {
        let dfa = Arc::new(dfa);
        self.put_shared(pattern, &dfa);
        dfa
    }

    /// Stores an already shared `dfa` for `pattern` (unless it is too large or the memo is full).
    pub(crate) fn put_shared(&self, pattern: &str, dfa: &Arc<Dfa>) {
        if dfa.num_states() <= self.max_states {
            self.keep(pattern, Some(dfa.clone()), dfa.memory_bytes());
        }
    }

    /// Stores that `pattern` matches no string.
    pub(crate) fn put_empty(&self, pattern: &str) {
        self.keep(pattern, None, 0);
    }

    fn keep(&self, pattern: &str, dfa: Option<Arc<Dfa>>, bytes: usize) {
        let bytes = bytes + pattern.len();
        let mut kept = self.kept();
        if kept.dfas.contains_key(pattern) || bytes > self.max_bytes {
            return;
        }
        if kept.bytes + bytes > self.max_bytes {
            if !self.renew {
                return;
            }
            *kept = Kept::default();
        }
        kept.bytes += bytes;
        kept.dfas.insert(pattern.into(), dfa);
    }

    /// How many results are stored.
    pub fn len(&self) -> usize {
        self.kept().dfas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic while holding the lock leaves the map whole (insertions are single calls).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for RegexMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept();
        f.debug_struct("RegexMemo").field("regexes", &kept.dfas.len()).field("bytes", &kept.bytes).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::RegexMemo;
    use crate::automata::{Deadline, Dfa, DfaConfig};
    use crate::error::GrammarError;

    #[test]
    fn a_regex_is_built_once_and_copied_afterwards() {
        let config = DfaConfig { memo: Some(Arc::new(RegexMemo::default())), ..DfaConfig::default() };
        let first = Dfa::from_regex("[a-c]{2,4}x", &config).expect("builds");
        // A deadline already past stops any determinization: only a stored result comes back.
        let past = Deadline::new(Instant::now() - Duration::from_secs(1), None, 1);
        let late = DfaConfig { deadline: Some(past), ..config.clone() };
        let again = Dfa::from_regex("[a-c]{2,4}x", &late).expect("stored");
        assert_eq!(again.num_states(), first.num_states());
        assert!(["abx", "ccccx"].iter().all(|s| again.is_accepting(again.walk(again.start(), s.as_bytes()))));
        assert!(matches!(Dfa::from_regex("[a-c]{2,5}x", &late), Err(GrammarError::TooLarge { .. })));
        // An empty language is stored too; the state limit still holds for a stored DFA.
        assert!(matches!(Dfa::from_regex("a[^\\x00-\\x{10FFFF}]", &config), Err(GrammarError::EmptyLanguage { .. })));
        assert!(matches!(Dfa::from_regex("a[^\\x00-\\x{10FFFF}]", &late), Err(GrammarError::EmptyLanguage { .. })));
        let small = DfaConfig { max_states: 2, ..late };
        assert!(matches!(Dfa::from_regex("[a-c]{2,4}x", &small), Err(GrammarError::TooLarge { .. })));
        assert_eq!(config.memo.as_ref().map(|m| m.len()), Some(2));
    }

    #[test]
    fn a_small_regex_built_by_one_compilation_serves_the_next() {
        let first = DfaConfig { memo: Some(Arc::new(RegexMemo::default())), ..DfaConfig::default() };
        let built = Dfa::from_regex("[d-f]{3,5}yz", &first).expect("builds");
        // Another compilation (its own memo) whose deadline has passed builds nothing new.
        let past = Deadline::new(Instant::now() - Duration::from_secs(1), None, 1);
        let next = DfaConfig { memo: Some(Arc::new(RegexMemo::default())), deadline: Some(past), ..DfaConfig::default() };
        let again = Dfa::from_regex("[d-f]{3,5}yz", &next).expect("from the process's memo");
        assert_eq!(again.num_states(), built.num_states());
        assert!(again.is_accepting(again.walk(again.start(), b"deffyz")));
        assert_eq!(next.memo.as_ref().map(|m| m.len()), Some(1));
        assert!(matches!(Dfa::from_regex("[d-f]{3,6}yz", &next), Err(GrammarError::TooLarge { .. })));
        // Without a memo (a plain regex compile) nothing is read from it.
        let plain = DfaConfig { deadline: Some(past), ..DfaConfig::default() };
        assert!(matches!(Dfa::from_regex("[d-f]{3,5}yz", &plain), Err(GrammarError::TooLarge { .. })));
    }
}
