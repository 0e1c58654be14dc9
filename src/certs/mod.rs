//! The certificate controller (`celgate serve --cert-secret`): celgate manages its own
//! serving certificate at run time, as Gatekeeper's and Kyverno's cert controllers do, so that
//! an install rendered without a cluster (`helm template`, Argo CD) needs no certificate.
//!
//! One Secret is the truth, shared by every replica: a CA bundle (`ca.crt`), the serving pair
//! (`tls.crt`, `tls.key`) and, during a rotation, the next pair (`next.crt`, `next.key`).
//! Every replica runs the same loop every `check_every`: read the webhook configuration, then
//! the Secret; take the next step of [`pki::plan`]; write the Secret back conditionally on the
//! resourceVersion read (of two replicas racing, the loser gets a conflict and reads again);
//! publish the serving pair to the server; and put the bundle into `caBundle` of every
//! webhook of the one named ValidatingWebhookConfiguration, and of the one named
//! MutatingWebhookConfiguration when there is one (`/mutate`, for MutatingAdmissionPolicies),
//! when it differs (re-injecting it when someone overwrote it), also conditionally. Reading
//! the configurations before the Secret means a replica with an older Secret can never write
//! an older bundle over a newer one: the newer was written to the Secret before it reached
//! the configurations, so the older replica's conditional write fails.
//!
//! A rotation starts `renew_before` ahead of expiry, in three steps `overlap` apart: a new CA
//! joins the bundle (old and new trusted) with a serving certificate it signed kept aside; once
//! every configuration holds that bundle, the new certificate is served; then the old CA is
//! dropped. Clients that trust the injected bundle complete handshakes throughout.
//!
//! RBAC: get and update of that one Secret and those configurations (resourceNames), and
//! create of Secrets (which RBAC cannot narrow to a name), for the first start.

pub mod pki;
pub mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::webhook::rules::Phase;
use pki::{Material, PkiError};
pub use pki::{Pair, Step, Timing};

/// The annotation on the Secret with the time of the last rotation step (RFC 3339).
pub const STEP_ANNOTATION: &str = "celgate.dev/certificate-step-at";

/// What the controller manages and when it rotates.
#[derive(Debug, Clone)]
pub struct Options {
    /// Namespace and name of the Secret.
    pub namespace: String,
    pub secret: String,
    /// The ValidatingWebhookConfiguration whose webhooks get the CA bundle.
    pub webhook: String,
    /// The MutatingWebhookConfiguration whose webhooks get it too, if there is one.
    pub mutating_webhook: Option<String>,
    /// Names of the serving certificate (the Service's DNS names).
    pub names: Vec<String>,
    pub timing: Timing,
    /// How often each replica checks the Secret and the configuration.
    pub check_every: Duration,
}

impl Options {
    /// The configurations kept, with the phase each is for: the validating one first.
    pub fn configurations(&self) -> Vec<(Phase, String)> {
        let mut out = vec![(Phase::Validating, self.webhook.clone())];
        if let Some(m) = self.mutating_webhook.as_ref().filter(|m| !m.is_empty()) {
            out.push((Phase::Mutating, m.clone()));
        }
        out
    }

    /// Refuses settings under which a rotation could not finish before expiry, or a replica
    /// could miss a step.
    pub fn check(&self) -> Result<(), OptionsError> {
        let t = &self.timing;
        if self.secret.is_empty() || self.namespace.is_empty() || self.webhook.is_empty() {
            return Err(OptionsError::Missing);
        }
        if self.names.is_empty() {
            return Err(OptionsError::NoNames);
        }
        if let Some(n) = self
            .names
            .iter()
            .find(|n| rustls::pki_types::ServerName::try_from(n.as_str()).is_err())
        {
            return Err(OptionsError::BadName(n.clone()));
        }
        if self.check_every.is_zero() {
            return Err(OptionsError::NoCheckInterval);
        }
        if t.overlap < self.check_every * 2 {
            return Err(OptionsError::ShortOverlap {
                overlap: t.overlap,
                check_every: self.check_every,
            });
        }
        // Two waits of `overlap`, each step seen within a check, before the old expires.
        let rotation = t.overlap * 2 + self.check_every * 2;
        if t.renew_before <= rotation {
            return Err(OptionsError::ShortRenewal {
                renew_before: t.renew_before,
                rotation,
            });
        }
        if t.validity <= t.renew_before {
            return Err(OptionsError::ShortValidity {
                validity: t.validity,
                renew_before: t.renew_before,
            });
        }
        Ok(())
    }
}

