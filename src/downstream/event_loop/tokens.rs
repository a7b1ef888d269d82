//! How the loop names what it polls: a kind, a generation and a slab key in one `u64` (mio's
//! token), so a late event or wake for a client or connection that is gone (its slab key reused)
//! is recognised and dropped.

/// What a token names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TokenKind {
    /// A listening socket of the loop.
    Listener,
    /// A client's socket.
    LoopClient,
    /// A node connection of the loop.
    Conn,
    /// The loop itself (the drain's wake-up).
    Loop,
}

const KEY_BITS: u32 = 32;
const GEN_BITS: u32 = 30;
/// One bit of the generation's field stays clear, so no token is the waker's (`u64::MAX`).
const GEN_MASK: u64 = (1 << (GEN_BITS - 1)) - 1;

/// The token of slab entry `key` of `kind`, in its `generation`.
pub(super) fn token(kind: TokenKind, generation: u32, key: usize) -> u64 {
    let kind = match kind {
        TokenKind::Listener => 0u64,
        TokenKind::LoopClient => 1,
        TokenKind::Conn => 2,
        TokenKind::Loop => 3,
    };
    kind << (KEY_BITS + GEN_BITS) | (u64::from(generation) & GEN_MASK) << KEY_BITS | key as u64
}

/// The kind a token names.
#[inline]
pub(super) fn kind(token: u64) -> TokenKind {
    match token >> (KEY_BITS + GEN_BITS) {
        0 => TokenKind::Listener,
        1 => TokenKind::LoopClient,
        2 => TokenKind::Conn,
        _ => TokenKind::Loop,
    }
}

/// The slab key a token names.
#[inline]
pub(super) fn key(token: u64) -> usize {
    (token & ((1 << KEY_BITS) - 1)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gives_back_its_kind_and_key() {
        for kind in [
            TokenKind::Listener,
            TokenKind::LoopClient,
            TokenKind::Conn,
            TokenKind::Loop,
        ] {
            for (generation, key) in [(0, 0), (7, 12), (u32::MAX, u32::MAX as usize)] {
                let t = token(kind, generation, key);
                assert_eq!(super::kind(t), kind);
                assert_eq!(super::key(t), key);
                assert_ne!(t, u64::MAX, "never the waker's token");
            }
        }
        assert_ne!(
            token(TokenKind::LoopClient, 1, 5),
            token(TokenKind::LoopClient, 2, 5)
        );
    }
}
