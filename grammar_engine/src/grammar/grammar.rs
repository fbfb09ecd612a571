//! A compiled grammar and its step API: the decoding loop's view of a regex, a JSON Schema, a
//! structure or a grammar in a grammar language.
//!
//! A grammar state is a [`StateId`] (a `u32` underneath), so the loop can keep one main state
//! and any number of throw-away draft states without cloning anything. A state id from outside
//! is checked on every call ([`GrammarError::InvalidState`]).
//!
//! Two kinds underneath, one face. A *regular* grammar is one DFA: a state is a DFA state, and
//! rows of its token index are computed on first visit and kept within the index's byte budget
//! (so the first mask comes fast; see [`rows`](super::rows)), or all at once in parallel with
//! [`Grammar::build_all`] when they fit. A *pushdown* grammar
//! (recursive rules, see [`crate::pushdown`]) has its states met as the text is read, each a
//! reading interned by the [`Pda`]; every method below hands such a grammar to it.

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::grammar::index::{compute_row, Row};
use crate::grammar::rows::RowCache;
use crate::json_schema::{self, JsonSchemaOptions};
use crate::pushdown::{Compiled, Pda, RtnBuilder};
use crate::structure::{self, SpecialTokens};
use crate::util::{StateId, TokenId};
use crate::vocab::Vocabulary;

/// Why a token id past the end of the vocabulary is refused.
pub(crate) const OUTSIDE_VOCABULARY: &str = "the id is outside the vocabulary";

/// A state's allowed-token bitmask, `ceil(V / 32)` words (dereferences to them).
#[derive(Debug, Clone)]
pub enum Bitmask<'a> {
    /// A pushdown grammar's mask, stored for the grammar's life.
    Stored(&'a [u32]),
    /// A regular grammar's row, shared with its index: valid after the index drops its copy.
    Row(Arc<Row>),
    /// A mask made for one call: a budget's restriction.
    Owned(Box<[u32]>),
}

impl Deref for Bitmask<'_> {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        match self {
            Bitmask::Stored(m) => m,
            Bitmask::Row(r) => &r.mask,
            Bitmask::Owned(m) => m,
        }
    }
}

impl Bitmask<'_> {
    /// True for a mask made for one call (a budget's restriction of the plain mask).
    pub fn is_restricted(&self) -> bool {
        matches!(self, Bitmask::Owned(_))
    }
}

/// The default [`GrammarConfig::max_index_bytes`]: room beside a model on a laptop.
pub const DEFAULT_MAX_INDEX_BYTES: usize = 256 << 20;

/// Limits for compiling and indexing a grammar.
#[derive(Debug, Clone)]
pub struct GrammarConfig {
    pub dfa: DfaConfig,
    /// Most heap bytes the token index may hold (masks plus transitions). A regular grammar
    /// drops rows it has not used lately to stay within it and computes them again when
    /// needed, so only a single row larger than this is an error.
    pub max_index_bytes: usize,
}

impl Default for GrammarConfig {
    fn default() -> Self {
        GrammarConfig { dfa: DfaConfig::default(), max_index_bytes: DEFAULT_MAX_INDEX_BYTES }
    }
}

/// A regex, JSON Schema or structure compiled against one vocabulary.
#[derive(Debug)]
pub struct Grammar {
    source: String,
    dfa: Dfa,
    vocab: Arc<Vocabulary>,
    /// The special tokens a structure allows, each read by the DFA as its marker byte.
    specials: SpecialTokens,
    /// With special tokens: the DFA with the marker transitions cut (same state ids), through
    /// which ordinary tokens walk, so no ordinary token can read a marker.
    ordinary: Option<Dfa>,
    /// `Some` when some byte the DFA needs is not a token of its own: then a state is usable
    /// only if a token path leads from it to acceptance, which this records per state.
    token_live: Option<Vec<bool>>,
    rows: RowCache,
    min_tokens: OnceLock<Vec<u32>>,
    /// For a JSON Schema compiled under a sound restriction (it did not fit exactly): which.
    restriction: Option<String>,
    /// A pushdown grammar: when set, it answers every step (`dfa` is then a placeholder).
    pda: Option<Pda>,
    /// For a JSON Schema compiled as a pushdown grammar: the schema, to compile as one
    /// automaton where a search needs one (see [`Grammar::regular_dfa`]).
    schema_form: Option<Box<SchemaForm>>,
}

