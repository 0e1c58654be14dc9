//! Runtime CEL values.
//!
//! A [`Value`] either borrows the request JSON in place (`List::Json`, `Map::Json`,
//! `Str::Borrowed`) or shares owned data through `Arc`, so cloning a value is never a deep
//! copy and reading `object.spec.containers` converts nothing. JSON integers are `int` (an
//! integer outside int64 is a `double`), other numbers `double`, as Kubernetes' unstructured
//! conversion does. Equality is CEL's heterogeneous equality; ordering is defined only within
//! a kind (numbers across kinds).

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hashbrown::{DefaultHashBuilder, HashTable};
use serde_json::Value as Json;

use super::error::EvalError;
use super::json::{Item, Key, Ref};
use super::meter::Ticker;
use super::text::char_count;

/// The bytes one element slot of a built list takes (map entries take two).
pub(crate) const VALUE_BYTES: u64 = std::mem::size_of::<Value<'static>>() as u64;

/// A string: borrowed from the request JSON or the program, or shared.
#[derive(Clone, Debug)]
pub enum Str<'a> {
    /// Borrowed from the request JSON or the program's source.
    Borrowed(&'a str),
    /// Borrowed from a document, which counted its code points when it was parsed.
    Counted(&'a str, u32),
    /// Built by an expression (or owned by a caller), shared by reference count.
    Shared(Arc<str>),
}

impl Str<'_> {
    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        match self {
            Str::Borrowed(s) | Str::Counted(s, _) => s,
            Str::Shared(s) => s,
        }
    }

    /// The number of code points (CEL's `size()`).
    #[inline]
    pub fn char_count(&self) -> usize {
        match self {
            Str::Counted(_, n) => *n as usize,
            other => char_count(other.as_str()),
        }
    }
}

