//! The object, oldObject and request a policy sees when it matched a request through an
//! equivalent resource (in-tree `VersionedAttributes`): the objects converted to the matched
//! kind ([`super::convert`]), `request.kind`/`request.resource` naming the matched kind and
//! resource (in matchConditions `request.resource` stays the request's own, §6.3). Built once
//! per request and matched kind, whichever policies and bindings need it; a request matched
//! on its own resource reads its review in place, with no copy.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::convert::{convert, ConvertError};
use super::request::Request;
use crate::matching::registry::{Conversion, Equivalents, Gvk};
use crate::matching::Matched;
use celgate_cel::json::{Item, Ref};
use celgate_cel::value::{Map, OwnedMap, Str};
use celgate_cel::Value;

/// What the expressions of one policy match read of the request.
#[derive(Clone)]
pub(super) struct View<'a> {
    pub object: Value<'a>,
    pub old_object: Value<'a>,
    /// `request` in validations, messages and audit annotations.
    pub request: Value<'a>,
    /// `request` in matchConditions.
    pub condition_request: Value<'a>,
}

impl<'a> View<'a> {
    /// The request as it came.
    pub(super) fn own(req: &Request<'a>) -> View<'a> {
        let mut view = View::own_objects(req);
        view.build_request(req);
        view
    }

    /// [`View::own`] with `request` and `condition_request` left null, for policies that
    /// never name `request` ([`celgate_cel::reads::Reads::request`]): building it copies
    /// every top-level field of the review's request. [`View::build_request`] completes it.
    pub(super) fn own_objects(req: &Request<'a>) -> View<'a> {
        View {
            object: req.object.map_or(Value::Null, Value::from_doc),
            old_object: req.old_object.map_or(Value::Null, Value::from_doc),
            condition_request: Value::Null,
            request: Value::Null,
        }
    }

    /// Builds the `request` of a view made by [`View::own_objects`], once.
    pub(super) fn build_request(&mut self, req: &Request<'a>) {
        if matches!(self.request, Value::Null) {
            self.request = in_tree_request(req.request, &[]);
            self.condition_request = self.request.clone();
        }
    }
}

/// The resource and kind a policy matched as, when not the request's own.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    group: String,
    version: String,
    resource: String,
    kind: Gvk,
}

/// Views per matched kind and resource for one request, converted on first use.
#[derive(Default)]
pub(super) struct Versions<'a> {
    views: Vec<(Target, Result<View<'a>, ConvertError>)>,
}

impl<'a> Versions<'a> {
    /// The view for `matched` (never [`Matched::Own`], which is [`View::own`]).
    pub(super) fn view(
        &mut self,
        req: &Request<'a>,
        matched: Matched<'_>,
        equivalents: Equivalents<'_>,
    ) -> Result<View<'a>, ConvertError> {
        let from = request_kind(req);
        let a = &req.attributes;
        let (target, strategy) = match matched {
            Matched::Own => return Ok(View::own(req)),
            Matched::Equivalent(e) => {
                let strategy = match equivalents {
                    Equivalents::Known { class, .. } => class.conversion.clone(),
                    Equivalents::Unknown => Conversion::Rewrite,
                };
                let target = Target {
                    group: e.group.clone(),
                    version: e.version.clone(),
                    resource: e.resource.clone(),
                    kind: e.kind.clone(),
                };
                (target, strategy)
            }
            Matched::Version(v) => {
                // A subresource of another group (a `Scale`) keeps its kind.
                let kind = if from.group == a.group {
                    Gvk::new(&from.group, v, &from.kind)
                } else {
                    from.clone()
                };
                let target = Target {
                    group: a.group.clone(),
                    version: v.to_string(),
                    resource: a.resource.clone(),
                    kind,
                };
                (target, Conversion::Rewrite)
            }
        };
        if let Some((_, v)) = self.views.iter().find(|(t, _)| *t == target) {
            return v.clone();
        }
        let view = build(req, &from, &target, &strategy);
        self.views.push((target, view.clone()));
        view
    }
}

/// The kind a policy matched `req` as, when not its own, and how an object converts to it
/// (the same as [`Versions::view`] uses): `(request kind, matched kind, conversion)`.
pub(super) fn matched_kind(
    req: &Request<'_>,
    matched: Matched<'_>,
    equivalents: Equivalents<'_>,
) -> Option<(Gvk, Gvk, Conversion)> {
    let from = request_kind(req);
    match matched {
        Matched::Own => None,
        Matched::Equivalent(e) => {
            let strategy = match equivalents {
                Equivalents::Known { class, .. } => class.conversion.clone(),
                Equivalents::Unknown => Conversion::Rewrite,
            };
            Some((from, e.kind.clone(), strategy))
        }
        Matched::Version(v) => {
            let kind = if from.group == req.attributes.group {
                Gvk::new(&from.group, v, &from.kind)
            } else {
                from.clone()
            };
            Some((from, kind, Conversion::Rewrite))
        }
    }
}

