//! Which requests a policy or binding names: resource rules and selectors
//! (`MatchResources`, `NamedRuleWithOperations`).

use serde::{Deserialize, Serialize};

use super::meta::LabelSelector;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NamedRule {
    pub resource_names: Vec<String>,
    pub operations: Vec<String>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    pub scope: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct MatchResources {
    pub namespace_selector: Option<LabelSelector>,
    pub object_selector: Option<LabelSelector>,
    pub resource_rules: Vec<NamedRule>,
    pub exclude_resource_rules: Vec<NamedRule>,
    pub match_policy: Option<String>,
}
