//! What part of a JSON value a set of expressions can read: a [`Projection`].
//!
//! An AdmissionReview's `object` and `oldObject` are most of its bytes, and a snapshot's
//! policies read a few fields of them. A projection, computed from the compiled expressions
//! (the whole set a snapshot can run), tells the document parser which subtrees it must build
//! and which it may skip with a scanner: a skipped container is still checked as JSON (the
//! body is refused exactly as a full parse refuses it) and still present under its key, but its
//! contents are not materialized.
//!
//! A projection only ever widens towards the whole value: whatever an analysis cannot follow
//! (a value passed whole to a function, compared whole, held in a list literal, indexed by a
//! computed key) is [`Projection::whole`]. It has no Kubernetes counterpart: the API server
//! decodes the whole object; this only decides how much of the same decode is kept.

use crate::text::key_prefix;

/// The parts of one JSON value that must be materialized.
///
/// Scalars are always materialized (a span or a number; nothing to save). For a container:
/// - `whole`: everything below is needed;
/// - otherwise, for an object, the members named in `fields` with their own projections, and
///   every other member's value with `each` when it is set (skipped when it is not); for an
///   array, every element with `each` (skipped when it is not).
///
/// A skipped member keeps its key (presence tests and key iteration need no value). A parser
/// reads a [`finished`](Projection::finish) projection, where a named member's projection
/// covers `each` too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    whole: bool,
    fields: KeyMap<Projection>,
    each: Option<Box<Projection>>,
}

impl Projection {
    /// Nothing below this value is needed (a container may be skipped).
    pub fn none() -> Projection {
        Projection::default()
    }

    /// The whole value is needed.
    pub fn whole() -> Projection {
        Projection {
            whole: true,
            ..Projection::default()
        }
    }

    /// Whether the whole value is needed.
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// Whether nothing below this value is needed.
    pub fn is_none(&self) -> bool {
        !self.whole && self.fields.is_empty() && self.each.is_none()
    }

    /// The projection of member `key` of an object: its own, else `each`'s, else
    /// [`none`](Projection::none) (skip). `None` is returned for "skip" so a parser can test it
    /// cheaply; a whole projection projects every member whole.
    pub fn field(&self, key: &str) -> Option<&Projection> {
        self.field_prefixed(key_prefix(key), key)
    }

    /// [`field`](Projection::field) of a key whose prefix (its first eight bytes as one
    /// little-endian integer, zero-padded) the caller has (a
    /// parser computes it for each key it reads).
    #[inline]
    pub fn field_prefixed(&self, prefix: u64, key: &str) -> Option<&Projection> {
        if self.whole {
            return Some(self);
        }
        self.fields
            .get(prefix, key)
            .or(self.each.as_deref())
            .filter(|p| !p.is_none())
    }

    /// The projection of every element of an array (`None`: skip them).
    pub fn element(&self) -> Option<&Projection> {
        if self.whole {
            return Some(self);
        }
        self.each.as_deref().filter(|p| !p.is_none())
    }

    /// The projection of member `key`, made if absent (for building one).
    pub fn field_mut(&mut self, key: &str) -> &mut Projection {
        self.fields.get_or_default(key)
    }

    /// The projection of every element or every other member, made if absent.
    pub fn each_mut(&mut self) -> &mut Projection {
        self.each.get_or_insert_with(Box::default)
    }

    /// Widens to the whole value.
    pub fn set_whole(&mut self) {
        *self = Projection::whole();
    }

    /// Widens `self` to also cover what `other` covers.
    pub fn union(&mut self, other: &Projection) {
        if self.whole {
            return;
        }
        if other.whole {
            self.set_whole();
            return;
        }
        for (key, p) in other.fields.iter() {
            self.field_mut(key).union(p);
        }
        if let Some(each) = &other.each {
            self.each_mut().union(each);
        }
    }

    /// Makes every named member's projection cover `each` as well, all the way down, so that
    /// [`field`](Projection::field) needs to look in one place only.
    pub fn finish(&mut self) {
        if self.whole {
            self.fields.clear();
            self.each = None;
            return;
        }
        if let Some(each) = self.each.as_deref_mut() {
            each.finish();
        }
        if let Some(each) = self.each.as_deref() {
            for p in self.fields.values_mut() {
                p.union(each);
            }
        }
        for p in self.fields.values_mut() {
            p.finish();
        }
    }

    /// The projection of every element or every other member as built, even one with nothing
    /// below it (for tests and diagnostics; a parser reads [`element`](Projection::element)).
    pub fn each(&self) -> Option<&Projection> {
        self.each.as_deref()
    }

    /// The members named explicitly (for tests and diagnostics).
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Projection)> {
        self.fields.iter()
    }
}

/// Projections of the values at paths of object keys from a document's root (a review's
/// `request.object` and `request.oldObject`): what [`Doc::parse_projected`] builds. A value
/// on no path, and every value beside a path, is built whole; a path inside another path's
/// value is merged into that value's projection.
///
/// [`Doc::parse_projected`]: crate::json::Doc::parse_projected
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projections {
    /// The projection of the value at this point, when a path ends here.
    here: Option<Projection>,
    /// The paths that go on, by their next key.
    below: KeyMap<Projections>,
}

