//! Readers cut every string they take from a dump to `MAX_STRING_BYTES` while it is parsed,
//! so that no view or report carries more than that of one string however long the dump's
//! is, and a long string in a dump never costs its length in memory twice. Real strings are
//! far shorter: the longest in the recorded H200 dumps is a demangled PyTorch kernel name of
//! 5,234 bytes; host names are at most 64 bytes, NVTX names 63 (the shim cuts them).
//!
//! The cut is made by a deserializer that wraps serde_json's (`Capped`): it hands every
//! string to the type being built already cut, whichever field it is in, so a field added
//! to the format later is covered without a line here.

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use std::borrow::Cow;
use std::fmt;

/// The most bytes of one string a reader keeps, before `CUT_MARKER`.
pub const MAX_STRING_BYTES: usize = 8 << 10;
/// What ends a string that was cut.
pub const CUT_MARKER: &str = "…[cut]";

/// `s` when it fits in `MAX_STRING_BYTES`; else its longest prefix that fits and ends at a
/// character boundary, followed by `CUT_MARKER`.
pub fn cut(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_STRING_BYTES {
        return Cow::Borrowed(s);
    }
    let mut end = MAX_STRING_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{CUT_MARKER}", &s[..end]))
}

/// A command line cut to `MAX_STRING_BYTES` in all: the arguments that fit whole, then the
/// first one that does not, cut to the bytes left (and so ending in `CUT_MARKER`). A dump
/// can hold any number of arguments, each within the limit on its own.
pub fn cut_args(args: Vec<String>) -> Vec<String> {
    let mut left = MAX_STRING_BYTES;
    let mut kept = Vec::new();
    for arg in args {
        if arg.len() <= left {
            left -= arg.len();
            kept.push(arg);
            continue;
        }
        let mut end = left;
        while !arg.is_char_boundary(end) {
            end -= 1;
        }
        kept.push(format!("{}{CUT_MARKER}", &arg[..end]));
        break;
    }
    kept
}

/// Parses `T` from JSON text with every string in it cut (`cut`).
pub fn from_json<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let mut json = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(Capped(&mut json))?;
    json.end()?;
    Ok(value)
}

/// Parses `T` from a reader of JSON text with every string in it cut (`cut`).
pub fn from_reader<T: DeserializeOwned>(reader: impl std::io::Read) -> serde_json::Result<T> {
    let mut json = serde_json::Deserializer::from_reader(reader);
    let value = T::deserialize(Capped(&mut json))?;
    json.end()?;
    Ok(value)
}

/// A deserializer, visitor, access or seed that passes everything through to the one it
/// wraps, wrapping in turn whatever that hands on, except strings, which it cuts.
struct Capped<T>(T);

/// `Deserializer` methods that take only a visitor.
macro_rules! forward_deserialize {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Capped(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Capped<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Capped(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Capped(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Capped(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Capped(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, Capped(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Capped(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// `Visitor` methods whose value is passed on as it is.
macro_rules! forward_visit {
    ($($method:ident($ty:ty))*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.0.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Capped<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    forward_visit! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_f64(f64) visit_char(char)
        visit_bytes(&[u8]) visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        match cut(v) {
            Cow::Borrowed(v) => self.0.visit_str(v),
            Cow::Owned(v) => self.0.visit_string(v),
        }
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        match cut(v) {
            Cow::Borrowed(v) => self.0.visit_borrowed_str(v),
            Cow::Owned(v) => self.0.visit_string(v),
        }
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        match cut(&v) {
            Cow::Borrowed(_) => self.0.visit_string(v),
            Cow::Owned(cut) => self.0.visit_string(cut),
        }
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Capped(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Capped(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Capped(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Capped(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(Capped(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Capped<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Capped(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Capped<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Capped(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Capped<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Capped(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Capped(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Capped<A> {
    type Error = A::Error;
    type Variant = Capped<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Capped<A::Variant>), A::Error> {
        let (value, variant) = self.0.variant_seed(Capped(seed))?;
        Ok((value, Capped(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Capped<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Capped(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Capped(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Capped(visitor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    enum Kind {
        Named(String),
        Pair(String, u32),
        Point { label: String },
        Plain,
    }

    /// Strings at every depth and in every shape serde builds: fields, options, lists,
    /// tuples, map keys, enum variants; numbers and the rest pass unchanged.
    #[derive(Debug, Deserialize, PartialEq)]
    struct Nested {
        name: String,
        maybe: Option<String>,
        list: Vec<(String, String)>,
        map: std::collections::BTreeMap<String, u64>,
        kinds: Vec<Kind>,
        n: u64,
        x: f64,
        yes: bool,
    }

    #[test]
    fn every_string_is_cut_at_a_character_boundary_with_the_marker() {
        // 'é' is two bytes: the limit falls inside the last one.
        let long = format!("{}é{}", "a".repeat(MAX_STRING_BYTES - 1), "b".repeat(100));
        let cut_long = format!("{}{CUT_MARKER}", "a".repeat(MAX_STRING_BYTES - 1));
        let escaped = long.replace('a', "\\u0061");
        let mut map = serde_json::Map::new();
        map.insert(long.clone(), 3.into());
        let text = serde_json::json!({
            "name": long,
            "maybe": long,
            "list": [[long, "short"]],
            "map": map,
            "kinds": [{"Named": long}, {"Pair": [long, 4]}, {"Point": {"label": long}}, "Plain"],
            "n": u64::MAX,
            "x": 0.5,
            "yes": true,
        })
        .to_string()
        // Strings with escapes come to the visitor as scratch copies, not borrowed.
        .replacen(&format!("\"{long}\""), &format!("\"{escaped}\""), 1);
        let parsed: Nested = from_json(&text).unwrap();
        assert_eq!(
            parsed,
            Nested {
                name: cut_long.clone(),
                maybe: Some(cut_long.clone()),
                list: vec![(cut_long.clone(), "short".into())],
                map: [(cut_long.clone(), 3)].into(),
                kinds: vec![
                    Kind::Named(cut_long.clone()),
                    Kind::Pair(cut_long.clone(), 4),
                    Kind::Point { label: cut_long },
                    Kind::Plain
                ],
                n: u64::MAX,
                x: 0.5,
                yes: true,
            }
        );
        let fits = "a".repeat(MAX_STRING_BYTES);
        assert_eq!(cut(&fits), fits);
        assert!(from_json::<Nested>("{} trailing").is_err());
    }

    #[test]
    fn a_command_line_is_cut_in_all() {
        let arg = |n: usize| "x".repeat(n);
        let args = vec![arg(MAX_STRING_BYTES - 10), arg(4), arg(20), arg(1)];
        assert_eq!(
            cut_args(args),
            vec![
                arg(MAX_STRING_BYTES - 10),
                arg(4),
                format!("{}{CUT_MARKER}", arg(6))
            ]
        );
        let short = vec!["python".to_string(), "train.py".to_string()];
        assert_eq!(cut_args(short.clone()), short);
    }
}
