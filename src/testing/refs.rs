//! The files a suite names (policies, resources, case objects, review files): each relative to
//! the suite's folder, read only if it lies under one of the run's roots (`celgate test
//! --root`; by default the working directory and each PATH given) once every symlink is
//! resolved, and only if it is a regular
//! file of at most `--max-file-bytes` ([`crate::source::read`]). A suite arrives in pull
//! requests: without the root it could name `/etc/...` or `../../secret.yaml` and print it
//! through a param or an error message in CI.

use std::path::{Path, PathBuf};

use crate::source::folder::{self, ListError, LoadError, Loaded};
use crate::source::read::{read_text, ReadError};

/// Why a file a suite names is not read. The suite fails with this text.
#[derive(Debug, thiserror::Error)]
pub(super) enum RefError {
    /// The path cannot be resolved.
    #[error("{}: {source}", path.display())]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file lies outside every root.
    #[error("{shown}: outside the root ({roots}): a suite reads files under --root only (default: the current directory and the paths given)")]
    OutsideRoot { shown: String, roots: String },
    /// The file cannot be read (missing, not a regular file, too large, not UTF-8).
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: ReadError,
    },
    /// A document of the file cannot be parsed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The folder cannot be listed.
    #[error(transparent)]
    List(#[from] ListError),
}

/// Where one suite's references are read from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Refs<'a> {
    /// The suite's folder, which references are relative to.
    dir: &'a Path,
    /// The canonical roots one of which every file read must lie under; none: anywhere (a
    /// library caller that trusts its suites).
    roots: &'a [PathBuf],
    max_bytes: u64,
}

impl<'a> Refs<'a> {
    pub(super) fn new(dir: &'a Path, roots: &'a [PathBuf], max_bytes: u64) -> Refs<'a> {
        Refs {
            dir,
            roots,
            max_bytes,
        }
    }

    /// The path to read for `path`: its canonical form, refused unless it lies under a root
    /// (`shown` names it in the error). Reading the canonical path, not `path`, leaves no
    /// window in which a symlink swapped into `path` after the check leads out of the root.
    fn confined(&self, shown: &str, path: &Path) -> Result<PathBuf, RefError> {
        if self.roots.is_empty() {
            return Ok(path.to_path_buf());
        }
        let real = std::fs::canonicalize(path).map_err(|source| RefError::Resolve {
            path: path.to_path_buf(),
            source,
        })?;
        if self.roots.iter().any(|root| real.starts_with(root)) {
            return Ok(real);
        }
        let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        Err(RefError::OutsideRoot {
            shown: shown.to_string(),
            roots: roots.join(", "),
        })
    }

    /// The text of the file `rel` names, and its path.
    pub(super) fn read(&self, rel: &str) -> Result<(PathBuf, String), RefError> {
        let path = self.dir.join(rel);
        let real = self.confined(rel, &path)?;
        let text = self.read_file(&real, &path)?;
        Ok((path, text))
    }

    /// The text of `real`, errors naming `path` (as the suite or folder named it).
    fn read_file(&self, real: &Path, path: &Path) -> Result<String, RefError> {
        read_text(real, self.max_bytes).map_err(|source| RefError::Read {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Every object of the file or folder (read recursively) `rel` names. In a folder, each
    /// file must lie under the root too (a symlink may lead out), and one that cannot be read
    /// fails the suite, as a file named directly does.
    pub(super) fn load(&self, rel: &str) -> Result<Vec<Loaded>, RefError> {
        let path = self.dir.join(rel);
        let real = self.confined(rel, &path)?;
        if !real.is_dir() {
            let text = self.read_file(&real, &path)?;
            return Ok(folder::parse_documents(&path, &text)?);
        }
        let mut out = Vec::new();
        for file in folder::manifest_files(&path)? {
            let real = self.confined(&file.display().to_string(), &file)?;
            let text = self.read_file(&real, &file)?;
            out.extend(folder::parse_documents(&file, &text)?);
        }
        Ok(out)
    }
}
