//! apps/v1 and batch/v1 defaulters: `pkg/apis/apps/v1/defaults.go` and
//! `pkg/apis/batch/v1/defaults.go` (Kubernetes 1.32: `StatefulSetAutoDeletePVC`,
//! `JobPodReplacementPolicy` and `JobBackoffLimitPerIndex` on). Each kind also makes the
//! value structs down to its Pod template, which the generated walk always defaults
//! (`corev1.SetDefaults_PodSpec(&in.Spec.Template.Spec)`).

use serde_json::{json, Value as Json};

use super::core::objects_mut;
use super::{
    child, default_ptr, default_str, is_empty, is_unset, str_of, value_struct, value_structs,
    Defaulter, Obj,
};

/// The defaulter of `name` in `package` (`api.apps.v1`, `api.batch.v1`).
pub(super) fn defaulter(package: &str, name: &str) -> Option<Defaulter> {
    Some(match (package, name) {
        ("api.apps.v1", "Deployment") => deployment,
        ("api.apps.v1", "DaemonSet") => daemon_set,
        ("api.apps.v1", "StatefulSet") => stateful_set,
        ("api.apps.v1", "ReplicaSet") => replica_set,
        ("api.batch.v1", "Job") => job,
        ("api.batch.v1", "CronJob") => cron_job,
        _ => return None,
    })
}

/// `SetDefaults_Deployment`.
fn deployment(m: &mut Obj) {
    value_structs(m, &["spec", "template"]);
    let Some(spec) = child(m, "spec") else {
        return;
    };
    default_ptr(spec, "replicas", 1);
    if let Some(strategy) = value_struct(spec, "strategy") {
        default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = value_struct(strategy, "rollingUpdate") {
                default_ptr(ru, "maxUnavailable", "25%");
                default_ptr(ru, "maxSurge", "25%");
            }
        }
    }
    default_ptr(spec, "revisionHistoryLimit", 10);
    default_ptr(spec, "progressDeadlineSeconds", 600);
}

/// `SetDefaults_DaemonSet`.
fn daemon_set(m: &mut Obj) {
    value_structs(m, &["spec", "template"]);
    let Some(spec) = child(m, "spec") else {
        return;
    };
    if let Some(strategy) = value_struct(spec, "updateStrategy") {
        default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = value_struct(strategy, "rollingUpdate") {
                default_ptr(ru, "maxUnavailable", 1);
                default_ptr(ru, "maxSurge", 0);
            }
        }
    }
    default_ptr(spec, "revisionHistoryLimit", 10);
}

/// `SetDefaults_StatefulSet`.
fn stateful_set(m: &mut Obj) {
    value_structs(m, &["spec", "template"]);
    let Some(spec) = child(m, "spec") else {
        return;
    };
    default_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = value_struct(spec, "updateStrategy") {
        if str_of(strategy, "type").is_empty() {
            strategy.insert("type".into(), Json::from("RollingUpdate"));
            default_ptr(strategy, "rollingUpdate", json!({}));
        }
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = child(strategy, "rollingUpdate") {
                default_ptr(ru, "partition", 0);
            }
        }
    }
    default_ptr(spec, "persistentVolumeClaimRetentionPolicy", json!({}));
    if let Some(policy) = child(spec, "persistentVolumeClaimRetentionPolicy") {
        default_str(policy, "whenDeleted", "Retain");
        default_str(policy, "whenScaled", "Retain");
    }
    default_ptr(spec, "replicas", 1);
    default_ptr(spec, "revisionHistoryLimit", 10);
}

/// `SetDefaults_ReplicaSet`.
fn replica_set(m: &mut Obj) {
    value_structs(m, &["spec", "template"]);
    if let Some(spec) = child(m, "spec") {
        default_ptr(spec, "replicas", 1);
    }
}

/// `SetDefaults_Job`.
fn job(m: &mut Obj) {
    value_structs(m, &["spec", "template"]);
    let template_labels = m
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|md| md.get("labels"))
        .filter(|l| l.as_object().is_some_and(|o| !o.is_empty()))
        .cloned();
    if let Some(labels) = template_labels {
        if let Some(meta) = value_struct(m, "metadata") {
            if is_empty(meta, "labels") {
                meta.insert("labels".into(), labels);
            }
        }
    }
    let Some(spec) = child(m, "spec") else {
        return;
    };
    // A non-parallel job leaves both unset: both are 1.
    if is_unset(spec, "completions") && is_unset(spec, "parallelism") {
        spec.insert("completions".into(), Json::from(1));
    }
    default_ptr(spec, "parallelism", 1);
    if is_unset(spec, "backoffLimit") {
        let limit = if is_unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), Json::from(limit));
    }
    default_ptr(spec, "completionMode", "NonIndexed");
    default_ptr(spec, "suspend", false);
    let has_failure_policy = !is_unset(spec, "podFailurePolicy");
    if let Some(policy) = child(spec, "podFailurePolicy") {
        for rule in objects_mut(policy, "rules") {
            for pattern in objects_mut(rule, "onPodConditions") {
                default_str(pattern, "status", "True");
            }
        }
    }
    let replacement = if has_failure_policy {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    default_ptr(spec, "podReplacementPolicy", replacement);
    default_ptr(spec, "manualSelector", false);
}

/// `SetDefaults_CronJob` (its job template is a JobSpec: `SetDefaults_Job` does not run
/// on it, its Pod template's defaulters do).
fn cron_job(m: &mut Obj) {
    value_structs(m, &["spec", "jobTemplate", "spec", "template"]);
    if let Some(t) = value_structs(m, &["spec", "jobTemplate"]) {
        value_struct(t, "metadata");
    }
    let Some(spec) = child(m, "spec") else {
        return;
    };
    default_str(spec, "concurrencyPolicy", "Allow");
    default_ptr(spec, "suspend", false);
    default_ptr(spec, "successfulJobsHistoryLimit", 3);
    default_ptr(spec, "failedJobsHistoryLimit", 1);
}
