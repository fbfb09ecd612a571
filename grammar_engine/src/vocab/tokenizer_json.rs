//! Reads a Hugging Face `tokenizer.json` into [`TokenSpec`]s.
//!
//! The file says how token strings map to bytes only indirectly, through its decoder: a
//! `ByteLevel` decoder means GPT-2's byte alphabet, a `Replace ▁ → " "` decoder (or `Metaspace`)
//! with `ByteFallback` means SentencePiece with `<0xNN>` byte tokens. Added tokens are written as
//! plain text, and those marked `special` are never allowed by a grammar.

use serde_json::Value;

use crate::vocab::byte_level::ByteDecoder;
use crate::error::{GrammarError, Result};
use crate::util::TokenId;
use crate::vocab::{Family, TokenSpec, END_TOKEN_NAMES};

/// What a `tokenizer.json` holds, before EOS ids are settled.
pub struct ParsedTokenizer {
    pub tokens: Vec<Option<TokenSpec>>,
    pub family: Family,
    /// Special tokens by content, for resolving EOS names.
    pub specials: Vec<(String, TokenId)>,
}

/// Parses the text of a `tokenizer.json`.
pub fn parse(text: &str) -> Result<ParsedTokenizer> {
    let root: Value = serde_json::from_str(text).map_err(|e| GrammarError::vocab(format!("tokenizer.json is not valid JSON: {e}")))?;
    let model = root.get("model").ok_or_else(|| GrammarError::vocab("tokenizer.json has no 'model'"))?;
    let model_type = model.get("type").and_then(Value::as_str).unwrap_or("BPE");
    let family = detect_family(&root, model);
    let byte_fallback = model.get("byte_fallback").and_then(Value::as_bool).unwrap_or(false) || family == Family::SentencePiece;

    // Token string by id, from the model's vocab.
    let mut strings: Vec<Option<String>> = Vec::new();
    let mut put = |id: usize, s: &str| -> Result<()> {
        if id > 16_000_000 {
            return Err(GrammarError::vocab(format!("token id {id} is implausibly large")));
        }
        if strings.len() <= id {
            strings.resize(id + 1, None);
        }
        strings[id] = Some(s.to_string());
        Ok(())
    };
    match model_type {
        "BPE" | "WordLevel" => {
            let vocab = model.get("vocab").and_then(Value::as_object).ok_or_else(|| GrammarError::vocab("model.vocab is not an object"))?;
            for (s, id) in vocab {
                let id = id.as_u64().ok_or_else(|| GrammarError::vocab(format!("token {s:?} has a non-integer id")))?;
                put(id as usize, s)?;
            }
        }
        "Unigram" => {
            let vocab = model.get("vocab").and_then(Value::as_array).ok_or_else(|| GrammarError::vocab("model.vocab is not a list"))?;
            for (id, entry) in vocab.iter().enumerate() {
                let s = entry.get(0).and_then(Value::as_str).ok_or_else(|| GrammarError::vocab(format!("Unigram entry {id} has no piece")))?;
                put(id, s)?;
            }
        }
        other => {
            return Err(GrammarError::vocab(format!(
                "tokenizer model type '{other}' is not supported (BPE, Unigram and WordLevel are)"
            )))
        }
    }

    let bytes_dec = ByteDecoder::new();
    let mut tokens: Vec<Option<TokenSpec>> = strings
        .iter()
        .map(|s| s.as_ref().map(|s| decode_model_token(s, family, byte_fallback, &bytes_dec)))
        .collect();

    // Added tokens are plain text; `special` ones are never allowed.
    let mut specials = Vec::new();
    if let Some(added) = root.get("added_tokens").and_then(Value::as_array) {
        for a in added {
            let id = a.get("id").and_then(Value::as_u64).ok_or_else(|| GrammarError::vocab("added token without an integer id"))? as usize;
            let content = a.get("content").and_then(Value::as_str).ok_or_else(|| GrammarError::vocab("added token without content"))?;
            let special = a.get("special").and_then(Value::as_bool).unwrap_or(false);
            if id > 16_000_000 {
                return Err(GrammarError::vocab(format!("added token id {id} is implausibly large")));
            }
            if tokens.len() <= id {
                tokens.resize(id + 1, None);
            }
            tokens[id] = Some(TokenSpec { bytes: content.as_bytes().to_vec(), special });
            if special {
                specials.push((content.to_string(), TokenId::new(id as u32)));
            }
        }
    }
    Ok(ParsedTokenizer { tokens, family, specials })
}

