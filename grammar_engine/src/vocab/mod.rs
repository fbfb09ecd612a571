//! Vocabularies: what each token id of a model writes, read from a tokenizer.
//!
//! * `vocabulary`: the [`Vocabulary`] every grammar is compiled against;
//! * `trie`: the token trie a mask computation walks;
//! * `byte_level`: the byte alphabet of byte-level BPE tokenizers;
//! * `tokenizer_json`: reading a Hugging Face `tokenizer.json`;
//! * `gguf`: reading the tokenizer (and the metadata) in a GGUF file's header.

pub(crate) mod byte_level;
pub(crate) mod gguf;
pub(crate) mod tokenizer_json;
pub(crate) mod trie;
mod vocabulary;

pub use vocabulary::{Family, TokenSpec, Vocabulary, END_TOKEN_NAMES};
