//! Object conversion between equivalent versions, for a policy matched through an equivalent
//! resource (in-tree `admission.NewVersionedAttributes`): CRDs without a conversion webhook
//! (only `apiVersion` changes), and the built-in multi-version pairs current clusters serve:
//! HPA `autoscaling/v1` <-> `autoscaling/v2`, and core `v1` Event <-> `events.k8s.io/v1` Event.
//! Each mapping follows the API server's conversion functions (`pkg/apis/autoscaling/v1` and
//! `pkg/apis/events/v1` `conversion.go`, through the internal version) and writes the fields
//! as Go serialises the target type (`omitempty` or not). Anything else cannot be converted:
//! the caller reports it as a configuration error under the failurePolicy.

use serde_json::{json, Map, Value as Json};

use crate::matching::registry::{Conversion, Gvk};

/// Why an object cannot be converted to an equivalent version (the kinds boxed: this is an
/// error of a rare path, kept small for the results that carry it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The CRD converts its versions with a webhook.
    #[error("cannot convert {from} to {to}: CustomResourceDefinition {crd:?} converts its versions with a webhook, which celgate does not call")]
    Webhook {
        from: Box<Gvk>,
        to: Box<Gvk>,
        crd: String,
    },
    /// A pair of built-in versions celgate has no conversion for.
    #[error(
        "cannot convert {from} to {to}: celgate has no conversion between these built-in versions"
    )]
    NoBuiltin { from: Box<Gvk>, to: Box<Gvk> },
}

/// Converts `object` (of kind `from`) to `to` under the class's conversion strategy.
pub(super) fn convert(
    object: &Json,
    from: &Gvk,
    to: &Gvk,
    strategy: &Conversion,
) -> Result<Json, ConvertError> {
    match strategy {
        Conversion::Rewrite => {
            let mut out = object.clone();
            if let Some(m) = out.as_object_mut() {
                m.insert("apiVersion".into(), Json::String(to.api_version()));
            }
            Ok(out)
        }
        Conversion::Webhook(crd) => Err(ConvertError::Webhook {
            from: Box::new(from.clone()),
            to: Box::new(to.clone()),
            crd: crd.clone(),
        }),
        Conversion::Builtin => {
            let pair =
                |g: &str, v: &str, k: &str| from.group == g && from.version == v && from.kind == k;
            let to_is =
                |g: &str, v: &str, k: &str| to.group == g && to.version == v && to.kind == k;
            const HPA: &str = "HorizontalPodAutoscaler";
            if pair("autoscaling", "v1", HPA) && to_is("autoscaling", "v2", HPA) {
                Ok(hpa_v1_to_v2(object))
            } else if pair("autoscaling", "v2", HPA) && to_is("autoscaling", "v1", HPA) {
                Ok(hpa_v2_to_v1(object))
            } else if pair("", "v1", "Event") && to_is("events.k8s.io", "v1", "Event") {
                Ok(event_core_to_events(object))
            } else if pair("events.k8s.io", "v1", "Event") && to_is("", "v1", "Event") {
                Ok(event_events_to_core(object))
            } else {
                Err(ConvertError::NoBuiltin {
                    from: Box::new(from.clone()),
                    to: Box::new(to.clone()),
                })
            }
        }
    }
}

fn get<'a>(o: &'a Json, k: &str) -> Option<&'a Json> {
    o.get(k).filter(|v| !v.is_null())
}

/// A string field that Go omits when empty.
fn nonempty<'a>(o: &'a Json, k: &str) -> Option<&'a Json> {
    get(o, k).filter(|v| v.as_str() != Some(""))
}

/// A number field that Go omits when zero.
fn nonzero<'a>(o: &'a Json, k: &str) -> Option<&'a Json> {
    get(o, k).filter(|v| v.as_f64() != Some(0.0))
}

fn put(m: &mut Map<String, Json>, k: &str, v: Option<&Json>) {
    if let Some(v) = v {
        m.insert(k.into(), v.clone());
    }
}

