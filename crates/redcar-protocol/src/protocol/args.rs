//! A request's arguments as offsets into its raw bytes, and the borrowed view commands read them
//! through.
//!
//! Each argument used to be a `Bytes` slice of the request: two reference-count updates (atomic
//! adds) per argument per command and 32 bytes each in the request. An argument is now 8 bytes
//! of offsets; code that keeps an argument beyond the request takes a zero-copy `Bytes` of it
//! with [`Args::bytes`].

use std::fmt;
use std::ops::Index;

use bytes::Bytes;

/// Where one argument's payload sits in its request's raw bytes. A request's raw bytes never
/// exceed `u32::MAX` (the parser refuses longer ones), so 32 bits hold any offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    /// Offset of the argument's first byte in the request.
    start: u32,
    /// The argument's length in bytes.
    len: u32,
}

impl Span {
    /// The span of `start..end`; `None` past `u32::MAX`.
    #[inline]
    pub(super) fn new(start: usize, end: usize) -> Option<Span> {
        Some(Span {
            start: u32::try_from(start).ok()?,
            len: u32::try_from(end.checked_sub(start)?).ok()?,
        })
    }

    #[inline]
    fn range(self) -> std::ops::Range<usize> {
        let start = self.start as usize;
        start..start + self.len as usize
    }
}

/// The arguments of one request, the command name first: a borrowed, copyable view.
#[derive(Clone, Copy)]
pub struct Args<'r> {
    /// The request's bytes, which every span points into.
    raw: &'r Bytes,
    /// The arguments' places in `raw`, the name first.
    spans: &'r [Span],
}

impl<'r> Args<'r> {
    /// A view of `spans` in `raw` (every span lies within `raw`: the request made them so).
    #[inline]
    pub(super) fn new(raw: &'r Bytes, spans: &'r [Span]) -> Args<'r> {
        Args { raw, spans }
    }

    /// How many arguments.
    #[inline]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'r [u8]> {
        let span = self.spans.get(i)?;
        self.raw.get(span.range())
    }

    /// The first argument (the command name, unless [`skip`](Self::skip)ped).
    #[inline]
    pub fn first(&self) -> Option<&'r [u8]> {
        self.get(0)
    }

    /// The last argument.
    pub fn last(&self) -> Option<&'r [u8]> {
        self.get(self.len().checked_sub(1)?)
    }

    /// Argument `i` as its own `Bytes`, sharing the request's memory: for keeping it.
    pub fn bytes(&self, i: usize) -> Option<Bytes> {
        let span = self.spans.get(i)?;
        let range = span.range();
        (range.end <= self.raw.len()).then(|| self.raw.slice(range))
    }

    /// The arguments from `n` on (none when there are fewer).
    #[inline]
    pub fn skip(&self, n: usize) -> Args<'r> {
        Args {
            raw: self.raw,
            spans: self.spans.get(n..).unwrap_or_default(),
        }
    }

    /// The arguments before `n` (all of them when there are fewer).
    pub fn take(&self, n: usize) -> Args<'r> {
        Args {
            raw: self.raw,
            spans: &self.spans[..n.min(self.spans.len())],
        }
    }

    /// Each argument, in order.
    pub fn iter(&self) -> Iter<'r> {
        Iter {
            raw: self.raw,
            spans: self.spans.iter(),
        }
    }

    /// Every argument as its own `Bytes` (zero-copy), for keeping them.
    pub fn to_bytes(self) -> Vec<Bytes> {
        (0..self.len()).filter_map(|i| self.bytes(i)).collect()
    }
}

impl Index<usize> for Args<'_> {
    type Output = [u8];

    /// Argument `i`; panics when there is none, like a slice (callers check `len` first).
    #[inline]
    fn index(&self, i: usize) -> &[u8] {
        &self.raw[self.spans[i].range()]
    }
}

impl<'r> IntoIterator for Args<'r> {
    type Item = &'r [u8];
    type IntoIter = Iter<'r>;

    fn into_iter(self) -> Iter<'r> {
        self.iter()
    }
}

impl fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|a| a.escape_ascii().to_string()))
            .finish()
    }
}

/// The arguments of an [`Args`], in order.
#[derive(Clone)]
pub struct Iter<'r> {
    /// As in [`Args`].
    raw: &'r Bytes,
    /// The spans not yet handed out.
    spans: std::slice::Iter<'r, Span>,
}

impl<'r> Iterator for Iter<'r> {
    type Item = &'r [u8];

    #[inline]
    fn next(&mut self) -> Option<&'r [u8]> {
        let span = self.spans.next()?;
        Some(&self.raw[span.range()])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(raw: &Bytes, words: &[&str]) -> Vec<Span> {
        let text = std::str::from_utf8(raw).expect("utf-8");
        words
            .iter()
            .map(|w| {
                let start = text.find(w).expect("in raw");
                Span::new(start, start + w.len()).expect("fits")
            })
            .collect()
    }

    #[test]
    fn a_view_reads_each_argument_and_its_parts() {
        let raw = Bytes::from_static(b"SET key value");
        let spans = spans(&raw, &["SET", "key", "value"]);
        let args = Args::new(&raw, &spans);
        assert_eq!(args.len(), 3);
        assert_eq!(&args[1], b"key");
        assert_eq!(args.first(), Some(&b"SET"[..]));
        assert_eq!(args.last(), Some(&b"value"[..]));
        assert_eq!(args.get(3), None);
        assert_eq!(
            args.skip(1).iter().collect::<Vec<_>>(),
            [&b"key"[..], b"value"]
        );
        assert_eq!(
            args.take(2).iter().collect::<Vec<_>>(),
            [&b"SET"[..], b"key"]
        );
        assert!(args.skip(5).is_empty());
        assert_eq!(args.take(9).len(), 3);
        assert_eq!(format!("{:?}", args.take(1)), "[\"SET\"]");
    }

    #[test]
    fn kept_arguments_share_the_requests_memory() {
        let raw = Bytes::from_static(b"GET k");
        let spans = spans(&raw, &["GET", "k"]);
        let args = Args::new(&raw, &spans);
        let key = args.bytes(1).expect("there");
        assert_eq!(key.as_ptr(), raw[4..].as_ptr());
        assert_eq!(args.to_bytes(), [Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(args.bytes(2), None);
    }

    #[test]
    fn a_span_past_32_bits_is_refused() {
        assert_eq!(Span::new(0, 5).map(Span::range), Some(0..5));
        assert_eq!(Span::new(1 << 32, (1 << 32) + 1), None);
        assert_eq!(Span::new(0, 1 << 32), None);
        assert_eq!(Span::new(5, 4), None);
    }
}
