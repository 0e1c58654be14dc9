//! The files a suite names (policies, resources, case objects, review files): each relative to
//! the suite's folder, and only a regular file of at most `--max-file-bytes`
//! ([`crate::source::read`]).

use std::path::{Path, PathBuf};

use crate::source::folder::{self, Loaded};
use crate::source::read::read_text;

/// Where one suite's references are read from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Refs<'a> {
    /// The suite's folder, which references are relative to.
    dir: &'a Path,
    max_bytes: u64,
}

impl<'a> Refs<'a> {
    pub(super) fn new(dir: &'a Path, max_bytes: u64) -> Refs<'a> {
        Refs { dir, max_bytes }
    }

    /// The text of the file `rel` names, and its path.
    pub(super) fn read(&self, rel: &str) -> Result<(PathBuf, String), String> {
        let path = self.dir.join(rel);
        let text = self.read_file(&path)?;
        Ok((path, text))
    }

    fn read_file(&self, path: &Path) -> Result<String, String> {
        read_text(path, self.max_bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Every object of the file or folder (read recursively) `rel` names. In a folder, a
    /// file that cannot be read fails the suite, as a file named directly does.
    pub(super) fn load(&self, rel: &str) -> Result<Vec<Loaded>, String> {
        let path = self.dir.join(rel);
        if !path.is_dir() {
            let text = self.read_file(&path)?;
            return folder::parse_documents(&path, &text).map_err(|e| e.to_string());
        }
        let mut out = Vec::new();
        for file in folder::manifest_files(&path).map_err(|e| e.to_string())? {
            let text = self.read_file(&file)?;
            out.extend(folder::parse_documents(&file, &text).map_err(|e| e.to_string())?);
        }
        Ok(out)
    }
}
