//! `celgate test`: runs policy test suites offline. A suite is a file named
//! `*.celgate-test.yaml` (`apiVersion: celgate.dev/v1alpha1`, `kind: CelgateTest`) that names
//! policy manifests and cluster state, and lists cases: each case is built into the
//! AdmissionReview the API server would send, answered by the engine
//! (a traced [`crate::admission::admit`]) and checked against its expectations.
//!
//! This module owns the suite format, the review construction (with a compact table of
//! built-in resources) and the checks; [`report`] owns the output formats.

pub(crate) mod coverage;
pub(crate) mod crd;
pub(crate) mod kyverno;
pub(crate) mod mutation;
mod refs;
pub mod report;
pub(crate) mod review;
pub(crate) mod update;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value as Json;

use crate::admission::{AdmissionVerdict, BindingOutcome};
use crate::policy::snapshot::Snapshot;
use crate::source::folder::{self, Loaded};
use crate::source::read::read_text;
use refs::Refs;

/// The suffix that makes a file a test suite.
pub const SUFFIX: &str = ".celgate-test.yaml";
pub const API_VERSION: &str = "celgate.dev/v1alpha1";
pub const KIND: &str = "CelgateTest";

/// A test suite file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Suite {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: Option<Json>,
    /// Policy and binding manifests: files or folders, relative to the suite file.
    #[serde(default)]
    pub policies: Vec<String>,
    /// Cluster state (namespaces, params, RBAC, CRDs, other objects): files or folders.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Cluster state written inline.
    #[serde(default)]
    pub objects: Vec<Json>,
    /// Add what every cluster has (namespace name labels, kube-root-ca.crt); default true.
    #[serde(default = "yes")]
    pub cluster_defaults: bool,
    pub cases: Vec<Case>,
}

fn yes() -> bool {
    true
}

/// One case, as written.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    pub name: String,
    /// CREATE (default), UPDATE (needs `oldObject`), DELETE (`object` is taken as the old
    /// object) or CONNECT (only with `review`).
    #[serde(default)]
    pub operation: Option<Operation>,
    /// The object: inline, or a file path (a multi-document file gives one case per document).
    #[serde(default)]
    pub object: Option<Json>,
    #[serde(default)]
    pub old_object: Option<Json>,
    /// The request namespace; default: the object's, else `default` for namespaced kinds.
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub user_info: Option<UserInfo>,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub options: Option<Json>,
    /// A raw AdmissionReview file instead of the fields above.
    #[serde(default)]
    pub review: Option<String>,
    /// Count the case as skipped instead of running it.
    #[serde(default)]
    pub skip: bool,
    #[serde(default)]
    pub expect: Option<Expect>,
}

#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UserInfo {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub groups: Option<Vec<String>>,
    #[serde(default)]
    pub extra: Option<BTreeMap<String, Vec<String>>>,
    /// `namespace/name`: the service account's username and groups.
    #[serde(default)]
    pub service_account: Option<ServiceAccount>,
}

/// What a case expects; every field given is checked.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    #[serde(default)]
    pub allowed: Option<bool>,
    #[serde(default)]
    pub code: Option<u16>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub message_matches: Option<Pattern>,
    /// The exact warnings, in order.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
    /// Audit annotations (as returned: `<policy>_<key>` and `validation_failure`): each
    /// listed key must have this value; unlisted keys are not checked.
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// Per policy: `pass`, `fail`, `error` or `skip` (the worst of its bindings).
    #[serde(default)]
    pub policies: Option<BTreeMap<String, Expected>>,
    /// Per binding: `pass`, `fail`, `error` or `skip`.
    #[serde(default)]
    pub bindings: Option<BTreeMap<String, Expected>>,
    /// What the API server's CRD validation answers the object (a custom resource whose
    /// CRD is in the suite), before any webhook.
    #[serde(default)]
    pub crd: Option<crd::CrdExpect>,
    /// The object after the suite's MutatingAdmissionPolicies, exactly.
    #[serde(default)]
    pub object: Option<Json>,
    /// Fields the object has after the mutations (maps by key, lists item by item).
    #[serde(default)]
    pub object_contains: Option<Json>,
    /// The JSON patch (RFC 6902) `/mutate` answers; `[]` when nothing changes.
    #[serde(default)]
    pub patch: Option<Json>,
    /// Whether the mutations changed the object.
    #[serde(default)]
    pub mutated: Option<bool>,
}

impl Expect {
    fn is_empty(&self) -> bool {
        self.allowed.is_none()
            && self.code.is_none()
            && self.reason.is_none()
            && self.message.is_none()
            && self.message_matches.is_none()
            && self.warnings.is_none()
            && self.audit_annotations.is_none()
            && self.policies.is_none()
            && self.bindings.is_none()
            && self.object.is_none()
            && self.object_contains.is_none()
            && self.patch.is_none()
            && self.mutated.is_none()
            && self.crd.as_ref().is_none_or(crd::CrdExpect::is_empty)
    }

