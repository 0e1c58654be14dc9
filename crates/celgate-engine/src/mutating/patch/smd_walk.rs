//! The three walks of an ApplyConfiguration merge, over [`GoValue`]s typed by a
//! [`TypeRef`], as sigs.k8s.io/structured-merge-diff v4.4.2 (Kubernetes 1.32) does them:
//! validation (`typed/validate.go`, run when an object is converted to a typed value),
//! the atomic check of the in-tree plugin (`patch/smd.go findAtomics`), and the merge
//! (`typed/merge.go` with `ruleKeepRHS`).
//!
//! Known quirks kept on purpose: errors of merged list items are dropped (v4.4.2 appends
//! them to a shadowed variable), a map whose merge leaves no entry disappears from its
//! parent, and the atomic check only looks into struct fields (not map values).

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::smd_schema::{resolve, Atom, ListType, MapType, Relationship, Scalar, TypeRef};
use super::smd_value::{go_quote, GoValue};

/// One `ValidationError`: the path it happened at and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// `ValidationErrors`, printed as SMD prints them (one error alone, several under
/// `errors:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [one] = self.0.as_slice() {
            return write!(f, "{one}");
        }
        f.write_str("errors:")?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

type Errs = Vec<ValidationError>;

fn error(message: String) -> Errs {
    vec![ValidationError {
        path: String::new(),
        message,
    }]
}

fn prefixed(mut errs: Errs, prefix: &str) -> Errs {
    for e in &mut errs {
        e.path.insert_str(0, prefix);
    }
    errs
}

/// `fieldpath.PathElement`, for list items.
#[derive(Debug, Clone)]
enum PathElement {
    Index(usize),
    Key(Vec<(String, GoValue)>),
    Value(GoValue),
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Index(i) => write!(f, "[{i}]"),
            PathElement::Key(keys) => {
                let parts: Vec<String> = keys
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.smd_string()))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", v.smd_string()),
        }
    }
}

/// The parts of an atom a value selects (`deduceAtom`): the one matching the value's kind
/// when the atom has it, else the whole atom.
#[derive(Clone, Copy)]
struct View<'a> {
    scalar: Option<Scalar>,
    list: Option<&'a ListType>,
    map: Option<&'a MapType>,
}

impl PartialEq for View<'_> {
    fn eq(&self, other: &Self) -> bool {
        // Both views come from one atom: equal when they kept the same parts.
        self.scalar == other.scalar
            && self.list.is_some() == other.list.is_some()
            && self.map.is_some() == other.map.is_some()
    }
}

fn deduce<'a>(atom: &'a Atom, v: Option<&GoValue>) -> View<'a> {
    let whole = View {
        scalar: atom.scalar,
        list: atom.list.as_deref(),
        map: atom.map.as_deref(),
    };
    let none = View {
        scalar: None,
        list: None,
        map: None,
    };
    match v {
        Some(v) if v.is_scalar() && atom.scalar.is_some() => View {
            scalar: atom.scalar,
            ..none
        },
        Some(GoValue::List(_)) if atom.list.is_some() => View {
            list: atom.list.as_deref(),
            ..none
        },
        Some(GoValue::Map(_)) if atom.map.is_some() => View {
            map: atom.map.as_deref(),
            ..none
        },
        _ => whole,
    }
}

fn unresolved(tr: &TypeRef) -> Errs {
    let name = tr.named.as_deref().unwrap_or("inlined type");
    error(format!("schema error: no type found matching: {name}"))
}

fn invalid_atom(tr: &TypeRef) -> Errs {
    let name = match &tr.named {
        Some(n) => format!("named type: {n}"),
        None => "inlined".into(),
    };
    error(format!("schema error: invalid atom: {name}"))
}

/// The type of a struct field or map value (an empty inline type when the map has neither,
/// which SMD reports as an invalid atom).
fn field_type<'a>(t: &'a MapType, key: &str, empty: &'a TypeRef) -> &'a TypeRef {
    t.find_field(key)
        .map(|f| &f.ty)
        .or(t.element.as_ref())
        .unwrap_or(empty)
}

