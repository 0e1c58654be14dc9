//! Reading the files and folders the offline commands name: a folder of manifests read
//! recursively (each file it skips warned of on standard error), one file's documents (`-`:
//! standard input), one JSON or YAML document. A file named explicitly that is not a regular
//! file or is over `--max-file-bytes` is refused.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use celgate::source::folder::{self, DocError, LoadError, Loaded, Skipped};
use celgate::source::read::{self, ReadError};

/// Why a file or folder named on the command line gives no documents.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A folder cannot be listed, or one of its files is malformed.
    #[error(transparent)]
    Folder(LoadError),
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: ReadError },
    /// A file's documents are malformed (the error names the file and document).
    #[error(transparent)]
    Documents(LoadError),
    #[error("{}: {source}", path.display())]
    Document { path: PathBuf, source: DocError },
}

/// Warns on standard error of each file a folder's load skipped.
pub fn warn_skipped(skipped: &[Skipped]) {
    for s in skipped {
        eprintln!("warning: {s}");
    }
}

/// Every object of a folder (read recursively), warning of each file skipped (not a regular
/// file, over `max_bytes`).
pub fn load_folder(dir: &Path, max_bytes: u64) -> Result<Vec<Loaded>, FileError> {
    let load = folder::load(dir, max_bytes).map_err(FileError::Folder)?;
    warn_skipped(&load.skipped);
    Ok(load.objects)
}

/// A folder's objects as [`load_folder`] reads them, or one file's as [`read_loaded`] does.
pub fn load_path(path: &Path, max_bytes: u64) -> Result<Vec<Loaded>, FileError> {
    if path.is_dir() {
        load_folder(path, max_bytes)
    } else {
        read_loaded(path, max_bytes)
    }
}

/// The documents of one file (`-`: standard input), multi-document YAML or JSON; a `List`
/// gives its items. A file that is not a regular file or is over `max_bytes` is refused.
pub fn read_loaded(path: &Path, max_bytes: u64) -> Result<Vec<Loaded>, FileError> {
    let text = if path == Path::new("-") {
        read::read_stdin(max_bytes)
    } else {
        read::read_text(path, max_bytes)
    }
    .map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    folder::parse_documents(path, &text).map_err(FileError::Documents)
}

/// The documents of every file, in order.
pub fn read_all(paths: &[PathBuf], max_bytes: u64) -> Result<Vec<Json>, FileError> {
    let mut out = Vec::new();
    for p in paths {
        out.extend(read_loaded(p, max_bytes)?.into_iter().map(|d| d.object));
    }
    Ok(out)
}

/// Reads one JSON or YAML document (JSON errors for JSON text, with their position).
pub fn read_document(path: &Path, max_bytes: u64) -> Result<Json, FileError> {
    let text = read::read_text(path, max_bytes).map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    folder::parse_document(path, &text).map_err(|source| FileError::Document {
        path: path.to_path_buf(),
        source,
    })
}
