//! A compact, read-only JSON document for the request path.
//!
//! `serde_json::Value` allocates every string and a B-tree per object; for an AdmissionReview
//! most of that is never read. [`Doc`] keeps the document as one flat vector of 16-byte nodes
//! in pre-order: a string is a span of the input text (or, when it had escapes, of one buffer
//! of unescaped text), an array or object records its length and where its subtree ends, so
//! iteration is a walk along the vector and a field lookup a scan of the object's keys
//! (objects in Kubernetes JSON are small). Parsing reuses serde_json's parser (validation,
//! number rules) through a `DeserializeSeed`, so malformed input is refused exactly as before.
//!
//! Untrusted text must not shape the parse: nesting is accepted as deep as the API server
//! accepts it ([`MAX_DEPTH`]), and past a shallow depth the parse moves to a heap-allocated
//! stack segment when the thread's stack runs low, so depth never overflows the stack
//! whichever thread parses; an object with a repeated key is refused (see
//! [`Doc::parse`]).
//!
//! Small nodes matter for long arrays: the walk of 10,000 containers reads a few nodes of
//! each, and the fewer pages they span, the fewer cache and TLB misses.
//!
//! Numbers follow Kubernetes' unstructured conversion: an integer that fits int64 is `int`,
//! anything else `double`.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::text::{char_count, key_prefix as prefix};
use crate::projection::Projections;

mod escape;
#[cfg(test)]
mod parity_tests;
mod scan;

pub use escape::escape_into;

/// Where a string's text is: `len` bytes from `at`, in the input or in [`Doc::unescaped`]
/// (the node's variant, or the entry's `escaped`, says which).
#[derive(Debug, Clone, Copy)]
struct Span {
    at: u32,
    len: u32,
}

/// One node (16 bytes). Containers are followed by their children; an object's keys are in
/// [`Doc::entries`].
#[derive(Debug, Clone, Copy)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    /// A string of the input text, and its number of code points (which cost rules read).
    Str(Span, u32),
    /// A string that had escapes, unescaped into [`Doc::unescaped`].
    Escaped(Span, u32),
    /// `len` elements; the subtree ends before node `end`. A long array's element starts are
    /// at `elements[table..table + len]` (`NONE` for a short one).
    Array {
        len: u32,
        end: u32,
        table: u32,
    },
    /// `len` entries at `entries[first..first + len]`, values in the same order after this
    /// node; the subtree ends before node `end`.
    Object {
        first: u32,
        len: u32,
        end: u32,
    },
    /// A container a projection left out: an object or an array, checked as JSON but not
    /// built; its text is `len` bytes of the input from `at`.
    Skipped {
        object: bool,
        at: u32,
        len: u32,
    },
}

/// One object key, kept apart from the values so that a lookup scans a short contiguous run.
/// The first bytes are inline, so most non-matching keys are rejected without reading the
/// key text, and keys of up to eight bytes are compared without it.
#[derive(Debug, Clone, Copy)]
struct Entry {
    prefix: u64,
    key: Span,
    value: u32,
    escaped: bool,
}

/// A field name prepared once (when an expression is compiled) for lookups in documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    text: Box<str>,
    prefix: u64,
}

impl Key {
    /// Prepares `text`.
    pub fn new(text: &str) -> Key {
        Key {
            text: text.into(),
            prefix: prefix(text),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A parsed JSON document.
#[derive(Debug, Clone)]
pub struct Doc<'s> {
    /// The input.
    text: &'s str,
    /// The text of strings and keys that had escapes, unescaped, one after the other.
    unescaped: String,
    nodes: Vec<Node>,
    entries: Vec<Entry>,
    /// Element starts of long arrays, so that a walk can look ahead without following the
    /// chain of subtree ends.
    elements: Vec<u32>,
    /// Key indexes of large objects (see [`KeyIndex`]), by their first entry, in increasing
    /// order.
    key_indexes: Vec<KeyIndex>,
    /// The open-addressing tables of `key_indexes`, one after the other: entry numbers
    /// relative to the object's first entry, [`NONE`] for an empty slot.
    key_slots: Vec<u32>,
    /// The seeded hash of those tables (made for the first large object).
    hasher: Option<std::hash::RandomState>,
}

/// The hash table of one object with more than [`MASK_MAX`] keys, built while parsing (the
/// duplicate check builds it anyway). A lookup in such an object is charged as a hash lookup,
/// one unit, as cel-go's map; a scan of all keys would let `m.all(k, m[k] == v)` over a
/// request's 150,000 labels run for seconds within the cost limit. The hash has a
/// per-process random key, so chosen keys cannot collide on purpose.
#[derive(Debug, Clone, Copy)]
struct KeyIndex {
    /// The object's first entry.
    first: u32,
    /// Where its table starts in [`Doc::key_slots`]; the table has a power-of-two length.
    at: u32,
    slots: u32,
}

/// A reference to one value of a document.
#[derive(Clone, Copy)]
pub struct Ref<'d, 's> {
    doc: &'d Doc<'s>,
    at: u32,
}

impl fmt::Debug for Ref<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ref({})", self.at)
    }
}

/// A borrowed view of one value.
pub enum Item<'d> {
    /// `null`.
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// Any other number.
    Double(f64),
    /// A string, unescaped.
    Str(&'d str),
    /// An array of this many elements.
    Array(u32),
    /// An object of this many members.
    Object(u32),
    /// An object (`object: true`) or an array that a projection left out of the document
    /// ([`Doc::parse_projected`]): its text was checked as JSON, but nothing of it can be
    /// read. It has no children and no members; it is neither an empty container nor null.
    Skipped {
        /// An object (else an array).
        object: bool,
    },
}

/// How deep a document may nest: an AdmissionReview's object as deep as the API server's JSON
/// decoder accepts one (Go's encoding/json scanner, which sigs.k8s.io/json keeps, allows
/// 10,000 levels), inside the review's own two levels (the review and its `request`). A
/// shallower limit refuses objects the API server accepted (a bypass under `failurePolicy:
/// Ignore`, an outage under `Fail`); without one, a body of nothing but brackets would cost a
/// stack frame per two bytes.
pub const MAX_DEPTH: usize = OBJECT_DEPTH + REVIEW_LEVELS;
const OBJECT_DEPTH: usize = 10_000;
const REVIEW_LEVELS: usize = 2;

