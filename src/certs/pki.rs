//! The certificate material of the controller and its rotation plan, without I/O: a CA bundle
//! (what the webhook configuration's `caBundle` trusts), the serving pair, and during a
//! rotation the next serving pair, signed by the newest CA of the bundle; which step comes
//! next ([`plan`]) from that material, the time and whether the bundle is injected; and the
//! step itself ([`Material::advance`]), which issues new certificates with rcgen.
//!
//! Each rotation issues a new CA together with its one serving certificate, and the CA's key
//! is dropped at once: no key that could sign another trusted certificate is ever stored.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::x509;

/// A CA certificate of the bundle.
#[derive(Debug, Clone)]
pub struct Ca {
    pub pem: String,
    der: CertificateDer<'static>,
    not_after: i64,
}

/// A serving certificate and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What the Secret holds.
#[derive(Debug, Clone, Default)]
pub struct Material {
    /// Trusted CAs, oldest first: one, or two while a rotation is under way.
    pub bundle: Vec<Ca>,
    /// The certificate the replicas serve.
    pub serving: Option<Pair>,
    /// The certificate signed by the newest CA, served once the bundle with both CAs is
    /// injected.
    pub next: Option<Pair>,
    /// When the last step was taken (Unix milliseconds); the next waits `overlap` after it.
    pub step_at: Option<i64>,
}

/// Why material cannot be read or issued.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A PEM block or certificate of the Secret cannot be read.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// rcgen cannot issue the certificates (a name that is no DNS name or IP address).
    #[error("cannot issue a certificate: {0}")]
    Issue(String),
}

/// The timing of rotations.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Lifetime of each CA and serving certificate.
    pub validity: Duration,
    /// A rotation starts when the serving certificate (or its CA) expires within this.
    pub renew_before: Duration,
    /// The wait between the steps of a rotation, for every replica and the API server to see
    /// the previous one.
    pub overlap: Duration,
}

