//! `celgate eval`: one AdmissionReview, or a plain manifest turned into the request the API
//! server would send for it (`celgate::review::manifest`), answered offline against a policy
//! folder as the webhook would answer it; the AdmissionReview answer printed.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::cli::files::{load_folder, read_document, FileError};
use celgate::source::folder::FieldValidation;

use crate::cli::flags::{DocFormat, K8sVersion};
use crate::cli::{emit_document, CliError, Outcome};

#[derive(clap::Args)]
pub struct EvalArgs {
    /// Folder (read recursively) of YAML or JSON manifests, multi-document allowed.
    #[arg(long, value_name = "DIR")]
    policies: PathBuf,
    /// The AdmissionReview (v1 or v1beta1; JSON or YAML), or any other Kubernetes object
    /// (a plain manifest, described by --operation, --old, --user, --group); `-` for
    /// standard input.
    #[arg(long, visible_alias = "object", value_name = "FILE")]
    request: String,
    #[command(flatten)]
    manifest: ManifestFlags,
    /// How the AdmissionReview answer is printed: JSON (pretty) or YAML.
    #[arg(short = 'o', long, value_enum, default_value = "json")]
    output: DocFormat,
    /// When the answer makes the exit code 1: `never` (exit 0 whatever the decision),
    /// `deny` (the request is refused), `warn` (refused, or admitted with warnings).
    #[arg(long, value_enum, value_name = "WHEN", default_value = "never")]
    fail_on: FailOn,
    /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// Do not add what every cluster has (namespace name labels, kube-root-ca.crt).
    #[arg(long)]
    no_cluster_defaults: bool,
    /// Largest file read (a manifest, suite or policy file); a larger one, or one that is not a regular file (a FIFO,
    /// a device), is skipped with a warning in a folder, refused when named
    /// itself.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Unknown and duplicate fields of policies, bindings and ConfigMaps, as `kubectl apply
    /// --validate`: `strict` refuses the folder, `warn` warns on standard error, `ignore`.
    #[arg(long, value_name = "strict|warn|ignore", default_value_t = FieldValidation::Strict)]
    field_validation: FieldValidation,
    /// Which admission phase answers: `all` (the API server's order: MutatingAdmissionPolicies
    /// mutate the object, then ValidatingAdmissionPolicies validate the mutated object; the
    /// answer carries both's result and the patch), `mutating` (as `/mutate` answers:
    /// allowed with the patch, or the denial) or `validating` (as `/validate` answers).
    #[arg(long, value_enum, value_name = "PHASE", default_value = "all")]
    phase: Phase,
    /// Also write the object after the mutations (the request's object when nothing
    /// changed it) to FILE, as JSON.
    #[arg(long, value_name = "FILE")]
    mutated_object: Option<PathBuf>,
}

/// `celgate eval --phase`: which webhook's answer to give.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Phase {
    /// Mutate, then validate the mutated object.
    All,
    /// Only MutatingAdmissionPolicies, as `/mutate`.
    Mutating,
    /// Only ValidatingAdmissionPolicies, as `/validate`.
    Validating,
}

/// `celgate eval --fail-on`: which answers exit 1, for CI.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FailOn {
    /// Exit 0 whatever the decision (the answer is the result).
    Never,
    /// Exit 1 when the request is refused (`response.allowed` false).
    Deny,
    /// Exit 1 when the request is refused or admitted with warnings.
    Warn,
}

impl FailOn {
    /// The exit of an AdmissionReview answer (`{"response": {"allowed", "warnings"}}`).
    fn outcome(self, review: &Json) -> Outcome {
        let response = &review["response"];
        let denied = response["allowed"] != Json::Bool(true);
        let warned = response["warnings"]
            .as_array()
            .is_some_and(|w| !w.is_empty());
        let fails = match self {
            FailOn::Never => false,
            FailOn::Deny => denied,
            FailOn::Warn => denied || warned,
        };
        if fails {
            Outcome::Refused
        } else {
            Outcome::Success
        }
    }
}

/// `celgate eval`'s flags that describe a plain manifest's request.
#[derive(clap::Args)]
struct ManifestFlags {
    /// With a manifest: CREATE (default), UPDATE (needs --old) or DELETE (the manifest is
    /// the object deleted).
    #[arg(long, value_name = "OP")]
    operation: Option<String>,
    /// With a manifest: the object as it was (for UPDATE).
    #[arg(long, value_name = "FILE")]
    old: Option<PathBuf>,
    /// With a manifest: the requesting user (default `celgate-test-user`).
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    /// With a manifest: a group of the user (repeatable); `system:authenticated` is
    /// always added.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
    /// With a manifest: the request namespace (default: the manifest's, else `default`).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// With a manifest: the subresource (e.g. `status`).
    #[arg(long, value_name = "NAME")]
    subresource: Option<String>,
    /// With a manifest: a dry-run request.
    #[arg(long)]
    dry_run: bool,
}

impl ManifestFlags {
    fn given(&self) -> bool {
        self.operation.is_some()
            || self.old.is_some()
            || self.user.is_some()
            || !self.groups.is_empty()
            || self.namespace.is_some()
            || self.subresource.is_some()
            || self.dry_run
    }
}

