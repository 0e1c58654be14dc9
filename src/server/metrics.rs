//! Prometheus metrics: the in-tree ValidatingAdmissionPolicy metrics (§8.1) with the same
//! labels and meaning under a `celgate_` prefix, plus requests by operation and decision,
//! what is loaded, snapshot age and certificate expiry.
//!
//! Every label value is either one of a fixed set or the name of a loaded object: none is
//! copied from a request, whose `operation` could otherwise add a series per distinct value
//! (memory that is never freed, and a `/metrics` page without bound).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntGauge, Opts, Registry, TextEncoder,
};

pub mod labelled;

use labelled::{GaugeVec, HistogramVec, IntCounterVec, IntGaugeVec};

use crate::admission::{CheckMetric, Evaluated};
use crate::policy::snapshot::{Snapshot, ValidationAction};

/// One watched resource's health, as the source gauges show it; the composition root fills
/// it from whatever source is running.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SourceHealth<'a> {
    /// Label of the watched resource, e.g. `namespaces.v1`.
    pub name: &'a str,
    /// The initial list completed.
    pub synced: bool,
    /// How long it may have been missing changes (zero while its watch is current).
    pub stale: Duration,
    /// Objects held.
    pub objects: usize,
}

/// One misconfigured policy or binding, as the problem gauge labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemLabels<'a> {
    /// `ValidatingAdmissionPolicy` or `ValidatingAdmissionPolicyBinding`.
    pub kind: &'a str,
    pub name: &'a str,
    /// A fixed reason such as `PolicyNotFound`.
    pub reason: &'a str,
}

/// Every reason a request is refused before evaluation (the `reason` label of
/// `celgate_bad_requests_total`): each series is exported from the start, at zero.
pub const REFUSAL_REASONS: [&str; 9] = [
    "not_ready",
    "content_type",
    "slow_client",
    "too_large",
    "body",
    "overloaded",
    "internal",
    "malformed",
    "buffer_budget",
];

/// 50 µs to 10 s, so that p99 alerts on webhook latency work.
const REQUEST_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];
/// 1 s to 2 h: a scan takes seconds in a small cluster, minutes in a large one at the
/// default rate limit.
const SCAN_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
];
/// The in-tree buckets of `apiserver_validating_admission_policy_check_duration_seconds`.
const CHECK_BUCKETS: &[f64] = &[0.0000005, 0.001, 0.01, 0.1, 1.0];

pub struct Metrics {
    registry: Registry,
    pub check_total: IntCounterVec<4>,
    pub check_duration: HistogramVec<4>,
    pub mutation_total: IntCounterVec<3>,
    pub mutation_duration: HistogramVec<3>,
    pub match_condition_errors: IntCounterVec<4>,
    pub requests: IntCounterVec<2>,
    pub request_seconds: HistogramVec<2>,
    pub bad_requests: IntCounterVec<1>,
    pub policies: IntGauge,
    /// Request and answer bytes buffered (set from the budget when the metrics are read).
    pub buffered_bytes: IntGauge,
    pub bindings: IntGauge,
    pub mutating_policies: IntGauge,
    pub mutating_bindings: IntGauge,
    pub compile_errors: IntGauge,
    pub source_errors: IntCounter,
    /// Follows [`crate::admission::validator::contained_panics`] (a process-wide count) each
    /// time the metrics are read.
    pub evaluation_panics: IntCounter,
    pub source_reload_refused: IntCounterVec<1>,
    pub snapshot_timestamp: Gauge,
    pub certificate_expiry: Gauge,
    pub source_stale: GaugeVec<1>,
    pub source_synced: IntGaugeVec<1>,
    pub source_objects: IntGaugeVec<1>,
    pub source_history_resets: IntCounterVec<1>,
    pub source_resync_drift: IntCounterVec<1>,
    pub config_problems: IntGaugeVec<3>,
    pub policy_results: IntCounterVec<5>,
    pub background_scan_seconds: Histogram,
    pub background_objects: IntCounterVec<1>,
    pub background_incomplete: IntCounter,
    /// Admission report state: resources evicted for `--reports-max-resources`.
    pub report_evicted: IntCounter,
    /// The reasons of configuration problems, each exported at zero while it has none.
    problem_reasons: std::sync::OnceLock<&'static [&'static str]>,
}

