//! Telling a language that calls recursive rules apart from another schema by member names,
//! without inlining the calls.
//!
//! A `oneOf` branch, the rest of a `not` or an `else` case is kept apart from other schemas by
//! subtracting their over-languages, a product of automata that no recursive call can enter.
//! Often the subtraction would remove nothing: the language writes only objects, and never a
//! member name the other schema requires (`{"allowLogin": …}` against objects that must hold
//! `injectRoles`: neither schema forbids the other's member, but the compact output never
//! writes a name its schema does not declare or invite). [`top_level_names`] reads the names
//! off the language's automaton, following its nesting depth, a call inside the object being
//! one whole value whatever names it holds; the language then keeps its calls, exactly.

use std::collections::{HashMap, HashSet};

use crate::automata::calls::{calls_of, CALL_OPENER};
use crate::automata::Dfa;
use crate::util::StateId;

/// Most states (state, depth, position) [`top_level_names`] visits.
const MAX_VISITED: usize = 200_000;

/// Where a reading of a text stands outside and inside strings (see [`top_level_names`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum At {
    /// Outside strings; `name_next`: a member name of the outermost object may come next.
    Out { name_next: bool },
    InString,
    AfterBackslash,
}

/// Deepest nesting [`top_level_names`] follows.
const MAX_NAMES_DEPTH: u32 = 64;

/// Most member names, and longest name, [`top_level_names`] lists.
const MAX_NAMES: usize = 4_096;
const MAX_NAME_BYTES: usize = 512;

/// The member names of the outermost object in the texts of `lang` (a DFA whose calls are
/// spelled as bytes; a call inside the object stands for one whole value, whatever it holds),
/// decoded; `None` when some text is not an object, or the names are too many or unbounded.
pub(super) fn top_level_names(lang: &Dfa) -> Option<HashSet<String>> {
    let calls = calls_of(lang);
    let mut names: HashSet<String> = HashSet::new();
    let mut name_texts: HashMap<StateId, Vec<(Vec<u8>, StateId)>> = HashMap::new();
    let start = (lang.start(), 0u32, At::Out { name_next: false });
    let mut seen = HashSet::from([start]);
    let mut todo = vec![start];
    while let Some((s, depth, at)) = todo.pop() {
        let mut next: Vec<(StateId, u32, At)> = Vec::new();
        if !calls[s.as_usize()].is_empty() {
            if depth == 0 || !matches!(at, At::Out { .. }) {
                return None;
            }
            next.extend(calls[s.as_usize()].iter().map(|&(_, ret)| (ret, depth, At::Out { name_next: false })));
        }
        let mut fail = false;
        lang.for_each_transition(s, |byte, t| {
            if byte == CALL_OPENER || fail {
                return;
            }
            let out = |name_next| At::Out { name_next };
            match at {
                At::InString => next.push((t, depth, if byte == b'\\' { At::AfterBackslash } else if byte == b'"' { out(false) } else { At::InString })),
                At::AfterBackslash => next.push((t, depth, At::InString)),
                At::Out { name_next } => match byte {
                    b' ' | b'\t' | b'\n' | b'\r' => next.push((t, depth, at)),
                    _ if depth == 0 && byte != b'{' => fail = true,
                    b'{' | b'[' if depth >= MAX_NAMES_DEPTH => fail = true,
                    b'{' | b'[' => next.push((t, depth + 1, out(depth == 0 && byte == b'{'))),
                    b'}' | b']' => next.push((t, depth - 1, out(false))),
                    b',' => next.push((t, depth, out(depth == 1))),
                    b'"' if name_next => match name_texts.entry(t).or_insert_with(|| names_from(lang, t).unwrap_or_default()) {
                        texts if texts.is_empty() => fail = true,
                        texts => {
                            for (text, end) in texts.iter() {
                                let mut quoted = Vec::with_capacity(text.len() + 2);
                                quoted.push(b'"');
                                quoted.extend_from_slice(text);
                                quoted.push(b'"');
                                match serde_json::from_slice::<String>(&quoted) {
                                    Ok(name) => {
                                        names.insert(name);
                                    }
                                    Err(_) => fail = true,
                                }
                                next.push((*end, depth, out(false)));
                            }
                        }
                    },
                    b'"' => next.push((t, depth, At::InString)),
                    _ => next.push((t, depth, out(false))),
                },
            }
        });
        if fail || names.len() > MAX_NAMES {
            return None;
        }
        for state in next {
            if seen.insert(state) {
                if seen.len() > MAX_VISITED {
                    return None;
                }
                todo.push(state);
            }
        }
    }
    Some(names)
}

/// The texts of a string from `open` (just after its opening quote) to its closing quote,
/// with the state after that quote; `None` (or empty: none) when they are unbounded or too many.
fn names_from(lang: &Dfa, open: StateId) -> Option<Vec<(Vec<u8>, StateId)>> {
    fn walk(lang: &Dfa, s: StateId, path: &mut Vec<u8>, on_path: &mut Vec<StateId>, out: &mut Vec<(Vec<u8>, StateId)>) -> Option<()> {
        if on_path.contains(&s) || path.len() > MAX_NAME_BYTES || out.len() > MAX_NAMES {
            return None;
        }
        on_path.push(s);
        let mut moves: Vec<(u8, StateId)> = Vec::new();
        lang.for_each_transition(s, |b, t| moves.push((b, t)));
        for (b, t) in moves {
            path.push(b);
            if b == b'"' && path.iter().rev().skip(1).take_while(|&&c| c == b'\\').count() % 2 == 0 {
                out.push((path[..path.len() - 1].to_vec(), t));
            } else {
                walk(lang, t, path, on_path, out)?;
            }
            path.pop();
        }
        on_path.pop();
        Some(())
    }
    let mut out = Vec::new();
    walk(lang, open, &mut Vec::new(), &mut Vec::new(), &mut out)?;
    Some(out)
}
