//! What the API server serves, asked through discovery: its version (for the CEL
//! environment, `--k8s-version` from the server), the version at which it serves the
//! ValidatingAdmissionPolicy API (`v1`, else `v1beta1`), the version at which it serves the
//! MutatingAdmissionPolicy API if it does (`v1`, else `v1beta1`, else `v1alpha1`: alpha from
//! Kubernetes 1.32, beta and off by default from 1.34, on by default from 1.36), and a kind's
//! resource and scope (a param kind's, by `apiVersion` and `kind`), as client-go's
//! `discovery` client and `restmapper` find them.

use std::time::Duration;

use kube::api::ApiResource;
use kube::Client;

use super::DiscoveryError;
use crate::policy::snapshot::{group_of, Scope};

pub(super) const VAP_GROUP: &str = "admissionregistration.k8s.io";

/// The CEL environment's minor version for an API server that reports `major`.`minor`
/// (minor as `32` or, on some providers, `32+`): its own when celgate knows it, else the
/// nearest it knows, or the newest for a version it cannot read; then with why, to log.
pub fn server_minor(major: &str, minor: &str) -> (u16, Option<String>) {
    use crate::cel::{NEWEST_MINOR, OLDEST_MINOR};
    let digits = minor.trim_end_matches(|c: char| !c.is_ascii_digit());
    match (major, digits.parse::<u16>()) {
        ("1", Ok(m)) if (OLDEST_MINOR..=NEWEST_MINOR).contains(&m) => (m, None),
        ("1", Ok(m)) => {
            let nearest = m.clamp(OLDEST_MINOR, NEWEST_MINOR);
            let why = format!("celgate knows 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR}, not 1.{m}");
            (nearest, Some(why))
        }
        _ => (
            NEWEST_MINOR,
            Some(format!("version {major:?}.{minor:?} is not 1.N")),
        ),
    }
}

/// The API server's `major` and `minor`, and the version as it prints it.
pub(super) async fn api_server_version(
    client: &Client,
) -> Result<(String, String, String), kube::Error> {
    let info = client.apiserver_version().await?;
    Ok((info.major, info.minor, info.git_version))
}

/// Looks a kind up in discovery: its resource and scope, `None` when the group version does
/// not serve it.
pub async fn discover(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Option<(ApiResource, Scope)>, kube::Error> {
    let list = if api_version.contains('/') {
        client.list_api_group_resources(api_version).await
    } else {
        client.list_core_api_resources(api_version).await
    };
    let list = match list {
        Ok(l) => l,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        Err(e) => return Err(e),
    };
    let group = group_of(api_version).to_string();
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    Ok(list
        .resources
        .iter()
        .find(|r| r.kind == kind && !r.name.contains('/'))
        .map(|r| {
            let scope = if r.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
            let resource = ApiResource {
                group,
                version: version.to_string(),
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: r.name.clone(),
            };
            (resource, scope)
        }))
}

/// `v1` when the cluster serves ValidatingAdmissionPolicy at v1, else `v1beta1`.
pub(super) async fn policy_version(client: &Client) -> Result<&'static str, DiscoveryError> {
    for version in ["v1", "v1beta1"] {
        match discover(
            client,
            &format!("{VAP_GROUP}/{version}"),
            "ValidatingAdmissionPolicy",
        )
        .await
        {
            Ok(Some(_)) => return Ok(version),
            Ok(None) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(DiscoveryError::NoPolicyApi)
}

/// The newest version at which the cluster serves MutatingAdmissionPolicy (`v1`, else
/// `v1beta1`, else `v1alpha1`), `None` when it serves none: the API is off on most clusters
/// (alpha and beta are off by default), which is no error.
pub(super) async fn mutating_policy_version(
    client: &Client,
) -> Result<Option<&'static str>, DiscoveryError> {
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let api_version = format!("{VAP_GROUP}/{version}");
        if discover(client, &api_version, "MutatingAdmissionPolicy")
            .await?
            .is_some()
        {
            return Ok(Some(version));
        }
    }
    Ok(None)
}

pub(super) fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Time allowed for one discovery request.
pub(super) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::server_minor;
    use crate::cel::{NEWEST_MINOR, OLDEST_MINOR};

    #[test]
    fn the_api_servers_version_picks_the_environment() {
        assert_eq!(server_minor("1", "32"), (32, None));
        assert_eq!(
            server_minor("1", "30+"),
            (30, None),
            "as EKS and GKE report it"
        );
        let (newer, why) = server_minor("1", "99");
        assert_eq!(newer, NEWEST_MINOR);
        assert!(why.unwrap().contains("not 1.99"));
        assert_eq!(server_minor("1", "20").0, OLDEST_MINOR);
        let (unread, why) = server_minor("", "");
        assert_eq!(unread, NEWEST_MINOR);
        assert!(why.is_some());
    }
}
