//! The protobuf well-known message types an expression may construct by name
//! (`google.protobuf.Int64Value{value: 1}`, `google.protobuf.Duration{seconds: 5}`...): their
//! check-time types and fields, and the plain CEL values their construction yields.
//!
//! Follows cel-go v0.22.0: every environment's registry holds the well-known files
//! (`common/types/pb/pb.go` `DefaultDb`, registered by `common/types/provider.go`
//! `NewRegistry`), and Kubernetes' `DeclTypeProvider` falls back to it. The checker
//! (`checker/checker.go` `checkCreateStruct`) types a construction by the sanitized type
//! (`common/types/types.go` `checkedWellKnowns`: wrappers are `wrapper(T)`, `Value` is `dyn`,
//! `ListValue` `list(dyn)`, `Struct` `map(string, dyn)`) and looks fields up on the message of
//! that kind (`wellKnownTypes`: `Int32Value`'s fields are `Int64Value`'s). At run time
//! `Registry.NewValue` sets each field with `ConvertToNative` to the field's Go type (`int32`
//! fields range-checked, `float` fields truncated to `float32`), then `NativeToValue`
//! unwraps the message (`pb.TypeDescription.MaybeUnwrap`) to its plain value.
//! `google.protobuf.Empty` (registered with the others, `pb.go` `init`) is no checked
//! well-known type: it stays a message, of object type `google.protobuf.Empty` with no
//! fields, equal to another Empty only (`object.go` `protoObj.Equal`: `pb.Equal`).

use std::any::Any;
use std::sync::{Arc, LazyLock};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::error::EvalError;
use super::types::{ObjectType, Type};
use super::value::{List, Map, Opaque, OwnedMap, Value};

mod any;

/// `google.protobuf.Empty`'s name.
pub(crate) const EMPTY: &str = "google.protobuf.Empty";

/// `google.protobuf.Empty`'s type: a message with no fields.
pub(crate) fn empty_type() -> Type {
    static EMPTY_TYPE: LazyLock<Arc<ObjectType>> = LazyLock::new(|| {
        Arc::new(ObjectType {
            name: EMPTY.to_owned(),
            fields: Vec::new(),
        })
    });
    Type::Object(EMPTY_TYPE.clone())
}

/// A `google.protobuf.Empty` message (cel-go's `protoObj` over `emptypb.Empty`).
#[derive(Debug)]
pub(crate) struct EmptyMessage;

impl Opaque for EmptyMessage {
    fn type_name(&self) -> &'static str {
        EMPTY
    }
    /// `pb.Equal`: every Empty equals every other.
    fn equals(&self, other: &dyn Opaque) -> bool {
        other.as_any().is::<EmptyMessage>()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn unequal_to_other_types(&self) -> bool {
        true
    }
}

/// The check-time type of a construction of the well-known message `name`; `None` when
/// `name` is no such message (`google.protobuf.NullValue` is an enum, not resolvable).
pub(crate) fn message_type(name: &str) -> Option<Type> {
    let wrapper = |t: Type| Type::Wrapper(Box::new(t));
    Some(match name {
        "google.protobuf.BoolValue" => wrapper(Type::Bool),
        "google.protobuf.BytesValue" => wrapper(Type::Bytes),
        "google.protobuf.DoubleValue" | "google.protobuf.FloatValue" => wrapper(Type::Double),
        "google.protobuf.Int64Value" | "google.protobuf.Int32Value" => wrapper(Type::Int),
        "google.protobuf.UInt64Value" | "google.protobuf.UInt32Value" => wrapper(Type::Uint),
        "google.protobuf.StringValue" => wrapper(Type::String),
        "google.protobuf.Any" => Type::Opaque("google.protobuf.Any"),
        "google.protobuf.Duration" => Type::Duration,
        "google.protobuf.Timestamp" => Type::Timestamp,
        "google.protobuf.ListValue" => Type::list(Type::Dyn),
        "google.protobuf.Struct" => Type::map(Type::String, Type::Dyn),
        "google.protobuf.Value" => Type::Dyn,
        EMPTY => empty_type(),
        _ => return None,
    })
}

