//! A MutatingAdmissionPolicy JSON patch applied to the request object as the API server
//! applies it: `patch/json_patch.go` builds an evanphx/json-patch v4 `Patch` from the CEL
//! `JSONPatch` values and calls `Patch.Apply` on the object's JSON; this module follows v4's
//! `patch.go` (v4.12.0, the version Kubernetes vendors) down to its quirks and error texts.
//!
//! What v4 does that RFC 6902 does not:
//! - the first segment of a path is never looked at: `data/k2` is the root's key `k2`, and a
//!   path without `/` (also `""`) does not apply;
//! - `replace` of a missing map key adds it; `copy` from a missing key (or a `null`) writes
//!   `null`; negative array indices count from the end;
//! - a `test` that fails makes the API server keep the object as it was (the whole patch is
//!   dropped, no error: [`Applied::TestFailed`]);
//! - `replace` of the whole document (`""`) with a scalar does nothing;
//! - a JSON `null` in the document is a Go nil node, while a `null` an operation writes is a
//!   node holding `null`: the second reads as an empty map (a later `add` under it panics in
//!   Go, `test` finds it equal to `{}` and `[]`); both print as `null`.
//!
//! Where Go panics (a nil map written to, a nil node compared) the API server drops the
//! connection; that is [`OpError::Panic`] here. The document is walked with
//! [`celgate_cel::json::with_stack`] at every level, so depth is bounded by the documents'
//! own (the review decoder's limit), never by the thread's stack.

use std::collections::BTreeMap;
use std::fmt;

use celgate_cel::json::with_stack;
use serde_json::{Number, Value};

use super::typed::{decode, DecodeError};
use crate::matching::registry::Gvk;

/// One operation, as `json_patch.go` builds it from a CEL `JSONPatch` value: `op` and `path`
/// always (empty when unset), `from` only when not empty, `value` only when set (a CEL `null`
/// is `Some(Value::Null)`). Values are the JSON the API server marshals the CEL value to
/// (through `structpb.Value`: numbers are float64, so `3.0` becomes `3`; see
/// [`PatchOp::new`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOp {
    pub op: String,
    pub path: String,
    pub from: Option<String>,
    pub value: Option<Value>,
}

impl PatchOp {
    /// An operation as `json_patch.go` emits it: an empty `from` is left out, and a float
    /// value that is a whole number becomes an integer (protojson prints it without a
    /// fraction).
    pub fn new(op: &str, path: &str, from: &str, value: Option<Value>) -> PatchOp {
        PatchOp {
            op: op.to_string(),
            path: path.to_string(),
            from: (!from.is_empty()).then(|| from.to_string()),
            value: value.map(|mut v| {
                go_numbers(&mut v);
                v
            }),
        }
    }
}

/// The result of a patch the API server does not refuse.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// Every operation applied: the patched document.
    Patched(Value),
    /// A `test` failed: the API server keeps the object unchanged, without an error.
    TestFailed,
}

