//! Labelled metric vectors keyed by the exact label values.
//!
//! The `prometheus` crate's vectors find a child by a 64-bit FNV hash of the label values
//! concatenated without a separator, and never compare the values: `["ab", "c"]` and
//! `["a", "bc"]` get the same child, and so would any two label sets whose hashes collide.
//! Policy and binding names are free-form, so two objects could share a series. These
//! vectors key their children by the owned label values and compare them on lookup; they
//! implement [`Collector`] and export exactly what the crate's vectors export (same family,
//! help, type, label names and order).
//!
//! Each child is a plain `prometheus` metric whose label values are const labels: that is
//! how the crate itself labels a vector's child, so the encoded output is the same.

use std::collections::HashMap as StdHashMap;
use std::sync::{Arc, PoisonError, RwLock};

use hashbrown::{Equivalent, HashMap};
use prometheus::core::{Collector, Desc, Describer, Metric};
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{Gauge, Histogram, HistogramOpts, IntCounter, IntGauge, Opts};

/// A metric that can be a child of a [`Labelled`] vector.
pub trait Child: Metric + Clone + Send + Sync + 'static {
    /// The options the metric is built from.
    type Opts: Describer + Clone + Send + Sync + 'static;
    /// The type of the exported family.
    const TYPE: MetricType;
    /// `opts` with these variable label names (the vector's own descriptor).
    fn variable_labels(opts: Self::Opts, names: Vec<String>) -> Self::Opts;
    /// `opts` with these label values fixed, for one child.
    fn const_labels(opts: Self::Opts, labels: StdHashMap<String, String>) -> Self::Opts;
    fn build(opts: Self::Opts) -> prometheus::Result<Self>;
}

/// The children built from plain [`Opts`] (all but the histogram).
macro_rules! opts_child {
    ($($child:ident: $kind:ident),*) => {$(
        impl Child for $child {
            type Opts = Opts;
            const TYPE: MetricType = MetricType::$kind;
            fn variable_labels(opts: Opts, names: Vec<String>) -> Opts {
                opts.variable_labels(names)
            }
            fn const_labels(opts: Opts, labels: StdHashMap<String, String>) -> Opts {
                opts.const_labels(labels)
            }
            fn build(opts: Opts) -> prometheus::Result<Self> {
                $child::with_opts(opts)
            }
        }
    )*};
}

opts_child!(IntCounter: COUNTER, IntGauge: GAUGE, Gauge: GAUGE);

impl Child for Histogram {
    type Opts = HistogramOpts;
    const TYPE: MetricType = MetricType::HISTOGRAM;
    fn variable_labels(opts: HistogramOpts, names: Vec<String>) -> HistogramOpts {
        opts.variable_labels(names)
    }
    fn const_labels(opts: HistogramOpts, labels: StdHashMap<String, String>) -> HistogramOpts {
        opts.const_labels(labels)
    }
    fn build(opts: HistogramOpts) -> prometheus::Result<Self> {
        Histogram::with_opts(opts)
    }
}

/// The owned label values of one child, in label-name order.
type Key = Box<[Box<str>]>;

/// Borrowed label values, to look a child up without allocating. Its hash equals the
/// [`Key`]'s: both hash as a slice of `str` (the length, then each string delimited), and
/// [`Equivalent`] compares the values themselves, so a hash collision cannot merge series.
#[derive(Hash)]
struct Probe<'a>(&'a [&'a str]);

impl Equivalent<Key> for Probe<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.0.len() == key.len() && self.0.iter().zip(key.iter()).all(|(a, b)| *a == &**b)
    }
}

struct Inner<M: Child, const N: usize> {
    /// The vector's descriptor: name, help and the variable label names.
    desc: Desc,
    /// The options every child is built from, without labels.
    opts: M::Opts,
    label_names: [String; N],
    /// A child built at construction, proving the options valid; see [`Labelled::build`].
    detached: M,
    children: RwLock<HashMap<Key, M>>,
}

/// A vector of `M` metrics with `N` labels, one child per distinct list of label values.
/// Cheap to clone: clones share the children (as the `prometheus` vectors do).
pub struct Labelled<M: Child, const N: usize>(Arc<Inner<M, N>>);

impl<M: Child, const N: usize> Clone for Labelled<M, N> {
    fn clone(&self) -> Self {
        Labelled(self.0.clone())
    }
}

pub type IntCounterVec<const N: usize> = Labelled<IntCounter, N>;
pub type IntGaugeVec<const N: usize> = Labelled<IntGauge, N>;
pub type GaugeVec<const N: usize> = Labelled<Gauge, N>;
pub type HistogramVec<const N: usize> = Labelled<Histogram, N>;

