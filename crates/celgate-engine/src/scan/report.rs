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

/// `1 object`, `2 objects`: a count and the noun it counts.
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
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

/// One result as a report lists it, owning its names: the cluster writer keeps results
/// across snapshots, whose indices change.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportResult {
    pub policy: String,
    pub binding: String,
    /// The validation's index; `None` for an error of the whole policy or binding.
    pub validation: Option<usize>,
    /// The binding's validationActions, comma-separated.
    pub actions: String,
    pub result: PolicyResult,
    /// Empty for a pass or a skip.
    pub message: String,
    /// A failed validation's reason.
    pub reason: Option<String>,
    /// When the result was reached (Unix seconds).
    pub timestamp: i64,
}

impl ReportResult {
    /// `r` with its policy's and binding's names from `snapshot`; `None` when `r` names
    /// neither.
    pub fn of(snapshot: &Snapshot, r: &ScanResult, timestamp: i64) -> Option<ReportResult> {
        let entry = snapshot.policies.get(r.policy)?;
        let binding = entry.bindings.get(r.binding)?;
        Some(ReportResult {
            policy: entry.policy.name.clone(),
            binding: binding.name.clone(),
            validation: r.validation,
            actions: binding.action_names.join(","),
            result: r.result,
            message: r.message.clone(),
            reason: r.reason.clone(),
            timestamp,
        })
    }

    fn to_json(&self, resource: &Resource) -> Json {
        let mut properties = Map::new();
        properties.insert("binding".into(), json!(self.binding));
        if let Some(i) = self.validation {
            properties.insert("validationIndex".into(), json!(i.to_string()));
        }
        properties.insert("validationActions".into(), json!(self.actions));
        let mut out = Map::new();
        out.insert("source".into(), json!(SOURCE));
        out.insert("policy".into(), json!(self.policy));
        out.insert("rule".into(), json!(rule(&self.binding, self.validation)));
        if self.result == PolicyResult::Fail {
            out.insert("severity".into(), json!(severity(self.reason.as_deref())));
        }
        out.insert(
            "timestamp".into(),
            json!({"seconds": self.timestamp, "nanos": 0}),
        );
        out.insert("result".into(), json!(self.result.label()));
        out.insert("scored".into(), json!(true));
        out.insert("resources".into(), json!([reference(resource)]));
        if !self.message.is_empty() {
            out.insert("message".into(), json!(self.message));
        }
        out.insert("properties".into(), Json::Object(properties));
        Json::Object(out)
    }
}

impl ReportResult {
    /// A result as a report lists it, read back (the inverse of `Self::to_json`): its
    /// resource and the result; `None` when it is not one celgate writes. The reason is
    /// not listed, only the severity it gave: it comes back as a reason of that severity.
    pub fn from_json(result: &Json) -> Option<(Resource, ReportResult)> {
        let text = |v: &Json| v.as_str().map(str::to_string);
        let r = &result["resources"][0];
        let resource = Resource {
            api_version: text(&r["apiVersion"])?,
            kind: text(&r["kind"])?,
            namespace: text(&r["namespace"]).unwrap_or_default(),
            name: text(&r["name"])?,
            uid: text(&r["uid"]).unwrap_or_default(),
        };
        let properties = &result["properties"];
        let outcome = match result["result"].as_str()? {
            "pass" => PolicyResult::Pass,
            "fail" => PolicyResult::Fail,
            "error" => PolicyResult::Error,
            "skip" => PolicyResult::Skip,
            _ => return None,
        };
        let reason = match result["severity"].as_str() {
            Some("high") => Some("Forbidden".to_string()),
            Some("low") => Some("RequestEntityTooLarge".to_string()),
            _ => None,
        };
        let validation = match properties.get("validationIndex") {
            Some(i) => Some(i.as_str()?.parse().ok()?),
            None => None,
        };
        let parsed = ReportResult {
            policy: text(&result["policy"])?,
            binding: text(&properties["binding"])?,
            validation,
            actions: text(&properties["validationActions"]).unwrap_or_default(),
            result: outcome,
            message: text(&result["message"]).unwrap_or_default(),
            reason: reason.filter(|_| outcome == PolicyResult::Fail),
            timestamp: result["timestamp"]["seconds"].as_i64().unwrap_or(0),
        };
        Some((resource, parsed))
    }
}

/// What a report is named and labelled, and how many results it lists at most.
#[derive(Debug, Clone, Copy)]
pub struct ReportMeta<'a> {
    pub name: &'a str,
    /// The `celgate.io/source` label: `scan` or `admission`.
    pub source: &'a str,
    /// Results listed at most (the API server refuses objects over 1.5 MiB): beyond it,
    /// failures and errors are kept (and listed) first, and the annotation
    /// [`DROPPED_ANNOTATION`] says how many were left out; the summary still counts every
    /// result.
    pub max_results: usize,
}