/// Why evanphx/json-patch v4 refused a patch. `Display` is the error text the API server puts
/// after `JSON Patch: ` (see [`JsonPatchError`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpError {
    /// `op` is none of the six (case-sensitive).
    #[error("Unexpected kind: {0}")]
    UnexpectedKind(String),
    /// `add`, `remove`: the parent of `path` does not exist (or `path` has no `/`).
    #[error("{op} operation does not apply: doc is missing path: \"{path}\": missing value")]
    MissingPath { op: &'static str, path: String },
    /// `replace`: the parent of `path` does not exist.
    #[error("replace operation does not apply: doc is missing path: {0}: missing value")]
    ReplaceMissingPath(String),
    /// `replace`: an array index that does not exist.
    #[error("replace operation does not apply: doc is missing key: {0}: missing value")]
    ReplaceMissingKey(String),
    /// `test`: the parent of `path` does not exist.
    #[error("test operation does not apply: is missing path: {0}: missing value")]
    TestMissingPath(String),
    /// `move`, `copy` without `from`.
    #[error("{0} operation failed to decode from: operation, missing from field: missing value")]
    MissingFrom(&'static str),
    /// `move`, `copy`: the parent of `from` does not exist.
    #[error("{op} operation does not apply: doc is missing from path: {from}: missing value")]
    MissingFromPath { op: &'static str, from: String },
    /// `move`, `copy`: the parent of `path` does not exist.
    #[error(
        "{op} operation does not apply: doc is missing destination path: {path}: missing value"
    )]
    MissingDestination { op: &'static str, path: String },
    /// A container refused the key: `error in <what> for <which>: '<path>': <cause>`.
    #[error("error in {what}: '{path}': {cause}")]
    InContainer {
        /// `add for path`, `remove for path`, `move for path`, `test for path`,
        /// `copy for from`.
        what: &'static str,
        path: String,
        cause: KeyError,
    },
    /// `copy`: the destination refused the value.
    #[error("error while adding value during copy: {0}")]
    CopyAdd(KeyError),
    /// The copies of one patch added more than the limit (`AccumulatedCopySizeLimit`).
    #[error("Unable to complete the copy, the accumulated size increase of copy is {accumulated}, exceeding the limit {limit}")]
    CopyTooLarge { accumulated: u64, limit: u64 },
    /// Where Go panics: the API server closes the connection without an answer.
    #[error("the API server panics: {0}")]
    Panic(&'static str),
}

/// Why a map or array refused a key (the cause v4 wraps).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KeyError {
    #[error("Unable to access invalid index: {0}: invalid index referenced")]
    InvalidIndex(i64),
    #[error("Unable to remove nonexistent key: {0}: missing value")]
    NoSuchKey(String),
    /// `strconv.Atoi` refused an array index.
    #[error("{0}")]
    Atoi(AtoiError),
    /// `add` to an array with an index that is not a number.
    #[error("value was not a proper array index: '{key}': {cause}")]
    NotAnIndex { key: String, cause: AtoiError },
}

/// `strconv.Atoi`'s error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("strconv.Atoi: parsing {}: {}", go_quote(.text), if *.out_of_range { "value out of range" } else { "invalid syntax" })]
pub struct AtoiError {
    text: String,
    out_of_range: bool,
}

/// Limits of one patch's application.
#[derive(Debug, Clone, Copy)]
pub struct ApplyLimits {
    /// At most this many bytes (of JSON) added by the `copy` operations of one patch; 0 for
    /// no limit (v4's `AccumulatedCopySizeLimit`, which the API server leaves at 0: a patch
    /// of copies doubling the object grows it exponentially).
    pub max_copy_bytes: u64,
}

impl Default for ApplyLimits {
    fn default() -> ApplyLimits {
        ApplyLimits {
            max_copy_bytes: DEFAULT_MAX_COPY_BYTES,
        }
    }
}

/// 3 MiB, the API server's limit of a request body: a copy never needs to add more than
/// an object can hold.
pub const DEFAULT_MAX_COPY_BYTES: u64 = 3 << 20;

/// Applies `ops` to `doc` as `Patch.Apply` does.
pub fn apply(doc: &Value, ops: &[PatchOp], limits: ApplyLimits) -> Result<Applied, OpError> {
    let mut root = Root::new(doc);
    let mut copied = 0u64;
    for op in ops {
        let step = match op.op.as_str() {
            "add" => root.add(op),
            "remove" => root.remove(op),
            "replace" => root.replace(op),
            "move" => root.move_(op),
            "test" => root.test(op),
            "copy" => root.copy(op, &mut copied, limits),
            other => Err(Step::Error(OpError::UnexpectedKind(other.to_string()))),
        };
        match step {
            Ok(()) => {}
            Err(Step::TestFailed) => return Ok(Applied::TestFailed),
            Err(Step::Error(e)) => return Err(e),
        }
    }
    Ok(Applied::Patched(root.into_json()))
}

/// RFC 6901 escaping of one reference token (`jsonpatch.escapeKey`): `~` as `~0`, `/` as
/// `~1`.
pub fn escape_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// v4's `decodePatchKey`: `~1` to `/`, then `~0` to `~`, in one left-to-right pass (as Go's
/// `strings.Replacer` does, so `~01` is `~1`).
fn decode_key(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut rest = k;
    while let Some(i) = rest.find('~') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("~1") {
            out.push('/');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("~0") {
            out.push('~');
            rest = after;
        } else {
            out.push('~');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A node of v4's document: Go's `*lazyNode`.
#[derive(Debug)]
enum Node {
    /// A nil node: a JSON `null` read from a document, or an operation without `value`.
    Nil,
    /// A node holding the text `null` (a `null` value an operation wrote).
    RawNull,
    Scalar(Value),
    Object(BTreeMap<String, Node>),
    Array(Vec<Node>),
}

impl Drop for Node {
    /// Dropped without recursion: a document may nest 10,000 levels.
    fn drop(&mut self) {
        let mut stack: Vec<Node> = Vec::new();
        take_children(self, &mut stack);
        while let Some(mut n) = stack.pop() {
            take_children(&mut n, &mut stack);
        }
    }
}

fn take_children(n: &mut Node, out: &mut Vec<Node>) {
    match n {
        Node::Object(m) => out.extend(std::mem::take(m).into_values()),
        Node::Array(a) => out.append(a),
        _ => {}
    }
}

impl Node {
    /// A document's value: every `null` is a nil node.
    fn from_doc(v: &Value) -> Node {
        match v {
            Value::Null => Node::Nil,
            Value::Object(m) => with_stack(|| {
                Node::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), Node::from_doc(v)))
                        .collect(),
                )
            }),
            Value::Array(a) => with_stack(|| Node::Array(a.iter().map(Node::from_doc).collect())),
            other => Node::Scalar(other.clone()),
        }
    }

    /// An operation's value: a `null` at its root is a node holding `null`.
    fn from_value(v: Option<&Value>) -> Node {
        match v {
            None => Node::Nil,
            Some(Value::Null) => Node::RawNull,
            Some(v) => Node::from_doc(v),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Node::Nil | Node::RawNull => Value::Null,
            Node::Scalar(v) => v.clone(),
            Node::Object(m) => with_stack(|| {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }),
            Node::Array(a) => with_stack(|| Value::Array(a.iter().map(Node::to_json).collect())),
        }
    }

    /// `deepCopy`: the node marshalled and read back (a nil node stays nil).
    fn deep_copy(&self) -> Node {
        match self {
            Node::Nil => Node::Nil,
            Node::RawNull => Node::RawNull,
            Node::Scalar(v) => Node::Scalar(v.clone()),
            Node::Object(m) => with_stack(|| {
                Node::Object(m.iter().map(|(k, v)| (k.clone(), v.deep_copy())).collect())
            }),
            Node::Array(a) => with_stack(|| Node::Array(a.iter().map(Node::deep_copy).collect())),
        }
    }
}

