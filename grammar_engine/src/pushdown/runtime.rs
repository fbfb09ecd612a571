//! The step API of a pushdown grammar: readings interned as state ids, their masks, and the
//! tokens that move between them.
//!
//! A grammar state of a pushdown grammar is a *reading* (a set of heads, see `super::step`)
//! interned in a table: the same reading is always the same id, so the decoding loop keeps and
//! copies plain integers, as with a DFA. Ids are handed out as readings are first met, from
//! the initial one (id 0); each reading's mask is computed on first request from the local
//! rows of its heads' rule states (shared by every reading at that state, whatever its stack)
//! plus the tokens that leave a rule, and masks are interned too, so readings that allow the
//! same tokens share one mask ([`Pda::mask_id`]). Tables are behind one lock; masks live in a
//! [`Paged`] store whose entries never move, so a mask can be lent out without a lock.

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::bounds::{heads_distance, stack_distance, Bounds, FAR};
use super::distinct::{self, Memo, Memory};
use super::masks::{clear_subtrees, frame_row, local_row, read, within_walk, FrameRow, LocalRow};
use super::paged::Paged;
use super::rules::Rtn;
use super::step::{can_end, step_byte, Arena, FirstBytes, Frame, Head, Overlay, StackId, Stacks};
use crate::automata::Dfa;
use crate::error::{GrammarError, Result};
use crate::grammar::index::mask_words;
use crate::structure::SpecialTokens;
use crate::util::{RuleId, StateId, TokenId};
use crate::vocab::Vocabulary;

/// Most heads one reading may have (an ambiguous grammar whose readings multiply is refused
/// with a typed error rather than slowing every step).
const MAX_HEADS: usize = 1024;

/// One interned reading.
#[derive(Debug)]
struct Reading {
    heads: Box<[Head]>,
    accepting: bool,
    /// Bytes to the end of the text from the nearest head.
    distance: u32,
    /// Filled on first request: the mask's id and the largest distance after an allowed token.
    mask: OnceLock<(u32, u32)>,
}

#[derive(Debug, Default)]
struct Tables {
    stacks: Stacks,
    ids: HashMap<Box<[Head]>, u32>,
    count: usize,
    masks: HashMap<u64, Vec<u32>>,
    mask_count: usize,
    next: HashMap<(u32, u32), u32>,
}

/// The bytes from a frame's return state to the end of its rule.
fn bounds_at(bounds: &[Vec<u32>], f: &Frame) -> u32 {
    bounds[f.rule.as_usize()][f.ret.as_usize()]
}

/// A compiled pushdown grammar over one vocabulary.
#[derive(Debug)]
pub struct Pda {
    rtn: Rtn,
    first: FirstBytes,
    vocab: Arc<Vocabulary>,
    specials: SpecialTokens,
    /// Per rule, the DFA ordinary tokens read (special-token markers cut) when there are
    /// special tokens.
    ordinary: Option<Vec<Dfa>>,
    bounds: Bounds,
    local: Vec<Box<[OnceLock<LocalRow>]>>,
    /// Frame rows by rule, state and the frames known under it (see `super::masks`), flattened
    /// to `[rule, state, rule, return state, ...]`, top frame first.
    frames: Mutex<HashMap<Box<[u32]>, Arc<FrameRow>>>,
    tables: Mutex<Tables>,
    readings: Paged<Reading>,
    masks: Paged<Box<[u32]>>,
}

