//! A key and a node address in a fixed inline buffer, so recording one never allocates.

/// Bytes kept of a key and its node together; longer keys are cut (and marked so).
/// Fixed so a `Counter` has a fixed size and the sketches can be allocated once.
const TEXT_MAX: usize = 120;

/// Longest node address kept (`[IPv6]:port` fits; longer host names are cut).
const NODE_MAX: usize = 56;

/// A key (possibly cut) and a node address.
#[derive(Clone)]
pub(super) struct Text {
    /// The key's kept bytes, then the node's, back to back.
    buf: [u8; TEXT_MAX],
    /// Bytes of `buf` that are the key; `TEXT_MAX` fits a `u8`.
    key_len: u8,
    /// Bytes after the key that are the node address (at most `NODE_MAX`).
    node_len: u8,
    /// The key was longer than what is kept.
    cut: bool,
}

// === impl Text ===

/// Empty key and node: what a counter holds before its first `set`.
impl Default for Text {
    fn default() -> Self {
        Text {
            buf: [0; TEXT_MAX],
            key_len: 0,
            node_len: 0,
            cut: false,
        }
    }
}

/// `key@node`, the key escaped as in `shown_key` (without the cut mark), for test failures.
impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.key().escape_ascii(), self.node())
    }
}

impl Text {
    /// Keeps as much of `key` as fits beside `node`.
    /// The node is kept whole (up to `NODE_MAX`) and the key gets the rest, since a hot key is only
    /// useful with the node it lives on. Called under the shard lock on a counter being reused.
    pub(super) fn set(&mut self, key: &[u8], node: &str) {
        let node = &node.as_bytes()[..node.len().min(NODE_MAX)];
        let room = TEXT_MAX - node.len();
        let kept = key.len().min(room);
        self.buf[..kept].copy_from_slice(&key[..kept]);
        self.buf[kept..kept + node.len()].copy_from_slice(node);
        self.key_len = kept as u8;
        self.node_len = node.len() as u8;
        self.cut = kept < key.len();
    }

    /// The kept bytes of the key, unescaped; compare with `cut` to know whether that is all of it.
    pub(super) fn key(&self) -> &[u8] {
        &self.buf[..self.key_len as usize]
    }

    /// A node address cut inside a UTF-8 character reads as empty rather than panicking; addresses
    /// are ASCII in practice.
    pub(super) fn node(&self) -> &str {
        let start = self.key_len as usize;
        std::str::from_utf8(&self.buf[start..start + self.node_len as usize]).unwrap_or("")
    }

    /// The key as JSON shows it: printable ASCII as is, other bytes escaped (`\xNN`), and `…`
    /// after a key that was cut.
    pub(super) fn shown_key(&self) -> String {
        let mut shown = self.key().escape_ascii().to_string();
        if self.cut {
            shown.push('…');
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_cut_and_marked_and_the_node_kept() {
        let mut text = Text::default();
        text.set(b"user:1", "127.0.0.1:7000");
        assert_eq!(text.key(), b"user:1");
        assert_eq!(text.node(), "127.0.0.1:7000");
        assert!(!text.shown_key().ends_with('…'));
        let long = vec![b'k'; 500];
        text.set(&long, "127.0.0.1:7001");
        assert_eq!(text.key().len(), TEXT_MAX - "127.0.0.1:7001".len());
        assert_eq!(text.node(), "127.0.0.1:7001");
        assert!(text.shown_key().ends_with('…'));
        text.set(b"\x00bin", "");
        assert_eq!(text.shown_key(), "\\x00bin");
    }
}
