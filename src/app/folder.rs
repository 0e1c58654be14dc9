//! The folder source while serving: when to load the policy folder (once a change has
//! settled), whether to swap the new snapshot in (never an empty one unless allowed), and
//! what is logged and counted about it. With `--source kubernetes --policies DIR` the same
//! watch hands the folder's policies and bindings to the cluster source (a [`PolicyFeed`])
//! instead of installing a snapshot of its own.
//!
//! A file skipped by the load (not a regular file, over `--max-file-bytes`) or emptied in
//! place keeps the objects it gave the last load ([`folder::hold_last_good`]); each such file
//! is a problem (kind `File`, reason `FileSkipped` or `FileEmptied`), logged once and counted
//! in `celgate_config_problems` like a misconfigured binding.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tokio::sync::watch;

use crate::server::AppState;
use crate::source::folder::{
    self, ByFile, Fingerprint, FolderSource, LoadError, NotLoaded, Settle, Skipped,
};
use crate::source::kube::{PolicyFeed, Problem};
use crate::source::{FolderPolicies, Served};

/// Why a folder state was not loaded (other than a change while it was read).
#[derive(Debug, thiserror::Error)]
enum FolderError {
    /// A file cannot be read or holds an invalid object.
    #[error(transparent)]
    Invalid(#[from] LoadError),
    /// The loading task panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// The folder source between polls: when to load, and what was reported.
pub(super) struct FolderWatch {
    state: Arc<AppState>,
    source: FolderSource,
    version: u16,
    settle: Settle,
    /// The misconfigured objects last reported, so that each is logged once.
    problems: BTreeSet<Problem>,
    /// The policy objects last served, by name: kept when a new version is refused.
    last_good: Arc<BTreeMap<String, Arc<Json>>>,
    /// The objects last served, by file: kept for a file that is skipped or emptied.
    last_files: Arc<ByFile>,
    /// Where the policies and bindings go: `None`, a snapshot of the folder installed here;
    /// `Some`, the cluster source, which builds the snapshot.
    feed: Option<Arc<PolicyFeed>>,
    /// How a snapshot is installed: at once, or once the webhook rules cover it.
    publish: crate::certs::rules::Install,
}

/// A folder state built in the blocking pool (once per reload: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Built {
    Served(Served),
    Fed(FolderPolicies),
}

impl FolderWatch {
    pub(super) fn new(state: Arc<AppState>, source: FolderSource, version: u16) -> FolderWatch {
        // Present from the start, so that an alert on it need not handle its absence.
        for reason in ["empty", "unsettled", "invalid_policy"] {
            state
                .metrics
                .source_reload_refused
                .with_label_values(&[reason]);
        }
        let target = state.clone();
        FolderWatch {
            state,
            source,
            version,
            settle: Settle::default(),
            problems: BTreeSet::new(),
            last_good: Arc::default(),
            last_files: Arc::default(),
            feed: None,
            publish: Arc::new(move |s| target.install(s)),
        }
    }

    /// Installs snapshots through `publish` (the webhook rules controller).
    pub(super) fn publishing(self, publish: crate::certs::rules::Install) -> FolderWatch {
        FolderWatch { publish, ..self }
    }

    /// A watch handing the folder's policies and bindings to the cluster source.
    pub(super) fn feeding(
        state: Arc<AppState>,
        source: FolderSource,
        version: u16,
        feed: Arc<PolicyFeed>,
    ) -> FolderWatch {
        FolderWatch {
            feed: Some(feed),
            ..FolderWatch::new(state, source, version)
        }
    }

    /// Whether a state was served (or handed over) already.
    fn loaded(&self) -> bool {
        match &self.feed {
            Some(feed) => feed.get().is_some(),
            None => self.state.ready.load(Ordering::Acquire),
        }
    }

    /// Loads the folder as it is now.
    pub(super) async fn load_now(&mut self) {
        let now = folder::fingerprint(&self.source.dir);
        self.load(now).await;
    }

