//! A grammar compiled against a vocabulary, and its token index.
//!
//! * `grammar`: [`Grammar`], the step API the decoding loop calls once per token;
//! * `index`: one state's row of the token index (mask and next states), found by one walk
//!   over the vocabulary's token trie;
//! * `rows`: the rows kept by state within the index's byte budget.

#[allow(clippy::module_inception)]
mod grammar;
pub(crate) mod index;
pub(crate) mod rows;

pub(crate) use grammar::OUTSIDE_VOCABULARY;
pub use grammar::{Bitmask, Grammar, GrammarConfig, DEFAULT_MAX_INDEX_BYTES};
pub use index::Row;
