//! Byte automata: the [`Dfa`] every grammar compiles to, and how one is built.
//!
//! One algorithm per file, each behind the face documented at its top:
//!
//! * `dfa`: the table and its step API (`next`, `walk`, acceptance, byte distances);
//! * `config`, `budget`: the limits a construction runs under, and how they are checked;
//! * `parse`: regex parsing with located errors;
//! * `build`: regex → Thompson NFA → DFA; `lazy`: the same through `regex-automata`'s lazy
//!   DFA, for patterns with look-around assertions;
//! * `subset`: the subset construction over any byte NFA;
//! * `prune`: a raw table to live states with byte distances; `minimize`: partition
//!   refinement over transitions (Valmari and Lehtinen), or `acyclic`: hashing in postorder
//!   (Revuz) for a table without cycles;
//! * `cut`: removing bytes from a DFA;
//! * `glued_nfa`: whole DFAs glued by empty moves, the NFA of an automaton expression;
//! * `algebra`: automaton expressions (concatenation, union, repetition, intersection,
//!   difference) compiled to one DFA;
//! * `regex_memo`: regexes already built during one compilation, and small ones in the process;
//!   `regex_tree`: a regex-only expression's syntax tree from its leaves', each parsed once.

mod acyclic;
pub(crate) mod algebra;
pub(crate) mod calls;
mod budget;
mod build;
mod config;
mod cut;
mod dfa;
pub(crate) mod glued_nfa;
mod lazy;
mod minimize;
pub(crate) mod parse;
mod prune;
pub(crate) mod regex_memo;
pub(crate) mod regex_tree;
pub(crate) mod subset;

#[cfg(test)]
mod tests;

pub use algebra::Expr;
pub use budget::{thread_cpu_time, CpuDeadline, Deadline};
pub use config::DfaConfig;
pub use dfa::Dfa;
pub use regex_memo::RegexMemo;