    /// Whether anything but `crd` is expected: the policies' answer is checked only then.
    fn expects_webhook(&self) -> bool {
        !Expect {
            crd: None,
            ..self.clone()
        }
        .is_empty()
    }
}

/// A request's operation.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    #[serde(rename = "CREATE")]
    Create,
    #[serde(rename = "UPDATE")]
    Update,
    #[serde(rename = "DELETE")]
    Delete,
    #[serde(rename = "CONNECT")]
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// A regular expression, compiled when the suite is read (so that a bad one is reported
/// with its line).
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

/// The expected reason, message and message pattern of an answer's status.
pub(crate) struct StatusText<'e> {
    pub reason: Option<&'e str>,
    pub message: Option<&'e str>,
    pub message_matches: Option<&'e Pattern>,
}

/// Adds a failure for each of `want`'s texts the status's `reason` and `message` do not meet;
/// `field` prefixes the names (`crd.` for a CRD answer).
pub(crate) fn expect_status_text(
    out: &mut Vec<String>,
    field: &str,
    want: StatusText<'_>,
    reason: &str,
    message: &str,
) {
    if let Some(want) = want.reason {
        if want != reason {
            out.push(format!("{field}reason: expected {want:?}, got {reason:?}"));
        }
    }
    if let Some(want) = want.message {
        if want != message {
            out.push(format!(
                "{field}message: expected {want:?}, got {message:?}"
            ));
        }
    }
    if let Some(Pattern(re)) = want.message_matches {
        if !re.is_match(message) {
            out.push(format!(
                "{field}messageMatches: {:?} does not match {message:?}",
                re.as_str()
            ));
        }
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Pattern, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text)
            .map(Pattern)
            .map_err(serde::de::Error::custom)
    }
}

/// `namespace/name` of a service account.
#[derive(Debug, Clone)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl<'de> Deserialize<'de> for ServiceAccount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ServiceAccount, D::Error> {
        let text = String::deserialize(d)?;
        match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(ServiceAccount {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(serde::de::Error::custom(format!(
                "expected namespace/name, got {text:?}"
            ))),
        }
    }
}

/// A policy's or binding's result for a request.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    Pass,
    Fail,
    Error,
    Skip,
}

impl Expected {
    fn name(self) -> &'static str {
        match self {
            Expected::Pass => "pass",
            Expected::Fail => "fail",
            Expected::Error => "error",
            Expected::Skip => "skip",
        }
    }

    fn of(outcome: Option<BindingOutcome>) -> Expected {
        match outcome {
            None => Expected::Skip,
            Some(BindingOutcome::Pass) => Expected::Pass,
            Some(BindingOutcome::Fail) => Expected::Fail,
            Some(BindingOutcome::Error) => Expected::Error,
        }
    }
}

/// How a run is done.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only cases whose `file: name` matches run.
    pub filter: Option<regex::Regex>,
    /// CEL library version (1.N).
    pub version: u16,
    /// Collect expression coverage ([`Report::coverage`]).
    pub coverage: bool,
    /// Below this coverage percentage the run fails (exit 1); implies `coverage`.
    pub min_coverage: Option<f64>,
    /// Write what failing cases (and cases without an expectation) observed into their
    /// suite files, then run again (`update`).
    pub update: bool,
    /// Every file a suite names must lie under one of these folders, symlinks resolved
    /// (`--root`; the CLI's default is the working directory and the paths given); none:
    /// anywhere.
    pub roots: Vec<PathBuf>,
    /// Largest file read (`--max-file-bytes`).
    pub max_file_bytes: u64,
    /// A run in which no case was tested (no suite, every case filtered out or skipped)
    /// passes (`--allow-empty`); otherwise it fails ([`Report::exit_code`]).
    pub allow_empty: bool,
    /// Unknown and duplicate fields (`--field-validation`): `Strict` makes the suite
    /// invalid with the API server's strict decoding error; `Warn` reports them in
    /// [`Report::field_warnings`]; `Ignore` drops them.
    pub field_validation: crate::source::folder::FieldValidation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub file: String,
    pub name: String,
    pub status: Status,
    pub elapsed: Duration,
    /// Why it failed, one line per unmet expectation.
    pub failures: Vec<String>,
    /// With `--update`: the case's position in its file and the changes that make its
    /// expectation what was observed (`None`: nothing to write).
    pub update: Option<(usize, Vec<update::Edit>)>,
}

/// A suite file that could not be read as one (exit 2).
#[derive(Debug, Clone)]
pub struct InvalidFile {
    pub file: String,
    pub message: String,
}

