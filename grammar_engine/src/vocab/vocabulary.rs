//! A model's vocabulary as the grammar core sees it: for every token id, the exact bytes it
//! writes, whether it may ever be sampled under a grammar, and which ids end generation.
//!
//! Vocabularies come from a Hugging Face `tokenizer.json` ([`crate::vocab::tokenizer_json`]) or from
//! the tokenizer stored in a GGUF file ([`crate::vocab::gguf`]). Both are turned into a list of
//! [`TokenSpec`]s here, and the allowed tokens are laid out in a [`TokenTrie`] once, so every
//! grammar compiled against this vocabulary shares it.

use crate::error::{GrammarError, Result};
use crate::util::TokenId;
use crate::vocab::trie::TokenTrie;

/// How a tokenizer writes bytes into token strings. Kept for diagnostics and self-tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// GPT-2 style byte-level BPE (`Ġ` for a space).
    ByteLevel,
    /// SentencePiece style (`▁` for a space, `<0xNN>` byte-fallback tokens).
    SentencePiece,
    /// Token strings are their own UTF-8 bytes.
    Raw,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::ByteLevel => "byte_level",
            Family::SentencePiece => "sentencepiece",
            Family::Raw => "raw",
        }
    }
}

/// One token as a source describes it.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    /// The bytes the token writes into the output.
    pub bytes: Vec<u8>,
    /// Control, unknown, unused or otherwise special: never allowed by a grammar (EOS aside).
    pub special: bool,
}

/// The vocabulary: token bytes, special flags, EOS ids and the shared token trie.
#[derive(Debug)]
pub struct Vocabulary {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    special: Vec<bool>,
    eos: Vec<TokenId>,
    family: Family,
    trie: TokenTrie,
    single_byte: [bool; 256],
    /// Bytes that occur anywhere in an allowed token.
    any_byte: [bool; 256],
}

impl Vocabulary {
    /// Builds a vocabulary of `size` ids. `tokens[i] = None` marks an id with no token (padding
    /// up to the model's embedding size); it is never allowed.
    pub fn new(tokens: Vec<Option<TokenSpec>>, eos: Vec<TokenId>, family: Family, size: Option<usize>) -> Result<Self> {
        let size = size.unwrap_or(tokens.len());
        if size < tokens.len() {
            return Err(GrammarError::vocab(format!(
                "vocab_size {size} is smaller than the tokenizer's {} tokens",
                tokens.len()
            )));
        }
        if size == 0 {
            return Err(GrammarError::vocab("the tokenizer has no tokens"));
        }
        if size > u32::MAX as usize / 2 {
            return Err(GrammarError::vocab(format!("vocab_size {size} is too large")));
        }
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(size + 1);
        let mut special = Vec::with_capacity(size);
        offsets.push(0u32);
        for i in 0..size {
            match tokens.get(i).and_then(|t| t.as_ref()) {
                Some(t) => {
                    bytes.extend_from_slice(&t.bytes);
                    special.push(t.special || t.bytes.is_empty());
                }
                None => special.push(true),
            }
            if bytes.len() > u32::MAX as usize {
                return Err(GrammarError::vocab("token bytes exceed 4 GiB"));
            }
            offsets.push(bytes.len() as u32);
        }
        let mut eos_ids: Vec<TokenId> = Vec::new();
        for id in eos {
            if id.as_usize() >= size {
                return Err(GrammarError::vocab(format!("EOS id {id} is outside the vocabulary of {size}")));
            }
            if !eos_ids.contains(&id) {
                eos_ids.push(id);
            }
            // EOS ends generation; it is never text a grammar could match.
            special[id.as_usize()] = true;
        }
        let mut single_byte = [false; 256];
        let mut any_byte = [false; 256];
        let mut candidates = Vec::new();
        for id in 0..size {
            if special[id] {
                continue;
            }
            let b = &bytes[offsets[id] as usize..offsets[id + 1] as usize];
            if b.len() == 1 {
                single_byte[b[0] as usize] = true;
            }
            for &x in b {
                any_byte[x as usize] = true;
            }
            candidates.push(TokenId::new(id as u32));
        }
        let trie = TokenTrie::build(&candidates, |id| &bytes[offsets[id.as_usize()] as usize..offsets[id.as_usize() + 1] as usize])?;
        Ok(Vocabulary { bytes, offsets, special, eos: eos_ids, family, trie, single_byte, any_byte })
    }

    /// Number of token ids (the width of a mask in bits).
    pub fn size(&self) -> usize {
        self.special.len()
    }

    /// The bytes token `id` writes, or `None` past the end.
    pub fn token_bytes(&self, id: TokenId) -> Option<&[u8]> {
        let i = id.as_usize();
        if i >= self.size() {
            return None;
        }
        Some(&self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }

    /// True for ids a grammar never allows (EOS is handled separately).
    pub fn is_special(&self, id: TokenId) -> bool {
        self.special.get(id.as_usize()).copied().unwrap_or(true)
    }

    /// The ids of the tokens whose text is exactly `bytes`: special ones first, then ordinary
    /// ones, ascending within each group (a linear scan, for resolving a token named in a
    /// structure spec).
    pub fn find_tokens(&self, bytes: &[u8]) -> Vec<TokenId> {
        let matching = (0..self.size() as u32).map(TokenId::new).filter(|&id| self.token_bytes(id) == Some(bytes));
        let (mut special, ordinary): (Vec<TokenId>, Vec<TokenId>) = matching.partition(|&id| self.is_special(id));
        special.extend(ordinary);
        special
    }

    pub fn eos_ids(&self) -> &[TokenId] {
        &self.eos
    }

    pub fn is_eos(&self, id: TokenId) -> bool {
        self.eos.contains(&id)
    }

    pub fn family(&self) -> Family {
        self.family
    }

    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// True when byte `b` is written by some single allowed token. When every byte a grammar
    /// uses is covered, any byte path can be spelled token by token, so byte-level liveness
    /// equals token-level liveness.
    pub fn covers_byte(&self, b: u8) -> bool {
        self.single_byte[b as usize]
    }

    /// Which bytes occur in some allowed token. A grammar's strings that need any other byte
    /// can never be written, so the DFA drops them before indexing.
    pub fn producible_bytes(&self) -> &[bool; 256] {
        &self.any_byte
    }

    /// Number of tokens a grammar may allow (not special, not empty).
    pub fn num_candidates(&self) -> usize {
        self.trie.num_tokens()
    }

    /// Heap bytes held by the vocabulary and its trie.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.len() + self.offsets.len() * 4 + self.special.len() + self.trie.memory_bytes()
    }
}

/// Names of control tokens that end a turn or a document in common chat models. A vocabulary
/// that names no EOS id explicitly falls back to these.
pub const END_TOKEN_NAMES: &[&str] = &[
    "</s>",
    "<eos>",
    "<|endoftext|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
    "<|end|>",
];
