//! Reading bytes with a pushdown grammar: heads, stacks, and one byte's step.
//!
//! Where the reader is, is a set of *heads*: a head is a rule, a state of that rule's DFA, and
//! a stack of the calls it is inside of (each frame: the calling rule and the state the call
//! returns to). A set, because a grammar may be ambiguous at a point (two rules that both
//! start with `{`): every reading still possible is kept, and the text is valid while one is.
//!
//! Stacks are persistent: a frame is (rule, return state, parent stack), and a stack is the id
//! of its top frame in an arena ([`Stacks`]) that interns frames, so equal stacks are equal
//! ids and copying a head copies three integers. [`StackId::EMPTY`] is the bottom: in the
//! grammar's own arena it means "the whole text ends here"; in a scratch arena used to read a
//! token from one rule state (`super::masks`) it stands for "whatever called this rule", and
//! a head that pops it has left the rule.
//!
//! One byte's step ([`step_byte`]) moves every head: along its DFA, into the rules its state
//! calls (pushing a frame; only those whose first bytes include this byte, so the arena keeps
//! no frame that dies at once), and out of its rule where the rule may end (popping a frame).

use rustc_hash::{FxHashMap, FxHashSet};

use super::distinct::{self, Memo, Memory, Note};
use super::rules::Rtn;
use crate::util::{RuleId, StateId};

/// A stack: the id of its top frame in a [`Stacks`] arena.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct StackId(pub(crate) u32);

impl StackId {
    /// The bottom of every stack.
    pub const EMPTY: StackId = StackId(0);
}

/// A call being read: the calling rule, the state its call returns to, what the caller kept
/// (see `super::distinct`), and the stack under it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Frame {
    pub rule: RuleId,
    pub ret: StateId,
    pub memo: Memo,
    pub parent: StackId,
}

/// Where a reading is: a rule, a state of its DFA, what the rule keeps at run time (see
/// `super::distinct`; [`Memo::NONE`] for most rules), the stack of calls it is inside of.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Head {
    pub rule: RuleId,
    pub state: StateId,
    pub memo: Memo,
    pub stack: StackId,
}

impl Head {
    /// A head that keeps nothing.
    pub fn new(rule: RuleId, state: StateId, stack: StackId) -> Head {
        Head { rule, state, memo: Memo::NONE, stack }
    }
}

/// Frames by stack id, and the notes memos are made of: what a step reads stacks from and
/// pushes new frames into.
pub trait Arena {
    /// The stack with `frame` on top.
    fn push(&mut self, frame: Frame) -> StackId;
    /// The top frame of `stack`; `None` for the bottom.
    fn top(&self, stack: StackId) -> Option<Frame>;
    /// The memo whose last link is `note`.
    fn add_note(&mut self, note: Note) -> Memo;
    /// The last link of `memo` (neither [`Memo::NONE`] nor [`Memo::EMPTY`]).
    fn note(&self, memo: Memo) -> Note;
    /// The id of an element's value key (equal keys, equal ids).
    fn add_key(&mut self, key: &[u8]) -> u32;
    /// The value key `id` stands for.
    fn key(&self, id: u32) -> &[u8];
}

/// An arena of interned frames and notes (equal frames, equal ids).
#[derive(Debug)]
pub struct Stacks {
    frames: Vec<Frame>,
    ids: FxHashMap<Frame, StackId>,
    notes: Vec<Note>,
    note_ids: FxHashMap<Note, Memo>,
    keys: Vec<Box<[u8]>>,
    key_ids: FxHashMap<Box<[u8]>, u32>,
}

/// Slots 0 and 1 of the notes: [`Memo::NONE`] and [`Memo::EMPTY`] have no note.
const NO_NOTE: Note = Note::Byte { prev: Memo::NONE, byte: 0 };

impl Default for Stacks {
    fn default() -> Self {
        Stacks::new()
    }
}

