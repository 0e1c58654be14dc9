//! A `serde_json::Value` read from a file as deep as the API server accepts an object.
//!
//! serde_json refuses JSON nested deeper than 128 levels (its recursion limit), which the API
//! server does not: it decodes objects 10,000 levels deep (sigs.k8s.io/json), so a CRD schema
//! or manifest that `kubectl apply` takes was refused by every file reader. Without the limit,
//! serde_json's own `Value` recursion would overflow a thread's stack instead. [`DeepValue`]
//! builds the value through a seed that counts the depth (at most [`MAX_DEPTH`], the review
//! decoder's bound) and runs each level through [`with_stack`], the review decoder's stack
//! growth, so it reads on any thread. It works with any serde deserializer (YAML's keeps its
//! own limit of 128 levels).

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value as Json};

use super::json::{with_stack, MAX_DEPTH};

/// A JSON value of any depth up to [`MAX_DEPTH`].
pub struct DeepValue(pub Json);

impl<'de> serde::Deserialize<'de> for DeepValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DeepValue, D::Error> {
        let depth = Cell::new(0);
        Level { depth: &depth }.deserialize(d).map(DeepValue)
    }
}

/// One JSON document of `text` (white space may follow it), of any depth up to [`MAX_DEPTH`].
pub fn from_str(text: &str) -> Result<Json, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    // The depth is bounded by `Level` instead, the stack by `with_stack`.
    de.disable_recursion_limit();
    let value = <DeepValue as serde::Deserialize>::deserialize(&mut de)?;
    de.end()?;
    Ok(value.0)
}

/// The JSON documents of `text`, one after another (white space between), each of any depth
/// up to [`MAX_DEPTH`].
pub fn stream(text: &str) -> impl Iterator<Item = Result<Json, serde_json::Error>> + '_ {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    de.into_iter::<DeepValue>().map(|v| v.map(|v| v.0))
}

/// Deserializes one value, its nesting counted in `depth`.
#[derive(Clone, Copy)]
struct Level<'d> {
    depth: &'d Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for Level<'_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        with_stack(|| d.deserialize_any(self))
    }
}

impl Level<'_> {
    /// Runs `body` one level deeper, refused past [`MAX_DEPTH`].
    fn nested<E: serde::de::Error>(
        self,
        body: impl FnOnce() -> Result<Json, E>,
    ) -> Result<Json, E> {
        let depth = self.depth.get() + 1;
        if depth > MAX_DEPTH {
            return Err(E::custom(format_args!(
                "nested deeper than {MAX_DEPTH} levels"
            )));
        }
        self.depth.set(depth);
        let value = body();
        self.depth.set(depth - 1);
        value
    }
}

impl<'de> Visitor<'de> for Level<'_> {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Json, E> {
        // As serde_json's `Value`: an integer past 64 bits becomes a float.
        Ok(Number::from_i128(v).map_or_else(|| float(v as f64), Json::Number))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Json, E> {
        Ok(Number::from_u128(v).map_or_else(|| float(v as f64), Json::Number))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        self.nested(|| {
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(item) = seq.next_element_seed(self)? {
                items.push(item);
            }
            Ok(Json::Array(items))
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        self.nested(|| {
            let mut members = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(self)?;
                members.insert(key, value);
            }
            Ok(Json::Object(members))
        })
    }
}

/// A float as serde_json's `Value` keeps it: NaN and infinities, which JSON cannot hold, are
/// null.
fn float(v: f64) -> Json {
    Number::from_f64(v).map_or(Json::Null, Json::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    /// Past serde_json's 128 levels, up to the API server's bound, read (and dropped) on a
    /// thread with the default 2 MiB stack; deeper is an error, not a crash. (Copying or
    /// writing such a value recurses on the stack: the commands run on larger ones.)
    #[test]
    fn reads_as_deep_as_the_api_server_on_a_small_stack() {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                assert!(serde_json::from_str::<Json>(&nested(200)).is_err());
                let value = from_str(&nested(MAX_DEPTH)).unwrap();
                let mut at = &value;
                let mut depth = 0;
                while let Json::Array(items) = at {
                    at = &items[0];
                    depth += 1;
                }
                assert_eq!((depth, at), (MAX_DEPTH, &Json::from(1)));
                let e = from_str(&nested(MAX_DEPTH + 1)).unwrap_err();
                assert!(e.to_string().contains("nested deeper than"), "{e}");
                drop(value);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    /// What serde_json's `Value` reads, this reads the same.
    #[test]
    fn reads_what_serde_json_reads() {
        let text =
            r#"{"a": [1, -2, 3.5, 18446744073709551615, "x", null, true, {}], "b": {"c": []}}"#;
        assert_eq!(
            from_str(text).unwrap(),
            serde_json::from_str::<Json>(text).unwrap()
        );
        let docs: Vec<Json> = stream("{\"a\": 1} {\"b\": 2}\n")
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            docs,
            [serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]
        );
        assert!(from_str("{} x").is_err());
        let yaml: DeepValue = serde_yaml_ng::from_str("a: [1, {b: c}]\n").unwrap();
        assert_eq!(yaml.0, serde_json::json!({"a": [1, {"b": "c"}]}));
    }
}
