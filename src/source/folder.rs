//! Loads a folder of Kubernetes objects: every `.yaml`, `.yml` and `.json` file below it,
//! multi-document YAML included, `kind: List` expanded. Errors name the file and the
//! document. Hidden entries (names starting with `.`) are skipped: they are editors' and
//! tools' temporary files, and in a Kubernetes ConfigMap volume the `..data` symlink and the
//! `..<timestamp>` directories behind the visible files, which would otherwise load every
//! object three times.
//!
//! Files are read through [`super::read`]: a manifest that is not a regular file (a FIFO, a
//! device) or is larger than `--max-file-bytes` is skipped, and the load says which
//! ([`Load::skipped`]).
//!
//! For `celgate serve` it also owns change detection: a [`Fingerprint`] of the files without
//! reading them, a [`Settle`] tracker that asks for a load only once the folder has been quiet
//! for a while, and [`load_settled`], which refuses a read during which the folder changed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use serde_json::Value as Json;

use super::read::{read_text, ReadError};
use crate::cel::deep_value::{self, DeepValue};
use crate::model::strict::{self, Ordered};

/// How long the folder must be unchanged before a change is loaded (`--reload-settle`).
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(2);

/// A policy folder as `celgate serve` watches it.
#[derive(Debug, Clone)]
pub struct FolderSource {
    pub dir: PathBuf,
    /// A change is loaded once no file changed for this long (`--reload-settle`): a file
    /// rewritten in place is not read half-written.
    pub settle: Duration,
    /// Accept a folder in which no policy is bound (`--allow-empty-policies`); without it such
    /// a folder is refused: at start the service stays unready, later the last good snapshot
    /// stays.
    pub allow_empty: bool,
    /// A request in a namespace the folder does not define is refused as the API server
    /// refuses one in a namespace that does not exist (`namespaces "x" not found`), as
    /// `celgate eval` does (`--strict-namespaces`). Without it the namespace is served as a
    /// bare one, named and labelled `kubernetes.io/metadata.name` as every namespace is: a
    /// folder seldom lists every namespace of the cluster it guards.
    pub strict_namespaces: bool,
    /// Largest manifest file read (`--max-file-bytes`); a larger one is skipped and reported.
    pub max_file_bytes: u64,
    /// Unknown and duplicate fields (`--field-validation`): `Strict` refuses the load (the
    /// last good snapshot stays), `Warn` logs each, `Ignore` drops them.
    pub field_validation: FieldValidation,
}

impl FolderSource {
    /// `dir` with the default settle interval, empty folders refused, namespaces the folder
    /// does not define served bare.
    pub fn new(dir: impl Into<PathBuf>) -> FolderSource {
        FolderSource {
            dir: dir.into(),
            settle: DEFAULT_SETTLE,
            allow_empty: false,
            strict_namespaces: false,
            max_file_bytes: super::read::DEFAULT_MAX_FILE_BYTES,
            field_validation: FieldValidation::Strict,
        }
    }
}

pub use crate::admission::bare::{BareNamespaces, BARE_KEPT};

/// One object and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub file: PathBuf,
    /// 1-based document number in the file.
    pub document: usize,
    pub object: Json,
    /// What strict field validation finds in the object as the file spells it
    /// (`unknown field "spec.x"`, `duplicate field "metadata.name"`; see
    /// [`crate::model::strict`]), for the kinds whose fields are known; empty for an object
    /// that did not come from a file. A snapshot refuses an object with any
    /// ([`FieldValidation`] turns them into warnings or drops them first).
    pub field_errors: Vec<String>,
}

/// What the commands do with unknown and duplicate fields (`--field-validation`, as
/// `kubectl apply --validate`): refuse the object (`strict`, kubectl's default), warn and
/// load it (`warn`), or load it silently (`ignore`), the API server's `fieldValidation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    #[default]
    Strict,
    Warn,
    Ignore,
}

/// A `--field-validation` value that is none of `strict`, `warn`, `ignore`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not strict, warn or ignore")]
pub struct BadFieldValidation(String);

impl std::str::FromStr for FieldValidation {
    type Err = BadFieldValidation;

