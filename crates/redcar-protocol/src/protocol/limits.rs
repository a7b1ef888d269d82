//! Bounds on untrusted input so one peer cannot make the parser use unbounded memory or stack.

/// Parser limits. The defaults follow Redis's own server limits so a request Redis would accept
/// passes through the proxy, and one it would reject is rejected with the same message.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest bulk string, in bytes (Redis `proto-max-bulk-len`). Applies to requests and replies.
    pub max_bulk_len: usize,
    /// Most elements in one request's multibulk. Replies are not bounded by this: a reply to
    /// `KEYS *` may legitimately be longer, and its size is bounded by the bytes actually received.
    pub max_array_len: usize,
    /// Longest inline command line, and longest `*`/`$` header line of a request
    /// (Redis `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
    /// Most aggregates nested inside each other in one reply. Bounds the parser's recursion.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_array_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
            max_depth: 64,
        }
    }
}
