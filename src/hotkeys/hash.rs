//! A fast seeded hash of a command, key and node, eight bytes at a time: only sampled commands
//! hash, but SipHash (std's) was about half of what a sample cost for a short key and its
//! node. Collisions merge two keys' counts in the report, nothing worse; the seed
//! is random per process.

/// The multiplier of FxHash (the golden ratio in 64 bits).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes `parts` (each with its length, so `("ab", "c")` and `("a", "bc")` differ).
pub(super) fn hash(seed: u64, parts: [&[u8]; 3]) -> u64 {
    let mut h = seed;
    for part in parts {
        let mut chunks = part.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            h = mix(h, u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(word) ^ ((part.len() as u64) << 56));
    }
    // Fold the high bits into the low ones: the sketch's index uses the low bits.
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^ (h >> 29)
}

/// FxHash's step: rotate, xor in the next word, multiply.
fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(K)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_lengths_are_told_apart_and_the_seed_matters() {
        let a = hash(1, [b"get", b"user:1", b"127.0.0.1:7000"]);
        assert_eq!(a, hash(1, [b"get", b"user:1", b"127.0.0.1:7000"]));
        assert_ne!(a, hash(1, [b"get", b"user:2", b"127.0.0.1:7000"]));
        assert_ne!(a, hash(1, [b"set", b"user:1", b"127.0.0.1:7000"]));
        assert_ne!(a, hash(1, [b"get", b"user:1", b"127.0.0.1:7001"]));
        assert_ne!(hash(1, [b"ab", b"c", b""]), hash(1, [b"a", b"bc", b""]));
        assert_ne!(hash(1, [b"", b"", b""]), hash(1, [b"\0", b"", b""]));
        assert_ne!(a, hash(2, [b"get", b"user:1", b"127.0.0.1:7000"]));
        // Keys differing only past the first eight bytes, and low bits spread.
        let low: std::collections::HashSet<u64> = (0..1000)
            .map(|i| hash(7, [b"get", format!("prefix:long:{i}").as_bytes(), b""]) & 1023)
            .collect();
        assert!(low.len() > 550, "{}", low.len());
    }
}
