//! `google.protobuf.Any{type_url: ..., value: b'...'}` unpacked as cel-go v0.22.0 unpacks it
//! (`common/types/provider.go` `nativeToValue`, case `*anypb.Any`: `UnmarshalNew`, then the
//! message converted as any other): the type URL resolved by the name after its last `/`
//! (protoregistry `Types.FindMessageByURL`), the bytes decoded from the protobuf wire format
//! (protobuf-go `internal/impl/decode.go`: unknown fields and fields of an unexpected wire
//! type skipped, a later scalar replacing an earlier one, a repeated message merged), and
//! the message unwrapped (`common/types/pb/type.go` `unwrap`): wrappers to their plain
//! values, Duration, Timestamp, the JSON types, an Any unpacked again, Empty a message.
//!
//! Only the well-known messages are known: the API server's binary registers others (cel-go's
//! own protos), which no admission expression has a reason to pack; they are `not found`.

use std::sync::Arc;

use crate::error::EvalError;
use crate::value::{Map, OwnedMap, Value};

/// protobuf-go's default `RecursionLimit`: messages nested deeper are refused.
const RECURSION_LIMIT: u32 = 10_000;

/// The value packed in an Any of type `url` with bytes `value`, or cel-go's error (naming
/// the type URL of the innermost Any that failed).
pub(crate) fn unpack<'a>(url: &str, value: &[u8]) -> Result<Value<'a>, EvalError> {
    unpack_at(url, value, 0)
}

fn unpack_at<'a>(url: &str, value: &[u8], depth: u32) -> Result<Value<'a>, EvalError> {
    let decoded = if url.is_empty() {
        Err(Wire::EmptyUrl)
    } else {
        let name = url.rsplit('/').next().unwrap_or(url);
        crate::json::with_stack(|| decode_message(name, value, depth))
    };
    decoded.unwrap_or_else(|e| {
        Err(EvalError::new(format!(
            "anypb.UnmarshalNew() failed for type {url:?}: {}",
            e.text(url)
        )))
    })
}

/// Why unpacking failed, as protobuf-go words it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    EmptyUrl,
    NotFound,
    /// The name is an enum (`google.protobuf.NullValue`).
    Enum,
    /// A tag or an unknown field cut short (`io.ErrUnexpectedEOF`).
    Truncated,
    Overflow,
    FieldNumber,
    Reserved,
    EndGroup,
    /// A known field's value that does not parse (`errDecode`).
    Decode,
    Utf8,
    Depth,
}

impl Wire {
    fn text(self, url: &str) -> String {
        match self {
            Wire::EmptyUrl => "proto: invalid empty type URL".into(),
            Wire::NotFound => "proto: not found".into(),
            Wire::Enum => {
                format!("proto: could not resolve {url:?}: proto: found wrong type: got enum, want message")
            }
            Wire::Truncated => "unexpected EOF".into(),
            Wire::Overflow => "proto: variable length integer overflow".into(),
            Wire::FieldNumber => "proto: invalid field number".into(),
            Wire::Reserved => "proto: cannot parse reserved wire type".into(),
            Wire::EndGroup => "proto: mismatching end group marker".into(),
            Wire::Decode => "proto: cannot parse invalid wire-format data".into(),
            Wire::Utf8 => "string field contains invalid UTF-8".into(),
            Wire::Depth => "proto: exceeded maximum recursion depth".into(),
        }
    }
}

/// Reads a varint: `Truncated` when the bytes end first, `Overflow` past 64 bits.
fn varint(b: &mut &[u8]) -> Result<u64, Wire> {
    let mut v = 0u64;
    for i in 0..10 {
        let Some((&byte, rest)) = b.split_first() else {
            return Err(Wire::Truncated);
        };
        *b = rest;
        if i == 9 && byte > 1 {
            return Err(Wire::Overflow);
        }
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err(Wire::Overflow)
}

fn take<'b>(b: &mut &'b [u8], n: u64) -> Result<&'b [u8], Wire> {
    let n = usize::try_from(n).map_err(|_| Wire::Truncated)?;
    if n > b.len() {
        return Err(Wire::Truncated);
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

/// A field's value as its wire type gives it.
enum Field<'b> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'b [u8]),
    Fixed32(u32),
}

/// The wire types: varint, 64-bit, length-delimited, group start, group end, 32-bit.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const BYTES: u64 = 2;
const START_GROUP: u64 = 3;
const END_GROUP: u64 = 4;
const FIXED32: u64 = 5;