/// A list: a JSON array in place (a `serde_json` array or a [`super::json::Doc`] node), owned
/// elements, or two lists joined without copying.
#[derive(Clone, Debug)]
pub enum List<'a> {
    /// A `serde_json` array, in place.
    Json(&'a [Json]),
    /// A [`crate::json::Doc`] array, in place.
    Doc(Ref<'a, 'a>),
    /// Elements built by an expression or a caller.
    Owned(Arc<Vec<Value<'a>>>),
    /// `a + b`: a view of two lists, as cel-go's `concatList`. cel-go charges list
    /// concatenation 1 whatever the sizes, which is honest only if it copies nothing: a
    /// policy doubling a list forty times through its variables builds forty small nodes
    /// here, not a trillion elements. Size is kept, indexing walks down the tree, iteration
    /// walks it with an explicit stack: nothing recurses.
    Concat(Arc<Concat<'a>>),
    /// A CRD list with `x-kubernetes-list-type: set` or `map`: as the left operand of `==`
    /// or `+` it compares and concatenates as Kubernetes' unstructured set/map lists do.
    Typed(Arc<TypedList<'a>>),
}

/// How a typed CRD list compares and concatenates.
#[derive(Debug, Clone)]
pub enum ListKind {
    /// `x-kubernetes-list-type: set`: equality ignores order, `+` is a union.
    Set,
    /// `x-kubernetes-list-type: map` with its (CEL-escaped) key field names: equality
    /// matches items by key, `+` merges by key.
    Map(Arc<[Value<'static>]>),
}

/// The items of a typed list and its kind.
#[derive(Debug)]
pub struct TypedList<'a> {
    /// How it compares and concatenates.
    pub kind: ListKind,
    /// The elements.
    pub items: Vec<Value<'a>>,
}

/// The two halves of a concatenated list, with its length and the depth of its tree.
#[derive(Debug)]
pub struct Concat<'a> {
    left: List<'a>,
    right: List<'a>,
    len: usize,
    depth: u32,
}

/// The deepest tree of concatenations kept as a view; a deeper one is copied flat by its
/// builder. Doubling a list even 60 times overflows any size, so this refuses nothing a
/// view could serve, and keeps `Drop` (which recurses through the tree) shallow.
pub(crate) const MAX_CONCAT_DEPTH: u32 = 64;

impl<'a> List<'a> {
    /// The number of elements (a concatenation's is kept, not counted).
    pub fn len(&self) -> usize {
        match self {
            List::Json(a) => a.len(),
            List::Doc(r) => match r.item() {
                Item::Array(n) => n as usize,
                _ => 0,
            },
            List::Owned(v) => v.len(),
            List::Concat(c) => c.len,
            List::Typed(t) => t.items.len(),
        }
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The depth of the concatenation tree: 0 for a flat list.
    pub fn concat_depth(&self) -> u32 {
        match self {
            List::Concat(c) => c.depth,
            _ => 0,
        }
    }

    /// `a + b` as a view, or `None` when the length would not fit an `int` (CEL's `size()`)
    /// or the tree would be deeper than `MAX_CONCAT_DEPTH` (64) (the caller then copies, within
    /// the memory ceiling).
    pub fn concat(a: List<'a>, b: List<'a>) -> Option<List<'a>> {
        let len = a
            .len()
            .checked_add(b.len())
            .filter(|&n| i64::try_from(n).is_ok())?;
        let depth = a.concat_depth().max(b.concat_depth()) + 1;
        if depth > MAX_CONCAT_DEPTH {
            return None;
        }
        Some(List::Concat(Arc::new(Concat {
            left: a,
            right: b,
            len,
            depth,
        })))
    }

    /// Element `i`, walking down a concatenation; `None` past the end.
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        let (mut list, mut i) = (self, i);
        loop {
            return match list {
                List::Json(a) => a.get(i).map(Value::from_json),
                List::Doc(r) => r.element(i).map(Value::from_doc),
                List::Owned(v) => v.get(i).cloned(),
                List::Typed(t) => t.items.get(i).cloned(),
                List::Concat(c) => {
                    let left = c.left.len();
                    if i < left {
                        list = &c.left;
                    } else {
                        list = &c.right;
                        i -= left;
                    }
                    continue;
                }
            };
        }
    }

    /// The elements in order; sequential over a document, so iterating costs one pass.
    pub fn iter(&self) -> ListIter<'a, '_> {
        match self {
            List::Json(a) => ListIter::Json(a.iter()),
            List::Doc(r) => ListIter::Doc(r.children()),
            List::Owned(v) => ListIter::Owned(v.iter()),
            List::Typed(t) => ListIter::Owned(t.items.iter()),
            List::Concat(c) => {
                let mut it = ConcatIter {
                    pending: Vec::with_capacity(c.depth as usize),
                    leaf: Box::new(ListIter::Owned([].iter())),
                    left: c.len,
                };
                it.descend(self);
                ListIter::Concat(it)
            }
        }
    }

    /// The elements, copied out (cheap: values share their contents).
    pub fn to_vec(&self) -> Vec<Value<'a>> {
        self.iter().collect()
    }

    /// `self == other` when `self` is a typed list, `None` for any other list. As Kubernetes'
    /// unstructured set and map lists: the sizes match and every item of `other` is in the
    /// set (by Go value equality: `1` and `1.0` differ), or equals the item with its key.
    pub fn typed_equals(&self, other: &List<'_>) -> Option<bool> {
        let List::Typed(t) = self else {
            return None;
        };
        if t.items.len() != other.len() {
            return Some(false);
        }
        Some(match &t.kind {
            ListKind::Set => {
                let (keys, complex) = set_index(&t.items);
                other.iter().all(|y| match RawKey::of(&y) {
                    Some(k) => keys.contains(&k),
                    None => complex.iter().any(|x| x.equals(&y)),
                })
            }
            ListKind::Map(names) => {
                let mut by_key = HashMap::with_capacity(t.items.len());
                for x in &t.items {
                    if let Some(k) = map_key(x, names) {
                        by_key.insert(k, x);
                    }
                }
                other.iter().all(|y| {
                    map_key(&y, names)
                        .and_then(|k| by_key.get(&k))
                        .is_some_and(|x| x.equals(&y))
                })
            }
        })
    }

    /// `self + other` when `self` is a typed list, `None` for any other list: for a set, the
    /// union keeping `self`'s order then `other`'s new items (de-duplicated as they come);
    /// for a map list, `self`'s items with those of `other` under the same key replacing them
    /// in place, and `other`'s other items appended. The result has `self`'s kind.
    pub fn typed_concat(&self, other: &List<'a>) -> Option<List<'a>> {
        let List::Typed(t) = self else {
            return None;
        };
        let mut items = t.items.clone();
        match &t.kind {
            ListKind::Set => {
                let (mut keys, _) = set_index(&t.items);
                for y in other.iter() {
                    let new = match RawKey::of(&y) {
                        Some(k) => keys.insert(k),
                        None => !items.iter().any(|x| x.equals(&y)),
                    };
                    if new {
                        items.push(y);
                    }
                }
            }
            ListKind::Map(names) => {
                let mut index = HashMap::with_capacity(items.len());
                for (i, x) in t.items.iter().enumerate() {
                    if let Some(k) = map_key(x, names) {
                        index.insert(k, i);
                    }
                }
                for y in other.iter() {
                    // Appended items are not indexed: Kubernetes merges by `self`'s keys only.
                    match map_key(&y, names).and_then(|k| index.get(&k)) {
                        Some(&i) => {
                            if let Some(slot) = items.get_mut(i) {
                                *slot = y;
                            }
                        }
                        None => items.push(y),
                    }
                }
            }
        }
        Some(List::Typed(Arc::new(TypedList {
            kind: t.kind.clone(),
            items,
        })))
    }
}

/// A scalar as Go compares `interface{}` values holding unstructured data: same kind and
/// value (so `1` and `1.0` differ); `None` for lists, maps and other kinds.
#[derive(Debug, PartialEq, Eq, Hash)]
enum RawKey {
    Missing,
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(u64),
    Str(Box<str>),
}

impl RawKey {
    fn of(v: &Value<'_>) -> Option<RawKey> {
        Some(match v {
            Value::Null => RawKey::Null,
            Value::Bool(b) => RawKey::Bool(*b),
            Value::Int(i) => RawKey::Int(*i),
            Value::Uint(u) => RawKey::Uint(*u),
            // -0.0 and 0.0 are equal in Go; NaN cannot come from JSON.
            Value::Double(d) => RawKey::Double(if *d == 0.0 { 0 } else { d.to_bits() }),
            Value::String(s) => RawKey::Str(s.as_str().into()),
            _ => return None,
        })
    }
}

/// The scalar items of a set as keys, and its other items.
fn set_index<'v, 'a>(items: &'v [Value<'a>]) -> (HashSet<RawKey>, Vec<&'v Value<'a>>) {
    let mut keys = HashSet::with_capacity(items.len());
    let mut complex = Vec::new();
    for x in items {
        match RawKey::of(x) {
            Some(k) => {
                keys.insert(k);
            }
            None => complex.push(x),
        }
    }
    (keys, complex)
}

/// The key of a map-list item: its values of the key fields (absent ones as `Missing`);
/// `None` when it is not an object or a key value is not a scalar.
fn map_key(item: &Value<'_>, names: &[Value<'static>]) -> Option<Vec<RawKey>> {
    let Value::Map(m) = item else {
        return None;
    };
    names
        .iter()
        .map(|n| match m.get(n) {
            Some(v) => RawKey::of(&v),
            None => Some(RawKey::Missing),
        })
        .collect()
}

