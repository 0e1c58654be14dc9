//! Reading one manifest file, for the folder source and every offline command: only a regular
//! file is read (a symlink to one is fine: a ConfigMap volume's files are symlinks), at most
//! `--max-file-bytes` of it, and nothing blocks. A FIFO would block the open (and the reload
//! thread with it) until a writer came; `/dev/zero` or `/dev/urandom` would be read into
//! memory without end. The file is opened without blocking and its opened descriptor checked
//! (`fstat`), so that what is checked is what is read, even if the path is swapped between.

use std::io::Read;
use std::path::Path;

/// The default of `--max-file-bytes`: far above any real policy, CRD or test file (the API
/// server refuses objects over 1.5 MiB; a large CRD with its schema is a few hundred KiB), yet
/// small enough that a runaway file cannot exhaust memory.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 << 20;

/// Why a file is not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// It cannot be opened or read (missing, not permitted...).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// It is not a regular file (its kind, e.g. `a FIFO`).
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    /// It holds more than the cap.
    #[error("larger than --max-file-bytes ({limit} bytes)")]
    TooLarge { limit: u64 },
    /// It is not UTF-8 text.
    #[error("stream did not contain valid UTF-8")]
    NotUtf8,
}

impl ReadError {
    /// A file refused for what it is (not a regular file, too large), rather than one that
    /// could not be read: a folder skips it and goes on.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ReadError::NotRegular(_) | ReadError::TooLarge { .. })
    }
}

/// What a file that is not a regular file is, for the message.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// The text of the regular file at `path` (symlinks followed), of at most `max` bytes.
pub fn read_text(path: &Path, max: u64) -> Result<String, ReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Opening a FIFO for reading blocks until a writer opens it; with O_NONBLOCK it returns
    // at once (and the descriptor is refused below). For a regular file the flag changes
    // nothing.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind_of(&meta.file_type())));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge { limit: max });
    }
    read_capped(file, max, meta.len())
}

/// Standard input, of at most `max` bytes (`-` for a file name).
pub fn read_stdin(max: u64) -> Result<String, ReadError> {
    read_capped(std::io::stdin().lock(), max, 0)
}

/// At most `max` bytes of `source` as text; more is [`ReadError::TooLarge`] (a file may grow
/// after it was measured).
fn read_capped(source: impl Read, max: u64, expected: u64) -> Result<String, ReadError> {
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    source.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge { limit: max });
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_up_to_the_cap() {
        let dir = std::env::temp_dir().join(format!("celgate-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.yaml");
        std::fs::write(&file, "kind: X\n").unwrap();
        assert_eq!(read_text(&file, 8).unwrap(), "kind: X\n");
        let e = read_text(&file, 7).unwrap_err();
        assert_eq!(e.to_string(), "larger than --max-file-bytes (7 bytes)");
        assert!(e.is_refusal());
        let e = read_text(&dir, 100).unwrap_err();
        assert!(e.is_refusal(), "{e}");
        #[cfg(unix)]
        {
            let e = read_text(Path::new("/dev/zero"), 100).unwrap_err();
            assert_eq!(e.to_string(), "not a regular file (a character device)");
        }
        let e = read_text(&dir.join("missing.yaml"), 100).unwrap_err();
        assert!(!e.is_refusal(), "{e}");
        std::fs::write(&file, b"\xff").unwrap();
        assert!(matches!(read_text(&file, 8), Err(ReadError::NotUtf8)));
    }
}