/// The next step of the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing usable (first start, a broken or expired Secret): issue a CA and a serving
    /// certificate at once.
    Issue,
    /// The serving certificate expires within `renew_before`: add a new CA to the bundle and
    /// keep the serving certificate it signed as `next`.
    Stage,
    /// The bundle with both CAs is injected and `overlap` has passed: serve `next`.
    Promote,
    /// `overlap` has passed since the promotion: drop the CAs that did not sign the serving
    /// certificate.
    Drop,
    /// Wait for `overlap`, or for the bundle to be injected.
    Wait,
    /// Nothing to do.
    Keep,
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The next step for `m` at `now` (Unix milliseconds: the waits between steps may be short,
/// certificate times are whole seconds), for a certificate valid for `names`; `injected`: the
/// webhook configuration trusts exactly `m`'s bundle (or does not exist).
pub fn plan(m: &Material, names: &[String], now: i64, t: &Timing, injected: bool) -> Step {
    let Some(serving) = &m.serving else {
        return Step::Issue;
    };
    if !verifies(serving, &m.bundle, names, now) {
        return Step::Issue;
    }
    let waited = m
        .step_at
        .is_none_or(|at| now.saturating_sub(at) >= millis(t.overlap));
    if let Some(next) = &m.next {
        // A next pair that the newest CA did not sign (an edited Secret) is staged again.
        let newest = m.bundle.last().cloned().into_iter().collect::<Vec<_>>();
        if !verifies(next, &newest, names, now) {
            return Step::Stage;
        }
        return if waited && injected {
            Step::Promote
        } else {
            Step::Wait
        };
    }
    if m.bundle.len() > 1 {
        return if waited { Step::Drop } else { Step::Wait };
    }
    if !verifies(
        serving,
        &m.bundle,
        names,
        now.saturating_add(millis(t.renew_before)),
    ) {
        return Step::Stage;
    }
    Step::Keep
}

/// Whether `pair` is a certificate for every one of `names`, its key matches, and it chains
/// to a CA of `cas`, all valid at `at` (Unix milliseconds).
fn verifies(pair: &Pair, cas: &[Ca], names: &[String], at: i64) -> bool {
    let at = at.div_euclid(1000);
    let Ok(key) = pair_key(pair) else {
        return false;
    };
    let Some(leaf) = key.cert.first() else {
        return false;
    };
    // webpki does not check a trust anchor's own validity; Go's verifier (the API server's)
    // does, so an expired CA is left out here.
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas.iter().filter(|c| c.not_after > at) {
        if roots.add(ca.der.clone()).is_err() {
            return false;
        }
    }
    if roots.is_empty() || names.is_empty() {
        return false;
    }
    let Ok(verifier) =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build()
    else {
        return false;
    };
    let Ok(at) = u64::try_from(at) else {
        return false;
    };
    let at = UnixTime::since_unix_epoch(Duration::from_secs(at));
    names.iter().all(|name| {
        ServerName::try_from(name.as_str()).is_ok_and(|server_name| {
            verifier
                .verify_server_cert(leaf, &[], &server_name, &[], at)
                .is_ok()
        })
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The signing identity of `pair` (rustls checks that the key matches the certificate).
pub fn pair_key(pair: &Pair) -> Result<rustls::sign::CertifiedKey, PkiError> {
    let invalid = |field, e: &dyn std::fmt::Display| PkiError::Invalid {
        field,
        reason: e.to_string(),
    };
    let chain = CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("tls.crt", &e))?;
    if chain.is_empty() {
        return Err(invalid("tls.crt", &"no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes())
        .map_err(|e| invalid("tls.key", &e))?;
    rustls::sign::CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| invalid("tls.key", &e))
}

/// Reads a bundle of PEM CA certificates.
pub fn parse_bundle(pem: &[u8]) -> Result<Vec<Ca>, PkiError> {
    CertificateDer::pem_slice_iter(pem)
        .map(|c| {
            let der = c.map_err(|e| PkiError::Invalid {
                field: "ca.crt",
                reason: e.to_string(),
            })?;
            ca_from_der(der)
        })
        .collect()
}

fn ca_from_der(der: CertificateDer<'static>) -> Result<Ca, PkiError> {
    let not_after = x509::validity(der.as_ref())
        .ok_or_else(|| PkiError::Invalid {
            field: "ca.crt",
            reason: "not an X.509 certificate".into(),
        })?
        .not_after;
    Ok(Ca {
        pem: pem_of(der.as_ref()),
        der,
        not_after,
    })
}

/// The PEM text of a DER certificate.
fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

impl Material {
    /// The bundle as PEM, what the `caBundle` fields hold.
    pub fn bundle_pem(&self) -> String {
        self.bundle.iter().map(|c| c.pem.as_str()).collect()
    }

    /// The material after `step` at `now`, issuing what the step needs.
    pub fn advance(
        mut self,
        step: Step,
        names: &[String],
        now: i64,
        t: &Timing,
    ) -> Result<Material, PkiError> {
        match step {
            Step::Issue => {
                let (ca, pair) = issue(names, now, t.validity)?;
                self = Material {
                    bundle: vec![ca],
                    serving: Some(pair),
                    next: None,
                    step_at: Some(now),
                };
            }
            Step::Stage => {
                let (ca, pair) = issue(names, now, t.validity)?;
                // Keep only the CAs the serving certificate chains to (one, normally).
                if let Some(serving) = &self.serving {
                    self.bundle
                        .retain(|c| verifies(serving, std::slice::from_ref(c), names, now));
                }
                self.bundle.push(ca);
                self.next = Some(pair);
                self.step_at = Some(now);
            }
            Step::Promote => {
                if let Some(next) = self.next.take() {
                    self.serving = Some(next);
                }
                self.step_at = Some(now);
            }
            Step::Drop => {
                if let Some(serving) = &self.serving {
                    self.bundle
                        .retain(|c| verifies(serving, std::slice::from_ref(c), names, now));
                }
                self.step_at = Some(now);
            }
            Step::Wait | Step::Keep => {}
        }
        Ok(self)
    }
}

/// A new CA and a serving certificate it signed, both valid from an hour before `now` (Unix
/// milliseconds; for clocks behind ours) until `now + validity`, in whole seconds.
pub fn issue(names: &[String], now: i64, validity: Duration) -> Result<(Ca, Pair), PkiError> {
    let stamp = now;
    let now = now.div_euclid(1000);
    let e = |e: rcgen::Error| PkiError::Issue(e.to_string());
    let at = |s: i64| {
        time::OffsetDateTime::from_unix_timestamp(s)
            .map_err(|_| PkiError::Issue(format!("time {s} out of range")))
    };
    let not_before = at(now.saturating_sub(3600))?;
    let not_after = at(now.saturating_add(secs(validity)))?;
    let ca_key = rcgen::KeyPair::generate().map_err(e)?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    // A name per CA, as client-go's self-signed CAs have: during a rotation the bundle holds
    // two CAs that clients must tell apart.
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("celgate-ca@{stamp}"));
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(e)?;
    let ca_der = ca_cert.der().clone();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().map_err(e)?;
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(e)?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        names.first().map_or("celgate", String::as_str),
    );
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params.signed_by(&key, &issuer).map_err(e)?;
    let ca = Ca {
        pem: ca_cert.pem(),
        der: ca_der,
        not_after: now.saturating_add(secs(validity)),
    };
    Ok((
        ca,
        Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const S: i64 = 1000;

    fn names() -> Vec<String> {
        vec!["celgate.ns.svc".into(), "127.0.0.1".into()]
    }

    fn timing() -> Timing {
        Timing {
            validity: Duration::from_secs(1000),
            renew_before: Duration::from_secs(300),
            overlap: Duration::from_secs(60),
        }
    }

    fn issued(now: i64) -> Material {
        Material::default()
            .advance(Step::Issue, &names(), now, &timing())
            .unwrap()
    }

    #[test]
    fn nothing_or_broken_material_is_issued_anew() {
        let t = timing();
        assert_eq!(
            plan(&Material::default(), &names(), NOW, &t, true),
            Step::Issue
        );
        let m = issued(NOW);
        assert_eq!(m.bundle.len(), 1);
        assert_eq!(plan(&m, &names(), NOW, &t, true), Step::Keep);
        // For other names, the certificate does not do.
        let other = vec!["other.ns.svc".to_string()];
        assert_eq!(plan(&m, &other, NOW, &t, true), Step::Issue);
        // Expired: no overlap is possible any more.
        assert_eq!(plan(&m, &names(), NOW + 1001 * S, &t, true), Step::Issue);
        // A key of another certificate.
        let mut mixed = m.clone();
        mixed.serving.as_mut().unwrap().key_pem = issued(NOW).serving.unwrap().key_pem;
        assert_eq!(plan(&mixed, &names(), NOW, &t, true), Step::Issue);
        // A CA that did not sign it.
        let mut foreign = m.clone();
        foreign.bundle = issued(NOW).bundle;
        assert_eq!(plan(&foreign, &names(), NOW, &t, true), Step::Issue);
    }

    #[test]
    fn a_rotation_overlaps_both_cas_and_waits_for_injection() {
        let t = timing();
        let n = names();
        let m = issued(NOW);
        let old_serving = m.serving.clone();
        let renew_at = NOW + (1000 - 300 + 1) * S;
        assert_eq!(plan(&m, &n, renew_at - 2 * S, &t, true), Step::Keep);
        assert_eq!(plan(&m, &n, renew_at, &t, true), Step::Stage);
        let staged = m.advance(Step::Stage, &n, renew_at, &t).unwrap();
        assert_eq!(staged.bundle.len(), 2, "old and new CA trusted");
        assert_eq!(
            staged.serving, old_serving,
            "still serving the old certificate"
        );
        assert!(staged.next.is_some());
        // Too early, or the bundle is not in the webhook configuration yet.
        assert_eq!(plan(&staged, &n, renew_at + 10 * S, &t, true), Step::Wait);
        assert_eq!(plan(&staged, &n, renew_at + 60 * S, &t, false), Step::Wait);
        assert_eq!(
            plan(&staged, &n, renew_at + 60 * S, &t, true),
            Step::Promote
        );
        let promoted = staged
            .clone()
            .advance(Step::Promote, &n, renew_at + 60 * S, &t)
            .unwrap();
        assert_eq!(promoted.serving, staged.next);
        assert_eq!(
            promoted.bundle.len(),
            2,
            "both CAs trusted after the switch"
        );
        assert_eq!(
            plan(&promoted, &n, renew_at + 100 * S, &t, true),
            Step::Wait
        );
        assert_eq!(
            plan(&promoted, &n, renew_at + 120 * S, &t, true),
            Step::Drop
        );
        let dropped = promoted
            .clone()
            .advance(Step::Drop, &n, renew_at + 120 * S, &t)
            .unwrap();
        assert_eq!(dropped.bundle.len(), 1);
        assert_eq!(
            dropped.bundle[0].pem, promoted.bundle[1].pem,
            "the new CA stays"
        );
        assert_eq!(plan(&dropped, &n, renew_at + 120 * S, &t, true), Step::Keep);
    }

    #[test]
    fn a_next_certificate_not_from_the_newest_ca_is_staged_again() {
        let t = timing();
        let n = names();
        let renew_at = NOW + 701 * S;
        let mut staged = issued(NOW).advance(Step::Stage, &n, renew_at, &t).unwrap();
        staged.next = issued(NOW).serving;
        assert_eq!(plan(&staged, &n, renew_at + 60 * S, &t, true), Step::Stage);
        let again = staged
            .advance(Step::Stage, &n, renew_at + 60 * S, &t)
            .unwrap();
        assert_eq!(
            again.bundle.len(),
            2,
            "the stale new CA is replaced, not added"
        );
        assert_eq!(
            plan(&again, &n, renew_at + 120 * S, &t, true),
            Step::Promote
        );
    }

    #[test]
    fn an_expired_ca_does_not_vouch_for_its_certificate() {
        // webpki ignores a trust anchor's validity; the API server does not.
        let t = timing();
        let n = names();
        let mut m = issued(NOW);
        m.bundle[0].not_after = NOW / S + 100;
        assert_eq!(plan(&m, &n, NOW, &t, true), Step::Stage);
        assert_eq!(plan(&m, &n, NOW + 101 * S, &t, true), Step::Issue);
    }

    #[test]
    fn the_bundle_reads_back_what_was_issued() {
        let m = issued(NOW);
        let pem = m.bundle_pem();
        let back = parse_bundle(pem.as_bytes()).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].pem, pem);
        assert_eq!(back[0].not_after, NOW / S + 1000);
        assert!(
            parse_bundle(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .is_err()
        );
    }
}