    /// kubectl's `--validate` values (and its `true`/`false`, strict and ignore).
    fn from_str(s: &str) -> Result<FieldValidation, BadFieldValidation> {
        match s {
            "strict" | "true" => Ok(FieldValidation::Strict),
            "warn" => Ok(FieldValidation::Warn),
            "ignore" | "false" => Ok(FieldValidation::Ignore),
            other => Err(BadFieldValidation(other.to_string())),
        }
    }
}

impl std::fmt::Display for FieldValidation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FieldValidation::Strict => "strict",
            FieldValidation::Warn => "warn",
            FieldValidation::Ignore => "ignore",
        })
    }
}

impl FieldValidation {
    /// Applies the level to loaded objects: `strict` leaves their field errors (a snapshot
    /// refuses them); `warn` takes them out and returns them as warnings naming the file and
    /// document; `ignore` drops them.
    pub fn apply(self, objects: &mut [Loaded]) -> Vec<String> {
        let mut warnings = Vec::new();
        if self == FieldValidation::Strict {
            return warnings;
        }
        for o in objects {
            for e in std::mem::take(&mut o.field_errors) {
                if self == FieldValidation::Warn {
                    warnings.push(format!(
                        "{} (document {}): {e}",
                        o.file.display(),
                        o.document
                    ));
                }
            }
        }
        warnings
    }
}

/// Why a folder's objects cannot be loaded. Each names the file, and the document (1-based)
/// when one document is at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A directory below the folder cannot be resolved or listed.
    #[error(transparent)]
    List(#[from] ListError),
    /// The folder could not be listed when the state now being loaded was taken (the
    /// listing error names the path).
    #[error("{source}")]
    Unlisted {
        dir: PathBuf,
        #[source]
        source: ScanError,
    },
    /// A manifest file cannot be read.
    #[error("{}: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: ReadError,
    },
    /// A `.json` file is not JSON (its one document), or a document of a file that looks
    /// like JSON is malformed.
    #[error("{} (document {document}): invalid JSON: {source}", file.display())]
    Json {
        file: PathBuf,
        document: usize,
        #[source]
        source: serde_json::Error,
    },
    /// A YAML document does not parse.
    #[error("{} (document {document}): invalid YAML: {source}", file.display())]
    Yaml {
        file: PathBuf,
        document: usize,
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A document is a scalar or a sequence, not an object.
    #[error(
        "{} (document {document}): a document must be a Kubernetes object (a mapping)",
        file.display()
    )]
    NotAnObject { file: PathBuf, document: usize },
    /// An object that claims to be a policy or binding does not read as one or, when
    /// validating strictly, fails validation.
    #[error("{} (document {document}): {source}", file.display())]
    Object {
        file: PathBuf,
        document: usize,
        #[source]
        source: super::error::ObjectError,
    },
}

impl LoadError {
    /// The file (or directory) at fault.
    pub fn file(&self) -> &Path {
        match self {
            LoadError::List(e) => &e.path,
            LoadError::Unlisted { dir, .. } => dir,
            LoadError::Read { file, .. }
            | LoadError::Json { file, .. }
            | LoadError::Yaml { file, .. }
            | LoadError::NotAnObject { file, .. }
            | LoadError::Object { file, .. } => file,
        }
    }
}

/// A directory below the folder that cannot be resolved or listed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct ListError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A failure seen while taking a [`Fingerprint`]. Comparable (the I/O error's kind and text,
/// as `io::Error` is not), so that a failure that persists is no change of the folder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// A manifest file's metadata cannot be read (it vanished, or is not readable).
    #[error("{text}")]
    Metadata {
        kind: std::io::ErrorKind,
        text: String,
    },
    /// The folder cannot be listed ([`ListError`]).
    #[error("{}: {text}", path.display())]
    Listing {
        path: PathBuf,
        kind: std::io::ErrorKind,
        text: String,
    },
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b".")
}

fn list_error(path: &Path, source: std::io::Error) -> ListError {
    ListError {
        path: path.to_path_buf(),
        source,
    }
}

fn read_error(file: &Path, source: ReadError) -> LoadError {
    LoadError::Read {
        file: file.to_path_buf(),
        source,
    }
}

/// A manifest file left out of a load: not a regular file, or over the size cap.
#[derive(Debug, thiserror::Error)]
#[error("{}: skipped: {reason}", file.display())]
pub struct Skipped {
    pub file: PathBuf,
    #[source]
    pub reason: ReadError,
}

