//! The JSON patch a mutating webhook answers with: from the request's object to the mutated
//! one. The API server applies it with evanphx/json-patch v4 (as `webhook/mutating`
//! does), so it only uses what v4 and RFC 6902 agree on: `add` of a key whose parent exists,
//! `remove` of an existing key or index, `replace` of an existing one, keys escaped per RFC
//! 6901.
//!
//! Small rather than minimal: maps are compared key by key (changed scalars replaced, keys
//! added and removed), lists index by index with the extra elements appended (`/-`) or
//! removed from the end, unless replacing the whole list is shorter (an element inserted at
//! the front shifts every index: one `replace` then). Values are walked with
//! [`with_stack`], so a document as deep as the review decoder accepts never overflows the
//! stack.

use celgate_cel::json::with_stack;
use serde_json::{Map, Value};

use super::json_patch::{clone_json, escape_key, PatchOp};

/// What one operation costs beyond its value (`{"op":"replace","path":"","value":}`).
const OP_OVERHEAD: u64 = 32;

/// The operations that turn `from` into `to`.
pub fn diff(from: &Value, to: &Value) -> Vec<PatchOp> {
    let mut out = Vec::new();
    let mut path = String::new();
    diff_into(from, to, &mut path, &mut out);
    out
}

/// The operations as the JSON array a webhook's `patch` carries.
pub fn to_json(ops: &[PatchOp]) -> Value {
    Value::Array(
        ops.iter()
            .map(|op| {
                let mut m = Map::new();
                m.insert("op".into(), Value::String(op.op.clone()));
                m.insert("path".into(), Value::String(op.path.clone()));
                if let Some(from) = &op.from {
                    m.insert("from".into(), Value::String(from.clone()));
                }
                if let Some(v) = &op.value {
                    m.insert("value".into(), clone_json(v));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

fn op(kind: &str, path: &str, value: Option<&Value>) -> PatchOp {
    PatchOp {
        op: kind.to_string(),
        path: path.to_string(),
        from: None,
        value: value.map(clone_json),
    }
}

fn diff_into(a: &Value, b: &Value, path: &mut String, out: &mut Vec<PatchOp>) {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => with_stack(|| {
            for (k, va) in ma {
                let len = path.len();
                path.push('/');
                path.push_str(&escape_key(k));
                match mb.get(k) {
                    Some(vb) => diff_into(va, vb, path, out),
                    None => out.push(op("remove", path, None)),
                }
                path.truncate(len);
            }
            for (k, vb) in mb {
                if !ma.contains_key(k) {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&escape_key(k));
                    out.push(op("add", path, Some(vb)));
                    path.truncate(len);
                }
            }
        }),
        (Value::Array(xa), Value::Array(xb)) => with_stack(|| diff_array(xa, xb, path, out)),
        _ => {
            if !same(a, b) {
                out.push(op("replace", path, Some(b)));
            }
        }
    }
}

fn diff_array(xa: &[Value], xb: &[Value], path: &mut String, out: &mut Vec<PatchOp>) {
    let mut ops = Vec::new();
    let common = xa.len().min(xb.len());
    let len = path.len();
    for i in 0..common {
        path.push('/');
        path.push_str(&i.to_string());
        diff_into(&xa[i], &xb[i], path, &mut ops);
        path.truncate(len);
    }
    for v in &xb[common..] {
        path.push_str("/-");
        ops.push(op("add", path, Some(v)));
        path.truncate(len);
    }
    for i in (common..xa.len()).rev() {
        path.push('/');
        path.push_str(&i.to_string());
        ops.push(op("remove", path, None));
        path.truncate(len);
    }
    let by_index: u64 = ops
        .iter()
        .map(|o| OP_OVERHEAD + o.path.len() as u64 + o.value.as_ref().map_or(0, json_len))
        .sum();
    let whole = OP_OVERHEAD + path.len() as u64 + json_len_array(xb);
    if ops.len() > 1 && by_index > whole {
        out.push(PatchOp {
            op: "replace".into(),
            path: path.clone(),
            from: None,
            value: Some(Value::Array(xb.iter().map(clone_json).collect())),
        });
    } else {
        out.append(&mut ops);
    }
}

/// Deep equality without recursion past [`with_stack`] (serde_json's `==` recurses).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            ma.len() == mb.len()
                && with_stack(|| {
                    ma.iter()
                        .all(|(k, va)| mb.get(k).is_some_and(|vb| same(va, vb)))
                })
        }
        (Value::Array(xa), Value::Array(xb)) => {
            xa.len() == xb.len() && with_stack(|| xa.iter().zip(xb).all(|(x, y)| same(x, y)))
        }
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        _ => a == b,
    }
}