/// Settings of the certificate controller it refuses to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The Secret, its namespace or the webhook configuration is not named.
    #[error("the certificate controller needs --cert-secret, --cert-namespace (or POD_NAMESPACE) and --cert-webhook")]
    Missing,
    /// No DNS name for the certificate.
    #[error("the certificate controller needs at least one --cert-dns-name")]
    NoNames,
    /// A name that is neither a DNS name nor an IP address.
    #[error("--cert-dns-name {0:?}: not a DNS name or an IP address")]
    BadName(String),
    /// A zero check interval.
    #[error("--cert-check-interval must be positive")]
    NoCheckInterval,
    /// A replica could miss a rotation step.
    #[error("--cert-overlap ({overlap:?}) must be at least twice --cert-check-interval ({check_every:?}), so that every replica sees each rotation step before the next")]
    ShortOverlap {
        overlap: Duration,
        check_every: Duration,
    },
    /// A rotation could not finish before the certificate expires.
    #[error("--cert-renew-before ({renew_before:?}) must exceed a rotation (twice --cert-overlap plus twice --cert-check-interval: {rotation:?})")]
    ShortRenewal {
        renew_before: Duration,
        rotation: Duration,
    },
    /// The certificate would be renewed as soon as it is issued.
    #[error("--cert-validity ({validity:?}) must exceed --cert-renew-before ({renew_before:?})")]
    ShortValidity {
        validity: Duration,
        renew_before: Duration,
    },
}

/// Why a round of the controller failed (it is retried on the next check).
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The API server refused or failed a request.
    #[error("{what}: {source}")]
    Api {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    /// New certificates cannot be issued.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// Other replicas kept changing the Secret or the configuration.
    #[error("gave up after repeated conflicts with other replicas")]
    Conflicts,
}

/// A running controller; dropping it stops the loop.
pub struct Handle {
    /// The pair to serve: `None` until the first round succeeded.
    pub serving: watch::Receiver<Option<Arc<Pair>>>,
    task: JoinHandle<()>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the controller's loop; the first round runs at once.
pub fn start(client: Client, options: Options) -> Handle {
    let (tx, rx) = watch::channel(None);
    let controller = Controller {
        secrets: Api::namespaced(client.clone(), &options.namespace),
        validating: Api::all_with(client.clone(), &webhook_resource(Phase::Validating)),
        mutating: Api::all_with(client, &webhook_resource(Phase::Mutating)),
        options,
        serving: tx,
    };
    Handle {
        serving: rx,
        task: tokio::spawn(controller.run()),
    }
}

/// The kind of the webhook configuration for `phase`.
pub fn webhook_kind(phase: Phase) -> &'static str {
    match phase {
        Phase::Validating => "ValidatingWebhookConfiguration",
        Phase::Mutating => "MutatingWebhookConfiguration",
    }
}