/// An iterator over a list's elements, whatever its representation.
pub enum ListIter<'a, 'l> {
    /// Over a `serde_json` array.
    Json(std::slice::Iter<'a, Json>),
    /// Over a document array.
    Doc(super::json::Children<'a, 'a>),
    /// Over owned elements.
    Owned(std::slice::Iter<'l, Value<'a>>),
    /// Over a concatenation, with an explicit stack.
    Concat(ConcatIter<'a, 'l>),
}

/// Walks a concatenation tree left to right: the current flat list's iterator, and the right
/// halves still to visit.
pub struct ConcatIter<'a, 'l> {
    pending: Vec<&'l List<'a>>,
    /// Always the iterator of a flat list (never `Concat`).
    leaf: Box<ListIter<'a, 'l>>,
    left: usize,
}

impl<'a, 'l> ConcatIter<'a, 'l> {
    /// Goes down the left edge from `list`, remembering the right halves, to its first flat
    /// list.
    fn descend(&mut self, mut list: &'l List<'a>) {
        while let List::Concat(c) = list {
            self.pending.push(&c.right);
            list = &c.left;
        }
        *self.leaf = list.iter();
    }
}

impl<'a> Iterator for ConcatIter<'a, '_> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        loop {
            if let Some(v) = self.leaf.next() {
                self.left -= 1;
                return Some(v);
            }
            let next = self.pending.pop()?;
            self.descend(next);
        }
    }
}

impl<'a> Iterator for ListIter<'a, '_> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        match self {
            ListIter::Json(it) => it.next().map(Value::from_json),
            ListIter::Doc(it) => it.next().map(Value::from_doc),
            ListIter::Owned(it) => it.next().cloned(),
            ListIter::Concat(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ListIter::Json(it) => it.size_hint(),
            ListIter::Doc(it) => it.size_hint(),
            ListIter::Owned(it) => it.size_hint(),
            ListIter::Concat(it) => (it.left, Some(it.left)),
        }
    }
}

impl ExactSizeIterator for ListIter<'_, '_> {}

/// A map: a JSON object in place (a `serde_json` object or a document node), or owned
/// entries.
#[derive(Clone, Debug)]
pub enum Map<'a> {
    /// A `serde_json` object, in place.
    Json(&'a serde_json::Map<String, Json>),
    /// A [`crate::json::Doc`] object, in place.
    Doc(Ref<'a, 'a>),
    /// Entries built by an expression or a caller.
    Owned(Arc<OwnedMap<'a>>),
}

/// Entries in insertion order, with a hash index once the map is large enough to need one.
///
/// Keys behave as in cel-go's map of `ref.Val` (a Go map keyed by interface values): a key
/// is the same key only with the same kind and value, so `{1: 'a', 1u: 'b', 1.0: 'c'}` has
/// three entries; a lookup that misses tries the other numeric kinds the way cel-go's
/// `refValMapAccessor.Find` does (a double as an int then a uint, an int as a uint, a uint
/// as an int, never an integer as a double). Lists, maps, optionals and library values are
/// keys by identity in Go (pointers): here each is its own key, never found by lookup.
#[derive(Debug, Default)]
pub struct OwnedMap<'a> {
    entries: Vec<(Value<'a>, Value<'a>)>,
    /// Entry positions by key, for keys that have a [`KeyRef`].
    index: Option<(HashTable<usize>, DefaultHashBuilder)>,
}

/// A key as Go compares interface values of cel-go's types: kind and value (`-0.0` is
/// `0.0`). `None` for keys Go compares by identity, and for NaN (never equal to itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum KeyRef<'k> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(u64),
    Str(&'k str),
    Timestamp(super::time::Timestamp),
    Duration(i64),
    Type(&'static str),
}

impl<'k> KeyRef<'k> {
    #[inline]
    fn of(v: &'k Value<'_>) -> Option<KeyRef<'k>> {
        Some(match v {
            Value::String(s) => KeyRef::Str(s.as_str()),
            Value::Int(i) => KeyRef::Int(*i),
            Value::Uint(u) => KeyRef::Uint(*u),
            Value::Double(d) if d.is_nan() => return None,
            Value::Double(d) => KeyRef::Double(if *d == 0.0 { 0 } else { d.to_bits() }),
            Value::Bool(b) => KeyRef::Bool(*b),
            Value::Null => KeyRef::Null,
            Value::Timestamp(t) => KeyRef::Timestamp(*t),
            Value::Duration(d) => KeyRef::Duration(*d),
            Value::Type(t) => KeyRef::Type(t),
            _ => return None,
        })
    }

    /// The other keys cel-go's `Find` tries after a miss, in its order.
    fn numeric_fallbacks(self) -> [Option<KeyRef<'static>>; 2] {
        match self {
            KeyRef::Double(bits) => {
                let d = f64::from_bits(bits);
                [
                    double_to_i64(d).map(KeyRef::Int),
                    double_to_u64(d).map(KeyRef::Uint),
                ]
            }
            KeyRef::Int(i) => [u64::try_from(i).ok().map(KeyRef::Uint), None],
            KeyRef::Uint(u) => [i64::try_from(u).ok().map(KeyRef::Int), None],
            _ => [None, None],
        }
    }
}

/// `d` as an int64 when the conversion loses nothing (cel-go's `doubleToInt64Lossless`).
fn double_to_i64(d: f64) -> Option<i64> {
    // i64::MAX as f64 is 2^63, itself out of range.
    (d.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d))
        .then_some(d as i64)
}

/// `d` as a uint64 when the conversion loses nothing (cel-go's `doubleToUint64Lossless`).
fn double_to_u64(d: f64) -> Option<u64> {
    (d.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&d)).then_some(d as u64)
}

/// Entries up to which a lookup scans instead of hashing.
const INDEX_THRESHOLD: usize = 8;

impl<'a> OwnedMap<'a> {
    /// Builds a map whose keys are known to be distinct, refusing a repeated key
    /// (`Failed with repeated key`): for maps built from data (query parameters, CRD
    /// objects), where a repeat is a bug in the builder.
    pub fn from_entries(entries: Vec<(Value<'a>, Value<'a>)>) -> Result<Self, EvalError> {
        let mut m = OwnedMap {
            entries: Vec::with_capacity(entries.len()),
            index: None,
        };
        for (k, v) in entries {
            m.insert_new(k, v)?;
        }
        Ok(m)
    }