/// `celgate eval`.
pub fn run(args: EvalArgs) -> Result<Outcome, CliError> {
    let EvalArgs {
        policies,
        request,
        manifest,
        output,
        fail_on,
        k8s_version,
        no_cluster_defaults,
        max_file_bytes,
        field_validation,
        phase,
        mutated_object,
    } = args;
    let mut objects = load_folder(&policies, max_file_bytes)?;
    for w in field_validation.apply(&mut objects) {
        eprintln!("warning: {w}");
    }
    if !no_cluster_defaults {
        celgate::source::add_cluster_defaults(&mut objects);
    }
    // The CRDs tell a manifest's resource and scope.
    let crds: Vec<Json> = objects
        .iter()
        .filter(|o| o.object["kind"] == "CustomResourceDefinition")
        .map(|o| o.object.clone())
        .collect();
    let snapshot = celgate::source::snapshot(objects, k8s_version.0, true)
        .map_err(|e| CliError::Input(e.into()))?;
    for why in &snapshot.refused {
        eprintln!("warning: left out, as the API server refuses it: {why}");
    }
    let (name, text) = if request == "-" {
        let s = celgate::source::read::read_stdin(max_file_bytes).map_err(CliError::Stdin)?;
        ("<stdin>".to_string(), s)
    } else {
        let path = Path::new(&request);
        let t = celgate::source::read::read_text(path, max_file_bytes).map_err(|source| {
            FileError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        (request.clone(), t)
    };
    let refused = |e: Box<dyn std::error::Error + Send + Sync>| CliError::InputIn {
        name: name.clone(),
        source: e,
    };
    // JSON as it is (also when too deep or with a repeated key: the review's error to
    // report); anything else is read as YAML and re-encoded.
    let json =
        celgate::cel::json::Doc::parse(text.as_bytes()).map_or_else(|e| e.is_data(), |_| true);
    let value: Option<Json> = if json {
        celgate::cel::deep_value::from_str(&text).ok()
    } else {
        Some(
            celgate::source::folder::parse_document(Path::new(&name), &text)
                .map_err(|e| refused(e.into()))?,
        )
    };
    let is_review = value
        .as_ref()
        .is_none_or(|v| v["kind"] == "AdmissionReview" || v.get("request").is_some());
    let body = match value {
        _ if is_review && manifest.given() => {
            return Err(CliError::ManifestFlagsOnReview { name });
        }
        _ if is_review && json => text.into_bytes(),
        Some(v) if is_review => serde_json::to_vec(&v).map_err(|e| refused(e.into()))?,
        Some(object) => {
            let old = manifest
                .old
                .as_deref()
                .map(|p| read_document(p, max_file_bytes))
                .transpose()?;
            let m = celgate::review::manifest::ManifestRequest {
                operation: manifest.operation,
                object,
                old,
                user: manifest.user,
                groups: manifest.groups,
                namespace: manifest.namespace,
                sub_resource: manifest.subresource,
                dry_run: manifest.dry_run,
            };
            let review = celgate::review::manifest::manifest_review(crds.iter(), m)
                .map_err(|e| refused(e.into()))?;
            serde_json::to_vec(&review).map_err(|e| refused(e.into()))?
        }
        None => text.into_bytes(),
    };
    let answer =
        answer_phases(&snapshot, &body, phase, mutated_object.as_deref()).map_err(|e| match e {
            PhaseError::Review(e) => refused(e.into()),
            PhaseError::Write(e) => e,
        })?;
    emit_document(&answer, output)?;
    Ok(fail_on.outcome(&answer))
}

enum PhaseError {
    Review(celgate::review::ReviewError),
    Write(CliError),
}

/// The answer of `phase` to the review `body`; with `mutated_object`, the object after the
/// mutations written there.
fn answer_phases(
    snapshot: &celgate::policy::Snapshot,
    body: &[u8],
    phase: Phase,
    mutated_object: Option<&Path>,
) -> Result<Json, PhaseError> {
    let context = Default::default();
    let validate = |body: &[u8]| {
        celgate::review::answer(snapshot, body, &context, Default::default())
            .map(|a| a.review())
            .map_err(PhaseError::Review)
    };
    if phase == Phase::Validating {
        return validate(body);
    }
    let mutating =
        celgate::review::answer_mutating(snapshot, body, &context).map_err(PhaseError::Review)?;
    let mutated = mutating.verdict.mutated.as_ref().map(|m| &m.after);
    if let Some(path) = mutated_object {
        let object = match mutated {
            Some(o) => o.clone(),
            None => serde_json::from_slice::<Json>(body)
                .map(|r| r["request"]["object"].clone())
                .unwrap_or(Json::Null),
        };
        let text = serde_json::to_string_pretty(&object).unwrap_or_default();
        std::fs::write(path, text + "\n").map_err(|source| {
            PhaseError::Write(CliError::WriteFile {
                flag: "--mutated-object",
                path: path.to_path_buf(),
                source,
            })
        })?;
    }
    if phase == Phase::Mutating || !mutating.verdict.allowed() {
        return Ok(mutating.review);
    }
    // The API server validates the object as the mutations left it.
    let mut review = match mutated {
        None => return validate(body),
        Some(object) => {
            let mut review: Json = serde_json::from_slice(body)
                .map_err(|e| PhaseError::Review(celgate::review::ReviewError::MalformedJson(e)))?;
            review["request"]["object"] = object.clone();
            let bytes = serde_json::to_vec(&review).unwrap_or_default();
            validate(&bytes)?
        }
    };
    // Admitted: the answer carries the mutations' patch too.
    if review["response"]["allowed"] == true {
        if let Some(r) = review["response"].as_object_mut() {
            for key in ["patchType", "patch"] {
                if let Some(v) = mutating.review["response"].get(key) {
                    r.insert(key.into(), v.clone());
                }
            }
        }
    }
    Ok(review)
}