/// `validateScalar`.
fn validate_scalar(t: Scalar, v: Option<&GoValue>, prefix: &str) -> Errs {
    let Some(v) = v else { return Vec::new() };
    let ok = match (t, v) {
        (_, GoValue::Nil) => true,
        (Scalar::Numeric, GoValue::Int(_) | GoValue::Float(_)) => true,
        (Scalar::Numeric, _) => {
            return error(format!(
                "{prefix}expected numeric (int or float), got {}",
                v.go_type()
            ))
        }
        (Scalar::String, GoValue::Str(_)) => true,
        (Scalar::String, _) => {
            return error(format!(
                "{prefix}expected string, got {}",
                v.wrapped_syntax()
            ))
        }
        (Scalar::Boolean, GoValue::Bool(_)) => true,
        (Scalar::Boolean, _) => {
            return error(format!(
                "{prefix}expected boolean, got {}",
                v.wrapped_value()
            ))
        }
        (Scalar::Untyped, v) if v.is_scalar() => true,
        (Scalar::Untyped, _) => {
            return error(format!(
                "{prefix}expected any scalar, got {}",
                v.wrapped_value()
            ))
        }
    };
    debug_assert!(ok);
    Vec::new()
}

/// `listItemToPathElement`.
fn list_item_path(t: &ListType, child: &GoValue) -> Result<PathElement, String> {
    if t.relationship != Some(Relationship::Associative) {
        return Err("invalid indexing of non-associative list".into());
    }
    if t.keys.is_empty() {
        return match child {
            GoValue::Map(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            GoValue::List(_) => {
                Err("not supported: associative list with lists as elements".into())
            }
            GoValue::Nil => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            v => Ok(PathElement::Value(v.clone())),
        };
    }
    let entries = match child {
        GoValue::Nil => return Err("associative list with keys may not have a null element".into()),
        GoValue::Map(entries) => entries,
        _ => return Err("associative list with keys may not have non-map elements".into()),
    };
    let mut keys = Vec::with_capacity(t.keys.len());
    for name in &t.keys {
        if let Some((_, v)) = entries.iter().find(|(k, _)| k == name) {
            keys.push((name.clone(), v.clone()));
            continue;
        }
        let element = resolve(&t.element).ok_or_else(|| {
            format!("couldn't find default value for {name}: invalid elementType for list")
        })?;
        let Some(map) = element.map.as_ref() else {
            return Err(format!(
                "couldn't find default value for {name}: associative list may not have non-map types"
            ));
        };
        match map.find_field(name).and_then(|f| f.default.as_ref()) {
            Some(d) => keys.push((name.clone(), GoValue::from_json(d))),
            None => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                    go_quote(name)
                ))
            }
        }
    }
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(PathElement::Key(keys))
}

/// `TypedValue.Validate`: the errors of `v` against `tr`.
pub(crate) fn validate(v: &GoValue, tr: &TypeRef) -> Errs {
    let Some(atom) = resolve(tr) else {
        return unresolved(tr);
    };
    let view = deduce(&atom, Some(v));
    if let Some(m) = view.map {
        validate_map(m, v)
    } else if let Some(s) = view.scalar {
        validate_scalar(s, Some(v), "")
    } else if let Some(l) = view.list {
        validate_list(l, v)
    } else {
        invalid_atom(tr)
    }
}

fn validate_map(t: &MapType, v: &GoValue) -> Errs {
    let entries = match v {
        GoValue::Nil => return Vec::new(),
        GoValue::Map(entries) => entries,
        other => return error(format!("expected map, got {}", other.wrapped_value())),
    };
    let mut errs = Vec::new();
    for (key, val) in entries {
        let pe = format!(".{key}");
        let ty = match t.find_field(key) {
            Some(f) => &f.ty,
            None => match &t.element {
                Some(e) => e,
                None => {
                    errs.extend(prefixed(error("field not declared in schema".into()), &pe));
                    break;
                }
            },
        };
        errs.extend(prefixed(validate(val, ty), &pe));
    }
    errs
}

fn validate_list(t: &ListType, v: &GoValue) -> Errs {
    let items = match v {
        GoValue::Nil => return Vec::new(),
        GoValue::List(items) => items,
        other => return error(format!("expected list, got {}", other.wrapped_value())),
    };
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, child) in items.iter().enumerate() {
        let pe = if t.relationship != Some(Relationship::Associative) {
            PathElement::Index(i)
        } else {
            match list_item_path(t, child) {
                Ok(pe) => pe,
                Err(e) => {
                    // Without a path element nothing deeper can be reported: stop here.
                    errs.extend(error(format!("element {i}: {e}")));
                    return errs;
                }
            }
        };
        let pe = pe.to_string();
        if matches!(t.relationship, Some(Relationship::Associative)) && !seen.insert(pe.clone()) {
            errs.extend(error(format!("duplicate entries for key {pe}")));
        }
        errs.extend(prefixed(validate(child, &t.element), &pe));
    }
    errs
}

