//! Every string of a value, gathered into one buffer: a serde
//! `Serializer` that keeps string, char and byte contents (map keys
//! included, as they are serialized too) and drops the rest (numbers,
//! booleans, struct field and enum variant names, which are reel's own).
//! The tripwire scans the buffer once, instead of encoding the fact.

use serde::ser::{self, Serialize};

/// Put between two strings, so a pattern never spans them: `0xFF` is
/// never part of UTF-8 text.
const SEP: u8 = 0xFF;

/// Appends every string of `value` to `out`, each followed by [`SEP`].
pub(crate) fn gather<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let _ = value.serialize(&mut Gather(out));
}

pub(crate) struct Gather<'a>(&'a mut Vec<u8>);

#[derive(Debug)]
pub(crate) struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("gathering strings failed")
    }
}

impl std::error::Error for Never {}

impl ser::Error for Never {
    fn custom<T: std::fmt::Display>(_: T) -> Never {
        Never
    }
}

macro_rules! skip {
    ($($name:ident: $ty:ty),*) => {
        $(fn $name(self, _: $ty) -> Result<(), Never> { Ok(()) })*
    };
}

impl<'a, 'b> ser::Serializer for &'a mut Gather<'b> {
    type Ok = ();
    type Error = Never;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    skip!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
          serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
          serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_f32: f32,
          serialize_f64: f64);

    fn serialize_char(self, v: char) -> Result<(), Never> {
        let mut b = [0; 4];
        self.serialize_str(v.encode_utf8(&mut b))
    }
    fn serialize_str(self, v: &str) -> Result<(), Never> {
        self.serialize_bytes(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Never> {
        self.0.extend_from_slice(v);
        self.0.push(SEP);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Never> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Never> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Never> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Never> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Never> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Never> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        v: &T,
    ) -> Result<(), Never> {
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Never> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Never> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Never> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, Never> {
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, Never> {
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Never> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, Never> {
        Ok(self)
    }
    fn is_human_readable(&self) -> bool {
        true
    }
}

macro_rules! compound {
    ($($tr:ident :: $m:ident),*) => {
        $(impl<'a, 'b> ser::$tr for &'a mut Gather<'b> {
            type Ok = ();
            type Error = Never;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Never> {
                v.serialize(&mut **self)
            }
            fn end(self) -> Result<(), Never> {
                Ok(())
            }
        })*
    };
}

compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl<'a, 'b> ser::SerializeMap for &'a mut Gather<'b> {
    type Ok = ();
    type Error = Never;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Never> {
        k.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Never> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Never> {
        Ok(())
    }
}

impl<'a, 'b> ser::SerializeStruct for &'a mut Gather<'b> {
    type Ok = ();
    type Error = Never;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Never> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Never> {
        Ok(())
    }
}

impl<'a, 'b> ser::SerializeStructVariant for &'a mut Gather<'b> {
    type Ok = ();
    type Error = Never;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        v: &T,
    ) -> Result<(), Never> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Never> {
        Ok(())
    }
}