impl Pda {
    pub fn new(rtn: Rtn, vocab: Arc<Vocabulary>, specials: SpecialTokens) -> Result<Pda> {
        let first = FirstBytes::new(&rtn);
        let bounds = Bounds::new(&rtn);
        let ordinary = if specials.is_empty() {
            None
        } else {
            Some(rtn.rules.iter().map(|r| r.dfa.with_bytes_cut(&specials.bytes())).collect())
        };
        let local = rtn.rules.iter().map(|r| (0..r.dfa.num_states()).map(|_| OnceLock::new()).collect()).collect();
        let pda = Pda {
            rtn,
            first,
            vocab,
            specials,
            ordinary,
            bounds,
            local,
            frames: Mutex::new(HashMap::new()),
            tables: Mutex::new(Tables::default()),
            readings: Paged::new(),
            masks: Paged::new(),
        };
        let start = pda.rtn.rule(pda.rtn.start()).start();
        let mut t = pda.lock();
        pda.intern(&mut t, vec![Head::new(pda.rtn.start(), start, StackId::EMPTY)])?;
        drop(t);
        Ok(pda)
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn rtn(&self) -> &Rtn {
        &self.rtn
    }

    pub fn initial_state(&self) -> StateId {
        StateId::new(0)
    }

    /// Readings met so far (their ids are 0 to this, exclusive).
    pub fn num_states(&self) -> usize {
        self.lock().count
    }

    fn reading(&self, state: StateId) -> Result<&Reading> {
        self.readings.get(state.as_usize()).ok_or_else(|| GrammarError::InvalidState {
            state: i64::from(state.as_u32()),
            num_states: self.num_states(),
        })
    }

    /// The state of this grammar whose id is `id`, as a caller outside Rust gives it.
    pub fn state(&self, id: i64) -> Result<StateId> {
        match u32::try_from(id) {
            Ok(s) if self.readings.get(s as usize).is_some() => Ok(StateId::new(s)),
            _ => Err(GrammarError::InvalidState { state: id, num_states: self.num_states() }),
        }
    }

    /// The DFA ordinary tokens of `rule` read.
    fn ordinary_dfa(&self, rule: RuleId) -> &Dfa {
        match &self.ordinary {
            Some(o) => &o[rule.as_usize()],
            None => &self.rtn.rule(rule).dfa,
        }
    }

    /// Interns a reading (its heads sorted and without repeats): the same heads, the same id.
    fn intern(&self, t: &mut Tables, heads: Vec<Head>) -> Result<StateId> {
        if let Some(&id) = t.ids.get(heads.as_slice()) {
            return Ok(StateId::new(id));
        }
        if heads.len() > MAX_HEADS {
            return Err(GrammarError::TooLarge {
                what: "readings of an ambiguous grammar",
                limit: MAX_HEADS,
                detail: format!("{} ways to read the text so far", heads.len()),
            });
        }
        let id = t.count;
        if id >= Paged::<Reading>::CAPACITY {
            return Err(GrammarError::TooLarge { what: "pushdown grammar states", limit: Paged::<Reading>::CAPACITY, detail: "too many readings met".into() });
        }
        let accepting = can_end(&self.rtn, &t.stacks, &heads);
        let distance = heads_distance(&self.rtn, &self.bounds, &t.stacks, &heads);
        let boxed: Box<[Head]> = heads.into_boxed_slice();
        self.readings.set(id, Reading { heads: boxed.clone(), accepting, distance, mask: OnceLock::new() });
        t.ids.insert(boxed, id as u32);
        t.count += 1;
        Ok(StateId::from_index(id))
    }

    pub fn is_accepting(&self, state: StateId) -> Result<bool> {
        Ok(self.reading(state)?.accepting)
    }

    /// The local row of a rule state, computed on first use.
    fn local(&self, rule: RuleId, state: StateId) -> &LocalRow {
        self.local[rule.as_usize()][state.as_usize()].get_or_init(|| {
            let dfa_of = |r: RuleId| self.ordinary_dfa(r);
            local_row(&self.rtn, &self.first, &self.vocab, &self.bounds, &dfa_of, rule, state)
        })
    }

    /// The frame row of the rule state and frames `key` names (see `frames`), whose exits with
    /// one frame fewer are `scope`; computed on first use.
    fn frame_row(&self, key: &[u32], scope: &[u32]) -> Arc<FrameRow> {
        let lock = || self.frames.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(row) = lock().get(key) {
            return row.clone();
        }
        let frames: Vec<(RuleId, StateId)> = key[2..].chunks_exact(2).map(|f| (RuleId::new(f[0]), StateId::new(f[1]))).collect();
        let dfa_of = |r: RuleId| self.ordinary_dfa(r);
        let row = Arc::new(frame_row(&self.rtn, &self.first, &self.vocab, &self.bounds, &dfa_of, RuleId::new(key[0]), StateId::new(key[1]), &frames, scope));
        lock().entry(key.into()).or_insert(row).clone()
    }

    /// The mask id of `state` and the largest distance to the end after an allowed token.
    fn mask_info(&self, state: StateId) -> Result<(u32, u32)> {
        let reading = self.reading(state)?;
        if let Some(&info) = reading.mask.get() {
            return Ok(info);
        }
        // Each head's stack, top frame first, with the distance to the end of the text from
        // below each frame.
        let chains: Vec<Vec<(Frame, u32)>> = {
            let t = self.lock();
            reading
                .heads
                .iter()
                .map(|h| {
                    let mut frames = Vec::new();
                    let mut s = h.stack;
                    while let Some(f) = t.stacks.top(s) {
                        frames.push(f);
                        s = f.parent;
                    }
                    // Summed from the bottom, so a deep stack costs its depth, not its square.
                    let mut below = 0u32;
                    let mut chain: Vec<(Frame, u32)> = frames
                        .iter()
                        .rev()
                        .map(|&f| {
                            let here = below;
                            below = below.saturating_add(bounds_at(&self.bounds, &f)).min(FAR);
                            (f, here)
                        })
                        .collect();
                    chain.reverse();
                    chain
                })
                .collect()
        };
        let mut mask = vec![0u32; mask_words(self.vocab.size())];
        let mut max_after = 0u32;
        // Rows and frame rows are computed without the tables' lock (they may take a while the
        // first time).
        for (h, chain) in reading.heads.iter().zip(&chains) {
            if h.memo != Memo::NONE {
                max_after = max_after.max(self.kept_mask(*h, &mut mask));
                continue;
            }
            let row = self.local(h.rule, h.state);
            for (m, &w) in mask.iter_mut().zip(row.mask.iter()) {
                *m |= w;
            }
            if row.mask.iter().any(|&w| w != 0) {
                let below = chain.first().map_or(0, |(f, d)| bounds_at(&self.bounds, f).saturating_add(*d));
                max_after = max_after.max(row.max_after.saturating_add(below).min(FAR));
            }
            let mut key = vec![h.rule.as_u32(), h.state.as_u32()];
            let mut scope: Option<Arc<FrameRow>> = None;
            for (f, below) in chain {
                let exits = scope.as_ref().map_or(&row.exits[..], |r| &r.exits[..]);
                if exits.is_empty() {
                    break;
                }
                key.extend([f.rule.as_u32(), f.ret.as_u32()]);
                let next = self.frame_row(&key, exits);
                for &tok in next.tokens.iter() {
                    mask[(tok >> 5) as usize] |= 1 << (tok & 31);
                }
                if !next.tokens.is_empty() {
                    max_after = max_after.max(next.max_after.saturating_add(*below).min(FAR));
                }
                scope = Some(next);
            }
        }
        let mut t = self.lock();
        for sp in self.specials.iter() {
            let dfa_of = |r: RuleId| &self.rtn.rule(r).dfa;
            let mut arena = Overlay::new(&t.stacks);
            let after = read(&self.rtn, &self.first, &mut arena, &reading.heads, &[sp.byte], &dfa_of);
            if !after.is_empty() {
                let id = sp.token.as_u32();
                mask[(id >> 5) as usize] |= 1 << (id & 31);
                max_after = max_after.max(heads_distance(&self.rtn, &self.bounds, &arena, &after));
            }
        }
        if reading.accepting {
            for &e in self.vocab.eos_ids() {
                let e = e.as_u32();
                mask[(e >> 5) as usize] |= 1 << (e & 31);
            }
        }
        let id = self.intern_mask(&mut t, mask)?;
        let info = (id, max_after);
        let _ = reading.mask.set(info);
        Ok(*reading.mask.get().unwrap_or(&info))
    }

    /// Adds to `mask` the tokens a head that keeps a memo allows (see `super::distinct`);
    /// returns the largest distance to the end after one (an upper bound).
    fn kept_mask(&self, h: Head, mask: &mut [u32]) -> u32 {
        let dfa_of = |r: RuleId| self.ordinary_dfa(r);
        let t = self.lock();
        if self.rtn.rule(h.rule).memory != Memory::Element {
            return within_walk(&self.rtn, &self.first, &self.vocab, &self.bounds, &dfa_of, &t.stacks, &[h], FAR - 1, None, mask);
        }
        // The element's tokens that do not finish it are its row's, whatever was read before;
        // after each, the shortest new value is at most `extra_bound` longer than the shortest.
        let row = self.local(h.rule, h.state);
        let mut own = row.mask.to_vec();
        clear_subtrees(&self.vocab, &row.closing, &mut own);
        let mut max_after = 0;
        if own.iter().any(|&w| w != 0) {
            let taken = t.stacks.top(h.stack).map_or(0, |f| distinct::set_len(&t.stacks, f.memo));
            let below = stack_distance(&self.bounds, &t.stacks, h.stack);
            max_after = match distinct::extra_bound(taken, distinct::characters(self.rtn.rule(h.rule))) {
                Some(extra) => row.max_after.saturating_add(extra).saturating_add(below).min(FAR),
                None => FAR,
            };
        }
        for (m, &w) in mask.iter_mut().zip(own.iter()) {
            *m |= w;
        }
        // The tokens that finish the element or leave it, with the heads' own memos.
        let mut scope: Vec<u32> = row.closing.iter().chain(row.exits.iter()).copied().collect();
        scope.sort_unstable();
        scope.dedup();
        let finishing = within_walk(&self.rtn, &self.first, &self.vocab, &self.bounds, &dfa_of, &t.stacks, &[h], FAR - 1, Some(&scope), mask);
        max_after.max(finishing)
    }

    fn intern_mask(&self, t: &mut Tables, mask: Vec<u32>) -> Result<u32> {
        let mut h = DefaultHasher::new();
        mask.hash(&mut h);
        let key = h.finish();
        if let Some(ids) = t.masks.get(&key) {
            for &id in ids {
                if self.masks.get(id as usize).is_some_and(|m| m[..] == mask[..]) {
                    return Ok(id);
                }
            }
        }
        let id = t.mask_count;
        if self.masks.set(id, mask.into_boxed_slice()).is_none() {
            return Err(GrammarError::TooLarge { what: "pushdown grammar masks", limit: Paged::<Box<[u32]>>::CAPACITY, detail: "too many distinct masks".into() });
        }
        t.mask_count += 1;
        t.masks.entry(key).or_default().push(id as u32);
        Ok(id as u32)
    }

    /// The id of `state`'s mask: readings that allow the same tokens share one.
    pub fn mask_id(&self, state: StateId) -> Result<u32> {
        Ok(self.mask_info(state)?.0)
    }

    /// The allowed-token bitmask of `state` (EOS included where the text may end).
    pub fn token_bitmask(&self, state: StateId) -> Result<&[u32]> {
        let (id, _) = self.mask_info(state)?;
        self.masks.get(id as usize).map(|m| &m[..]).ok_or_else(|| GrammarError::InvalidState {
            state: i64::from(state.as_u32()),
            num_states: self.num_states(),
        })
    }

    /// The mask restricted to tokens after which the end of the text stays within `budget`
    /// more tokens (see `super::bounds`); the plain mask when the budget restricts nothing.
    pub fn token_bitmask_within(&self, state: StateId, budget: u32) -> Result<Cow<'_, [u32]>> {
        let (_, max_after) = self.mask_info(state)?;
        let mask = self.token_bitmask(state)?;
        if max_after <= budget {
            return Ok(Cow::Borrowed(mask));
        }
        let reading = self.reading(state)?;
        let mut out = vec![0u32; mask.len()];
        if reading.accepting {
            for &e in self.vocab.eos_ids() {
                let e = e.as_u32();
                out[(e >> 5) as usize] |= 1 << (e & 31);
            }
        }
        let t = self.lock();
        let dfa_of = |r: RuleId| self.ordinary_dfa(r);
        within_walk(&self.rtn, &self.first, &self.vocab, &self.bounds, &dfa_of, &t.stacks, &reading.heads, budget, None, &mut out);
        // Special tokens: one byte each, checked like any token.
        for sp in self.specials.iter() {
            let dfa_of = |r: RuleId| &self.rtn.rule(r).dfa;
            let mut arena = Overlay::new(&t.stacks);
            let after = read(&self.rtn, &self.first, &mut arena, &reading.heads, &[sp.byte], &dfa_of);
            if !after.is_empty() && heads_distance(&self.rtn, &self.bounds, &arena, &after) <= budget {
                let id = sp.token.as_u32();
                out[(id >> 5) as usize] |= 1 << (id & 31);
            }
        }
        Ok(Cow::Owned(out))
    }

