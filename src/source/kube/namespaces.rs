//! Namespaces the snapshot does not have yet, read with a GET (as the API server falls back
//! from its informer): a namespace created just before a request in it must not read as
//! "not found" while the watch catches up.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use serde_json::Value as Json;

use super::blocking;
use crate::admission::NamespaceLookup;

/// How long a request waits for the namespace.
const TIMEOUT: Duration = Duration::from_secs(1);

pub struct ClusterNamespaces {
    client: Client,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for ClusterNamespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterNamespaces")
    }
}

impl ClusterNamespaces {
    /// Must be called on a tokio runtime, which will send the requests.
    pub fn new(client: Client) -> ClusterNamespaces {
        ClusterNamespaces {
            client,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl NamespaceLookup for ClusterNamespaces {
    fn get(&self, name: &str) -> Option<Json> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let name = name.to_string();
        let got = blocking::call(&self.runtime, TIMEOUT, "namespace lookup", async move {
            api.get_opt(&name).await
        });
        match got {
            Ok(Some(ns)) => {
                let mut json = serde_json::to_value(ns).ok()?;
                json["apiVersion"] = "v1".into();
                json["kind"] = "Namespace".into();
                Some(json)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "namespace lookup failed");
                None
            }
        }
    }
}