/// The type of field `field` of the message cel-go checks a construction of type `ty`
/// against (`getWellKnownTypeName` of the sanitized type); `None` for an undefined field.
pub(crate) fn field_type(ty: &Type, field: &str) -> Option<Type> {
    Some(match (ty, field) {
        (Type::Wrapper(t), "value") => (**t).clone(),
        (Type::Opaque("google.protobuf.Any"), "type_url") => Type::String,
        (Type::Opaque("google.protobuf.Any"), "value") => Type::Bytes,
        (Type::Duration | Type::Timestamp, "seconds" | "nanos") => Type::Int,
        (Type::List(_), "values") => Type::list(Type::Dyn),
        (Type::Map(..), "fields") => Type::map(Type::String, Type::Dyn),
        // `null_value` is an enum field: an int to the checker.
        (Type::Dyn, "null_value") => Type::Int,
        (Type::Dyn, "number_value") => Type::Double,
        (Type::Dyn, "string_value") => Type::String,
        (Type::Dyn, "bool_value") => Type::Bool,
        (Type::Dyn, "struct_value") => Type::map(Type::String, Type::Dyn),
        (Type::Dyn, "list_value") => Type::list(Type::Dyn),
        _ => return None,
    })
}

/// The value of the well-known message `name` built from `fields` (in the order written; a
/// later write of a field wins), or `None` when `name` is no such message.
pub(crate) fn construct<'a>(
    name: &str,
    fields: &[(&str, Value<'a>)],
) -> Option<Result<Value<'a>, EvalError>> {
    message_type(name)?;
    Some(build(name, fields))
}

