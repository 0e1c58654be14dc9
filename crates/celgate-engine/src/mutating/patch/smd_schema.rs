//! The structured-merge-diff schema the ApplyConfiguration merge types objects with
//! (sigs.k8s.io/structured-merge-diff/v4 `schema/elements.go`), for built-in kinds and CRDs.
//!
//! Built-in kinds use client-go's SMD schema (`applyconfigurations/internal/internal.go`,
//! embedded as `assets/merge-schemas.json` by `scripts/gen-merge-schemas.py`), the same
//! conversion of the OpenAPI definitions the API server's static type converter makes; the
//! asset also maps each built-in resource kind to its type (from the kinds table `celgate
//! lint` uses). A CRD
//! version's schema is converted from its structural schema as the API server converts the
//! OpenAPI it publishes for it (k8s.io/kube-openapi `pkg/schemaconv`, via
//! `managedfields.NewTypeConverter`): objects with properties are structs, objects without
//! are maps, lists are atomic unless `x-kubernetes-list-type` says `set` or `map`,
//! `x-kubernetes-preserve-unknown-fields` lets unknown fields through (in the whole subtree),
//! and a schema without a type is the deduced type.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value as Json;

use crate::crd::schema::Schema;
use crate::matching::registry::Gvk;

const MERGE_SCHEMAS: &str = include_str!("../../../assets/merge-schemas.json");

/// The type of anything a schema does not describe (`__untyped_deduced_`).
pub(crate) const DEDUCED: &str = "__untyped_deduced_";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Default for [`MergeSchema::max_depth`].
pub(crate) const DEFAULT_MAX_DEPTH: usize = 1000;

/// `schema.Scalar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scalar {
    Numeric,
    String,
    Boolean,
    Untyped,
}

/// `schema.ElementRelationship`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Relationship {
    Atomic,
    Associative,
    Separable,
}

/// `schema.Atom`: what a value of the type may be (one part is chosen by the value's kind).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Atom {
    #[serde(rename = "s", default)]
    pub(crate) scalar: Option<Scalar>,
    #[serde(rename = "l", default)]
    pub(crate) list: Option<Box<ListType>>,
    #[serde(rename = "m", default)]
    pub(crate) map: Option<Box<MapType>>,
}

impl Atom {
    fn is_empty(&self) -> bool {
        self.scalar.is_none() && self.list.is_none() && self.map.is_none()
    }
}

/// `schema.List`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct ListType {
    #[serde(rename = "e")]
    pub(crate) element: TypeRef,
    #[serde(rename = "r", default)]
    pub(crate) relationship: Option<Relationship>,
    #[serde(rename = "k", default)]
    pub(crate) keys: Vec<String>,
}

/// `schema.Map`: a struct (fields), a map (element type) or both.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct MapType {
    #[serde(rename = "f", default)]
    pub(crate) fields: Vec<Field>,
    #[serde(rename = "e", default)]
    pub(crate) element: Option<TypeRef>,
    #[serde(rename = "r", default)]
    pub(crate) relationship: Option<Relationship>,
}

impl MapType {
    pub(crate) fn find_field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub(crate) fn is_atomic(&self) -> bool {
        self.relationship == Some(Relationship::Atomic)
    }
}

/// `schema.StructField`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "RawField")]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) ty: TypeRef,
    pub(crate) default: Option<Json>,
}

/// A field as the asset writes it: `[name, type]` or `[name, type, default]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawField {
    WithDefault(String, TypeRef, Json),
    Plain(String, TypeRef),
}

impl From<RawField> for Field {
    fn from(r: RawField) -> Field {
        match r {
            RawField::WithDefault(name, ty, d) => Field {
                name,
                ty,
                default: Some(d),
            },
            RawField::Plain(name, ty) => Field {
                name,
                ty,
                default: None,
            },
        }
    }
}

/// `schema.TypeRef`: a named type (whose relationship a reference may override) or an
/// inline atom.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct TypeRef {
    #[serde(rename = "n", default)]
    pub(crate) named: Option<String>,
    #[serde(rename = "r", default)]
    pub(crate) relationship: Option<Relationship>,
    #[serde(flatten)]
    pub(crate) inline: Atom,
}

impl TypeRef {
    fn named(name: &str) -> TypeRef {
        TypeRef {
            named: Some(name.to_string()),
            ..TypeRef::default()
        }
    }

