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
//! only makes such arrays of elements whose text can always go on with any of several
//! characters before it ends (strings with no upper length bound and no pattern), so every
//! reading stays completable: `k` more characters make `c^k` new values, where `c` is how many
//! one-byte characters the element takes ([`characters`]), which bounds how much longer the
//! shortest new value is ([`extra_bound`]) and keeps the search for it short.

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
/// its last element's value key (see [`value_key`], interned in the arena) after the set
/// before it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Note {
    Byte { prev: Memo, byte: u8 },
    Element { prev: Memo, key: u32 },
}

/// Most states [`fresh_distance`]'s search visits before giving up (`far`).
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
pub fn keys(arena: &dyn Arena, mut memo: Memo) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while memo.0 > Memo::EMPTY.0 {
        match arena.note(memo) {
            Note::Element { prev, key } => {
                out.push(arena.key(key));
                memo = prev;
            }
            Note::Byte { .. } => break,
        }
    }
    out
}

/// Whether the set `set` holds the value key `key`.
pub fn holds(arena: &dyn Arena, mut set: Memo, key: &[u8]) -> bool {
    while set.0 > Memo::EMPTY.0 {
        match arena.note(set) {
            Note::Element { prev, key: k } => {
                if arena.key(k) == key {
                    return true;
                }
                set = prev;
            }
            Note::Byte { .. } => break,
        }
    }
    false
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

/// How many one-byte characters (printable ASCII but the quote and the backslash, which a
/// string writes escaped) the element `rule` takes right after it opens: each makes another
/// value, wherever a string's text may go on.
pub fn characters(rule: &Rule) -> usize {
    let open = rule.dfa.next(rule.start(), b'"');
    if open.is_dead() {
        return 0;
    }
    (0x20u8..0x7F).filter(|&c| c != b'"' && c != b'\\').filter(|&c| {
        let t = rule.dfa.next(open, c);
        !t.is_dead() && rule.live[t.as_usize()]
    }).count()
}

/// How many more bytes than its shortest completion an element may need to be new among `n`
/// others, when `c` characters can go on its text (see the module docs); `None` when fewer
/// than two can (no bound).
pub fn extra_bound(n: usize, c: usize) -> Option<u32> {
    if c < 2 {
        return None;
    }
    let mut extra = 0u32;
    let mut made = 1usize;
    while made <= n {
        made = made.saturating_mul(c);
        extra += 1;
    }
    Some(extra)
}

/// The fewest bytes from `state` of the element rule `rule` (whose fewest bytes to its end
/// from each state are `to_end`), its text so far being `text`, to the end of an element whose
/// value is none of `taken`; `far` when none is found within [`MAX_SEARCH`] states (a set far
/// larger than any output holds).
pub fn fresh_distance(rule: &Rule, to_end: &[u32], state: StateId, text: &[u8], taken: &[&[u8]], far: u32) -> u32 {
    let shortest = to_end[state.as_usize()];
    if taken.is_empty() || shortest >= far {
        return shortest;
    }
    let mut steps = MAX_SEARCH;
    let mut buf = text.to_vec();
    let mut len = shortest;
    while steps > 0 && len < far {
        if completes(rule, to_end, state, len, &mut buf, taken, &mut steps) {
            return len;
        }
        len += 1;
    }
    far
}

/// Whether some completion of exactly `left` bytes from `state` ends the element with a new
/// value (a depth-first search, cut off after `steps` states).
fn completes(rule: &Rule, to_end: &[u32], state: StateId, left: u32, buf: &mut Vec<u8>, taken: &[&[u8]], steps: &mut usize) -> bool {
    if *steps == 0 {
        return false;
    }
    *steps -= 1;
    if left == 0 {
        if !rule.is_accepting(state) {
            return false;
        }
        let key = value_key(buf);
        return !taken.iter().any(|&k| k == key.as_slice());
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

#[cfg(test)]
mod tests {
    use super::Memory;
    use crate::automata::{DfaConfig, Expr};
    use crate::pushdown::RtnBuilder;

    /// An array of distinct `"[ab]*"` elements calling `each`, and maybe `extra` after it.
    fn array(extra: Option<Expr>) -> (RtnBuilder, crate::util::RuleId) {
        let mut b = RtnBuilder::new();
        let (start, array, each) = (b.declare("start"), b.declare("array"), b.declare("each"));
        b.define(each, Expr::regex("\"[ab]*\""));
        b.remember(each, Memory::Element);
        let more = Expr::repeat(Expr::concat(vec![Expr::literal(","), Expr::Call(each)]), 0, None);
        let mut body = vec![Expr::literal("["), Expr::Call(each), more];
        if let Some(e) = extra {
            let other = b.declare("other");
            b.define(other, e);
            b.always_call(other);
            body.push(Expr::Call(other));
        }
        body.push(Expr::literal("]"));
        b.define(array, Expr::concat(body));
        b.remember(array, Memory::Distinct);
        b.define(start, Expr::Call(array));
        (b, start)
    }

    #[test]
    fn rules_that_break_the_shape_the_check_needs_are_refused() {
        let config = DfaConfig::default();
        let (b, start) = array(None);
        assert!(b.build(start, "test", &config).is_ok());
        let (b, start) = array(Some(Expr::literal("x")));
        let err = b.build(start, "test", &config).unwrap_err();
        assert!(err.to_string().contains("may only call its element"), "{err}");
        // As the start rule, the array would have no frame to keep its set in.
        let (b, _) = array(None);
        let err = b.build(crate::util::RuleId::new(1), "test", &config).unwrap_err();
        assert!(err.to_string().contains("start rule"), "{err}");
        // Escaped into a JSON string, an element's text would be compared as its escape.
        let (mut b, start) = array(None);
        let err = b.json_escape(&Expr::Call(start), &config).unwrap_err();
        assert!(err.to_string().contains("inside a JSON string"), "{err}");
    }
}