/// Everything a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub cases: Vec<CaseResult>,
    pub invalid: Vec<InvalidFile>,
    /// With `--coverage`: what the suites evaluated.
    pub coverage: Option<coverage::Coverage>,
    /// With `--min-coverage`: the threshold.
    pub min_coverage: Option<f64>,
    /// With `--update`: what was written, and what could not be.
    pub updated: Vec<String>,
    /// The paths searched for suites, and the suite files found there.
    pub searched: Vec<PathBuf>,
    pub suites: usize,
    /// Whether the run was filtered (`--filter`).
    pub filtered: bool,
    /// `--allow-empty`: a run that tested nothing passes.
    pub allow_empty: bool,
    /// With `--field-validation warn`: each unknown or duplicate field of the suites'
    /// policies, bindings and ConfigMaps, naming its file, for standard error.
    pub field_warnings: Vec<String>,
}

/// Why a run tested nothing: no case passed or failed (`celgate test` fails such a run
/// unless `--allow-empty`, so that a wrong path or a suite format it does not read is not a
/// green build).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NothingTested {
    /// No suite file under the paths.
    NoSuite,
    /// Suites, but no case in them (or none `--filter` selects).
    NoCase { suites: usize, filtered: bool },
    /// Every case selected is skipped.
    AllSkipped { suites: usize, skipped: usize },
}

impl NothingTested {
    /// The sentence `celgate test` prints, naming the paths searched.
    pub fn describe(&self, searched: &[PathBuf]) -> String {
        let paths: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        let under = paths.join(", ");
        let found = |n: usize| {
            let s = if n == 1 { "" } else { "s" };
            format!("{n} suite{s} found under {under}")
        };
        match self {
            NothingTested::NoSuite => format!(
                "no suite found under {under} (suites are files named *{SUFFIX} or {})",
                kyverno::FILE_NAME
            ),
            NothingTested::NoCase {
                suites,
                filtered: true,
            } => format!("{}, no case selected by --filter", found(*suites)),
            NothingTested::NoCase {
                suites,
                filtered: false,
            } => format!("{}, with no case", found(*suites)),
            NothingTested::AllSkipped { suites, skipped } => format!(
                "{}, every case selected ({skipped}) is skipped",
                found(*suites)
            ),
        }
    }
}

impl Report {
    pub fn count(&self, status: Status) -> usize {
        self.cases.iter().filter(|c| c.status == status).count()
    }

    /// Whether coverage is below `--min-coverage`.
    pub fn coverage_too_low(&self) -> bool {
        match (&self.coverage, self.min_coverage) {
            (Some(c), Some(min)) => c.percent() < min,
            _ => false,
        }
    }

    /// Why no case was tested (none passed or failed), if so; `None` when one was.
    pub fn nothing_tested(&self) -> Option<NothingTested> {
        if self.count(Status::Pass) + self.count(Status::Fail) > 0 {
            return None;
        }
        let suites = self.suites;
        Some(match self.count(Status::Skip) {
            _ if suites == 0 => NothingTested::NoSuite,
            0 => NothingTested::NoCase {
                suites,
                filtered: self.filtered,
            },
            skipped => NothingTested::AllSkipped { suites, skipped },
        })
    }

    /// Whether the run fails for testing nothing: nothing was tested, without
    /// `--allow-empty`, and no suite file was invalid (that is reported as such).
    pub fn fails_empty(&self) -> bool {
        !self.allow_empty && self.invalid.is_empty() && self.nothing_tested().is_some()
    }

    /// 0 when every case passed (and coverage reached `--min-coverage`), 1 when one failed,
    /// coverage is too low or no case was tested (unless `--allow-empty`), 2 when a suite
    /// file is invalid.
    pub fn exit_code(&self) -> u8 {
        if !self.invalid.is_empty() {
            2
        } else if self.count(Status::Fail) > 0 || self.coverage_too_low() || self.fails_empty() {
            1
        } else {
            0
        }
    }
}