/// A JSON Schema's compilation without rules, made on first use.
#[derive(Debug)]
struct SchemaForm {
    schema: serde_json::Value,
    options: JsonSchemaOptions,
    config: DfaConfig,
    dfa: OnceLock<std::result::Result<Dfa, String>>,
}

impl Grammar {
    /// [`Grammar::min_tokens_to_accept`] of a state from which no token sequence reaches
    /// acceptance.
    pub const UNREACHABLE: u32 = u32::MAX;

    /// Compiles a regex with full-match semantics.
    pub fn from_regex(vocab: Arc<Vocabulary>, pattern: &str, config: &GrammarConfig) -> Result<Grammar> {
        let dfa = Dfa::from_regex(pattern, &config.dfa)?;
        Self::new(vocab, dfa, pattern.to_string(), SpecialTokens::default(), config)
    }

    /// Compiles a JSON Schema (see [`crate::compile_json_schema`]).
    pub fn from_json_schema(
        vocab: Arc<Vocabulary>,
        schema: &serde_json::Value,
        options: &JsonSchemaOptions,
        config: &GrammarConfig,
    ) -> Result<Grammar> {
        let (compiled, restriction) = json_schema::compile_language(schema, options, &config.dfa)?;
        let mut g = match compiled {
            Compiled::Regular(dfa) => Self::new(vocab, dfa, schema.to_string(), SpecialTokens::default(), config)?,
            Compiled::Pushdown(rtn) => {
                let mut g = Self::pushdown(vocab, rtn, schema.to_string(), SpecialTokens::default(), config)?;
                // Any sound restriction will do for the regular form: it only needs to be a subset.
                let options = JsonSchemaOptions { allow_restriction: true, ..options.clone() };
                g.schema_form = Some(Box::new(SchemaForm { schema: schema.clone(), options, config: config.dfa.clone(), dfa: OnceLock::new() }));
                g
            }
        };
        g.restriction = restriction;
        Ok(g)
    }

    /// Compiles the rules of `rules` reachable from `start` (a grammar language's, see
    /// [`crate::pushdown`]): one DFA when no recursion is left after inlining, else a pushdown
    /// grammar. `syntax` names the grammar language in errors.
    pub fn from_rules(
        vocab: Arc<Vocabulary>,
        rules: &RtnBuilder,
        start: crate::util::RuleId,
        syntax: &'static str,
        source: String,
        specials: SpecialTokens,
        config: &GrammarConfig,
    ) -> Result<Grammar> {
        match rules.build(start, syntax, &config.dfa)? {
            Compiled::Regular(dfa) => Self::new(vocab, dfa, source, specials, config),
            Compiled::Pushdown(rtn) => Self::pushdown(vocab, rtn, source, specials, config),
        }
    }

    /// Compiles a GBNF grammar (llama.cpp's grammar language, see [`crate::gbnf`]).
    pub fn from_gbnf(vocab: Arc<Vocabulary>, text: &str, config: &GrammarConfig) -> Result<Grammar> {
        let parsed = crate::gbnf::parse(text, &vocab)?;
        Self::from_rules(vocab, &parsed.rules, parsed.start, "GBNF", text.to_string(), parsed.specials, config)
    }

    /// Compiles a Lark grammar (the `lark` parser's grammar language in the subset llguidance
    /// documents, read as Lark's Earley parser with the dynamic lexer reads it; see
    /// [`crate::lark`]).
    pub fn from_lark(vocab: Arc<Vocabulary>, text: &str, config: &GrammarConfig) -> Result<Grammar> {
        let parsed = crate::lark::parse(text, &vocab, &config.dfa)?;
        Self::from_rules(vocab, &parsed.rules, parsed.start, crate::lark::SYNTAX, text.to_string(), parsed.specials.clone(), config)
            .map_err(|e| parsed.locate(e))
    }