/// Decodes one token string of the model's vocab to the bytes it writes.
fn decode_model_token(s: &str, family: Family, byte_fallback: bool, dec: &ByteDecoder) -> TokenSpec {
    match family {
        Family::ByteLevel => match dec.decode(s) {
            Some(bytes) => TokenSpec { bytes, special: false },
            // Outside the byte alphabet: a control string such as `<|endoftext|>` left in the
            // model vocab. Its text is its bytes.
            None => TokenSpec { bytes: s.as_bytes().to_vec(), special: false },
        },
        Family::SentencePiece => {
            if byte_fallback {
                if let Some(b) = parse_byte_token(s) {
                    return TokenSpec { bytes: vec![b], special: false };
                }
            }
            TokenSpec { bytes: s.replace('\u{2581}', " ").into_bytes(), special: false }
        }
        Family::Raw => TokenSpec { bytes: s.as_bytes().to_vec(), special: false },
    }
}

/// Parses a SentencePiece byte-fallback token `<0xNN>`.
pub fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn detect_family(root: &Value, model: &Value) -> Family {
    let mut kinds = Vec::new();
    collect_types(root.get("decoder"), &mut kinds);
    collect_types(root.get("pre_tokenizer"), &mut kinds);
    if kinds.iter().any(|k| k == "ByteLevel") {
        return Family::ByteLevel;
    }
    let replaces_meta = root.get("decoder").is_some_and(|d| contains_metaspace_replace(d));
    if replaces_meta || kinds.iter().any(|k| k == "Metaspace" || k == "ByteFallback") || model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
        return Family::SentencePiece;
    }
    Family::Raw
}

fn collect_types(v: Option<&Value>, out: &mut Vec<String>) {
    let Some(v) = v else { return };
    if let Some(t) = v.get("type").and_then(Value::as_str) {
        out.push(t.to_string());
    }
    for key in ["decoders", "pretokenizers"] {
        if let Some(list) = v.get(key).and_then(Value::as_array) {
            for item in list {
                collect_types(Some(item), out);
            }
        }
    }
}

fn contains_metaspace_replace(v: &Value) -> bool {
    if v.get("type").and_then(Value::as_str) == Some("Replace") {
        let pat = v.get("pattern").and_then(|p| p.get("String")).and_then(Value::as_str);
        return pat == Some("\u{2581}");
    }
    v.get("decoders").and_then(Value::as_array).is_some_and(|l| l.iter().any(contains_metaspace_replace))
}

/// Resolves EOS ids: the names given (from `tokenizer_config.json` and friends), else the
/// well-known end-of-turn names among the special tokens.
pub fn resolve_eos(parsed: &ParsedTokenizer, names: &[String]) -> Vec<TokenId> {
    let find = |name: &str| parsed.specials.iter().find(|(c, _)| c == name).map(|(_, id)| *id);
    let mut ids: Vec<TokenId> = names.iter().filter_map(|n| find(n)).collect();
    if ids.is_empty() {
        ids = END_TOKEN_NAMES.iter().filter_map(|n| find(n)).collect();
    }
    ids
}

/// EOS names and ids declared by the files Hugging Face keeps next to `tokenizer.json`:
/// `tokenizer_config.json` (`eos_token`), `generation_config.json` and `config.json`
/// (`eos_token_id`, a number or a list). Missing or unreadable files are skipped.
pub fn eos_from_sidecars(dir: &std::path::Path) -> (Vec<String>, Vec<TokenId>) {
    let read = |name: &str| -> Option<Value> {
        let text = std::fs::read_to_string(dir.join(name)).ok()?;
        serde_json::from_str(&text).ok()
    };
    let mut names = Vec::new();
    if let Some(cfg) = read("tokenizer_config.json") {
        match cfg.get("eos_token") {
            Some(Value::String(s)) => names.push(s.clone()),
            Some(Value::Object(o)) => {
                if let Some(s) = o.get("content").and_then(Value::as_str) {
                    names.push(s.to_string());
                }
            }
            _ => {}
        }
    }
    let mut ids = Vec::new();
    for file in ["generation_config.json", "config.json"] {
        match read(file).as_ref().and_then(|c| c.get("eos_token_id")) {
            Some(Value::Number(n)) => ids.extend(n.as_u64().map(|v| TokenId::new(v as u32))),
            Some(Value::Array(list)) => ids.extend(list.iter().filter_map(Value::as_u64).map(|v| TokenId::new(v as u32))),
            _ => {}
        }
    }
    ids.dedup();
    (names, ids)
}