/// The annotation telling how many results a report does not list (see
/// [`ReportMeta::max_results`]).
pub const DROPPED_ANNOTATION: &str = "celgate.io/results-dropped";

/// How urgent a result is in a capped report, most urgent first: `fail` and `error`, then
/// the reports' `warn` (which celgate does not emit: a failure of a `Warn` binding is a
/// `fail`), then `pass` and `skip`.
fn rank(result: PolicyResult) -> u8 {
    match result {
        PolicyResult::Fail | PolicyResult::Error => 0,
        PolicyResult::Pass | PolicyResult::Skip => 2,
    }
}

/// One report object: of `namespace` (`None`: the cluster report), listing `results` sorted
/// by policy, binding, validation and resource (when capped, failures and errors first), with
/// their summary.
pub fn report<'r>(
    api: ReportApi,
    namespace: Option<&str>,
    meta: ReportMeta<'_>,
    results: impl IntoIterator<Item = (&'r Resource, &'r ReportResult)>,
) -> Json {
    let mut summary = Summary::default();
    let mut results: Vec<(&Resource, &ReportResult)> = results.into_iter().collect();
    for (_, r) in &results {
        summary.add(r.result);
    }
    let order = |a: &(&Resource, &ReportResult), b: &(&Resource, &ReportResult)| {
        (&a.1.policy, &a.1.binding, a.1.validation, a.0).cmp(&(
            &b.1.policy,
            &b.1.binding,
            b.1.validation,
            b.0,
        ))
    };
    let mut dropped = 0;
    if results.len() > meta.max_results {
        // The most urgent first, then the rest in order: the cut drops passes and skips
        // first, and what is kept is listed in that order too (a reader of a capped report
        // sees its failures at the top).
        results.sort_by(|a, b| {
            rank(a.1.result)
                .cmp(&rank(b.1.result))
                .then_with(|| order(a, b))
        });
        dropped = results.len() - meta.max_results;
        results.truncate(meta.max_results);
    } else {
        results.sort_by(order);
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(meta.name));
    if let Some(ns) = namespace {
        metadata.insert("namespace".into(), json!(ns));
    }
    metadata.insert(
        "labels".into(),
        json!({"app.kubernetes.io/managed-by": "celgate", "celgate.io/source": meta.source}),
    );
    if dropped > 0 {
        metadata.insert(
            "annotations".into(),
            json!({ DROPPED_ANNOTATION: dropped.to_string() }),
        );
    }
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
        Json::Array(results.into_iter().map(|(o, r)| r.to_json(o)).collect()),
    );
    Json::Object(report)
}

/// The report objects for the results of `objects`: one per namespace with a result, then
/// the cluster report (cluster-scoped objects), each with every result of its objects
/// (passes and skips included) sorted by policy, rule and resource, and its summary.
/// `timestamp` (Unix seconds) is the scan's time. Each report is built as the iterator gets
/// to it, so a caller that writes and drops them holds one at a time (a JSON report takes
/// about 3.5 KB per result).
pub fn reports<'a>(
    snapshot: &'a Snapshot,
    objects: &'a [ObjectResults],
    api: ReportApi,
    timestamp: i64,
) -> impl Iterator<Item = Json> + 'a {
    // Namespace ("" for the cluster) -> its results.
    let mut by_namespace: BTreeMap<&str, Vec<(&Resource, ReportResult)>> = BTreeMap::new();
    for o in objects {
        for r in &o.results {
            let Some(r) = ReportResult::of(snapshot, r, timestamp) else {
                continue;
            };
            by_namespace
                .entry(o.resource.namespace.as_str())
                .or_default()
                .push((&o.resource, r));
        }
    }
    let meta = ReportMeta {
        name: REPORT_NAME,
        source: "scan",
        max_results: usize::MAX,
    };
    // The cluster report comes last.
    let cluster = by_namespace.remove("");
    by_namespace
        .into_iter()
        .map(|(ns, v)| (Some(ns), v))
        .chain(cluster.map(|v| (None, v)))
        .map(move |(ns, v)| report(api, ns, meta, v.iter().map(|(o, r)| (*o, r))))
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
    // Objects and (policy, binding) results are counted apart: one object has a result per
    // binding that matches it.
    let results = s.pass + s.fail + s.error + s.skip;
    let tail = format!(
        "{} scanned, {}: {} pass, {} fail, {} error, {} skip\n",
        counted(objects.len(), "object"),
        counted(results, "result"),
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