    fn pushdown(vocab: Arc<Vocabulary>, mut rtn: crate::pushdown::Rtn, source: String, specials: SpecialTokens, config: &GrammarConfig) -> Result<Grammar> {
        // Text needing a byte no token contains can never be written (a structure's markers
        // are written by their special tokens).
        let mut producible = *vocab.producible_bytes();
        for sp in specials.iter() {
            producible[sp.byte as usize] = true;
        }
        rtn.keep_bytes(&producible, "grammar")?;
        // Every byte the rules read must be a token of its own (byte-level and byte-fallback
        // vocabularies): then readings are live exactly when their DFA states are, and byte
        // distances bound token counts (see `crate::pushdown`).
        for rule in &rtn.rules {
            let used = rule.dfa.used_bytes();
            let missing = (0..=255u8).find(|&b| used[b as usize] && !vocab.covers_byte(b) && specials.token_of(b).is_none());
            if let Some(b) = missing {
                return Err(GrammarError::NotCompletable {
                    detail: format!("rule '{}' reads byte 0x{b:02X}, which is no token of its own in this vocabulary", rule.name),
                });
            }
        }
        let pda = Pda::new(rtn, vocab.clone(), specials.clone())?;
        Ok(Grammar {
            source,
            dfa: crate::automata::calls::bytes_dfa(b""),
            vocab,
            specials,
            ordinary: None,
            token_live: None,
            rows: RowCache::new(0, config.max_index_bytes),
            min_tokens: OnceLock::new(),
            restriction: None,
            pda: Some(pda),
            schema_form: None,
        })
    }

    /// The grammar as one automaton, for a search that walks a single DFA (repair): the
    /// grammar's own when it is one. A JSON Schema compiled as a pushdown grammar is compiled
    /// again without rules (once, on first use; a failure is kept too) and cut to the bytes the
    /// vocabulary can write: recursion unrolled and arrays of distinct elements holding at most
    /// one, sound restrictions, so the texts of that automaton are texts of the schema, though
    /// not all of them (a caller checks its answer against this grammar and does not call it
    /// the cheapest). Other pushdown grammars are [`GrammarError::NotRegular`].
    pub fn regular_dfa(&self) -> Result<&Dfa> {
        if self.pda.is_none() {
            return Ok(&self.dfa);
        }
        let Some(form) = &self.schema_form else {
            return Err(GrammarError::NotRegular { detail: "this grammar has recursive rules, and the search walks a single DFA".into() });
        };
        let built = form.dfa.get_or_init(|| {
            let dfa = json_schema::compile(&form.schema, &form.options, &form.config).map_err(|e| e.to_string())?;
            dfa.restrict_bytes(self.vocab.producible_bytes()).ok_or_else(|| "no text of it can be written with this vocabulary".to_string())
        });
        built.as_ref().map_err(|e| GrammarError::NotRegular { detail: format!("the schema compiled as one automaton, which the search walks, failed: {e}") })
    }

    /// The pushdown grammar underneath, when this is one.
    pub fn pda(&self) -> Option<&Pda> {
        self.pda.as_ref()
    }

    /// True for a pushdown grammar (recursive rules), false for one DFA.
    pub fn is_pushdown(&self) -> bool {
        self.pda.is_some()
    }

    /// `Some` (what was left out) when a JSON Schema was compiled under a sound restriction
    /// because its exact automaton did not fit: see `RESTRICTIONS` in the JSON Schema compiler's `ladder.rs`.
    pub fn restriction(&self) -> Option<&str> {
        self.restriction.as_deref()
    }

    /// Compiles a structure spec (see [`crate::compile_structure`]): one DFA over its segments, with the
    /// special tokens it names allowed exactly where it names them.
    pub fn from_structure(
        vocab: Arc<Vocabulary>,
        spec: &serde_json::Value,
        options: &JsonSchemaOptions,
        config: &GrammarConfig,
    ) -> Result<Grammar> {
        let compiled = structure::compile(spec, &vocab, options, &config.dfa)?;
        Self::from_rules(vocab, &compiled.rules, compiled.start, "structure", spec.to_string(), compiled.specials, config)
    }

