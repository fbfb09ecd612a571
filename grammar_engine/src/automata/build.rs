//! Regex to [`Dfa`]: parse, compile to a Thompson NFA, determinize, prune, minimize.
//!
//! `regex-automata` compiles the pattern (anchored at the start, Unicode-aware, UTF-8 only)
//! to an NFA. An NFA without look-around assertions is determinized by [`super::subset`];
//! one with them by `regex-automata`'s lazy DFA ([`super::lazy`]), which tracks what an
//! assertion needs to see. With a [`super::RegexMemo`] in the config, each pattern text is
//! built once per compilation, and a small one once per process ([`RegexMemo::process`]).

use std::sync::Arc;

use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_syntax::hir::Hir;

use super::algebra::Expr;
use super::parse::parse;
use super::regex_tree;
use super::{subset, Dfa, DfaConfig, RegexMemo};
use crate::error::{GrammarError, Result};

impl Dfa {
    /// Compiles `pattern` with full-match semantics: a byte string is accepted when the whole
    /// string matches.
    pub fn from_regex(pattern: &str, config: &DfaConfig) -> Result<Dfa> {
        Self::shared_from_regex(pattern, config).map(Arc::unwrap_or_clone)
    }

    /// [`Dfa::from_regex`], shared with the config's memo (if any) rather than copied.
    pub(crate) fn shared_from_regex(pattern: &str, config: &DfaConfig) -> Result<Arc<Dfa>> {
        Self::shared_from(pattern, || parse(pattern), config)
    }

    /// The DFA of a regex-only expression ([`regex_tree`]), shared like
    /// [`Dfa::shared_from_regex`] under its rendered text.
    pub(crate) fn shared_from_tree(expr: &Expr, config: &DfaConfig) -> Result<Arc<Dfa>> {
        let text = expr.render()?;
        Self::shared_from(&text, || regex_tree::hir(expr).map_or_else(|| parse(&text), Ok), config)
    }

    /// The DFA of `pattern` from the memos, or built from the syntax tree `hir` gives.
    fn shared_from(pattern: &str, hir: impl FnOnce() -> Result<Hir>, config: &DfaConfig) -> Result<Arc<Dfa>> {
        let Some(memo) = &config.memo else { return Self::build_regex(hir()?, config).map(Arc::new) };
        if let Some(kept) = memo.get(pattern) {
            let Some(dfa) = kept else { return Err(no_full_match()) };
            config.check_built(&dfa)?;
            return Ok(dfa);
        }
        let process = RegexMemo::process();
        if let Some(kept) = process.get(pattern) {
            let Some(dfa) = kept else {
                memo.put_empty(pattern);
                return Err(no_full_match());
            };
            config.check_built(&dfa)?;
            memo.put_shared(pattern, &dfa);
            return Ok(dfa);
        }
        match Self::build_regex(hir()?, config) {
            Ok(dfa) => {
                let dfa = memo.put(pattern, dfa);
                process.put_shared(pattern, &dfa);
                Ok(dfa)
            }
            Err(e @ GrammarError::EmptyLanguage { .. }) => {
                memo.put_empty(pattern);
                process.put_empty(pattern);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// [`Dfa::from_regex`], determinized by the lazy DFA whatever the pattern (to check the
    /// subset construction against it).
    #[cfg(test)]
    pub(crate) fn from_regex_by_lazy_dfa(pattern: &str, config: &DfaConfig) -> Result<Dfa> {
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().which_captures(WhichCaptures::None))
            .build_from_hir(&parse(pattern)?)
            .map_err(|e| build_error(&e.to_string(), config))?;
        Self::from_lazy_dfa(&nfa, config)
    }

    /// [`Dfa::from_regex`] without the memo, from the pattern's syntax tree.
    fn build_regex(hir: Hir, config: &DfaConfig) -> Result<Dfa> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(Some(config.build_size_limit)),
            )
            .build_from_hir(&hir)
            .map_err(|e| build_error(&e.to_string(), config))?;
        Self::from_nfa(&nfa, config)
    }

    /// Determinizes an NFA (anchored, full-match semantics), prunes and minimizes the result.
    ///
    /// The state limit ([`DfaConfig::raw_state_limit`]) and the deadline are checked as
    /// states appear. An NFA without look-around assertions goes through [`subset`]; one with
    /// them through `regex-automata`'s lazy DFA ([`Dfa::from_lazy_dfa`]), which tracks what
    /// an assertion needs to see.
    pub(crate) fn from_nfa(nfa: &thompson::NFA, config: &DfaConfig) -> Result<Dfa> {
        config.check_nfa_states(nfa.states().len() as u64, false)?;
        if !nfa.look_set_any().is_empty() {
            return Self::from_lazy_dfa(nfa, config);
        }
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            classes[b as usize] = nfa.byte_classes().get(b);
        }
        let reps = subset::representatives(&classes);
        subset::determinize(
            &subset::ThompsonView::new(nfa),
            nfa.start_anchored().as_u32(),
            classes,
            &reps,
            config,
        )
    }
}

/// The error for a pattern that no string fully matches.
pub(crate) fn no_full_match() -> GrammarError {
    GrammarError::EmptyLanguage { detail: "no string fully matches the pattern".into() }
}

pub(super) fn build_error(msg: &str, config: &DfaConfig) -> GrammarError {
    if msg.contains("word boundar") {
        GrammarError::UnsupportedRegex {
            construct: "Unicode word boundary".into(),
            reason: "a DFA cannot express \\b in Unicode mode; use (?-u:\\b) for ASCII word boundaries".into(),
        }
    } else if msg.contains("exceeded") || msg.contains("limit") || msg.contains("too many") {
        GrammarError::TooLarge {
            what: "regex DFA",
            limit: config.max_states,
            detail: format!("{msg} (raise max_states, or simplify the pattern: bounded repeats of wide classes grow the DFA)"),
        }
    } else {
        GrammarError::UnsupportedRegex { construct: "pattern".into(), reason: msg.to_string() }
    }
}