    /// A map of keys the caller knows to be distinct (a decoded document's, whose repeats
    /// were refused), found by scanning: for small maps built once per request, where the
    /// checks and the index would cost more than the few lookups they save.
    pub fn from_distinct(entries: Vec<(Value<'a>, Value<'a>)>) -> Self {
        OwnedMap {
            entries,
            index: None,
        }
    }

    /// Builds a map as cel-go builds a map literal (a Go map assigned entry by entry): a
    /// repeated key keeps its first place and takes the last value.
    pub fn literal(entries: Vec<(Value<'a>, Value<'a>)>) -> Result<Self, EvalError> {
        let mut m = OwnedMap::with_capacity(entries.len());
        for (k, v) in entries {
            m.assign(k, v)?;
        }
        Ok(m)
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        OwnedMap {
            entries: Vec::with_capacity(n),
            index: None,
        }
    }

    /// `m[k] = v` on cel-go's Go map: replaces the value of exactly `k`, else adds the entry.
    /// Only a bytes key is refused (Go cannot hash a byte slice; cel-go panics).
    pub fn assign(&mut self, k: Value<'a>, v: Value<'a>) -> Result<(), EvalError> {
        if matches!(k, Value::Bytes(_)) {
            return Err(EvalError::new("unsupported key type: bytes"));
        }
        match KeyRef::of(&k).and_then(|r| self.find_exact(r)) {
            Some(i) => {
                if let Some(slot) = self.entries.get_mut(i) {
                    slot.1 = v;
                }
            }
            None => self.push(k, v),
        }
        Ok(())
    }

    /// `delete(m, k)` on cel-go's Go map: removes exactly `k` (an absent optional entry of
    /// a literal, `{?k: optional.none()}`, removes an earlier `k`).
    pub fn unassign(&mut self, k: &Value<'_>) {
        if let Some(i) = KeyRef::of(k).and_then(|r| self.find_exact(r)) {
            self.entries.remove(i);
            // Positions moved: the index is rebuilt by the next insertion that needs it
            // (lookups scan until then).
            self.index = None;
        }
    }

    /// Adds an entry unless [`Map::get`] would already find its key (cel-go's
    /// `mutableMap.Insert`, which `transformMap` uses): a repeat is `Failed with repeated key`.
    pub fn insert_new(&mut self, k: Value<'a>, v: Value<'a>) -> Result<(), EvalError> {
        if matches!(k, Value::Bytes(_)) {
            return Err(EvalError::new("unsupported key type: bytes"));
        }
        if self.find(&k).is_some() {
            return Err(EvalError::new(format!(
                "Failed with repeated key: {}",
                k.debug_string()
            )));
        }
        self.push(k, v);
        Ok(())
    }

    fn push(&mut self, k: Value<'a>, v: Value<'a>) {
        self.entries.push((k, v));
        let n = self.entries.len();
        if n <= INDEX_THRESHOLD {
            return;
        }
        let entries = &self.entries;
        let (table, hasher) = self.index.get_or_insert_with(|| {
            let hasher = DefaultHashBuilder::default();
            let mut table = HashTable::with_capacity(n * 2);
            for (i, (k, _)) in entries.iter().enumerate().take(n - 1) {
                if let Some(r) = KeyRef::of(k) {
                    table.insert_unique(hasher.hash_one(r), i, |&j| rehash(entries, &hasher, j));
                }
            }
            (table, hasher)
        });
        if let Some(r) = entries.last().and_then(|(k, _)| KeyRef::of(k)) {
            table.insert_unique(hasher.hash_one(r), n - 1, |&j| rehash(entries, hasher, j));
        }
    }

    /// The entry whose key is exactly `key` (same kind and value).
    #[inline]
    fn find_exact(&self, key: KeyRef<'_>) -> Option<usize> {
        let same = |i: usize| {
            self.entries
                .get(i)
                .and_then(|(k, _)| KeyRef::of(k))
                .is_some_and(|r| r == key)
        };
        match &self.index {
            Some((table, hasher)) => table.find(hasher.hash_one(key), |&i| same(i)).copied(),
            None => (0..self.entries.len()).find(|&i| same(i)),
        }
    }

    /// The entry cel-go's `refValMapAccessor.Find` finds for `key`.
    fn find(&self, key: &Value<'_>) -> Option<usize> {
        let r = KeyRef::of(key)?;
        self.find_exact(r).or_else(|| {
            r.numeric_fallbacks()
                .into_iter()
                .flatten()
                .find_map(|alt| self.find_exact(alt))
        })
    }

    #[inline]
    fn value_at(&self, i: usize) -> Option<Value<'a>> {
        self.entries.get(i).map(|(_, v)| v.clone())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in insertion order.
    pub fn entries(&self) -> &[(Value<'a>, Value<'a>)] {
        &self.entries
    }
}

/// The hash of entry `i`'s key, for the table to grow (only indexed entries are asked).
fn rehash(entries: &[(Value<'_>, Value<'_>)], hasher: &DefaultHashBuilder, i: usize) -> u64 {
    entries
        .get(i)
        .and_then(|(k, _)| KeyRef::of(k))
        .map_or(0, |r| hasher.hash_one(r))
}