/// Where a result comes from: the `source` label of `celgate_policy_results_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultSource {
    /// A review the API server sent.
    Admission,
    /// A background scan of stored objects.
    Scan,
}

impl ResultSource {
    pub fn label(self) -> &'static str {
        match self {
            ResultSource::Admission => "admission",
            ResultSource::Scan => "scan",
        }
    }
}

/// The `action` label of a validation action (as the in-tree `enforcement_action`).
pub fn action_label(action: &ValidationAction) -> &'static str {
    match action {
        ValidationAction::Deny => "deny",
        ValidationAction::Warn => "warn",
        ValidationAction::Audit => "audit",
    }
}

fn counter<const N: usize>(
    r: &Registry,
    name: &str,
    help: &str,
    labels: [&str; N],
) -> IntCounterVec<N> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)
        .expect("metric definitions are constants");
    r.register(Box::new(c.clone()))
        .expect("each metric is registered once");
    c
}

fn histogram<const N: usize>(
    r: &Registry,
    name: &str,
    help: &str,
    labels: [&str; N],
    buckets: &[f64],
) -> HistogramVec<N> {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("metric definitions are constants");
    r.register(Box::new(h.clone()))
        .expect("each metric is registered once");
    h
}

impl Metrics {
    pub fn new() -> Metrics {
        let r = Registry::new();
        let check_labels = [
            "policy",
            "policy_binding",
            "error_type",
            "enforcement_action",
        ];
        let mc_labels = ["name", "kind", "type", "operation"];
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("metric definitions are constants");
            r.register(Box::new(g.clone()))
                .expect("each metric is registered once");
            g
        };
        let fgauge = |name: &str, help: &str| {
            let g = Gauge::new(name, help).expect("metric definitions are constants");
            r.register(Box::new(g.clone()))
                .expect("each metric is registered once");
            g
        };
        let source_errors = IntCounter::new(
            "celgate_source_load_errors_total",
            "Policy source loads that failed; the last good snapshot stays.",
        )
        .expect("metric definitions are constants");
        r.register(Box::new(source_errors.clone()))
            .expect("each metric is registered once");
        let evaluation_panics = IntCounter::new(
            "celgate_evaluation_panics_total",
            "Expression evaluations that panicked; each became that expression's CEL error (internal error), handled by its policy's failurePolicy.",
        )
        .expect("metric definitions are constants");
        r.register(Box::new(evaluation_panics.clone()))
            .expect("each metric is registered once");
        fn vec<const N: usize>(
            r: &Registry,
            name: &str,
            help: &str,
            labels: [&str; N],
        ) -> IntGaugeVec<N> {
            let g = IntGaugeVec::new(Opts::new(name, help), labels)
                .expect("metric definitions are constants");
            r.register(Box::new(g.clone()))
                .expect("each metric is registered once");
            g
        }
        let source_stale = GaugeVec::new(
            Opts::new(
                "celgate_source_stale_seconds",
                "How long each watched resource may have been missing changes: zero while its watch is current, else the time since it failed.",
            ),
            ["source"],
        )
        .expect("metric definitions are constants");
        r.register(Box::new(source_stale.clone()))
            .expect("each metric is registered once");
        let background_scan_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "celgate_background_scan_duration_seconds",
                "Time each background scan took, from discovery to the last object evaluated.",
            )
            .buckets(SCAN_BUCKETS.to_vec()),
        )
        .expect("metric definitions are constants");
        r.register(Box::new(background_scan_seconds.clone()))
            .expect("each metric is registered once");
        let background_incomplete = IntCounter::new(
            "celgate_background_scans_incomplete_total",
            "Background scans in which some resource could not be discovered or listed; its objects kept their previous results.",
        )
        .expect("metric definitions are constants");
        r.register(Box::new(background_incomplete.clone()))
            .expect("each metric is registered once");
        let report_evicted = IntCounter::new(
            "celgate_report_resources_evicted_total",
            "Resources whose admission results were dropped from the policy reports because this replica kept --reports-max-resources already (the one recorded longest ago goes first).",
        )
        .expect("metric definitions are constants");
        r.register(Box::new(report_evicted.clone()))
            .expect("each metric is registered once");
        let bad_requests = counter(
            &r,
            "celgate_bad_requests_total",
            "Requests refused before evaluation, by reason.",
            ["reason"],
        );
        // At zero from the start: a dashboard shows a flat line, not "No data".
        for reason in REFUSAL_REASONS {
            bad_requests.with_label_values(&[reason]);
        }
        Metrics {
            bad_requests,
            problem_reasons: std::sync::OnceLock::new(),
            background_scan_seconds,
            background_incomplete,
            report_evicted,
            background_objects: counter(&r, "celgate_background_objects_scanned_total", "Objects evaluated by background scans, by resource (plural, or plural.group).", ["resource"]),
            source_stale,
            source_synced: vec(&r, "celgate_source_synced", "1 once a watched resource's initial list completed.", ["source"]),
            source_objects: vec(&r, "celgate_source_objects", "Objects held for each watched resource.", ["source"]),
            source_history_resets: counter(&r, "celgate_source_history_resets_total", "Times the cluster's history was seen going back (etcd replaced or restored from a backup, another cluster), after which every watched resource was listed again, by reason: list_went_back (a list older than what was seen), bookmark_went_back, cluster_identity (the kube-system namespace has another uid).", ["reason"]),
            source_resync_drift: counter(&r, "celgate_source_resync_drift_objects_total", "Objects the periodic full re-list (--resync-interval) found different from the watched copy (added, changed or deleted without the watch telling), then put right, by watched resource.", ["source"]),
            config_problems: vec(&r, "celgate_config_problems", "Misconfigured policies and bindings (also reported as Events): 1 per current problem; a reason without a problem has one series at 0 with empty kind and name.", ["kind", "name", "reason"]),
            check_total: counter(&r, "celgate_validating_admission_policy_check_total", "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.", check_labels),
            check_duration: histogram(&r, "celgate_validating_admission_policy_check_duration_seconds", "Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding and enforcement action taken.", check_labels, CHECK_BUCKETS),
            mutation_total: counter(&r, "celgate_mutating_admission_policy_check_total", "Mutation admission policy check total, labeled by policy and further identified by binding.", ["policy", "policy_binding", "error_type"]),
            mutation_duration: histogram(&r, "celgate_mutating_admission_policy_check_duration_seconds", "Mutation admission latency for individual mutation expressions in seconds, labeled by policy and binding.", ["policy", "policy_binding", "error_type"], CHECK_BUCKETS),
            match_condition_errors: counter(&r, "celgate_admission_match_condition_evaluation_errors_total", "Admission match condition evaluation errors count, identified by name of resource containing the match condition and broken out for each kind containing matchConditions (webhook or policy), operation and admission type (validate or admit).", mc_labels),
            requests: counter(&r, "celgate_requests_total", "AdmissionReview requests answered, by operation (CREATE, UPDATE, DELETE, CONNECT or other) and decision (allowed, denied, or timeout: 504 past the request's deadline).", ["operation", "decision"]),
            request_seconds: histogram(&r, "celgate_request_duration_seconds", "Time to answer an AdmissionReview, from the request to the answer.", ["operation", "decision"], REQUEST_BUCKETS),
            buffered_bytes: gauge("celgate_buffered_bytes", "Request and answer bytes buffered now, within --max-buffered-bytes; a request that would pass it is answered 503 (celgate_bad_requests_total{reason=\"buffer_budget\"})."),
            policies: gauge("celgate_policies_loaded", "ValidatingAdmissionPolicies with at least one binding in the current snapshot."),
            bindings: gauge("celgate_bindings_loaded", "ValidatingAdmissionPolicyBindings of loaded policies in the current snapshot."),
            mutating_policies: gauge("celgate_mutating_policies_loaded", "MutatingAdmissionPolicies with at least one binding in the current snapshot."),
            mutating_bindings: gauge("celgate_mutating_bindings_loaded", "MutatingAdmissionPolicyBindings of loaded mutating policies in the current snapshot."),
            compile_errors: gauge("celgate_policy_compile_errors", "Expressions of loaded policies that do not compile, and policies or bindings that fail validation."),
            source_errors,
            evaluation_panics,
            source_reload_refused: counter(&r, "celgate_source_reload_refused_total", "Policy folder states not swapped in, by reason: empty (no policy would be enforced; see --allow-empty-policies), unsettled (files changed while being read); the last good snapshot stays.", ["reason"]),
            snapshot_timestamp: fgauge("celgate_snapshot_timestamp_seconds", "When the current snapshot was built (Unix time); its age is time() minus this."),
            policy_results: counter(&r, "celgate_policy_results_total", "Results of each (policy, binding) evaluation, in enforce and observe mode: pass, fail, error, or skip (the policy's matchConditions excluded the request); counted once per validation action of the binding (deny, warn, audit; none for a binding without valid actions); source admission (reviews) or scan (background scans).", ["policy", "binding", "action", "result", "source"]),
            certificate_expiry: fgauge("celgate_certificate_expiry_timestamp_seconds", "When the serving certificate expires (Unix time)."),
            registry: r,
        }
    }

    /// Records the in-tree check metrics of one request.
    pub fn record(&self, checks: &[CheckMetric], operation: &str) {
        let operation = operation_label(operation);
        for c in checks {
            let labels = [
                c.policy.as_str(),
                c.binding.as_str(),
                c.error_type,
                c.action,
            ];
            self.check_total.with_label_values(&labels).inc();
            self.check_duration
                .with_label_values(&labels)
                .observe(c.elapsed.as_secs_f64());
            if c.match_condition_errors > 0 {
                self.match_condition_errors
                    .with_label_values(&[c.policy.as_str(), "policy", "validate", operation])
                    .inc_by(c.match_condition_errors);
            }
        }
    }

    /// Records the in-tree check metrics of one `/mutate` request: one per mutation.
    pub fn record_mutations(&self, checks: &[celgate_engine::admission::mutate::MutationCheck]) {
        for c in checks {
            let labels = [c.policy.as_str(), c.binding.as_str(), c.error_type];
            self.mutation_total.with_label_values(&labels).inc();
            self.mutation_duration
                .with_label_values(&labels)
                .observe(c.elapsed.as_secs_f64());
        }
    }

    /// Counts each (policy, binding, param) result of a verdict reached on `snapshot`, once
    /// per validation action of the binding. The names come from the snapshot, so that the
    /// labels name loaded objects only; nothing is copied or allocated.
    pub fn results(&self, snapshot: &Snapshot, evaluated: &[Evaluated], source: ResultSource) {
        for e in evaluated {
            let Some(entry) = snapshot.policies.get(e.policy) else {
                continue;
            };
            let Some(binding) = entry.bindings.get(e.binding) else {
                continue;
            };
            let mut labels = [
                entry.policy.name.as_str(),
                binding.name.as_str(),
                "none",
                e.result.label(),
                source.label(),
            ];
            if binding.actions.is_empty() {
                self.policy_results.with_label_values(&labels).inc();
            }
            for action in &binding.actions {
                labels[2] = action_label(action);
                self.policy_results.with_label_values(&labels).inc();
            }
        }
    }

    /// Counts an answered request and its latency.
    pub fn answered(&self, operation: &str, decision: &str, elapsed: Duration) {
        let labels = [operation_label(operation), decision];
        self.requests.with_label_values(&labels).inc();
        self.request_seconds
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
    }

    pub fn snapshot_built(&self, at: SystemTime) {
        self.snapshot_timestamp.set(
            at.duration_since(UNIX_EPOCH)
                .unwrap_or(Duration::ZERO)
                .as_secs_f64(),
        );
    }

    /// Sets the per-source gauges; sources that went away (stopped param watches) disappear.
    pub fn sources<'a>(&self, statuses: impl IntoIterator<Item = SourceHealth<'a>>) {
        self.source_stale.reset();
        self.source_synced.reset();
        self.source_objects.reset();
        for s in statuses {
            let label = [s.name];
            self.source_stale
                .with_label_values(&label)
                .set(s.stale.as_secs_f64());
            self.source_synced
                .with_label_values(&label)
                .set(i64::from(s.synced));
            self.source_objects
                .with_label_values(&label)
                .set(s.objects as i64);
        }
    }

    /// Brings the history counters up to the source's totals (`reason`, count) and
    /// (`source`, objects): a counter only goes up, so a total below the count (a source
    /// started again) adds nothing.
    pub fn history<'a>(
        &self,
        resets: impl IntoIterator<Item = (&'a str, u64)>,
        drift: impl IntoIterator<Item = (&'a str, u64)>,
    ) {
        for (metric, totals) in [
            (
                &self.source_history_resets,
                resets.into_iter().collect::<Vec<_>>(),
            ),
            (&self.source_resync_drift, drift.into_iter().collect()),
        ] {
            for (label, total) in totals {
                let counter = metric.with_label_values(&[label]);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
        }
    }

    /// The reasons a configuration problem can have: from now on, each reason without a
    /// problem is exported at 0 (kind and name empty), so that a dashboard shows a flat line
    /// rather than "No data" before the first problem.
    pub fn set_problem_reasons(&self, reasons: &'static [&'static str]) {
        let _ = self.problem_reasons.set(reasons);
        self.problems(std::iter::empty());
    }

    /// Sets the problem gauge to the current problems.
    pub fn problems<'a>(&self, problems: impl IntoIterator<Item = ProblemLabels<'a>>) {
        self.config_problems.reset();
        let mut seen: Vec<&str> = Vec::new();
        for p in problems {
            self.config_problems
                .with_label_values(&[p.kind, p.name, p.reason])
                .set(1);
            seen.push(p.reason);
        }
        for reason in self.problem_reasons.get().copied().unwrap_or_default() {
            if !seen.contains(reason) {
                self.config_problems
                    .with_label_values(&["", "", reason])
                    .set(0);
            }
        }
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> Vec<u8> {
        let panics = crate::admission::validator::contained_panics();
        let counted = self.evaluation_panics.get();
        if panics > counted {
            self.evaluation_panics.inc_by(panics - counted);
        }
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metric families.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

/// The `operation` label: the request's operation when it is one of admission's, else
/// `other`, so that requests cannot add series.
pub fn operation_label(operation: &str) -> &'static str {
    match operation {
        "CREATE" => "CREATE",
        "UPDATE" => "UPDATE",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        _ => "other",
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contained_panics_are_exported() {
        let metrics = Metrics::new();
        let r: Result<(), crate::cel::EvalError> =
            crate::admission::validator::contain("metrics-test", "true", || panic!("boom"));
        assert!(r.is_err());
        let text = String::from_utf8(metrics.encode()).unwrap_or_default();
        let line = text
            .lines()
            .find(|l| l.starts_with("celgate_evaluation_panics_total "))
            .unwrap_or_default();
        let count: u64 = line
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(count >= 1, "{line:?}");
    }

    #[test]
    fn history_counters_follow_the_totals() {
        let metrics = Metrics::new();
        metrics.history([("list_went_back", 1)], [("namespaces.v1", 2)]);
        metrics.history(
            [("list_went_back", 3), ("cluster_identity", 1)],
            [("namespaces.v1", 2)],
        );
        let text = String::from_utf8(metrics.encode()).unwrap_or_default();
        for line in [
            r#"celgate_source_history_resets_total{reason="list_went_back"} 3"#,
            r#"celgate_source_history_resets_total{reason="cluster_identity"} 1"#,
            r#"celgate_source_resync_drift_objects_total{source="namespaces.v1"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    /// Policy `ab` with binding `c` and policy `a` with binding `bc` are two series (the
    /// `prometheus` crate's vectors, keyed by a hash of the concatenated values, merged
    /// them into one), in every labelled metric.
    #[test]
    fn concatenated_label_values_are_two_series() {
        let metrics = Metrics::new();
        for (policy, binding, n) in [("ab", "c", 1), ("a", "bc", 2)] {
            for _ in 0..n {
                metrics
                    .check_total
                    .with_label_values(&[policy, binding, "no_error", "deny"])
                    .inc();
                metrics
                    .policy_results
                    .with_label_values(&[policy, binding, "deny", "pass", "scan"])
                    .inc();
            }
        }
        metrics.problems([
            ProblemLabels {
                kind: "ValidatingAdmissionPolicyBinding",
                name: "ab",
                reason: "c",
            },
            ProblemLabels {
                kind: "ValidatingAdmissionPolicyBinding",
                name: "a",
                reason: "bc",
            },
        ]);
        let text = String::from_utf8(metrics.encode()).unwrap_or_default();
        for line in [
            r#"celgate_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="ab",policy_binding="c"} 1"#,
            r#"celgate_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="a",policy_binding="bc"} 2"#,
            r#"celgate_policy_results_total{action="deny",binding="c",policy="ab",result="pass",source="scan"} 1"#,
            r#"celgate_policy_results_total{action="deny",binding="bc",policy="a",result="pass",source="scan"} 2"#,
            r#"celgate_config_problems{kind="ValidatingAdmissionPolicyBinding",name="ab",reason="c"} 1"#,
            r#"celgate_config_problems{kind="ValidatingAdmissionPolicyBinding",name="a",reason="bc"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }
}
