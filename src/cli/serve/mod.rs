//! `celgate serve`: the webhook. Turns the flags into the service's configuration (refusing
//! flags that do not go together) and runs it until SIGTERM or Ctrl-C (`celgate::app`).

mod args;
mod certs;

pub use args::ServeArgs;

use std::path::PathBuf;
use std::time::Duration;

use celgate::app::{CertSource, PolicySource, ServeConfig};
use celgate::cel::NEWEST_MINOR;
use celgate::server::Limits;
use celgate::source::folder::FolderSource;
use celgate::source::kube::authorizer::SarOptions;
use celgate::source::kube::background::BackgroundOptions;
use celgate::source::kube::lease::LeaseOptions;
use celgate::source::kube::reports::ReportOptions;
use celgate::source::kube::KubeOptions;

use args::{LogColor, ServeMode, ServeReports, SourceKind, WebhookRules};

use crate::cli::flags::{FlagError, LogFormat, ServiceAccount};
use crate::cli::{CliError, Outcome};

/// `celgate serve`.
pub fn run(args: ServeArgs) -> Result<Outcome, CliError> {
    init_logging(args.log_format, args.log_color, &args.log_level);
    let cert = certificate(&args)?;
    let limits = limits(&args)?;
    let ServeArgs {
        source,
        mode,
        log_results,
        policies,
        reload_settle,
        allow_empty_policies,
        strict_namespaces,
        max_file_bytes,
        field_validation,
        kube_api_url,
        kubeconfig,
        authz_cache_ttl,
        authz_timeout,
        kube_retry_max,
        resync_interval,
        param_namespaces,
        no_events,
        pod_name,
        lease_namespace,
        lease_name,
        lease_release_timeout,
        reports,
        reports_interval,
        reports_max_results,
        reports_max_resources,
        background_interval,
        background_page_size,
        background_qps,
        background_concurrency,
        background_debounce,
        service_account,
        listen,
        metrics_listen,
        client_ca,
        ca_out,
        eval_threads,
        k8s_version,
        webhook_rules,
        ..
    } = args;
    // None: the API server's own (cluster mode), or the newest known (folder mode).
    let given_version = k8s_version.map(|v| v.0);
    let version = given_version.unwrap_or(NEWEST_MINOR);
    if strict_namespaces && policies.is_some() && matches!(source, SourceKind::Kubernetes) {
        return Err(CliError::StrictNamespacesInCluster);
    }
    let folder = |dir: PathBuf| FolderSource {
        dir,
        settle: reload_settle,
        allow_empty: allow_empty_policies,
        strict_namespaces,
        max_file_bytes,
        field_validation,
    };
    if reports != ServeReports::Off && matches!(source, SourceKind::Folder) {
        return Err(CliError::ReportsNeedCluster);
    }
    let source = match source {
        // No folder is read unless named: a default relative to the working directory
        // served whatever was there (or nothing) depending on where celgate started.
        SourceKind::Folder => {
            PolicySource::Folder(folder(policies.ok_or(CliError::NoPolicyFolder)?))
        }
        SourceKind::Kubernetes => {
            let api = match reports {
                ServeReports::Wgpolicy => Some(celgate::scan::report::ReportApi::WgPolicy),
                ServeReports::Openreports => Some(celgate::scan::report::ReportApi::OpenReports),
                ServeReports::Off => None,
            };
            let reports = api.map(|api| ReportOptions {
                api,
                interval: reports_interval,
                max_results: reports_max_results,
                max_resources: reports_max_resources,
            });
            let (user, groups) = service_account_identity(&service_account, &lease_namespace)?;
            // 0: off.
            let background = (!background_interval.is_zero()).then_some(BackgroundOptions {
                interval: background_interval,
                debounce: background_debounce,
                page_size: background_page_size,
                qps: background_qps,
                concurrency: background_concurrency,
                user,
                groups,
            });
            // One replica reports Events; it needs a name and a namespace for the Lease.
            let events_lease =
                (!lease_namespace.is_empty() && !pod_name.is_empty()).then(|| LeaseOptions {
                    namespace: lease_namespace,
                    name: lease_name,
                    identity: pod_name.clone(),
                    duration: Duration::from_secs(15),
                    renew: Duration::from_secs(5),
                    release_timeout: lease_release_timeout,
                });
            PolicySource::Kubernetes {
                api_url: kube_api_url,
                kubeconfig,
                options: KubeOptions {
                    version,
                    // Folder policies may use CEL newer than the cluster's: the version
                    // given, or the newest celgate knows.
                    version_from_server: given_version.is_none() && policies.is_none(),
                    events: !no_events,
                    events_lease,
                    instance: pod_name,
                    retry_max: kube_retry_max,
                    // 0: off.
                    resync: (!resync_interval.is_zero()).then_some(resync_interval),
                    param_namespaces: param_namespaces.map(|n| n.0).unwrap_or_default(),
                    reports,
                    background,
                    policy_folder: policies.map(folder),
                    ..KubeOptions::default()
                },
                sar: Some(SarOptions {
                    cache_ttl: authz_cache_ttl,
                    timeout: authz_timeout,
                    ..SarOptions::default()
                }),
            }
        }
    };
    let cfg = ServeConfig {
        source,
        listen,
        metrics_listen,
        cert,
        client_ca,
        limits,
        answering: celgate::server::Answering {
            mode: match mode {
                ServeMode::Enforce => celgate::review::Mode::Enforce,
                ServeMode::Observe => celgate::review::Mode::Observe,
            },
            log_results,
        },
        poll: Duration::from_secs(1),
        version,
        webhook_rules: match webhook_rules {
            WebhookRules::Static => celgate::app::WebhookRulesMode::Static,
            WebhookRules::Dynamic => celgate::app::WebhookRulesMode::Dynamic,
        },
    };
    celgate::app::serve(cfg, eval_threads, ca_out.as_deref())?;
    Ok(Outcome::Success)
}