/// `findAtomics`: the paths of atomic lists, maps and structs the configuration sets,
/// looking into struct fields and list items.
pub(crate) fn find_atomics(path: &str, tr: &TypeRef, v: &GoValue, out: &mut Vec<String>) {
    let Some(atom) = resolve(tr) else { return };
    if let (GoValue::Map(entries), Some(m)) = (v, atom.map.as_deref()) {
        if m.is_atomic() {
            out.push(path.to_string());
        }
        for (key, val) in entries {
            if let Some(f) = m.find_field(key) {
                find_atomics(&format!("{path}.{key}"), &f.ty, val, out);
            }
        }
    }
    if let (GoValue::List(items), Some(l)) = (v, atom.list.as_deref()) {
        if l.relationship == Some(Relationship::Atomic) {
            out.push(path.to_string());
        }
        for (i, item) in items.iter().enumerate() {
            find_atomics(&format!("{path}[{i}]"), &l.element, item, out);
        }
    }
}

/// The result of merging one node: its value (`None`: absent from the parent) and errors.
type Merged = (Option<GoValue>, Errs);

/// `TypedValue.Merge` with `ruleKeepRHS`: `rhs` (the configuration) wins at every leaf,
/// structs and granular maps merge key by key, associative lists by key or value.
pub(crate) fn merge(lhs: Option<&GoValue>, rhs: Option<&GoValue>, tr: &TypeRef) -> Merged {
    if lhs.is_none() && rhs.is_none() {
        return (
            None,
            error("at least one of lhs and rhs must be provided".into()),
        );
    }
    let Some(atom) = resolve(tr) else {
        return (None, unresolved(tr));
    };
    let alhs = deduce(&atom, lhs);
    let arhs = deduce(&atom, rhs);
    if rhs.is_none() {
        handle(alhs, tr, lhs, rhs)
    } else if lhs.is_none() || alhs == arhs {
        handle(arhs, tr, lhs, rhs)
    } else {
        // Different kinds on each side: the lhs reading only contributes errors.
        let (_, mut errs) = handle(alhs, tr, lhs, rhs);
        let (out, more) = handle(arhs, tr, lhs, rhs);
        errs.extend(more);
        (out, errs)
    }
}

fn leaf(lhs: Option<&GoValue>, rhs: Option<&GoValue>) -> Merged {
    (rhs.or(lhs).cloned(), Vec::new())
}

fn handle(view: View<'_>, tr: &TypeRef, lhs: Option<&GoValue>, rhs: Option<&GoValue>) -> Merged {
    if let Some(m) = view.map {
        merge_map(m, lhs, rhs)
    } else if let Some(s) = view.scalar {
        let lerrs = validate_scalar(s, lhs, "lhs: ");
        let rerrs = validate_scalar(s, rhs, "rhs: ");
        if !lerrs.is_empty() && !rerrs.is_empty() {
            return (None, [lerrs, rerrs].concat());
        }
        leaf(lhs, rhs)
    } else if let Some(l) = view.list {
        merge_list(l, lhs, rhs)
    } else {
        (None, invalid_atom(tr))
    }
}

fn as_map(v: Option<&GoValue>) -> Option<&[(String, GoValue)]> {
    match v {
        Some(GoValue::Map(entries)) => Some(entries),
        _ => None,
    }
}

fn as_list(v: Option<&GoValue>) -> Option<&[GoValue]> {
    match v {
        Some(GoValue::List(items)) => Some(items),
        _ => None,
    }
}

fn merge_map(t: &MapType, lhs: Option<&GoValue>, rhs: Option<&GoValue>) -> Merged {
    let l = as_map(lhs);
    let r = as_map(rhs);
    let empty = l.is_none_or(|m| m.is_empty()) && r.is_none_or(|m| m.is_empty());
    if t.is_atomic() || empty {
        return leaf(lhs, rhs);
    }
    let l = l.unwrap_or_default();
    let r = r.unwrap_or_default();
    let rhs_index: HashMap<&str, &GoValue> = r.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let lhs_keys: HashSet<&str> = l.iter().map(|(k, _)| k.as_str()).collect();
    let no_type = TypeRef::default();
    let mut out = Vec::new();
    let mut errs = Vec::new();
    let both = l
        .iter()
        .map(|(k, v)| (k, Some(v), rhs_index.get(k.as_str()).copied()))
        .chain(
            r.iter()
                .filter(|(k, _)| !lhs_keys.contains(k.as_str()))
                .map(|(k, v)| (k, None, Some(v))),
        );
    for (key, lv, rv) in both {
        let (v, e) = merge(lv, rv, field_type(t, key, &no_type));
        errs.extend(prefixed(e, &format!(".{key}")));
        if let Some(v) = v {
            out.push((key.clone(), v));
        }
    }
    ((!out.is_empty()).then_some(GoValue::Map(out)), errs)
}

