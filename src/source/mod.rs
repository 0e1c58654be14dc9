//! Where policies come from: a local folder of manifests (the embedded default), or, in a
//! cluster, the Kubernetes API. Either way the objects end in a
//! [`crate::policy::snapshot::Snapshot`].
//!
//! The folder source ([`folder`], [`read`]) and what both sources share (snapshot assembly,
//! cluster defaults, problems, building a folder for serving) name no Kubernetes client; the
//! cluster source builds on them, never the other way (`tests/source_layers.rs`).

mod assemble;
mod defaults;
mod error;
pub mod folder;
pub mod kube;
pub mod problems;
pub mod read;
mod serving;

pub use assemble::{add_loaded, add_shared, snapshot, snapshot_cached, snapshot_stored, Check};
pub use defaults::add_cluster_defaults;
pub use error::ObjectError;
pub use serving::{build_for_serving, folder_policies, FolderPolicies, Served};