    /// Loads the folder if it is still in the `expected` state (and stays so while it is
    /// read), and swaps the snapshot in unless it would enforce nothing.
    async fn load(&mut self, expected: Fingerprint) {
        let (dir, version, state) = (self.source.dir.clone(), self.version, self.state.clone());
        let wanted = expected.clone();
        let last_good = self.last_good.clone();
        let previous = self.last_files.clone();
        let max_bytes = self.source.max_file_bytes;
        let field_validation = self.source.field_validation;
        let fed = self.feed.is_some();
        let built = tokio::task::spawn_blocking(move || {
            let mut load = folder::load_settled(&dir, &wanted, max_bytes)?;
            for w in field_validation.apply(&mut load.objects) {
                tracing::warn!(field = %w, "policy folder: unknown or duplicate field (--field-validation warn)");
            }
            let kept = folder::hold_last_good(&mut load, &previous);
            let files = file_problems(&dir, &load.skipped, &kept);
            let by_file = folder::by_file(&load.objects);
            let built = if fed {
                crate::source::folder_policies(load.objects, version, &last_good).map(Built::Fed)
            } else {
                crate::source::build_for_serving(load.objects, version, &state.compiled, &last_good)
                    .map(Built::Served)
            };
            built
                .map(|b| (b, files, by_file))
                .map_err(NotLoaded::Invalid)
        })
        .await;
        let dir = self.source.dir.display();
        let metrics = &self.state.metrics;
        let outcome = match built {
            Ok(Ok(built)) => Ok(built),
            Ok(Err(NotLoaded::Changed(now))) => {
                metrics
                    .source_reload_refused
                    .with_label_values(&["unsettled"])
                    .inc();
                tracing::warn!(folder = %dir, settle = ?self.source.settle, "policy folder changed while being read; loading it once it has been quiet for the settle interval");
                self.settle.changed(now, Instant::now());
                return;
            }
            Ok(Err(NotLoaded::Invalid(e))) => Err(FolderError::from(e)),
            Err(e) => Err(FolderError::from(e)),
        };
        self.settle.handled(expected);
        let (built, files, by_file) = match outcome {
            Ok(built) => built,
            Err(e) => {
                metrics.source_errors.inc();
                // Before the first load there is no snapshot to keep: say what the service does.
                if self.loaded() {
                    tracing::error!(error = %e, "policy folder not loaded; the last good snapshot stays");
                } else {
                    tracing::error!(error = %e, "policy folder not loaded; not ready until it loads");
                }
                return;
            }
        };
        let Served {
            snapshot,
            mut problems,
            accepted,
            refused,
        } = match built {
            Built::Served(served) => served,
            Built::Fed(policies) => return self.hand_over(policies, files, by_file),
        };
        let ready = self.state.ready.load(Ordering::Acquire);
        // Validating and mutating policies alike: either is something the folder enforces.
        let bound = |s: &crate::policy::Snapshot| s.policies.len() + s.mutating.len();
        let before = bound(&self.state.snapshot.load());
        let after = bound(&snapshot);
        // A folder that binds no policy enforces nothing: far more often a deleted or
        // half-replaced folder than an intent, so it takes --allow-empty-policies.
        if after == 0 && !self.source.allow_empty {
            metrics
                .source_reload_refused
                .with_label_values(&["empty"])
                .inc();
            if ready {
                tracing::error!(folder = %dir, policies = before, "policy folder binds no policy: refused, the last good snapshot stays (start with --allow-empty-policies to accept an empty folder)");
            } else {
                tracing::error!(folder = %dir, "policy folder binds no policy: not ready until it binds one (start with --allow-empty-policies to accept an empty folder)");
            }
            return;
        }
        // Losing many policies at once is legitimate (a policy set replaced), but worth a
        // line above the usual one.
        if ready && after * 2 < before {
            tracing::warn!(folder = %dir, before, after, "policy folder reload drops most policies");
        }
        if refused > 0 {
            metrics
                .source_reload_refused
                .with_label_values(&["invalid_policy"])
                .inc_by(refused as u64);
        }
        tracing::info!(policies = after, problems = problems.len(), folder = %dir, "policies loaded");
        // Problems first: whoever sees the new snapshot also sees its problems (the other
        // order left a window where a fixed binding was still reported).
        problems.extend(files);
        self.report(problems);
        (self.publish)(snapshot);
        self.last_good = Arc::new(accepted);
        self.last_files = Arc::new(by_file);
    }

