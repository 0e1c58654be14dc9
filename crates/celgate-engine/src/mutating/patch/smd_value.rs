//! The values the ApplyConfiguration merge works on: what structured-merge-diff's
//! `value.NewValueInterface` sees of a Go `map[string]any` tree (sigs.k8s.io/structured-merge-diff/v4
//! `value/valueunstructured.go`), with the Go formatting its error messages print
//! (`%v`, `%#v`, `%T`, `value.ToString`).
//!
//! A Go value none of SMD's predicates accepts (a CEL `[]ref.Val`, a `[]byte`, a
//! `structpb.NullValue`, a `uint64`) is kept as [`GoValue::Opaque`] with its printed forms, so
//! the errors name it as the API server does.

use serde_json::{Map, Number, Value as Json};

/// A Go value as SMD's `valueUnstructured` classifies it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GoValue {
    /// Go `nil` (a JSON `null` in native data): `IsNull`.
    Nil,
    Bool(bool),
    /// Any Go signed integer (and the small unsigned ones): `IsInt`.
    Int(i64),
    Float(f64),
    Str(String),
    /// `[]any`: `IsList`.
    List(Vec<GoValue>),
    /// `map[string]any`: `IsMap`. Entries keep their insertion order.
    Map(Vec<(String, GoValue)>),
    /// Any other Go value.
    Opaque(Box<Opaque>),
}

/// A Go value SMD cannot classify. CEL-built containers keep their elements, so they are
/// printed (only for an error) in time linear in their size.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Opaque {
    /// A CEL-built list (`[]ref.Val`), with its elements' Go values.
    CelList(Vec<GoValue>),
    /// A CEL-built map (`map[ref.Val]ref.Val`), with its keys' and values' Go values.
    CelMap(Vec<(GoValue, GoValue)>),
    /// Any other Go value: its `%T`, `%#v`, `%v`, and what `json.Marshal` makes of it
    /// (`None`: not encodable).
    Described {
        go_type: String,
        go_syntax: String,
        go_value: String,
        json: Option<Json>,
    },
}

impl Opaque {
    fn go_type(&self) -> String {
        match self {
            Opaque::CelList(_) => "[]ref.Val".into(),
            Opaque::CelMap(_) => "map[ref.Val]ref.Val".into(),
            Opaque::Described { go_type, .. } => go_type.clone(),
        }
    }

    fn go_syntax(&self) -> String {
        match self {
            Opaque::CelList(items) => {
                let parts: Vec<String> = items.iter().map(GoValue::go_syntax).collect();
                format!("[]ref.Val{{{}}}", parts.join(", "))
            }
            Opaque::CelMap(entries) => {
                let mut parts: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", k.go_syntax(), v.go_syntax()))
                    .collect();
                parts.sort();
                format!("map[ref.Val]ref.Val{{{}}}", parts.join(", "))
            }
            Opaque::Described { go_syntax, .. } => go_syntax.clone(),
        }
    }

    fn go_value(&self) -> String {
        match self {
            Opaque::CelList(items) => {
                let parts: Vec<String> = items.iter().map(GoValue::go_value).collect();
                format!("[{}]", parts.join(" "))
            }
            Opaque::CelMap(entries) => {
                let mut parts: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", k.go_value(), v.go_value()))
                    .collect();
                parts.sort();
                format!("map[{}]", parts.join(" "))
            }
            Opaque::Described { go_value, .. } => go_value.clone(),
        }
    }

    fn to_json(&self) -> Result<Json, String> {
        match self {
            Opaque::CelList(items) => Ok(Json::Array(
                items
                    .iter()
                    .map(GoValue::to_json)
                    .collect::<Result<_, _>>()?,
            )),
            // encoding/json refuses maps keyed by an interface type.
            Opaque::CelMap(_) => Err("json: unsupported type: map[ref.Val]ref.Val".into()),
            Opaque::Described { json, go_type, .. } => json
                .clone()
                .ok_or_else(|| format!("json: unsupported type: {go_type}")),
        }
    }
}

impl GoValue {
    pub(crate) fn is_scalar(&self) -> bool {
        matches!(
            self,
            GoValue::Bool(_) | GoValue::Int(_) | GoValue::Float(_) | GoValue::Str(_)
        )
    }

