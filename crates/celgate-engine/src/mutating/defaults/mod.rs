//! The API server's defaulting of a built-in object after each mutation (in-tree
//! `plugin/policy/mutating/dispatcher.go` `dispatchOne`: the patched object is converted
//! back to its Go type and `GetObjectDefaulter().Default` runs on it), so the next policy,
//! the next webhook and the stored object see the defaults: a container a policy adds gets
//! `imagePullPolicy`, a `spec.replicas` set to null comes back as 1.
//!
//! The scheme's defaulters are generated per type (`pkg/apis/*/v*/zz_generated.defaults.go`):
//! each `SetDefaults_<Type>` (`pkg/apis/*/v*/defaults.go`) and each declarative `+default=`
//! marker runs on every value of its type inside the object, a type's own before those of
//! the types nested in it. Celgate does the same walk along the OpenAPI definitions it
//! carries (`assets/builtin-schemas.json`), calling the defaulter its tables register for a
//! definition ([`defaulter`]); a kind's defaulter first makes the Go value structs the
//! generated code always descends into (a Pod's `spec`, a Deployment's
//! `spec.template.spec`), as Go's encoder writes them.
//!
//! Feature gates are those of Kubernetes 1.32 by default (the oracle's version): on are
//! `JobPodReplacementPolicy`, `StatefulSetAutoDeletePVC`, `LoadBalancerIPMode`,
//! `JobBackoffLimitPerIndex`; off (alpha) are `PodLevelResources`, `ImageVolume`.
//! `SetDefaults_ResourceList` (rounding quantities up to milli units) is not done: celgate
//! keeps quantities as written. Custom resources are not defaulted here.

mod core;
mod image;
mod others;
mod workloads;

#[cfg(test)]
mod tests;

use celgate_cel::json::{with_stack, MAX_DEPTH};
use serde_json::{Map, Value as Json};

use crate::matching::registry::Gvk;
use crate::schemas::builtin_definition;

/// A JSON object as a Go struct's defaulter sees it.
type Obj = Map<String, Json>;

/// One `SetDefaults_<Type>` (with the type's declarative defaults).
type Defaulter = fn(&mut Obj);

/// Applies the scheme's defaulting to `object` of a request for `gvk`. Only a built-in
/// kind's object is typed and defaulted, as the kind its `apiVersion`/`kind` name (a patch
/// may change it, and the object was decoded as that kind), else as `gvk`; a custom
/// resource is unstructured and left as it is.
pub fn default_object(object: &mut Json, gvk: &Gvk) {
    let Some(requested) = builtin_definition(gvk) else {
        return;
    };
    let (defs, def) = own_kind(object)
        .as_ref()
        .and_then(builtin_definition)
        .unwrap_or(requested);
    let Some(schema) = defs.get(def) else {
        return;
    };
    walk(object, schema, Some(def), defs, 0);
}

/// The kind an object says it is.
fn own_kind(object: &Json) -> Option<Gvk> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Some(Gvk::new(group, version, kind))
}

/// Defaults `value` of type `schema` (the definition `def` when known) and what it holds,
/// the value's own defaulter first.
fn walk(
    value: &mut Json,
    schema: &'static Json,
    def: Option<&'static str>,
    defs: &'static Map<String, Json>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let (def, schema) = resolve(schema, def, defs);
    match value {
        Json::Object(m) => {
            if let Some(f) = def.and_then(defaulter) {
                f(m);
            }
            if let Some(props) = schema.get("properties").and_then(Json::as_object) {
                for (k, v) in m.iter_mut() {
                    if let Some(s) = props.get(k) {
                        with_stack(|| walk(v, s, None, defs, depth + 1));
                    }
                }
            } else if let Some(elem) = schema.get("additionalProperties").filter(|e| e.is_object())
            {
                for v in m.values_mut() {
                    with_stack(|| walk(v, elem, None, defs, depth + 1));
                }
            }
        }
        Json::Array(items) => {
            if let Some(elem) = schema.get("items") {
                for v in items {
                    with_stack(|| walk(v, elem, None, defs, depth + 1));
                }
            }
        }
        _ => {}
    }
}