/// Reads a field value of wire type `wire` (not a group) for a known field: `Decode` when it
/// does not parse.
fn known_value<'b>(b: &mut &'b [u8], wire: u64) -> Result<Field<'b>, Wire> {
    let decode = |_| Wire::Decode;
    Ok(match wire {
        VARINT => Field::Varint(varint(b).map_err(decode)?),
        FIXED64 => {
            let bytes = take(b, 8).map_err(decode)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(bytes);
            Field::Fixed64(u64::from_le_bytes(a))
        }
        FIXED32 => {
            let bytes = take(b, 4).map_err(decode)?;
            let mut a = [0u8; 4];
            a.copy_from_slice(bytes);
            Field::Fixed32(u32::from_le_bytes(a))
        }
        _ => {
            let n = varint(b).map_err(decode)?;
            Field::Bytes(take(b, n).map_err(decode)?)
        }
    })
}

/// protowire `ConsumeFieldValue`: skips an unknown field's value (a group through its end).
fn skip(b: &mut &[u8], num: u64, wire: u64, depth: u32) -> Result<(), Wire> {
    match wire {
        VARINT => varint(b).map(drop),
        FIXED64 => take(b, 8).map(drop),
        FIXED32 => take(b, 4).map(drop),
        BYTES => {
            let n = varint(b)?;
            take(b, n).map(drop)
        }
        START_GROUP => {
            if depth >= RECURSION_LIMIT {
                return Err(Wire::Depth);
            }
            loop {
                let (n, w) = tag(b)?;
                if w == END_GROUP {
                    return if n == num {
                        Ok(())
                    } else {
                        Err(Wire::EndGroup)
                    };
                }
                crate::json::with_stack(|| skip(b, n, w, depth + 1))?;
            }
        }
        END_GROUP => Err(Wire::EndGroup),
        _ => Err(Wire::Reserved),
    }
}

/// A tag: the field number (1 to 2^29 − 1) and the wire type.
fn tag(b: &mut &[u8]) -> Result<(u64, u64), Wire> {
    let t = varint(b)?;
    let num = t >> 3;
    if num == 0 || num > (1 << 29) - 1 {
        return Err(Wire::FieldNumber);
    }
    Ok((num, t & 7))
}

/// Walks a message's fields: `known(num, wire)` names the wire type a known field takes;
/// its value is passed to `set`, every other field is skipped.
fn fields<'b>(
    mut b: &'b [u8],
    depth: u32,
    known: impl Fn(u64) -> Option<u64>,
    mut set: impl FnMut(u64, Field<'b>) -> Result<(), Wire>,
) -> Result<(), Wire> {
    if depth > RECURSION_LIMIT {
        return Err(Wire::Depth);
    }
    while !b.is_empty() {
        let (num, wire) = tag(&mut b)?;
        if wire == END_GROUP {
            // Outside a group there is no group to end.
            return Err(Wire::EndGroup);
        }
        if known(num) == Some(wire) {
            let value = known_value(&mut b, wire)?;
            set(num, value)?;
        } else {
            skip(&mut b, num, wire, depth)?;
        }
    }
    Ok(())
}

fn text(bytes: &[u8]) -> Result<String, Wire> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Wire::Utf8)
}

/// A `google.protobuf.Value` being decoded: its kind so far (none is null).
#[derive(Debug, Default)]
enum Json {
    #[default]
    Null,
    Number(f64),
    Text(String),
    Bool(bool),
    Struct(Vec<(String, Json)>),
    List(Vec<Json>),
}

impl Json {
    /// The CEL value, one stack segment check per level (packed messages nest up to
    /// protobuf-go's recursion limit).
    fn into_value<'a>(mut self) -> Value<'a> {
        match &mut self {
            Json::Null => Value::Null,
            Json::Number(d) => Value::Double(*d),
            Json::Text(s) => Value::string(std::mem::take(s)),
            Json::Bool(b) => Value::Bool(*b),
            Json::Struct(entries) => {
                let entries = std::mem::take(entries);
                crate::json::with_stack(|| struct_value(entries))
            }
            Json::List(items) => {
                let items = std::mem::take(items);
                crate::json::with_stack(|| {
                    Value::list(items.into_iter().map(Json::into_value).collect())
                })
            }
        }
    }
}