impl<'a> Map<'a> {
    /// The number of entries.
    pub fn len(&self) -> usize {
        match self {
            Map::Json(m) => m.len(),
            Map::Doc(r) => match r.item() {
                Item::Object(n) => n as usize,
                _ => 0,
            },
            Map::Owned(m) => m.len(),
        }
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value under `key` by CEL equality (`{1: 'a'}[1.0]` finds the entry).
    pub fn get(&self, key: &Value<'_>) -> Option<Value<'a>> {
        match self {
            Map::Json(m) => match key {
                Value::String(s) => m.get(s.as_str()).map(Value::from_json),
                _ => None,
            },
            Map::Doc(r) => match key {
                Value::String(s) => r.get(s.as_str()).map(Value::from_doc),
                _ => None,
            },
            Map::Owned(m) => m.value_at(m.find(key)?),
        }
    }

    /// The value under a string key (the common case: a field of an object).
    pub fn get_str(&self, key: &str) -> Option<Value<'a>> {
        match self {
            Map::Json(m) => m.get(key).map(Value::from_json),
            Map::Doc(r) => r.get(key).map(Value::from_doc),
            // A string key is found only as a string: no fallback to try.
            Map::Owned(m) => m.value_at(m.find_exact(KeyRef::Str(key))?),
        }
    }

    /// `get_str` with a key prepared at compile time (faster on a document).
    #[inline(always)]
    pub fn get_key(&self, key: &Key) -> Option<Value<'a>> {
        match self {
            Map::Doc(r) => r.get_key(key).map(Value::from_doc),
            _ => self.get_str(key.as_str()),
        }
    }

    /// Whether some entry's key equals `key` by CEL equality.
    pub fn contains_key(&self, key: &Value<'_>) -> bool {
        match self {
            Map::Json(m) => matches!(key, Value::String(s) if m.contains_key(s.as_str())),
            Map::Doc(r) => matches!(key, Value::String(s) if r.get(s.as_str()).is_some()),
            Map::Owned(m) => m.find(key).is_some(),
        }
    }

    /// The keys, in the map's order.
    pub fn keys(&self) -> Vec<Value<'a>> {
        match self {
            Map::Json(m) => m
                .keys()
                .map(|k| Value::String(Str::Borrowed(k.as_str())))
                .collect(),
            Map::Doc(r) => {
                let mut c = r.children();
                std::iter::from_fn(|| c.next_entry().map(|(k, _)| Value::String(Str::Borrowed(k))))
                    .collect()
            }
            Map::Owned(m) => m.entries.iter().map(|(k, _)| k.clone()).collect(),
        }
    }

    /// The entries, in the map's order.
    pub fn entries(&self) -> Vec<(Value<'a>, Value<'a>)> {
        match self {
            Map::Json(m) => m
                .iter()
                .map(|(k, v)| {
                    (
                        Value::String(Str::Borrowed(k.as_str())),
                        Value::from_json(v),
                    )
                })
                .collect(),
            Map::Doc(r) => {
                let mut c = r.children();
                std::iter::from_fn(|| {
                    c.next_entry()
                        .map(|(k, v)| (Value::String(Str::Borrowed(k)), Value::from_doc(v)))
                })
                .collect()
            }
            Map::Owned(m) => m.entries.clone(),
        }
    }
}

/// The internal error of reaching a container that a projection left out of the document
/// ([`crate::json::Item::Skipped`]): the read analysis that built the projection missed a
/// read. Never a CEL answer.
pub const NOT_PARSED: &str =
    "internal error: a value the expression reads was not parsed (left out by the projection)";

/// What [`Value::from_doc`] gives for a skipped container, which it cannot refuse (it returns
/// a value): an opaque value of its own type, which no function, operator, field selection or
/// iteration accepts, and which equals nothing. [`Value::try_from_doc`] refuses it with
/// [`NOT_PARSED`] instead; the evaluator should read documents through it.
#[derive(Debug)]
pub struct NotParsed;

impl Opaque for NotParsed {
    fn type_name(&self) -> &'static str {
        "celgate.notParsed"
    }
    fn equals(&self, _: &dyn Opaque) -> bool {
        false
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn comparable(&self) -> bool {
        false
    }
}

#[cold]
fn not_parsed<'a>() -> Value<'a> {
    Value::opaque(NotParsed)
}

/// A value of a Kubernetes library type (URL, IP, Quantity...): opaque to CEL but for its
/// functions and equality.
pub trait Opaque: fmt::Debug + Send + Sync + 'static {
    /// The CEL type name, e.g. `kubernetes.URL` or `net.IP`.
    fn type_name(&self) -> &'static str;
    /// CEL's `==` with another library value (`false` for another type).
    fn equals(&self, other: &dyn Opaque) -> bool;
    /// For downcasting to the concrete type (see [`Value::as_opaque`]).
    fn as_any(&self) -> &dyn Any;
    /// Whether `==` with another value of this type is an answer. Kubernetes' authorizer
    /// types refuse it (`no such overload`) even between two of them.
    fn comparable(&self) -> bool {
        true
    }
    /// Whether `==` with a value of another type is `false` (a protobuf message: cel-go's
    /// `protoObj.Equal`) rather than `no such overload` (the Kubernetes library types).
    fn unequal_to_other_types(&self) -> bool {
        false
    }
    /// `string(x)`, for the types that define it.
    fn to_cel_string(&self) -> Option<String> {
        None
    }
}

