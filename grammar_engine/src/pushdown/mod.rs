//! Pushdown grammars: rules that call each other, for languages a single DFA cannot hold
//! (recursion without a depth limit: nested JSON, GBNF and Lark grammars).
//!
//! A grammar is a set of rules, each an automaton expression over bytes that may call other
//! rules (a recursive transition network). Rules that are not recursive are inlined, so what
//! remains is a few large DFAs, and a grammar with no recursion stays one DFA with today's step
//! cost. At run time a grammar state is a reading: the current DFA state of each way the text
//! can be read, with its stack of calls, interned so that it is a plain integer.
//!
//! One concept per file:
//! * `rules`: [`RtnBuilder`] and the compiled rules ([`Rtn`]): inlining, calls read back out
//!   of each rule's DFA, productive and nullable rules, the left-recursion check;
//! * `step`: heads, persistent stacks and one byte's step;
//! * `incoming`: a rule's transitions reversed, for the searches back from acceptance;
//! * `bounds`: bytes to the end of a rule and of the text, for budget-aware masks;
//! * `masks`: per rule state, the tokens the rule reads whole, and where tokens leave it;
//! * `runtime`: [`Pda`], the step API (readings as state ids, masks, advance);
//! * `paged`: the append-only store masks are lent out of.

mod bounds;
mod distinct;
mod incoming;
mod masks;
mod paged;
mod rules;
mod runtime;
mod step;

pub use bounds::FAR;
pub(crate) use distinct::Memory;
pub use rules::{Compiled, Rtn, RtnBuilder};
pub use runtime::Pda;
