//! A multiplicative hasher for integer keys (FxHash-style), for hot maps whose keys are ids.
//!
//! The standard library's SipHash resists collision attacks that do not apply to ids made
//! inside the engine, and costs several times more per lookup: determinizing a large schema
//! looks up one id per transition, millions of times.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes integers by rotating, xoring and multiplying; other bytes one at a time.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    /// Rotated so that the well-mixed high bits of the product land where hash tables take
    /// their bucket index from (ids that are multiples of a power of two would otherwise
    /// share their low bits).
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A `HashMap` keyed by integers (or types that hash as integers), hashed by [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_small_keys_hash_apart() {
        let hash = |x: u32| {
            let mut h = IntHasher::default();
            h.write_u32(x);
            h.finish()
        };
        let hashes: std::collections::HashSet<u64> = (0..10_000).map(hash).collect();
        assert_eq!(hashes.len(), 10_000);
        // Multiples of 256 still spread over the low bits a table indexes by.
        let low: std::collections::HashSet<u64> = (0..1_000).map(|i| hash(i << 8) & 1023).collect();
        assert!(low.len() > 500, "{} distinct low parts", low.len());
        let mut m: IntMap<u32, u32> = IntMap::default();
        m.insert(7, 1);
        assert_eq!(m.get(&7), Some(&1));
        assert_eq!(m.get(&8), None);
    }
}
