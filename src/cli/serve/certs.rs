//! `celgate serve`'s certificate controller flags (`--cert-*`, `celgate::certs`): a Secret
//! holding a CA and a serving certificate, rotated at run time, the CA injected into a
//! ValidatingWebhookConfiguration's caBundle (and a MutatingWebhookConfiguration's, with
//! `--cert-mutating-webhook`).

use std::path::Path;
use std::time::Duration;

use celgate::app::CertSource;

use crate::cli::flags::{self, Checked};
use crate::cli::CliError;

#[derive(Clone, clap::Args)]
pub struct CertControllerFlags {
    /// Manage the serving certificate at run time in this Secret (created when missing): a CA
    /// and a certificate for the --cert-dns-names, the CA injected into the caBundle of
    /// --cert-webhook, both rotated before expiry. Instead of --tls-cert or --self-signed.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["tls_cert", "self_signed"])]
    cert_secret: Option<String>,
    /// Namespace of --cert-secret (the Deployment passes its own).
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE", default_value = "")]
    cert_namespace: String,
    /// The ValidatingWebhookConfiguration whose webhooks get the CA bundle in caBundle.
    #[arg(long, value_name = "NAME", default_value = "")]
    cert_webhook: String,
    /// The MutatingWebhookConfiguration (`/mutate`, for MutatingAdmissionPolicies) whose
    /// webhooks get the CA bundle too; with `--webhook-rules dynamic` its rules follow the
    /// bound MutatingAdmissionPolicies. Empty: none.
    #[arg(long, value_name = "NAME", default_value = "")]
    cert_mutating_webhook: String,
    /// A name of the serving certificate (repeatable): the Service's DNS names, e.g.
    /// `celgate.celgate-system.svc`.
    #[arg(long = "cert-dns-name", value_name = "NAME")]
    cert_dns_names: Vec<String>,
    /// Lifetime of each CA and serving certificate.
    #[arg(long, value_name = "DURATION", default_value = "8760h", value_parser = Checked(flags::positive_duration))]
    cert_validity: Duration,
    /// A rotation starts this long before the certificate expires.
    #[arg(long, value_name = "DURATION", default_value = "720h", value_parser = Checked(flags::positive_duration))]
    cert_renew_before: Duration,
    /// The wait between the steps of a rotation (the new CA trusted beside the old, the new
    /// certificate served, the old CA dropped), for every replica and the API server to see
    /// each step; at least twice --cert-check-interval.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = Checked(flags::positive_duration))]
    cert_overlap: Duration,
    /// How often each replica checks the Secret and the caBundle (and re-injects a caBundle
    /// that was overwritten).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = Checked(flags::positive_duration))]
    cert_check_interval: Duration,
}

impl CertControllerFlags {
    /// The certificate source, when --cert-secret is given.
    pub fn source(
        self,
        api_url: Option<&axum::http::Uri>,
        kubeconfig: Option<&Path>,
    ) -> Result<Option<CertSource>, CliError> {
        let Some(secret) = self.cert_secret else {
            return Ok(None);
        };
        let options = celgate::certs::Options {
            namespace: self.cert_namespace,
            secret,
            webhook: self.cert_webhook,
            mutating_webhook: Some(self.cert_mutating_webhook).filter(|m| !m.is_empty()),
            names: self.cert_dns_names,
            timing: celgate::certs::Timing {
                validity: self.cert_validity,
                renew_before: self.cert_renew_before,
                overlap: self.cert_overlap,
            },
            check_every: self.cert_check_interval,
        };
        options.check().map_err(|e| CliError::Input(e.into()))?;
        let connect = celgate::source::kube::Connect {
            api_url: api_url.cloned(),
            kubeconfig: kubeconfig.map(Path::to_path_buf),
        };
        Ok(Some(CertSource::Controller { connect, options }))
    }
}
