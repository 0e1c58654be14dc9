//! The apiextensions.k8s.io/v1 `JSONSchemaProps` model, read from the CRD's
//! `openAPIV3Schema`, and the CRD fields the validator needs (group, kind, status subresource).

use serde::Deserialize;
use serde_json::Value as Json;

/// Path of the schema inside the CRD, as the API server names it when every version has the
/// same schema (it is then reported under the internal `spec.validation`).
pub(crate) const SCHEMA_PATH: &str = "spec.validation.openAPIV3Schema";

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AdditionalProperties {
    Bool(bool),
    Schema(Box<Schema>),
}

/// One `x-kubernetes-validations` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidationRule {
    #[serde(default)]
    pub rule: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub message_expression: String,
    pub reason: Option<String>,
    #[serde(default)]
    pub field_path: String,
    pub optional_old_self: Option<bool>,
}

/// A JSON schema node as the API server stores it (the subset of fields a structural schema
/// may use, plus the value validations).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schema {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub format: String,
    /// Properties, in the order of the source map (the API server walks Go map order, so
    /// sibling errors are unordered there anyway).
    #[serde(default, deserialize_with = "ordered_props")]
    pub properties: Vec<(String, Schema)>,
    #[serde(default)]
    pub required: Vec<String>,
    pub items: Option<Box<Schema>>,
    pub additional_properties: Option<AdditionalProperties>,
    #[serde(default)]
    pub nullable: bool,
    pub default: Option<Json>,
    #[serde(rename = "enum")]
    pub enum_: Option<Vec<Json>>,
    pub pattern: Option<String>,
    pub maximum: Option<f64>,
    pub minimum: Option<f64>,
    #[serde(default)]
    pub exclusive_maximum: bool,
    #[serde(default)]
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<u64>,
    pub min_length: Option<u64>,
    pub max_items: Option<u64>,
    pub min_items: Option<u64>,
    #[serde(default)]
    pub unique_items: bool,
    pub max_properties: Option<u64>,
    pub min_properties: Option<u64>,
    #[serde(default)]
    pub all_of: Vec<Schema>,
    #[serde(default)]
    pub any_of: Vec<Schema>,
    #[serde(default)]
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields", default)]
    pub preserve_unknown_fields: bool,
    #[serde(rename = "x-kubernetes-embedded-resource", default)]
    pub embedded_resource: bool,
    #[serde(rename = "x-kubernetes-int-or-string", default)]
    pub int_or_string: bool,
    #[serde(rename = "x-kubernetes-list-type")]
    pub list_type: Option<String>,
    #[serde(rename = "x-kubernetes-list-map-keys", default)]
    pub list_map_keys: Vec<String>,
    #[serde(rename = "x-kubernetes-map-type")]
    pub map_type: Option<String>,
    #[serde(rename = "x-kubernetes-validations", default)]
    pub validations: Vec<ValidationRule>,
}

fn ordered_props<'de, D>(d: D) -> Result<Vec<(String, Schema)>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    // Read as a list of entries: the order is the source map's (sorted keys for a
    // `serde_json::Value`), which keeps error output deterministic.
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<(String, Schema)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of property schemas")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = m.next_entry::<String, Schema>()? {
                out.push((k, v));
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

impl Schema {
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
    }

    /// The schema of a map's values, when `additionalProperties` is a schema.
    pub(crate) fn additional_schema(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// The parts of a CRD the validator needs.
#[derive(Debug, Clone)]
pub struct Crd {
    /// `metadata.name` (`<plural>.<group>`).
    pub name: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// The version has a `/status` subresource.
    pub status_subresource: bool,
    /// The version's `openAPIV3Schema`.
    pub schema: Schema,
    /// The schema as written, to tell whether an update changed it.
    pub raw_schema: Json,
    /// Where errors in the schema are reported (`spec.validation.openAPIV3Schema`, or the
    /// version's own schema when the versions' schemas differ).
    pub schema_path: String,
}

/// Why a CRD document cannot be read as a [`Crd`] (before any of the API server's checks).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CrdError {
    /// No `spec`.
    #[error("CRD has no spec")]
    NoSpec,
    /// No `spec.versions`.
    #[error("CRD has no versions")]
    NoVersions,
    /// The version asked for is not among the CRD's.
    #[error("CRD has no version {0:?}")]
    NoVersion(String),
    /// The version has no schema.
    #[error("CRD version has no schema.openAPIV3Schema")]
    NoSchema,
    /// The schema does not read as an OpenAPI v3 schema.
    #[error("invalid schema: {0}")]
    InvalidSchema(#[source] serde_json::Error),
    /// One version of a CRD whose versions have different schemas.
    #[error("spec.versions[{index}]: {source}")]
    InVersion {
        /// The version's index in `spec.versions`.
        index: usize,
        /// Why it does not read.
        #[source]
        source: Box<CrdError>,
    },
}

/// Reads a CRD from its JSON form (YAML converted by the caller), with its first version's
/// schema.
pub fn parse_crd(doc: &Json) -> Result<Crd, CrdError> {
    parse_crd_version(doc, None)
}

/// Reads a CRD with the schema of `version` (by name), or of its first version.
pub(crate) fn parse_crd_version(doc: &Json, version: Option<&str>) -> Result<Crd, CrdError> {
    let name = doc
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let spec = doc.get("spec").ok_or(CrdError::NoSpec)?;
    let group = spec
        .get("group")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = spec
        .pointer("/names/kind")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let version = spec
        .get("versions")
        .and_then(Json::as_array)
        .and_then(|v| match version {
            Some(name) => v.iter().find(|x| x["name"] == name),
            None => v.first(),
        })
        .ok_or_else(|| match version {
            Some(name) => CrdError::NoVersion(name.to_string()),
            None => CrdError::NoVersions,
        })?;
    let status_subresource = version.pointer("/subresources/status").is_some();
    let raw = version
        .pointer("/schema/openAPIV3Schema")
        .ok_or(CrdError::NoSchema)?;
    let schema: Schema = serde_json::from_value(raw.clone()).map_err(CrdError::InvalidSchema)?;
    Ok(Crd {
        name,
        group,
        kind,
        status_subresource,
        schema,
        raw_schema: raw.clone(),
        schema_path: SCHEMA_PATH.to_string(),
    })
}

/// The CRD as the API server validates it: one schema when every version has the same
/// (reported under `spec.validation`), else each version's, in order, reported under
/// `spec.versions[i].schema.openAPIV3Schema`.
pub(crate) fn parse_crd_versions(doc: &Json) -> Result<Vec<Crd>, CrdError> {
    let versions = doc
        .pointer("/spec/versions")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let schema = |v: &Json| v.pointer("/schema/openAPIV3Schema").cloned();
    let first = versions.first().map(schema);
    if versions.iter().all(|v| Some(schema(v)) == first) {
        return Ok(vec![parse_crd(doc)?]);
    }
    versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut crd =
                parse_crd_version(doc, v["name"].as_str()).map_err(|e| CrdError::InVersion {
                    index: i,
                    source: Box::new(e),
                })?;
            crd.schema_path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            Ok(crd)
        })
        .collect()
}