/// What a load of a folder found.
#[derive(Debug, Default)]
pub struct Load {
    /// Every object of the files read, in file order.
    pub objects: Vec<Loaded>,
    /// The manifest files read (each may hold no object).
    pub files: Vec<PathBuf>,
    /// The manifest files left out, and why.
    pub skipped: Vec<Skipped>,
}

/// Reads one manifest file of a folder: `Ok(None)` when it is skipped (into `skipped`).
pub fn read_listed(
    file: &Path,
    max_bytes: u64,
    skipped: &mut Vec<Skipped>,
) -> Result<Option<String>, LoadError> {
    match read_text(file, max_bytes) {
        Ok(text) => Ok(Some(text)),
        Err(reason) if reason.is_refusal() => {
            skipped.push(Skipped {
                file: file.to_path_buf(),
                reason,
            });
            Ok(None)
        }
        Err(e) => Err(read_error(file, e)),
    }
}

/// The manifest files below `dir`, sorted, so loading is deterministic. Symlinks are followed
/// (a ConfigMap volume's files are symlinks), each directory is walked once, so a symlink
/// loop ends, and hidden entries are skipped.
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, ListError> {
    let mut out = Vec::new();
    let mut visited = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let real = std::fs::canonicalize(&d).map_err(|e| list_error(&d, e))?;
        if !visited.insert(real) {
            continue;
        }
        let mut entries = std::fs::read_dir(&d)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| list_error(&d, e))?;
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

/// Whether text is meant as JSON: its first character other than white space (or a byte
/// order mark) opens an object or an array. YAML written by hand does not start so, except
/// for a flow mapping, which is tried as YAML when it is not JSON.
pub fn looks_like_json(text: &str) -> bool {
    let start = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    matches!(start.as_bytes().first(), Some(b'{' | b'['))
}

fn is_json_file(file: &Path) -> bool {
    file.extension().is_some_and(|e| e == "json")
}

/// Why one document given as JSON or YAML does not parse.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// It is JSON (a `.json` file, or text that looks like JSON) and malformed; the error
    /// has the line and column.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// It is YAML and malformed.
    #[error("invalid YAML: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
}

/// One document given as JSON or YAML (`file` is its name, `-` or another for standard
/// input): a `.json` file is JSON; other text is JSON when it [`looks_like_json`] (or YAML if
/// it is valid YAML only), else YAML. A malformed document that is, or looks like, JSON is
/// reported by the JSON parser: the YAML parser's error on JSON text points elsewhere.
pub fn parse_document(file: &Path, text: &str) -> Result<Json, DocError> {
    if is_json_file(file) || looks_like_json(text) {
        match deep_value::from_str(text) {
            Ok(v) => Ok(v),
            Err(e) if is_json_file(file) => Err(DocError::Json(e)),
            Err(e) => yaml_document(text).map_err(|_| DocError::Json(e)),
        }
    } else {
        yaml_document(text).map_err(DocError::Yaml)
    }
}

/// One YAML document (YAML keeps its parser's limit of 128 levels of nesting).
fn yaml_document(text: &str) -> Result<Json, serde_yaml_ng::Error> {
    serde_yaml_ng::from_str::<DeepValue>(text).map(|v| v.0)
}

/// JSON documents, one after another, optionally separated by YAML's `---` lines (JSON
/// written into a YAML stream). The separators are blanked out rather than cut, so that an
/// error's line and column are those of `text`. An error comes with its document number.
fn json_documents(text: &str) -> Result<Vec<Json>, (usize, serde_json::Error)> {
    let blanked = blank_separators(text);
    let mut docs = Vec::new();
    for value in deep_value::stream(&blanked) {
        docs.push(value.map_err(|e| (docs.len() + 1, e))?);
    }
    Ok(docs)
}

/// `text` with YAML's `---` separator lines blanked out (their line breaks kept).
fn blank_separators(text: &str) -> String {
    let mut blanked = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            blanked.extend(line.chars().map(|c| if c == '\n' { c } else { ' ' }));
        } else {
            blanked.push_str(line);
        }
    }
    blanked
}