    /// The native value of decoded JSON, as Go's unstructured decoding builds it (integers
    /// as `int64` unless they overflow it, then `float64`).
    pub(crate) fn from_json(v: &Json) -> GoValue {
        match v {
            Json::Null => GoValue::Nil,
            Json::Bool(b) => GoValue::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => GoValue::Int(i),
                None => GoValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => GoValue::Str(s.clone()),
            Json::Array(items) => GoValue::List(items.iter().map(GoValue::from_json).collect()),
            Json::Object(m) => GoValue::Map(
                m.iter()
                    .map(|(k, v)| (k.clone(), GoValue::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The JSON `json.Marshal` writes for the value; `Err` names the first part it cannot
    /// encode.
    pub(crate) fn to_json(&self) -> Result<Json, String> {
        Ok(match self {
            GoValue::Nil => Json::Null,
            GoValue::Bool(b) => Json::Bool(*b),
            GoValue::Int(i) => Json::Number((*i).into()),
            GoValue::Float(f) => match Number::from_f64(*f) {
                Some(n) => Json::Number(n),
                None => return Err(format!("json: unsupported value: {}", go_float(*f))),
            },
            GoValue::Str(s) => Json::String(s.clone()),
            GoValue::List(items) => Json::Array(
                items
                    .iter()
                    .map(GoValue::to_json)
                    .collect::<Result<_, _>>()?,
            ),
            GoValue::Map(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k.clone(), v.to_json()?);
                }
                Json::Object(m)
            }
            GoValue::Opaque(o) => o.to_json()?,
        })
    }

    /// `%T`.
    pub(crate) fn go_type(&self) -> String {
        match self {
            GoValue::Nil => "<nil>".into(),
            GoValue::Bool(_) => "bool".into(),
            GoValue::Int(_) => "int64".into(),
            GoValue::Float(_) => "float64".into(),
            GoValue::Str(_) => "string".into(),
            GoValue::List(_) => "[]interface {}".into(),
            GoValue::Map(_) => "map[string]interface {}".into(),
            GoValue::Opaque(o) => o.go_type(),
        }
    }

    /// `%v` (fmt prints map keys sorted).
    pub(crate) fn go_value(&self) -> String {
        match self {
            GoValue::Nil => "<nil>".into(),
            GoValue::Bool(b) => b.to_string(),
            GoValue::Int(i) => i.to_string(),
            GoValue::Float(f) => go_float(*f),
            GoValue::Str(s) => s.clone(),
            GoValue::List(items) => {
                let parts: Vec<String> = items.iter().map(GoValue::go_value).collect();
                format!("[{}]", parts.join(" "))
            }
            GoValue::Map(entries) => {
                let mut parts: Vec<(&String, String)> =
                    entries.iter().map(|(k, v)| (k, v.go_value())).collect();
                parts.sort_by(|a, b| a.0.cmp(b.0));
                let parts: Vec<String> =
                    parts.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("map[{}]", parts.join(" "))
            }
            GoValue::Opaque(o) => o.go_value(),
        }
    }

    /// `%#v`.
    pub(crate) fn go_syntax(&self) -> String {
        match self {
            GoValue::Nil => "interface {}(nil)".into(),
            GoValue::Bool(b) => b.to_string(),
            GoValue::Int(i) => i.to_string(),
            GoValue::Float(f) => go_float(*f),
            GoValue::Str(s) => go_quote(s),
            GoValue::List(items) => {
                let parts: Vec<String> = items.iter().map(GoValue::go_syntax).collect();
                format!("[]interface {{}}{{{}}}", parts.join(", "))
            }
            GoValue::Map(entries) => {
                let mut parts: Vec<(&String, String)> =
                    entries.iter().map(|(k, v)| (k, v.go_syntax())).collect();
                parts.sort_by(|a, b| a.0.cmp(b.0));
                let parts: Vec<String> = parts
                    .into_iter()
                    .map(|(k, v)| format!("{}:{v}", go_quote(k)))
                    .collect();
                format!("map[string]interface {{}}{{{}}}", parts.join(", "))
            }
            GoValue::Opaque(o) => o.go_syntax(),
        }
    }

    /// `%#v` of the `value.Value` SMD wraps the value in (a `*valueUnstructured`).
    pub(crate) fn wrapped_syntax(&self) -> String {
        format!("&value.valueUnstructured{{Value:{}}}", self.go_syntax())
    }

    /// `%v` of the `value.Value` SMD wraps the value in.
    pub(crate) fn wrapped_value(&self) -> String {
        format!("&{{{}}}", self.go_value())
    }

    /// `value.ToString`, which path elements print keys and set members with.
    pub(crate) fn smd_string(&self) -> String {
        match self {
            GoValue::Nil => "null".into(),
            GoValue::Float(f) => go_float(*f),
            GoValue::Int(i) => i.to_string(),
            GoValue::Str(s) => go_quote(s),
            GoValue::Bool(b) => b.to_string(),
            GoValue::List(items) => {
                let parts: Vec<String> = items.iter().map(GoValue::smd_string).collect();
                format!("[{}]", parts.join(","))
            }
            GoValue::Map(entries) => entries
                .iter()
                .map(|(k, v)| format!("{k}={}", v.smd_string()))
                .collect(),
            GoValue::Opaque(_) => "{{undefined}}".into(),
        }
    }
}

/// A float as Go's `%v` prints it (`strconv.FormatFloat(f, 'g', -1, 64)`: the shortest
/// digits, in exponent form when the exponent is below -4 or at least 6, the precision `%g`
/// decides with for the shortest form).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as Go's -1 precision does.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// A string as Go's `%q` / `strconv.Quote` writes it.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"))
                } else {
                    out.push_str(&format!("\\U{n:08x}"))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `%#v` of a Go byte slice held in an interface (`[]uint8{0x61, 0x62}`).
pub(crate) fn go_bytes_syntax(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|c| format!("0x{c:x}")).collect();
    format!("[]uint8{{{}}}", parts.join(", "))
}

/// `%v` of a Go byte slice (`[97 98]`).
pub(crate) fn go_bytes_value(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|c| c.to_string()).collect();
    format!("[{}]", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_does() {
        assert_eq!(go_float(1.0), "1");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(123456789.0), "1.23456789e+08");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-2.5e-7), "-2.5e-07");
    }

    #[test]
    fn values_print_as_go_does() {
        assert_eq!(
            GoValue::Int(1).wrapped_syntax(),
            "&value.valueUnstructured{Value:1}"
        );
        assert_eq!(GoValue::Str("a\"b".into()).go_syntax(), r#""a\"b""#);
        let m = GoValue::Map(vec![
            ("b".into(), GoValue::Int(1)),
            ("a".into(), GoValue::Str("x".into())),
        ]);
        assert_eq!(m.go_value(), "map[a:x b:1]");
        assert_eq!(m.go_syntax(), r#"map[string]interface {}{"a":"x", "b":1}"#);
        assert_eq!(m.go_type(), "map[string]interface {}");
        assert_eq!(go_bytes_syntax(b"ab"), "[]uint8{0x61, 0x62}");
        assert_eq!(
            GoValue::List(vec![GoValue::Int(1), GoValue::Str("a".into())]).smd_string(),
            r#"[1,"a"]"#
        );
    }
}
