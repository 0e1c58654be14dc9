//! The composition of `celgate scan`: a policy folder and a folder of objects read from disk
//! (with what every cluster has), one snapshot, and [`crate::scan::Scanner`] over each object.
//! Here rather than in [`crate::scan`], which the cluster's background scans use too and which
//! therefore must not depend on the folder source.

use serde_json::Value as Json;

use std::path::PathBuf;

use crate::policy::snapshot::Snapshot;
use crate::scan::{expand_lists, ObjectResults, Scanner};
use crate::source::folder::{ListError, LoadError, Loaded, Skipped};
use crate::source::read::ReadError;

/// Why `celgate scan` cannot scan: its messages name the file (and document) concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// The policy folder or a file of objects cannot be loaded or parsed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The folder of objects cannot be listed.
    #[error(transparent)]
    List(#[from] ListError),
    /// The file of objects given cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: ReadError,
    },
    /// An object cannot be evaluated (not an object the API server would take).
    #[error("{}: document {document}: {source}", file.display())]
    Object {
        file: PathBuf,
        document: usize,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What `celgate scan` found.
pub struct Scanned {
    pub snapshot: Snapshot,
    pub objects: Vec<ObjectResults>,
    /// Files of the folders skipped (not regular files, over `--max-file-bytes`), to warn of.
    pub skipped: Vec<Skipped>,
    /// With `--field-validation warn`: the policy folder's unknown and duplicate fields.
    pub field_warnings: Vec<String>,
}

impl Scanned {
    /// Some object would be refused today.
    pub fn denied(&self) -> bool {
        self.objects.iter().any(|o| o.denied)
    }
}

/// Reads the manifests of `path` (a file, or a folder read recursively as `celgate eval`
/// reads one, hidden entries skipped), `List`s expanded, with where each came from. In a
/// folder, a file that is not a regular file or is over `max_bytes` is skipped (into
/// `skipped`); given as `path`, it is an error.
pub fn read_objects(
    path: &std::path::Path,
    max_bytes: u64,
    skipped: &mut Vec<Skipped>,
) -> Result<Vec<Loaded>, ScanError> {
    use crate::source::folder::{manifest_files, parse_documents, read_listed};
    let mut texts = Vec::new();
    if path.is_dir() {
        for file in manifest_files(path)? {
            if let Some(text) = read_listed(&file, max_bytes, skipped)? {
                texts.push((file, text));
            }
        }
    } else {
        let text =
            crate::source::read::read_text(path, max_bytes).map_err(|source| ScanError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        texts.push((path.to_path_buf(), text));
    }
    let mut out = Vec::new();
    for (file, text) in texts {
        for loaded in parse_documents(&file, &text)? {
            for object in expand_lists(loaded.object) {
                out.push(Loaded {
                    file: loaded.file.clone(),
                    document: loaded.document,
                    field_errors: Vec::new(),
                    object,
                });
            }
        }
    }
    Ok(out)
}

/// `celgate scan`: the policies of the folder `policies` (validated as `kubectl apply`
/// would, with what every cluster has, as `celgate eval` reads them) against each object of
/// `objects`. Namespaces among the objects that the policy folder does not define join the
/// snapshot (for namespaceSelectors); CRDs in either tell custom resources' plurals and
/// scopes. An error names the file and document of what cannot be read or scanned.
pub fn scan_folder(
    policies: &std::path::Path,
    objects: &std::path::Path,
    version: u16,
    max_bytes: u64,
    field_validation: crate::source::folder::FieldValidation,
) -> Result<Scanned, ScanError> {
    let crate::source::folder::Load {
        objects: mut loaded,
        mut skipped,
        ..
    } = crate::source::folder::load(policies, max_bytes)?;
    let field_warnings = field_validation.apply(&mut loaded);
    let objects = read_objects(objects, max_bytes, &mut skipped)?;
    let mut defined: std::collections::BTreeSet<String> = loaded
        .iter()
        .filter(|o| o.object["kind"] == "Namespace")
        .filter_map(|o| o.object["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    for o in &objects {
        let name = o.object["metadata"]["name"].as_str().unwrap_or_default();
        if o.object["kind"] == "Namespace"
            && o.object["apiVersion"] == "v1"
            && defined.insert(name.to_string())
        {
            loaded.push(o.clone());
        }
    }
    crate::source::add_cluster_defaults(&mut loaded);
    let crds: Vec<Json> = loaded
        .iter()
        .map(|o| &o.object)
        .chain(objects.iter().map(|o| &o.object))
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .cloned()
        .collect();
    let snapshot = crate::source::snapshot(loaded, version, true)?;
    let scanner = Scanner::new(&snapshot, crds);
    let mut results = Vec::with_capacity(objects.len());
    for o in objects {
        let scanned = scanner.scan(o.object).map_err(|e| ScanError::Object {
            file: o.file.clone(),
            document: o.document,
            source: e.into(),
        })?;
        results.push(scanned);
    }
    Ok(Scanned {
        snapshot,
        objects: results,
        skipped,
        field_warnings,
    })
}