    fn inline(atom: Atom) -> TypeRef {
        TypeRef {
            inline: atom,
            ..TypeRef::default()
        }
    }
}

#[derive(Deserialize)]
struct Table {
    /// `[group, version, kind, type name]`.
    kinds: Vec<(String, String, String, String)>,
    types: HashMap<String, Atom>,
}

/// The embedded table, read once; `None` only if the file is broken, which
/// `the_builtin_merge_schemas_read` rules out.
fn table() -> Option<&'static Table> {
    static TABLE: OnceLock<Option<Table>> = OnceLock::new();
    TABLE
        .get_or_init(|| serde_json::from_str(MERGE_SCHEMAS).ok())
        .as_ref()
}

fn builtin_types() -> Option<&'static HashMap<String, Atom>> {
    table().map(|t| &t.types)
}

/// The type name of a built-in resource kind.
fn builtin_type_name(gvk: &Gvk) -> Option<&'static str> {
    table()?
        .kinds
        .iter()
        .find(|(g, v, k, _)| *g == gvk.group && *v == gvk.version && *k == gvk.kind)
        .map(|(_, _, _, name)| name.as_str())
}

/// `Schema.Resolve`: the atom a reference names, with the reference's relationship
/// override applied (to the map part first, as SMD does).
pub(crate) fn resolve(tr: &TypeRef) -> Option<Cow<'_, Atom>> {
    let atom: &Atom = match &tr.named {
        Some(name) => builtin_types()?.get(name)?,
        None => &tr.inline,
    };
    let Some(rel) = tr.relationship else {
        return Some(Cow::Borrowed(atom));
    };
    let mut copy = atom.clone();
    if let Some(m) = copy.map.as_mut() {
        m.relationship = Some(rel);
    } else if let Some(l) = copy.list.as_mut() {
        l.relationship = Some(rel);
    }
    Some(Cow::Owned(copy))
}

/// The schema an ApplyConfiguration is merged with: the kind, and its type when there is
/// one (none is the API server's `no corresponding type`).
#[derive(Debug, Clone)]
pub struct MergeSchema {
    pub(crate) gvk: Gvk,
    pub(crate) root: Option<TypeRef>,
    /// How deep the object and the apply configuration may nest; deeper inputs are refused
    /// before the recursive walks start.
    pub(crate) max_depth: usize,
}