fn build<'a>(
    req: &Request<'a>,
    from: &Gvk,
    target: &Target,
    strategy: &Conversion,
) -> Result<View<'a>, ConvertError> {
    let object = |o: Option<Ref<'a, 'a>>| -> Result<Value<'a>, ConvertError> {
        let Some(r) = o.filter(|r| !matches!(r.item(), Item::Null)) else {
            return Ok(Value::Null);
        };
        if *from == target.kind {
            // The same kind (a `Scale` of either version): nothing to convert.
            return Ok(Value::from_doc(r));
        }
        match strategy {
            // Only apiVersion changes: the rest stays in the review, read in place.
            Conversion::Rewrite => {
                let api_version = Value::string(target.kind.api_version());
                Ok(replaced(r, &[("apiVersion", api_version)]))
            }
            _ => convert(&to_json(r), from, &target.kind, strategy).map(|j| owned(&j)),
        }
    };
    let converted = object(req.object)?;
    let old = object(req.old_object)?;
    let kind = owned(&json!({
        "group": target.kind.group,
        "version": target.kind.version,
        "kind": target.kind.kind,
    }));
    let resource = owned(&json!({
        "group": target.group,
        "version": target.version,
        "resource": target.resource,
    }));
    Ok(View {
        object: converted,
        old_object: old,
        request: in_tree_request(
            req.request,
            &[("kind", kind.clone()), ("resource", resource)],
        ),
        condition_request: in_tree_request(req.request, &[("kind", kind)]),
    })
}

/// `request` as in-tree VAP builds it (`CreateAdmissionRequest` fills a fresh
/// AdmissionRequest from the admission attributes): no uid (`dyn(request).uid` is `""`), no
/// objects (`dyn(request).object` is null: policies read `object`), `dryRun` always present.
/// `with` replaces further top-level fields. Built once per request and view.
fn in_tree_request<'a>(r: Ref<'a, 'a>, with: &[(&'static str, Value<'a>)]) -> Value<'a> {
    let dry_run = r
        .get("dryRun")
        .is_some_and(|d| matches!(d.item(), Item::Bool(true)));
    let in_tree = [
        ("uid", Value::String(Str::Borrowed(""))),
        ("object", Value::Null),
        ("oldObject", Value::Null),
        ("dryRun", Value::Bool(dry_run)),
    ];
    replaced_by(r, &in_tree, with)
}

/// An object of the review with some top-level fields replaced (or added), the others read
/// in place.
fn replaced<'a>(r: Ref<'a, 'a>, with: &[(&'static str, Value<'a>)]) -> Value<'a> {
    replaced_by(r, with, &[])
}

/// [`replaced`] with the replacements in two slices (no list of them built per request).
fn replaced_by<'a>(
    r: Ref<'a, 'a>,
    first: &[(&'static str, Value<'a>)],
    then: &[(&'static str, Value<'a>)],
) -> Value<'a> {
    let with = || first.iter().chain(then);
    let members = match r.item() {
        Item::Object(n) => n as usize,
        _ => 0,
    };
    let mut entries = Vec::with_capacity(members + first.len() + then.len());
    let mut children = r.children();
    while let Some((k, v)) = children.next_entry() {
        let value = with()
            .find(|(key, _)| *key == k)
            .map_or_else(|| Value::from_doc(v), |(_, w)| w.clone());
        entries.push((Value::String(Str::Borrowed(k)), value));
    }
    for (k, w) in with() {
        if r.get(k).is_none() {
            entries.push((Value::String(Str::Borrowed(k)), w.clone()));
        }
    }
    // The review's keys are distinct (repeats are refused when it is decoded), and the
    // replacements name distinct keys (`first` and `then` never share one here), each
    // replacing a key rather than repeating it.
    let map = OwnedMap::from_distinct(entries);
    Value::Map(Map::Owned(Arc::new(map)))
}

/// A review node as JSON, one stack segment check per level (the review may nest deeply).
pub(super) fn to_json(r: Ref<'_, '_>) -> Json {
    match r.item() {
        Item::Array(_) => {
            celgate_cel::json::with_stack(|| Json::Array(r.children().map(to_json).collect()))
        }
        Item::Object(_) => celgate_cel::json::with_stack(|| {
            let mut m = serde_json::Map::new();
            let mut children = r.children();
            while let Some((k, v)) = children.next_entry() {
                m.insert(k.to_string(), to_json(v));
            }
            Json::Object(m)
        }),
        _ => r.to_value(),
    }
}

/// The request's kind, as its review names it.
pub(super) fn request_kind(req: &Request<'_>) -> Gvk {
    let kind = req.request.get("kind");
    let field = |k: &str| {
        kind.and_then(|r| r.get(k))
            .and_then(|r| match r.item() {
                Item::Str(s) => Some(s.to_string()),
                _ => r.str_chars().map(|(s, _)| s.to_string()),
            })
            .unwrap_or_default()
    };
    Gvk {
        group: field("group"),
        version: field("version"),
        kind: field("kind"),
    }
}

/// A JSON value as an owned CEL value (for objects celgate builds, not the review's).
fn owned(j: &Json) -> Value<'static> {
    match j {
        Json::Array(a) => {
            celgate_cel::json::with_stack(|| Value::list(a.iter().map(owned).collect()))
        }
        Json::Object(m) => celgate_cel::json::with_stack(|| {
            let entries = m
                .iter()
                .map(|(k, v)| (Value::string(k.as_str()), owned(v)))
                .collect();
            // JSON object keys are distinct strings: building cannot fail.
            let map = OwnedMap::from_entries(entries).unwrap_or_default();
            Value::Map(Map::Owned(Arc::new(map)))
        }),
        Json::String(s) => Value::string(s.as_str()),
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
    }
}