    fn new(vocab: Arc<Vocabulary>, dfa: Dfa, source: String, specials: SpecialTokens, config: &GrammarConfig) -> Result<Grammar> {
        // Strings needing a byte that no token contains can never be written: drop them from
        // the DFA first (a cheap byte-level pass), so only bytes some token holds remain. A
        // special token's marker byte is written by that token.
        let mut producible = *vocab.producible_bytes();
        for t in specials.iter() {
            producible[t.byte as usize] = true;
        }
        let producible = &producible;
        let used = dfa.used_bytes();
        let missing: Vec<u8> = (0..=255u8).filter(|&b| !producible[b as usize] && used[b as usize]).collect();
        let dfa = if !missing.is_empty() {
            dfa.restrict_bytes(producible).ok_or_else(|| GrammarError::NotCompletable {
                detail: format!(
                    "every matching string needs a byte that no token contains (for example {})",
                    missing.iter().take(4).map(|b| format!("0x{b:02X}")).collect::<Vec<_>>().join(", ")
                ),
            })?
        } else {
            dfa
        };
        let n = dfa.num_states();
        let rows = RowCache::new(n, config.max_index_bytes);
        let ordinary = if specials.is_empty() { None } else { Some(dfa.with_bytes_cut(&specials.bytes())) };
        let mut g = Grammar {
            source,
            dfa,
            vocab,
            specials,
            ordinary,
            token_live: None,
            rows,
            min_tokens: OnceLock::new(),
            restriction: None,
            pda: None,
            schema_form: None,
        };
        // Rare: a byte that occurs only inside longer tokens. Then byte-level liveness is not
        // enough and token-level liveness is computed over the whole index.
        if !g.vocab_covers_dfa() {
            g.token_live = Some(g.token_liveness());
        }
        let start = g.initial_state();
        if !g.is_live(start) {
            return Err(GrammarError::NotCompletable {
                detail: "every matching string needs a byte that no token writes on its own where the grammar needs it".into(),
            });
        }
        Ok(g)
    }

    /// True when every byte with a live transition is some token's whole content (a marker
    /// byte is its special token's).
    fn vocab_covers_dfa(&self) -> bool {
        let used = self.dfa.used_bytes();
        (0..=255u8).all(|b| !used[b as usize] || self.vocab.covers_byte(b) || self.specials.token_of(b).is_some())
    }

    /// The DFA ordinary tokens walk: the marker transitions cut when there are special tokens.
    fn ordinary_dfa(&self) -> &Dfa {
        self.ordinary.as_ref().unwrap_or(&self.dfa)
    }

    /// The row of `state`: ordinary tokens by a walk over the trie, then the structure's
    /// special tokens, each one DFA step on its marker byte.
    fn compute(&self, state: StateId, live: impl Fn(StateId) -> bool) -> Row {
        let mut row = compute_row(self.ordinary_dfa(), &self.vocab, state, &live);
        if self.specials.is_empty() {
            return row;
        }
        let mut special = Vec::new();
        for t in self.specials.iter() {
            let next = self.dfa.next(state, t.byte);
            if !next.is_dead() && live(next) {
                let token = t.token.as_u32();
                row.mask[(token >> 5) as usize] |= 1 << (token & 31);
                row.max_next_distance = row.max_next_distance.max(self.dfa.byte_distance(next));
                special.push((t.token, next));
            }
        }
        row.special = special.into_boxed_slice();
        row
    }

    /// Per state, the distinct states one token leads to (those `live` keeps), in parallel over
    /// states. A row not in the index is computed and dropped, not kept: the token graph is a
    /// few states per state, the index a mask per state. Each list is boxed to its length: it
    /// is collected with one entry per allowed token (thousands in a string) before dedup.
    fn token_edges(&self, live: impl Fn(StateId) -> bool + Sync) -> Vec<Box<[StateId]>> {
        (0..self.dfa.num_states())
            .into_par_iter()
            .map(|s| {
                let s = StateId::from_index(s);
                let mut next: Vec<StateId> = match self.rows.peek(s) {
                    Some(row) => row.next_states().collect(),
                    None => {
                        crate::util::background::pause_point();
                        self.compute(s, &live).next_states().collect()
                    }
                };
                next.sort_unstable();
                next.dedup();
                next.into_boxed_slice()
            })
            .collect()
    }

    /// States from which some token sequence reaches acceptance (backward search over the
    /// token transitions of every byte-live state).
    fn token_liveness(&self) -> Vec<bool> {
        let n = self.dfa.num_states();
        let edges = self.token_edges(|_| true);
        let mut live: Vec<bool> = (0..n).map(|s| self.dfa.is_accepting(StateId::from_index(s))).collect();
        backward_closure(&edges, &mut live, |_, _| {});
        live
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    pub fn dfa(&self) -> &Dfa {
        &self.dfa
    }

    /// The special tokens this grammar allows (a structure's), with their marker bytes.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.specials
    }