impl MergeSchema {
    /// The schema of a built-in kind, or one without a type when the kind is not a
    /// built-in resource kind (`PodExecOptions`, `autoscaling/v1 Scale`).
    pub fn builtin(gvk: &Gvk) -> MergeSchema {
        let root = builtin_type_name(gvk).map(TypeRef::named);
        MergeSchema {
            gvk: gvk.clone(),
            root,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// The schema of a CRD version from its structural schema (`None`: the version has no
    /// schema, published as a bare object).
    pub fn crd(gvk: &Gvk, schema: Option<&Schema>) -> MergeSchema {
        let root = match schema {
            Some(s) => crd_ref(s, false, true),
            None => TypeRef::inline(Atom {
                map: Some(Box::new(MapType {
                    fields: type_meta_fields(),
                    ..MapType::default()
                })),
                ..Atom::default()
            }),
        };
        MergeSchema {
            gvk: gvk.clone(),
            root: Some(root),
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// The same schema with another nesting limit.
    pub fn with_max_depth(mut self, max_depth: usize) -> MergeSchema {
        self.max_depth = max_depth;
        self
    }

    /// The kind this schema is for.
    pub fn gvk(&self) -> &Gvk {
        &self.gvk
    }
}

/// `apiVersion`, `kind` and `metadata`, which the API server adds to a CRD's published
/// schema at the root and in every embedded resource.
fn type_meta_fields() -> Vec<Field> {
    let string = || {
        TypeRef::inline(Atom {
            scalar: Some(Scalar::String),
            ..Atom::default()
        })
    };
    vec![
        Field {
            name: "apiVersion".into(),
            ty: string(),
            default: None,
        },
        Field {
            name: "kind".into(),
            ty: string(),
            default: None,
        },
        Field {
            name: "metadata".into(),
            ty: TypeRef::named(OBJECT_META),
            default: None,
        },
    ]
}

/// `makeRef`: an inline type, or the deduced type when the schema says nothing.
fn crd_ref(s: &Schema, preserve: bool, with_type_meta: bool) -> TypeRef {
    let atom = crd_atom(s, preserve, with_type_meta);
    if atom.is_empty() {
        TypeRef::named(DEDUCED)
    } else {
        TypeRef::inline(atom)
    }
}

fn map_relationship(s: &Schema) -> Option<Relationship> {
    match s.map_type.as_deref() {
        Some("atomic") => Some(Relationship::Atomic),
        Some("granular") => Some(Relationship::Separable),
        _ => None,
    }
}

/// The atom of one structural schema node (`VisitKind`, `VisitMap`, `VisitArray`,
/// `VisitPrimitive`, `VisitArbitrary`); `preserve` is inherited from the enclosing struct.
fn crd_atom(s: &Schema, preserve: bool, with_type_meta: bool) -> Atom {
    let mut atom = Atom::default();
    let type_meta = with_type_meta || s.embedded_resource;
    match s.type_.as_str() {
        "object" | "" if !s.properties.is_empty() || type_meta => {
            let preserve = preserve || s.preserve_unknown_fields;
            let mut fields: Vec<Field> = s
                .properties
                .iter()
                .filter(|(name, _)| !(type_meta && is_type_meta(name)))
                .map(|(name, p)| Field {
                    name: name.clone(),
                    ty: crd_ref(p, preserve, false),
                    default: p.default.clone(),
                })
                .collect();
            if type_meta {
                fields.extend(type_meta_fields());
            }
            atom.map = Some(Box::new(MapType {
                fields,
                element: preserve.then(|| TypeRef::named(DEDUCED)),
                relationship: map_relationship(s),
            }));
        }
        "object" => {
            let element = match s.additional_schema() {
                Some(a) => crd_ref(a, preserve, false),
                None => TypeRef::named(DEDUCED),
            };
            atom.map = Some(Box::new(MapType {
                fields: Vec::new(),
                element: Some(element),
                relationship: map_relationship(s),
            }));
        }
        "array" => {
            let element = match &s.items {
                Some(items) => crd_ref(items, preserve, false),
                None => TypeRef::named(DEDUCED),
            };
            let (relationship, keys) = match s.list_type.as_deref() {
                Some("set") => (Relationship::Associative, Vec::new()),
                Some("map") => (Relationship::Associative, s.list_map_keys.clone()),
                _ => (Relationship::Atomic, Vec::new()),
            };
            atom.list = Some(Box::new(ListType {
                element,
                relationship: Some(relationship),
                keys,
            }));
        }
        "integer" | "number" => atom.scalar = Some(Scalar::Numeric),
        "boolean" => atom.scalar = Some(Scalar::Boolean),
        "string" => {
            atom.scalar = Some(match s.format.as_str() {
                "" | "byte" => Scalar::String,
                _ => Scalar::Untyped,
            })
        }
        // No type (int-or-string, a bare preserve-unknown-fields node): `VisitArbitrary`,
        // the deduced type, which `crd_ref` names.
        "" => {}
        _ => atom.scalar = Some(Scalar::Untyped),
    }
    atom
}

fn is_type_meta(name: &str) -> bool {
    matches!(name, "apiVersion" | "kind" | "metadata")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_merge_schemas_read() {
        let types = builtin_types().expect("asset parses");
        assert!(types.len() > 500);
        let pod = MergeSchema::builtin(&Gvk::new("", "v1", "Pod"));
        assert_eq!(pod.root, Some(TypeRef::named("io.k8s.api.core.v1.Pod")));
        let container_ref = TypeRef::named("io.k8s.api.core.v1.Container");
        let container = resolve(&container_ref).unwrap();
        let map = container.map.as_ref().unwrap();
        let ports = map.find_field("ports").unwrap();
        let list = ports.ty.inline.list.as_ref().unwrap();
        assert_eq!(list.relationship, Some(Relationship::Associative));
        assert_eq!(list.keys, ["containerPort", "protocol"]);
        assert_eq!(
            map.find_field("name").unwrap().default,
            Some(Json::String(String::new()))
        );
    }

    #[test]
    fn kinds_without_a_resource_have_no_type() {
        assert!(MergeSchema::builtin(&Gvk::new("", "v1", "PodExecOptions"))
            .root
            .is_none());
        assert!(
            MergeSchema::builtin(&Gvk::new("autoscaling", "v1", "Scale"))
                .root
                .is_none()
        );
    }
}