fn webhook_resource(phase: Phase) -> ApiResource {
    let (kind, plural) = match phase {
        Phase::Validating => (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        Phase::Mutating => (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    };
    ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

struct Controller {
    secrets: Api<Secret>,
    /// Untyped: a replace keeps every field, also those newer than k8s-openapi.
    validating: Api<DynamicObject>,
    mutating: Api<DynamicObject>,
    options: Options,
    serving: watch::Sender<Option<Arc<Pair>>>,
}

/// A conditional write lost to another replica.
struct Conflict;

/// Unix milliseconds.
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Controller {
    async fn run(self) {
        loop {
            if let Err(e) = self.round().await {
                tracing::warn!(error = %e, secret = %self.options.secret, "certificate controller: round failed, retrying");
            }
            tokio::time::sleep(self.options.check_every).await;
        }
    }

    /// One round, read again after a conflict.
    async fn round(&self) -> Result<(), CertError> {
        for _ in 0..5 {
            match self.try_round().await? {
                Ok(()) => return Ok(()),
                Err(Conflict) => {
                    tracing::debug!("certificate controller: conflict, reading again");
                }
            }
        }
        Err(CertError::Conflicts)
    }

    async fn try_round(&self) -> Result<Result<(), Conflict>, CertError> {
        let o = &self.options;
        // The configurations first: see the module's comment.
        let mut configurations = Vec::new();
        for (phase, name) in o.configurations() {
            let read = self
                .api(phase)
                .get_opt(&name)
                .await
                .map_err(|source| CertError::Api {
                    what: match phase {
                        Phase::Validating => "reading the ValidatingWebhookConfiguration",
                        Phase::Mutating => "reading the MutatingWebhookConfiguration",
                    },
                    source,
                })?;
            configurations.push((phase, name, read));
        }
        let secret = self
            .secrets
            .get_opt(&o.secret)
            .await
            .map_err(|source| CertError::Api {
                what: "reading the certificate Secret",
                source,
            })?;
        let material = match secret.as_ref().map(read_material).transpose() {
            Ok(m) => m.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, secret = %o.secret, "certificate Secret unreadable: issuing a new certificate");
                Material::default()
            }
        };
        let bundle = material.bundle_pem();
        let injected = configurations
            .iter()
            .all(|(_, _, w)| w.as_ref().is_none_or(|w| holds_bundle(w, &bundle)));
        let now = now();
        let step = pki::plan(&material, &o.names, now, &o.timing, injected);
        let material = match step {
            Step::Wait | Step::Keep => material,
            step => {
                let next = material.advance(step, &o.names, now, &o.timing)?;
                if let Err(c) = self.write(secret, &next, now).await? {
                    return Ok(Err(c));
                }
                tracing::info!(step = ?step, secret = %o.secret, "certificate controller: {}", describe(step));
                next
            }
        };
        if let Some(pair) = &material.serving {
            self.serving.send_if_modified(|cur| {
                if cur.as_deref() == Some(pair) {
                    return false;
                }
                *cur = Some(Arc::new(pair.clone()));
                true
            });
        }
        let bundle = material.bundle_pem();
        for (phase, name, read) in configurations {
            let kind = webhook_kind(phase);
            match read {
                None => {
                    tracing::debug!(webhook = %name, kind, "webhook configuration not found: no caBundle to inject");
                }
                Some(w) if !holds_bundle(&w, &bundle) => {
                    if let Err(c) = self.inject(phase, &name, w, &bundle).await? {
                        return Ok(Err(c));
                    }
                    tracing::info!(webhook = %name, kind, cas = material.bundle.len(), "caBundle injected");
                }
                Some(_) => {}
            }
        }
        Ok(Ok(()))
    }

    /// Creates the Secret, or replaces the one read (conditionally on its resourceVersion).
    async fn write(
        &self,
        read: Option<Secret>,
        m: &Material,
        now: i64,
    ) -> Result<Result<(), Conflict>, CertError> {
        let o = &self.options;
        let created = read.is_none();
        let mut secret = read.unwrap_or_else(|| Secret {
            metadata: ObjectMeta {
                name: Some(o.secret.clone()),
                namespace: Some(o.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "celgate".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            ..Secret::default()
        });
        let data = secret.data.get_or_insert_with(BTreeMap::new);
        let mut put = |k: &str, v: Option<&str>| match v {
            Some(v) => {
                data.insert(k.to_string(), ByteString(v.as_bytes().to_vec()));
            }
            None => {
                data.remove(k);
            }
        };
        put("ca.crt", Some(&m.bundle_pem()));
        put("tls.crt", m.serving.as_ref().map(|p| p.cert_pem.as_str()));
        put("tls.key", m.serving.as_ref().map(|p| p.key_pem.as_str()));
        put("next.crt", m.next.as_ref().map(|p| p.cert_pem.as_str()));
        put("next.key", m.next.as_ref().map(|p| p.key_pem.as_str()));
        let at = jiff::Timestamp::from_millisecond(m.step_at.unwrap_or(now))
            .map_or_else(|_| String::new(), |t| t.to_string());
        secret
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(STEP_ANNOTATION.to_string(), at);
        let result = if created {
            self.secrets.create(&PostParams::default(), &secret).await
        } else {
            self.secrets
                .replace(&o.secret, &PostParams::default(), &secret)
                .await
        };
        match result {
            Ok(_) => Ok(Ok(())),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Err(Conflict)),
            Err(source) => Err(CertError::Api {
                what: "writing the certificate Secret",
                source,
            }),
        }
    }

    /// The API of `phase`'s webhook configurations.
    fn api(&self, phase: Phase) -> &Api<DynamicObject> {
        match phase {
            Phase::Validating => &self.validating,
            Phase::Mutating => &self.mutating,
        }
    }

    /// Sets `caBundle` of every webhook of `w` (the `phase` configuration `name`) and
    /// replaces it conditionally.
    async fn inject(
        &self,
        phase: Phase,
        name: &str,
        mut w: DynamicObject,
        bundle: &str,
    ) -> Result<Result<(), Conflict>, CertError> {
        let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
        if let Some(hooks) = w.data.get_mut("webhooks").and_then(Json::as_array_mut) {
            for hook in hooks {
                if let Some(h) = hook.as_object_mut() {
                    let config = h
                        .entry("clientConfig")
                        .or_insert_with(|| Json::Object(Default::default()));
                    if let Some(c) = config.as_object_mut() {
                        c.insert("caBundle".into(), Json::String(encoded.clone()));
                    }
                }
            }
        }
        match self
            .api(phase)
            .replace(name, &PostParams::default(), &w)
            .await
        {
            Ok(_) => Ok(Ok(())),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Err(Conflict)),
            Err(source) => Err(CertError::Api {
                what: match phase {
                    Phase::Validating => "injecting the ValidatingWebhookConfiguration's caBundle",
                    Phase::Mutating => "injecting the MutatingWebhookConfiguration's caBundle",
                },
                source,
            }),
        }
    }
}

fn describe(step: Step) -> &'static str {
    match step {
        Step::Issue => "issued a new CA and serving certificate",
        Step::Stage => "rotation: a new CA joins the bundle, its certificate waits",
        Step::Promote => "rotation: serving the certificate of the new CA",
        Step::Drop => "rotation: the old CA left the bundle",
        Step::Wait | Step::Keep => "no change",
    }
}