/// Up to this depth a parse runs on its thread's stack unchecked (Kubernetes objects nest a
/// dozen levels or so); deeper, each container first makes sure [`RED_ZONE`] bytes of stack
/// are left, moving to a new [`SEGMENT`] on the heap when they are not.
const GROW_FROM: usize = 32;
/// More than one container's parse uses (debug builds have the largest frames).
const RED_ZONE: usize = 128 << 10;
const SEGMENT: usize = 2 << 20;

/// Objects with more keys than this are checked for a repeated key through a hash table;
/// smaller ones (nearly all) through a 64-bit mask of their keys' prefixes and lengths.
const MASK_MAX: usize = 32;

/// The longest part of a key quoted back in an error.
const QUOTED_MAX: usize = 64;

impl<'s> Doc<'s> {
    /// Parses JSON text, borrowing its strings where it can.
    ///
    /// Refused beyond malformed text: nesting deeper than [`MAX_DEPTH`], and an object with a
    /// repeated key. Go's decoder, which the API server uses, keeps a repeated key's last
    /// value where this document would find the first; the API server never sends one (it
    /// encodes its reviews from maps and structs), so a review with one was not written by it,
    /// and refusing it leaves no lookup, iteration or CEL map to disagree about which value
    /// holds. The error names the key and the path of its object.
    pub fn parse(bytes: &'s [u8]) -> Result<Doc<'s>, serde_json::Error> {
        Doc::parse_in(bytes, scan::Mode::Full)
    }

    /// Parses JSON text as [`Doc::parse`] does, building only what `projections` cover: below
    /// each projected path, a container that its projection leaves out becomes one
    /// [`Item::Skipped`] node (its key is kept). Everything not below a projected path is
    /// built in full. The text is checked exactly as [`Doc::parse`] checks it, skipped parts
    /// included: the same input is refused, with the same error.
    pub fn parse_projected(
        bytes: &'s [u8],
        projections: &Projections,
    ) -> Result<Doc<'s>, serde_json::Error> {
        Doc::parse_in(bytes, scan::Mode::route(projections))
    }

    fn parse_in(bytes: &'s [u8], mode: scan::Mode<'_>) -> Result<Doc<'s>, serde_json::Error> {
        let text = utf8(bytes)?;
        let mut b = Build::new(text);
        match scan::parse(&mut b, mode) {
            Ok(()) => Ok(b.finish()),
            // The byte-level parser says only "no": serde_json's parse says why, with its own
            // message and position.
            Err(scan::Fail) => {
                let full = Doc::parse_serde(bytes);
                debug_assert!(
                    full.is_err(),
                    "the byte-level parser refused what the serde_json parse accepts"
                );
                full
            }
        }
    }

    /// The byte-level parse alone, `None` where it refuses (no fallback to serde_json): for
    /// the fuzz targets that compare it with [`Doc::parse_serde`].
    #[doc(hidden)]
    pub fn parse_bytes_only(bytes: &'s [u8], projections: Option<&Projections>) -> Option<Doc<'s>> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut b = Build::new(text);
        let mode = projections.map_or(scan::Mode::Full, scan::Mode::route);
        scan::parse(&mut b, mode).ok().map(|()| b.finish())
    }

    /// Parses through serde_json's parser (the reference [`Doc::parse`] is checked against,
    /// and the source of its error messages).
    #[doc(hidden)]
    pub fn parse_serde(bytes: &'s [u8]) -> Result<Doc<'s>, serde_json::Error> {
        let text = utf8(bytes)?;
        let mut b = Build::new(text);
        let mut de = serde_json::Deserializer::from_str(text);
        // Depth is limited by `MAX_DEPTH` instead (serde_json's limit is 128), and the stack
        // by `nested`.
        de.disable_recursion_limit();
        Builder { b: &mut b }.deserialize(&mut de)?;
        de.end()?;
        let repeated = b.repeated;
        let doc = b.finish();
        match repeated {
            None => Ok(doc),
            Some((object, key)) => {
                let at = match doc.path_to(object) {
                    p if p.is_empty() => "the top level".to_string(),
                    p => p,
                };
                Err(serde::de::Error::custom(format_args!(
                    "duplicate key {} at {at}",
                    quoted(doc.key_of(&key))
                )))
            }
        }
    }

    /// The document's tables as text, doubles by their exact value: two parses of one text
    /// give the same layout (for the tests that compare parsers).
    #[doc(hidden)]
    pub fn layout(&self) -> String {
        let indexes: Vec<(u32, u32, u32)> = self
            .key_indexes
            .iter()
            .map(|k| (k.first, k.at, k.slots))
            .collect();
        format!(
            "nodes {:?}\nentries {:?}\nelements {:?}\nindexes {indexes:?} ({} slots)\nunescaped {:?}",
            self.nodes,
            self.entries,
            self.elements,
            self.key_slots.len(),
            self.unescaped
        )
    }

    /// The path from the root to node `target`, as `a.b[2]["c/d"]` (empty for the root).
    fn path_to(&self, target: u32) -> String {
        use fmt::Write;
        let mut path = String::new();
        let mut at = self.root();
        while at.at != target {
            let inside = |r: &Ref<'_, '_>| r.at <= target && target < self.end_of(r.at);
            let mut c = at.children();
            let next = if c.entry.is_some() {
                std::iter::from_fn(|| c.next_entry())
                    .find(|(_, v)| inside(v))
                    .map(|(k, v)| {
                        let plain = !k.is_empty()
                            && k.bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                        let _ = match (plain, path.is_empty()) {
                            (true, true) => write!(path, "{k}"),
                            (true, false) => write!(path, ".{k}"),
                            (false, _) => write!(path, "[{}]", quoted(k)),
                        };
                        v
                    })
            } else {
                c.enumerate().find(|(_, v)| inside(v)).map(|(i, v)| {
                    let _ = write!(path, "[{i}]");
                    v
                })
            };
            match next {
                Some(n) => at = n,
                None => break,
            }
        }
        path
    }

    /// The document's root value.
    pub fn root(&self) -> Ref<'_, 's> {
        Ref { doc: self, at: 0 }
    }

    /// The text of a string node or key.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn str_of(&self, span: Span, escaped: bool) -> &str {
        let source = if escaped {
            self.unescaped.as_str()
        } else {
            self.text
        };
        let range = span.at as usize..span.at as usize + span.len as usize;
        debug_assert!(source.get(range.clone()).is_some());
        // SAFETY: spans are made only by `Build::borrowed`, from a range that `str::get`
        // accepted on this same text, and by `Build::copied`, around the string it has just
        // appended to `unescaped`; both refuse what does not fit in `u32`. So the range is in
        // bounds and on character boundaries, and neither text changes after parsing (a
        // `Doc` gives no mutable access). A checked `get` here was the most expensive step
        // of reading a string field.
        unsafe { source.get_unchecked(range) }
    }

    /// The text of an entry's key.
    fn key_of(&self, e: &Entry) -> &str {
        self.str_of(e.key, e.escaped)
    }

    /// The node after the subtree that starts at `at`.
    fn end_of(&self, at: u32) -> u32 {
        match self.nodes[at as usize] {
            Node::Array { end, .. } | Node::Object { end, .. } => end,
            _ => at + 1,
        }
    }

    /// The first [`AHEAD_KEYS`] entries of the object starting at `at` (none for another
    /// value).
    #[inline]
    fn first_entries(&self, at: u32) -> &[Entry] {
        match self.nodes.get(at as usize) {
            Some(Node::Object { first, len, .. }) => {
                let (first, n) = (*first as usize, (*len as usize).min(AHEAD_KEYS));
                self.entries.get(first..first + n).unwrap_or(&[])
            }
            _ => &[],
        }
    }

    /// Requests what a walk will read of the elements after element `y` of a long array
    /// whose element starts are `starts` (see [`AHEAD_HEADER`]). Addresses are only computed
    /// for the hint, never dereferenced, so none needs checking.
    #[inline]
    fn look_ahead(&self, starts: &[u32], y: usize) {
        let nodes = self.nodes.as_ptr();
        if let Some(&at) = starts.get(y + AHEAD_HEADER) {
            prefetch_lines(nodes.wrapping_add(at as usize), 1);
        }
        if let Some(&at) = starts.get(y + AHEAD_KEYS_AT) {
            if let Some(Node::Object { first, .. }) = self.nodes.get(at as usize) {
                prefetch_lines(self.entries.as_ptr().wrapping_add(*first as usize), 2);
            }
        }
        if let Some(&at) = starts.get(y + AHEAD_VALUES) {
            for e in self.first_entries(at) {
                prefetch_lines(nodes.wrapping_add(e.value as usize), 1);
            }
        }
        if let Some(&at) = starts.get(y + AHEAD_TEXT) {
            let text = self.text.as_ptr();
            for e in self.first_entries(at) {
                if let Some(Node::Str(s, _)) = self.nodes.get(e.value as usize) {
                    prefetch_lines(text.wrapping_add(s.at as usize), 1);
                }
            }
        }
    }

    /// Converts to `serde_json::Value` (for output and tests).
    pub fn to_value(&self, at: u32) -> serde_json::Value {
        Ref { doc: self, at }.to_value()
    }
}

