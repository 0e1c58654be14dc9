//! How the cluster source behaves ([`KubeOptions`]), and the check of `--param-namespaces`.
//! The defaults follow the API server's own: its policy plugin lists before it admits
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/generic`), and client-go's informers
//! re-list on a resync period (`tools/cache`'s `resyncPeriod`).

use std::collections::BTreeSet;
use std::time::Duration;

use super::{background, lease, reports, ParamNamespaceError};

/// How the cluster source behaves.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// Kubernetes minor version of the CEL environment.
    pub version: u16,
    /// Take the CEL environment's version from the API server's `/version` instead (clamped
    /// to the versions celgate knows); no snapshot is built before it answered. Not with a
    /// [`PolicyFeed`](super::PolicyFeed): its policies may use CEL newer than the API server's.
    pub version_from_server: bool,
    /// Changes arriving within this window make one rebuild.
    pub debounce: Duration,
    /// How long the first snapshot waits for the param kinds named at start.
    pub param_grace: Duration,
    /// How often param kinds the cluster does not serve are looked up again.
    pub recheck: Duration,
    /// The longest wait between tries while the API server does not answer (watches, lists,
    /// discovery): how soon the source follows once it is back.
    pub retry_max: Duration,
    /// Report misconfigured policies and bindings as Kubernetes Events.
    pub events: bool,
    /// With several replicas: the Lease that picks the one reporting Events. `None`: this
    /// replica always reports.
    pub events_lease: Option<lease::LeaseOptions>,
    /// This replica's name in Events (the pod name).
    pub instance: String,
    /// The namespaces in which namespaced param kinds are listed and watched (one watch per
    /// namespace and kind), for RBAC that grants them there only; a param elsewhere counts as
    /// missing. Empty: cluster-wide. Cluster-scoped param kinds are always watched whole.
    pub param_namespaces: Vec<String>,
    /// Write admission results as policy reports (`None`: no reports). With
    /// `events_lease`, only its holder writes.
    pub reports: Option<reports::ReportOptions>,
    /// Scan existing objects in the background (`None`: no scans); they start with
    /// [`KubeSource::start_background`](super::KubeSource::start_background). With
    /// `events_lease`, only its holder scans.
    pub background: Option<background::BackgroundOptions>,
    /// Take policies and bindings from this folder instead of the cluster
    /// (`--source kubernetes --policies DIR`): the caller watches it and hands them over
    /// through a [`PolicyFeed`](super::PolicyFeed)
    /// ([`KubeSource::start_fed`](super::KubeSource::start_fed)); the cluster's own are not
    /// watched. Everything else still comes from the cluster.
    pub policy_folder: Option<crate::source::folder::FolderSource>,
    /// How often every watched resource is listed again in full and compared with its copy
    /// (`None`: never).
    pub resync: Option<Duration>,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            version: crate::cel::NEWEST_MINOR,
            version_from_server: false,
            debounce: Duration::from_millis(200),
            param_grace: Duration::from_secs(10),
            recheck: Duration::from_secs(10),
            retry_max: Duration::from_secs(1),
            events: true,
            events_lease: None,
            instance: String::new(),
            param_namespaces: Vec::new(),
            reports: None,
            background: None,
            policy_folder: None,
            resync: Some(Duration::from_secs(600)),
        }
    }
}

/// Checks `--param-namespaces`: each a namespace name (a DNS-1123 label), sorted and
/// without duplicates.
pub fn param_namespaces(list: &str) -> Result<Vec<String>, ParamNamespaceError> {
    let mut out = BTreeSet::new();
    for name in list.split(',').map(str::trim) {
        let alnum =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let valid = name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && alnum(name.chars().next())
            && alnum(name.chars().last());
        if !valid {
            return Err(ParamNamespaceError {
                name: name.to_string(),
            });
        }
        out.insert(name.to_string());
    }
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::param_namespaces;

    #[test]
    fn param_namespaces_are_namespace_names() {
        assert_eq!(
            param_namespaces("team-b, team-a,team-b").unwrap(),
            ["team-a", "team-b"]
        );
        for bad in ["", "team-a,", "Team", "-a", "a-", "a_b", &"a".repeat(64)] {
            let e = param_namespaces(bad).unwrap_err();
            assert!(
                e.to_string().starts_with("--param-namespaces: "),
                "{bad}: {e}"
            );
        }
        assert!(param_namespaces(&"a".repeat(63)).is_ok());
    }
}
