//! Scan results as policy report objects that existing tools read: `wgpolicyk8s.io/v1alpha2`
//! PolicyReport (one per namespace) and ClusterPolicyReport (cluster-scoped objects), or
//! `openreports.io/v1alpha1` Report and ClusterReport; and as a table of violations.
//!
//! A result is keyed by policy, binding, validation index and resource: `policy` is the
//! policy's name, `rule` is `<binding>/validations[<index>]` (`<binding>` alone for an error
//! of the whole policy or binding), the resource is the object's reference (with its uid
//! when the manifest has one), and `properties` repeat the binding, the index and the
//! binding's validationActions. A failure's severity comes from its validation's `reason`.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value as Json};

use super::{ObjectResults, Resource, ScanResult};
use crate::admission::PolicyResult;
use crate::policy::snapshot::Snapshot;

/// The name of every report celgate's scans write.
pub const REPORT_NAME: &str = "celgate-scan";
/// The results' `source`.
pub const SOURCE: &str = "celgate";

/// Which report API to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportApi {
    /// `wgpolicyk8s.io/v1alpha2` PolicyReport and ClusterPolicyReport (policy-reporter,
    /// Kyverno).
    WgPolicy,
    /// `openreports.io/v1alpha1` Report and ClusterReport (their successor).
    OpenReports,
}

impl ReportApi {
    fn api_version(self) -> &'static str {
        match self {
            ReportApi::WgPolicy => "wgpolicyk8s.io/v1alpha2",
            ReportApi::OpenReports => "openreports.io/v1alpha1",
        }
    }

    fn kind(self, cluster: bool) -> &'static str {
        match (self, cluster) {
            (ReportApi::WgPolicy, false) => "PolicyReport",
            (ReportApi::WgPolicy, true) => "ClusterPolicyReport",
            (ReportApi::OpenReports, false) => "Report",
            (ReportApi::OpenReports, true) => "ClusterReport",
        }
    }
}

/// The severity of a failure, from its validation's reason: `Forbidden` and `Unauthorized`
/// high, `Invalid` (the default) medium, `RequestEntityTooLarge` low.
pub fn severity(reason: Option<&str>) -> &'static str {
    match reason {
        Some("Forbidden" | "Unauthorized") => "high",
        Some("RequestEntityTooLarge") => "low",
        _ => "medium",
    }
}

/// Counts by result, as the reports' `summary`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub pass: usize,
    pub fail: usize,
    pub warn: usize,
    pub error: usize,
    pub skip: usize,
}

impl Summary {
    pub fn add(&mut self, result: PolicyResult) {
        match result {
            PolicyResult::Pass => self.pass += 1,
            PolicyResult::Fail => self.fail += 1,
            PolicyResult::Error => self.error += 1,
            PolicyResult::Skip => self.skip += 1,
        }
    }

    fn to_json(self) -> Json {
        json!({"pass": self.pass, "fail": self.fail, "warn": self.warn, "error": self.error, "skip": self.skip})
    }
}

/// The summary over every result of `objects`.
pub fn summary<'a>(objects: impl IntoIterator<Item = &'a ObjectResults>) -> Summary {
    let mut s = Summary::default();
    for o in objects {
        for r in &o.results {
            s.add(r.result);
        }
    }
    s
}

/// `rule` of a result.
fn rule(binding: &str, validation: Option<usize>) -> String {
    match validation {
        Some(i) => format!("{binding}/validations[{i}]"),
        None => binding.to_string(),
    }
}

fn reference(r: &Resource) -> Json {
    let mut m = Map::new();
    m.insert("apiVersion".into(), json!(r.api_version));
    m.insert("kind".into(), json!(r.kind));
    m.insert("name".into(), json!(r.name));
    if !r.namespace.is_empty() {
        m.insert("namespace".into(), json!(r.namespace));
    }
    if !r.uid.is_empty() {
        m.insert("uid".into(), json!(r.uid));
    }
    Json::Object(m)
}

