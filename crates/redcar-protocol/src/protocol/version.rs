//! Which RESP version one connection speaks: RESP2 until its client says `HELLO 3`.

/// The RESP version of a connection. Replies to a RESP3 client carry RESP3's types (maps,
/// sets, doubles, `_` nulls, verbatim strings, push frames); a RESP2 client gets their RESP2
/// forms, exactly as Redis 7 answers each version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// RESP2, every connection's version until `HELLO 3`.
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

impl Protocol {
    /// The version's number, as `HELLO` takes and reports it.
    pub fn number(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }

    /// The version `HELLO <n>` asks for: `Err(false)` when `n` is not an integer, `Err(true)`
    /// for an integer Redis 7 does not speak (it answers the two with different errors).
    pub fn from_hello(arg: &[u8]) -> Result<Protocol, bool> {
        match super::line::parse_i64(arg) {
            Some(2) => Ok(Protocol::Resp2),
            Some(3) => Ok(Protocol::Resp3),
            Some(_) => Err(true),
            None => Err(false),
        }
    }

    /// Whether replies use RESP3's types.
    pub fn is_resp3(self) -> bool {
        self == Protocol::Resp3
    }
}

#[cfg(test)]
mod tests {
    use super::Protocol;

    #[test]
    fn hello_takes_2_and_3_and_tells_other_numbers_from_words() {
        assert_eq!(Protocol::from_hello(b"2"), Ok(Protocol::Resp2));
        assert_eq!(Protocol::from_hello(b"3"), Ok(Protocol::Resp3));
        assert_eq!(Protocol::from_hello(b"4"), Err(true));
        assert_eq!(Protocol::from_hello(b"1"), Err(true));
        assert_eq!(Protocol::from_hello(b"three"), Err(false));
        assert_eq!(Protocol::Resp3.number(), 3);
        assert!(!Protocol::default().is_resp3());
    }
}