/// The suite files under `paths` (files are taken as given, folders are walked), sorted: every
/// `*.celgate-test.yaml` and `kyverno-test.yaml` (one that is not a Kyverno CLI Test is
/// refused when run, not skipped).
pub fn find_suites(paths: &[PathBuf]) -> Result<Vec<PathBuf>, RunError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut stack = vec![p.clone()];
            let mut seen = std::collections::BTreeSet::new();
            while let Some(d) = stack.pop() {
                let unreadable = |source| RunError::Unreadable {
                    path: d.clone(),
                    source,
                };
                let real = std::fs::canonicalize(&d).map_err(unreadable)?;
                if !seen.insert(real) {
                    continue;
                }
                let entries = std::fs::read_dir(&d).map_err(unreadable)?;
                for entry in entries {
                    let entry = entry.map_err(unreadable)?;
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    // Hidden folders and build output are not searched, but for the
                    // `.kyverno-test` folders Kyverno's policy library keeps its tests in.
                    if (name.starts_with('.') && name != kyverno::HIDDEN_FOLDER) || name == "target"
                    {
                        continue;
                    }
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if name.ends_with(SUFFIX) || name == kyverno::FILE_NAME {
                        out.push(path);
                    }
                }
            }
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(RunError::Missing(p.clone()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Why `celgate test` cannot run at all (a suite that fails is a result, not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A `--root` folder cannot be resolved.
    #[error("--root {}: {source}", path.display())]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A path given is neither a file nor a folder.
    #[error("{}: no such file or folder", .0.display())]
    Missing(PathBuf),
    /// A folder cannot be searched for suites.
    #[error("{}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs every suite under `paths`; with `--update`, writes the observed results into the
/// suites first and reports a second run.
pub fn run(paths: &[PathBuf], options: &Options) -> Result<Report, RunError> {
    // Containment is checked on canonical paths: the roots' too.
    let roots = options
        .roots
        .iter()
        .map(|r| {
            std::fs::canonicalize(r).map_err(|source| RunError::Root {
                path: r.clone(),
                source,
            })
        })
        .collect::<Result<_, _>>()?;
    let options = &Options {
        roots,
        ..options.clone()
    };
    if !options.update {
        return run_once(paths, options);
    }
    let first = run_once(
        paths,
        &Options {
            coverage: false,
            min_coverage: None,
            ..options.clone()
        },
    )?;
    // What the first run could not update (a Kyverno file), then what was written.
    let mut updated = first.updated.clone();
    updated.extend(write_updates(&first));
    let mut report = run_once(
        paths,
        &Options {
            update: false,
            ..options.clone()
        },
    )?;
    report.updated = updated;
    Ok(report)
}

/// An expanded case's name and edits.
type CaseEdits<'r> = (&'r str, &'r Vec<update::Edit>);

/// Writes the edits of `report`'s cases into their files; one line per file or problem.
fn write_updates(report: &Report) -> Vec<String> {
    let mut notes = Vec::new();
    // Per file, per case index: the edits of each of its (expanded) cases.
    let mut by_file: BTreeMap<&str, BTreeMap<usize, Vec<CaseEdits<'_>>>> = BTreeMap::new();
    for c in &report.cases {
        if let Some((index, edits)) = &c.update {
            by_file
                .entry(c.file.as_str())
                .or_default()
                .entry(*index)
                .or_default()
                .push((c.name.as_str(), edits));
        }
    }
    for (file, cases) in by_file {
        let mut text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                notes.push(format!("{file}: not updated: {e}"));
                continue;
            }
        };
        let mut count = 0;
        for (index, results) in cases {
            let Some(&(name, edits)) = results.first() else {
                continue;
            };
            if results.iter().any(|(_, e)| *e != edits) {
                notes.push(format!(
                    "{file}: {name}: not updated: its documents give different results"
                ));
                continue;
            }
            match update::apply(&text, index, edits) {
                Ok(t) => {
                    text = t;
                    count += 1;
                }
                Err(e) => notes.push(format!("{file}: {name}: not updated: {e}")),
            }
        }
        if count > 0 {
            match std::fs::write(file, &text) {
                Ok(()) => {
                    let s = if count == 1 { "" } else { "s" };
                    notes.push(format!("{file}: updated {count} case{s}"))
                }
                Err(e) => notes.push(format!("{file}: not updated: {e}")),
            }
        }
    }
    notes
}

fn run_once(paths: &[PathBuf], options: &Options) -> Result<Report, RunError> {
    let mut report = Report::default();
    let collector = (options.coverage || options.min_coverage.is_some())
        .then(|| coverage::Collector::new(options.version));
    let suites = find_suites(paths)?;
    for file in &suites {
        run_file(file, options, &mut report, collector.as_ref());
    }
    report.coverage = collector.map(coverage::Collector::finish);
    report.min_coverage = options.min_coverage;
    report.searched = paths.to_vec();
    report.suites = suites.len();
    report.filtered = options.filter.is_some();
    report.allow_empty = options.allow_empty;
    Ok(report)
}

/// Reads and checks a suite file's text; for `--update`, a case may have no expectation yet.
fn parse_suite_for(file: &str, text: &str, update: bool) -> Result<Suite, String> {
    let suite: Suite = serde_yaml_ng::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    if suite.api_version != API_VERSION {
        return Err(format!(
            "{file}: apiVersion: expected {API_VERSION:?}, got {:?}",
            suite.api_version
        ));
    }
    if suite.kind != KIND {
        return Err(format!(
            "{file}: kind: expected {KIND:?}, got {:?}",
            suite.kind
        ));
    }
    for (i, case) in suite.cases.iter().enumerate() {
        let at = format!("{file}: cases[{i}] ({:?})", case.name);
        if case.expect.as_ref().is_none_or(Expect::is_empty) && !case.skip && !update {
            return Err(format!(
                "{at}: expect: a case needs at least one expectation"
            ));
        }
        if case.review.is_some()
            && (case.object.is_some() || case.old_object.is_some() || case.user_info.is_some())
        {
            return Err(format!(
                "{at}: review: a case with a review file takes no object, oldObject or userInfo"
            ));
        }
    }
    Ok(suite)
}

fn display(file: &Path) -> String {
    file.display().to_string()
}

/// The objects of a case's `object`/`oldObject`: inline, or every document of a file.
fn case_objects(base: Refs<'_>, value: &Option<Json>) -> Result<Vec<Option<Json>>, String> {
    match value {
        None | Some(Json::Null) => Ok(vec![None]),
        Some(Json::String(rel)) => {
            // A suite's failure is a line of its report: the text is what is kept.
            let docs = base.load(rel).map_err(|e| e.to_string())?;
            if docs.is_empty() {
                return Err(format!("{rel}: no object in the file"));
            }
            Ok(docs.into_iter().map(|d| Some(d.object)).collect())
        }
        Some(o @ Json::Object(_)) => Ok(vec![Some(o.clone())]),
        Some(_) => Err("an object must be a mapping or a file path".into()),
    }
}

struct Built {
    snapshot: Snapshot,
    resources: review::Resources,
    /// Binding name to policy name.
    binding_policy: BTreeMap<String, String>,
    /// The suite's CRDs, for `expect.crd` (an error, such as two CRDs serving one kind,
    /// fails only the cases that expect CRD validation).
    crds: Result<crate::crd::cli::Catalog, crate::crd::cli::InputError>,
}

/// The objects a suite names: an unreadable file makes the suite invalid.
fn suite_objects(suite: &Suite, base: Refs<'_>) -> Result<Vec<Loaded>, String> {
    let mut objects = Vec::new();
    for (field, list) in [
        ("policies", &suite.policies),
        ("resources", &suite.resources),
    ] {
        for (i, p) in list.iter().enumerate() {
            objects.extend(base.load(p).map_err(|e| format!("{field}[{i}]: {e}"))?);
        }
    }
    for (i, o) in suite.objects.iter().enumerate() {
        if !o.is_object() {
            return Err(format!(
                "objects[{i}]: must be a Kubernetes object (a mapping)"
            ));
        }
        objects.push(Loaded {
            file: PathBuf::from("<inline objects>"),
            document: i + 1,
            field_errors: Vec::new(),
            object: o.clone(),
        });
    }
    Ok(objects)
}

/// The suite's snapshot: a policy the API server would refuse is an error (its cases fail).
fn build(mut objects: Vec<Loaded>, cluster_defaults: bool, version: u16) -> Result<Built, String> {
    if cluster_defaults {
        crate::source::add_cluster_defaults(&mut objects);
    }
    let resources = review::Resources::new(objects.iter().map(|o| &o.object));
    let crds = crate::crd::cli::Catalog::new(
        objects
            .iter()
            .filter(|o| o.object["kind"] == "CustomResourceDefinition")
            .map(|o| o.object.clone()),
    );
    let mut binding_policy = BTreeMap::new();
    for o in &objects {
        if o.object["kind"] == "ValidatingAdmissionPolicyBinding"
            || o.object["kind"] == "MutatingAdmissionPolicyBinding"
        {
            if let (Some(b), Some(p)) = (
                o.object["metadata"]["name"].as_str(),
                o.object["spec"]["policyName"].as_str(),
            ) {
                binding_policy.insert(b.to_string(), p.to_string());
            }
        }
    }
    // Strict: a policy the API server would refuse (its validation, an expression that does
    // not compile in the creation-time environment) fails its tests with the server's message.
    let snapshot = crate::source::snapshot(objects, version, true).map_err(|e| match e {
        crate::source::folder::LoadError::Object {
            source: invalid @ crate::source::ObjectError::Invalid { .. },
            ..
        } => invalid.to_string(),
        other => other.to_string(),
    })?;
    Ok(Built {
        snapshot,
        resources,
        binding_policy,
        crds,
    })
}

fn run_file(
    file: &Path,
    options: &Options,
    report: &mut Report,
    collector: Option<&coverage::Collector>,
) {
    let name = display(file);
    let base = Refs::new(
        file.parent().unwrap_or(Path::new(".")),
        &options.roots,
        options.max_file_bytes,
    );
    let mut updatable = options.update;
    let named_kyverno = file.file_name().is_some_and(|n| n == kyverno::FILE_NAME);
    let suite = match read_text(file, options.max_file_bytes)
        .map_err(|e| format!("{name}: {e}"))
        .and_then(|text| {
            if kyverno::is_kyverno(&text) {
                updatable = false;
                if options.update {
                    report.updated.push(format!(
                        "{name}: not updated: --update writes celgate suites (*{SUFFIX}) \
                         only, not Kyverno test files"
                    ));
                }
                kyverno::suite(&name, &text, base)
            } else if named_kyverno {
                Err(format!("{name}: {}", kyverno::NOT_A_TEST))
            } else {
                parse_suite_for(&name, &text, options.update)
            }
        }) {
        Ok(s) => s,
        Err(message) => {
            report.invalid.push(InvalidFile {
                file: name,
                message,
            });
            return;
        }
    };
    let selected = |case: &str| {
        options
            .filter
            .as_ref()
            .is_none_or(|re| re.is_match(&format!("{name}: {case}")))
    };
    let built = match suite_objects(&suite, base) {
        Ok(mut objects) => {
            let warnings = options.field_validation.apply(&mut objects);
            report.field_warnings.extend(warnings);
            build(objects, suite.cluster_defaults, options.version)
        }
        Err(e) => {
            report.invalid.push(InvalidFile {
                message: format!("{name}: {e}"),
                file: name,
            });
            return;
        }
    };
    if let (Some(c), Ok(b)) = (collector, &built) {
        for entry in &b.snapshot.policies {
            c.register(&entry.policy);
        }
        for entry in &b.snapshot.mutating {
            c.register_mutating(&entry.policy);
        }
    }
    let probe = collector.map(|c| c as &dyn crate::admission::probe::Probe);
    for (index, case) in suite.cases.iter().enumerate() {
        let objects = case_objects(base, &case.object);
        let expanded = match &objects {
            Ok(list) if list.len() > 1 => list
                .iter()
                .enumerate()
                .map(|(i, o)| (format!("{} [{}]", case.name, i + 1), Ok(o.clone())))
                .collect(),
            Ok(list) => vec![(case.name.clone(), Ok(list.first().cloned().flatten()))],
            Err(e) => vec![(case.name.clone(), Err(e.clone()))],
        };
        for (case_name, object) in expanded {
            if !selected(&case_name) {
                continue;
            }
            let started = Instant::now();
            let mut edits = None;
            let (status, failures) = if case.skip {
                (Status::Skip, Vec::new())
            } else {
                let failures = match (&built, object) {
                    (Err(e), _) => vec![e.clone()],
                    (_, Err(e)) => vec![format!("object: {e}")],
                    (Ok(b), Ok(object)) => {
                        let (failures, observed) = run_case(b, base, case, index, object, probe);
                        if updatable && !failures.is_empty() {
                            edits = observed.map(|e| (index, e));
                        }
                        failures
                    }
                };
                let status = if failures.is_empty() {
                    Status::Pass
                } else {
                    Status::Fail
                };
                (status, failures)
            };
            report.cases.push(CaseResult {
                file: name.clone(),
                name: case_name,
                status,
                elapsed: started.elapsed(),
                failures,
                update: edits,
            });
        }
    }
}

/// Runs one case: `expect.crd` against the suite's CRDs, the rest against the policies
/// (only when something else is expected); the unmet expectations, and (when the policies
/// answered) the edits that make its expectation what was observed.
fn run_case(
    built: &Built,
    base: Refs<'_>,
    case: &Case,
    index: usize,
    object: Option<Json>,
    probe: Option<&dyn crate::admission::probe::Probe>,
) -> (Vec<String>, Option<Vec<update::Edit>>) {
    let Some(expect) = case.expect.as_ref() else {
        return run_webhook(built, base, case, index, object, probe);
    };
    let Some(want) = expect.crd.as_ref() else {
        return run_webhook(built, base, case, index, object, probe);
    };
    let (mut failures, observed) = match &case.review {
        Some(_) => (
            vec!["expect.crd: takes the case's object, not a review file".to_string()],
            None,
        ),
        None => match (&built.crds, case_objects(base, &case.old_object)) {
            (Err(e), _) => (vec![format!("expect.crd: {e}")], None),
            (_, Err(e)) => (vec![format!("oldObject: {e}")], None),
            (Ok(catalog), Ok(old)) => crd::check(
                catalog,
                want,
                case.operation.unwrap_or(Operation::Create),
                object.as_ref(),
                old.into_iter().next().flatten().as_ref(),
                case.sub_resource.as_deref() == Some("status"),
            ),
        },
    };
    // `--update` rewrites `crd` with what CRD validation answered, beside the edits of the
    // policies' answer.
    let crd_edit = observed.map(|value| update::Edit {
        key: "crd",
        new_key: "crd",
        value,
    });
    if !expect.expects_webhook() {
        return (failures, crd_edit.map(|e| vec![e]));
    }
    let (more, edits) = run_webhook(built, base, case, index, object, probe);
    failures.extend(more);
    let edits = match (edits, crd_edit) {
        (Some(mut edits), Some(e)) => {
            edits.push(e);
            Some(edits)
        }
        (edits, None) => edits,
        (None, Some(e)) => Some(vec![e]),
    };
    (failures, edits)
}

/// Runs one case through the policies; the unmet expectations, and (when it was answered)
/// the edits that make its expectation what was observed.
fn run_webhook(
    built: &Built,
    base: Refs<'_>,
    case: &Case,
    index: usize,
    object: Option<Json>,
    probe: Option<&dyn crate::admission::probe::Probe>,
) -> (Vec<String>, Option<Vec<update::Edit>>) {
    let body = match &case.review {
        Some(rel) => base
            .read(rel)
            .map_err(|e| format!("review: {e}"))
            .and_then(|(path, text)| {
                folder::parse_document(&path, &text)
                    .map_err(|e| format!("review: {}: {e}", path.display()))
            }),
        None => case_objects(base, &case.old_object)
            .map_err(|e| format!("oldObject: {e}"))
            .and_then(|old| {
                let old = old.into_iter().next().flatten();
                // The case's failure is the error's text.
                review::build(&built.resources, case, index, object, old).map_err(|e| e.to_string())
            }),
    };
    let body = match body.and_then(|b| serde_json::to_vec(&b).map_err(|e| e.to_string())) {
        Ok(b) => b,
        Err(e) => return (vec![e], None),
    };
    // The API server's order: the mutating policies, then the validating ones on the object
    // as they left it.
    let mutation = match mutation::run(&built.snapshot, &body, probe) {
        Ok(m) => m,
        Err(e) => return (vec![e], None),
    };
    if let Some(m) = mutation.as_ref().filter(|m| !m.allowed()) {
        let verdict = AdmissionVerdict::default();
        let answered = Answered {
            verdict: &verdict,
            response: &m.response,
            mutation: Some(m),
        };
        let failures = check(built, case.expect.as_ref(), &answered);
        let edits = observe(built, case.expect.as_ref(), &answered);
        return (failures, Some(edits));
    }
    let body = match &mutation {
        Some(m) => match mutation::mutated_review(&body, m) {
            Ok(b) => b,
            Err(e) => return (vec![e], None),
        },
        None => body,
    };
    let doc = match crate::cel::json::Doc::parse(&body) {
        Ok(d) => d,
        Err(e) => return (vec![format!("the review is not valid JSON: {e}")], None),
    };
    let req = match crate::review::request(&doc) {
        Ok(r) => r,
        Err(e) => return (vec![format!("the review is invalid: {e}")], None),
    };
    let options = crate::admission::AdmitOptions { trace: true, probe };
    let verdict = crate::admission::admit(&built.snapshot, &req, &Default::default(), options);
    let response = crate::review::encode::response(&req, &verdict);
    let answered = Answered {
        verdict: &verdict,
        response: &response,
        mutation: mutation.as_ref(),
    };
    let failures = check(built, case.expect.as_ref(), &answered);
    let edits = observe(built, case.expect.as_ref(), &answered);
    (failures, Some(edits))
}

/// A case's answer: the validating verdict and response (the mutating phase's denial when
/// it denied: then no validating policy ran), and what the mutating phase did.
struct Answered<'a> {
    verdict: &'a AdmissionVerdict,
    response: &'a Json,
    mutation: Option<&'a mutation::Mutation>,
}

