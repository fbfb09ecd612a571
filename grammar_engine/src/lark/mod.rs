//! Lark grammars (the grammar language of the Python `lark` parser, in the subset llguidance
//! documents) compiled to rules ([`crate::pushdown::RtnBuilder`]).
//!
//! # What is read
//!
//! * Rules `name: expansion | expansion` (lowercase names) and terminals `NAME: ...`
//!   (UPPERCASE). A statement ends at a newline unless the next line that is not blank starts
//!   with `|`, another alternative. Comments run from `//` or `#` to the end of the line. Rule
//!   modifiers `?rule` and `!rule`, rule priorities `rule.2`, and aliases `-> name` only shape
//!   Lark's trees: they are read and change nothing here.
//! * Items: strings `"..."` (with the `i` flag for any case), regexes `/.../flags` (Python
//!   syntax, translated; flags `i`, `s`, `m`, `x`, `u`), ranges `"a".."z"`, names, grouping
//!   `( )`, `[optional]`, and one operator per item: `?`, `*`, `+`, `~ n`, `~ m..n`, and
//!   llguidance's `{n}`, `{m,}`, `{,n}`, `{m,n}`.
//! * Terminals may use literals and other terminals, never rules, and never themselves: a
//!   terminal is a regular language.
//! * `%ignore TERM` (or any terminal expression), `%import common.NAME [-> ALIAS]` and
//!   `%import common (A, B)` for the terminals of Lark's `common` library (see `common`).
//! * llguidance's `%json { schema }` in a rule: the JSON texts valid under the schema, written
//!   compact (as `compile_json_schema` writes them by default); its `<token>` and `<[id]>`
//!   token references in rules, as in GBNF (a special token becomes its marker byte); and
//!   `%llguidance {}` with no options.
//! * The start rule is `start`, as both Lark and llguidance require; a grammar without one is
//!   an error.
//!
//! Refused with an error that names the construct: terminal priorities (`TERM.2`), templates,
//! `%declare`, `%override`, `%extend`, imports other than `common`, llguidance's rule options
//! (`name[lazy]`), `%regex`, `@grammar` references and `%llguidance` options; and in regexes,
//! what a DFA over one terminal cannot express (look-around, backreferences, anchors and word
//! boundaries).
//!
//! # Semantics
//!
//! The language is the one of Lark's Earley parser with `lexer="dynamic"` read at the level of
//! characters: a terminal may match at any position where the rules expect it, whatever other
//! terminals could match there (there is no lexer choosing tokens by longest match or by
//! priority), and each terminal stands for every string its definition matches whole. Lark's
//! dynamic lexer differs in one respect: at each position it tries each terminal's regex once,
//! so a terminal takes the one match Python's `re` finds (the longest for greedy repetitions,
//! the shortest for lazy ones) and a split the match does not give is not tried. `start: WORD
//! "s"` with `WORD: /[a-z]+/` accepts `cats` here and not in Lark. Grammars whose terminals are
//! delimited (by punctuation, by whitespace, or by what may follow them) mean the same in
//! both. llguidance instead lexes greedily, like a conventional lexer, and may refuse texts
//! both readings accept. Lazy quantifiers in regexes are read as their greedy forms (the strings
//! a regex matches whole do not depend on it). Lark refuses terminals that match the empty
//! string under the dynamic lexer; here they are allowed.
//!
//! `%ignore`: ignored text (any repetition of the ignored terminals) may appear before each
//! terminal a rule reads (a named terminal, a literal, a regex, a range, a `%json` value or a
//! token reference) and at the very end of the text, as Lark's dynamic lexer skips it wherever
//! it is about to match a terminal and after the start rule has completed. It never appears
//! inside a terminal: terminals are matched whole.
//!
//! Direct left recursion (`sum: sum "+" product | product`, an alternative that starts with the
//! rule itself) is read as repetition (`sum: product ("+" product)*`), the same language.
//! Left recursion through other rules is refused by the rule builder, as is a start rule with
//! no finite string; those errors name the rule and point at its definition.
//!
//! Errors are [`GrammarError::InvalidGrammar`] with the line and column (1-based) and the rule
//! or terminal they concern.

mod common;
mod lower;
mod regex;
mod syntax;

use std::collections::HashMap;

use crate::automata::DfaConfig;
use crate::error::{GrammarError, Result};
use crate::pushdown::RtnBuilder;
use crate::structure::SpecialTokens;
use crate::util::RuleId;
use crate::vocab::Vocabulary;

pub(crate) const SYNTAX: &str = "Lark";

/// A Lark grammar as rules, their start and the special tokens it names.
pub struct Parsed {
    pub rules: RtnBuilder,
    pub start: RuleId,
    pub specials: SpecialTokens,
    /// Each rule's definition (line, column).
    rule_at: HashMap<String, (usize, usize)>,
}

/// Parses `text` into rules over `vocab` (for its token references); `config` bounds the
/// automata built on the way (terminals, `%ignore`, `%json`).
pub fn parse(text: &str, vocab: &Vocabulary, config: &DfaConfig) -> Result<Parsed> {
    let ast = syntax::parse(text).map_err(|e| {
        let (line, col) = location(text, e.at);
        GrammarError::invalid_grammar(SYNTAX, line, col, e.rule.as_deref(), e.reason)
    })?;
    let lowered = lower::lower(&ast, text, vocab, config, SpecialTokens::default())?;
    let rule_at = lowered.rule_at.into_iter().map(|(name, at)| (name, location(text, at))).collect();
    Ok(Parsed { rules: lowered.rules, start: lowered.start, specials: lowered.specials, rule_at })
}

/// Parses `text` into new rules of `rules` (special tokens it names get markers in
/// `specials`); returns its start rule. For a grammar embedded in a structure.
pub fn parse_into(text: &str, vocab: &Vocabulary, config: &DfaConfig, rules: &mut RtnBuilder, specials: &mut SpecialTokens) -> Result<RuleId> {
    let ast = syntax::parse(text).map_err(|e| {
        let (line, col) = location(text, e.at);
        GrammarError::invalid_grammar(SYNTAX, line, col, e.rule.as_deref(), e.reason)
    })?;
    let lowered = lower::lower(&ast, text, vocab, config, specials.clone())?;
    *specials = lowered.specials;
    Ok(rules.absorb(lowered.rules, lowered.start))
}

impl Parsed {
    /// `error`, located at the definition of the rule it names when it has no location of its
    /// own (errors of the rule builder: left recursion, undefined or unproductive rules).
    pub fn locate(&self, error: GrammarError) -> GrammarError {
        match error {
            GrammarError::InvalidGrammar { syntax, line: 0, column: 0, rule: Some(rule), reason } => {
                let (line, column) = self.rule_at.get(&rule).copied().unwrap_or((0, 0));
                GrammarError::InvalidGrammar { syntax, line, column, rule: Some(rule), reason }
            }
            other => other,
        }
    }
}

/// Line and column (1-based, the column in characters) of byte offset `at` in `text`.
pub(super) fn location(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}