fn build<'a>(name: &str, fields: &[(&str, Value<'a>)]) -> Result<Value<'a>, EvalError> {
    let short = name.trim_start_matches("google.protobuf.");
    let get = |f: &str| fields.iter().rev().find(|(n, _)| *n == f).map(|(_, v)| v);
    // `Registry.NewValue`: a field the message lacks (only reachable through a checked
    // expression when the checker was lenient) is refused before any conversion.
    let known = |allowed: &[&str]| match fields.iter().find(|(n, _)| !allowed.contains(n)) {
        Some((n, _)) => Err(EvalError::new(format!("no such field: {n}"))),
        None => Ok(()),
    };
    let conv = |field: &str, reason: String| {
        EvalError::new(format!(
            "field type conversion error for {name}.{field} value type: {reason}"
        ))
    };
    match short {
        "Int64Value" | "Int32Value" => {
            known(&["value"])?;
            let Some(v) = get("value") else {
                return Ok(Value::Int(0));
            };
            let i = native_int(
                v,
                if short == "Int32Value" {
                    "int32"
                } else {
                    "int64"
                },
            )
            .map_err(|r| conv("value", r))?;
            if short == "Int32Value" && i32::try_from(i).is_err() {
                return Err(conv("value", "integer overflow".into()));
            }
            Ok(Value::Int(i))
        }
        "UInt64Value" | "UInt32Value" => {
            known(&["value"])?;
            let Some(v) = get("value") else {
                return Ok(Value::Uint(0));
            };
            let go = if short == "UInt32Value" {
                "uint32"
            } else {
                "uint64"
            };
            let u = match v {
                Value::Uint(u) => *u,
                other => return Err(conv("value", mismatch(other, go))),
            };
            if short == "UInt32Value" && u32::try_from(u).is_err() {
                return Err(conv("value", "unsigned integer overflow".into()));
            }
            Ok(Value::Uint(u))
        }
        "DoubleValue" | "FloatValue" => {
            known(&["value"])?;
            let go = if short == "FloatValue" {
                "float32"
            } else {
                "float64"
            };
            match get("value") {
                None => Ok(Value::Double(0.0)),
                // `Double.ConvertToNative` to a `float32` field truncates.
                Some(Value::Double(d)) if short == "FloatValue" => {
                    Ok(Value::Double(f64::from(*d as f32)))
                }
                Some(Value::Double(d)) => Ok(Value::Double(*d)),
                Some(other) => Err(conv("value", mismatch(other, go))),
            }
        }
        "BoolValue" => {
            known(&["value"])?;
            match get("value") {
                None => Ok(Value::Bool(false)),
                Some(Value::Bool(b)) => Ok(Value::Bool(*b)),
                Some(other) => Err(conv("value", mismatch(other, "bool"))),
            }
        }
        "StringValue" => {
            known(&["value"])?;
            match get("value") {
                None => Ok(Value::string("")),
                Some(v @ Value::String(_)) => Ok(v.clone()),
                Some(other) => Err(conv("value", mismatch(other, "string"))),
            }
        }
        "BytesValue" => {
            known(&["value"])?;
            match get("value") {
                None => Ok(Value::Bytes(Arc::from(&[][..]))),
                Some(v @ Value::Bytes(_)) => Ok(v.clone()),
                Some(other) => Err(conv("value", mismatch(other, "[]uint8"))),
            }
        }
        "Duration" | "Timestamp" => {
            known(&["seconds", "nanos"])?;
            let secs = match get("seconds") {
                None => 0,
                Some(v) => native_int(v, "int64").map_err(|r| conv("seconds", r))?,
            };
            let nanos = match get("nanos") {
                None => 0,
                Some(v) => native_int(v, "int32").map_err(|r| conv("nanos", r))?,
            };
            let nanos =
                i32::try_from(nanos).map_err(|_| conv("nanos", "integer overflow".into()))?;
            if short == "Duration" {
                return Ok(Value::Duration(as_duration(secs, nanos)));
            }
            as_time(secs, nanos)
        }
        "Any" => {
            known(&["type_url", "value"])?;
            let url = match get("type_url") {
                Some(Value::String(s)) => s.as_str().to_owned(),
                Some(other) => return Err(conv("type_url", mismatch(other, "string"))),
                None => String::new(),
            };
            let packed = match get("value") {
                Some(Value::Bytes(b)) => b.clone(),
                Some(other) => return Err(conv("value", mismatch(other, "[]uint8"))),
                None => Arc::from(&[][..]),
            };
            any::unpack(&url, &packed)
        }
        "Empty" => {
            known(&[])?;
            Ok(Value::opaque(EmptyMessage))
        }
        "ListValue" => {
            known(&["values"])?;
            match get("values") {
                None => Ok(Value::list(Vec::new())),
                Some(Value::List(l)) => json_list(l),
                Some(other) => Err(EvalError::new(format!(
                    "unsupported field type for {name}.values: {}",
                    other.type_name()
                ))),
            }
        }
        "Struct" => {
            known(&["fields"])?;
            match get("fields") {
                None => Ok(empty_map()),
                Some(Value::Map(m)) => json_map(m),
                Some(other) => Err(EvalError::new(format!(
                    "unsupported field type for {name}.fields: {}",
                    other.type_name()
                ))),
            }
        }
        _ => {
            // google.protobuf.Value: a oneof, so the last kind written is the value's; with
            // none written it is null (`MaybeUnwrap` of a kindless `structpb.Value`).
            known(&[
                "null_value",
                "number_value",
                "string_value",
                "bool_value",
                "struct_value",
                "list_value",
            ])?;
            let Some((field, v)) = fields.last() else {
                return Ok(Value::Null);
            };
            let go = match *field {
                "null_value" => "structpb.NullValue",
                "number_value" => "float64",
                "string_value" => "string",
                "bool_value" => "bool",
                "struct_value" => "*structpb.Struct",
                _ => "*structpb.ListValue",
            };
            match (*field, v) {
                ("null_value", Value::Int(_)) => Ok(Value::Null),
                ("number_value", Value::Double(_))
                | ("string_value", Value::String(_))
                | ("bool_value", Value::Bool(_)) => Ok(v.clone()),
                ("struct_value", Value::Map(m)) => json_map(m),
                ("list_value", Value::List(l)) => json_list(l),
                (f, other) => Err(conv(f, mismatch(other, go))),
            }
        }
    }
}

