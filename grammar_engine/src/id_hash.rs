//! A hash for maps keyed by state ids.
//!
//! Determinization and automaton products look up every transition's target in a map from
//! state ids (one `u32`, or a pair) to dense ids. The standard SipHash is built to resist
//! adversarial keys, which these are not, and it showed as a sixth of a large schema's compile
//! time. This one multiplies each word into the state by an odd constant and folds the high
//! half down, so that ids that are multiples of a power of two (as `regex-automata`'s lazy
//! state ids are) still spread over the table.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The hasher of [`IdMap`]: for keys made of a few integers.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_are_multiples_of_a_power_of_two_spread_over_the_low_bits() {
        let mut buckets = [0u32; 64];
        for i in 0..64_000u32 {
            let mut h = IdHasher::default();
            h.write_u32(i * 256);
            buckets[(h.finish() & 63) as usize] += 1;
        }
        // 1,000 each if uniform.
        assert!(buckets.iter().all(|&n| (700..1300).contains(&n)), "{buckets:?}");
    }

    #[test]
    fn a_map_keyed_by_pairs() {
        let mut m: IdMap<(u32, u32), u32> = IdMap::default();
        for a in 0..100 {
            for b in 0..100 {
                m.insert((a, b), a * 100 + b);
            }
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m[&(42, 7)], 4207);
    }
}