impl Stacks {
    pub fn new() -> Stacks {
        // Slot 0 is the bottom; it has no frame.
        Stacks {
            frames: vec![Frame { rule: RuleId::new(u32::MAX), ret: StateId::DEAD, memo: Memo::NONE, parent: StackId::EMPTY }],
            ids: FxHashMap::default(),
            notes: vec![NO_NOTE, NO_NOTE],
            note_ids: FxHashMap::default(),
            keys: Vec::new(),
            key_ids: FxHashMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.frames.capacity() * std::mem::size_of::<Frame>()
            + self.ids.capacity() * (std::mem::size_of::<Frame>() + 8)
            + self.notes.capacity() * std::mem::size_of::<Note>() * 2
            + self.keys.iter().map(|k| k.len() * 2 + 40).sum::<usize>()
    }
}

impl Arena for Stacks {
    fn push(&mut self, frame: Frame) -> StackId {
        if let Some(&id) = self.ids.get(&frame) {
            return id;
        }
        let id = StackId(self.frames.len() as u32);
        self.frames.push(frame);
        self.ids.insert(frame, id);
        id
    }

    #[inline]
    fn top(&self, stack: StackId) -> Option<Frame> {
        if stack == StackId::EMPTY {
            None
        } else {
            Some(self.frames[stack.0 as usize])
        }
    }

    fn add_note(&mut self, note: Note) -> Memo {
        if let Some(&id) = self.note_ids.get(&note) {
            return id;
        }
        let id = Memo(self.notes.len() as u32);
        self.notes.push(note);
        self.note_ids.insert(note, id);
        id
    }

    fn note(&self, memo: Memo) -> Note {
        self.notes[memo.0 as usize]
    }

    fn add_key(&mut self, key: &[u8]) -> u32 {
        if let Some(&id) = self.key_ids.get(key) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.keys.push(key.into());
        self.key_ids.insert(key.into(), id);
        id
    }

    fn key(&self, id: u32) -> &[u8] {
        &self.keys[id as usize]
    }
}

/// A scratch arena over a read-only one: stacks of the base are read from it, new frames go
/// to the scratch part (ids past the base's), which is dropped after use. Reading a token
/// ahead (for a mask) pushes frames that the text may never take; they stay out of the base.
pub struct Overlay<'a> {
    base: &'a Stacks,
    local: Vec<Frame>,
    ids: FxHashMap<Frame, StackId>,
    notes: Vec<Note>,
    note_ids: FxHashMap<Note, Memo>,
    keys: Vec<Box<[u8]>>,
    key_ids: FxHashMap<Box<[u8]>, u32>,
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a Stacks) -> Overlay<'a> {
        Overlay {
            base,
            local: Vec::new(),
            ids: FxHashMap::default(),
            notes: Vec::new(),
            note_ids: FxHashMap::default(),
            keys: Vec::new(),
            key_ids: FxHashMap::default(),
        }
    }
}

impl Arena for Overlay<'_> {
    fn push(&mut self, frame: Frame) -> StackId {
        if let Some(&id) = self.base.ids.get(&frame) {
            return id;
        }
        if let Some(&id) = self.ids.get(&frame) {
            return id;
        }
        let id = StackId((self.base.len() + self.local.len()) as u32);
        self.local.push(frame);
        self.ids.insert(frame, id);
        id
    }

    #[inline]
    fn top(&self, stack: StackId) -> Option<Frame> {
        let i = stack.0 as usize;
        if i < self.base.len() {
            self.base.top(stack)
        } else {
            Some(self.local[i - self.base.len()])
        }
    }

    fn add_note(&mut self, note: Note) -> Memo {
        if let Some(&id) = self.base.note_ids.get(&note) {
            return id;
        }
        if let Some(&id) = self.note_ids.get(&note) {
            return id;
        }
        let id = Memo((self.base.notes.len() + self.notes.len()) as u32);
        self.notes.push(note);
        self.note_ids.insert(note, id);
        id
    }

    fn note(&self, memo: Memo) -> Note {
        let i = memo.0 as usize;
        if i < self.base.notes.len() {
            self.base.notes[i]
        } else {
            self.notes[i - self.base.notes.len()]
        }
    }

    fn add_key(&mut self, key: &[u8]) -> u32 {
        if let Some(&id) = self.base.key_ids.get(key) {
            return id;
        }
        if let Some(&id) = self.key_ids.get(key) {
            return id;
        }
        let id = (self.base.keys.len() + self.keys.len()) as u32;
        self.keys.push(key.into());
        self.key_ids.insert(key.into(), id);
        id
    }

    fn key(&self, id: u32) -> &[u8] {
        let i = id as usize;
        if i < self.base.keys.len() {
            &self.base.keys[i]
        } else {
            &self.keys[i - self.base.keys.len()]
        }
    }
}