impl Answered<'_> {
    fn allowed(&self) -> bool {
        self.mutation.is_none_or(mutation::Mutation::allowed) && self.verdict.allowed()
    }
}

/// A policy's result: the worst of its bindings', `skip` when none was evaluated.
fn policy_result(answered: &Answered<'_>, policy: &str) -> Expected {
    if let Some(r) = answered
        .mutation
        .and_then(|m| mutation::policy_result(m, policy))
    {
        return r;
    }
    let verdict = answered.verdict;
    Expected::of(
        verdict
            .results
            .iter()
            .filter(|r| r.policy == policy)
            .map(|r| r.outcome)
            .max(),
    )
}

/// A binding's result; a policy-level configuration error is every binding's.
fn binding_result(built: &Built, answered: &Answered<'_>, binding: &str) -> Expected {
    if let Some(r) = answered
        .mutation
        .and_then(|m| mutation::binding_result(m, binding))
    {
        return r;
    }
    let verdict = answered.verdict;
    let policy = built.binding_policy.get(binding);
    Expected::of(
        verdict
            .results
            .iter()
            .filter(|r| match &r.binding {
                Some(b) => b == binding,
                None => Some(&r.policy) == policy,
            })
            .map(|r| r.outcome)
            .max(),
    )
}

/// The edits that make `expect` what was observed: each field it has, with its observed
/// value (a `messageMatches` that does not match becomes an exact `message`); for a case
/// without expectation, `allowed`, and `message` and `warnings` when there are some.
fn observe(built: &Built, expect: Option<&Expect>, answered: &Answered<'_>) -> Vec<update::Edit> {
    let mut out = observe_answer(built, expect, answered);
    mutation::observe(expect, answered.mutation, &mut out);
    out
}