impl<'d, 's> Ref<'d, 's> {
    /// The document this node is in.
    pub fn doc(&self) -> &'d Doc<'s> {
        self.doc
    }

    /// The node's position in its document.
    pub fn index(&self) -> u32 {
        self.at
    }

    /// The node at position `at` of `doc` (a position [`Ref::index`] gave).
    pub fn at(doc: &'d Doc<'s>, at: u32) -> Self {
        Ref { doc, at }
    }

    /// What the node holds.
    #[inline(always)]
    pub fn item(&self) -> Item<'d> {
        match self.doc.nodes[self.at as usize] {
            Node::Null => Item::Null,
            Node::Bool(b) => Item::Bool(b),
            Node::Int(i) => Item::Int(i),
            Node::Double(d) => Item::Double(d),
            Node::Str(s, _) => Item::Str(self.doc.str_of(s, false)),
            Node::Escaped(s, _) => Item::Str(self.doc.str_of(s, true)),
            Node::Array { len, .. } => Item::Array(len),
            Node::Object { len, .. } => Item::Object(len),
            Node::Skipped { object, .. } => Item::Skipped { object },
        }
    }

    /// This string and its number of code points (`None` for another value).
    #[inline(always)]
    pub fn str_chars(&self) -> Option<(&'d str, u32)> {
        match self.doc.nodes[self.at as usize] {
            Node::Str(s, chars) => Some((self.doc.str_of(s, false), chars)),
            Node::Escaped(s, chars) => Some((self.doc.str_of(s, true), chars)),
            _ => None,
        }
    }

    /// The value of `key` in this object.
    pub fn get(&self, key: &str) -> Option<Ref<'d, 's>> {
        self.lookup(key, prefix(key))
    }

    /// The value of a prepared `key` in this object.
    #[inline(always)]
    pub fn get_key(&self, key: &Key) -> Option<Ref<'d, 's>> {
        self.lookup(&key.text, key.prefix)
    }

    #[inline(always)]
    fn lookup(&self, key: &str, p: u64) -> Option<Ref<'d, 's>> {
        let Node::Object { first, len, .. } = self.doc.nodes[self.at as usize] else {
            return None;
        };
        if len as usize > MASK_MAX {
            return self.indexed_lookup(first, key, p);
        }
        self.doc.entries[first as usize..(first + len) as usize]
            .iter()
            // Up to 8 bytes the prefix is the whole key, so equal length and prefix suffice.
            .find(|e| {
                e.prefix == p
                    && e.key.len as usize == key.len()
                    && (key.len() <= 8 || self.doc.key_of(e) == key)
            })
            .map(|e| Ref {
                doc: self.doc,
                at: e.value,
            })
    }

    /// A lookup in a large object, through its [`KeyIndex`].
    #[cold]
    fn indexed_lookup(&self, first: u32, key: &str, p: u64) -> Option<Ref<'d, 's>> {
        use std::hash::BuildHasher;
        let doc = self.doc;
        let i = doc
            .key_indexes
            .binary_search_by_key(&first, |k| k.first)
            .ok()?;
        let ix = doc.key_indexes.get(i)?;
        let table = doc
            .key_slots
            .get(ix.at as usize..(ix.at as usize).checked_add(ix.slots as usize)?)?;
        let mask = table.len().checked_sub(1)?;
        let mut slot = doc.hasher.as_ref()?.hash_one(key) as usize & mask;
        // The table is at most half full, so an empty slot ends every probe.
        loop {
            let rel = *table.get(slot)?;
            if rel == NONE {
                return None;
            }
            let e = doc
                .entries
                .get((first as usize).checked_add(rel as usize)?)?;
            if e.prefix == p
                && e.key.len as usize == key.len()
                && (key.len() <= 8 || doc.key_of(e) == key)
            {
                return Some(Ref { doc, at: e.value });
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The `i`-th element of this array.
    pub fn element(&self, i: usize) -> Option<Ref<'d, 's>> {
        let Node::Array { len, table, .. } = self.doc.nodes[self.at as usize] else {
            return None;
        };
        if i >= len as usize {
            return None;
        }
        if table != NONE {
            let at = self.doc.elements.get(table as usize + i).copied()?;
            return Some(Ref { doc: self.doc, at });
        }
        let mut pos = self.at + 1;
        for _ in 0..i {
            pos = self.doc.end_of(pos);
        }
        Some(Ref {
            doc: self.doc,
            at: pos,
        })
    }

    /// The elements of an array, or the values of an object, in order.
    pub fn children(&self) -> Children<'d, 's> {
        let (len, end, first, table) = match self.doc.nodes[self.at as usize] {
            Node::Array { len, end, table } => (len, end, None, table),
            Node::Object { first, len, end } => (len, end, Some(first), NONE),
            _ => (0, self.at + 1, None, NONE),
        };
        let starts = match table {
            NONE => &[][..],
            t => {
                let t = t as usize;
                self.doc.elements.get(t..t + len as usize).unwrap_or(&[])
            }
        };
        Children {
            doc: self.doc,
            pos: self.at + 1,
            end,
            left: len as usize,
            entry: first,
            starts,
            yielded: 0,
        }
    }

    /// Whether a projection left this container out ([`Item::Skipped`]).
    pub fn is_skipped(&self) -> bool {
        matches!(self.doc.nodes[self.at as usize], Node::Skipped { .. })
    }

    /// The JSON text of a skipped container (`None` for any other node).
    pub fn skipped_text(&self) -> Option<&'s str> {
        match self.doc.nodes[self.at as usize] {
            Node::Skipped { at, len, .. } => self.doc.text.get(at as usize..(at + len) as usize),
            _ => None,
        }
    }

    /// A skipped container's value, read from its text by a full parse (which gives what the
    /// full parse of the whole document gives here: the text was checked in place).
    #[cold]
    fn skipped_value(&self) -> serde_json::Value {
        self.skipped_text()
            .and_then(|t| Doc::parse(t.as_bytes()).ok())
            .map_or(serde_json::Value::Null, |d| d.root().to_value())
    }

    /// Recursive, one level per nesting level: for tests and output, not the request path.
    /// A skipped container is read from its text, so the value is always the full parse's.
    pub fn to_value(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self.item() {
            Item::Null => J::Null,
            Item::Bool(b) => J::Bool(b),
            Item::Int(i) => J::from(i),
            Item::Double(d) => serde_json::Number::from_f64(d).map_or(J::Null, J::Number),
            Item::Str(s) => J::String(s.to_string()),
            Item::Array(_) => J::Array(self.children().map(|c| c.to_value()).collect()),
            Item::Skipped { .. } => self.skipped_value(),
            Item::Object(_) => {
                let mut c = self.children();
                J::Object(
                    std::iter::from_fn(|| c.next_entry())
                        .map(|(k, v)| (k.to_string(), v.to_value()))
                        .collect(),
                )
            }
        }
    }
}

/// Arrays longer than this get an element table and are walked with look-ahead.
const PREFETCH_MIN_LEN: usize = 64;
/// How many of an element's first keys have their values (and strings) requested ahead.
const AHEAD_KEYS: usize = 4;
/// No table.
const NONE: u32 = u32::MAX;

/// How far ahead (in elements) a long array walk requests each stage: the header, then its
/// keys, then the keys' value nodes, then their string text. Each stage reads what the stage
/// before requested two elements earlier, so the latency of every load overlaps the
/// evaluation of two elements.
const AHEAD_HEADER: usize = 8;
const AHEAD_KEYS_AT: usize = 6;
const AHEAD_VALUES: usize = 4;
const AHEAD_TEXT: usize = 2;

/// Asks the CPU to start loading `lines` cache lines from `p` into the cache; no effect on
/// other architectures.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_lines<T>(p: *const T, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for l in 0..lines {
        let at = p.cast::<i8>().wrapping_add(l * 64);
        // SAFETY: PREFETCHT0 is a hint. It changes nothing the program can observe and never
        // faults, whatever the address (the pointer is never dereferenced).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines);
}

