//! Key → hash slot: CRC16/XMODEM of the key (or of its `{hash tag}`) modulo 16384.
//!
//! What holds: the slot is exactly the one Redis's `keyHashSlot` computes for the same bytes
//! (the tests check the fast path against a byte-at-a-time reference written the way Redis reads
//! it), because a slot computed differently sends the command to a node that answers MOVED every
//! time. The function is total: any byte string, empty included, has a slot, and nothing here
//! can fail or allocate.

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOT_COUNT: usize = 16384;

/// CRC16/XMODEM (poly 0x1021, init 0), table-driven, as Redis Cluster specifies.
const CRC16_TABLE: [u16; 256] = build_table();

/// Built at compile time: the table is data, not code run at start-up.
const fn build_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC16/XMODEM of `data`.
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ byte)]
    })
}

/// The slot of `key`. Only the part between the first `{` and the next `}` is hashed when that
/// part is non-empty, so `{user1000}.following` and `{user1000}.followers` share a slot.
///
/// Every keyed command passes through here, and most keys have no `{`: one pass computes the
/// whole key's CRC, eight bytes per load and two per table step, and notes whether a `{` is in
/// it at all; only then is the tag looked for.
pub fn key_slot(key: &[u8]) -> u16 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const BRACES: u64 = ONES * b'{' as u64;
    let mut crc = 0u16;
    // A byte of `word ^ BRACES` is zero where the key has a `{`: the zero-byte test flags at
    // least one byte then, and none otherwise (a borrow only flags bytes above a true zero).
    let mut braces = 0u64;
    let mut words = key.chunks_exact(8);
    for chunk in &mut words {
        let word = u64::from_be_bytes(chunk.try_into().unwrap_or([0; 8]));
        let x = word ^ BRACES;
        braces |= x.wrapping_sub(ONES) & !x & HIGHS;
        for shift in [48, 32, 16, 0] {
            let x = crc ^ (word >> shift) as u16;
            crc = CRC16_PAIR_TABLE[usize::from(x >> 8)] ^ CRC16_TABLE[usize::from(x & 0xff)];
        }
    }
    let mut brace = braces != 0;
    for &byte in words.remainder() {
        brace |= byte == b'{';
        crc = (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ byte)];
    }
    if brace {
        if let Some(tag) = hash_tag(key) {
            crc = crc16(tag);
        }
    }
    crc & (SLOT_COUNT as u16 - 1)
}

/// The CRC16 step of a byte followed by a zero byte: `T1[a] = (T0[a] << 8) ^ T0[T0[a] >> 8]`. The
/// CRC is linear, so two bytes `b0 b1` take one step:
/// `crc' = T1[(crc >> 8) ^ b0] ^ T0[(crc & 0xff) ^ b1]`.
const CRC16_PAIR_TABLE: [u16; 256] = build_pair_table();

const fn build_pair_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let t = CRC16_TABLE[i];
        table[i] = (t << 8) ^ CRC16_TABLE[(t >> 8) as usize];
        i += 1;
    }
    table
}

fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = memchr::memchr(b'{', key)?;
    let rest = &key[open + 1..];
    let close = memchr::memchr(b'}', rest)?;
    (close > 0).then(|| &rest[..close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_reference_vector() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    /// `key_slot` as Redis's `keyHashSlot` reads: the tag if non-empty, else the whole key, one
    /// byte per table step.
    fn reference_slot(key: &[u8]) -> u16 {
        crc16(hash_tag(key).unwrap_or(key)) & 16383
    }

    #[test]
    fn key_slot_agrees_with_the_byte_at_a_time_reference() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for len in 0..70 {
            for _ in 0..40 {
                let mut key: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                assert_eq!(key_slot(&key), reference_slot(&key), "{key:?}");
                // And with braces placed at random (a tag, an empty tag, a lone brace).
                if len > 2 {
                    let open = (next() as usize) % len;
                    let close = (next() as usize) % len;
                    key[open] = b'{';
                    key[close] = b'}';
                    assert_eq!(key_slot(&key), reference_slot(&key), "{key:?}");
                }
            }
        }
        for key in [
            &b""[..],
            b"{",
            b"}",
            b"{}",
            b"a{b}",
            b"{a}b",
            b"ab{",
            b"key:000000012345",
        ] {
            assert_eq!(key_slot(key), reference_slot(key), "{key:?}");
        }
    }

    #[test]
    fn hash_tags_share_a_slot() {
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
    }

    #[test]
    fn hash_tag_edge_cases_follow_redis() {
        // Empty tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        // Only the first complete tag counts.
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") & 16383);
        assert_eq!(key_slot(b"foo{bar}{zap}"), crc16(b"bar") & 16383);
        // No closing brace: whole key.
        assert_eq!(key_slot(b"foo{bar"), crc16(b"foo{bar") & 16383);
    }

    #[test]
    fn known_slots_from_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b""), 0);
    }
}
