//! The helpers every integration test shares, included with `mod common;`: fresh scratch
//! folders and the repository's paths (here), running the `celgate` binary ([`cli`]),
//! case-folder trials ([`cases`]), id ratchets of recorded suites ([`ratchet`]), the server
//! started in-process with the binary's defaults and clients of it ([`serve`],
//! [`webhook_client`]), checks of `celgate serve`'s flags ([`serve_flags`]) and the review
//! fixtures ([`fixtures`]). The fake API server is its own module (`tests/fake_apiserver`),
//! included only by the tests that talk to a cluster.

// Each test binary uses part of this module.
#![allow(dead_code)]

pub mod cases;
pub mod cli;
pub mod fixtures;
pub mod ratchet;
pub mod serve;
pub mod serve_flags;
pub mod webhook_client;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The repository (the package root).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` (the recorded suites beside the repository), or `$CELGATE_SHARED`.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared"))
}

/// A fresh, empty folder of its own, named after `name`: tests run in parallel (threads of
/// one process, and several test binaries at once) and some call the same helper, so the
/// name also carries the process id and a per-process counter.
pub fn temp_dir(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("celgate-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Makes a FIFO at `path` (a file whose reader blocks until a writer comes).
#[cfg(unix)]
pub fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}