/// The documents of `text` read again as [`Ordered`] trees (keys in order, repeats kept), by
/// the same parser [`parse_documents`] chose; `None` if that reading fails (past 128 levels of
/// nesting, which no admissionregistration object reaches), and no field is then reported.
fn ordered_documents(file: &Path, text: &str) -> Option<Vec<Ordered>> {
    let yaml = || {
        serde_yaml_ng::Deserializer::from_str(text)
            .map(Ordered::deserialize)
            .collect::<Result<Vec<_>, _>>()
            .ok()
    };
    if is_json_file(file) {
        serde_json::from_str(text).ok().map(|d| vec![d])
    } else if looks_like_json(text) {
        let blanked = blank_separators(text);
        serde_json::Deserializer::from_str(&blanked)
            .into_iter::<Ordered>()
            .collect::<Result<Vec<_>, _>>()
            .ok()
            .or_else(yaml)
    } else {
        yaml()
    }
}

/// Whether strict field validation looks into a document: a kind whose fields are known, or
/// a `List` holding one.
fn needs_field_check(doc: &Json) -> bool {
    if doc["kind"] == "List" {
        doc["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(strict::is_checked_kind))
    } else {
        strict::is_checked_kind(doc)
    }
}

/// The field errors of document `i`'s object (or of its `index`-th item, for a List).
fn field_errors(ordered: Option<&[Ordered]>, i: usize, item: Option<usize>) -> Vec<String> {
    let Some(doc) = ordered.and_then(|docs| docs.get(i)) else {
        return Vec::new();
    };
    match item {
        None => strict::strict_errors(doc),
        Some(index) => match doc {
            Ordered::Object(entries) => entries
                .iter()
                // The last `items` is the one a JSON decoder keeps.
                .rfind(|(k, _)| k == "items")
                .and_then(|(_, items)| match items {
                    Ordered::Array(items) => items.get(index),
                    _ => None,
                })
                .map(strict::strict_errors)
                .unwrap_or_default(),
            _ => Vec::new(),
        },
    }
}

fn yaml_documents(file: &Path, text: &str) -> Result<Vec<Json>, LoadError> {
    serde_yaml_ng::Deserializer::from_str(text)
        .enumerate()
        .map(|(i, d)| {
            DeepValue::deserialize(d)
                .map(|v| v.0)
                .map_err(|source| LoadError::Yaml {
                    file: file.to_path_buf(),
                    document: i + 1,
                    source,
                })
        })
        .collect()
}

/// Parses the documents of one file's text: a `.json` file, or a file that looks like JSON
/// ([`looks_like_json`]), is one JSON document (errors from the JSON parser), else YAML,
/// multi-document allowed.
pub fn parse_documents(file: &Path, text: &str) -> Result<Vec<Loaded>, LoadError> {
    let json_error = |source| LoadError::Json {
        file: file.to_path_buf(),
        document: 1,
        source,
    };
    let docs: Vec<Json> = if is_json_file(file) {
        vec![deep_value::from_str(text).map_err(json_error)?]
    } else if looks_like_json(text) {
        match json_documents(text) {
            Ok(docs) => docs,
            // Valid YAML all the same (a flow mapping, a trailing comma): as before.
            Err((document, e)) => yaml_documents(file, text).map_err(|_| LoadError::Json {
                file: file.to_path_buf(),
                document,
                source: e,
            })?,
        }
    } else {
        yaml_documents(file, text)?
    };
    // Read a second time, keys in order, only when a document is of a kind whose fields are
    // checked.
    let ordered = if docs.iter().any(needs_field_check) {
        ordered_documents(file, text)
    } else {
        None
    };
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let document = i + 1;
        match doc {
            Json::Null => {}
            Json::Object(_) if doc["kind"] == "List" => {
                let items = doc["items"].as_array().cloned().unwrap_or_default();
                for (index, item) in items.into_iter().enumerate() {
                    out.push(Loaded {
                        file: file.to_path_buf(),
                        document,
                        field_errors: field_errors(ordered.as_deref(), i, Some(index)),
                        object: item,
                    });
                }
            }
            Json::Object(_) => out.push(Loaded {
                file: file.to_path_buf(),
                document,
                field_errors: field_errors(ordered.as_deref(), i, None),
                object: doc,
            }),
            _ => {
                return Err(LoadError::NotAnObject {
                    file: file.to_path_buf(),
                    document,
                })
            }
        }
    }
    Ok(out)
}