/// [`observe`] of the answer's fields (all but the mutation's).
fn observe_answer(
    built: &Built,
    expect: Option<&Expect>,
    answered: &Answered<'_>,
) -> Vec<update::Edit> {
    use serde_json::json;
    let (verdict, response) = (answered.verdict, answered.response);
    let status = &response["status"];
    let message = status["message"].as_str().unwrap_or("");
    let allowed = answered.allowed();
    let edit = |key, value| update::Edit {
        key,
        new_key: key,
        value,
    };
    let Some(expect) = expect.filter(|e| !e.is_empty()) else {
        let mut out = vec![edit("allowed", json!(allowed))];
        if !allowed {
            out.push(edit("message", json!(message)));
        }
        if !verdict.warnings.is_empty() {
            out.push(edit("warnings", json!(verdict.warnings)));
        }
        return out;
    };
    let mut out = Vec::new();
    if expect.allowed.is_some() {
        out.push(edit("allowed", json!(allowed)));
    }
    if expect.code.is_some() {
        out.push(edit("code", json!(status["code"].as_u64().unwrap_or(200))));
    }
    if expect.reason.is_some() {
        out.push(edit(
            "reason",
            json!(status["reason"].as_str().unwrap_or("")),
        ));
    }
    if expect.message.is_some() {
        out.push(edit("message", json!(message)));
    }
    if let Some(Pattern(re)) = &expect.message_matches {
        if !re.is_match(message) {
            out.push(update::Edit {
                key: "messageMatches",
                new_key: "message",
                value: json!(message),
            });
        }
    }
    if expect.warnings.is_some() {
        out.push(edit("warnings", json!(verdict.warnings)));
    }
    if let Some(want) = &expect.audit_annotations {
        let got = &response["auditAnnotations"];
        let m: serde_json::Map<String, Json> = want
            .keys()
            .filter_map(|k| Some((k.clone(), got.get(k)?.clone())))
            .collect();
        out.push(edit("auditAnnotations", Json::Object(m)));
    }
    if let Some(want) = &expect.policies {
        let m: serde_json::Map<String, Json> = want
            .keys()
            .map(|p| (p.clone(), json!(policy_result(answered, p).name())))
            .collect();
        out.push(edit("policies", Json::Object(m)));
    }
    if let Some(want) = &expect.bindings {
        let m: serde_json::Map<String, Json> = want
            .keys()
            .map(|b| (b.clone(), json!(binding_result(built, answered, b).name())))
            .collect();
        out.push(edit("bindings", Json::Object(m)));
    }
    out
}