/// A CEL value. Borrows (lifetime `'a`) from the JSON it was read from wherever it can, so
/// reading a request copies nothing; what an expression builds is shared by reference count.
#[derive(Clone, Debug)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `bool`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `uint`.
    Uint(u64),
    /// `double`.
    Double(f64),
    /// `string`.
    String(Str<'a>),
    /// `bytes`.
    Bytes(Arc<[u8]>),
    /// `list`.
    List(List<'a>),
    /// `map`.
    Map(Map<'a>),
    /// `google.protobuf.Timestamp`, with the offset it is shown at.
    Timestamp(super::time::Timestamp),
    /// Nanoseconds, as Go's `time.Duration` that cel-go uses.
    Duration(i64),
    /// A type value (`type(x)`, `int`...), by its CEL name.
    Type(&'static str),
    /// `optional_type`: `optional.none()` or `optional.of(v)`.
    Optional(Option<Arc<Value<'a>>>),
    /// A Kubernetes library value (`kubernetes.URL`, `net.IP`, `kubernetes.Quantity`...).
    Opaque(Arc<dyn Opaque>),
}

impl<'a> Value<'a> {
    /// Views a JSON value as CEL without copying.
    pub fn from_json(j: &'a Json) -> Value<'a> {
        match j {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Value::String(Str::Borrowed(s)),
            Json::Array(a) => Value::List(List::Json(a)),
            Json::Object(m) => Value::Map(Map::Json(m)),
        }
    }

    /// Views a document node as CEL without copying.
    #[inline(always)]
    pub fn from_doc(r: Ref<'a, 'a>) -> Value<'a> {
        if let Some((s, n)) = r.str_chars() {
            return Value::String(Str::Counted(s, n));
        }
        match r.item() {
            Item::Null => Value::Null,
            Item::Bool(b) => Value::Bool(b),
            Item::Int(i) => Value::Int(i),
            Item::Double(d) => Value::Double(d),
            Item::Str(s) => Value::String(Str::Borrowed(s)),
            Item::Array(_) => Value::List(List::Doc(r)),
            Item::Object(_) => Value::Map(Map::Doc(r)),
            Item::Skipped { .. } => not_parsed(),
        }
    }

    /// Views a document node as CEL, refusing a container a projection left out (see
    /// [`Value::from_doc`]) with an internal error.
    pub fn try_from_doc(r: Ref<'a, 'a>) -> Result<Value<'a>, EvalError> {
        if r.is_skipped() {
            return Err(EvalError::new(NOT_PARSED));
        }
        Ok(Value::from_doc(r))
    }

    /// A shared string.
    pub fn string(s: impl Into<Arc<str>>) -> Value<'a> {
        Value::String(Str::Shared(s.into()))
    }

    /// An owned list.
    pub fn list(v: Vec<Value<'a>>) -> Value<'a> {
        Value::List(List::Owned(Arc::new(v)))
    }

    /// A library value.
    pub fn opaque(o: impl Opaque) -> Value<'a> {
        Value::Opaque(Arc::new(o))
    }

    /// `optional.of(v)` for `Some`, `optional.none()` for `None`.
    pub fn optional(v: Option<Value<'a>>) -> Value<'a> {
        Value::Optional(v.map(Arc::new))
    }

    /// The CEL name of this value's type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null_type",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Uint(_) => "uint",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Timestamp(_) => "google.protobuf.Timestamp",
            Value::Duration(_) => "google.protobuf.Duration",
            Value::Type(_) => "type",
            Value::Optional(_) => "optional_type",
            Value::Opaque(o) => o.type_name(),
        }
    }

    /// The text of a string; `None` for another value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// The library value of type `T`; `None` for another value or type.
    pub fn as_opaque<T: Opaque>(&self) -> Option<&T> {
        match self {
            Value::Opaque(o) => o.as_any().downcast_ref::<T>(),
            _ => None,
        }
    }

    /// CEL `size()`: code points of a string, bytes, elements or entries; `None` for other
    /// kinds. Used by the cost rules too (where it is 1 for anything else).
    pub fn size(&self) -> Option<usize> {
        match self {
            Value::String(s) => Some(s.char_count()),
            Value::Bytes(b) => Some(b.len()),
            Value::List(l) => Some(l.len()),
            Value::Map(m) => Some(m.len()),
            _ => None,
        }
    }

    /// The size cel-go's cost tracker uses: `size()` where defined, else 1.
    pub fn cost_size(&self) -> u64 {
        self.size().map_or(1, |s| s as u64)
    }

    /// CEL heterogeneous equality: never an error; values of different kinds are unequal,
    /// numbers compare by value across int, uint and double.
    pub fn equals(&self, other: &Value<'_>) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (String(a), String(b)) => a.as_str() == b.as_str(),
            (Bytes(a), Bytes(b)) => a == b,
            (Int(_) | Uint(_) | Double(_), Int(_) | Uint(_) | Double(_)) => {
                num_cmp(self, other) == Some(Ordering::Equal)
            }
            (List(a), List(b)) => match a.typed_equals(b) {
                Some(eq) => eq,
                None => a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.equals(&y)),
            },
            (Map(a), Map(b)) => {
                a.len() == b.len()
                    && a.entries()
                        .iter()
                        .all(|(k, v)| b.get(k).is_some_and(|bv| v.equals(&bv)))
            }
            (Timestamp(a), Timestamp(b)) => a == b,
            (Duration(a), Duration(b)) => a == b,
            (Type(a), Type(b)) => a == b,
            (Optional(a), Optional(b)) => match (a, b) {
                (None, None) => true,
                (Some(x), Some(y)) => x.equals(y),
                _ => false,
            },
            (Opaque(a), Opaque(b)) => a.type_name() == b.type_name() && a.equals(b.as_ref()),
            _ => false,
        }
    }

    /// [`Value::equals`] for values that may be large lists or maps: a step of `ticker` per
    /// element (and per kilobyte of string) compared, so a deadline stops the walk.
    pub fn equals_watching(
        &self,
        other: &Value<'_>,
        ticker: &mut Ticker,
    ) -> Result<bool, EvalError> {
        use Value::*;
        Ok(match (self, other) {
            (List(a), List(b)) => {
                if let Some(eq) = a.typed_equals(b) {
                    return Ok(eq);
                }
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (x, y) in a.iter().zip(b.iter()) {
                    ticker.tick()?;
                    if !x.equals_watching(&y, ticker)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Map(a), Map(b)) => {
                if a.len() != b.len() {
                    return Ok(false);
                }
                for (k, v) in a.entries() {
                    ticker.tick()?;
                    match b.get(&k) {
                        Some(bv) if v.equals_watching(&bv, ticker)? => {}
                        _ => return Ok(false),
                    }
                }
                true
            }
            (Optional(Some(x)), Optional(Some(y))) => x.equals_watching(y, ticker)?,
            (String(a), String(b)) => {
                ticker.bytes(a.as_str().len())?;
                a.as_str() == b.as_str()
            }
            _ => self.equals(other),
        })
    }

    /// The string, when it is borrowed for `'a` (from the request or the program): pieces of
    /// it (`split`, `findAll`) can then be borrowed too instead of copied.
    pub fn borrowed_str(&self) -> Option<&'a str> {
        match self {
            Value::String(Str::Borrowed(s) | Str::Counted(s, _)) => Some(s),
            _ => None,
        }
    }

    /// CEL ordering for `<`, `<=`, `>`, `>=`: `None` when the kinds do not compare
    /// (a no-such-overload error), or a NaN is involved (every comparison false).
    pub fn compare(&self, other: &Value<'_>) -> Result<Option<Ordering>, EvalError> {
        use Value::*;
        Ok(match (self, other) {
            (Bool(a), Bool(b)) => Some(a.cmp(b)),
            (String(a), String(b)) => Some(a.as_str().cmp(b.as_str())),
            (Bytes(a), Bytes(b)) => Some(a.as_ref().cmp(b.as_ref())),
            (Int(_) | Uint(_) | Double(_), Int(_) | Uint(_) | Double(_)) => num_cmp(self, other),
            (Timestamp(a), Timestamp(b)) => Some(a.cmp(b)),
            (Duration(a), Duration(b)) => Some(a.cmp(b)),
            _ => return Err(EvalError::no_such_overload()),
        })
    }

    /// A short rendering for error messages.
    pub fn debug_string(&self) -> String {
        match self {
            Value::String(s) => s.as_str().to_string(),
            Value::Int(i) => i.to_string(),
            Value::Uint(u) => u.to_string(),
            Value::Double(d) => d.to_string(),
            Value::Bool(b) => b.to_string(),
            other => other.type_name().to_string(),
        }
    }

    /// Converts to JSON for output: bytes as base64, timestamps in RFC 3339, durations as
    /// `"<seconds>s"`, types by name, an optional as its value or null.
    pub fn to_json(&self) -> Json {
        match self {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => Json::from(*i),
            Value::Uint(u) => Json::from(*u),
            Value::Double(d) => serde_json::Number::from_f64(*d)
                .map_or_else(|| Json::String(d.to_string()), Json::Number),
            Value::String(s) => Json::String(s.as_str().to_string()),
            Value::Bytes(b) => Json::String(STANDARD.encode(b)),
            Value::List(l) => Json::Array(l.iter().map(|v| v.to_json()).collect()),
            Value::Map(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m.entries() {
                    let key = match &k {
                        Value::String(s) => s.as_str().to_string(),
                        other => other.debug_string(),
                    };
                    out.insert(key, v.to_json());
                }
                Json::Object(out)
            }
            Value::Timestamp(t) => Json::String(t.to_rfc3339()),
            Value::Duration(d) => Json::String(super::time::format_duration(*d)),
            Value::Type(t) => Json::String((*t).to_string()),
            Value::Optional(o) => o.as_ref().map_or(Json::Null, |v| v.to_json()),
            Value::Opaque(o) => Json::String(o.to_cel_string().unwrap_or_else(|| format!("{o:?}"))),
        }
    }
}