/// Dropped level by level on the heap rather than by recursion: a message that fails deep
/// inside leaves a partial tree as deep as the recursion limit.
impl Drop for Json {
    fn drop(&mut self) {
        let mut pending = Vec::new();
        let take = |j: &mut Json, pending: &mut Vec<Json>| match j {
            Json::Struct(entries) => pending.extend(entries.drain(..).map(|(_, v)| v)),
            Json::List(items) => pending.append(items),
            _ => {}
        };
        take(self, &mut pending);
        while let Some(mut j) = pending.pop() {
            take(&mut j, &mut pending);
        }
    }
}

fn struct_value<'a>(entries: Vec<(String, Json)>) -> Value<'a> {
    let entries = entries
        .into_iter()
        .map(|(k, v)| (Value::string(k), v.into_value()))
        .collect();
    Value::Map(Map::Owned(Arc::new(OwnedMap::from_distinct(entries))))
}

/// Merges the bytes of a `google.protobuf.Value` into `into` (a oneof: a new kind replaces
/// the old one; the same message kind again is merged into it).
fn merge_value(b: &[u8], into: &mut Json, depth: u32) -> Result<(), Wire> {
    let wire_of = |n| match n {
        1 | 4 => Some(VARINT),
        2 => Some(FIXED64),
        3 | 5 | 6 => Some(BYTES),
        _ => None,
    };
    fields(b, depth, wire_of, |num, f| {
        match (num, f) {
            (1, Field::Varint(_)) => *into = Json::Null,
            (2, Field::Fixed64(bits)) => *into = Json::Number(f64::from_bits(bits)),
            (3, Field::Bytes(s)) => *into = Json::Text(text(s)?),
            (4, Field::Varint(v)) => *into = Json::Bool(v != 0),
            (5, Field::Bytes(m)) => {
                if !matches!(into, Json::Struct(_)) {
                    *into = Json::Struct(Vec::new());
                }
                if let Json::Struct(entries) = into {
                    crate::json::with_stack(|| merge_struct(m, entries, depth + 1))?;
                }
            }
            (_, Field::Bytes(m)) => {
                if !matches!(into, Json::List(_)) {
                    *into = Json::List(Vec::new());
                }
                if let Json::List(items) = into {
                    crate::json::with_stack(|| merge_list(m, items, depth + 1))?;
                }
            }
            _ => {}
        }
        Ok(())
    })
}

/// `google.protobuf.Struct`: field 1 a map entry (key 1, value 2); a key met again is
/// replaced.
fn merge_struct(b: &[u8], entries: &mut Vec<(String, Json)>, depth: u32) -> Result<(), Wire> {
    fields(
        b,
        depth,
        |n| (n == 1).then_some(BYTES),
        |_, f| {
            let Field::Bytes(entry) = f else {
                return Ok(());
            };
            let mut key = String::new();
            let mut value = Json::Null;
            fields(
                entry,
                depth + 1,
                |n| (n <= 2).then_some(BYTES),
                |num, f| {
                    if let Field::Bytes(v) = f {
                        if num == 1 {
                            key = text(v)?;
                        } else {
                            crate::json::with_stack(|| merge_value(v, &mut value, depth + 2))?;
                        }
                    }
                    Ok(())
                },
            )?;
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => entries.push((key, value)),
            }
            Ok(())
        },
    )
}

/// `google.protobuf.ListValue`: field 1 a repeated Value.
fn merge_list(b: &[u8], items: &mut Vec<Json>, depth: u32) -> Result<(), Wire> {
    fields(
        b,
        depth,
        |n| (n == 1).then_some(BYTES),
        |_, f| {
            if let Field::Bytes(v) = f {
                let mut item = Json::Null;
                crate::json::with_stack(|| merge_value(v, &mut item, depth + 1))?;
                items.push(item);
            }
            Ok(())
        },
    )
}