/// An int field's value: an `int` (a `null` or other kind is refused as `ConvertToNative`
/// refuses it).
fn native_int(v: &Value<'_>, go: &str) -> Result<i64, String> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(mismatch(other, go)),
    }
}

/// `ConvertToNative`'s refusal of `v` for a field of Go type `go`.
fn mismatch(v: &Value<'_>, go: &str) -> String {
    match v {
        Value::Int(_) => format!("unsupported type conversion from 'int' to {go}"),
        Value::Uint(_) => format!("unsupported type conversion from 'uint' to {go}"),
        Value::Double(_) => format!("type conversion error from Double to '{go}'"),
        Value::Bool(_) => format!("type conversion error from bool to '{go}'"),
        Value::String(_) => format!("unsupported native conversion from string to '{go}'"),
        Value::Bytes(_) => format!("type conversion error from Bytes to '{go}'"),
        Value::Null => format!("type conversion error from 'null_type' to '{go}'"),
        other => format!(
            "type conversion error from '{}' to '{go}'",
            other.type_name()
        ),
    }
}

/// `timestamppb.Timestamp.AsTime`: `time.Unix(secs, nanos)`, which normalizes the
/// nanoseconds and checks no range (cel-go keeps a timestamp outside CEL's years as it is;
/// arithmetic on it overflows).
pub(crate) fn as_time<'a>(secs: i64, nanos: i32) -> Result<Value<'a>, EvalError> {
    Ok(Value::Timestamp(super::time::Timestamp::from_unix(
        secs,
        i64::from(nanos),
    )))
}

/// `durationpb.Duration.AsDuration`: seconds and nanoseconds summed, saturating on overflow.
pub(crate) fn as_duration(secs: i64, nanos: i32) -> i64 {
    let total = i128::from(secs) * 1_000_000_000 + i128::from(nanos);
    match i64::try_from(total) {
        Ok(d) => d,
        Err(_) if secs < 0 => i64::MIN,
        Err(_) => i64::MAX,
    }
}

fn empty_map<'a>() -> Value<'a> {
    Value::Map(Map::Owned(Arc::new(OwnedMap::from_distinct(Vec::new()))))
}

/// A list set on a `ListValue`: each element converted to a `structpb.Value` and back.
fn json_list<'a>(l: &List<'a>) -> Result<Value<'a>, EvalError> {
    let mut out = Vec::with_capacity(l.len());
    for item in l.iter() {
        out.push(json_value(&item)?);
    }
    Ok(Value::list(out))
}

/// A map set on a `Struct`: string keys, each value converted to a `structpb.Value`.
fn json_map<'a>(m: &Map<'a>) -> Result<Value<'a>, EvalError> {
    let mut out = Vec::with_capacity(m.len());
    for (k, v) in m.entries() {
        if !matches!(k, Value::String(_)) {
            return Err(EvalError::new(format!(
                "unsupported type conversion from '{}' to string",
                k.type_name()
            )));
        }
        out.push((k, json_value(&v)?));
    }
    Ok(Value::Map(Map::Owned(Arc::new(OwnedMap::from_distinct(
        out,
    )))))
}

/// The largest integer cel-go converts to a JSON number (`Int.isJSONSafe`).
const MAX_JSON_INT: i64 = (1 << 53) - 1;