    /// Hands a folder state's policies and bindings to the cluster source, unless no policy
    /// is bound (as [`Self::load`] refuses an empty folder).
    fn hand_over(&mut self, built: FolderPolicies, files: Vec<Problem>, by_file: ByFile) {
        let FolderPolicies {
            policies,
            bindings,
            refusals,
            accepted,
            ignored,
        } = built;
        let (Some(feed), dir) = (self.feed.clone(), self.source.dir.display().to_string()) else {
            return;
        };
        let metrics = &self.state.metrics;
        for object in &ignored {
            tracing::warn!(folder = %dir, %object, "ignored: with --source kubernetes only policies and bindings are read from the policy folder; namespaces, params and RBAC come from the cluster");
        }
        let mutating: BTreeSet<&str> = policies
            .iter()
            .filter(|p| p["kind"] == "MutatingAdmissionPolicy")
            .filter_map(|p| p["metadata"]["name"].as_str())
            .collect();
        let bound = bindings
            .iter()
            .filter(|b| {
                let name = b["spec"]["policyName"].as_str().unwrap_or("");
                match crate::source::problems::policy_kind_of(b) {
                    "MutatingAdmissionPolicy" => mutating.contains(name),
                    _ => accepted.contains_key(name),
                }
            })
            .count();
        let ready = self.loaded();
        if bound == 0 && !self.source.allow_empty {
            metrics
                .source_reload_refused
                .with_label_values(&["empty"])
                .inc();
            if ready {
                tracing::error!(folder = %dir, "policy folder binds no policy: refused, the last good policies stay (start with --allow-empty-policies to accept an empty folder)");
            } else {
                tracing::error!(folder = %dir, "policy folder binds no policy: not ready until it binds one (start with --allow-empty-policies to accept an empty folder)");
            }
            return;
        }
        if !refusals.is_empty() {
            metrics
                .source_reload_refused
                .with_label_values(&["invalid_policy"])
                .inc_by(refusals.len() as u64);
        }
        tracing::info!(policies = policies.len(), bindings = bindings.len(), refused = refusals.len(), folder = %dir, "policies loaded; handed to the cluster source");
        // Logged here once each; the cluster source counts the refusals in the problem gauge
        // with its own (the files' problems are only logged: they are no objects to report).
        self.log_problems(refusals.iter().cloned().chain(files).collect());
        feed.set(policies, bindings, refusals);
        self.last_good = Arc::new(accepted);
        self.last_files = Arc::new(by_file);
    }

    /// Logs each new problem once (and each that went away), and sets the problem gauge.
    fn report(&mut self, problems: Vec<Problem>) {
        self.log_problems(problems);
        let list: Vec<Problem> = self.problems.iter().cloned().collect();
        self.state.metrics.problems(super::problem_labels(&list));
    }

    /// Logs each new problem once (and each that went away).
    fn log_problems(&mut self, problems: Vec<Problem>) {
        let current: BTreeSet<Problem> = problems.into_iter().collect();
        for p in current.difference(&self.problems) {
            tracing::warn!(kind = %p.kind, name = %p.name, reason = p.reason, problem = %p.message, "misconfigured object in the policy folder");
        }
        for p in self.problems.difference(&current) {
            tracing::info!(kind = %p.kind, name = %p.name, reason = p.reason, "policy folder problem resolved");
        }
        self.problems = current;
    }
}

/// What a skipped or emptied file still serves, counted as what it counts.
fn last_given(n: usize) -> String {
    if n == 1 {
        "the object it last gave is still served".into()
    } else {
        format!("the {n} objects it last gave are still served")
    }
}

/// The problems of a load's files: each skipped (`FileSkipped`) and each emptied whose last
/// objects are kept (`FileEmptied`), named by their path below `dir`.
fn file_problems(dir: &Path, skipped: &[Skipped], kept: &[(PathBuf, usize)]) -> Vec<Problem> {
    let kept_of = |file: &Path| kept.iter().find(|(f, _)| f == file).map(|(_, n)| *n);
    let problem = |file: &Path, reason, message| Problem {
        kind: "File".into(),
        api_version: String::new(),
        name: file.strip_prefix(dir).unwrap_or(file).display().to_string(),
        uid: String::new(),
        reason,
        message,
    };
    let mut out: Vec<Problem> = skipped
        .iter()
        .map(|s| {
            let served = match kept_of(&s.file) {
                Some(n) => last_given(n),
                None => "none of its objects is served".into(),
            };
            problem(&s.file, "FileSkipped", format!("{s}; {served}"))
        })
        .collect();
    for (file, n) in kept {
        if skipped.iter().all(|s| &s.file != file) {
            out.push(problem(
                file,
                "FileEmptied",
                format!(
                    "{}: holds no object (emptied, or being rewritten); {} until it holds objects again or is removed",
                    file.display(),
                    last_given(*n)
                ),
            ));
        }
    }
    out
}

/// Reloads the policy folder once a change has settled; a broken file keeps the last good
/// snapshot (logged and counted).
pub(super) async fn watch(mut watch: FolderWatch, poll: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(poll) => {}
        }
        let now = folder::fingerprint(&watch.source.dir);
        if watch
            .settle
            .observe(now, Instant::now(), watch.source.settle)
        {
            if let Some(state) = watch.settle.pending().cloned() {
                watch.load(state).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_objects_are_counted_as_what_they_count() {
        let dir = Path::new("/p");
        let kept = [(dir.join("one.yaml"), 1), (dir.join("two.yaml"), 2)];
        let messages: Vec<String> = file_problems(dir, &[], &kept)
            .into_iter()
            .map(|p| p.message)
            .collect();
        assert!(
            messages[0].contains("; the object it last gave is still served until"),
            "{messages:?}"
        );
        assert!(
            messages[1].contains("; the 2 objects it last gave are still served until"),
            "{messages:?}"
        );
    }
}
