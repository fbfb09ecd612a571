//! The byte alphabet of byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM...).
//!
//! Byte-level tokenizers store every token as a string over 256 printable code points, one per
//! byte: printable ASCII and Latin-1 bytes stand for themselves, the other 68 bytes are shifted
//! to U+0100 and up (so a space is `Ġ` and a newline `Ċ`). Decoding a token means mapping each
//! code point back to its byte.

/// Returns the code point that stands for `byte` in the byte-level alphabet.
pub fn byte_to_char(byte: u8) -> char {
    let b = byte as u32;
    let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    if printable {
        return char::from_u32(b).unwrap_or('\u{FFFD}');
    }
    // Non-printable bytes are numbered in increasing byte order from U+0100.
    let rank = (0..byte).filter(|&x| !is_printable(x)).count() as u32;
    char::from_u32(0x100 + rank).unwrap_or('\u{FFFD}')
}

fn is_printable(byte: u8) -> bool {
    matches!(byte, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// Inverse table: code point → byte, for the 256 code points of the alphabet.
pub struct ByteDecoder {
    /// Indexed by code point; code points above U+01FF never occur in the alphabet.
    table: [i16; 0x200],
}

impl ByteDecoder {
    pub fn new() -> Self {
        let mut table = [-1i16; 0x200];
        for b in 0..=255u8 {
            table[byte_to_char(b) as usize] = b as i16;
        }
        ByteDecoder { table }
    }

    /// Decodes a byte-level token string, or `None` if it holds a code point outside the
    /// alphabet (then it is not a byte-level token: an added token written as plain text).
    pub fn decode(&self, token: &str) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(token.len());
        for c in token.chars() {
            let cp = c as usize;
            let b = *self.table.get(cp)?;
            if b < 0 {
                return None;
            }
            out.push(b as u8);
        }
        Some(out)
    }
}

impl Default for ByteDecoder {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabet_is_a_bijection_with_known_points() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        let d = ByteDecoder::new();
        for b in 0..=255u8 {
            assert_eq!(d.decode(&byte_to_char(b).to_string()), Some(vec![b]));
        }
        assert_eq!(d.decode("Ġhello"), Some(b" hello".to_vec()));
        assert_eq!(d.decode("日本"), None);
    }
}
