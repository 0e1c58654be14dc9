//! Everything a snapshot is built from, copied out of the stores ([`Inputs`]), and the
//! snapshot built from it: each object once, each param kind declared as synced, not yet
//! synced, or not served, as the API server's policy plugin sees its informers
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value as Json;

use super::params::{all_synced, ParamKind};
use super::watched::Watched;
use crate::policy::snapshot::{group_of, CompileCache, Scope, Snapshot, SnapshotBuilder};

/// Everything a snapshot is built from, copied out of the stores.
pub(super) struct Inputs {
    objects: Vec<Arc<Json>>,
    kinds: Vec<(String, String, ParamState)>,
}

enum ParamState {
    Synced(Scope),
    Unsynced(Scope),
    Unresolved,
    NotServed,
}

impl Inputs {
    pub(super) fn collect<'a>(
        policies: &[Arc<Json>],
        bindings: &[Arc<Json>],
        others: impl Iterator<Item = &'a Watched>,
        params: &BTreeMap<(String, String), ParamKind>,
    ) -> Inputs {
        let mut objects: Vec<Arc<Json>> = policies.iter().chain(bindings).cloned().collect();
        for w in others {
            objects.extend(w.store.objects());
        }
        let mut kinds = Vec::new();
        for ((api_version, kind), p) in params {
            let group = group_of(api_version).to_string();
            let state = match p {
                ParamKind::Watched { scope, watches } if all_synced(watches) => {
                    for w in watches {
                        objects.extend(w.store.objects());
                    }
                    ParamState::Synced(*scope)
                }
                ParamKind::Watched { scope, .. } => ParamState::Unsynced(*scope),
                ParamKind::Resolving { .. } | ParamKind::Unresolved { .. } => {
                    ParamState::Unresolved
                }
                ParamKind::NotServed { .. } => ParamState::NotServed,
            };
            kinds.push((group, kind.clone(), state));
        }
        Inputs { objects, kinds }
    }

    pub(super) fn build(self, version: u16, cache: &CompileCache) -> Snapshot {
        let mut b = SnapshotBuilder::new();
        // The same object can come from two watches (Namespaces as params, or one kind named
        // at two versions): keep the first.
        let mut seen = BTreeSet::new();
        for o in self.objects {
            let meta = &o["metadata"];
            let key = (
                group_of(o["apiVersion"].as_str().unwrap_or("")).to_string(),
                o["kind"].as_str().unwrap_or("").to_string(),
                meta["namespace"].as_str().unwrap_or("").to_string(),
                meta["name"].as_str().unwrap_or("").to_string(),
            );
            if !seen.insert(key) {
                continue;
            }
            // The API server validated these objects; one that still does not read is
            // skipped (and logged) rather than taking the whole snapshot down.
            let name = format!("{}/{}", o["kind"].as_str().unwrap_or(""), meta["name"]);
            if let Err(e) =
                crate::source::add_shared(&mut b, o.clone(), crate::source::Check::Nothing)
            {
                tracing::warn!(object = %name, error = %e, "object skipped");
            }
        }
        for (group, kind, state) in self.kinds {
            match state {
                ParamState::Synced(scope) => b.declare_kind(&group, &kind, scope),
                ParamState::Unsynced(scope) => {
                    b.declare_kind(&group, &kind, scope);
                    b.param_kind_unsynced(&group, &kind);
                }
                ParamState::Unresolved => b.param_kind_unsynced(&group, &kind),
                ParamState::NotServed => b.forget_kind(&group, &kind),
            }
        }
        b.build_cached(version, cache)
    }
}