fn head(object: &Json, api_version: &str, kind: &str) -> Map<String, Json> {
    let mut m = Map::new();
    m.insert("kind".into(), kind.into());
    m.insert("apiVersion".into(), api_version.into());
    m.insert(
        "metadata".into(),
        get(object, "metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    m
}

/// core `v1` Event -> `events.k8s.io/v1` Event (`Convert_core_Event_To_v1_Event`).
fn event_core_to_events(o: &Json) -> Json {
    let mut m = head(o, "events.k8s.io/v1", "Event");
    m.insert(
        "eventTime".into(),
        get(o, "eventTime").cloned().unwrap_or(Json::Null),
    );
    put(&mut m, "series", get(o, "series"));
    put(
        &mut m,
        "reportingController",
        nonempty(o, "reportingComponent"),
    );
    put(
        &mut m,
        "reportingInstance",
        nonempty(o, "reportingInstance"),
    );
    put(&mut m, "action", nonempty(o, "action"));
    put(&mut m, "reason", nonempty(o, "reason"));
    m.insert(
        "regarding".into(),
        get(o, "involvedObject")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    put(&mut m, "related", get(o, "related"));
    put(&mut m, "note", nonempty(o, "message"));
    put(&mut m, "type", nonempty(o, "type"));
    m.insert(
        "deprecatedSource".into(),
        get(o, "source").cloned().unwrap_or_else(|| json!({})),
    );
    for (to, from) in [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
    ] {
        m.insert(to.into(), get(o, from).cloned().unwrap_or(Json::Null));
    }
    put(&mut m, "deprecatedCount", nonzero(o, "count"));
    Json::Object(m)
}

/// `events.k8s.io/v1` Event -> core `v1` Event (`Convert_v1_Event_To_core_Event`).
fn event_events_to_core(o: &Json) -> Json {
    let mut m = head(o, "v1", "Event");
    m.insert(
        "involvedObject".into(),
        get(o, "regarding").cloned().unwrap_or_else(|| json!({})),
    );
    put(&mut m, "reason", nonempty(o, "reason"));
    put(&mut m, "message", nonempty(o, "note"));
    m.insert(
        "source".into(),
        get(o, "deprecatedSource")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    for (to, from) in [
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
    ] {
        m.insert(to.into(), get(o, from).cloned().unwrap_or(Json::Null));
    }
    put(&mut m, "count", nonzero(o, "deprecatedCount"));
    put(&mut m, "type", nonempty(o, "type"));
    m.insert(
        "eventTime".into(),
        get(o, "eventTime").cloned().unwrap_or(Json::Null),
    );
    put(&mut m, "series", get(o, "series"));
    put(&mut m, "action", nonempty(o, "action"));
    put(&mut m, "related", get(o, "related"));
    // Neither is `omitempty` in core/v1.
    for (to, from) in [
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
    ] {
        m.insert(
            to.into(),
            get(o, from).cloned().unwrap_or_else(|| json!("")),
        );
    }
    Json::Object(m)
}

/// The annotations autoscaling/v1 keeps what it has no field for in.
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// autoscaling/v1's implicit target when no metric is given.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

fn cpu_utilization_target(n: &Json) -> Json {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": n}}})
}

/// `autoscaling/v1` HPA -> `autoscaling/v2` (`Convert_v1_HorizontalPodAutoscaler_To_autoscaling_...`
/// then the internal version to v2).
fn hpa_v1_to_v2(o: &Json) -> Json {
    let mut m = head(o, "autoscaling/v2", "HorizontalPodAutoscaler");
    let mut annotations = o["metadata"]["annotations"].as_object().cloned();
    let mut take = |key: &str| -> Option<Vec<Json>> {
        let a = annotations.as_mut()?;
        let text = a.remove(key)?;
        serde_json::from_str::<Vec<Json>>(text.as_str()?).ok()
    };
    let other_metrics = take(METRICS);
    let current_metrics = take(CURRENT_METRICS);
    let conditions = take(CONDITIONS);
    if let Some(meta) = m.get_mut("metadata").and_then(Json::as_object_mut) {
        match annotations {
            Some(a) if !a.is_empty() => {
                meta.insert("annotations".into(), Json::Object(a));
            }
            _ => {
                meta.remove("annotations");
            }
        }
    }

    let spec_in = &o["spec"];
    let mut spec = Map::new();
    spec.insert(
        "scaleTargetRef".into(),
        get(spec_in, "scaleTargetRef")
            .cloned()
            .unwrap_or_else(|| json!({"kind": "", "name": ""})),
    );
    put(&mut spec, "minReplicas", get(spec_in, "minReplicas"));
    spec.insert(
        "maxReplicas".into(),
        get(spec_in, "maxReplicas").cloned().unwrap_or(json!(0)),
    );
    let mut metrics: Vec<Json> = other_metrics
        .unwrap_or_default()
        .iter()
        .map(metric_spec_v1_to_v2)
        .collect();
    if let Some(n) = get(spec_in, "targetCPUUtilizationPercentage") {
        metrics.push(cpu_utilization_target(n));
    }
    if metrics.is_empty() {
        metrics.push(cpu_utilization_target(&json!(DEFAULT_CPU_UTILIZATION)));
    }
    spec.insert("metrics".into(), Json::Array(metrics));
    m.insert("spec".into(), Json::Object(spec));

    let status_in = &o["status"];
    let mut status = Map::new();
    put(
        &mut status,
        "observedGeneration",
        get(status_in, "observedGeneration"),
    );
    put(
        &mut status,
        "lastScaleTime",
        get(status_in, "lastScaleTime"),
    );
    put(
        &mut status,
        "currentReplicas",
        nonzero(status_in, "currentReplicas"),
    );
    status.insert(
        "desiredReplicas".into(),
        get(status_in, "desiredReplicas")
            .cloned()
            .unwrap_or(json!(0)),
    );
    let current: Vec<Json> = match current_metrics {
        Some(list) => list.iter().map(metric_status_v1_to_v2).collect(),
        None => get(status_in, "currentCPUUtilizationPercentage")
            .map(|n| {
                vec![json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": n}}})]
            })
            .unwrap_or_default(),
    };
    if !current.is_empty() {
        status.insert("currentMetrics".into(), Json::Array(current));
    }
    if let Some(c) = conditions.filter(|c| !c.is_empty()) {
        status.insert("conditions".into(), Json::Array(c));
    }
    m.insert("status".into(), Json::Object(status));
    Json::Object(m)
}

/// `autoscaling/v2` HPA -> `autoscaling/v1`: what v1 has no field for goes to its annotations,
/// as Go's `json.Marshal` writes them (fields in struct order).
fn hpa_v2_to_v1(o: &Json) -> Json {
    let mut m = head(o, "autoscaling/v1", "HorizontalPodAutoscaler");
    let spec_in = &o["spec"];
    let status_in = &o["status"];
    let empty = Vec::new();
    let metrics = spec_in["metrics"].as_array().unwrap_or(&empty);
    let is_cpu = |metric: &Json, field: &str| {
        metric["type"] == "Resource"
            && metric["resource"]["name"] == "cpu"
            && !metric["resource"][field]["averageUtilization"].is_null()
    };
    let other: Vec<Ordered> = metrics
        .iter()
        .filter(|metric| !is_cpu(metric, "target"))
        .map(metric_spec_v2_to_v1)
        .collect();
    let current_in = status_in["currentMetrics"].as_array().unwrap_or(&empty);
    let current: Vec<Ordered> = current_in.iter().map(metric_status_v2_to_v1).collect();
    let conditions: Vec<Ordered> = status_in["conditions"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|c| {
            obj([
                ("type", Some(raw(c["type"].clone()))),
                ("status", Some(raw(c["status"].clone()))),
                (
                    "lastTransitionTime",
                    Some(raw(c["lastTransitionTime"].clone())),
                ),
                ("reason", nonempty(c, "reason").cloned().map(raw)),
                ("message", nonempty(c, "message").cloned().map(raw)),
                (
                    "observedGeneration",
                    get(c, "observedGeneration").cloned().map(raw),
                ),
            ])
        })
        .collect();
    if !other.is_empty() || !current.is_empty() || !conditions.is_empty() {
        if let Some(meta) = m.get_mut("metadata").and_then(Json::as_object_mut) {
            let a = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = a.as_object_mut() {
                for (key, list) in [
                    (METRICS, other),
                    (CURRENT_METRICS, current),
                    (CONDITIONS, conditions),
                ] {
                    if !list.is_empty() {
                        a.insert(key.into(), Json::String(Ordered::Arr(list).to_go_json()));
                    }
                }
            }
        }
    }

    let mut spec = Map::new();
    spec.insert(
        "scaleTargetRef".into(),
        get(spec_in, "scaleTargetRef")
            .cloned()
            .unwrap_or_else(|| json!({"kind": "", "name": ""})),
    );
    put(&mut spec, "minReplicas", get(spec_in, "minReplicas"));
    spec.insert(
        "maxReplicas".into(),
        get(spec_in, "maxReplicas").cloned().unwrap_or(json!(0)),
    );
    // The first CPU resource metric gives the target, if it is a utilization.
    if let Some(cpu) = metrics
        .iter()
        .find(|mt| mt["type"] == "Resource" && mt["resource"]["name"] == "cpu")
    {
        put(
            &mut spec,
            "targetCPUUtilizationPercentage",
            get(&cpu["resource"]["target"], "averageUtilization"),
        );
    }
    m.insert("spec".into(), Json::Object(spec));

    let mut status = Map::new();
    put(
        &mut status,
        "observedGeneration",
        get(status_in, "observedGeneration"),
    );
    put(
        &mut status,
        "lastScaleTime",
        get(status_in, "lastScaleTime"),
    );
    for k in ["currentReplicas", "desiredReplicas"] {
        status.insert(k.into(), get(status_in, k).cloned().unwrap_or(json!(0)));
    }
    // The last CPU utilization among the current metrics.
    if let Some(n) = current_in
        .iter()
        .filter(|mt| is_cpu(mt, "current"))
        .filter_map(|mt| get(&mt["resource"]["current"], "averageUtilization"))
        .next_back()
    {
        status.insert("currentCPUUtilizationPercentage".into(), n.clone());
    }
    m.insert("status".into(), Json::Object(status));
    Json::Object(m)
}

/// `metricName` + `selector` -> a v2 `MetricIdentifier`.
fn identifier(name: &Json, selector: Option<&Json>) -> Json {
    let mut id = Map::new();
    id.insert("name".into(), name.clone());
    put(&mut id, "selector", selector);
    Json::Object(id)
}

fn target(
    kind: &str,
    value: Option<&Json>,
    average: Option<&Json>,
    utilization: Option<&Json>,
) -> Json {
    let mut t = Map::new();
    t.insert("type".into(), kind.into());
    put(&mut t, "value", value);
    put(&mut t, "averageValue", average);
    put(&mut t, "averageUtilization", utilization);
    Json::Object(t)
}

fn value_status(value: Option<&Json>, average: Option<&Json>, utilization: Option<&Json>) -> Json {
    let mut t = Map::new();
    put(&mut t, "value", value);
    put(&mut t, "averageValue", average);
    put(&mut t, "averageUtilization", utilization);
    Json::Object(t)
}

/// A quantity Go always writes (a non-pointer `resource.Quantity`): `"0"` when unset.
fn quantity(o: &Json, k: &str) -> Json {
    get(o, k).cloned().unwrap_or_else(|| json!("0"))
}

fn name(o: &Json, k: &str) -> Json {
    get(o, k).cloned().unwrap_or_else(|| json!(""))
}

fn metric_spec_v1_to_v2(m: &Json) -> Json {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    if let Some(s) = get(m, "object") {
        let average = get(s, "averageValue");
        let kind = if average.is_none() {
            "Value"
        } else {
            "AverageValue"
        };
        out.insert(
            "object".into(),
            json!({
                "describedObject": get(s, "target").cloned().unwrap_or_else(|| json!({"kind": "", "name": ""})),
                "target": target(kind, Some(&quantity(s, "targetValue")), average, None),
                "metric": identifier(&name(s, "metricName"), get(s, "selector")),
            }),
        );
    }
    if let Some(s) = get(m, "pods") {
        out.insert(
            "pods".into(),
            json!({
                "metric": identifier(&name(s, "metricName"), get(s, "selector")),
                "target": target("AverageValue", None, Some(&quantity(s, "targetAverageValue")), None),
            }),
        );
    }
    for field in ["resource", "containerResource"] {
        if let Some(s) = get(m, field) {
            let utilization = get(s, "targetAverageUtilization");
            let kind = if utilization.is_none() {
                "AverageValue"
            } else {
                "Utilization"
            };
            let mut r = Map::new();
            r.insert("name".into(), name(s, "name"));
            r.insert(
                "target".into(),
                target(kind, None, get(s, "targetAverageValue"), utilization),
            );
            if field == "containerResource" {
                r.insert("container".into(), name(s, "container"));
            }
            out.insert(field.into(), Json::Object(r));
        }
    }
    if let Some(s) = get(m, "external") {
        let value = get(s, "targetValue");
        let kind = if value.is_none() {
            "AverageValue"
        } else {
            "Value"
        };
        out.insert(
            "external".into(),
            json!({
                "metric": identifier(&name(s, "metricName"), get(s, "metricSelector")),
                "target": target(kind, value, get(s, "targetAverageValue"), None),
            }),
        );
    }
    Json::Object(out)
}

fn metric_status_v1_to_v2(m: &Json) -> Json {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    if let Some(s) = get(m, "object") {
        out.insert(
            "object".into(),
            json!({
                "metric": identifier(&name(s, "metricName"), get(s, "selector")),
                "current": value_status(Some(&quantity(s, "currentValue")), get(s, "averageValue"), None),
                "describedObject": get(s, "target").cloned().unwrap_or_else(|| json!({"kind": "", "name": ""})),
            }),
        );
    }
    if let Some(s) = get(m, "pods") {
        out.insert(
            "pods".into(),
            json!({
                "metric": identifier(&name(s, "metricName"), get(s, "selector")),
                "current": value_status(None, Some(&quantity(s, "currentAverageValue")), None),
            }),
        );
    }
    for field in ["resource", "containerResource"] {
        if let Some(s) = get(m, field) {
            let mut r = Map::new();
            r.insert("name".into(), name(s, "name"));
            r.insert(
                "current".into(),
                value_status(
                    None,
                    Some(&quantity(s, "currentAverageValue")),
                    get(s, "currentAverageUtilization"),
                ),
            );
            if field == "containerResource" {
                r.insert("container".into(), name(s, "container"));
            }
            out.insert(field.into(), Json::Object(r));
        }
    }
    if let Some(s) = get(m, "external") {
        out.insert(
            "external".into(),
            json!({
                "metric": identifier(&name(s, "metricName"), get(s, "metricSelector")),
                "current": value_status(Some(&quantity(s, "currentValue")), get(s, "currentAverageValue"), None),
            }),
        );
    }
    Json::Object(out)
}

fn metric_spec_v2_to_v1(m: &Json) -> Ordered {
    let s = |f: &str| get(m, f);
    let object = s("object").map(|s| {
        obj([
            ("target", Some(cross_ref(&s["describedObject"]))),
            ("metricName", Some(raw(name(&s["metric"], "name")))),
            ("targetValue", Some(raw(quantity(&s["target"], "value")))),
            ("selector", get(&s["metric"], "selector").map(selector)),
            (
                "averageValue",
                get(&s["target"], "averageValue").cloned().map(raw),
            ),
        ])
    });
    let pods = s("pods").map(|s| {
        obj([
            ("metricName", Some(raw(name(&s["metric"], "name")))),
            (
                "targetAverageValue",
                Some(raw(quantity(&s["target"], "averageValue"))),
            ),
            ("selector", get(&s["metric"], "selector").map(selector)),
        ])
    });
    let resource = |s: &Json, container: bool| {
        obj([
            ("name", Some(raw(name(s, "name")))),
            (
                "targetAverageUtilization",
                get(&s["target"], "averageUtilization").cloned().map(raw),
            ),
            (
                "targetAverageValue",
                get(&s["target"], "averageValue").cloned().map(raw),
            ),
            ("container", container.then(|| raw(name(s, "container")))),
        ])
    };
    let external = s("external").map(|s| {
        obj([
            ("metricName", Some(raw(name(&s["metric"], "name")))),
            (
                "metricSelector",
                get(&s["metric"], "selector").map(selector),
            ),
            ("targetValue", get(&s["target"], "value").cloned().map(raw)),
            (
                "targetAverageValue",
                get(&s["target"], "averageValue").cloned().map(raw),
            ),
        ])
    });
    obj([
        ("type", Some(raw(m["type"].clone()))),
        ("object", object),
        ("pods", pods),
        ("resource", s("resource").map(|r| resource(r, false))),
        (
            "containerResource",
            s("containerResource").map(|r| resource(r, true)),
        ),
        ("external", external),
    ])
}

fn metric_status_v2_to_v1(m: &Json) -> Ordered {
    let s = |f: &str| get(m, f);
    let object = s("object").map(|s| {
        obj([
            ("target", Some(cross_ref(&s["describedObject"]))),
            ("metricName", Some(raw(name(&s["metric"], "name")))),
            ("currentValue", Some(raw(quantity(&s["current"], "value")))),
            ("selector", get(&s["metric"], "selector").map(selector)),
            (
                "averageValue",
                get(&s["current"], "averageValue").cloned().map(raw),
            ),
        ])
    });
    let pods = s("pods").map(|s| {
        obj([
            ("metricName", Some(raw(name(&s["metric"], "name")))),
            (
                "currentAverageValue",
                Some(raw(quantity(&s["current"], "averageValue"))),
            ),
            ("selector", get(&s["metric"], "selector").map(selector)),
        ])
    });
    let resource = |s: &Json, container: bool| {
        obj([
            ("name", Some(raw(name(s, "name")))),
            (
                "currentAverageUtilization",
                get(&s["current"], "averageUtilization").cloned().map(raw),
            ),
            (
                "currentAverageValue",
                Some(raw(quantity(&s["current"], "averageValue"))),
            ),
            ("container", container.then(|| raw(name(s, "container")))),
        ])
    };
    let external = s("external").map(|s| {
        obj([
            ("metricName", Some(raw(name(&s["metric"], "name")))),
            (
                "metricSelector",
                get(&s["metric"], "selector").map(selector),
            ),
            ("currentValue", Some(raw(quantity(&s["current"], "value")))),
            (
                "currentAverageValue",
                get(&s["current"], "averageValue").cloned().map(raw),
            ),
        ])
    });
    obj([
        ("type", Some(raw(m["type"].clone()))),
        ("object", object),
        ("pods", pods),
        ("resource", s("resource").map(|r| resource(r, false))),
        (
            "containerResource",
            s("containerResource").map(|r| resource(r, true)),
        ),
        ("external", external),
    ])
}

/// JSON with object fields in a chosen order, for text Go's `json.Marshal` writes from a
/// struct (serde_json's maps sort their keys).
enum Ordered {
    Raw(Json),
    Obj(Vec<(&'static str, Ordered)>),
    Arr(Vec<Ordered>),
}

fn raw(j: Json) -> Ordered {
    Ordered::Raw(j)
}

fn obj<const N: usize>(fields: [(&'static str, Option<Ordered>); N]) -> Ordered {
    Ordered::Obj(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect(),
    )
}

/// A `CrossVersionObjectReference` in struct order.
fn cross_ref(r: &Json) -> Ordered {
    obj([
        ("kind", Some(raw(name(r, "kind")))),
        ("name", Some(raw(name(r, "name")))),
        ("apiVersion", nonempty(r, "apiVersion").cloned().map(raw)),
    ])
}

/// A `LabelSelector` in struct order (its requirements' keys sort as their struct does).
fn selector(s: &Json) -> Ordered {
    obj([
        ("matchLabels", get(s, "matchLabels").cloned().map(raw)),
        (
            "matchExpressions",
            get(s, "matchExpressions").cloned().map(raw),
        ),
    ])
}

impl Ordered {
    fn to_go_json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Ordered::Raw(j) => out.push_str(&j.to_string()),
            Ordered::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Ordered::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Json::String((*k).to_string()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(g: &str, v: &str, k: &str) -> Gvk {
        Gvk::new(g, v, k)
    }

    #[test]
    fn crd_versions_rewrite_api_version_only() {
        let o = json!({"apiVersion": "example.com/v2", "kind": "Widget", "spec": {"a": 1}});
        let out = convert(
            &o,
            &gvk("example.com", "v2", "Widget"),
            &gvk("example.com", "v1", "Widget"),
            &Conversion::Rewrite,
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"a": 1}})
        );
        let e = convert(
            &o,
            &gvk("example.com", "v2", "Widget"),
            &gvk("example.com", "v1", "Widget"),
            &Conversion::Webhook("widgets.example.com".into()),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "cannot convert example.com/v2, Kind=Widget to example.com/v1, Kind=Widget: CustomResourceDefinition \"widgets.example.com\" converts its versions with a webhook, which celgate does not call");
        let e = convert(
            &o,
            &gvk("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema"),
            &gvk("flowcontrol.apiserver.k8s.io", "v1beta3", "FlowSchema"),
            &Conversion::Builtin,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("celgate has no conversion between these built-in versions"),
            "{e}"
        );
    }

    #[test]
    fn events_both_ways() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Started", "message": "started container",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:01:00Z",
            "count": 2, "type": "Normal", "eventTime": null,
            "reportingComponent": "", "reportingInstance": ""
        });
        let ev = convert(
            &core,
            &gvk("", "v1", "Event"),
            &gvk("events.k8s.io", "v1", "Event"),
            &Conversion::Builtin,
        )
        .unwrap();
        assert_eq!(
            ev,
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "namespace": "default"},
                "eventTime": null,
                "reason": "Started",
                "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
                "note": "started container", "type": "Normal",
                "deprecatedSource": {"component": "kubelet", "host": "n1"},
                "deprecatedFirstTimestamp": "2024-01-01T00:00:00Z",
                "deprecatedLastTimestamp": "2024-01-01T00:01:00Z",
                "deprecatedCount": 2
            })
        );
        let back = convert(
            &ev,
            &gvk("events.k8s.io", "v1", "Event"),
            &gvk("", "v1", "Event"),
            &Conversion::Builtin,
        )
        .unwrap();
        assert_eq!(back, core, "the round trip is lossless");
    }

    #[test]
    fn hpa_v1_to_v2_and_back() {
        let v1 = json!({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "default"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                     "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60},
            "status": {"currentReplicas": 0, "desiredReplicas": 0}
        });
        let from = gvk("autoscaling", "v1", "HorizontalPodAutoscaler");
        let to = gvk("autoscaling", "v2", "HorizontalPodAutoscaler");
        let v2 = convert(&v1, &from, &to, &Conversion::Builtin).unwrap();
        assert_eq!(
            v2,
            json!({
                "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "h", "namespace": "default"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                         "minReplicas": 1, "maxReplicas": 5,
                         "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]},
                "status": {"desiredReplicas": 0}
            })
        );
        let mut bare = v1.clone();
        bare["spec"]
            .as_object_mut()
            .unwrap()
            .remove("targetCPUUtilizationPercentage");
        let v2 = convert(&bare, &from, &to, &Conversion::Builtin).unwrap();
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80,
            "v1's implicit default"
        );

        let v2 = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "default"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                     "maxReplicas": 5,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}
                     ]},
            "status": {"desiredReplicas": 2, "currentReplicas": 2}
        });
        let v1 = convert(&v2, &to, &from, &Conversion::Builtin).unwrap();
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(
            v1["metadata"]["annotations"][METRICS],
            r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
        );
        assert_eq!(
            v1["status"],
            json!({"currentReplicas": 2, "desiredReplicas": 2})
        );
        let again = convert(&v1, &from, &to, &Conversion::Builtin).unwrap();
        assert_eq!(
            again["spec"]["metrics"],
            json!([
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}
            ]),
            "v1 -> v2 puts the annotation's metrics first, then the CPU target"
        );
        assert!(
            again["metadata"].get("annotations").is_none(),
            "the annotation is consumed"
        );
    }
}