/// About the length of the value's compact JSON (strings unescaped).
fn json_len(v: &Value) -> u64 {
    match v {
        Value::Null => 4,
        Value::Bool(b) => 4 + u64::from(!*b),
        Value::Number(n) => n.to_string().len() as u64,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(a) => json_len_array(a),
        Value::Object(m) => with_stack(|| {
            2 + m
                .iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_len(v))
                .sum::<u64>()
        }),
    }
}

fn json_len_array(a: &[Value]) -> u64 {
    with_stack(|| 2 + a.iter().map(|v| json_len(v) + 1).sum::<u64>())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::super::json_patch::{apply, Applied, ApplyLimits};
    use super::super::typed::decode;
    use super::*;
    use crate::matching::registry::Gvk;

    fn patched(a: &Value, b: &Value) -> Value {
        match apply(a, &diff(a, b), ApplyLimits::default()) {
            Ok(Applied::Patched(v)) => v,
            other => panic!("the diff does not apply: {other:?}"),
        }
    }

    #[test]
    fn small_patches_for_the_recorded_mutations() {
        let a = json!({"metadata": {"name": "obj"}, "data": {"k1": "v1"}});
        let b = json!({"metadata": {"name": "obj", "labels": {"example.com/env": "prod"}},
                       "data": {"k1": "tested"}});
        let ops = to_json(&diff(&a, &b));
        assert_eq!(
            ops,
            json!([
                {"op": "replace", "path": "/data/k1", "value": "tested"},
                {"op": "add", "path": "/metadata/labels", "value": {"example.com/env": "prod"}}
            ])
        );
        let a = json!({"m": {"a~b/c": 1, "gone": 2}});
        let b = json!({"m": {"a~b/c": 2}});
        assert_eq!(
            to_json(&diff(&a, &b)),
            json!([
                {"op": "replace", "path": "/m/a~0b~1c", "value": 2},
                {"op": "remove", "path": "/m/gone"}
            ])
        );
        assert!(diff(&a, &a).is_empty());
    }

    #[test]
    fn lists_by_index_or_whole() {
        // Appending: one add at the end.
        let a = json!({"l": [{"name": "c", "image": "busybox"}]});
        let b = json!({"l": [{"name": "c", "image": "busybox"}, {"name": "s"}]});
        assert_eq!(
            to_json(&diff(&a, &b)),
            json!([{"op": "add", "path": "/l/-", "value": {"name": "s"}}])
        );
        // Inserting at the front shifts every index: the whole list is shorter.
        let b = json!({"l": [{"name": "first", "image": "busybox"}, {"name": "c", "image": "busybox"}]});
        assert_eq!(
            to_json(&diff(&a, &b)),
            json!([{"op": "replace", "path": "/l", "value": b["l"]}])
        );
        // Removing from the end, last index first.
        let long = |i: u8| json!(format!("{i}-{}", "x".repeat(40)));
        let a = json!({"l": [long(1), long(2), long(3), long(4)]});
        let b = json!({"l": [long(1), long(2)]});
        assert_eq!(
            to_json(&diff(&a, &b)),
            json!([{"op": "remove", "path": "/l/3"}, {"op": "remove", "path": "/l/2"}])
        );
        assert_eq!(patched(&a, &b), b);
        // Small elements: replacing the list is shorter than two removals.
        let a = json!({"l": [1, 2, 3, 4]});
        let b = json!({"l": [1, 2]});
        assert_eq!(
            to_json(&diff(&a, &b)),
            json!([{"op": "replace", "path": "/l", "value": [1, 2]}])
        );
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("~".to_string()),
            Just("/".to_string()),
            Just("-".to_string()),
            Just("0".to_string()),
            "[a-c~/01-]{1,4}",
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..1000).prop_map(Value::from),
            (-1e3f64..1e3).prop_map(Value::from),
            "[a-z~/]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(key(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map(key(), json_value(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// Two related documents: the second derived from the first by small changes, so
    /// lists and maps share most of their content.
    fn related() -> impl Strategy<Value = (Value, Value)> {
        (object(), object(), any::<u8>()).prop_map(|(a, b, mix)| {
            let mut c = a.clone();
            if let (Value::Object(cm), Value::Object(bm)) = (&mut c, &b) {
                for (i, (k, v)) in bm.iter().enumerate() {
                    if (mix >> (i % 8)) & 1 == 1 {
                        cm.insert(k.clone(), v.clone());
                    }
                }
            }
            (a, c)
        })
    }

    fn path() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("/".to_string()),
            prop::collection::vec(
                prop_oneof![
                    key(),
                    Just("-1".into()),
                    Just("1".into()),
                    Just("99999999999999999999".into())
                ],
                0..5
            )
            .prop_map(|segs| segs.iter().map(|s| format!("/{s}")).collect::<String>()),
            "[a-z/~01-]{0,8}",
        ]
    }

    fn patch_op() -> impl Strategy<Value = PatchOp> {
        (
            prop_oneof![
                Just("add"),
                Just("remove"),
                Just("replace"),
                Just("move"),
                Just("copy"),
                Just("test"),
                Just("ADD"),
                Just(""),
            ],
            path(),
            prop::option::of(path()),
            prop::option::of(json_value()),
        )
            .prop_map(|(op, path, from, value)| PatchOp {
                op: op.to_string(),
                path,
                from,
                value,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn applying_the_diff_gives_the_target((a, b) in related()) {
            prop_assert_eq!(patched(&a, &b), b);
        }

        #[test]
        fn applying_the_diff_of_unrelated_documents_gives_the_target(a in object(), b in object()) {
            prop_assert_eq!(patched(&a, &b), b);
        }

        #[test]
        fn apply_and_decode_never_panic(doc in object(), ops in prop::collection::vec(patch_op(), 0..8)) {
            let _ = apply(&doc, &ops, ApplyLimits::default());
            let mut pod = doc.clone();
            if let Value::Object(m) = &mut pod {
                m.insert("spec".into(), doc.clone());
                m.insert("metadata".into(), doc.clone());
            }
            let _ = apply(&pod, &ops, ApplyLimits::default());
            let _ = decode(&pod, &Gvk::new("", "v1", "Pod"));
            let _ = decode(&doc, &Gvk::new("apps", "v1", "Deployment"));
        }
    }

    /// `{"a": {"a": ... {"leaf": 1}}}`, `depth` levels, built without recursion.
    fn deep(depth: usize, key: &str) -> Value {
        let mut v = json!({"leaf": 1});
        for _ in 0..depth {
            let mut m = Map::new();
            m.insert(key.to_string(), v);
            v = Value::Object(m);
        }
        v
    }

    #[test]
    fn deep_documents_on_a_small_stack() {
        // On a thread with a small stack, as deep as the review decoder accepts; the
        // documents are leaked, as serde_json's own drop recurses.
        let run = || {
            let depth = celgate_cel::json::MAX_DEPTH - 10;
            let a = deep(depth, "a");
            let path: String = "/a".repeat(depth);
            let ops = vec![
                PatchOp::new("add", &format!("{path}/x"), "", Some(json!(1))),
                PatchOp {
                    op: "copy".into(),
                    path: "/copy".into(),
                    from: Some("/a".into()),
                    value: None,
                },
                PatchOp::new("test", "/copy", "", Some(deep(depth - 1, "a"))),
            ];
            let r = apply(&a, &ops, ApplyLimits::default());
            // The test fails: the copy has the added `x` at its bottom.
            assert_eq!(r, Ok(Applied::TestFailed));
            std::mem::forget(ops);
            let b = {
                let mut m = Map::new();
                m.insert("a".into(), deep(depth, "b"));
                Value::Object(m)
            };
            let d = diff(&a, &b);
            assert_eq!(d.len(), 2);
            std::mem::forget(d);
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"managedFields": [
                {"fieldsV1": null}]}});
            let mut pod = pod;
            pod["metadata"]["managedFields"][0]["fieldsV1"] = deep(depth, "f:spec");
            let decoded = decode(&pod, &Gvk::new("", "v1", "Pod"));
            assert!(decoded.is_ok());
            assert!(same(
                &decoded.as_ref().unwrap()["metadata"],
                &pod["metadata"]
            ));
            std::mem::forget(decoded);
            std::mem::forget(pod);
            std::mem::forget(a);
            std::mem::forget(b);
        };
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(run)
            .expect("a thread")
            .join()
            .expect("no overflow");
    }

    #[test]
    fn huge_documents() {
        let containers: Vec<Value> = (0..10_000)
            .map(|i| json!({"name": format!("c{i}"), "image": "busybox"}))
            .collect();
        let a = json!({"spec": {"containers": containers}});
        let mut b = a.clone();
        b["spec"]["containers"][5000]["image"] = json!("nginx");
        let d = diff(&a, &b);
        assert_eq!(
            to_json(&d),
            json!([{"op": "replace", "path": "/spec/containers/5000/image", "value": "nginx"}])
        );
        assert_eq!(patched(&a, &b), b);
    }
}