/// Every object below `dir`, files over `max_bytes` or not regular skipped.
pub fn load(dir: &Path, max_bytes: u64) -> Result<Load, LoadError> {
    let mut out = Load::default();
    for file in manifest_files(dir)? {
        if let Some(text) = read_listed(&file, max_bytes, &mut out.skipped)? {
            out.objects.extend(parse_documents(&file, &text)?);
            out.files.push(file);
        }
    }
    Ok(out)
}

/// A load's objects by file: what the next load's [`hold_last_good`] may keep.
pub type ByFile = std::collections::BTreeMap<PathBuf, Vec<Loaded>>;

/// The objects of `objects` by file.
pub fn by_file(objects: &[Loaded]) -> ByFile {
    let mut out = ByFile::new();
    for o in objects {
        out.entry(o.file.clone()).or_default().push(o.clone());
    }
    out
}

/// Keeps the `previous` objects of each file that gave some and now, still present, gives
/// none: a file skipped ([`Load::skipped`]), or one that holds no object (empty, white space,
/// comments or `---` only), which is what a file truncated in place looks like until its
/// writer rewrites it, however long that takes. Returns each file kept, with the number of
/// its objects kept. What is not kept: a file that still gives objects, if fewer (an edit);
/// a file removed (its objects go with it); a file that does not parse fails the whole load
/// before this (the last good state stays).
pub fn hold_last_good(load: &mut Load, previous: &ByFile) -> Vec<(PathBuf, usize)> {
    let mut now = by_file(&load.objects);
    let present = load
        .files
        .iter()
        .chain(load.skipped.iter().map(|s| &s.file));
    let mut kept = Vec::new();
    for file in present {
        let Some(objects) = previous.get(file) else {
            continue;
        };
        if objects.is_empty() || now.get(file).is_some_and(|o| !o.is_empty()) {
            continue;
        }
        kept.push((file.clone(), objects.len()));
        now.insert(file.clone(), objects.clone());
    }
    if !kept.is_empty() {
        // In file order, as a load lists them.
        load.objects = now.into_values().flatten().collect();
    }
    kept.sort();
    kept
}

/// What a file's metadata says of its version: any write changes it. The change time and
/// inode catch a rewrite that keeps the size and sets the modification time back, and a
/// replacement by rename (a ConfigMap volume's files are new files behind the same path).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    changed: (i64, i64),
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Stamp {
    fn of(path: &Path) -> Result<Stamp, ScanError> {
        let m = std::fs::metadata(path).map_err(|e| ScanError::Metadata {
            kind: e.kind(),
            text: e.to_string(),
        })?;
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Ok(Stamp {
            len: m.len(),
            modified: m.modified().ok(),
            #[cfg(unix)]
            changed: (m.ctime(), m.ctime_nsec()),
            #[cfg(unix)]
            inode: (m.dev(), m.ino()),
        })
    }
}

/// The state of a folder's manifest files, from their metadata only (cheap enough to take at
/// every poll): two equal fingerprints mean no file was added, removed or written between
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint {
    files: Vec<(PathBuf, Result<Stamp, ScanError>)>,
    /// The folder could not be listed.
    error: Option<ScanError>,
}

impl Fingerprint {
    /// The number of manifest files seen.
    pub fn files(&self) -> usize {
        self.files.len()
    }
}

/// Takes the fingerprint of the manifest files below `dir`.
pub fn fingerprint(dir: &Path) -> Fingerprint {
    match manifest_files(dir) {
        Ok(files) => Fingerprint {
            files: files
                .into_iter()
                .map(|p| {
                    let s = Stamp::of(&p);
                    (p, s)
                })
                .collect(),
            error: None,
        },
        Err(e) => Fingerprint {
            files: Vec::new(),
            error: Some(ScanError::Listing {
                kind: e.source.kind(),
                text: e.source.to_string(),
                path: e.path,
            }),
        },
    }
}

/// Why [`load_settled`] returned no objects.
#[derive(Debug)]
pub enum NotLoaded {
    /// The folder is not as expected, or changed while it was read: what was read may be a
    /// mix of old and new files, or a file cut short. Carries the folder's state after the
    /// read, to wait on.
    Changed(Fingerprint),
    /// The folder was stable and a file is unreadable or invalid.
    Invalid(LoadError),
}