fn merge_list(t: &ListType, lhs: Option<&GoValue>, rhs: Option<&GoValue>) -> Merged {
    let l = as_list(lhs);
    let r = as_list(rhs);
    let empty = l.is_none_or(|i| i.is_empty()) && r.is_none_or(|i| i.is_empty());
    if t.relationship == Some(Relationship::Atomic) || empty {
        return leaf(lhs, rhs);
    }
    merge_list_items(t, l.unwrap_or_default(), r.unwrap_or_default())
}

/// The items of a list keyed by their path elements (`indexListPathElements`); a repeated
/// key on the object side (`allow_duplicates`) maps to null.
struct Indexed<'a> {
    keys: Vec<String>,
    values: HashMap<String, Option<&'a GoValue>>,
}

fn index_items<'a>(
    t: &ListType,
    items: &'a [GoValue],
    allow_duplicates: bool,
) -> (Indexed<'a>, Errs) {
    let mut errs = Vec::new();
    let mut indexed = Indexed {
        keys: Vec::with_capacity(items.len()),
        values: HashMap::with_capacity(items.len()),
    };
    for (i, child) in items.iter().enumerate() {
        let pe = match list_item_path(t, child) {
            Ok(pe) => pe.to_string(),
            Err(e) => {
                errs.extend(error(format!("element {i}: {e}")));
                continue;
            }
        };
        match indexed.values.get_mut(&pe) {
            Some(_) if !allow_duplicates => {
                errs.extend(error(format!("duplicate entries for key {pe}")));
                continue;
            }
            Some(slot) => *slot = None,
            None => {
                indexed.values.insert(pe.clone(), Some(child));
            }
        }
        indexed.keys.push(pe);
    }
    (indexed, errs)
}

/// The item a path element names; an object-side duplicate is looked up as null (SMD
/// stores a null value for it).
fn lookup<'a>(ix: &Indexed<'a>, pe: &str) -> Option<&'a GoValue> {
    static NIL: GoValue = GoValue::Nil;
    ix.values.get(pe).map(|v| v.unwrap_or(&NIL))
}

/// `visitListItems`: items of both sides in an order that keeps the object's order for
/// its items and puts new configuration items before the next shared one.
fn merge_list_items(t: &ListType, lhs: &[GoValue], rhs: &[GoValue]) -> Merged {
    let (r, mut errs) = index_items(t, rhs, false);
    let (l, lerrs) = index_items(t, lhs, true);
    errs.extend(lerrs);
    if !errs.is_empty() {
        return (None, errs);
    }
    let mut shared = r.keys.iter().filter(|pe| l.values.contains_key(*pe));
    let mut next_shared = shared.next();
    let mut merged_rhs: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    // Errors of merged items are dropped, as in SMD v4.4.2.
    let mut push = |lv: Option<&GoValue>, rv: Option<&GoValue>| {
        if let (Some(v), _) = merge(lv, rv, &t.element) {
            out.push(v);
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < l.keys.len() || ri < r.keys.len() {
        if li < l.keys.len() && ri < r.keys.len() {
            let pe = &l.keys[li];
            if *pe == r.keys[ri] {
                merged_rhs.insert(pe);
                push(lookup(&l, pe), lookup(&r, pe));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if r.values.contains_key(pe) && next_shared.is_some_and(|s| s != pe) {
                li += 1;
                continue;
            }
        }
        if li < l.keys.len() {
            let pe = &l.keys[li];
            if !r.values.contains_key(pe) {
                push(Some(&lhs[li]), None);
                li += 1;
                continue;
            } else if merged_rhs.contains(pe.as_str()) {
                li += 1;
            }
        }
        if ri < r.keys.len() {
            let pe = &r.keys[ri];
            merged_rhs.insert(pe);
            push(lookup(&l, pe), lookup(&r, pe));
            ri += 1;
            if next_shared.is_some_and(|s| s == pe) {
                next_shared = shared.next();
            }
        }
    }
    ((!out.is_empty()).then_some(GoValue::List(out)), Vec::new())
}
