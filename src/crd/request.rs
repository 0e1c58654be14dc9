//! The runtime path of a create: defaulting, pruning, OpenAPI value validation, then the CEL
//! rules (skipped, with a synthetic cause, after a blocking schema error), answered as the
//! API server does: the stored object, or a 422 `Status`.

use serde_json::Value as Json;

use super::errors::Status;
use super::rules::CompiledCrd;
use super::{defaults, prune, validate};

impl CompiledCrd {
    /// Admits `obj` as a new custom resource: the object as stored, or the rejection.
    pub fn create(&self, mut obj: Json) -> Result<Json, Status> {
        defaults::apply(&mut obj, &self.schema);
        prune::prune_root(&mut obj, &self.schema);
        let mut causes = validate::validate_root(&obj, &self.schema);
        if causes.iter().any(validate::is_blocking) {
            causes.push(validate::skipped_rules_cause());
        } else {
            causes.extend(self.validate_rules_create(&obj));
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
                let (new, old) = (lookup(&obj, at), lookup(old, at));
                new.is_none() || new != old
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

/// The value at a cause's field path (`spec.l[0].x`, `spec.m[key]`): brackets index a list
/// or key a map.
fn lookup<'j>(root: &'j Json, path: &str) -> Option<&'j Json> {
    let mut cur = root;
    let mut rest = path;
    if rest.is_empty() || rest == "<nil>" {
        return Some(root);
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let key = &r[..end];
            cur = match cur {
                Json::Array(a) => a.get(key.parse::<usize>().ok()?)?,
                Json::Object(m) => m.get(key)?,
                _ => return None,
            };
            rest = &r[end + 1..];
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        }
    }
    Some(cur)
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