/// Every object below `dir` (files over `max_bytes` or not regular skipped), provided the
/// folder's fingerprint is `expected` before the read and still is after it, so that no file
/// changed while it was read.
pub fn load_settled(dir: &Path, expected: &Fingerprint, max_bytes: u64) -> Result<Load, NotLoaded> {
    let before = fingerprint(dir);
    if before != *expected {
        return Err(NotLoaded::Changed(before));
    }
    let mut skipped = Vec::new();
    let read: Result<Vec<(PathBuf, String)>, LoadError> = match &expected.error {
        Some(e) => Err(LoadError::Unlisted {
            dir: dir.to_path_buf(),
            source: e.clone(),
        }),
        None => expected
            .files
            .iter()
            .filter_map(|(p, _)| {
                read_listed(p, max_bytes, &mut skipped)
                    .map(|t| t.map(|t| (p.clone(), t)))
                    .transpose()
            })
            .collect(),
    };
    let after = fingerprint(dir);
    if after != *expected {
        return Err(NotLoaded::Changed(after));
    }
    let mut out = Load {
        skipped,
        ..Load::default()
    };
    for (file, text) in read.map_err(NotLoaded::Invalid)? {
        out.objects
            .extend(parse_documents(&file, &text).map_err(NotLoaded::Invalid)?);
        out.files.push(file);
    }
    Ok(out)
}

/// Decides when a changed folder is loaded: once its fingerprint has held for the settle
/// interval, and only if it differs from the one last acted on (loaded, refused or found
/// invalid), so that a state is acted on once.
#[derive(Debug, Default)]
pub struct Settle {
    handled: Option<Fingerprint>,
    /// The state seen at the last poll, and since when it has held.
    seen: Option<(Fingerprint, Instant)>,
}

impl Settle {
    /// Records the state seen `at` a poll; true when it is time to load it.
    pub fn observe(&mut self, now: Fingerprint, at: Instant, settle: Duration) -> bool {
        if self.handled.as_ref() == Some(&now) {
            self.seen = None;
            return false;
        }
        match &self.seen {
            Some((seen, since)) if *seen == now => at.saturating_duration_since(*since) >= settle,
            _ => {
                self.seen = Some((now, at));
                settle.is_zero()
            }
        }
    }

    /// The state whose quiet period is running, to load once [`Self::observe`] says so.
    pub fn pending(&self) -> Option<&Fingerprint> {
        self.seen.as_ref().map(|(f, _)| f)
    }

    /// `state` was acted on: it is not loaded again until the folder changes.
    pub fn handled(&mut self, state: Fingerprint) {
        self.handled = Some(state);
        self.seen = None;
    }

