//! Loads a folder of Kubernetes objects: every `.yaml`, `.yml` and `.json` file below it,
//! multi-document YAML included, `kind: List` expanded. Errors name the file and the
//! document. Hidden entries (names starting with `.`) are skipped: they are editors' and
//! tools' temporary files, and in a Kubernetes ConfigMap volume the `..data` symlink and the
//! `..<timestamp>` directories behind the visible files, which would otherwise load every
//! object three times.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value as Json;

/// One object and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub file: PathBuf,
    /// 1-based document number in the file.
    pub document: usize,
    pub object: Json,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    pub file: PathBuf,
    /// 1-based; 0 when the file itself could not be read.
    pub document: usize,
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.document == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{} (document {}): {}",
                self.file.display(),
                self.document,
                self.message
            )
        }
    }
}

impl std::error::Error for LoadError {}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b".")
}

fn io_error(file: &Path, e: std::io::Error) -> LoadError {
    LoadError {
        file: file.to_path_buf(),
        document: 0,
        message: e.to_string(),
    }
}

/// The manifest files below `dir`, sorted, so loading is deterministic. Symlinks are followed
/// (a ConfigMap volume's files are symlinks), each directory is walked once, so a symlink
/// loop ends, and hidden entries are skipped.
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    let mut visited = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let real = std::fs::canonicalize(&d).map_err(|e| io_error(&d, e))?;
        if !visited.insert(real) {
            continue;
        }
        let mut entries = std::fs::read_dir(&d)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| io_error(&d, e))?;
        // Sorted, so that a directory reached by two paths is always listed under the same.
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in entries {
            if is_hidden(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if is_manifest(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Parses the documents of one file's text.
pub fn parse_documents(file: &Path, text: &str) -> Result<Vec<Loaded>, LoadError> {
    let err = |document: usize, message: String| LoadError {
        file: file.to_path_buf(),
        document,
        message,
    };
    let mut docs: Vec<Json> = Vec::new();
    let is_json = file.extension().is_some_and(|e| e == "json");
    if is_json {
        docs.push(serde_json::from_str(text).map_err(|e| err(1, format!("invalid JSON: {e}")))?);
    } else {
        for (i, d) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let v = Json::deserialize(d).map_err(|e| err(i + 1, format!("invalid YAML: {e}")))?;
            docs.push(v);
        }
    }
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let document = i + 1;
        match doc {
            Json::Null => {}
            Json::Object(_) if doc["kind"] == "List" => {
                for item in doc["items"].as_array().cloned().unwrap_or_default() {
                    out.push(Loaded {
                        file: file.to_path_buf(),
                        document,
                        object: item,
                    });
                }
            }
            Json::Object(_) => out.push(Loaded {
                file: file.to_path_buf(),
                document,
                object: doc,
            }),
            _ => {
                return Err(err(
                    document,
                    "a document must be a Kubernetes object (a mapping)".into(),
                ))
            }
        }
    }
    Ok(out)
}

/// Every object below `dir`.
pub fn load(dir: &Path) -> Result<Vec<Loaded>, LoadError> {
    let mut out = Vec::new();
    for file in manifest_files(dir)? {
        let text = std::fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
        out.extend(parse_documents(&file, &text)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists() {
        let text = "a: 1\n---\n---\nkind: List\nitems: [{kind: X}, {kind: Y}]\n";
        let docs = parse_documents(Path::new("x.yaml"), text).unwrap();
        let kinds: Vec<_> = docs
            .iter()
            .map(|d| d.object["kind"].as_str().unwrap_or("-").to_string())
            .collect();
        assert_eq!(kinds, ["-", "X", "Y"]);
        assert_eq!(docs[1].document, 3);
    }

    #[test]
    fn errors_name_file_and_document() {
        let e = parse_documents(Path::new("bad.yaml"), "a: 1\n---\n[unclosed\n").unwrap_err();
        assert_eq!(e.document, 2);
        assert!(
            e.to_string()
                .starts_with("bad.yaml (document 2): invalid YAML"),
            "{e}"
        );
        let e = parse_documents(Path::new("bad.yaml"), "- 1\n").unwrap_err();
        assert!(e.message.contains("mapping"));
        assert!(parse_documents(Path::new("bad.json"), "{")
            .unwrap_err()
            .message
            .starts_with("invalid JSON"));
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "celgate-folder-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[cfg(unix)]
    #[test]
    fn configmap_volume_files_are_listed_once_and_symlink_loops_end() {
        use std::os::unix::fs::symlink;
        let d = temp_dir("layout");
        let data = d.join("..2026_11_23_10_00_00.123456789");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("a.yaml"), "kind: X\n").unwrap();
        symlink("..2026_11_23_10_00_00.123456789", d.join("..data")).unwrap();
        symlink("..data/a.yaml", d.join("a.yaml")).unwrap();
        std::fs::write(d.join(".a.yaml.swp.yaml"), "kind: Y\n").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        symlink("..", d.join("sub/loop")).unwrap();
        std::fs::write(d.join("sub/b.yml"), "kind: Z\n").unwrap();
        assert_eq!(
            manifest_files(&d).unwrap(),
            [d.join("a.yaml"), d.join("sub/b.yml")]
        );
    }
}