/// Compares numbers across kinds as cel-go does: int and uint exactly; against a double, a
/// double outside the integer range orders outside it, otherwise the integer is converted to
/// double (so `9223372036854775807 == 9223372036854775808.0`, as in cel-go). `None` for NaN.
pub(crate) fn num_cmp(a: &Value<'_>, b: &Value<'_>) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Uint(x), Uint(y)) => Some(x.cmp(y)),
        (Double(x), Double(y)) => x.partial_cmp(y),
        (Int(x), Uint(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Uint(x), Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Double(d), Int(i)) => double_int(*d, *i),
        (Int(i), Double(d)) => double_int(*d, *i).map(Ordering::reverse),
        (Double(d), Uint(u)) => double_uint(*d, *u),
        (Uint(u), Double(d)) => double_uint(*d, *u).map(Ordering::reverse),
        _ => None,
    }
}

fn double_int(d: f64, i: i64) -> Option<Ordering> {
    if d < i64::MIN as f64 {
        return Some(Ordering::Less);
    }
    if d > i64::MAX as f64 {
        return Some(Ordering::Greater);
    }
    d.partial_cmp(&(i as f64))
}

fn double_uint(d: f64, u: u64) -> Option<Ordering> {
    if d < 0.0 {
        return Some(Ordering::Less);
    }
    if d > u64::MAX as f64 {
        return Some(Ordering::Greater);
    }
    d.partial_cmp(&(u as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_numbers_follow_kubernetes() {
        let j = json!([3, 1.5, 1e3, 18446744073709551615u64]);
        let Value::List(l) = Value::from_json(&j) else {
            panic!()
        };
        let kinds: Vec<_> = l.iter().map(|v| v.type_name()).collect();
        assert_eq!(kinds, ["int", "double", "double", "double"]);
    }

    #[test]
    fn heterogeneous_equality() {
        assert!(Value::Int(1).equals(&Value::Uint(1)));
        assert!(Value::Int(1).equals(&Value::Double(1.0)));
        assert!(!Value::Double(f64::NAN).equals(&Value::Double(f64::NAN)));
        assert!(!Value::Int(1).equals(&Value::string("1")));
        let j = json!({"a": [1, 2]});
        let owned = Value::Map(Map::Owned(Arc::new(
            OwnedMap::from_entries(vec![(
                Value::string("a"),
                Value::list(vec![Value::Double(1.0), Value::Uint(2)]),
            )])
            .unwrap(),
        )));
        assert!(Value::from_json(&j).equals(&owned));
    }

    #[test]
    fn map_keys_compare_numerically_and_refuse_duplicates() {
        let m = OwnedMap::from_entries(vec![(Value::Int(1), Value::string("a"))]).unwrap();
        let m = Map::Owned(Arc::new(m));
        assert!(m.get(&Value::Double(1.0)).is_some());
        assert!(m.get(&Value::Uint(1)).is_some());
        assert!(OwnedMap::from_entries(vec![
            (Value::Int(1), Value::Null),
            (Value::Uint(1), Value::Null)
        ])
        .is_err());
        let many: Vec<_> = (0..20)
            .map(|i| (Value::Int(i), Value::Int(i * 2)))
            .collect();
        let big = Map::Owned(Arc::new(OwnedMap::from_entries(many).unwrap()));
        assert!(big.get(&Value::Uint(19)).unwrap().equals(&Value::Int(38)));
    }

    fn owned(m: OwnedMap<'static>) -> Map<'static> {
        Map::Owned(Arc::new(m))
    }

    #[test]
    fn literal_keys_follow_cel_go_go_map() {
        // Keys of different numeric kinds are distinct entries; a repeat takes the last value.
        let m = OwnedMap::literal(vec![
            (Value::Int(1), Value::string("a")),
            (Value::Uint(1), Value::string("b")),
            (Value::Double(1.0), Value::string("c")),
            (Value::string("k"), Value::Int(1)),
            (Value::string("k"), Value::Int(2)),
            (Value::Null, Value::Int(3)),
            (Value::list(vec![Value::Int(1)]), Value::Int(4)),
            (Value::list(vec![Value::Int(1)]), Value::Int(5)),
        ])
        .unwrap();
        assert_eq!(m.len(), 7);
        let m = owned(m);
        assert!(m.get_str("k").unwrap().equals(&Value::Int(2)));
        assert!(m.get(&Value::Uint(1)).unwrap().equals(&Value::string("b")));
        assert!(m
            .get(&Value::Double(1.0))
            .unwrap()
            .equals(&Value::string("c")));
        assert!(m.get(&Value::Null).unwrap().equals(&Value::Int(3)));
        // Lists are keys by identity: never found again.
        assert!(m.get(&Value::list(vec![Value::Int(1)])).is_none());
        assert!(
            OwnedMap::literal(vec![(Value::Bytes(b"x".as_slice().into()), Value::Null)]).is_err()
        );
    }

    #[test]
    fn lookup_falls_back_as_cel_go_find() {
        // A double finds an int or uint key; an int never finds a double key.
        let ints = owned(OwnedMap::literal(vec![(Value::Int(1), Value::Int(1))]).unwrap());
        let doubles = owned(OwnedMap::literal(vec![(Value::Double(1.0), Value::Int(1))]).unwrap());
        assert!(ints.get(&Value::Double(1.0)).is_some());
        assert!(doubles.get(&Value::Int(1)).is_none());
        assert!(doubles.get(&Value::Double(-0.0)).is_none());
        let uints = owned(OwnedMap::literal(vec![(Value::Uint(2), Value::Int(1))]).unwrap());
        assert!(uints.get(&Value::Int(2)).is_some());
        assert!(uints.get(&Value::Double(2.0)).is_some());
        assert!(ints.get(&Value::Double(1.5)).is_none());
        // So map equality is one-sided, as cel-go's: `{1.0: 1} == {1: 1}`, not the reverse.
        let (i, d) = (Value::Map(ints), Value::Map(doubles));
        assert!(d.equals(&i));
        assert!(!i.equals(&d));
        // NaN is never the same key.
        let nan = OwnedMap::literal(vec![
            (Value::Double(f64::NAN), Value::Int(1)),
            (Value::Double(f64::NAN), Value::Int(2)),
        ])
        .unwrap();
        assert_eq!(nan.len(), 2);
        assert!(owned(nan).get(&Value::Double(f64::NAN)).is_none());
    }

    #[test]
    fn large_literal_uses_the_index_and_survives_removal() {
        let mut m = OwnedMap::with_capacity(0);
        for i in 0..20 {
            m.assign(Value::Int(i), Value::Int(i)).unwrap();
            m.assign(Value::string(format!("s{i}")), Value::Int(i))
                .unwrap();
        }
        m.assign(Value::Int(7), Value::Int(70)).unwrap();
        assert_eq!(m.len(), 40);
        m.unassign(&Value::string("s3"));
        m.unassign(&Value::Uint(4)); // not exactly a key: nothing removed
        assert_eq!(m.len(), 39);
        m.assign(Value::string("late"), Value::Int(-1)).unwrap();
        let m = owned(m);
        assert!(m.get(&Value::Uint(7)).unwrap().equals(&Value::Int(70)));
        assert!(m.get_str("s3").is_none());
        assert!(m.get_str("s19").unwrap().equals(&Value::Int(19)));
        assert!(m.get_str("late").unwrap().equals(&Value::Int(-1)));
        assert!(m.get(&Value::Double(4.0)).unwrap().equals(&Value::Int(4)));
    }

    #[test]
    fn mixed_numeric_ordering() {
        assert_eq!(
            num_cmp(&Value::Int(1), &Value::Double(1.5)),
            Some(Ordering::Less)
        );
        assert_eq!(
            num_cmp(&Value::Uint(u64::MAX), &Value::Int(-1)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            num_cmp(&Value::Int(i64::MAX), &Value::Double(9.3e18)),
            Some(Ordering::Less)
        );
        // cel-go converts the integer to double: lossy at the boundary.
        assert_eq!(
            num_cmp(&Value::Int(i64::MAX), &Value::Double(9223372036854775808.0)),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn a_skipped_container_is_never_read_as_a_value() {
        use crate::json::Doc;
        use crate::projection::{Projection, Projections};
        let mut routes = Projections::new();
        routes.project(&["skipped"], &Projection::none());
        let text = br#"{"skipped": {"x": 1}, "built": {"y": 2}}"#;
        let doc = Doc::parse_projected(text, &routes).unwrap();
        let skipped = doc.root().get("skipped").unwrap();
        assert!(skipped.is_skipped());
        assert_eq!(
            Value::try_from_doc(skipped).unwrap_err().message(),
            NOT_PARSED
        );
        assert!(Value::try_from_doc(doc.root().get("built").unwrap()).is_ok());
        let v = Value::from_doc(skipped);
        assert_eq!(v.type_name(), "celgate.notParsed");
        assert!(!v.equals(&v), "it equals nothing, not even itself");
    }
}
