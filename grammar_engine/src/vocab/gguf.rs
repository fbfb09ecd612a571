//! Reads the metadata block at the head of a GGUF file, and the tokenizer inside it.
//!
//! A GGUF file starts with `GGUF`, a version, the tensor and key-value counts, then the
//! key-value pairs. Only that header is read (the tensors are not), so a file cut short after
//! its header, as split model packages ship it, still yields its tokenizer.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::error::{GrammarError, Result};
use crate::util::TokenId;
use crate::vocab::tokenizer_json::parse_byte_token;
use crate::vocab::{Family, TokenSpec, END_TOKEN_NAMES};

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    Uint(u64),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<GgufValue>),
}

impl GgufValue {
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::Uint(v) => Some(v),
            GgufValue::Int(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Largest string or array a well-formed header holds; past it the file is corrupt.
const MAX_LEN: u64 = 1 << 30;

/// Reads every metadata key-value pair of the GGUF file at `path`.
pub fn read_metadata(path: &Path) -> Result<BTreeMap<String, GgufValue>> {
    let file = File::open(path).map_err(|e| GrammarError::vocab(format!("cannot open {}: {e}", path.display())))?;
    let mut r = Reader { inner: BufReader::with_capacity(1 << 20, file) };
    let mut magic = [0u8; 4];
    r.fill(&mut magic)?;
    if &magic != b"GGUF" {
        return Err(GrammarError::vocab(format!("{} is not a GGUF file (bad magic)", path.display())));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GrammarError::vocab(format!("GGUF version {version} is not supported (2 and 3 are)")));
    }
    let _tensors = r.u64()?;
    let count = r.u64()?;
    if count > 1 << 20 {
        return Err(GrammarError::vocab(format!("GGUF header claims {count} keys: corrupt file")));
    }
    let mut out = BTreeMap::new();
    for _ in 0..count {
        let key = r.string()?;
        let ty = r.u32()?;
        let value = r.value(ty)?;
        out.insert(key, value);
    }
    Ok(out)
}

struct Reader<R: Read> {
    inner: R,
}

impl<R: Read> Reader<R> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact(buf).map_err(|e| GrammarError::vocab(format!("GGUF header is truncated or unreadable: {e}")))
    }
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }
    fn string(&mut self) -> Result<String> {
        let len = self.u64()?;
        if len > MAX_LEN {
            return Err(GrammarError::vocab(format!("GGUF string of {len} bytes: corrupt file")));
        }
        let mut buf = vec![0u8; len as usize];
        self.fill(&mut buf)?;
        // Token strings are meant to be UTF-8; keep going on a stray byte rather than fail.
        Ok(String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }
    fn value(&mut self, ty: u32) -> Result<GgufValue> {
        Ok(match ty {
            0 => GgufValue::Uint(self.bytes::<1>()?[0] as u64),
            1 => GgufValue::Int(self.bytes::<1>()?[0] as i8 as i64),
            2 => GgufValue::Uint(u16::from_le_bytes(self.bytes()?) as u64),
            3 => GgufValue::Int(i16::from_le_bytes(self.bytes()?) as i64),
            4 => GgufValue::Uint(self.u32()? as u64),
            5 => GgufValue::Int(i32::from_le_bytes(self.bytes()?) as i64),
            6 => GgufValue::Float(f32::from_le_bytes(self.bytes()?) as f64),
            7 => GgufValue::Bool(self.bytes::<1>()?[0] != 0),
            8 => GgufValue::Str(self.string()?),
            9 => {
                let inner = self.u32()?;
                let n = self.u64()?;
                if n > MAX_LEN || inner == 9 && n > 1 << 16 {
                    return Err(GrammarError::vocab(format!("GGUF array of {n} items: corrupt file")));
                }
                let mut items = Vec::with_capacity(n.min(1 << 20) as usize);
                for _ in 0..n {
                    items.push(self.value(inner)?);
                }
                GgufValue::Array(items)
            }
            10 => GgufValue::Uint(self.u64()?),
            11 => GgufValue::Int(i64::from_le_bytes(self.bytes()?)),
            12 => GgufValue::Float(f64::from_le_bytes(self.bytes()?)),
            other => return Err(GrammarError::vocab(format!("unknown GGUF value type {other}"))),
        })
    }
}

/// GGUF token types (llama.cpp's numbering).
const TYPE_NORMAL: u64 = 1;
const TYPE_BYTE: u64 = 6;
const TYPE_USER_DEFINED: u64 = 4;

/// The tokenizer of a GGUF file as token specs, its family and its EOS ids.
pub fn tokenizer_from_metadata(meta: &BTreeMap<String, GgufValue>) -> Result<(Vec<Option<TokenSpec>>, Family, Vec<TokenId>)> {
    let model = meta.get("tokenizer.ggml.model").and_then(GgufValue::as_str).ok_or_else(|| GrammarError::vocab("GGUF has no tokenizer.ggml.model"))?;
    let family = match model {
        "gpt2" => Family::ByteLevel,
        "llama" => Family::SentencePiece,
        other => return Err(GrammarError::vocab(format!("GGUF tokenizer model '{other}' is not supported (gpt2 and llama are)"))),
    };
    let tokens = meta.get("tokenizer.ggml.tokens").and_then(GgufValue::as_array).ok_or_else(|| GrammarError::vocab("GGUF has no tokenizer.ggml.tokens"))?;
    let types = meta.get("tokenizer.ggml.token_type").and_then(GgufValue::as_array);
    let dec = crate::vocab::byte_level::ByteDecoder::new();
    let mut specs = Vec::with_capacity(tokens.len());
    let mut controls: Vec<(&str, TokenId)> = Vec::new();
    for (id, tok) in tokens.iter().enumerate() {
        let s = tok.as_str().ok_or_else(|| GrammarError::vocab(format!("GGUF token {id} is not a string")))?;
        let ty = types.and_then(|t| t.get(id)).and_then(GgufValue::as_u64).unwrap_or(TYPE_NORMAL);
        let spec = match ty {
            TYPE_NORMAL => match family {
                Family::ByteLevel => TokenSpec { bytes: dec.decode(s).unwrap_or_else(|| s.as_bytes().to_vec()), special: false },
                _ => TokenSpec { bytes: s.replace('\u{2581}', " ").into_bytes(), special: false },
            },
            TYPE_BYTE => match parse_byte_token(s) {
                Some(b) => TokenSpec { bytes: vec![b], special: false },
                None => TokenSpec { bytes: s.as_bytes().to_vec(), special: true },
            },
            // User-defined tokens are ordinary text the tokenizer matches whole.
            TYPE_USER_DEFINED => TokenSpec { bytes: s.replace('\u{2581}', " ").into_bytes(), special: false },
            // Unknown (2), control (3), unused (5): never allowed.
            _ => {
                controls.push((s, TokenId::new(id as u32)));
                TokenSpec { bytes: s.as_bytes().to_vec(), special: true }
            }
        };
        specs.push(Some(spec));
    }
    let mut eos = Vec::new();
    for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
        if let Some(id) = meta.get(key).and_then(GgufValue::as_u64) {
            eos.push(TokenId::new(id as u32));
        }
    }
    // Chat models end a turn with a control token the header does not always name as EOS.
    for (name, id) in controls {
        if END_TOKEN_NAMES.contains(&name) && !eos.contains(&id) {
            eos.push(id);
        }
    }
    Ok((specs, family, eos))
}
