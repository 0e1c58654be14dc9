//! The files a suite names (policies, resources, case objects, review files): each relative to
//! the suite's folder, read only if it lies under one of the run's roots (`celgate test
//! --root`; by default the working directory and each PATH given) once every symlink is
//! resolved, and only if it is a regular
//! file of at most `--max-file-bytes` ([`crate::source::read`]). A suite arrives in pull
//! requests: without the root it could name `/etc/...` or `../../secret.yaml` and print it
//! through a param or an error message in CI.

use std::path::{Path, PathBuf};

use crate::source::folder::{self, Loaded};
use crate::source::read::read_text;

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
    fn confined(&self, shown: &str, path: &Path) -> Result<PathBuf, String> {
        if self.roots.is_empty() {
            return Ok(path.to_path_buf());
        }
        let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if self.roots.iter().any(|root| real.starts_with(root)) {
            return Ok(real);
        }
        let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        Err(format!(
            "{shown}: outside the root ({}): a suite reads files under --root only (default: the current directory and the paths given)",
            roots.join(", ")
        ))
    }

    /// The text of the file `rel` names, and its path.
    pub(super) fn read(&self, rel: &str) -> Result<(PathBuf, String), String> {
        let path = self.dir.join(rel);
        let real = self.confined(rel, &path)?;
        let text = self.read_file(&real, &path)?;
        Ok((path, text))
    }

    /// The text of `real`, errors naming `path` (as the suite or folder named it).
    fn read_file(&self, real: &Path, path: &Path) -> Result<String, String> {
        read_text(real, self.max_bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Every object of the file or folder (read recursively) `rel` names. In a folder, each
    /// file must lie under the root too (a symlink may lead out), and one that cannot be read
    /// fails the suite, as a file named directly does.
    pub(super) fn load(&self, rel: &str) -> Result<Vec<Loaded>, String> {
        let path = self.dir.join(rel);
        let real = self.confined(rel, &path)?;
        if !real.is_dir() {
            let text = self.read_file(&real, &path)?;
            return folder::parse_documents(&path, &text).map_err(|e| e.to_string());
        }
        let mut out = Vec::new();
        for file in folder::manifest_files(&path).map_err(|e| e.to_string())? {
            let real = self.confined(&file.display().to_string(), &file)?;
            let text = self.read_file(&real, &file)?;
            out.extend(folder::parse_documents(&file, &text).map_err(|e| e.to_string())?);
        }
        Ok(out)
    }
}