fn check(built: &Built, expect: Option<&Expect>, answered: &Answered<'_>) -> Vec<String> {
    let Some(expect) = expect.filter(|e| !e.is_empty()) else {
        return vec!["no expectation".into()];
    };
    let (verdict, response) = (answered.verdict, answered.response);
    let mut out = Vec::new();
    mutation::check(expect, answered.mutation, &mut out);
    let allowed = answered.allowed();
    let status = &response["status"];
    let message = status["message"].as_str().unwrap_or("");
    let reason = status["reason"].as_str().unwrap_or("");
    let code = status["code"].as_u64();
    if let Some(want) = expect.allowed {
        if want != allowed {
            let why = if allowed {
                String::new()
            } else {
                format!(" ({message})")
            };
            out.push(format!("allowed: expected {want}, got {allowed}{why}"));
        }
    }
    if let Some(want) = expect.code {
        // An allowed request has no status; its code is 200 as the API server answers it.
        let got = code.unwrap_or(200);
        if u64::from(want) != got {
            out.push(format!("code: expected {want}, got {got}"));
        }
    }
    expect_status_text(
        &mut out,
        "",
        StatusText {
            reason: expect.reason.as_deref(),
            message: expect.message.as_deref(),
            message_matches: expect.message_matches.as_ref(),
        },
        reason,
        message,
    );
    if let Some(want) = &expect.warnings {
        if *want != verdict.warnings {
            out.push(format!(
                "warnings: expected {want:?}, got {:?}",
                verdict.warnings
            ));
        }
    }
    if let Some(want) = &expect.audit_annotations {
        let got = &response["auditAnnotations"];
        for (key, value) in want {
            match got[key].as_str() {
                Some(v) if v == value => {}
                Some(v) => out.push(format!(
                    "auditAnnotations[{key}]: expected {value:?}, got {v:?}"
                )),
                None => {
                    let keys: Vec<&String> = got
                        .as_object()
                        .map(|m| m.keys().collect())
                        .unwrap_or_default();
                    out.push(format!(
                        "auditAnnotations[{key}]: missing (present: {keys:?})"
                    ))
                }
            }
        }
    }
    for (policy, want) in expect.policies.iter().flatten() {
        let got = policy_result(answered, policy);
        if got != *want {
            out.push(format!(
                "policies[{policy}]: expected {}, got {}",
                want.name(),
                got.name()
            ));
        }
    }
    for (binding, want) in expect.bindings.iter().flatten() {
        let got = binding_result(built, answered, binding);
        if got != *want {
            out.push(format!(
                "bindings[{binding}]: expected {}, got {}",
                want.name(),
                got.name()
            ));
        }
    }
    out
}