/// The bytes each rule can read first (through its DFA, the rules called at its start, and
/// past the calls of rules that match the empty string): what [`step_byte`] checks before
/// entering a call. And the bytes that can follow each rule wherever it is called (its callers'
/// bytes after the call, and what follows them where they may end there): a rule ending at the
/// bottom of a scratch stack only hands a byte to its caller when the byte is one of these.
#[derive(Debug)]
pub struct FirstBytes {
    first: Vec<[bool; 256]>,
    follow: Vec<[bool; 256]>,
    /// Per rule, the states where it can only end (accepting, no edge, no call): a call that
    /// returns to one pushes no frame, since its frame would be popped as soon as it is back
    /// on top, so right recursion does not deepen the stack.
    tail: Vec<Vec<bool>>,
}

impl FirstBytes {
    pub fn new(rtn: &Rtn) -> FirstBytes {
        let n = rtn.rules.len();
        let mut first = vec![[false; 256]; n];
        // A least fixpoint: a rule's first bytes grow with its callees'.
        loop {
            let mut changed = false;
            for r in 0..n {
                crate::util::background::pause_point();
                let (from_start, _) = bytes_from(rtn, &first, RuleId::new(r as u32), rtn.rules[r].start());
                let mut acc = first[r];
                for (a, &b) in acc.iter_mut().zip(from_start.iter()) {
                    *a |= b;
                }
                if acc != first[r] {
                    first[r] = acc;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let follow = follow_bytes(rtn, &first);
        let tail = rtn
            .rules
            .iter()
            .map(|r| {
                (0..r.dfa.num_states())
                    .map(|s| {
                        let s = StateId::from_index(s);
                        let edge = r.dfa.row(s).iter().any(|t| !t.is_dead());
                        r.is_accepting(s) && !edge && r.calls_at(s).is_empty()
                    })
                    .collect()
            })
            .collect();
        FirstBytes { first, follow, tail }
    }

    /// Whether a call returning to `state` of `rule` needs no frame (see `tail`).
    #[inline]
    pub fn is_tail(&self, rule: RuleId, state: StateId) -> bool {
        self.tail[rule.as_usize()][state.as_usize()]
    }

    #[inline]
    pub fn can_start(&self, rule: RuleId, byte: u8) -> bool {
        self.first[rule.as_usize()][byte as usize]
    }

    /// Whether `byte` may come right after `rule` ends, in some caller.
    #[inline]
    pub fn can_follow(&self, rule: RuleId, byte: u8) -> bool {
        self.follow[rule.as_usize()][byte as usize]
    }
}

/// The bytes a rule may read from `state` on (its DFA's live edges, the first bytes of the
/// rules called there, and on past calls of rules that match the empty string), and whether it
/// may end there without reading a byte.
fn bytes_from(rtn: &Rtn, first: &[[bool; 256]], rule: RuleId, state: StateId) -> ([bool; 256], bool) {
    let r = rtn.rule(rule);
    let mut acc = [false; 256];
    let mut ends = false;
    let mut seen = vec![state];
    let mut todo = vec![state];
    while let Some(s) = todo.pop() {
        ends |= r.is_accepting(s);
        r.dfa.for_each_transition(s, |b, t| {
            if r.live[t.as_usize()] {
                acc[b as usize] = true;
            }
        });
        for &(c, ret) in r.calls_at(s) {
            for (a, &f) in acc.iter_mut().zip(first[c.as_usize()].iter()) {
                *a |= f;
            }
            if rtn.rule(c).nullable && r.live[ret.as_usize()] && !seen.contains(&ret) {
                seen.push(ret);
                todo.push(ret);
            }
        }
    }
    (acc, ends)
}

/// Every rule's follow bytes, a least fixpoint over its call sites.
fn follow_bytes(rtn: &Rtn, first: &[[bool; 256]]) -> Vec<[bool; 256]> {
    // Per call site: the callee, the caller, the bytes after the call, and whether the caller
    // may end right after it.
    let mut sites: Vec<(usize, usize, [bool; 256], bool)> = Vec::new();
    for (ri, rule) in rtn.rules.iter().enumerate() {
        for calls in rule.calls.iter() {
            for &(c, ret) in calls.iter() {
                if rule.live[ret.as_usize()] {
                    let (bytes, ends) = bytes_from(rtn, first, RuleId::new(ri as u32), ret);
                    sites.push((c.as_usize(), ri, bytes, ends));
                }
            }
        }
    }
    let mut follow = vec![[false; 256]; rtn.rules.len()];
    loop {
        let mut changed = false;
        for (callee, caller, bytes, ends) in &sites {
            let mut acc = follow[*callee];
            for (a, &b) in acc.iter_mut().zip(bytes.iter()) {
                *a |= b;
            }
            if *ends {
                let f = follow[*caller];
                for (a, &b) in acc.iter_mut().zip(f.iter()) {
                    *a |= b;
                }
            }
            if acc != follow[*callee] {
                follow[*callee] = acc;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    follow
}

/// Moves `heads` over one byte into `out` (sorted, without repeats). `dfa_of(rule)` is the
/// table a rule reads bytes with (a structure's ordinary tokens read one with its special
/// tokens' markers cut). Returns true when some head could have left the bottom of its stack
/// here (its rule may end at the bottom and the byte may follow it in some caller).
pub fn step_byte<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    stacks: &mut dyn Arena,
    heads: &[Head],
    byte: u8,
    dfa_of: &dyn Fn(RuleId) -> &'a crate::automata::Dfa,
    out: &mut Vec<Head>,
) -> bool {
    out.clear();
    let mut bottom = false;
    SEEN.with(|cell| {
        let mut seen = cell.borrow_mut();
        seen.clear();
        for &h in heads {
            expand(rtn, first, stacks, h, byte, dfa_of, out, &mut seen, &mut bottom);
        }
    });
    out.sort_unstable();
    out.dedup();
    bottom
}

thread_local! {
    /// The heads one byte's step has expanded, reused from step to step (a mask reads every
    /// byte of the vocabulary's trie).
    static SEEN: std::cell::RefCell<Seen> = std::cell::RefCell::new(Seen::default());
}

/// A set of heads: a short list while it is short (most steps expand one or two heads), a hash
/// set once a head returns through many frames.
#[derive(Default)]
struct Seen {
    few: Vec<Head>,
    many: FxHashSet<Head>,
}

impl Seen {
    const FEW: usize = 16;

    fn clear(&mut self) {
        self.few.clear();
        self.many.clear();
    }

    /// Adds `h`; false when it was there already.
    fn insert(&mut self, h: Head) -> bool {
        if self.few.len() < Self::FEW {
            if self.few.contains(&h) {
                return false;
            }
            self.few.push(h);
            return true;
        }
        if self.few.contains(&h) {
            return false;
        }
        self.many.insert(h)
    }
}

#[allow(clippy::too_many_arguments)]
fn expand<'a>(
    rtn: &'a Rtn,
    first: &FirstBytes,
    stacks: &mut dyn Arena,
    h: Head,
    byte: u8,
    dfa_of: &dyn Fn(RuleId) -> &'a crate::automata::Dfa,
    out: &mut Vec<Head>,
    seen: &mut Seen,
    bottom: &mut bool,
) {
    if !seen.insert(h) {
        return;
    }
    let rule = rtn.rule(h.rule);
    let t = dfa_of(h.rule).next(h.state, byte);
    if !t.is_dead() && rule.live[t.as_usize()] {
        if let Some(memo) = moved_memo(rtn, stacks, h, t, byte) {
            out.push(Head { rule: h.rule, state: t, memo, stack: h.stack });
        }
    }
    for &(c, ret) in rule.calls_at(h.state) {
        if rtn.rule(c).nullable && rule.live[ret.as_usize()] {
            // The callee matches nothing here: read the byte after the call.
            expand(rtn, first, stacks, Head { state: ret, ..h }, byte, dfa_of, out, seen, bottom);
        }
        if first.can_start(c, byte) && rule.live[ret.as_usize()] {
            // A caller that keeps something needs its frame to get it back.
            let k = if h.memo == Memo::NONE && first.is_tail(h.rule, ret) {
                h.stack
            } else {
                stacks.push(Frame { rule: h.rule, ret, memo: h.memo, parent: h.stack })
            };
            let callee = rtn.rule(c);
            let memo = match callee.memory {
                Memory::None => Memo::NONE,
                Memory::Distinct => Memo::EMPTY,
                Memory::Element if h.memo == Memo::NONE => Memo::NONE,
                Memory::Element => Memo::EMPTY,
            };
            expand(rtn, first, stacks, Head { rule: c, state: callee.start(), memo, stack: k }, byte, dfa_of, out, seen, bottom);
        }
    }
    if rule.is_accepting(h.state) {
        match stacks.top(h.stack) {
            Some(f) => {
                if let Some(memo) = returned_memo(rtn, stacks, h, f) {
                    expand(rtn, first, stacks, Head { rule: f.rule, state: f.ret, memo, stack: f.parent }, byte, dfa_of, out, seen, bottom)
                }
            }
            None => *bottom |= first.can_follow(h.rule, byte),
        }
    }
}

/// What `h` keeps after its rule's DFA moves to `t` over `byte`: an element's text grows by
/// the byte, and an element that ends there with a value its array already holds ends this
/// reading (`None`).
fn moved_memo(rtn: &Rtn, stacks: &mut dyn Arena, h: Head, t: StateId, byte: u8) -> Option<Memo> {
    let rule = rtn.rule(h.rule);
    if rule.memory != Memory::Element || h.memo == Memo::NONE {
        return Some(h.memo);
    }
    let text = stacks.add_note(Note::Byte { prev: h.memo, byte });
    if rule.is_accepting(t) {
        if let Some(f) = stacks.top(h.stack) {
            if f.memo != Memo::NONE && distinct::holds(&*stacks, f.memo, &distinct::value_key(&distinct::text(&*stacks, text))) {
                return None;
            }
        }
    }
    Some(text)
}

/// What the caller keeps once `h` returns into the frame `f`: an element's value joins its
/// array's set (`None` when it is there already).
fn returned_memo(rtn: &Rtn, stacks: &mut dyn Arena, h: Head, f: Frame) -> Option<Memo> {
    if rtn.rule(h.rule).memory != Memory::Element || h.memo == Memo::NONE || f.memo == Memo::NONE {
        return Some(f.memo);
    }
    let key = distinct::value_key(&distinct::text(&*stacks, h.memo));
    if distinct::holds(&*stacks, f.memo, &key) {
        return None;
    }
    let key = stacks.add_key(&key);
    Some(stacks.add_note(Note::Element { prev: f.memo, key }))
}

/// True when the text may end with these heads: some head's rule may end at its state and so
/// may every rule on its stack at the states they return to (through calls of rules that
/// match the empty string, too).
pub fn can_end(rtn: &Rtn, stacks: &dyn Arena, heads: &[Head]) -> bool {
    let mut seen: Vec<Head> = Vec::new();
    heads.iter().any(|&h| ends(rtn, stacks, h, &mut seen))
}

fn ends(rtn: &Rtn, stacks: &dyn Arena, h: Head, seen: &mut Vec<Head>) -> bool {
    if seen.contains(&h) {
        return false;
    }
    seen.push(h);
    let rule = rtn.rule(h.rule);
    if rule.is_accepting(h.state) {
        match stacks.top(h.stack) {
            None => return true,
            Some(f) => {
                if ends(rtn, stacks, Head { rule: f.rule, state: f.ret, memo: f.memo, stack: f.parent }, seen) {
                    return true;
                }
            }
        }
    }
    rule.calls_at(h.state)
        .iter()
        .any(|&(c, ret)| rtn.rule(c).nullable && ends(rtn, stacks, Head { state: ret, ..h }, seen))
}
