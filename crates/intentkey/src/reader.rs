//! Visitors that read JSON in one pass and keep only what a key needs:
//! names borrowed from the text, strings told from other values, and values
//! read and dropped while their nesting is measured.
//!
//! Every container goes through the parser's `deserialize_any`, so the
//! parser's own recursion limit and syntax errors apply exactly as when the
//! text is read into a `serde_json::Value` (no `IgnoredAny`, whose skipping
//! has no recursion limit).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// How serde_json (arbitrary_precision) hands a number to a visitor: as a
/// one-entry map under this key.
pub(crate) const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A member name or a string value, borrowed from the text when it has no
/// escapes.
pub(crate) struct Name<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// A value that is kept when it is a string (`Some`) and read and dropped
/// otherwise (`None`).
pub(crate) struct StringOrOther<'de>(pub(crate) Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for StringOrOther<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringOrOther<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StringOrOther(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StringOrOther(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(StringOrOther(Some(Cow::Owned(v))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(StringOrOther(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(StringOrOther(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(StringOrOther(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(StringOrOther(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(StringOrOther(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                SkipVisitor.visit_seq(seq).map(|_| StringOrOther(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                SkipVisitor.visit_map(map).map(|_| StringOrOther(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A value read and dropped; it holds the value's nesting depth (scalars 1,
/// containers 1 + their deepest item), as `payload::depth` measures a parsed
/// value.
pub(crate) struct Skipped(pub(crate) usize);

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

/// A member name read only to tell serde_json's number token from a name.
struct IsNumberToken(bool);

impl<'de> Deserialize<'de> for IsNumberToken {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IsNumberToken;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, v: &str) -> Result<IsNumberToken, E> {
                Ok(IsNumberToken(v == NUMBER_TOKEN))
            }
        }
        deserializer.deserialize_str(V)
    }
}

pub(crate) struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skipped;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skipped, E> {
        Ok(Skipped(1))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skipped, E> {
        Ok(Skipped(1))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skipped, E> {
        Ok(Skipped(1))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skipped, E> {
        Ok(Skipped(1))
    }
    fn visit_str<E>(self, _: &str) -> Result<Skipped, E> {
        Ok(Skipped(1))
    }
    fn visit_unit<E>(self) -> Result<Skipped, E> {
        Ok(Skipped(1))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skipped, A::Error> {
        let mut deepest = 0;
        while let Some(Skipped(depth)) = seq.next_element()? {
            deepest = deepest.max(depth);
        }
        Ok(Skipped(1 + deepest))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skipped, A::Error> {
        let mut deepest = 0;
        let mut first = true;
        while let Some(IsNumberToken(token)) = map.next_key()? {
            if first && token {
                // serde_json's arbitrary-precision number: a scalar.
                map.next_value::<IgnoredAny>()?;
                return Ok(Skipped(1));
            }
            first = false;
            let Skipped(depth) = map.next_value()?;
            deepest = deepest.max(depth);
        }
        Ok(Skipped(1 + deepest))
    }
}