    /// The reading after `token`, or an error when the token is not allowed. EOS where the
    /// text may end leaves the state unchanged.
    pub fn advance(&self, state: StateId, token: TokenId) -> Result<StateId> {
        let reading = self.reading(state)?;
        let refuse = |reason: &str| Err(GrammarError::TokenNotAllowed { state, token: i64::from(token.as_u32()), reason: reason.to_string() });
        if self.vocab.is_eos(token) {
            return if reading.accepting { Ok(state) } else { refuse("EOS is only allowed once the output fully matches") };
        }
        let key = (state.as_u32(), token.as_u32());
        let mut t = self.lock();
        if let Some(&next) = t.next.get(&key) {
            return Ok(StateId::new(next));
        }
        let Some(bytes) = self.vocab.token_bytes(token) else {
            return refuse(crate::grammar::OUTSIDE_VOCABULARY);
        };
        let after = if let Some(b) = self.specials.byte_of(token) {
            let dfa_of = |r: RuleId| &self.rtn.rule(r).dfa;
            read(&self.rtn, &self.first, &mut t.stacks, &reading.heads, &[b], &dfa_of)
        } else if self.vocab.is_special(token) {
            return refuse("special and control tokens are only allowed where a structure names them");
        } else {
            // Read ahead in a scratch arena first: a refused token leaves no frames behind.
            let dfa_of = |r: RuleId| self.ordinary_dfa(r);
            let ok = {
                let mut scratch = Overlay::new(&t.stacks);
                !read(&self.rtn, &self.first, &mut scratch, &reading.heads, bytes, &dfa_of).is_empty()
            };
            if !ok {
                return refuse("its bytes leave the grammar");
            }
            read(&self.rtn, &self.first, &mut t.stacks, &reading.heads, bytes, &dfa_of)
        };
        if after.is_empty() {
            return refuse("the structure does not allow this special token here");
        }
        let next = self.intern(&mut t, after)?;
        t.next.insert(key, next.as_u32());
        Ok(next)
    }