/// A container `findObject` reached: a map, an array, or the nil map a `null` node reads as.
enum Container<'a> {
    Map(&'a mut BTreeMap<String, Node>),
    Array(&'a mut Vec<Node>),
    NilMap,
}

const NIL_MAP_WRITE: &str = "assignment to entry in nil map";
const NIL_DEREF: &str = "invalid memory address or nil pointer dereference";

impl Container<'_> {
    /// `get`: a map's missing key is a nil node, not an error.
    fn get(&self, key: &str) -> Result<Option<&Node>, KeyError> {
        match self {
            Container::Map(m) => Ok(m.get(key)),
            Container::NilMap => Ok(None),
            Container::Array(a) => {
                let idx = atoi(key).map_err(KeyError::Atoi)?;
                let i = existing_index(idx, a.len())?;
                Ok(Some(&a[i]))
            }
        }
    }

    fn add(&mut self, key: &str, val: Node) -> Result<(), StepError> {
        match self {
            Container::Map(m) => {
                m.insert(key.to_string(), val);
                Ok(())
            }
            Container::NilMap => Err(StepError::Panic(NIL_MAP_WRITE)),
            Container::Array(a) => {
                if key == "-" {
                    a.push(val);
                    return Ok(());
                }
                let idx = atoi(key).map_err(|cause| KeyError::NotAnIndex {
                    key: key.to_string(),
                    cause,
                })?;
                let size = a.len() as i64 + 1;
                if idx >= size || idx < -size {
                    return Err(KeyError::InvalidIndex(idx).into());
                }
                let at = if idx < 0 { idx + size } else { idx };
                a.insert(at as usize, val);
                Ok(())
            }
        }
    }

    /// `set`, only for `replace` after `get` found the key.
    fn set(&mut self, key: &str, val: Node) -> Result<(), StepError> {
        match self {
            Container::Map(m) => {
                m.insert(key.to_string(), val);
                Ok(())
            }
            Container::NilMap => Err(StepError::Panic(NIL_MAP_WRITE)),
            Container::Array(a) => {
                let idx = atoi(key).map_err(KeyError::Atoi)?;
                let i = existing_index(idx, a.len())?;
                a[i] = val;
                Ok(())
            }
        }
    }

    fn remove(&mut self, key: &str) -> Result<Node, KeyError> {
        match self {
            Container::Map(m) => m
                .remove(key)
                .ok_or_else(|| KeyError::NoSuchKey(key.to_string())),
            Container::NilMap => Err(KeyError::NoSuchKey(key.to_string())),
            Container::Array(a) => {
                let idx = atoi(key).map_err(KeyError::Atoi)?;
                let i = existing_index(idx, a.len())?;
                Ok(a.remove(i))
            }
        }
    }
}

/// An index of an existing element, negative ones counting from the end.
fn existing_index(idx: i64, len: usize) -> Result<usize, KeyError> {
    let len = len as i64;
    if idx < -len || idx >= len {
        return Err(KeyError::InvalidIndex(idx));
    }
    Ok(if idx < 0 { idx + len } else { idx } as usize)
}

/// A container's error before it is wrapped with the operation.
enum StepError {
    Key(KeyError),
    Panic(&'static str),
}

impl From<KeyError> for StepError {
    fn from(e: KeyError) -> StepError {
        StepError::Key(e)
    }
}

enum Step {
    TestFailed,
    Error(OpError),
}

impl From<OpError> for Step {
    fn from(e: OpError) -> Step {
        Step::Error(e)
    }
}

fn wrap<'p>(what: &'static str, path: &'p str) -> impl FnOnce(StepError) -> Step + 'p {
    move |e| match e {
        StepError::Key(cause) => Step::Error(OpError::InContainer {
            what,
            path: path.to_string(),
            cause,
        }),
        StepError::Panic(p) => Step::Error(OpError::Panic(p)),
    }
}

/// The document being patched.
struct Root {
    node: Node,
}

impl Root {
    fn new(doc: &Value) -> Root {
        Root {
            node: Node::from_doc(doc),
        }
    }

    fn into_json(self) -> Value {
        self.node.to_json()
    }

    /// `findObject`: the container holding the last segment of `path`, and that segment
    /// decoded; `None` when a segment on the way is missing or not a container.
    fn find(&mut self, path: &str) -> Option<(Container<'_>, String)> {
        let split: Vec<&str> = path.split('/').collect();
        if split.len() < 2 {
            return None;
        }
        let key = decode_key(split[split.len() - 1]);
        let mut cur: Container<'_> = match &mut self.node {
            Node::Object(m) => Container::Map(m),
            Node::Array(a) => Container::Array(a),
            // After `replace ""` with `null` the document is a nil map.
            Node::RawNull => Container::NilMap,
            Node::Nil | Node::Scalar(_) => return None,
        };
        for part in &split[1..split.len() - 1] {
            let part = decode_key(part);
            let next: &mut Node = match cur {
                Container::Map(m) => m.get_mut(&part)?,
                Container::NilMap => return None,
                Container::Array(a) => {
                    let idx = atoi(&part).ok()?;
                    let i = existing_index(idx, a.len()).ok()?;
                    &mut a[i]
                }
            };
            cur = match next {
                Node::Object(m) => Container::Map(m),
                Node::Array(a) => Container::Array(a),
                Node::RawNull => Container::NilMap,
                Node::Nil | Node::Scalar(_) => return None,
            };
        }
        Some((cur, key))
    }