/// `v` converted to a `structpb.Value` (`ConvertToNative(jsonValueType)`) and back to CEL:
/// numbers become doubles (ints beyond ±(2^53 − 1) decimal strings), bytes base64 text,
/// timestamps and durations their JSON text.
fn json_value<'a>(v: &Value<'a>) -> Result<Value<'a>, EvalError> {
    super::json::with_stack(|| {
        Ok(match v {
            Value::Null | Value::Bool(_) | Value::Double(_) | Value::String(_) => v.clone(),
            Value::Int(i) if (-MAX_JSON_INT..=MAX_JSON_INT).contains(i) => Value::Double(*i as f64),
            Value::Int(i) => Value::string(i.to_string()),
            Value::Uint(u) if *u <= MAX_JSON_INT as u64 => Value::Double(*u as f64),
            Value::Uint(u) => Value::string(u.to_string()),
            Value::Bytes(b) => Value::string(STANDARD.encode(b)),
            Value::Timestamp(t) => Value::string(t.to_rfc3339()),
            Value::Duration(d) => Value::string(super::time::format_duration(*d)),
            Value::List(l) => json_list(l)?,
            Value::Map(m) => json_map(m)?,
            // `protoObj.ConvertToNative(jsonValueType)`: the message's protojson, `{}`.
            Value::Opaque(o) if o.as_any().is::<EmptyMessage>() => empty_map(),
            other => {
                return Err(EvalError::new(format!(
                    "type conversion error from '{}' to '*structpb.Value'",
                    other.type_name()
                )))
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::{Env, Meter, Value};

    /// `src` compiled in the base environment and evaluated: its value or error text (also
    /// the tests' of `any`).
    pub(super) fn eval(src: &str) -> Result<Value<'static>, String> {
        let p = Env::new(32)
            .compile(src)
            .map_err(|e| e.message().to_string())?;
        let mut meter = Meter::default();
        p.eval(&[], &mut meter).map_err(|e| e.to_string())
    }

    fn check_error(src: &str) -> String {
        match Env::new(32).compile(src) {
            Ok(_) => "compiled".into(),
            Err(e) => e.message().to_string(),
        }
    }

    fn static_type(src: &str) -> String {
        Env::new(32).compile(src).unwrap().result_type().to_string()
    }

    /// common/types/provider.go `NewValue` then `NativeToValue`: a wrapper unwraps to its
    /// plain value; without `value` it is the zero value (pb/type.go `MaybeUnwrap`).
    #[test]
    fn wrappers_construct_to_their_plain_values() {
        let cases = [
            ("google.protobuf.Int64Value{value: 1}", Value::Int(1)),
            ("google.protobuf.Int32Value{value: -7}", Value::Int(-7)),
            ("google.protobuf.UInt64Value{value: 2u}", Value::Uint(2)),
            ("google.protobuf.UInt32Value{value: 3u}", Value::Uint(3)),
            (
                "google.protobuf.DoubleValue{value: 0.1}",
                Value::Double(0.1),
            ),
            ("google.protobuf.BoolValue{value: true}", Value::Bool(true)),
            (
                "google.protobuf.StringValue{value: 'a'}",
                Value::string("a"),
            ),
            ("google.protobuf.Int64Value{}", Value::Int(0)),
            ("google.protobuf.UInt32Value{}", Value::Uint(0)),
            ("google.protobuf.FloatValue{}", Value::Double(0.0)),
            ("google.protobuf.BoolValue{}", Value::Bool(false)),
            ("google.protobuf.StringValue{}", Value::string("")),
        ];
        for (src, want) in cases {
            let got = eval(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            assert!(got.equals(&want), "{src}: {got:?}");
        }
        assert!(eval("google.protobuf.BytesValue{value: b'x'} == b'x'")
            .unwrap()
            .equals(&Value::Bool(true)));
        assert!(eval("google.protobuf.BytesValue{} == b''")
            .unwrap()
            .equals(&Value::Bool(true)));
        assert!(eval("google.protobuf.Int64Value{value: 1} + 1 == 2")
            .unwrap()
            .equals(&Value::Bool(true)));
    }

    /// common/types/types.go `checkedWellKnowns` (`NewNullableType`) and `DeclaredTypeName`:
    /// the check-time type is `wrapper(T)`, which takes null and its primitive.
    #[test]
    fn wrappers_are_typed_as_nullable_primitives() {
        assert_eq!(
            static_type("google.protobuf.Int32Value{value: 1}"),
            "wrapper(int)"
        );
        assert_eq!(
            static_type("google.protobuf.FloatValue{}"),
            "wrapper(double)"
        );
        assert_eq!(
            static_type("google.protobuf.UInt64Value{}"),
            "wrapper(uint)"
        );
        assert_eq!(
            static_type("google.protobuf.BytesValue{}"),
            "wrapper(bytes)"
        );
        assert_eq!(static_type("google.protobuf.Int64Value{} == null"), "bool");
        assert_eq!(
            check_error("google.protobuf.Int64Value{} + 'a'"),
            "found no matching overload for '_+_' applied to '(wrapper(int), string)'"
        );
    }

    /// checker/checker.go `checkCreateStruct` and `lookupFieldType`: `value` is a wrapper's
    /// only field, of the wrapped type.
    #[test]
    fn a_wrapper_has_only_its_value_field() {
        assert_eq!(
            check_error("google.protobuf.Int64Value{val: 1}"),
            "undefined field 'val'"
        );
        assert_eq!(
            check_error("google.protobuf.Int32Value{value: 1u}"),
            "expected type of field 'value' is 'int' but provided type is 'uint'"
        );
        assert_eq!(
            check_error("google.protobuf.StringValue{value: null}"),
            "expected type of field 'value' is 'string' but provided type is 'null'"
        );
    }

    /// common/types/int.go and uint.go `ConvertToNative` to an `int32`/`uint32` field
    /// (overflow.go), double.go to a `float32` field (truncation); provider.go
    /// `fieldTypeConversionError` wraps the refusal.
    #[test]
    fn thirty_two_bit_wrappers_convert_as_cel_go_does() {
        assert_eq!(
            eval("google.protobuf.Int32Value{value: 2147483648}").unwrap_err(),
            "field type conversion error for google.protobuf.Int32Value.value value type: integer overflow"
        );
        assert!(eval("google.protobuf.Int32Value{value: -2147483648}").is_ok());
        assert_eq!(
            eval("google.protobuf.UInt32Value{value: 4294967296u}").unwrap_err(),
            "field type conversion error for google.protobuf.UInt32Value.value value type: unsigned integer overflow"
        );
        let f = eval("google.protobuf.FloatValue{value: 0.1}").unwrap();
        assert!(f.equals(&Value::Double(f64::from(0.1f32))));
        let big = eval("google.protobuf.FloatValue{value: 1e300}").unwrap();
        assert!(big.equals(&Value::Double(f64::INFINITY)));
        assert_eq!(
            eval("google.protobuf.Int64Value{value: dyn('a')}").unwrap_err(),
            "field type conversion error for google.protobuf.Int64Value.value value type: unsupported native conversion from string to 'int64'"
        );
    }

    /// types.go `checkedWellKnowns`: Duration, Timestamp, Value, ListValue, Struct and Any
    /// are messages; NullValue is an enum, unresolvable as a type (checker/env.go
    /// `LookupIdent`). durationpb `AsDuration`, timestamppb `AsTime`, structpb JSON
    /// conversion (int.go `ConvertToNative(jsonValueType)`).
    #[test]
    fn other_well_known_messages() {
        let t = |s: &str| eval(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert!(
            t("google.protobuf.Duration{seconds: 90, nanos: 5} == duration('90.000000005s')")
                .equals(&Value::Bool(true))
        );
        assert!(
            t("google.protobuf.Timestamp{seconds: 1} == timestamp('1970-01-01T00:00:01Z')")
                .equals(&Value::Bool(true))
        );
        assert!(
            t("google.protobuf.Timestamp{} == timestamp('1970-01-01T00:00:00Z')")
                .equals(&Value::Bool(true))
        );
        assert!(t("google.protobuf.ListValue{values: [dyn(1), dyn('a'), dyn(b'x')]} == [dyn(1.0), dyn('a'), dyn('eA==')]").equals(&Value::Bool(true)));
        assert!(
            t("type(google.protobuf.ListValue{values: [1]}[0]) == double")
                .equals(&Value::Bool(true))
        );
        assert!(t(
            "google.protobuf.Struct{fields: {'a': 9007199254740993}} == {'a': '9007199254740993'}"
        )
        .equals(&Value::Bool(true)));
        assert!(t("google.protobuf.Value{} == null").equals(&Value::Bool(true)));
        assert!(t("google.protobuf.Value{string_value: 'x'} == 'x'").equals(&Value::Bool(true)));
        assert_eq!(
            static_type("google.protobuf.Duration{}"),
            "google.protobuf.Duration"
        );
        assert_eq!(static_type("google.protobuf.ListValue{}"), "list(dyn)");
        assert_eq!(static_type("google.protobuf.Struct{}"), "map(string, dyn)");
        assert_eq!(static_type("google.protobuf.Value{}"), "dyn");
        assert_eq!(
            check_error("google.protobuf.Duration{seconds: 'a'}"),
            "expected type of field 'seconds' is 'int' but provided type is 'string'"
        );
        assert_eq!(
            check_error("google.protobuf.NullValue{}"),
            "undeclared reference to 'google.protobuf.NullValue' (in container '')"
        );
        assert_eq!(
            eval("google.protobuf.Any{}").unwrap_err(),
            "anypb.UnmarshalNew() failed for type \"\": proto: invalid empty type URL"
        );
        assert_eq!(
            eval("google.protobuf.Int32Value{value: dyn(1u)}").unwrap_err(),
            "field type conversion error for google.protobuf.Int32Value.value value type: unsupported type conversion from 'uint' to int32"
        );
    }

    /// common/types/pb/pb.go `init` registers empty.proto; provider.go `registerAllTypes`
    /// declares `google.protobuf.Empty` as an object type (it is no `checkedWellKnowns`
    /// entry), `NativeToValue` leaves it a message, and object.go `protoObj.Equal` is
    /// `pb.Equal`; checker/checker.go `checkCreateStruct` finds no field on it.
    #[test]
    fn empty_is_a_message_with_no_fields() {
        let t = |s: &str| eval(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert!(t("google.protobuf.Empty{} == google.protobuf.Empty{}").equals(&Value::Bool(true)));
        assert!(
            t("type(google.protobuf.Empty{}) == google.protobuf.Empty").equals(&Value::Bool(true))
        );
        assert!(
            t("type(google.protobuf.Empty{}) != google.protobuf.Duration")
                .equals(&Value::Bool(true))
        );
        assert!(t("dyn(google.protobuf.Empty{}) == dyn(1)").equals(&Value::Bool(false)));
        assert!(
            t("[google.protobuf.Empty{}][0] in [google.protobuf.Empty{}]")
                .equals(&Value::Bool(true))
        );
        assert_eq!(
            static_type("google.protobuf.Empty{}"),
            "google.protobuf.Empty"
        );
        assert_eq!(
            static_type("google.protobuf.Empty"),
            "type(google.protobuf.Empty)"
        );
        // object.go `protoObj.ConvertToNative(jsonValueType)` goes through protojson: `{}`.
        assert!(
            t("google.protobuf.Struct{fields: {'a': google.protobuf.Empty{}}} == {'a': {}}")
                .equals(&Value::Bool(true))
        );
        assert_eq!(
            check_error("google.protobuf.Empty{value: 1}"),
            "undefined field 'value'"
        );
        assert_eq!(
            check_error("google.protobuf.Empty{}.value"),
            "undefined field 'value'"
        );
        assert_eq!(
            check_error("google.protobuf.Empty{} == 1"),
            "found no matching overload for '_==_' applied to '(google.protobuf.Empty, int)'"
        );
    }

    /// common/types/provider.go `nativeToValue` (`*tpb.Timestamp`: `v.AsTime()`, Go's
    /// `time.Unix`) checks no range; timestamp.go `ConvertToType(StringType)` is Go's
    /// `Format(time.RFC3339Nano)` (`appendInt(year, 4)`); overflow.go
    /// `addTimeDurationChecked` refuses a result outside CEL's years.
    /// No constructed timestamp, whatever its seconds and nanoseconds, panics any operation
    /// on it (printing, accessors with and without a time zone, arithmetic, comparison,
    /// conversion): each gives a value or an error.
    #[test]
    fn no_constructed_timestamp_panics_an_operation() {
        use proptest::prelude::*;
        let seconds = prop_oneof![
            Just(i64::MIN),
            Just(i64::MAX),
            Just(i64::MIN + 1),
            Just(i64::MAX - 1),
            Just(253_402_300_799i64),
            Just(-62_135_596_800i64),
            any::<i64>(),
            -1_000_000_000_000i64..1_000_000_000_000i64,
        ];
        let nanos = prop_oneof![
            Just(i32::MIN),
            Just(i32::MAX),
            Just(-1i32),
            Just(999_999_999i32),
            any::<i32>()
        ];
        let ops = [
            "string(@)",
            "int(@)",
            "@.getFullYear()",
            "@.getMonth('America/New_York')",
            "@.getDayOfYear('+14:00')",
            "@.getHours('-12:00')",
            "@.getMilliseconds()",
            "@.getDayOfWeek('Asia/Kathmandu')",
            "@ + duration('1s')",
            "@ - duration('-290h')",
            "@ - timestamp('2024-01-01T00:00:00Z')",
            "@ < timestamp('2024-01-01T00:00:00Z')",
            "@ == @",
            "timestamp(string(@))",
            "dyn(@) == dyn(1)",
            "'%s'.format([@])",
        ];
        // Each operation is well-formed: on the epoch, each gives a value.
        let epoch = "google.protobuf.Timestamp{seconds: 0, nanos: 0}";
        for op in ops {
            let expr = op.replace('@', epoch);
            assert!(eval(&expr).is_ok(), "{expr}: {:?}", eval(&expr));
        }
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 512,
            ..Default::default()
        });
        runner
            .run(&(seconds, nanos), |(s, n)| {
                let t = format!("google.protobuf.Timestamp{{seconds: {s}, nanos: {n}}}");
                for op in ops {
                    let expr = op.replace('@', &t);
                    let _ = eval(&expr);
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_constructed_timestamp_outside_cels_years_is_kept() {
        let t = |s: &str| eval(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let ts = |secs: &str| format!("google.protobuf.Timestamp{{seconds: {secs}}}");
        let past = ts("253402300800");
        assert!(t(&format!("string({past}) == '10000-01-01T00:00:00Z'")).equals(&Value::Bool(true)));
        assert!(t(&format!("int({past}) == 253402300800")).equals(&Value::Bool(true)));
        assert!(t(&format!("{past}.getFullYear() == 10000")).equals(&Value::Bool(true)));
        assert!(
            t(&format!("{past} > timestamp('9999-12-31T23:59:59Z')")).equals(&Value::Bool(true))
        );
        assert!(t(&format!(
            "{past} - duration('1s') == timestamp('9999-12-31T23:59:59Z')"
        ))
        .equals(&Value::Bool(true)));
        assert_eq!(
            eval(&format!("{past} + duration('1s')")).unwrap_err(),
            "timestamp overflow"
        );
        let year_zero = ts("-62135596801");
        assert!(
            t(&format!("string({year_zero}) == '0000-12-31T23:59:59Z'")).equals(&Value::Bool(true))
        );
        let minus_one = ts("-62198755200");
        assert!(
            t(&format!("string({minus_one}) == '-0001-01-01T00:00:00Z'"))
                .equals(&Value::Bool(true))
        );
        // `time.Unix` carries nanoseconds outside [0, 1e9) into the seconds.
        assert!(t("string(google.protobuf.Timestamp{seconds: 1, nanos: -1}) == '1970-01-01T00:00:00.999999999Z'").equals(&Value::Bool(true)));
        // At i64's ends nothing panics.
        assert!(t(&format!(
            "int({}) == 9223372036854775807",
            ts("9223372036854775807")
        ))
        .equals(&Value::Bool(true)));
        assert!(eval(&format!("string({})", ts("-9223372036854775808"))).is_ok());
        assert!(eval(&format!(
            "{}.getDayOfWeek('America/New_York')",
            ts("9223372036854775807")
        ))
        .is_ok());
    }

    /// interpreter/runtimecost.go: a struct creation costs `StructCreateBaseCost` (40),
    /// the wrapper types included.
    #[test]
    fn construction_is_charged_as_a_struct_creation() {
        let p = Env::new(32)
            .compile("google.protobuf.Int64Value{value: 1}")
            .unwrap();
        let mut meter = Meter::default();
        p.eval(&[], &mut meter).unwrap();
        assert_eq!(meter.cost, 40);
    }
}