/// Whether every webhook of `w` trusts exactly `bundle` (PEM).
fn holds_bundle(w: &DynamicObject, bundle: &str) -> bool {
    let Some(hooks) = w.data.get("webhooks").and_then(Json::as_array) else {
        return true;
    };
    hooks.iter().all(|h| {
        h["clientConfig"]["caBundle"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .is_some_and(|b| b == bundle.as_bytes())
    })
}

/// The material of the Secret.
fn read_material(secret: &Secret) -> Result<Material, PkiError> {
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let text = |k: &'static str| -> Result<Option<String>, PkiError> {
        data.get(k)
            .map(|v| {
                String::from_utf8(v.0.clone()).map_err(|_| PkiError::Invalid {
                    field: k,
                    reason: "not UTF-8 text".into(),
                })
            })
            .transpose()
    };
    let pair = |c, k| -> Result<Option<Pair>, PkiError> {
        Ok(match (text(c)?, text(k)?) {
            (Some(cert_pem), Some(key_pem)) => Some(Pair { cert_pem, key_pem }),
            _ => None,
        })
    };
    let bundle = match data.get("ca.crt") {
        Some(b) => pki::parse_bundle(&b.0)?,
        None => Vec::new(),
    };
    let step_at = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STEP_ANNOTATION))
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_millisecond());
    Ok(Material {
        bundle,
        serving: pair("tls.crt", "tls.key")?,
        next: pair("next.crt", "next.key")?,
        step_at,
    })
}