    /// The folder changed while it was read: its new state starts a new quiet period.
    pub fn changed(&mut self, state: Fingerprint, at: Instant) {
        self.seen = Some((state, at));
    }
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
        assert!(matches!(e, LoadError::Yaml { document: 2, .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("bad.yaml (document 2): invalid YAML"),
            "{e}"
        );
        let e = parse_documents(Path::new("bad.yaml"), "- 1\n").unwrap_err();
        assert!(
            matches!(e, LoadError::NotAnObject { document: 1, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("mapping"));
        let e = parse_documents(Path::new("bad.json"), "{").unwrap_err();
        assert!(matches!(e, LoadError::Json { .. }), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("bad.json (document 1): invalid JSON"));
    }

    /// JSON in a `.yaml` file, or in text without a name, is parsed as JSON: a malformed one
    /// gets the JSON parser's line and column, not the YAML parser's idea of the error. A
    /// YAML flow mapping, which also starts with `{`, still reads as YAML.
    #[test]
    fn json_looking_text_gets_json_errors() {
        let bad = "{\"kind\": \"ConfigMap\",\n \"data\": {\"a\": 1 \"b\": 2}}\n";
        let e = parse_documents(Path::new("cm.yaml"), bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cm.yaml (document 1): invalid JSON: expected `,` or `}` at line 2 column 18"
        );
        for name in ["-", "review.txt", "review.json", "review.yaml"] {
            let e = parse_document(Path::new(name), bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                "invalid JSON: expected `,` or `}` at line 2 column 18",
                "{name}"
            );
            let e = parse_document(Path::new(name), " [1, 2\n").unwrap_err();
            assert!(
                e.to_string().starts_with("invalid JSON: EOF"),
                "{name}: {e}"
            );
        }
        // JSON documents in a YAML stream: the error names the document, and the line of
        // the whole file.
        let stream = "{\"kind\": \"A\"}\n---\n{\"kind\": \"B\"}\n---\n{\"kind\": \"C\" \"x\": 1}\n";
        let e = parse_documents(Path::new("s.yaml"), stream).unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.yaml (document 3): invalid JSON: expected `,` or `}` at line 5 column 14"
        );
        let good = stream.replace(" \"x\": 1", "");
        let docs = parse_documents(Path::new("s.yaml"), &good).unwrap();
        let kinds: Vec<_> = docs.iter().map(|d| d.object["kind"].clone()).collect();
        assert_eq!(kinds, ["A", "B", "C"]);
        assert_eq!(docs[2].document, 3);
        let flow = "{kind: ConfigMap, metadata: {name: a}}\n";
        let docs = parse_documents(Path::new("cm.yaml"), flow).unwrap();
        assert_eq!(docs[0].object["metadata"]["name"], "a");
        assert_eq!(
            parse_document(Path::new("-"), flow).unwrap()["kind"],
            "ConfigMap"
        );
        let e = parse_document(Path::new("flow.json"), flow).unwrap_err();
        assert!(
            matches!(e, DocError::Json(_)),
            "a .json file is JSON only: {e}"
        );
        let e = parse_document(Path::new("-"), "a: [1\n").unwrap_err();
        assert!(e.to_string().starts_with("invalid YAML"), "{e}");
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

    #[test]
    fn load_settled_refuses_a_folder_that_is_not_as_expected() {
        let d = temp_dir("settled");
        std::fs::write(d.join("a.yaml"), "kind: X\n").unwrap();
        let before = fingerprint(&d);
        assert_eq!(before.files(), 1);
        assert_eq!(load_settled(&d, &before, 1 << 20).unwrap().objects.len(), 1);
        // Rewritten since the fingerprint: the read is refused, with the new state.
        std::fs::write(d.join("a.yaml"), "kind: X\n---\nkind: Y\n").unwrap();
        match load_settled(&d, &before, 1 << 20) {
            Err(NotLoaded::Changed(now)) => assert_eq!(now, fingerprint(&d)),
            other => panic!("{other:?}"),
        }
        std::fs::write(d.join("b.yaml"), "[unclosed\n").unwrap();
        match load_settled(&d, &fingerprint(&d), 1 << 20) {
            Err(NotLoaded::Invalid(e)) => assert_eq!(e.file(), d.join("b.yaml")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn settle_waits_for_a_quiet_folder_and_acts_once() {
        let d = temp_dir("settle");
        let settle = Duration::from_secs(2);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s = Settle::default();
        let empty = fingerprint(&d);
        s.handled(empty.clone());
        assert!(!s.observe(empty.clone(), at(0), settle));
        std::fs::write(d.join("a.yaml"), "kind: X\n").unwrap();
        let one = fingerprint(&d);
        assert!(!s.observe(one.clone(), at(100), settle), "just changed");
        assert!(
            !s.observe(one.clone(), at(2000), settle),
            "not quiet long enough"
        );
        std::fs::write(d.join("a.yaml"), "kind: X\n---\nkind: Y\n").unwrap();
        let two = fingerprint(&d);
        assert_ne!(one, two);
        assert!(!s.observe(two.clone(), at(2200), settle), "changed again");
        assert!(!s.observe(two.clone(), at(4000), settle));
        assert!(s.observe(two.clone(), at(4200), settle), "quiet for 2 s");
        assert_eq!(s.pending(), Some(&two));
        s.handled(two.clone());
        assert!(!s.observe(two.clone(), at(9000), settle), "acted on once");
        // Back to a state seen before: a change like any other.
        assert!(!s.observe(empty.clone(), at(9100), settle));
        assert!(s.observe(empty, at(11100), settle));
        // Without a settle interval, the first sight of a change loads it.
        assert!(s.observe(one, at(11200), Duration::ZERO));
    }
}