impl Projections {
    /// No projection: a parse with it builds everything.
    pub fn new() -> Projections {
        Projections::default()
    }

    /// Projects the value at `path` (keys from the root) with `p`, widening what an earlier
    /// call projected there. `p` need not be [finished](Projection::finish).
    pub fn project(&mut self, path: &[&str], p: &Projection) {
        if let Some(q) = &mut self.here {
            let mut at = &mut *q;
            for key in path {
                at = at.field_mut(key);
            }
            at.union(p);
            q.finish();
            return;
        }
        match path.split_first() {
            Some((key, rest)) => self.below.get_or_default(key).project(rest, p),
            None => {
                let mut q = p.clone();
                for (key, routes) in std::mem::take(&mut self.below).into_entries() {
                    routes.merge_into(q.field_mut(&key));
                }
                q.finish();
                self.here = Some(q);
            }
        }
    }

    /// Adds everything these paths project to `p` (rooted where these paths start).
    fn merge_into(self, p: &mut Projection) {
        if let Some(here) = &self.here {
            p.union(here);
        }
        for (key, routes) in self.below.into_entries() {
            routes.merge_into(p.field_mut(&key));
        }
    }

    /// The projection of the value at this point, if a path ends here.
    pub fn here(&self) -> Option<&Projection> {
        self.here.as_ref()
    }

    /// The paths that go on through member `key`.
    pub fn below(&self, key: &str) -> Option<&Projections> {
        self.below.get(key_prefix(key), key)
    }

    /// [`below`](Projections::below) of a key whose prefix (as for
    /// [`Projection::field_prefixed`]) the caller has.
    #[inline]
    pub fn below_prefixed(&self, prefix: u64, key: &str) -> Option<&Projections> {
        self.below.get(prefix, key)
    }
}

/// Members by key, in key order, found by a scan that compares each key's first eight bytes
/// as one integer ([`key_prefix`]) before its text: a projection names a handful of members,
/// and a parser looks one up for every key it reads on a projected or routed object, where a
/// tree map's string comparisons cost more than skipping saved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyMap<V> {
    entries: Vec<(u64, Box<str>, V)>,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            entries: Vec::new(),
        }
    }
}

impl<V: Default> KeyMap<V> {
    #[inline]
    fn get(&self, prefix: u64, key: &str) -> Option<&V> {
        self.entries
            .iter()
            .find(|(p, k, _)| {
                *p == prefix && k.len() == key.len() && (key.len() <= 8 || **k == *key)
            })
            .map(|(_, _, v)| v)
    }

    /// The value of `key`, made (in key order) if absent.
    fn get_or_default(&mut self, key: &str) -> &mut V {
        let at = match self.entries.binary_search_by(|(_, k, _)| (**k).cmp(key)) {
            Ok(at) => at,
            Err(at) => {
                self.entries
                    .insert(at, (key_prefix(key), key.into(), V::default()));
                at
            }
        };
        &mut self.entries[at].2
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(_, k, v)| (&**k, v))
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, _, v)| v)
    }

    fn into_entries(self) -> impl Iterator<Item = (Box<str>, V)> {
        self.entries.into_iter().map(|(_, k, v)| (k, v))
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_each_and_whole_project_members() {
        let mut p = Projection::none();
        p.field_mut("metadata").field_mut("name").set_whole();
        p.field_mut("spec")
            .field_mut("containers")
            .each_mut()
            .field_mut("image")
            .set_whole();
        assert!(p.field("status").is_none(), "an unnamed member is skipped");
        let spec = p.field("spec").expect("spec is read");
        let containers = spec.field("containers").expect("containers are read");
        let element = containers.element().expect("each container is read");
        assert!(element.field("image").is_some_and(Projection::is_whole));
        assert!(element.field("env").is_none());
        // A named member with nothing below it (a presence test) is skipped like any other.
        p.field_mut("presence");
        assert!(p.field("presence").is_none());
    }

    #[test]
    fn union_widens_and_whole_absorbs() {
        let mut a = Projection::none();
        a.field_mut("x").field_mut("y").set_whole();
        let mut b = Projection::none();
        b.field_mut("x").each_mut().set_whole();
        a.union(&b);
        let x = a.field("x").expect("x");
        assert!(x.field("y").is_some_and(Projection::is_whole));
        assert!(
            x.field("z").is_some_and(Projection::is_whole),
            "each covers others"
        );
        a.finish();
        assert!(a
            .field("x")
            .and_then(|x| x.field("y"))
            .is_some_and(Projection::is_whole));
        let mut c = Projection::none();
        c.field_mut("named").field_mut("a").set_whole();
        c.each_mut().field_mut("b").set_whole();
        c.finish();
        let named = c.field("named").expect("named");
        assert!(
            named.field("a").is_some() && named.field("b").is_some(),
            "named covers each"
        );
        a.union(&Projection::whole());
        assert!(a.is_whole());
        assert!(a.field("anything").is_some_and(Projection::is_whole));
    }
}
