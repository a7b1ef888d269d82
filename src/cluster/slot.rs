//! Key → hash slot: CRC16/XMODEM of the key (or of its `{hash tag}`) modulo 16384.

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: usize = 16384;

/// CRC16/XMODEM (poly 0x1021, init 0), table-driven, as Redis Cluster specifies.
const CRC16_TABLE: [u16; 256] = build_table();

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
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ byte)]
    })
}

/// The slot of `key`. Only the part between the first `{` and the next `}` is hashed when that
/// part is non-empty, so `{user1000}.following` and `{user1000}.followers` share a slot.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    crc16(hashed) & (SLOT_COUNT as u16 - 1)
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