    fn add(&mut self, op: &PatchOp) -> Result<(), Step> {
        let path = op.path.as_str();
        let Some((mut con, key)) = self.find(path) else {
            return Err(OpError::MissingPath {
                op: "add",
                path: path.to_string(),
            }
            .into());
        };
        con.add(&key, Node::from_value(op.value.as_ref()))
            .map_err(wrap("add for path", path))
    }

    fn remove(&mut self, op: &PatchOp) -> Result<(), Step> {
        let path = op.path.as_str();
        let Some((mut con, key)) = self.find(path) else {
            return Err(OpError::MissingPath {
                op: "remove",
                path: path.to_string(),
            }
            .into());
        };
        con.remove(&key)
            .map(drop)
            .map_err(|e| wrap("remove for path", path)(e.into()))
    }

    fn replace(&mut self, op: &PatchOp) -> Result<(), Step> {
        let path = op.path.as_str();
        if path.is_empty() {
            // The whole document: an object or array value replaces it; `null` reads as an
            // empty map (printed `null`); a scalar is ignored (v4 wraps a nil error there).
            match &op.value {
                None => return Err(OpError::Panic(NIL_DEREF).into()),
                Some(Value::Null) => self.node = Node::RawNull,
                Some(v @ (Value::Object(_) | Value::Array(_))) => self.node = Node::from_doc(v),
                Some(_) => {}
            }
            return Ok(());
        }
        let Some((mut con, key)) = self.find(path) else {
            return Err(OpError::ReplaceMissingPath(path.to_string()).into());
        };
        if con.get(&key).is_err() {
            return Err(OpError::ReplaceMissingKey(path.to_string()).into());
        }
        con.set(&key, Node::from_value(op.value.as_ref()))
            .map_err(wrap("remove for path", path))
    }

    fn move_(&mut self, op: &PatchOp) -> Result<(), Step> {
        let Some(from) = op.from.as_deref() else {
            return Err(OpError::MissingFrom("move").into());
        };
        let Some((mut con, key)) = self.find(from) else {
            return Err(OpError::MissingFromPath {
                op: "move",
                from: from.to_string(),
            }
            .into());
        };
        // v4 names the decoded key here, not the path.
        if let Err(e) = con.get(&key) {
            return Err(wrap("move for path", &key)(e.into()));
        }
        let val = match con.remove(&key) {
            Ok(v) => v,
            Err(e) => return Err(wrap("move for path", &key)(e.into())),
        };
        let path = op.path.as_str();
        let Some((mut con, key)) = self.find(path) else {
            return Err(OpError::MissingDestination {
                op: "move",
                path: path.to_string(),
            }
            .into());
        };
        con.add(&key, val).map_err(wrap("move for path", path))
    }

    fn test(&mut self, op: &PatchOp) -> Result<(), Step> {
        let path = op.path.as_str();
        let want = op.value.as_ref().map(|v| Node::from_value(Some(v)));
        if path.is_empty() {
            let Some(want) = want else {
                return Err(OpError::Panic(NIL_DEREF).into());
            };
            return match equal(&self.node, &want) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Step::TestFailed),
                Err(p) => Err(OpError::Panic(p).into()),
            };
        }
        let Some((con, key)) = self.find(path) else {
            return Err(OpError::TestMissingPath(path.to_string()).into());
        };
        let got = con
            .get(&key)
            .map_err(|e| wrap("test for path", path)(e.into()))?;
        let got = got.filter(|n| !matches!(n, Node::Nil));
        match (got, want) {
            // A nil node passes only against an operation value that is nil: one without
            // `value` panics there, `null` is a node.
            (None, None) => Err(OpError::Panic(NIL_DEREF).into()),
            (None, Some(_)) | (Some(_), None) => Err(Step::TestFailed),
            (Some(got), Some(want)) => match equal(got, &want) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Step::TestFailed),
                Err(p) => Err(OpError::Panic(p).into()),
            },
        }
    }

    fn copy(&mut self, op: &PatchOp, copied: &mut u64, limits: ApplyLimits) -> Result<(), Step> {
        let Some(from) = op.from.as_deref() else {
            return Err(OpError::MissingFrom("copy").into());
        };
        let Some((con, key)) = self.find(from) else {
            return Err(OpError::MissingFromPath {
                op: "copy",
                from: from.to_string(),
            }
            .into());
        };
        let val = match con.get(&key) {
            Ok(v) => v.map_or(Node::Nil, Node::deep_copy),
            Err(e) => return Err(wrap("copy for from", from)(e.into())),
        };
        let path = op.path.as_str();
        let Some((mut con, key)) = self.find(path) else {
            return Err(OpError::MissingDestination {
                op: "copy",
                path: path.to_string(),
            }
            .into());
        };
        *copied = copied.saturating_add(json_size(&val));
        if limits.max_copy_bytes > 0 && *copied > limits.max_copy_bytes {
            return Err(OpError::CopyTooLarge {
                accumulated: *copied,
                limit: limits.max_copy_bytes,
            }
            .into());
        }
        con.add(&key, val).map_err(|e| match e {
            StepError::Key(k) => Step::Error(OpError::CopyAdd(k)),
            StepError::Panic(p) => Step::Error(OpError::Panic(p)),
        })
    }
}