/// The well-known message `name` decoded from `b` and unwrapped as cel-go unwraps it.
/// Decoding errors are the outer `Err`; what the unwrapped value's conversion refuses (or a
/// nested Any's failure, reported with its own URL) the inner one.
fn decode_message<'a>(
    name: &str,
    b: &[u8],
    depth: u32,
) -> Result<Result<Value<'a>, EvalError>, Wire> {
    let short = name.strip_prefix("google.protobuf.").unwrap_or("");
    // Field 1 of a wrapper, of wire type `wire`: the last one read.
    let value_field = |wire: u64| -> Result<Option<Field<'_>>, Wire> {
        let mut last = None;
        fields(
            b,
            depth,
            |n| (n == 1).then_some(wire),
            |_, f| {
                last = Some(f);
                Ok(())
            },
        )?;
        Ok(last)
    };
    Ok(Ok(match short {
        "Int64Value" | "Int32Value" | "UInt64Value" | "UInt32Value" | "BoolValue" => {
            let v = match value_field(VARINT)? {
                Some(Field::Varint(v)) => v,
                _ => 0,
            };
            // protobuf-go's decoders: `int32(v)`, `uint32(v)`, `v != 0`.
            match short {
                "Int64Value" => Value::Int(v as i64),
                "Int32Value" => Value::Int(i64::from(v as i32)),
                "UInt64Value" => Value::Uint(v),
                "UInt32Value" => Value::Uint(u64::from(v as u32)),
                _ => Value::Bool(v != 0),
            }
        }
        "DoubleValue" => match value_field(FIXED64)? {
            Some(Field::Fixed64(bits)) => Value::Double(f64::from_bits(bits)),
            _ => Value::Double(0.0),
        },
        "FloatValue" => match value_field(FIXED32)? {
            Some(Field::Fixed32(bits)) => Value::Double(f64::from(f32::from_bits(bits))),
            _ => Value::Double(0.0),
        },
        "StringValue" => match value_field(BYTES)? {
            Some(Field::Bytes(s)) => Value::string(text(s)?),
            _ => Value::string(""),
        },
        "BytesValue" => match value_field(BYTES)? {
            Some(Field::Bytes(s)) => Value::Bytes(Arc::from(s)),
            _ => Value::Bytes(Arc::from(&[][..])),
        },
        "Duration" | "Timestamp" => {
            let (mut secs, mut nanos) = (0i64, 0i32);
            fields(
                b,
                depth,
                |n| (n <= 2).then_some(VARINT),
                |num, f| {
                    if let Field::Varint(v) = f {
                        if num == 1 {
                            secs = v as i64;
                        } else {
                            nanos = v as i32;
                        }
                    }
                    Ok(())
                },
            )?;
            if short == "Duration" {
                Value::Duration(super::as_duration(secs, nanos))
            } else {
                return Ok(super::as_time(secs, nanos));
            }
        }
        "Value" => {
            let mut json = Json::Null;
            merge_value(b, &mut json, depth)?;
            json.into_value()
        }
        "Struct" => {
            let mut entries = Vec::new();
            merge_struct(b, &mut entries, depth)?;
            struct_value(entries)
        }
        "ListValue" => {
            let mut items = Vec::new();
            merge_list(b, &mut items, depth)?;
            Json::List(items).into_value()
        }
        "Empty" => {
            fields(b, depth, |_| None, |_, _| Ok(()))?;
            Value::opaque(super::EmptyMessage)
        }
        "Any" => {
            let mut url = String::new();
            let mut packed: &[u8] = &[];
            fields(
                b,
                depth,
                |n| (n <= 2).then_some(BYTES),
                |num, f| {
                    if let Field::Bytes(v) = f {
                        if num == 1 {
                            url = text(v)?;
                        } else {
                            packed = v;
                        }
                    }
                    Ok(())
                },
            )?;
            if depth >= RECURSION_LIMIT {
                return Err(Wire::Depth);
            }
            return Ok(unpack_at(&url, packed, depth + 1));
        }
        "NullValue" => return Err(Wire::Enum),
        _ => return Err(Wire::NotFound),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::tests::eval;
    use crate::{Env, Value};

    fn holds(src: &str) {
        match eval(src) {
            Ok(v) => assert!(v.equals(&Value::Bool(true)), "{src}: {v:?}"),
            Err(e) => panic!("{src}: {e}"),
        }
    }

    fn any(url: &str, bytes: &str) -> String {
        format!("google.protobuf.Any{{type_url: '{url}', value: b'{bytes}'}}")
    }

    fn failure(url: &str, bytes: &str) -> String {
        eval(&any(url, bytes)).unwrap_err()
    }

    const T: &str = "type.googleapis.com/google.protobuf.";

    /// common/types/provider.go `nativeToValue` (`*anypb.Any`: `UnmarshalNew`, then
    /// `NativeToValue` of the message) and pb/type.go `unwrap`: each well-known message
    /// packed in the protobuf wire format unpacks to the value its construction gives.
    /// Lists packed thousands deep (up to protobuf-go's limit) decode and convert on a small
    /// stack, and past the limit they are refused: no abort either way.
    #[test]
    fn deeply_packed_messages_neither_overflow_the_stack_nor_pass_the_limit() {
        fn len_prefixed(field: u8, body: &[u8]) -> Vec<u8> {
            let mut out = vec![(field << 3) | 2];
            let mut n = body.len();
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
            out.extend_from_slice(body);
            out
        }
        // ListValue{values: [Value{list_value: ListValue{...}}]}, `levels` lists deep.
        let nested_lists = |levels: usize| {
            let mut list: Vec<u8> = Vec::new();
            for _ in 0..levels {
                let value = len_prefixed(6, &list);
                list = len_prefixed(1, &value);
            }
            list
        };
        let url = "type.googleapis.com/google.protobuf.ListValue";
        // Decoded and converted on a small stack (the decoder and the conversion grow it
        // where needed; a failed decode drops its partial tree without recursion), the value
        // then dropped on a stack as large as the server's evaluation threads' (32 MiB):
        // owned CEL values drop by recursion.
        let decode = move || {
            let too_deep = nested_lists(6_000);
            match super::unpack(url, &too_deep) {
                Err(e) => assert!(e.message().contains("recursion depth"), "{}", e.message()),
                Ok(_) => panic!("past protobuf-go's recursion limit"),
            }
            super::unpack(url, &nested_lists(4_000)).map_err(|e| e.message().to_string())
        };
        let on = |stack: usize| std::thread::Builder::new().stack_size(stack);
        on(32 << 20)
            .spawn(move || {
                let deep = on(256 << 10).spawn(decode).unwrap().join().unwrap();
                assert!(deep.is_ok(), "{:?}", deep.err());
            })
            .unwrap()
            .join()
            .unwrap();
    }

    /// No bytes panic the decoder, whatever the packed type: a value or protobuf-go's error.
    #[test]
    fn no_bytes_panic_the_decoder() {
        use proptest::prelude::*;
        let names = [
            "google.protobuf.Any",
            "google.protobuf.Struct",
            "google.protobuf.ListValue",
            "google.protobuf.Value",
            "google.protobuf.Timestamp",
            "google.protobuf.Duration",
            "google.protobuf.StringValue",
            "google.protobuf.BytesValue",
            "google.protobuf.Int64Value",
            "google.protobuf.UInt32Value",
            "google.protobuf.DoubleValue",
            "google.protobuf.BoolValue",
            "google.protobuf.Empty",
            "google.protobuf.NullValue",
            "x.y.Unknown",
        ];
        // Bytes biased towards tags and lengths of the fields these messages have.
        let byte = prop_oneof![
            any::<u8>(),
            prop::sample::select(vec![
                0x08u8, 0x0a, 0x10, 0x12, 0x1a, 0x22, 0x2a, 0x32, 0x11, 0x80, 0xff, 0x01, 0x00
            ]),
        ];
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 4096,
            ..Default::default()
        });
        runner
            .run(
                &(
                    prop::sample::select(names.to_vec()),
                    prop::collection::vec(byte, 0..96),
                ),
                |(name, bytes)| {
                    let _ = super::unpack(&format!("type.googleapis.com/{name}"), &bytes);
                    Ok(())
                },
            )
            .unwrap();
    }

    #[test]
    fn packed_well_known_messages_unpack_to_their_values() {
        let w = |name: &str, bytes: &str, want: &str| {
            holds(&format!("{} == {want}", any(&format!("{T}{name}"), bytes)))
        };
        w("Int64Value", r"\x08\x96\x01", "150");
        // A 10-byte varint of -1, read as `int32(v)`.
        w(
            "Int32Value",
            r"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            "-1",
        );
        w("UInt32Value", r"\x08\x85\x80\x80\x80\x10", "5u");
        w("UInt64Value", r"\x08\x85\x80\x80\x80\x10", "4294967301u");
        w("BoolValue", r"\x08\x02", "true");
        w(
            "DoubleValue",
            r"\x09\x00\x00\x00\x00\x00\x00\xf8\x3f",
            "1.5",
        );
        w("FloatValue", r"\x0d\x00\x00\x00\x3f", "0.5");
        w("StringValue", r"\x0a\x02hi", "'hi'");
        w("BytesValue", r"\x0a\x02hi", "b'hi'");
        w("Int64Value", "", "0");
        w("Duration", r"\x08\x5a\x10\x05", "duration('90.000000005s')");
        w(
            "Timestamp",
            r"\x08\x01",
            "timestamp('1970-01-01T00:00:01Z')",
        );
        w("Value", r"\x1a\x01a", "'a'");
        w("Value", "", "null");
        w("Value", r"\x11\x00\x00\x00\x00\x00\x00\xf0\x3f", "1.0");
        w(
            "Struct",
            r"\x0a\x07\x0a\x01a\x12\x02\x20\x01",
            "{'a': true}",
        );
        w(
            "ListValue",
            r"\x0a\x09\x11\x00\x00\x00\x00\x00\x00\xf0\x3f\x0a\x03\x1a\x01x",
            "[dyn(1.0), dyn('x')]",
        );
        w("Empty", "", "google.protobuf.Empty{}");
        // An Any in an Any is unpacked again; a URL needs no host.
        w(
            "Any",
            r"\x0a\x1agoogle.protobuf.Int64Value\x12\x02\x08\x07",
            "7",
        );
        holds(&format!(
            "{} == 'x'",
            any("a/b/google.protobuf.StringValue", r"\x0a\x01x")
        ));
    }

    /// common/types/types.go: `AnyType`'s name is `google.protobuf.Any`, and checker/types.go
    /// `isDyn` makes it a wildcard: it meets any overload, and a selection on it is `dyn`.
    #[test]
    fn any_is_named_as_cel_go_names_it_and_checked_as_dyn() {
        let env = Env::new(32);
        let ty = |s: &str| env.compile(s).unwrap().result_type().to_string();
        assert_eq!(ty("google.protobuf.Any{}"), "google.protobuf.Any");
        assert_eq!(ty("google.protobuf.Any{}.x"), "dyn");
        assert_eq!(ty("google.protobuf.Any{} + 1"), "int");
    }

    /// protobuf-go internal/impl/decode.go `unmarshalPointer`: unknown fields and a known
    /// field of another wire type are skipped (groups through their end), the last scalar
    /// wins, and a repeated message field is merged.
    #[test]
    fn decoding_follows_the_wire_format_rules() {
        let i = |bytes: &str, want: &str| {
            holds(&format!(
                "{} == {want}",
                any(&format!("{T}Int64Value"), bytes)
            ))
        };
        i(r"\x10\x05\x08\x03", "3");
        i(r"\x0a\x01x\x08\x04", "4");
        i(r"\x08\x01\x08\x02", "2");
        i(r"\x1b\x08\x01\x1c\x08\x09", "9");
        // Two struct_value fields of one Value merge their entries.
        holds(&format!(
            "{} == {{'a': true, 'b': false}}",
            any(
                &format!("{T}Value"),
                r"\x2a\x09\x0a\x07\x0a\x01a\x12\x02\x20\x01\x2a\x09\x0a\x07\x0a\x01b\x12\x02\x20\x00"
            )
        ));
    }

    /// anypb `UnmarshalNew`, protoregistry `FindMessageByURL`, protowire `ParseError` and
    /// the decoders' `errDecode`, `errInvalidUTF8` (internal/impl/codec_field.go).
    #[test]
    fn failures_read_as_cel_go_reports_them() {
        let e = |url: &str, reason: &str| {
            format!("anypb.UnmarshalNew() failed for type {url:?}: {reason}")
        };
        let int64 = format!("{T}Int64Value");
        assert_eq!(
            failure("type.googleapis.com/foo.Bar", ""),
            e("type.googleapis.com/foo.Bar", "proto: not found")
        );
        assert_eq!(
            failure("x/google.protobuf.NullValue", ""),
            e(
                "x/google.protobuf.NullValue",
                "proto: could not resolve \"x/google.protobuf.NullValue\": proto: found wrong type: got enum, want message"
            )
        );
        for (bytes, reason) in [
            (r"\x08", "proto: cannot parse invalid wire-format data"),
            (r"\x10", "unexpected EOF"),
            (r"\x12\x05ab", "unexpected EOF"),
            (r"\x00", "proto: invalid field number"),
            (r"\x0e", "proto: cannot parse reserved wire type"),
            (r"\x0c", "proto: mismatching end group marker"),
            (r"\x1b\x24", "proto: mismatching end group marker"),
            (
                r"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
                "proto: variable length integer overflow",
            ),
        ] {
            assert_eq!(failure(&int64, bytes), e(&int64, reason), "{bytes}");
        }
        let string = format!("{T}StringValue");
        assert_eq!(
            failure(&string, r"\x0a\x01\xff"),
            e(&string, "string field contains invalid UTF-8")
        );
        // A failing Any inside an Any is reported with its own URL.
        assert_eq!(
            failure(&format!("{T}Any"), r"\x0a\x05x/a.B"),
            e("x/a.B", "proto: not found")
        );
    }
}