/// Follows `$ref`s (a few levels at most) to the definition a schema names.
fn resolve(
    schema: &'static Json,
    def: Option<&'static str>,
    defs: &'static Map<String, Json>,
) -> (Option<&'static str>, &'static Json) {
    let mut def = def;
    let mut s = schema;
    for _ in 0..8 {
        let Some(r) = s.get("$ref").and_then(Json::as_str) else {
            break;
        };
        let Some((name, target)) = defs.get_key_value(r) else {
            break;
        };
        def = Some(name.as_str());
        s = target;
    }
    (def, s)
}

/// The defaulter registered for an OpenAPI definition (`io.k8s.api.core.v1.Container`).
fn defaulter(def: &str) -> Option<Defaulter> {
    let (package, name) = def.strip_prefix("io.k8s.")?.rsplit_once('.')?;
    match package {
        "api.core.v1" => core::defaulter(name),
        "api.apps.v1" | "api.batch.v1" => workloads::defaulter(package, name),
        "apimachinery.pkg.apis.meta.v1" if name == "ObjectMeta" => Some(core::object_meta),
        _ => others::defaulter(package, name),
    }
}

// What Go's defaulters test and set, on JSON: an absent or `null` field is Go's nil or
// zero value.

/// A pointer field is nil (absent or `null`).
fn is_unset(m: &Obj, k: &str) -> bool {
    matches!(m.get(k), None | Some(Json::Null))
}

/// A string field is `""`.
fn is_empty_str(m: &Obj, k: &str) -> bool {
    match m.get(k) {
        None | Some(Json::Null) => true,
        Some(Json::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// A number field is 0.
fn is_zero(m: &Obj, k: &str) -> bool {
    match m.get(k) {
        None | Some(Json::Null) => true,
        Some(Json::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// A slice or map field has no element (`len(x) == 0`).
fn is_empty(m: &Obj, k: &str) -> bool {
    match m.get(k) {
        None | Some(Json::Null) => true,
        Some(Json::Array(a)) => a.is_empty(),
        Some(Json::Object(o)) => o.is_empty(),
        _ => false,
    }
}

/// `if x == nil { x = &v }`.
fn default_ptr(m: &mut Obj, k: &str, v: impl Into<Json>) {
    if is_unset(m, k) {
        m.insert(k.to_string(), v.into());
    }
}

/// `if x == "" { x = v }`.
fn default_str(m: &mut Obj, k: &str, v: &str) {
    if is_empty_str(m, k) {
        m.insert(k.to_string(), Json::from(v));
    }
}

/// `if x == 0 { x = v }`.
fn default_int(m: &mut Obj, k: &str, v: i64) {
    if is_zero(m, k) {
        m.insert(k.to_string(), Json::from(v));
    }
}

/// A field's string value (`""` when absent).
fn str_of<'a>(m: &'a Obj, k: &str) -> &'a str {
    m.get(k).and_then(Json::as_str).unwrap_or("")
}

/// An object field that is present (a non-nil pointer, or a struct the document has).
fn child<'a>(m: &'a mut Obj, k: &str) -> Option<&'a mut Obj> {
    m.get_mut(k).and_then(Json::as_object_mut)
}

/// A Go value struct field: written by Go's encoder even when zero, so made when absent
/// (or `null`) for its defaulters to fill. `None` when the document holds another type
/// there (the typed decoding refused such objects before this runs).
fn value_struct<'a>(m: &'a mut Obj, k: &str) -> Option<&'a mut Obj> {
    if is_unset(m, k) {
        m.insert(k.to_string(), Json::Object(Map::new()));
    }
    child(m, k)
}

/// The value structs along `path` made, as [`value_struct`].
fn value_structs<'a>(m: &'a mut Obj, path: &[&str]) -> Option<&'a mut Obj> {
    let mut at = m;
    for k in path {
        at = value_struct(at, k)?;
    }
    Some(at)
}
