//! Vocabularies: building one from token specs, and reading `tokenizer.json` and GGUF
//! headers into token specs.

use std::io::Write;

use grammar_engine::{
    gguf_tokenizer, parse_tokenizer_json, read_gguf_metadata, resolve_eos, Family, TokenId, TokenSpec, Vocabulary,
};


fn t(id: u32) -> TokenId {
    TokenId::new(id)
}

fn spec(s: &str, special: bool) -> Option<TokenSpec> {
    Some(TokenSpec { bytes: s.as_bytes().to_vec(), special })
}

#[test]
fn specials_empty_and_holes_are_never_candidates() {
    let v = Vocabulary::new(
        vec![spec("a", false), spec("<s>", true), spec("", false), None, spec("ab", false)],
        vec![TokenId::new(1)],
        Family::Raw,
        Some(8),
    )
    .unwrap();
    assert_eq!(v.size(), 8);
    assert!(v.is_special(t(1)) && v.is_special(t(2)) && v.is_special(t(3)) && v.is_special(t(7)));
    assert!(!v.is_special(t(0)) && !v.is_special(t(4)));
    assert_eq!(v.num_candidates(), 2);
    assert!(v.covers_byte(b'a') && !v.covers_byte(b'b'));
    assert_eq!(v.token_bytes(t(4)), Some(&b"ab"[..]));
    assert_eq!(v.token_bytes(t(8)), None);
}

#[test]
fn tokens_are_found_by_text_special_first() {
    let v = Vocabulary::new(vec![spec("<x>", false), spec("a", false), spec("<x>", true), spec("</s>", true)], vec![t(3)], Family::Raw, None)
        .unwrap();
    assert_eq!(v.find_tokens(b"<x>"), vec![t(2), t(0)]);
    assert_eq!(v.find_tokens(b"a"), vec![t(1)]);
    assert!(v.find_tokens(b"b").is_empty());
}

#[test]
fn bad_sizes_and_eos_are_errors() {
    assert!(Vocabulary::new(vec![spec("a", false)], vec![t(5)], Family::Raw, None).is_err());
    assert!(Vocabulary::new(vec![spec("a", false), spec("b", false)], vec![], Family::Raw, Some(1)).is_err());
    assert!(Vocabulary::new(vec![], vec![], Family::Raw, None).is_err());
}


#[test]
fn byte_level_and_added_tokens() {
    let j = r#"{"added_tokens":[{"id":3,"content":"<|im_end|>","special":true},{"id":4,"content":"<tool>","special":false}],
        "decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0,"Ġb":1,"Ċ":2},"merges":[]}}"#;
    let p = parse_tokenizer_json(j).unwrap();
    assert_eq!(p.family, Family::ByteLevel);
    assert_eq!(p.tokens[1].as_ref().unwrap().bytes, b" b");
    assert_eq!(p.tokens[2].as_ref().unwrap().bytes, b"\n");
    assert!(p.tokens[3].as_ref().unwrap().special);
    assert!(!p.tokens[4].as_ref().unwrap().special);
    assert_eq!(resolve_eos(&p, &[]), vec![TokenId::new(3)]);
}

#[test]
fn sentencepiece_byte_fallback() {
    let j = r#"{"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]},
        "model":{"type":"BPE","byte_fallback":true,"vocab":{"<0x0A>":0,"▁hi":1,"é":2}}}"#;
    let p = parse_tokenizer_json(j).unwrap();
    assert_eq!(p.family, Family::SentencePiece);
    assert_eq!(p.tokens[0].as_ref().unwrap().bytes, b"\n");
    assert_eq!(p.tokens[1].as_ref().unwrap().bytes, b" hi");
    assert_eq!(p.tokens[2].as_ref().unwrap().bytes, "é".as_bytes());
}

#[test]
fn malformed_files_are_errors() {
    assert!(parse_tokenizer_json("{").is_err());
    assert!(parse_tokenizer_json("{}").is_err());
    assert!(parse_tokenizer_json(r#"{"model":{"type":"WordPiece","vocab":{}}}"#).is_err());
    assert!(parse_tokenizer_json(r#"{"model":{"type":"BPE","vocab":{"a":"x"}}}"#).is_err());
}


fn push_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

#[test]
fn reads_a_small_header_and_its_tokenizer() {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&4u64.to_le_bytes());
    push_str(&mut b, "tokenizer.ggml.model");
    b.extend_from_slice(&8u32.to_le_bytes());
    push_str(&mut b, "llama");
    push_str(&mut b, "tokenizer.ggml.tokens");
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&3u64.to_le_bytes());
    for t in ["<eos>", "<0x41>", "\u{2581}hi"] {
        push_str(&mut b, t);
    }
    push_str(&mut b, "tokenizer.ggml.token_type");
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&5u32.to_le_bytes());
    b.extend_from_slice(&3u64.to_le_bytes());
    for t in [3i32, 6, 1] {
        b.extend_from_slice(&t.to_le_bytes());
    }
    push_str(&mut b, "tokenizer.ggml.eos_token_id");
    b.extend_from_slice(&4u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    let dir = std::env::temp_dir().join(format!("onyx-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.gguf");
    std::fs::File::create(&path).unwrap().write_all(&b).unwrap();
    let meta = read_gguf_metadata(&path).unwrap();
    let (specs, family, eos) = gguf_tokenizer(&meta).unwrap();
    assert_eq!(family, Family::SentencePiece);
    assert!(specs[0].as_ref().unwrap().special);
    assert_eq!(specs[1].as_ref().unwrap().bytes, b"A");
    assert_eq!(specs[2].as_ref().unwrap().bytes, b" hi");
    assert_eq!(eos, vec![TokenId::new(0)]);
    // Cut short inside the header: a clear error, no panic.
    std::fs::File::create(&path).unwrap().write_all(&b[..b.len() - 3]).unwrap();
    assert!(read_gguf_metadata(&path).is_err());
    std::fs::File::create(&path).unwrap().write_all(b"NOPE").unwrap();
    assert!(read_gguf_metadata(&path).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