    /// Bytes every valid continuation of `state` starts with (for jump-forward): while the
    /// text may not end and exactly one byte moves some head.
    pub fn forced_bytes(&self, state: StateId) -> Result<Vec<u8>> {
        let reading = self.reading(state)?;
        let t = self.lock();
        let mut arena = Overlay::new(&t.stacks);
        let mut heads = reading.heads.to_vec();
        let mut out = Vec::new();
        let mut next = Vec::new();
        let dfa_of = |r: RuleId| &self.rtn.rule(r).dfa;
        while out.len() < 4096 && !can_end(&self.rtn, &arena, &heads) {
            let mut only: Option<(u8, Vec<Head>)> = None;
            let mut count = 0;
            for b in 0..=255u8 {
                step_byte(&self.rtn, &self.first, &mut arena, &heads, b, &dfa_of, &mut next);
                if !next.is_empty() {
                    count += 1;
                    if count > 1 {
                        break;
                    }
                    only = Some((b, next.clone()));
                }
            }
            match only {
                Some((b, h)) if count == 1 => {
                    out.push(b);
                    heads = h;
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// The fewest bytes (so, with every byte a token, an upper bound on the tokens) from
    /// `state` to a full match.
    pub fn distance(&self, state: StateId) -> Result<u32> {
        Ok(self.reading(state)?.distance)
    }

    /// Whether `text` is a full match, or the offset of the first byte that leaves the
    /// grammar (the text's length when it is a valid prefix that does not end the grammar).
    pub fn check_text(&self, text: &[u8]) -> std::result::Result<(), usize> {
        let t = self.lock();
        let mut arena = Overlay::new(&t.stacks);
        let start = self.reading(self.initial_state()).map(|r| r.heads.to_vec()).unwrap_or_default();
        let mut heads = start;
        let mut next = Vec::new();
        let dfa_of = |r: RuleId| &self.rtn.rule(r).dfa;
        for (i, &b) in text.iter().enumerate() {
            step_byte(&self.rtn, &self.first, &mut arena, &heads, b, &dfa_of, &mut next);
            if next.is_empty() {
                return Err(i);
            }
            std::mem::swap(&mut heads, &mut next);
        }
        if can_end(&self.rtn, &arena, &heads) {
            Ok(())
        } else {
            Err(text.len())
        }
    }

    /// Rule states whose local rows have been computed.
    pub fn rows_built(&self) -> usize {
        self.local.iter().map(|r| r.iter().filter(|c| c.get().is_some()).count()).sum()
    }

    pub fn memory_bytes(&self) -> usize {
        let t = self.lock();
        let rows: usize = self.local.iter().flat_map(|r| r.iter()).filter_map(OnceLock::get).map(LocalRow::memory_bytes).sum::<usize>()
            + self.frames.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, r)| k.len() * 4 + r.memory_bytes() + 16).sum::<usize>();
        let masks: usize = (0..t.mask_count).filter_map(|i| self.masks.get(i)).map(|m| m.len() * 4).sum();
        let readings: usize = (0..t.count).filter_map(|i| self.readings.get(i)).map(|r| r.heads.len() * std::mem::size_of::<Head>() + 48).sum();
        self.rtn.memory_bytes() + rows + masks + readings + t.stacks.memory_bytes() + t.next.len() * 16
    }
}