impl<M: Child, const N: usize> Labelled<M, N> {
    /// A vector of metrics built from `opts`, labelled by `label_names`. The options and
    /// names are checked here, as the `prometheus` vectors check them, so that a child can
    /// always be built later.
    pub fn new(opts: M::Opts, label_names: [&str; N]) -> prometheus::Result<Self> {
        let label_names = label_names.map(str::to_owned);
        let desc = M::variable_labels(opts.clone(), label_names.to_vec()).describe()?;
        // The same checks as any child's (label names, histogram buckets and the `le` label).
        let probe = label_names
            .iter()
            .map(|n| (n.clone(), String::new()))
            .collect();
        let detached = M::build(M::const_labels(opts.clone(), probe))?;
        Ok(Labelled(Arc::new(Inner {
            desc,
            opts,
            label_names,
            detached,
            children: RwLock::new(HashMap::new()),
        })))
    }

    /// The child for these label values, created on first use. A hit takes a read lock,
    /// hashes and compares the values, and clones an `Arc`: no allocation.
    pub fn with_label_values(&self, values: &[&str; N]) -> M {
        let inner = &*self.0;
        let probe = Probe(values);
        if let Some(m) = inner
            .children
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&probe)
        {
            return m.clone();
        }
        let mut children = inner
            .children
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Another thread may have created it between the two locks.
        if let Some(m) = children.get(&probe) {
            return m.clone();
        }
        let m = self.build(values);
        let key: Key = values.iter().map(|v| Box::from(*v)).collect();
        children.insert(key, m.clone());
        m
    }

    fn build(&self, values: &[&str; N]) -> M {
        let inner = &*self.0;
        let labels = inner
            .label_names
            .iter()
            .cloned()
            .zip(values.iter().map(|v| (*v).to_owned()))
            .collect();
        // Label values are not validated by the crate (only names, help and buckets, all
        // checked in `new`), so this cannot fail; were it to, the update goes to a metric
        // that is not exported rather than panicking the request.
        M::build(M::const_labels(inner.opts.clone(), labels)).unwrap_or_else(|e| {
            tracing::error!(metric = %inner.desc.fq_name, error = %e, "metric child not built");
            inner.detached.clone()
        })
    }

    /// Removes every child, so that label sets no longer current disappear from the output.
    pub fn reset(&self) {
        self.0
            .children
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl<M: Child, const N: usize> Collector for Labelled<M, N> {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.0.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let inner = &*self.0;
        let mut family = MetricFamily::default();
        family.set_name(inner.desc.fq_name.clone());
        family.set_help(inner.desc.help.clone());
        family.set_field_type(M::TYPE);
        // The registry sorts the children by label values when it gathers.
        let children = inner
            .children
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        family.set_metric(children.values().map(Metric::metric).collect());
        vec![family]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, Registry, TextEncoder};
    use std::hash::BuildHasher;

    fn text(r: &Registry) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&r.gather(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Label values whose concatenations are equal are distinct series here; the
    /// `prometheus` crate's vector merges them (asserted, to show what this replaces).
    #[test]
    fn concatenations_are_not_merged() {
        let ours = IntCounterVec::new(Opts::new("c", "help"), ["policy", "binding"]).unwrap();
        ours.with_label_values(&["ab", "c"]).inc();
        ours.with_label_values(&["a", "bc"]).inc_by(2);
        assert_eq!(ours.with_label_values(&["ab", "c"]).get(), 1);
        assert_eq!(ours.with_label_values(&["a", "bc"]).get(), 2);
        let r = Registry::new();
        r.register(Box::new(ours)).unwrap();
        let out = text(&r);
        assert!(out.contains("c{binding=\"c\",policy=\"ab\"} 1\n"), "{out}");
        assert!(out.contains("c{binding=\"bc\",policy=\"a\"} 2\n"), "{out}");

        let theirs =
            prometheus::IntCounterVec::new(Opts::new("c", "help"), &["policy", "binding"]).unwrap();
        theirs.with_label_values(&["ab", "c"]).inc();
        theirs.with_label_values(&["a", "bc"]).inc_by(2);
        assert_eq!(theirs.with_label_values(&["ab", "c"]).get(), 3);
    }

    /// The same values find the same child; a probe hashes as its owned key.
    #[test]
    fn hits_find_the_child() {
        let v = IntGaugeVec::new(Opts::new("g", "help"), ["a", "b", "c"]).unwrap();
        v.with_label_values(&["x", "", "z"]).set(7);
        assert_eq!(v.with_label_values(&["x", "", "z"]).get(), 7);
        assert_eq!(v.with_label_values(&["x", "z", ""]).get(), 0);
        assert_eq!(v.0.children.read().unwrap().len(), 2);
        let s = hashbrown::DefaultHashBuilder::default();
        let key: Key = ["x", "", "z"].iter().map(|v| Box::from(*v)).collect();
        assert_eq!(s.hash_one(&key), s.hash_one(Probe(&["x", "", "z"])));
        v.reset();
        assert_eq!(v.0.children.read().unwrap().len(), 0);
        assert_eq!(v.with_label_values(&["x", "", "z"]).get(), 0);
    }

    /// For values the crate keeps apart, the text exposition is byte for byte the one of
    /// the `prometheus` vectors: counters, integer and float gauges, histograms, with
    /// label values that need escaping and several series per family.
    #[test]
    fn exposition_matches_the_prometheus_vectors() {
        let buckets = vec![0.001, 0.01, 0.1, 1.0];
        let (r1, r2) = (Registry::new(), Registry::new());

        let c1 = IntCounterVec::new(Opts::new("t_total", "Counts."), ["policy", "action"]).unwrap();
        let c2 =
            prometheus::IntCounterVec::new(Opts::new("t_total", "Counts."), &["policy", "action"])
                .unwrap();
        let g1 = IntGaugeVec::new(Opts::new("t_gauge", "Gauges."), ["source"]).unwrap();
        let g2 =
            prometheus::IntGaugeVec::new(Opts::new("t_gauge", "Gauges."), &["source"]).unwrap();
        let f1 = GaugeVec::new(Opts::new("t_float", "Floats."), ["source"]).unwrap();
        let f2 = prometheus::GaugeVec::new(Opts::new("t_float", "Floats."), &["source"]).unwrap();
        let h = || HistogramOpts::new("t_seconds", "Seconds.").buckets(buckets.clone());
        let h1 = HistogramVec::new(h(), ["operation", "decision"]).unwrap();
        let h2 = prometheus::HistogramVec::new(h(), &["operation", "decision"]).unwrap();
        for c in [
            Box::new(c1.clone()) as Box<dyn Collector>,
            Box::new(g1.clone()),
            Box::new(f1.clone()),
            Box::new(h1.clone()),
        ] {
            r1.register(c).unwrap();
        }
        for c in [
            Box::new(c2.clone()) as Box<dyn Collector>,
            Box::new(g2.clone()),
            Box::new(f2.clone()),
            Box::new(h2.clone()),
        ] {
            r2.register(c).unwrap();
        }

        for (labels, n) in [
            (["zeta", "deny"], 3),
            (["alpha", "warn"], 1),
            (["alpha", "audit"], 2),
            (["quote\"back\\slash\nline", "deny"], 5),
            (["", "deny"], 1),
        ] {
            c1.with_label_values(&labels).inc_by(n);
            c2.with_label_values(&labels).inc_by(n);
        }
        for (s, v) in [("namespaces.v1", 1), ("configmaps.v1", 0), ("ä-ü", 12)] {
            g1.with_label_values(&[s]).set(v);
            g2.with_label_values(&[s]).set(v);
            f1.with_label_values(&[s]).set(v as f64 / 3.0);
            f2.with_label_values(&[s]).set(v as f64 / 3.0);
        }
        // Present with no observation, as the folder watch creates its series.
        h1.with_label_values(&["DELETE", "allowed"]);
        h2.with_label_values(&["DELETE", "allowed"]);
        for (labels, v) in [
            (["CREATE", "denied"], 0.0005),
            (["CREATE", "denied"], 0.5),
            (["UPDATE", "allowed"], 2.0),
            (["CREATE", "allowed"], 0.01),
        ] {
            h1.with_label_values(&labels).observe(v);
            h2.with_label_values(&labels).observe(v);
        }

        let (ours, theirs) = (text(&r1), text(&r2));
        assert_eq!(ours, theirs);
        // Not vacuous: every family and series is there.
        for needle in [
            "# TYPE t_total counter",
            "t_total{action=\"deny\",policy=\"quote\\\"back\\\\slash\\nline\"} 5",
            "# TYPE t_gauge gauge",
            "t_gauge{source=\"ä-ü\"} 12",
            "t_float{source=\"ä-ü\"} 4",
            "# TYPE t_seconds histogram",
            "t_seconds_bucket{decision=\"allowed\",operation=\"DELETE\",le=\"+Inf\"} 0",
            "t_seconds_count{decision=\"denied\",operation=\"CREATE\"} 2",
        ] {
            assert!(ours.contains(needle), "{needle}\n{ours}");
        }

        // And still after a reset drops some series.
        g1.reset();
        g2.reset();
        g1.with_label_values(&["namespaces.v1"]).set(1);
        g2.with_label_values(&["namespaces.v1"]).set(1);
        assert_eq!(text(&r1), text(&r2));
    }

    /// Options the crate refuses are refused at construction, not on first use.
    #[test]
    fn bad_definitions_are_refused_up_front() {
        assert!(IntCounterVec::new(Opts::new("bad name", "h"), ["a"]).is_err());
        assert!(IntCounterVec::new(Opts::new("n", ""), ["a"]).is_err());
        assert!(IntCounterVec::new(Opts::new("n", "h"), ["a-b"]).is_err());
        assert!(IntCounterVec::new(Opts::new("n", "h"), ["a", "a"]).is_err());
        let h = HistogramOpts::new("n", "h").buckets(vec![1.0, 0.5]);
        assert!(HistogramVec::new(h, ["a"]).is_err());
        assert!(HistogramVec::new(HistogramOpts::new("n", "h"), ["le"]).is_err());
    }
}