/// `lazyNode.equal`, with its Go panics (a nil node compared) as errors. A node holding
/// `null` reads as an empty map on either side, and as an empty array against an array.
fn equal(n: &Node, o: &Node) -> Result<bool, &'static str> {
    if matches!(o, Node::Nil) {
        return Err(NIL_DEREF);
    }
    let empty = BTreeMap::new();
    match n {
        Node::Nil => Err(NIL_DEREF),
        Node::Scalar(a) => Ok(matches!(o, Node::Scalar(b) if a == b)),
        Node::Object(_) | Node::RawNull => {
            let a = match n {
                Node::Object(m) => m,
                _ => &empty,
            };
            let b = match o {
                Node::Object(m) => m,
                Node::RawNull => &empty,
                _ => return Ok(false),
            };
            if a.len() != b.len() {
                return Ok(false);
            }
            for (k, v) in a {
                let Some(ov) = b.get(k) else {
                    return Ok(false);
                };
                match (v, ov) {
                    (Node::Nil, Node::Nil) => continue,
                    (Node::Nil, _) | (_, Node::Nil) => return Ok(false),
                    _ => {
                        if !with_stack(|| equal(v, ov))? {
                            return Ok(false);
                        }
                    }
                }
            }
            Ok(true)
        }
        Node::Array(a) => {
            let b: &[Node] = match o {
                Node::Array(b) => b,
                Node::RawNull => &[],
                _ => return Ok(false),
            };
            if a.len() != b.len() {
                return Ok(false);
            }
            for (x, y) in a.iter().zip(b) {
                if !with_stack(|| equal(x, y))? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

/// The length of the node's compact JSON (strings counted unescaped), without recursion
/// past what [`with_stack`] allows.
fn json_size(n: &Node) -> u64 {
    match n {
        Node::Nil | Node::RawNull => 4,
        Node::Scalar(v) => scalar_size(v),
        Node::Object(m) => with_stack(|| {
            2 + m
                .iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
                .sum::<u64>()
        }),
        Node::Array(a) => with_stack(|| 2 + a.iter().map(|v| json_size(v) + 1).sum::<u64>()),
    }
}

fn scalar_size(v: &Value) -> u64 {
    match v {
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => n.to_string().len() as u64,
        Value::String(s) => s.len() as u64 + 2,
        _ => 4,
    }
}

/// Every float in `v` that is a whole number (and fits int64) made an integer, as protojson
/// prints a `structpb` number. In place: the value may be deep, and serde_json's drop of a
/// replaced copy would recurse.
pub fn go_numbers(v: &mut Value) {
    match v {
        Value::Number(n) => *n = go_number(n),
        Value::Array(a) => with_stack(|| a.iter_mut().for_each(go_numbers)),
        Value::Object(m) => with_stack(|| m.values_mut().for_each(go_numbers)),
        _ => {}
    }
}

fn go_number(n: &Number) -> Number {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.2e18 => Number::from(f as i64),
        _ => n.clone(),
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign and decimal digits.
fn atoi(s: &str) -> Result<i64, AtoiError> {
    let err = |out_of_range| AtoiError {
        text: s.to_string(),
        out_of_range,
    };
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(false));
    }
    let negative = s.starts_with('-');
    let mut n: i64 = 0;
    for b in digits.bytes() {
        let d = i64::from(b - b'0');
        n = n
            .checked_mul(10)
            .and_then(|n| {
                if negative {
                    n.checked_sub(d)
                } else {
                    n.checked_add(d)
                }
            })
            .ok_or_else(|| err(true))?;
    }
    Ok(n)
}

/// Go's `strconv.Quote`, for the ASCII a path holds (other text escaped as JSON does).
fn go_quote(s: &str) -> String {
    struct Quoted<'a>(&'a str);
    impl fmt::Display for Quoted<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("\"")?;
            for c in self.0.chars() {
                match c {
                    '"' => f.write_str("\\\"")?,
                    '\\' => f.write_str("\\\\")?,
                    '\n' => f.write_str("\\n")?,
                    '\t' => f.write_str("\\t")?,
                    '\r' => f.write_str("\\r")?,
                    c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(f, "\\x{:02x}", c as u32)?,
                    c => write!(f, "{c}")?,
                }
            }
            f.write_str("\"")
        }
    }
    Quoted(s).to_string()
}