fn result_json(
    snapshot: &Snapshot,
    resource: &Resource,
    r: &ScanResult,
    timestamp: i64,
) -> Option<Json> {
    let entry = snapshot.policies.get(r.policy)?;
    let binding = entry.bindings.get(r.binding)?;
    let mut properties = Map::new();
    properties.insert("binding".into(), json!(binding.name));
    if let Some(i) = r.validation {
        properties.insert("validationIndex".into(), json!(i.to_string()));
    }
    properties.insert(
        "validationActions".into(),
        json!(binding.action_names.join(",")),
    );
    let mut out = Map::new();
    out.insert("source".into(), json!(SOURCE));
    out.insert("policy".into(), json!(entry.policy.name));
    out.insert("rule".into(), json!(rule(&binding.name, r.validation)));
    if r.result == PolicyResult::Fail {
        out.insert("severity".into(), json!(severity(r.reason.as_deref())));
    }
    out.insert(
        "timestamp".into(),
        json!({"seconds": timestamp, "nanos": 0}),
    );
    out.insert("result".into(), json!(r.result.label()));
    out.insert("scored".into(), json!(true));
    out.insert("resources".into(), json!([reference(resource)]));
    if !r.message.is_empty() {
        out.insert("message".into(), json!(r.message));
    }
    out.insert("properties".into(), Json::Object(properties));
    Some(Json::Object(out))
}

/// The report objects for the results of `objects`: one per namespace with a result, then
/// the cluster report (cluster-scoped objects), each with every result of its objects
/// (passes and skips included) sorted by policy, rule and resource, and its summary.
/// `timestamp` (Unix seconds) is the scan's time.
pub fn reports(
    snapshot: &Snapshot,
    objects: &[ObjectResults],
    api: ReportApi,
    timestamp: i64,
) -> Vec<Json> {
    // Namespace ("" for the cluster) -> (sort key, result).
    type Sorted = Vec<((String, String, Option<usize>, Resource), Json)>;
    let mut by_namespace: BTreeMap<&str, (Summary, Sorted)> = BTreeMap::new();
    for o in objects {
        for r in &o.results {
            let Some(json) = result_json(snapshot, &o.resource, r, timestamp) else {
                continue;
            };
            let (summary, results) = by_namespace
                .entry(o.resource.namespace.as_str())
                .or_default();
            summary.add(r.result);
            let key = (
                json["policy"].as_str().unwrap_or_default().to_string(),
                json["properties"]["binding"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r.validation,
                o.resource.clone(),
            );
            results.push((key, json));
        }
    }
    // The cluster report comes last.
    let cluster = by_namespace.remove("");
    let mut out = Vec::new();
    let items = by_namespace
        .into_iter()
        .map(|(ns, v)| (Some(ns), v))
        .chain(cluster.map(|v| (None, v)));
    for (namespace, (summary, mut results)) in items {
        results.sort_by(|a, b| a.0.cmp(&b.0));
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(REPORT_NAME));
        if let Some(ns) = namespace {
            metadata.insert("namespace".into(), json!(ns));
        }
        metadata.insert(
            "labels".into(),
            json!({"app.kubernetes.io/managed-by": "celgate", "celgate.io/source": "scan"}),
        );
        let mut report = Map::new();
        report.insert("apiVersion".into(), json!(api.api_version()));
        report.insert("kind".into(), json!(api.kind(namespace.is_none())));
        report.insert("metadata".into(), Json::Object(metadata));
        if api == ReportApi::OpenReports {
            report.insert("source".into(), json!(SOURCE));
        }
        report.insert("summary".into(), summary.to_json());
        report.insert(
            "results".into(),
            Json::Array(results.into_iter().map(|(_, j)| j).collect()),
        );
        out.push(Json::Object(report));
    }
    out
}

/// The violations (failed and errored results) as a table: policy, binding, resource, result
/// and message; then the summary line.
pub fn table(snapshot: &Snapshot, objects: &[ObjectResults]) -> String {
    let mut rows: Vec<[String; 5]> = Vec::new();
    for o in objects {
        for r in &o.results {
            if r.result < PolicyResult::Fail {
                continue;
            }
            let Some(entry) = snapshot.policies.get(r.policy) else {
                continue;
            };
            let Some(binding) = entry.bindings.get(r.binding) else {
                continue;
            };
            rows.push([
                entry.policy.name.clone(),
                binding.name.clone(),
                o.resource.display(),
                r.result.label().to_string(),
                r.message.clone(),
            ]);
        }
    }
    rows.sort();
    let s = summary(objects);
    let tail = format!(
        "{} objects scanned: {} pass, {} fail, {} error, {} skip\n",
        objects.len(),
        s.pass,
        s.fail,
        s.error,
        s.skip
    );
    if rows.is_empty() {
        return format!("no violations\n{tail}");
    }
    let header = ["POLICY", "BINDING", "RESOURCE", "RESULT", "MESSAGE"].map(str::to_string);
    let mut widths = [0usize; 5];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i == 4 {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(&tail);
    out
}