/// Iterates an array's elements or an object's values (use [`Children::next_entry`] for keys).
pub struct Children<'d, 's> {
    doc: &'d Doc<'s>,
    pos: u32,
    end: u32,
    left: usize,
    /// For an object: the entry of the next value.
    entry: Option<u32>,
    /// For a long array: its element starts (else empty), and the number of elements yielded
    /// so far.
    starts: &'d [u32],
    yielded: usize,
}

impl<'d, 's> Children<'d, 's> {
    /// The next object entry: key and value.
    pub fn next_entry(&mut self) -> Option<(&'d str, Ref<'d, 's>)> {
        let e = self.entry?;
        let v = self.next()?;
        Some((self.doc.key_of(&self.doc.entries[e as usize]), v))
    }
}

impl<'d, 's> Iterator for Children<'d, 's> {
    type Item = Ref<'d, 's>;

    #[inline]
    fn next(&mut self) -> Option<Ref<'d, 's>> {
        if self.pos >= self.end {
            return None;
        }
        let at = self.pos;
        // Only long arrays leave the cache (a short one was just parsed and is still in it);
        // they have their element starts, which also spare reading the element's node here.
        if self.starts.is_empty() {
            self.pos = self.doc.end_of(at);
        } else {
            self.doc.look_ahead(self.starts, self.yielded);
            self.pos = self
                .starts
                .get(self.yielded + 1)
                .copied()
                .unwrap_or(self.end);
        }
        self.yielded += 1;
        self.left = self.left.saturating_sub(1);
        if let Some(e) = &mut self.entry {
            *e += 1;
        }
        Some(Ref { doc: self.doc, at })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Children<'_, '_> {}

/// The document under construction. Keys wait in `pending` until their object is complete,
/// then move to `entries` as one contiguous run (nested objects complete first).
struct Build<'s> {
    text: &'s str,
    unescaped: String,
    nodes: Vec<Node>,
    entries: Vec<Entry>,
    pending: Vec<Entry>,
    elements: Vec<u32>,
    /// Element starts of the arrays being built (nested arrays complete first).
    pending_elements: Vec<u32>,
    /// Containers open around the value being parsed.
    depth: usize,
    /// The first object found with a repeated key: its node and the key's second entry.
    repeated: Option<(u32, Entry)>,
    /// Scratch for [`repeated_key`], and its hash key (made on first use).
    table: Vec<u32>,
    hasher: Option<std::hash::RandomState>,
    /// The key tables of large objects, kept for lookups (see [`KeyIndex`]).
    key_indexes: Vec<KeyIndex>,
    key_slots: Vec<u32>,
}

impl<'s> Build<'s> {
    /// The span of a string serde_json lent from the input text.
    fn borrowed<E: serde::de::Error>(&mut self, v: &'s str) -> Result<(Span, bool), E> {
        // A lent string lies inside the text; should one not, it is copied like the others.
        let at = (v.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        match self.text.get(at..at.wrapping_add(v.len())) {
            Some(same) if std::ptr::eq(same, v) => Ok((span(at, v.len())?, false)),
            _ => self.copied(v),
        }
    }

    /// The span of a string copied (unescaped) into the buffer.
    fn copied<E: serde::de::Error>(&mut self, v: &str) -> Result<(Span, bool), E> {
        let at = self.unescaped.len();
        let span = span(at, v.len())?;
        self.unescaped.push_str(v);
        Ok((span, true))
    }

    fn string(&mut self, v: &str, (span, escaped): (Span, bool)) {
        // Fits: no longer than the span.
        let chars = char_count(v) as u32;
        self.nodes.push(if escaped {
            Node::Escaped(span, chars)
        } else {
            Node::Str(span, chars)
        });
    }
}

/// The input as text, or the error serde_json's parse would give at its first invalid byte.
fn utf8(bytes: &[u8]) -> Result<&str, serde_json::Error> {
    // Validating the UTF-8 once lets strings be spans of the input, and serde_json's `str`
    // reader skips its own validation of every string.
    std::str::from_utf8(bytes).map_err(|e| {
        // Positioned as serde_json positions its errors.
        let valid = &bytes[..e.valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = valid.len() - valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
        serde::de::Error::custom(format!("invalid UTF-8 at line {line} column {column}"))
    })
}

impl<'s> Build<'s> {
    /// Completes the array node at `at` once its `len` elements are built, their starts
    /// pending from `mark` on: a long array keeps them as its element table.
    fn close_array(&mut self, at: usize, mark: usize, len: usize) {
        let table = if len > PREFETCH_MIN_LEN {
            let table = index(self.elements.len());
            self.elements
                .extend_from_slice(&self.pending_elements[mark..]);
            table
        } else {
            NONE
        };
        self.pending_elements.truncate(mark);
        self.nodes[at] = Node::Array {
            len: index(len),
            end: index(self.nodes.len()),
            table,
        };
    }

    fn new(text: &'s str) -> Build<'s> {
        Build {
            text,
            unescaped: String::new(),
            nodes: Vec::with_capacity(text.len() / 16 + 4),
            // Sized for a usual document (an object member every 20 bytes or so) and capped,
            // so that a small review does not grow them from empty and a large one, mostly
            // skipped, does not reserve for what it skips.
            entries: Vec::with_capacity((text.len() / 20 + 8).min(4096)),
            pending: Vec::with_capacity(32),
            elements: Vec::new(),
            pending_elements: Vec::new(),
            depth: 0,
            repeated: None,
            table: Vec::new(),
            hasher: None,
            key_indexes: Vec::new(),
            key_slots: Vec::new(),
        }
    }

    fn finish(self) -> Doc<'s> {
        Doc {
            text: self.text,
            unescaped: self.unescaped,
            nodes: self.nodes,
            entries: self.entries,
            elements: self.elements,
            key_indexes: self.key_indexes,
            key_slots: self.key_slots,
            hasher: self.hasher,
        }
    }
}

/// `s` quoted for an error, cut to 64 bytes (a key or value from the input can be
/// as long as the input).
pub fn quoted(s: &str) -> String {
    let mut cut = s.len().min(QUOTED_MAX);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = if cut < s.len() { "..." } else { "" };
    format!("{:?}{more}", &s[..cut])
}

/// The text of an entry's key while the document is built.
fn key_text<'t>(text: &'t str, unescaped: &'t str, e: &Entry) -> &'t str {
    let source = if e.escaped { unescaped } else { text };
    let (at, len) = (e.key.at as usize, e.key.len as usize);
    source.get(at..at + len).unwrap_or("")
}

/// Whether two entries have the same key. Up to 8 bytes the prefix is the whole key.
#[inline]
fn same_key(text: &str, unescaped: &str, a: &Entry, b: &Entry) -> bool {
    a.prefix == b.prefix
        && a.key.len == b.key.len
        && (a.key.len <= 8 || key_text(text, unescaped, a) == key_text(text, unescaped, b))
}

/// The bit of a key's prefix and length in the mask of a small object's keys (see
/// [`repeated_key`]): two keys with different bits differ.
#[inline(always)]
fn mask_bit(e: &Entry) -> u64 {
    let mixed = (e.prefix ^ u64::from(e.key.len)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    1u64 << (mixed >> 58)
}

/// The first entry of `keys` whose key an earlier one has.
///
/// A small object costs a multiply and a bit test per key: each key's prefix and length set
/// one bit of a mask, and only a key whose bit is already set is compared with the keys
/// before it (a duplicate always is; other keys rarely, and never more than [`MASK_MAX`]
/// times). A large object goes through an open-addressing table of entry indices (`table`,
/// reused), hashed with a per-process random key, so that chosen keys cannot make the check
/// quadratic.
fn repeated_key(
    text: &str,
    unescaped: &str,
    keys: &[Entry],
    table: &mut Vec<u32>,
    hasher: &mut Option<std::hash::RandomState>,
) -> Option<usize> {
    use std::hash::BuildHasher;
    if keys.len() <= MASK_MAX {
        let mut seen = 0u64;
        for (i, e) in keys.iter().enumerate() {
            let bit = mask_bit(e);
            if seen & bit != 0 && keys.iter().take(i).any(|k| same_key(text, unescaped, k, e)) {
                return Some(i);
            }
            seen |= bit;
        }
        return None;
    }
    let slots = (keys.len() * 2).next_power_of_two();
    table.clear();
    table.resize(slots, NONE);
    let hasher = hasher.get_or_insert_with(std::hash::RandomState::new);
    for (i, e) in keys.iter().enumerate() {
        let mut slot = hasher.hash_one(key_text(text, unescaped, e)) as usize & (slots - 1);
        loop {
            // In bounds: `slot` is masked to the table's power-of-two length, and entries
            // stored are indices of earlier keys.
            match table[slot] {
                NONE => {
                    // Fits: an object has fewer than `u32::MAX` keys (see `index`).
                    table[slot] = i as u32;
                    break;
                }
                j if same_key(text, unescaped, &keys[j as usize], e) => return Some(i),
                _ => slot = (slot + 1) & (slots - 1),
            }
        }
    }
    None
}

/// Runs the parse of one container's content one level deeper: refused past [`MAX_DEPTH`],
/// and past [`GROW_FROM`] on a new stack segment when the stack runs low.
#[inline]
fn nested<'s, E: serde::de::Error>(
    b: &mut Build<'s>,
    body: impl FnOnce(&mut Build<'s>) -> Result<(), E>,
) -> Result<(), E> {
    if b.depth >= MAX_DEPTH {
        return Err(E::custom(format_args!(
            "JSON nested deeper than {MAX_DEPTH} levels (the API server accepts an object \
             nested {OBJECT_DEPTH} levels deep; a review adds {REVIEW_LEVELS})"
        )));
    }
    b.depth += 1;
    let result = if b.depth <= GROW_FROM {
        body(b)
    } else {
        with_stack(|| body(b))
    };
    b.depth -= 1;
    result
}

/// Runs `f`, one level of a recursion over a document's values (formatting a list of
/// lists...), on a new stack segment when the thread's stack runs low: a document may nest
/// [`MAX_DEPTH`] levels, deeper than a thread's stack holds such a recursion.
#[inline]
pub fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// A span, if both its ends fit in `u32` (a request body is far smaller).
fn span<E: serde::de::Error>(at: usize, len: usize) -> Result<Span, E> {
    match (
        u32::try_from(at),
        u32::try_from(len),
        u32::try_from(at + len),
    ) {
        (Ok(at), Ok(len), Ok(_)) => Ok(Span { at, len }),
        _ => Err(E::custom("JSON document too large")),
    }
}

/// Builds nodes from serde_json's events.
struct Builder<'v, 's> {
    b: &'v mut Build<'s>,
}

/// A container longer than `u32::MAX` nodes cannot come from a request body; the limit keeps
/// nodes small.
fn index(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl<'de> DeserializeSeed<'de> for Builder<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Builder<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.b.nodes.push(Node::Null);
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.b.nodes.push(Node::Null);
        Ok(())
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.b.nodes.push(Node::Bool(v));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.b.nodes.push(Node::Int(v));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.b
            .nodes
            .push(i64::try_from(v).map_or(Node::Double(v as f64), Node::Int));
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.b.nodes.push(Node::Double(v));
        Ok(())
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<(), E> {
        let s = self.b.borrowed(v)?;
        self.b.string(v, s);
        Ok(())
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        let s = self.b.copied(v)?;
        self.b.string(v, s);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        nested(self.b, |b| array(b, seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        nested(self.b, |b| object(b, map))
    }
}

fn array<'de, A: SeqAccess<'de>>(b: &mut Build<'de>, mut seq: A) -> Result<(), A::Error> {
    let at = b.nodes.len();
    b.nodes.push(Node::Array {
        len: 0,
        end: 0,
        table: NONE,
    });
    let mark = b.pending_elements.len();
    let mut len = 0usize;
    loop {
        let start = index(b.nodes.len());
        if seq.next_element_seed(Builder { b: &mut *b })?.is_none() {
            break;
        }
        b.pending_elements.push(start);
        len += 1;
    }
    b.close_array(at, mark, len);
    Ok(())
}

fn object<'de, A: MapAccess<'de>>(b: &mut Build<'de>, mut map: A) -> Result<(), A::Error> {
    let at = b.nodes.len();
    b.nodes.push(Node::Object {
        first: 0,
        len: 0,
        end: 0,
    });
    let mark = b.pending.len();
    while let Some(key) = map.next_key_seed(KeySeed { b: &mut *b })? {
        b.pending.push(key);
        map.next_value_seed(Builder { b: &mut *b })?;
    }
    if b.repeated.is_none() {
        let keys = &b.pending[mark..];
        if let Some(i) = repeated_key(b.text, &b.unescaped, keys, &mut b.table, &mut b.hasher) {
            b.repeated = Some((index(at), keys[i]));
        }
    }
    let first = index(b.entries.len());
    let len = index(b.pending.len() - mark);
    // The duplicate check of a large object has just filled `table` with its keys: keep it
    // as the object's lookup index (a failed check fails the parse anyway).
    if len as usize > MASK_MAX && b.repeated.is_none() {
        b.key_indexes.push(KeyIndex {
            first,
            at: index(b.key_slots.len()),
            slots: index(b.table.len()),
        });
        b.key_slots.extend_from_slice(&b.table);
    }
    b.entries.extend(b.pending.drain(mark..));
    b.nodes[at] = Node::Object {
        first,
        len,
        end: index(b.nodes.len()),
    };
    Ok(())
}

/// Reads one key into an entry whose value is the next node.
struct KeySeed<'v, 's> {
    b: &'v mut Build<'s>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, 'de> {
    type Value = Entry;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_str(self)
    }
}

impl KeySeed<'_, '_> {
    fn entry(&self, text: &str, (key, escaped): (Span, bool)) -> Entry {
        Entry {
            prefix: prefix(text),
            key,
            value: index(self.b.nodes.len()),
            escaped,
        }
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, 'de> {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Entry, E> {
        let span = self.b.borrowed(v)?;
        Ok(self.entry(v, span))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Entry, E> {
        let span = self.b.copied(v)?;
        Ok(self.entry(v, span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_arrays_get_element_tables_that_match_the_walk() {
        // 100 objects, each holding a long array of its own (nested tables complete first).
        let items: Vec<String> = (0..100)
            .map(|i| {
                format!(
                    r#"{{"n": {i}, "xs": [{}]}}"#,
                    vec!["1"; 70 + i % 3].join(",")
                )
            })
            .collect();
        let text = format!(r#"{{"short": [1, 2], "items": [{}]}}"#, items.join(","));
        let doc = Doc::parse(text.as_bytes()).unwrap();
        let table_of = |r: Ref<'_, '_>| match doc.nodes[r.at as usize] {
            Node::Array { table, .. } => table,
            _ => panic!("not an array"),
        };
        let root = doc.root();
        assert_eq!(table_of(root.get("short").unwrap()), NONE);
        let items = root.get("items").unwrap();
        let table = table_of(items) as usize;
        let mut seen = 0;
        for (i, item) in items.children().enumerate() {
            assert_eq!(doc.elements[table + i], item.at, "element {i}");
            assert_eq!(item.get("n").unwrap().to_value(), serde_json::json!(i));
            let xs = item.get("xs").unwrap();
            let inner = table_of(xs) as usize;
            for (k, x) in xs.children().enumerate() {
                assert_eq!(doc.elements[inner + k], x.at);
            }
            assert_eq!(xs.children().count(), 70 + i % 3);
            seen += 1;
        }
        assert_eq!(seen, 100);
        // Indexing a long array reads its table.
        assert_eq!(items.element(57).unwrap().at, doc.elements[table + 57]);
        assert_eq!(
            items.element(99).unwrap().get("n").unwrap().to_value(),
            json!(99)
        );
        assert!(items.element(100).is_none());
    }
    use serde_json::json;

    #[test]
    fn round_trips_and_navigates() {
        let text = br#"{"a": {"b": [1, 2.5, "x\"y", null, true, {"c": []}]}, "n": 18446744073709551615, "e": "\u00e9"}"#;
        let doc = Doc::parse(text).unwrap();
        let expected: serde_json::Value = serde_json::from_slice(text).unwrap();
        assert_eq!(
            doc.root().to_value(),
            json!({"a": {"b": [1, 2.5, "x\"y", null, true, {"c": []}]}, "n": 18446744073709551615.0, "e": "é"})
        );
        assert_eq!(doc.root().get("a").unwrap().to_value(), expected["a"]);
        let b = doc.root().get("a").unwrap().get("b").unwrap();
        assert!(matches!(b.item(), Item::Array(6)));
        assert!(matches!(b.element(2).unwrap().item(), Item::Str("x\"y")));
        assert!(matches!(
            b.element(5).unwrap().get("c").unwrap().item(),
            Item::Array(0)
        ));
        assert!(b.element(6).is_none());
        assert!(doc.root().get("missing").is_none());
        let keys: Vec<&str> = {
            let mut c = doc.root().children();
            std::iter::from_fn(|| c.next_entry().map(|(k, _)| k)).collect()
        };
        assert_eq!(keys, ["a", "n", "e"]);
    }

    #[test]
    fn nodes_and_entries_stay_small() {
        assert_eq!(std::mem::size_of::<Node>(), 16);
        assert_eq!(std::mem::size_of::<Entry>(), 24);
    }

    #[test]
    fn escaped_keys_and_strings_are_unescaped() {
        let text = br#"{"a\u0062": "x\ny", "long\tkey-name": {"k": "\u65e5\u672c"}, "plain": "p"}"#;
        let doc = Doc::parse(text).unwrap();
        let root = doc.root();
        assert!(matches!(root.get("ab").unwrap().item(), Item::Str("x\ny")));
        let inner = root.get("long\tkey-name").unwrap();
        assert!(matches!(inner.get("k").unwrap().item(), Item::Str("日本")));
        // Code points are counted once, at parse time, escaped or not.
        assert_eq!(inner.get("k").unwrap().str_chars(), Some(("日本", 2)));
        let counted = Doc::parse("[\"日本é-x\"]".as_bytes()).unwrap();
        let first = counted.root().element(0).unwrap();
        assert_eq!(first.str_chars(), Some(("日本é-x", 5)));
        assert_eq!(crate::Value::from_doc(first).size(), Some(5));
        assert_eq!(root.str_chars(), None);
        assert!(matches!(
            root.get_key(&Key::new("plain")).unwrap().item(),
            Item::Str("p")
        ));
        assert_eq!(
            root.to_value(),
            json!({"ab": "x\ny", "long\tkey-name": {"k": "日本"}, "plain": "p"})
        );
    }

    /// Numbers are read as Go's `strconv.ParseFloat` reads them for the API server's
    /// decoder: correctly rounded (serde_json's default parser may be one unit in the last
    /// place off, `7e106` read as 7.0000000000000004e106; its `float_roundtrip` feature is on),
    /// by both parsers, projected or not.
    #[test]
    fn numbers_are_correctly_rounded_as_go_reads_them() {
        for text in [
            "7e106",
            "6.277308222870703e+106",
            "9007199254740993.0",
            "2.2250738585072014e-308",
            "1.7976931348623157e308",
            "4.9e-324",
            "0.1",
            "123456789012345678901234567890",
        ] {
            let expected: f64 = text.parse().unwrap();
            let body = format!(r#"{{"a":{text},"b":[{text}]}}"#);
            let docs = [
                Doc::parse(body.as_bytes()).unwrap(),
                Doc::parse_serde(body.as_bytes()).unwrap(),
            ];
            for doc in &docs {
                let root = doc.root();
                for r in [
                    root.get("a").unwrap(),
                    root.get("b").unwrap().children().next().unwrap(),
                ] {
                    match r.item() {
                        Item::Double(d) => assert_eq!(d.to_bits(), expected.to_bits(), "{text}"),
                        _ => panic!("{text}: not read as a double"),
                    }
                }
            }
        }
    }

    #[test]
    fn malformed_input_is_an_error() {
        let bad_utf8 = Doc::parse(b"{\"a\": \"\xff\"}").unwrap_err().to_string();
        assert_eq!(bad_utf8, "invalid UTF-8 at line 1 column 8");
        assert!(Doc::parse(b"{\"a\": }").is_err());
        assert!(Doc::parse(b"[1, 2").is_err());
        assert!(Doc::parse(b"{} extra").is_err());
    }

    fn nested(levels: usize) -> String {
        format!(
            "{}0{}",
            r#"[{"a":"#.repeat(levels / 2),
            r#"}]"#.repeat(levels / 2)
        )
    }

    #[test]
    fn nesting_is_accepted_to_the_api_servers_depth_and_refused_beyond() {
        // Runs on the test's own thread (2 MiB): the parse grows its stack on the heap.
        assert_eq!(MAX_DEPTH, 10_002);
        let deepest = nested(MAX_DEPTH);
        let doc = Doc::parse(deepest.as_bytes()).unwrap();
        let mut at = doc.root();
        for _ in 0..MAX_DEPTH / 2 {
            at = at.element(0).unwrap().get("a").unwrap();
        }
        assert!(matches!(at.item(), Item::Int(0)));
        // One more level, refused where it opens.
        let too_deep = format!("[{}]", nested(MAX_DEPTH));
        let e = Doc::parse(too_deep.as_bytes()).unwrap_err().to_string();
        // Level 10,003 is the `{` of the 5,001st `[{"a":`, after the outer `[`.
        let column = 1 + (MAX_DEPTH / 2 - 1) * r#"[{"a":"#.len() + 2;
        assert!(
            e.starts_with("JSON nested deeper than 10002 levels")
                && e.ends_with(&format!("at line 1 column {column}")),
            "{e}"
        );
        // Far deeper input fails as early, without exhausting the stack.
        let e = Doc::parse(nested(1_000_000).as_bytes()).unwrap_err();
        assert!(e.to_string().starts_with("JSON nested deeper"), "{e}");
    }

    #[test]
    fn repeated_keys_are_refused_with_the_objects_path() {
        let err = |text: &str| Doc::parse(text.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            err(r#"{"a": 1, "a": 2}"#),
            r#"duplicate key "a" at the top level"#
        );
        assert_eq!(
            err(r#"{"x": [0, {"y": {"long-key-name": 1, "b": 2, "long-key-name": 3}}]}"#),
            r#"duplicate key "long-key-name" at x[1].y"#
        );
        // Escaped and plain spellings of one key; a key that is no identifier is quoted.
        assert_eq!(
            err(r#"{"a/b c": {"k\u00e9": 1, "ké": 2}}"#),
            r#"duplicate key "ké" at ["a/b c"]"#
        );
        // The first repeated key found is reported.
        assert_eq!(
            err(r#"{"o": {"p": 1, "p": 2}, "q": 0, "q": 1}"#),
            r#"duplicate key "p" at o"#
        );
        // Keys that share their first eight bytes and their length differ.
        let similar = r#"{"annotation-1": 1, "annotation-2": 2, "a": 3, "b\u0000": 4, "b": 5}"#;
        assert!(Doc::parse(similar.as_bytes()).is_ok());
    }

    #[test]
    fn every_object_size_finds_its_repeated_key() {
        for n in 1..=MASK_MAX + 8 {
            // Long keys sharing their first eight bytes, and short ones.
            let keys: Vec<String> = (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        format!("container-{i}")
                    } else {
                        format!("k{i}")
                    }
                })
                .collect();
            let fields: Vec<String> = keys.iter().map(|k| format!("\"{k}\": 0")).collect();
            let unique = format!("{{{}}}", fields.join(","));
            assert!(Doc::parse(unique.as_bytes()).is_ok(), "{n} keys");
            for k in [&keys[0], &keys[n / 2], &keys[n - 1]] {
                let text = format!("{{{}, \"{k}\": 1}}", fields.join(","));
                let e = Doc::parse(text.as_bytes()).unwrap_err().to_string();
                assert_eq!(
                    e,
                    format!("duplicate key \"{k}\" at the top level"),
                    "{n} keys"
                );
            }
        }
    }

    #[test]
    fn large_objects_are_checked_through_the_table() {
        let keys: Vec<String> = (0..1000)
            .map(|i| format!("\"annotation-{i:04}\": {i}"))
            .collect();
        let unique = format!("{{{}}}", keys.join(","));
        let doc = Doc::parse(unique.as_bytes()).unwrap();
        assert!(matches!(doc.root().item(), Item::Object(1000)));
        for repeat in [0, 999] {
            let text = format!(
                "{{\"m\": {{{}, \"annotation-{repeat:04}\": 0}}}}",
                keys.join(",")
            );
            let e = Doc::parse(text.as_bytes()).unwrap_err().to_string();
            assert_eq!(e, format!("duplicate key \"annotation-{repeat:04}\" at m"));
        }
        // Just over the mask's size, with the repeat at either end.
        let small: Vec<String> = (0..MASK_MAX + 1).map(|i| format!("\"k{i}\": 0")).collect();
        assert!(Doc::parse(format!("{{{}}}", small.join(",")).as_bytes()).is_ok());
        let text = format!("{{{}, \"k0\": 1}}", small.join(","));
        assert_eq!(
            Doc::parse(text.as_bytes()).unwrap_err().to_string(),
            r#"duplicate key "k0" at the top level"#
        );
    }

    /// Every key of objects on both sides of the index threshold, nested and escaped, is
    /// found through the same lookup, and keys that are absent (or differ only past the
    /// inline prefix) are not.
    #[test]
    fn lookups_in_large_objects_go_through_the_index() {
        for n in [MASK_MAX, MASK_MAX + 1, 5_000] {
            let keys: Vec<String> = (0..n)
                .map(|i| format!("\"label-long-prefix-{i}\": {i}, \"k\\u00e9{i}\": \"v{i}\""))
                .collect();
            let text = format!(
                r#"{{"inner": {{"a": 1}}, "m": {{{}}}, "z": 2}}"#,
                keys.join(",")
            );
            let doc = Doc::parse(text.as_bytes()).unwrap();
            let m = doc.root().get("m").unwrap();
            assert_eq!(doc.key_indexes.len(), usize::from(2 * n > MASK_MAX));
            for i in 0..n {
                let v = m.get(&format!("label-long-prefix-{i}")).unwrap();
                assert_eq!(v.to_value(), json!(i));
                let key = Key::new(&format!("ké{i}"));
                assert_eq!(m.get_key(&key).unwrap().to_value(), json!(format!("v{i}")));
            }
            for absent in [
                "label-long-prefix-",
                "label-long-prefix-x",
                "ké",
                "a",
                "",
                "z",
            ] {
                assert!(m.get(absent).is_none(), "{n}: {absent}");
            }
            assert_eq!(doc.root().get("z").unwrap().to_value(), json!(2));
            assert_eq!(
                doc.root()
                    .get("inner")
                    .unwrap()
                    .get("a")
                    .unwrap()
                    .to_value(),
                json!(1)
            );
        }
    }
}