    /// The bytes a token sequence writes in this grammar's spelling: a special token of the
    /// structure as its marker byte, any other token as its text; EOS writes nothing. For
    /// checking a finished output with [`crate::repair()`] or the DFA.
    pub fn spell(&self, tokens: &[TokenId]) -> Vec<u8> {
        let mut out = Vec::new();
        for &t in tokens {
            if let Some(b) = self.specials.byte_of(t) {
                out.push(b);
            } else if !self.vocab.is_eos(t) {
                out.extend_from_slice(self.vocab.token_bytes(t).unwrap_or_default());
            }
        }
        out
    }

    pub fn initial_state(&self) -> StateId {
        match &self.pda {
            Some(p) => p.initial_state(),
            None => self.dfa.start(),
        }
    }

    /// The number of states: a regular grammar's DFA states, or the readings a pushdown
    /// grammar has met so far (it grows as text is read).
    pub fn num_states(&self) -> usize {
        match &self.pda {
            Some(p) => p.num_states(),
            None => self.dfa.num_states(),
        }
    }

    /// An id for `state`'s mask: states with the same id have the same mask. A regular
    /// grammar's is the state itself; a pushdown grammar's readings share masks.
    pub fn mask_id(&self, state: StateId) -> Result<u32> {
        match &self.pda {
            Some(p) => p.mask_id(state),
            None => {
                self.check(state)?;
                Ok(state.as_u32())
            }
        }
    }

    /// Whether `text` fully matches; when not, the offset of the first byte that leaves the
    /// grammar (or the text's length when it stops short of a full match).
    pub fn check_text(&self, text: &[u8]) -> std::result::Result<(), usize> {
        match &self.pda {
            Some(p) => p.check_text(text),
            None => {
                let v = crate::repair::validate(&self.dfa, text);
                match v.error_offset {
                    None => Ok(()),
                    Some(at) => Err(at),
                }
            }
        }
    }

    /// The state of this grammar whose id is `id`, as a caller outside Rust gives it (a
    /// Python int may be negative or past `u32`); [`GrammarError::InvalidState`] when there
    /// is none.
    pub fn state(&self, id: i64) -> Result<StateId> {
        if let Some(p) = &self.pda {
            return p.state(id);
        }
        match u32::try_from(id) {
            Ok(s) if (s as usize) < self.num_states() => Ok(StateId::new(s)),
            _ => Err(GrammarError::InvalidState { state: id, num_states: self.num_states() }),
        }
    }

    #[inline]
    fn check(&self, state: StateId) -> Result<()> {
        if state.as_usize() < self.num_states() {
            Ok(())
        } else {
            Err(self.invalid(state))
        }
    }

    fn invalid(&self, state: StateId) -> GrammarError {
        GrammarError::InvalidState { state: i64::from(state.as_u32()), num_states: self.num_states() }
    }

    #[inline]
    fn is_live(&self, state: StateId) -> bool {
        self.token_live.as_ref().is_none_or(|l| l[state.as_usize()])
    }

    /// The row of `state`, computed on first use and kept while the index's budget allows (a
    /// regular grammar's: a pushdown grammar has none, see [`crate::pushdown`]).
    pub fn row(&self, state: StateId) -> Result<Arc<Row>> {
        if self.pda.is_some() {
            return Err(GrammarError::NotRegular { detail: "a pushdown grammar has no per-state rows".into() });
        }
        self.check(state)?;
        if let Some(row) = self.rows.get(state) {
            return Ok(row);
        }
        crate::util::background::pause_point();
        let row = self.compute(state, |s| self.is_live(s));
        self.rows.insert(state, row).map_err(|big| GrammarError::TooLarge {
            what: "token index",
            limit: self.rows.budget(),
            detail: format!("state {} alone needs {} bytes", state.as_u32(), big.bytes),
        })
    }

    /// The row of `state` if the index holds it now (marked used), without computing it.
    pub fn kept_row(&self, state: StateId) -> Option<Arc<Row>> {
        if self.pda.is_some() || state.as_usize() >= self.num_states() {
            return None;
        }
        self.rows.get(state)
    }

