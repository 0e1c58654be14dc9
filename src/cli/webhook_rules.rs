//! `celgate webhook-rules`: the ValidatingWebhookConfiguration `rules` the bindings of a
//! policy folder need (`celgate::webhook::rules`), or with `--phase mutating` the
//! MutatingWebhookConfiguration's for its MutatingAdmissionPolicies, for a configuration
//! kept in Git (the chart's `webhook.rulesMode: static` with `webhook.rules` and
//! `mutating.rules`).

use std::path::PathBuf;

use celgate::webhook::rules::{Hints, Phase, RuleSet, WebhookRule};

use crate::cli::files::load_folder;
use crate::cli::flags::K8sVersion;
use crate::cli::{emit, CliError, Outcome};

#[derive(clap::Args)]
pub struct WebhookRulesArgs {
    /// Folder (read recursively) of the policies and bindings to serve, as `celgate serve
    /// --policies` reads it; the rules cover what its bindings can match.
    #[arg(long, value_name = "DIR")]
    policies: PathBuf,
    /// `yaml`: a YAML list of rules, the chart's `webhook.rules`; `json`: a JSON array
    /// (`helm --set-json "webhook.rules=..."`); `webhook`: the fields of a webhook that
    /// follow the policies, as YAML: `rules`, and the `namespaceSelector`/`objectSelector`
    /// every binding requires when there is one (to add to the webhook's own selectors, as
    /// `--webhook-rules dynamic` does).
    #[arg(short = 'o', long, value_enum, default_value = "yaml")]
    output: RulesOutput,
    /// Which webhook the rules are for: `validating` (the ValidatingWebhookConfiguration,
    /// `/validate`: the ValidatingAdmissionPolicies' bindings) or `mutating` (the
    /// MutatingWebhookConfiguration, `/mutate`: the MutatingAdmissionPolicies' bindings;
    /// never DELETE, which the mutating plugin never sees).
    #[arg(long, value_enum, default_value = "validating")]
    phase: RulesPhase,
    /// The Kubernetes version whose CEL libraries are available (1.N or v1.N).
    #[arg(long, value_name = "1.N", default_value_t = K8sVersion::NEWEST)]
    k8s_version: K8sVersion,
    /// Largest file read; a larger one, or one that is not a regular file, is skipped with a
    /// warning.
    #[arg(long, value_name = "BYTES", default_value_t = celgate::source::read::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
}

/// `celgate webhook-rules`'s output.
#[derive(Clone, Copy, clap::ValueEnum)]
enum RulesOutput {
    Yaml,
    Json,
    Webhook,
}

/// `celgate webhook-rules --phase`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum RulesPhase {
    Validating,
    Mutating,
}

impl From<RulesPhase> for Phase {
    fn from(p: RulesPhase) -> Phase {
        match p {
            RulesPhase::Validating => Phase::Validating,
            RulesPhase::Mutating => Phase::Mutating,
        }
    }
}

/// `-o webhook`: the rules and the selector hints.
#[derive(serde::Serialize)]
struct WebhookFields {
    rules: Vec<WebhookRule>,
    #[serde(flatten)]
    hints: Hints,
}

/// `celgate webhook-rules`: exit 0 with the rules (an empty list when no binding matches
/// anything), 2 for unreadable input.
pub fn run(args: WebhookRulesArgs) -> Result<Outcome, CliError> {
    let objects = load_folder(&args.policies, args.max_file_bytes)?;
    // Not strict: a policy the API server would refuse still decides what it matches (a
    // configuration error under its failurePolicy), so its resources are covered.
    let snapshot = celgate::source::snapshot(objects, args.k8s_version.0, false)
        .map_err(|e| CliError::Input(e.into()))?;
    let phase = Phase::from(args.phase);
    let rules = RuleSet::of_phase(&snapshot, phase).rules();
    let text = match args.output {
        RulesOutput::Webhook => serde_yaml_ng::to_string(&WebhookFields {
            rules,
            hints: Hints::of_phase(&snapshot, phase),
        })
        .map_err(CliError::Yaml)?,
        RulesOutput::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&rules).map_err(CliError::Json)?
        ),
        RulesOutput::Yaml => serde_yaml_ng::to_string(&rules).map_err(CliError::Yaml)?,
    };
    emit(&text);
    Ok(Outcome::Success)
}
