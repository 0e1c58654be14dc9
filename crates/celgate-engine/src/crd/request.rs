//! The runtime path of a create: defaulting, pruning, OpenAPI value validation, then the CEL
//! rules (skipped, with a synthetic cause, after a blocking schema error), answered as the
//! API server does: the stored object, or a 422 `Status`.

use serde_json::Value as Json;

use super::errors::Status;
use super::rules::CompiledCrd;
use super::schema::Schema;
use super::{defaults, prune, validate};

impl CompiledCrd {
    /// Admits `obj` as a new custom resource: the object as stored, or the rejection.
    ///
    /// With a status subresource a create cannot set the status: the strategy's
    /// `PrepareForCreate` (apiextensions-apiserver registry/customresource/strategy.go) deletes
    /// it after decoding (and defaulting) and before validation, so no rule under `status`
    /// runs and a rule above it sees no status. The stored object is read back through the
    /// storage codec, which defaults again (only a default of `status` itself can bring it
    /// back).
    pub fn create(&self, mut obj: Json) -> Result<Json, Status> {
        defaults::prune_nulls(&mut obj, Some(&self.schema));
        defaults::apply(&mut obj, &self.schema);
        prune::prune_root(&mut obj, &self.schema);
        if self.info.status_subresource {
            set_field(&mut obj, "status", None);
        }
        let mut causes = validate::validate_root(&obj, &self.schema);
        if causes.iter().any(validate::is_blocking) {
            causes.push(validate::skipped_rules_cause());
        } else {
            causes.extend(self.validate_rules_create(&obj));
        }
        if causes.is_empty() {
            if self.info.status_subresource {
                defaults::apply(&mut obj, &self.schema);
            }
            return Ok(obj);
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or_default();
        Err(Status::invalid(&self.info.qualified_kind(), name, causes))
    }
}

impl CompiledCrd {
    /// Admits `obj` replacing `old` (a PUT or merge patch of the main resource): with a
    /// status subresource the stored status is kept; CEL rules ratchet.
    pub fn update(&self, old: &Json, mut obj: Json) -> Result<Json, Status> {
        if self.info.status_subresource {
            match old.get("status") {
                Some(st) => set_field(&mut obj, "status", Some(st.clone())),
                None => set_field(&mut obj, "status", None),
            }
        }
        self.admit_update(old, obj, true)
    }

    /// Admits a /status update: only the status is taken from `obj`, and nothing ratchets.
    pub fn update_status(&self, old: &Json, obj: &Json) -> Result<Json, Status> {
        let mut next = old.clone();
        set_field(&mut next, "status", obj.get("status").cloned());
        self.admit_update(old, next, false)
    }

    fn admit_update(&self, old: &Json, mut obj: Json, ratchet: bool) -> Result<Json, Status> {
        defaults::prune_nulls(&mut obj, Some(&self.schema));
        defaults::apply(&mut obj, &self.schema);
        prune::prune_root(&mut obj, &self.schema);
        let mut causes = validate::validate_root(&obj, &self.schema);
        if ratchet {
            // OpenAPI ratcheting: an error on a value equal to the stored one is dropped
            // (for `required`, the object that lacks the field must be unchanged).
            causes.retain(|c| {
                let at = if c.reason == "FieldValueRequired" {
                    parent_path(&c.field)
                } else {
                    c.field.as_str()
                };
                !ratcheted(&self.schema, &obj, old, at)
            });
        }
        if causes.iter().any(validate::is_blocking) {
            causes.push(validate::skipped_rules_cause());
        } else {
            causes.extend(self.validate_rules(&obj, Some(old), ratchet));
        }
        if causes.is_empty() {
            return Ok(obj);
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or_default();
        Err(Status::invalid(&self.info.qualified_kind(), name, causes))
    }
}

/// The path of the object holding the field `path` names (`spec.a.b` -> `spec.a`).
fn parent_path(path: &str) -> &str {
    match path.rfind(['.', '[']) {
        Some(i) => &path[..i],
        None => "",
    }
}

/// Whether an OpenAPI error at `path` (`spec.l[0].x`, `spec.m[key]`) ratchets: the value
/// there, or one of its ancestors, equals the old value it correlates with. Values
/// correlate through object fields, map keys and list-map keys; the items of atomic and set
/// lists correlate with nothing (as the API server's `CorrelatedObject`), so once such a list
/// changes its items' errors are reported again.
fn ratcheted(schema: &Schema, new_root: &Json, old_root: &Json, path: &str) -> bool {
    let (mut new, mut old, mut s) = (new_root, Some(old_root), Some(schema));
    let mut rest = if path == "<nil>" { "" } else { path };
    loop {
        let Some(o) = old else {
            return false;
        };
        if o == new {
            return true;
        }
        if rest.is_empty() {
            return false;
        }
        // The next step: `[key]` or `.field` (the first field has no dot).
        let (step, bracket, tail) = if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return false;
            };
            (&r[..end], true, &r[end + 1..])
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (&r[..end], false, &r[end..])
        };
        rest = tail;
        let schema_here = s;
        match new {
            Json::Array(items) if bracket => {
                let Some(i) = step.parse::<usize>().ok() else {
                    return false;
                };
                let Some(item) = items.get(i) else {
                    return false;
                };
                let list_map = schema_here.filter(|x| {
                    x.list_type.as_deref() == Some("map") && !x.list_map_keys.is_empty()
                });
                old = match (list_map, o) {
                    (Some(ls), Json::Array(old_items)) => old_items
                        .iter()
                        .find(|x| ls.list_map_keys.iter().all(|k| x.get(k) == item.get(k))),
                    _ => None,
                };
                new = item;
                s = schema_here.and_then(|x| x.items.as_deref());
            }
            Json::Object(m) => {
                let Some(v) = m.get(step) else {
                    return false;
                };
                old = o.get(step);
                new = v;
                s = schema_here.and_then(|x| x.property(step).or_else(|| x.additional_schema()));
            }
            _ => return false,
        }
    }
}

fn set_field(obj: &mut Json, key: &str, v: Option<Json>) {
    if let Json::Object(m) = obj {
        match v {
            Some(v) => {
                m.insert(key.to_string(), v);
            }
            None => {
                m.remove(key);
            }
        }
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Json, patch: &Json) {
    let Json::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Json::Object(serde_json::Map::new());
    }
    if let Json::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Json::Null), v);
            }
        }
    }
}

/// The rejection of a CRD whose schema or rules are invalid.
pub fn crd_status(name: &str, causes: Vec<super::errors::Cause>) -> Status {
    Status::invalid(
        "CustomResourceDefinition.apiextensions.k8s.io",
        name,
        causes,
    )
}
