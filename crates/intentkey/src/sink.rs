//! Where the normalizers write: a `String`, or straight into the bytes of a
//! key's material (no text of its own per field, no copy).

use std::fmt;

/// Text appended in order. Implemented by `String` and by [`Bytes`].
pub(crate) trait Sink: fmt::Write {
    /// How many bytes are written so far.
    fn len(&self) -> usize;
    /// Appends one character.
    fn push(&mut self, c: char);
    /// Appends a string.
    fn push_str(&mut self, s: &str);
    /// Appends ASCII bytes, such as the digits the decimal parser took.
    /// Only ASCII may be passed: the two writers would write other bytes
    /// differently (a `String` as Latin-1 characters, the material as they
    /// are).
    fn push_ascii(&mut self, bytes: &[u8]);
    /// Lowers the ASCII letters written from byte `start` on.
    fn ascii_lowercase_from(&mut self, start: usize);
}

impl Sink for String {
    #[inline]
    fn len(&self) -> usize {
        String::len(self)
    }

    #[inline]
    fn push(&mut self, c: char) {
        String::push(self, c);
    }

    #[inline]
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }

    #[inline]
    fn push_ascii(&mut self, bytes: &[u8]) {
        self.extend(bytes.iter().map(|&b| char::from(b)));
    }

    #[inline]
    fn ascii_lowercase_from(&mut self, start: usize) {
        self[start..].make_ascii_lowercase();
    }
}

/// The bytes of a material, written as UTF-8 text.
pub(crate) struct Bytes<'a>(pub(crate) &'a mut Vec<u8>);

impl fmt::Write for Bytes<'_> {
    #[inline]
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl Sink for Bytes<'_> {
    #[inline]
    fn len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    fn push(&mut self, c: char) {
        if c.is_ascii() {
            self.0.push(c as u8);
        } else {
            self.0
                .extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }

    #[inline]
    fn push_str(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn push_ascii(&mut self, bytes: &[u8]) {
        debug_assert!(bytes.is_ascii());
        self.0.extend_from_slice(bytes);
    }

    #[inline]
    fn ascii_lowercase_from(&mut self, start: usize) {
        self.0[start..].make_ascii_lowercase();
    }
}
