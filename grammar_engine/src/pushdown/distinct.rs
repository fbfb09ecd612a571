//! Arrays whose elements must be distinct (JSON Schema's `uniqueItems` over an element
//! language too large to list), checked while the text is read.
//!
//! Such an array is a rule of its own ([`Memory::Distinct`]) whose only calls are of its
//! element's rule ([`Memory::Element`], a rule with no calls whose accepting states end it:
//! nothing may follow a closing quote). At run time a head carries a [`Memo`] beside its
//! state: in the element rule, the element's text so far; in the array rule, the set of
//! elements read so far; and a frame of the array rule keeps the set under the element being
//! read. When an element's text reaches an accepting state, its value is compared with the
//! set's (JSON equality: `"\u0061"` is `"a"`): an equal one ends that reading at once, so a
//! token that would repeat an element is never allowed; a new one joins the set when the
//! element returns. Texts and sets are persistent lists interned in the stack arena, so a head
//! stays a few integers and a reading stays an interned id.
//!
//! The fewest bytes to a full match now depend on the set: an element whose shortest
//! completion is a value already read needs a longer one ([`fresh_distance`]). The compiler
//! only makes such arrays of elements one more character always makes new (strings with no
//! upper length bound and no pattern), so every reading stays completable, one more
//! character suffices while fewer than [`PRINTABLE`] elements are read, and the search for the
//! shortest new completion stays short.

use super::rules::Rule;
use super::step::Arena;
use crate::util::StateId;

/// What a rule keeps at run time beside its DFA state.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Memory {
    #[default]
    None,
    /// An array whose elements, calls of one [`Memory::Element`] rule, must be distinct.
    Distinct,
    /// An element of a [`Memory::Distinct`] array.
    Element,
}

/// A text or a set of element texts: an id in the stack arena's notes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Memo(pub(crate) u32);

impl Memo {
    /// Nothing kept: every head of a rule without memory, and the heads a mask row reads from
    /// a rule state whatever the stack (such a row checks nothing; see `super::runtime`).
    pub const NONE: Memo = Memo(0);
    /// The empty text, or the empty set.
    pub const EMPTY: Memo = Memo(1);
}

/// One link of a persistent list: a text is its last byte after the text before it, a set is
/// its last element's text after the set before it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Note {
    Byte { prev: Memo, byte: u8 },
    Element { prev: Memo, text: Memo },
}

/// Printable ASCII characters: as many element values one more character can make.
pub const PRINTABLE: usize = 95;

/// Most trie-free search steps [`fresh_distance`] takes before giving up (`FAR`).
const MAX_SEARCH: usize = 1 << 16;

/// The bytes of the text `memo`.
pub fn text(arena: &dyn Arena, mut memo: Memo) -> Vec<u8> {
    let mut out = Vec::new();
    while memo.0 > Memo::EMPTY.0 {
        match arena.note(memo) {
            Note::Byte { prev, byte } => {
                out.push(byte);
                memo = prev;
            }
            Note::Element { .. } => break,
        }
    }
    out.reverse();
    out
}

/// What decides whether two element texts are equal values: a JSON string's characters (its
/// escapes decoded), or the text itself when it does not decode.
pub fn value_key(text: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<String>(text) {
        Ok(s) => {
            let mut k = vec![1u8];
            k.extend_from_slice(s.as_bytes());
            k
        }
        Err(_) => {
            let mut k = vec![0u8];
            k.extend_from_slice(text);
            k
        }
    }
}

/// The value keys of the elements of the set `memo`.
pub fn keys(arena: &dyn Arena, mut memo: Memo) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while memo.0 > Memo::EMPTY.0 {
        match arena.note(memo) {
            Note::Element { prev, text: t } => {
                out.push(value_key(&text(arena, t)));
                memo = prev;
            }
            Note::Byte { .. } => break,
        }
    }
    out
}

/// Whether the text `text` is the value of an element of the set `set`.
pub fn repeats(arena: &dyn Arena, set: Memo, text_memo: Memo) -> bool {
    if set.0 <= Memo::EMPTY.0 {
        return false;
    }
    let key = value_key(&text(arena, text_memo));
    keys(arena, set).contains(&key)
}

/// How many elements the set `memo` holds.
pub fn set_len(arena: &dyn Arena, mut memo: Memo) -> usize {
    let mut n = 0;
    while memo.0 > Memo::EMPTY.0 {
        match arena.note(memo) {
            Note::Element { prev, .. } => {
                n += 1;
                memo = prev;
            }
            Note::Byte { .. } => break,
        }
    }
    n
}

/// How many more characters than its shortest completion an element may need to be new
/// among `n` others (see the module docs): one more character makes [`PRINTABLE`] values.
pub fn extra_bound(n: usize) -> u32 {
    let mut extra = 0u32;
    let mut made = 1usize;
    while made <= n {
        made = made.saturating_mul(PRINTABLE);
        extra += 1;
    }
    extra
}

/// The fewest bytes from `state` of the element rule `rule` (whose fewest bytes to its end
/// from each state are `to_end`), its text so far being `text`, to the end of an element whose
/// value is none of `taken`; `far` when none is found within a short search.
pub fn fresh_distance(rule: &Rule, to_end: &[u32], state: StateId, text: &[u8], taken: &[Vec<u8>], far: u32) -> u32 {
    let shortest = to_end[state.as_usize()];
    if taken.is_empty() || shortest >= far {
        return shortest;
    }
    let mut steps = MAX_SEARCH;
    let mut buf = text.to_vec();
    let most = shortest.saturating_add(extra_bound(taken.len()));
    for len in shortest..=most {
        if completes(rule, to_end, state, len, &mut buf, taken, &mut steps) {
            return len;
        }
        if steps == 0 {
            break;
        }
    }
    far
}

/// Whether some completion of exactly `left` bytes from `state` ends the element with a new
/// value (a depth-first search, cut off after `steps` states).
fn completes(rule: &Rule, to_end: &[u32], state: StateId, left: u32, buf: &mut Vec<u8>, taken: &[Vec<u8>], steps: &mut usize) -> bool {
    if *steps == 0 {
        return false;
    }
    *steps -= 1;
    if left == 0 {
        return rule.is_accepting(state) && !taken.contains(&value_key(buf));
    }
    for b in 0..=255u8 {
        let t = rule.dfa.next(state, b);
        if t.is_dead() || !rule.live[t.as_usize()] || to_end[t.as_usize()] > left - 1 {
            continue;
        }
        buf.push(b);
        let found = completes(rule, to_end, t, left - 1, buf, taken, steps);
        buf.pop();
        if found {
            return true;
        }
        if *steps == 0 {
            return false;
        }
    }
    false
}