/// A JSON patch that the API server refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JsonPatchError {
    /// v4 refused an operation: `403 Invalid`; `Display` is what follows `policy 'P' with
    /// binding 'B' denied request: ` (`JSON Patch: <v4's error>`). [`OpError::Panic`] is
    /// the API server dropping the connection instead.
    #[error("JSON Patch: {0}")]
    Apply(#[source] OpError),
    /// The patched object does not decode: `500 InternalError` whatever the failure
    /// policy; `Display` is the whole status message (`Internal error occurred: ...`), the
    /// cause's message is the inner error's.
    #[error("{}", .0.status_message())]
    Decode(#[source] DecodeError),
}

/// One JSON patch mutation as `jsonPatcher.Patch` runs it on the versioned object of a
/// request for `gvk`: applied, then decoded back into the kind's type. A failing `test`
/// leaves the object as it was.
pub fn patch_object(
    object: &Value,
    gvk: &Gvk,
    ops: &[PatchOp],
    limits: ApplyLimits,
) -> Result<Value, JsonPatchError> {
    match apply(object, ops, limits).map_err(JsonPatchError::Apply)? {
        Applied::TestFailed => Ok(clone_json(object)),
        Applied::Patched(patched) => decode(&patched, gvk).map_err(JsonPatchError::Decode),
    }
}

/// A deep copy without recursion past [`with_stack`] (serde_json's `clone` recurses, and a
/// document may nest 10,000 levels).
pub fn clone_json(v: &Value) -> Value {
    match v {
        Value::Array(a) => with_stack(|| Value::Array(a.iter().map(clone_json).collect())),
        Value::Object(m) => with_stack(|| {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), clone_json(v))).collect())
        }),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    //! The recorded cases (`testdata/jp-cases.json`: request object, mutated object and
    //! message of the shared MAP sample's `NNN-jp-*` cases) with the operations their
    //! policies' expressions evaluate to, built by hand.

    use serde_json::json;

    use super::*;

    pub(crate) fn case(name: &str) -> Value {
        let all: Value = serde_json::from_str(include_str!("testdata/jp-cases.json"))
            .expect("the fixture is JSON");
        let key = all
            .as_object()
            .and_then(|m| m.keys().find(|k| k.starts_with(name)))
            .expect("a recorded case")
            .clone();
        all[key.as_str()].clone()
    }

    pub(crate) fn gvk_of(case: &Value) -> Gvk {
        let k = &case["kind"];
        Gvk::new(
            k["group"].as_str().unwrap(),
            k["version"].as_str().unwrap(),
            k["kind"].as_str().unwrap(),
        )
    }

    /// The object with what the recording masks (managedFields times) left out.
    pub(crate) fn masked(mut v: Value) -> Value {
        if let Some(entries) = v
            .pointer_mut("/metadata/managedFields")
            .and_then(Value::as_array_mut)
        {
            for e in entries {
                if let Some(m) = e.as_object_mut() {
                    m.remove("time");
                }
            }
        }
        v
    }

    fn add(path: &str, value: Value) -> PatchOp {
        PatchOp::new("add", path, "", Some(value))
    }

    fn op(kind: &str, path: &str, value: Option<Value>) -> PatchOp {
        PatchOp::new(kind, path, "", value)
    }

    /// Runs `ops` on the case's request object as the API server does.
    fn run(name: &str, ops: &[PatchOp]) -> Result<Value, JsonPatchError> {
        let c = case(name);
        patch_object(&c["object"], &gvk_of(&c), ops, ApplyLimits::default())
    }

    /// The case's mutated object is what `ops` give.
    fn mutates(name: &str, ops: &[PatchOp]) {
        let c = case(name);
        let got = run(name, ops).unwrap();
        assert_eq!(masked(got), masked(c["mutated"].clone()), "{name}");
    }

    /// The case's denial message (after the policy prefix for 403s) is the error's.
    fn denies(name: &str, ops: &[PatchOp]) {
        let c = case(name);
        let err = run(name, ops).unwrap_err();
        let message = c["message"].as_str().unwrap();
        let text = err.to_string();
        match err {
            JsonPatchError::Apply(_) => {
                assert_eq!(c["code"], 403, "{name}");
                let (_, after) = message.split_once(" denied request: ").unwrap();
                assert_eq!(text, after, "{name}");
            }
            JsonPatchError::Decode(_) => {
                assert_eq!(c["code"], 500, "{name}");
                assert_eq!(text, message, "{name}");
            }
        }
    }

    #[test]
    fn add_under_a_missing_parent_fails_050() {
        denies("050", &[add("/metadata/labels/added", json!("yes"))]);
    }

    #[test]
    fn add_a_whole_map_051_and_a_conditional_one_105() {
        mutates(
            "051",
            &[add("/metadata/labels", json!({"a": "1", "b": "2"}))],
        );
        mutates("105", &[add("/metadata/labels", json!({"seen": "false"}))]);
    }

    #[test]
    fn a_passing_test_lets_the_patch_apply_057() {
        mutates(
            "057",
            &[
                op("test", "/data/k1", Some(json!("v1"))),
                op("replace", "/data/k1", Some(json!("tested"))),
            ],
        );
    }

    #[test]
    fn a_failing_test_silently_drops_the_whole_patch_058_059_060() {
        mutates(
            "058",
            &[
                op("test", "/data/k1", Some(json!("other"))),
                op("replace", "/data/k1", Some(json!("tested"))),
            ],
        );
        mutates(
            "059",
            &[
                add("/data/k2", json!("added")),
                op("test", "/data/k1", Some(json!("other"))),
            ],
        );
        mutates("060", &[op("test", "/data/nope", Some(json!("x")))]);
        let c = case("059");
        let ops = [
            add("/data/k2", json!("a")),
            op("test", "/data/k1", Some(json!("x"))),
        ];
        assert_eq!(
            apply(&c["object"], &ops, ApplyLimits::default()),
            Ok(Applied::TestFailed)
        );
    }

    #[test]
    fn dash_appends_and_an_index_inserts_064_065() {
        let sidecar = json!({"name": "sidecar", "image": "busybox:1.36"});
        let got = run("064", &[add("/spec/containers/-", sidecar.clone())]).unwrap();
        let want = case("064")["mutated"]["spec"]["containers"][1].clone();
        assert_eq!(got["spec"]["containers"][1], sidecar);
        assert_eq!(want["name"], "sidecar");
        let first = json!({"name": "first", "image": "busybox:1.36"});
        let got = run("065", &[add("/spec/containers/0", first.clone())]).unwrap();
        let mutated = case("065")["mutated"].clone();
        assert_eq!(got["spec"]["containers"][0], first);
        assert_eq!(got["spec"]["containers"][1]["name"], "c");
        assert_eq!(mutated["spec"]["containers"][0]["name"], "first");
        assert_eq!(mutated["spec"]["containers"][1]["name"], "c");
    }

    #[test]
    fn an_index_past_the_end_fails_066() {
        denies(
            "066",
            &[add(
                "/spec/containers/5",
                json!({"name": "x", "image": "busybox"}),
            )],
        );
    }

    #[test]
    fn escapes_067_068_069() {
        mutates(
            "067",
            &[add("/metadata/labels/example.com~1env", json!("prod"))],
        );
        // 068, 069 fail later in validation (422): the webhook's object is the patched one.
        let got = run("068", &[add("/metadata/annotations/a~0b", json!("tilde"))]).unwrap();
        assert_eq!(got["metadata"]["annotations"]["a~b"], "tilde");
        let key = escape_key("example.com/a~b");
        assert_eq!(key, "example.com~1a~0b");
        let got = run(
            "069",
            &[add(&format!("/metadata/annotations/{key}"), json!(key))],
        )
        .unwrap();
        assert_eq!(
            got["metadata"]["annotations"]["example.com/a~b"],
            "example.com~1a~0b"
        );
        assert_eq!(decode_key("~01"), "~1");
    }

    #[test]
    fn values_bytes_duration_null_078_084_080() {
        mutates("078", &[add("/binaryData", json!({"bin": "aGVsbG8="}))]);
        mutates("084", &[add("/data/d", json!("3723s"))]);
        // 080: a null replicas decodes as nil, then the API server defaults it to 1.
        let got = run("080", &[op("replace", "/spec/replicas", Some(Value::Null))]).unwrap();
        assert!(got["spec"].get("replicas").is_none());
        assert_eq!(case("080")["mutated"]["spec"]["replicas"], 1);
    }

    #[test]
    fn unknown_and_upper_case_ops_fail_090_091() {
        denies("090", &[op("frobnicate", "/data/k1", Some(json!("x")))]);
        denies("091", &[op("ADD", "/data/k2", Some(json!("x")))]);
    }

    #[test]
    fn a_path_without_leading_slash_is_a_root_key_093() {
        denies("093", &[add("data/k2", json!("x"))]);
    }

    #[test]
    fn metadata_rewrites_094_095_096() {
        mutates(
            "094",
            &[op("replace", "/metadata/name", Some(json!("renamed")))],
        );
        mutates("095", &[op("remove", "/metadata/managedFields", None)]);
        mutates(
            "096",
            &[op(
                "replace",
                "/metadata/managedFields/0/operation",
                Some(json!("Bogus")),
            )],
        );
    }

    #[test]
    fn crd_objects_are_unstructured_101() {
        mutates(
            "101",
            &[add("/spec/ports/-", json!({"name": "https", "port": 443}))],
        );
        let got = run("101", &[add("/spec/notAField", json!(1.5))]).unwrap();
        assert_eq!(got["spec"]["notAField"], 1.5);
    }

    #[test]
    fn lists_of_maps_109_264_and_the_scale_subresource_129() {
        let env = json!([{"name": "INJECTED", "value": "yes"}]);
        let got = run("109", &[add("/spec/containers/0/env", env.clone())]).unwrap();
        assert_eq!(got["spec"]["containers"][0]["env"], env);
        assert_eq!(case("109")["mutated"]["spec"]["containers"][0]["env"], env);
        let only = json!([{"name": "only", "image": "nginx:1.27"}]);
        let got = run(
            "264",
            &[op("replace", "/spec/containers", Some(only.clone()))],
        )
        .unwrap();
        assert_eq!(got["spec"]["containers"], only);
        mutates("129", &[op("replace", "/spec/replicas", Some(json!(2)))]);
    }

    #[test]
    fn removing_a_missing_key_fails_209() {
        // 209 runs under Ignore (so it passes); its error is this one.
        let err = run("209", &[op("remove", "/data/nope", None)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "JSON Patch: error in remove for path: '/data/nope': Unable to remove nonexistent key: nope: missing value"
        );
    }

    #[test]
    fn replace_of_a_missing_key_adds_it_and_copy_from_a_missing_one_writes_null_054_063() {
        let doc = json!({"metadata": {"labels": {"a": "1"}}, "data": {}});
        let ops = [
            op("replace", "/data/new", Some(json!("v"))),
            PatchOp::new("copy", "/metadata/labels/b", "/metadata/labels/nope", None),
        ];
        let Ok(Applied::Patched(got)) = apply(&doc, &ops, ApplyLimits::default()) else {
            panic!("applies");
        };
        assert_eq!(got["data"]["new"], "v");
        assert_eq!(got["metadata"]["labels"]["b"], Value::Null);
        // A ConfigMap's labels are a map of strings: the null decodes as "".
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {}}});
        let got = patch_object(
            &cm,
            &Gvk::new("", "v1", "ConfigMap"),
            &ops[1..],
            ApplyLimits::default(),
        )
        .unwrap();
        assert_eq!(got["metadata"]["labels"]["b"], "");
    }

    #[test]
    fn empty_and_slashless_paths() {
        let doc = json!({"a": 1});
        let e = apply(&doc, &[add("", json!(1))], ApplyLimits::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "add operation does not apply: doc is missing path: \"\": missing value"
        );
        let e = apply(
            &doc,
            &[op("replace", "/a/b", Some(json!(1)))],
            ApplyLimits::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "replace operation does not apply: doc is missing path: /a/b: missing value"
        );
        // `replace ""` with a scalar is ignored; with an object it replaces the document.
        let r = apply(
            &doc,
            &[op("replace", "", Some(json!(3)))],
            ApplyLimits::default(),
        );
        assert_eq!(r, Ok(Applied::Patched(doc.clone())));
        let r = apply(
            &doc,
            &[op("replace", "", Some(json!({"b": 2})))],
            ApplyLimits::default(),
        );
        assert_eq!(r, Ok(Applied::Patched(json!({"b": 2}))));
        // With `null` the document is a nil map: writing to it panics in Go.
        let ops = [op("replace", "", Some(Value::Null)), add("/x", json!(1))];
        assert_eq!(
            apply(&doc, &ops, ApplyLimits::default()),
            Err(OpError::Panic("assignment to entry in nil map"))
        );
    }

    #[test]
    fn arrays_negative_indices_move_and_bad_indices() {
        let doc = json!({"l": [1, 2, 3]});
        let l = ApplyLimits::default();
        let r = apply(&doc, &[op("remove", "/l/-1", None)], l);
        assert_eq!(r, Ok(Applied::Patched(json!({"l": [1, 2]}))));
        // v4 counts a negative `add` index from the grown list's end: -1 appends.
        let r = apply(&doc, &[add("/l/-1", json!(9))], l);
        assert_eq!(r, Ok(Applied::Patched(json!({"l": [1, 2, 3, 9]}))));
        let r = apply(&doc, &[add("/l/-4", json!(9))], l);
        assert_eq!(r, Ok(Applied::Patched(json!({"l": [9, 1, 2, 3]}))));
        let e = apply(&doc, &[add("/l/x", json!(9))], l).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error in add for path: '/l/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax"
        );
        let e = apply(&doc, &[op("replace", "/l/3", Some(json!(0)))], l).unwrap_err();
        assert_eq!(
            e.to_string(),
            "replace operation does not apply: doc is missing key: /l/3: missing value"
        );
        let e = apply(&doc, &[op("remove", "/l/99999999999999999999", None)], l).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error in remove for path: '/l/99999999999999999999': strconv.Atoi: parsing \"99999999999999999999\": value out of range"
        );
        let mv = PatchOp::new("move", "/m", "/l/0", None);
        let r = apply(&doc, &[mv], l);
        assert_eq!(r, Ok(Applied::Patched(json!({"l": [2, 3], "m": 1}))));
        let e = apply(&doc, &[PatchOp::new("copy", "/m", "", None)], l).unwrap_err();
        assert_eq!(
            e.to_string(),
            "copy operation failed to decode from: operation, missing from field: missing value"
        );
    }

    #[test]
    fn null_nodes_follow_go() {
        let l = ApplyLimits::default();
        // A null the patch wrote reads as an empty map: writing under it panics in Go.
        let doc = json!({});
        let ops = [add("/a", Value::Null), add("/a/b", json!(1))];
        assert_eq!(
            apply(&doc, &ops, l),
            Err(OpError::Panic("assignment to entry in nil map"))
        );
        // ... and a test finds it equal to {} (a document's own null is a nil node).
        let ops = [add("/a", Value::Null), op("test", "/a", Some(json!({})))];
        assert!(matches!(apply(&doc, &ops, l), Ok(Applied::Patched(_))));
        let doc = json!({"a": null});
        let r = apply(&doc, &[op("test", "/a", Some(Value::Null))], l);
        assert_eq!(r, Ok(Applied::TestFailed));
        let e = apply(&doc, &[add("/a/b", json!(1))], l).unwrap_err();
        assert!(matches!(e, OpError::MissingPath { .. }));
    }

    #[test]
    fn copies_are_bounded() {
        let doc = json!({"a": "x".repeat(1000)});
        let mut ops = Vec::new();
        for i in 0..10 {
            ops.push(PatchOp::new("copy", &format!("/c{i}"), "/a", None));
        }
        let limits = ApplyLimits {
            max_copy_bytes: 5000,
        };
        let e = apply(&doc, &ops, limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Unable to complete the copy, the accumulated size increase of copy is 5010, exceeding the limit 5000"
        );
        assert!(apply(&doc, &ops, ApplyLimits { max_copy_bytes: 0 }).is_ok());
    }

    #[test]
    fn whole_floats_become_integers() {
        let op = PatchOp::new(
            "add",
            "/a",
            "",
            Some(json!({"x": 3.0, "y": 3.5, "z": [6.0]})),
        );
        assert_eq!(op.value, Some(json!({"x": 3, "y": 3.5, "z": [6]})));
    }
}