    /// The allowed-token bitmask of `state`: `ceil(V / 32)` words, bit `t % 32` of word `t / 32`.
    pub fn token_bitmask(&self, state: StateId) -> Result<Bitmask<'_>> {
        if let Some(p) = &self.pda {
            return p.token_bitmask(state).map(Bitmask::Stored);
        }
        self.row(state).map(Bitmask::Row)
    }

    /// The mask of `state` restricted to tokens after which acceptance is still reachable within
    /// `budget` more tokens (budget-aware masking: with `max_tokens` set, the output can then
    /// always be completed). The plain mask (not [`Bitmask::Owned`]) whenever the budget
    /// restricts nothing, which a per-row bound decides without any search in the common case.
    pub fn token_bitmask_within(&self, state: StateId, budget: u32) -> Result<Bitmask<'_>> {
        if let Some(p) = &self.pda {
            return Ok(match p.token_bitmask_within(state, budget)? {
                std::borrow::Cow::Borrowed(m) => Bitmask::Stored(m),
                std::borrow::Cow::Owned(m) => Bitmask::Owned(m.into_boxed_slice()),
            });
        }
        let row = self.row(state)?;
        if self.token_live.is_none() && row.max_next_distance <= budget {
            return Ok(Bitmask::Row(row));
        }
        self.min_tokens_to_accept(state)?;
        let mins = self.min_tokens.get().ok_or_else(|| self.invalid(state))?;
        if row.next_states().all(|n| mins[n.as_usize()] <= budget) {
            return Ok(Bitmask::Row(row));
        }
        let mut mask = vec![0u32; row.mask.len()];
        if self.dfa.is_accepting(state) {
            for &e in self.vocab.eos_ids() {
                let e = e.as_u32();
                mask[(e >> 5) as usize] |= 1 << (e & 31);
            }
        }
        for (t, n) in row.transitions(&self.vocab) {
            if mins[n.as_usize()] <= budget {
                let t = t.as_u32();
                mask[(t >> 5) as usize] |= 1 << (t & 31);
            }
        }
        Ok(Bitmask::Owned(mask.into_boxed_slice()))
    }

    /// The allowed token ids of `state`, ascending (EOS included in accepting states).
    pub fn allowed_token_ids(&self, state: StateId) -> Result<Vec<TokenId>> {
        let mask = self.token_bitmask(state)?;
        let mut out = Vec::new();
        for (w, &word) in mask.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                out.push(TokenId::new((w as u32) << 5 | bits.trailing_zeros()));
                bits &= bits - 1;
            }
        }
        Ok(out)
    }

    /// The state after `token`, or an error when the token is not allowed in `state`. EOS in
    /// an accepting state leaves the state unchanged.
    pub fn advance(&self, state: StateId, token: TokenId) -> Result<StateId> {
        if let Some(p) = &self.pda {
            return p.advance(state, token);
        }
        self.check(state)?;
        let refuse = |reason: &str| Err(GrammarError::TokenNotAllowed { state, token: i64::from(token.as_u32()), reason: reason.to_string() });
        if self.vocab.is_eos(token) {
            return if self.dfa.is_accepting(state) { Ok(state) } else { refuse("EOS is only allowed once the output fully matches") };
        }
        let Some(bytes) = self.vocab.token_bytes(token) else {
            return refuse(OUTSIDE_VOCABULARY);
        };
        if let Some(byte) = self.specials.byte_of(token) {
            let next = self.dfa.next(state, byte);
            if next.is_dead() || !self.is_live(next) {
                return refuse("the structure does not allow this special token here");
            }
            return Ok(next);
        }
        if self.vocab.is_special(token) {
            return refuse("special and control tokens are only allowed where a structure names them");
        }
        let next = self.ordinary_dfa().walk(state, bytes);
        if next.is_dead() || !self.is_live(next) {
            return refuse("its bytes leave the grammar");
        }
        Ok(next)
    }

    pub fn is_accepting(&self, state: StateId) -> Result<bool> {
        if let Some(p) = &self.pda {
            return p.is_accepting(state);
        }
        self.check(state)?;
        Ok(self.dfa.is_accepting(state))
    }

    /// Bytes every valid continuation of `state` starts with (for jump-forward).
    pub fn forced_bytes(&self, state: StateId) -> Result<Vec<u8>> {
        if let Some(p) = &self.pda {
            return p.forced_bytes(state);
        }
        self.check(state)?;
        Ok(self.dfa.forced_bytes(state))
    }

    /// The (token, next state) pairs of the ordinary tokens allowed in `state`.
    pub fn transitions(&self, state: StateId) -> Result<Vec<(TokenId, StateId)>> {
        if self.pda.is_some() {
            let mut out = Vec::new();
            for t in self.allowed_token_ids(state)? {
                if !self.vocab.is_eos(t) {
                    out.push((t, self.advance(state, t)?));
                }
            }
            return Ok(out);
        }
        Ok(self.row(state)?.transitions(&self.vocab).collect())
    }

    /// Computes every row, in parallel over states, and keeps them all: a
    /// [`GrammarError::TooLarge`] when they do not fit in the index's budget (rows are then
    /// built as states are visited, as without this call).
    pub fn build_all(&self) -> Result<()> {
        if self.pda.is_some() {
            // Its states are met as text is read: there is no "all" to build ahead.
            return Ok(());
        }
        let dropped = self.rows.dropped();
        let too_large = || GrammarError::TooLarge {
            what: "token index",
            limit: self.rows.budget(),
            detail: format!("the rows of all {} states do not fit at once", self.num_states()),
        };
        (0..self.num_states()).into_par_iter().try_for_each(|s| {
            self.row(StateId::from_index(s))?;
            if self.rows.dropped() != dropped {
                return Err(too_large());
            }
            Ok(())
        })
    }

    /// Number of rows the index holds now.
    pub fn rows_built(&self) -> usize {
        if let Some(p) = &self.pda {
            return p.rows_built();
        }
        self.rows.len()
    }

    /// Rows the index has dropped so far to stay within its budget (0 for a pushdown grammar).
    pub fn rows_dropped(&self) -> usize {
        self.rows.dropped()
    }

    /// The fewest tokens from `state` to acceptance (0 when accepting; [`Grammar::UNREACHABLE`] when
    /// no token sequence gets there). The first call reads every state's tokens once, without
    /// keeping their rows in the index.
    pub fn min_tokens_to_accept(&self, state: StateId) -> Result<u32> {
        if let Some(p) = &self.pda {
            // The bytes to a full match: with every byte a token, the fewest tokens are at most
            // this many (see `crate::pushdown`).
            let d = p.distance(state)?;
            return Ok(if d >= crate::pushdown::FAR { Self::UNREACHABLE } else { d });
        }
        self.check(state)?;
        if let Some(m) = self.min_tokens.get() {
            return Ok(m[state.as_usize()]);
        }
        let n = self.num_states();
        let edges = self.token_edges(|s| self.is_live(s));
        let mut reached: Vec<bool> = (0..n).map(|s| self.dfa.is_accepting(StateId::from_index(s))).collect();
        let mut dist = vec![Self::UNREACHABLE; n];
        for (s, &acc) in reached.iter().enumerate() {
            if acc {
                dist[s] = 0;
            }
        }
        backward_closure(&edges, &mut reached, |from, to| dist[from] = dist[to] + 1);
        let _ = self.min_tokens.set(dist);
        Ok(self.min_tokens.get().map_or(Self::UNREACHABLE, |m| m[state.as_usize()]))
    }

    /// Heap bytes held: the DFA, the rows built so far and the caches.
    pub fn memory_bytes(&self) -> usize {
        if let Some(p) = &self.pda {
            return p.memory_bytes();
        }
        self.dfa.memory_bytes()
            + self.rows.bytes()
            + self.rows.table_bytes()
            + self.min_tokens.get().map_or(0, |m| m.len() * 4)
            + self.token_live.as_ref().map_or(0, |l| l.len())
    }
}

/// Breadth-first search backwards along `edges` (state → successor states) from the states
/// already marked in `reached`. `on_reach(from, to)` is called when `from` is first reached
/// through its successor `to`, in order of increasing distance.
fn backward_closure(edges: &[Box<[StateId]>], reached: &mut [bool], mut on_reach: impl FnMut(usize, usize)) {
    let n = edges.len();
    let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (s, succ) in edges.iter().enumerate() {
        for &t in succ {
            rev[t.as_usize()].push(s as u32);
        }
    }
    let mut queue: VecDeque<usize> = (0..n).filter(|&s| reached[s]).collect();
    while let Some(t) = queue.pop_front() {
        for &s in &rev[t] {
            let s = s as usize;
            if !reached[s] {
                reached[s] = true;
                on_reach(s, t);
                queue.push_back(s);
            }
        }
    }
}