/// The serving certificate: files, self-signed, or the certificate controller's; exactly one.
fn certificate(args: &ServeArgs) -> Result<CertSource, CliError> {
    let controlled = args
        .cert_controller
        .clone()
        .source(args.kube_api_url.as_ref(), args.kubeconfig.as_deref())?;
    match (&args.tls_cert, &args.tls_key, args.self_signed, controlled) {
        (Some(cert), Some(key), false, None) => Ok(CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        }),
        (None, None, true, None) => Ok(CertSource::SelfSigned {
            names: args.dns_names.clone(),
        }),
        (None, None, false, Some(c)) => Ok(c),
        _ => Err(CliError::NoCertificate),
    }
}

/// The server's limits; `--max-connections` lowered to fit the open-file limit.
fn limits(args: &ServeArgs) -> Result<Limits, CliError> {
    let (max_body, max_buffered) = (args.max_body_bytes, args.max_buffered_bytes);
    // A body may fill three quarters of the budget (the rest is kept for small reviews).
    if max_body > max_buffered - max_buffered / 4 {
        return Err(CliError::BufferBelowBody { max_body });
    }
    // Connections must not use up the descriptors: accept would then fail, and so would
    // reading policy and certificate files.
    let fd_limit = celgate::server::conn::raise_fd_limit();
    let max_connections = args.max_connections;
    let fitted = celgate::server::conn::fit_to_fd_limit(
        max_connections,
        args.metrics_max_connections,
        fd_limit,
    );
    if fitted < max_connections {
        tracing::warn!(
            max_connections,
            open_files = fd_limit,
            lowered_to = fitted,
            "--max-connections lowered to fit the open-file limit"
        );
    }
    Ok(Limits {
        max_body,
        max_buffered,
        max_header_bytes: args.max_header_bytes,
        max_inflight: args.max_inflight,
        default_timeout: args.default_timeout,
        client_timeout: args.client_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: fitted,
        metrics_max_connections: args.metrics_max_connections,
        memory_per_expression: args.cel_memory_limit,
        max_apply_depth: args.max_apply_depth,
        inline_eval_time: args.inline_eval_time,
        ..Limits::default()
    })
}

/// The user and groups of background scans: `--service-account`, whose namespace defaults
/// to `--lease-namespace`, else `celgate`.
fn service_account_identity(
    account: &ServiceAccount,
    lease_namespace: &str,
) -> Result<(String, Vec<String>), CliError> {
    let namespace = match &account.namespace {
        Some(ns) => ns.as_str(),
        None if lease_namespace.is_empty() => "celgate",
        None => lease_namespace,
    };
    // The flag checked its own namespace; one from --lease-namespace is checked here.
    if !ServiceAccount::is_name(namespace) {
        return Err(FlagError::ServiceAccount {
            flag: "--service-account".into(),
            text: account.text.clone(),
        }
        .into());
    }
    Ok(celgate::scan::service_account_identity(
        namespace,
        &account.name,
    ))
}

fn init_logging(format: LogFormat, color: LogColor, level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Escape codes only where a terminal renders them, not in a file or a log collector.
    let ansi = match color {
        LogColor::Auto => std::io::stderr().is_terminal(),
        LogColor::Always => true,
        LogColor::Never => false,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_ansi(false).init(),
        LogFormat::Text => builder.with_ansi(ansi).init(),
    }
}
