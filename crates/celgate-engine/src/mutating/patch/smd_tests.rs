//! The ApplyConfiguration merge against the recorded cases (`testdata/smd-cases.json`:
//! for each `NNN-ac-*` case of the shared MAP oracle sample, the request object of
//! `review-in.json`, the object the webhook saw after the policy (`review-mutated.json`) or
//! the API server's message without its `policy … denied request: ` prefix, and the CRD
//! schema), with each case's expression rebuilt by hand as an [`ApplyNode`]; then the
//! semantics beyond the sample and a property test that no input panics.

use proptest::prelude::*;
use serde_json::{json, Value as Json};

use super::*;
use crate::crd::schema::Schema;

const CASES: &str = include_str!("testdata/smd-cases.json");

fn obj(type_name: &str, fields: Vec<(&str, ApplyNode)>) -> ApplyNode {
    ApplyNode::Object {
        type_name: type_name.into(),
        fields: fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
    }
}

fn s(v: &str) -> ApplyNode {
    ApplyNode::String(v.into())
}

fn list(items: Vec<ApplyNode>) -> ApplyNode {
    ApplyNode::List(items)
}

fn map(entries: Vec<(&str, ApplyNode)>) -> ApplyNode {
    ApplyNode::Map(entries.into_iter().map(|(k, v)| (s(k), v)).collect())
}

fn case(name: &str) -> Json {
    let cases: Json = serde_json::from_str(CASES).expect("fixture parses");
    cases[name].clone()
}

fn schema_of(c: &Json) -> MergeSchema {
    let g = &c["gvk"];
    let gvk = Gvk::new(
        g["group"].as_str().unwrap(),
        g["version"].as_str().unwrap(),
        g["kind"].as_str().unwrap(),
    );
    match c.get("crd_schema") {
        Some(raw) => {
            let schema: Schema = serde_json::from_value(raw.clone()).unwrap();
            MergeSchema::crd(&gvk, Some(&schema))
        }
        None => MergeSchema::builtin(&gvk),
    }
}

fn run(name: &str, config: ApplyNode) -> (Json, Result<Json, ApplyError>) {
    let c = case(name);
    let out = apply_configuration(&c["object"], &config, &schema_of(&c));
    (c, out)
}

/// What the sample's checker masks: managed fields (their times differ between the two
/// recordings) and the generated `kube-api-access-xxxxx` names.
fn masked(v: &Json) -> Json {
    match v {
        Json::Object(m) => Json::Object(
            m.iter()
                .filter(|(k, _)| *k != "managedFields")
                .map(|(k, v)| (k.clone(), masked(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(masked).collect()),
        Json::String(s) if s.starts_with("kube-api-access-") => json!("kube-api-access-xxxxx"),
        other => other.clone(),
    }
}

/// The checker's `--lenient-defaults`: a field the recorded object has and ours lacks was
/// added by the API server's defaulting after the mutation.
fn lenient_eq(ours: &Json, recorded: &Json) -> bool {
    match (ours, recorded) {
        (Json::Object(a), Json::Object(b)) => {
            a.keys().all(|k| b.contains_key(k))
                && b.iter()
                    .all(|(k, v)| a.get(k).is_none_or(|o| lenient_eq(o, v)))
        }
        (Json::Array(a), Json::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| lenient_eq(x, y))
        }
        (a, b) => a == b,
    }
}

fn assert_mutates(name: &str, config: ApplyNode) {
    let (c, out) = run(name, config);
    let out = out.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(masked(&out), masked(&c["mutated"]), "{name}");
}

fn assert_fails(name: &str, config: ApplyNode) {
    let (c, out) = run(name, config);
    let err = out.expect_err(name);
    assert_eq!(err.to_string(), c["message"].as_str().unwrap(), "{name}");
}

fn labels(entries: Vec<(&str, ApplyNode)>) -> ApplyNode {
    obj(
        "Object",
        vec![(
            "metadata",
            obj("Object.metadata", vec![("labels", map(entries))]),
        )],
    )
}

fn spec(fields: Vec<(&str, ApplyNode)>) -> ApplyNode {
    obj("Object", vec![("spec", obj("Object.spec", fields))])
}

fn container(type_name: &str, fields: Vec<(&str, ApplyNode)>) -> ApplyNode {
    obj(type_name, fields)
}

#[test]
fn granular_maps_merge() {
    assert_mutates("002-ac-label-merge", labels(vec![("added", s("2"))]));
    assert_mutates(
        "256-ac-update-merge-with-old",
        labels(vec![("added", s("yes"))]),
    );
    let data = |k: &str, v: &str| obj("Object", vec![("data", map(vec![(k, s(v))]))]);
    assert_mutates("005-ac-data-merge", data("k2", "v2"));
    assert_mutates("006-ac-data-replace-key", data("k1", "changed"));
    assert_mutates("022-ac-conditional", labels(vec![("checked", s("true"))]));
    assert_mutates(
        "048-ac-configmap-typed-root",
        obj(
            "Object",
            vec![
                (
                    "metadata",
                    obj(
                        "Object.metadata",
                        vec![
                            ("labels", map(vec![("l", s("1"))])),
                            ("annotations", map(vec![("a", s("1"))])),
                        ],
                    ),
                ),
                ("data", map(vec![("d", s("1"))])),
            ],
        ),
    );
}

#[test]
fn structs_are_created_and_merged() {
    assert_mutates(
        "009-ac-pod-nested-securitycontext",
        spec(vec![(
            "securityContext",
            obj(
                "Object.spec.securityContext",
                vec![
                    ("runAsNonRoot", ApplyNode::Bool(true)),
                    ("runAsUser", ApplyNode::Int(1000)),
                ],
            ),
        )]),
    );
    assert_mutates(
        "019-ac-deploy-strategy-recreate",
        spec(vec![(
            "strategy",
            obj("Object.spec.strategy", vec![("type", s("Recreate"))]),
        )]),
    );
    assert_mutates(
        "034-ac-status-on-create",
        obj(
            "Object",
            vec![(
                "status",
                obj(
                    "Object.status",
                    vec![("phase", s("Running")), ("message", s("set by MAP"))],
                ),
            )],
        ),
    );
}

#[test]
fn an_empty_object_changes_nothing() {
    assert_mutates("021-ac-empty-object", obj("Object", vec![]));
}

#[test]
fn list_maps_merge_by_key() {
    let containers = |fields| {
        spec(vec![(
            "containers",
            list(vec![container("Object.spec.containers", fields)]),
        )])
    };
    assert_mutates(
        "010-ac-pod-container-merge",
        containers(vec![("name", s("c")), ("image", s("nginx:1.27"))]),
    );
    assert_mutates(
        "012-ac-pod-container-env-merge",
        containers(vec![
            ("name", s("c")),
            (
                "env",
                list(vec![obj(
                    "Object.spec.containers.env",
                    vec![("name", s("B")), ("value", s("2"))],
                )]),
            ),
        ]),
    );
    assert_mutates(
        "016-ac-pod-volumes-add",
        spec(vec![(
            "volumes",
            list(vec![obj(
                "Object.spec.volumes",
                vec![
                    ("name", s("scratch")),
                    ("emptyDir", obj("Object.spec.volumes.emptyDir", vec![])),
                ],
            )]),
        )]),
    );
    // A new container is appended; the API server defaults it afterwards.
    let (c, out) = run(
        "011-ac-pod-container-add",
        containers(vec![("name", s("sidecar")), ("image", s("busybox:1.36"))]),
    );
    let out = masked(&out.unwrap());
    assert!(lenient_eq(&out, &masked(&c["mutated"])), "{out:#}");
}

#[test]
fn sets_put_new_items_first() {
    assert_mutates(
        "020-ac-finalizers-set-list",
        obj(
            "Object",
            vec![(
                "metadata",
                obj(
                    "Object.metadata",
                    vec![("finalizers", list(vec![s("example.com/f")]))],
                ),
            )],
        ),
    );
    assert_mutates(
        "037-ac-crd-set-list",
        spec(vec![("tags", list(vec![s("b"), s("a")]))]),
    );
}

#[test]
fn crd_fields_follow_the_structural_schema() {
    assert_mutates(
        "035-ac-crd-scalar",
        spec(vec![("color", s("red")), ("size", ApplyNode::Int(3))]),
    );
    assert_mutates(
        "040-ac-crd-granular-map",
        spec(vec![("settings", map(vec![("b", s("2"))]))]),
    );
    assert_mutates(
        "042-ac-crd-preserve-unknown",
        spec(vec![(
            "extra",
            obj(
                "Object.spec.extra",
                vec![("anything", map(vec![("deep", ApplyNode::Int(1))]))],
            ),
        )]),
    );
    assert_fails("043-ac-crd-unknown-field", spec(vec![("bogus", s("x"))]));
    assert_fails(
        "254-ac-crd-listmap-missing-key",
        spec(vec![(
            "ports",
            list(vec![obj(
                "Object.spec.ports",
                vec![("port", ApplyNode::Int(443))],
            )]),
        )]),
    );
}

#[test]
fn atomic_lists_maps_and_structs_are_refused() {
    assert_fails(
        "014-ac-pod-tolerations",
        spec(vec![(
            "tolerations",
            list(vec![obj(
                "Object.spec.tolerations",
                vec![("key", s("k")), ("operator", s("Exists"))],
            )]),
        )]),
    );
    assert_fails(
        "017-ac-deploy-selector-atomic",
        spec(vec![(
            "selector",
            obj(
                "Object.spec.selector",
                vec![("matchLabels", map(vec![("app", s("web"))]))],
            ),
        )]),
    );
    assert_fails(
        "038-ac-crd-atomic-list",
        spec(vec![("args", list(vec![s("x")]))]),
    );
    assert_fails(
        "039-ac-crd-plain-list",
        spec(vec![("plain", list(vec![s("x")]))]),
    );
}

#[test]
fn fields_and_types_are_checked_at_run_time() {
    assert_fails("027-ac-wrong-field-name", spec(vec![("notAField", s("x"))]));
    assert_fails(
        "028-ac-wrong-field-type",
        spec(vec![("replicas", s("three"))]),
    );
    assert_fails(
        "033-ac-int-into-string-map",
        obj(
            "Object",
            vec![("data", map(vec![("n", ApplyNode::Int(1))]))],
        ),
    );
    // A plain CEL map as a list element is a `map[ref.Val]ref.Val`, which SMD cannot read.
    assert_fails(
        "045-ac-list-of-plain-maps",
        spec(vec![(
            "containers",
            list(vec![map(vec![
                ("name", s("c")),
                ("image", s("nginx:1.27")),
            ])]),
        )]),
    );
}

#[test]
fn type_names_must_follow_the_field_path() {
    assert_fails(
        "029-ac-wrong-type-name",
        obj(
            "Object",
            vec![(
                "spec",
                obj(
                    "Object.metadata",
                    vec![("labels", map(vec![("a", s("b"))]))],
                ),
            )],
        ),
    );
    assert_fails(
        "046-ac-list-wrong-typename",
        spec(vec![(
            "containers",
            list(vec![container(
                "Object.spec.initContainers",
                vec![("name", s("c")), ("image", s("nginx:1.27"))],
            )]),
        )]),
    );
}

fn pod() -> Json {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
           "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

fn pod_schema() -> MergeSchema {
    MergeSchema::builtin(&Gvk::new("", "v1", "Pod"))
}

#[test]
fn kinds_without_a_schema_have_no_corresponding_type() {
    let schema = MergeSchema::builtin(&Gvk::new("", "v1", "PodExecOptions"));
    let err = apply_configuration(&json!({}), &obj("Object", vec![]), &schema).unwrap_err();
    assert_eq!(
        err.to_string(),
        "error applying patch: failed to convert patch object to typed object: no corresponding type for /v1, Kind=PodExecOptions"
    );
    let schema = MergeSchema::builtin(&Gvk::new("autoscaling", "v1", "Scale"));
    let err = apply_configuration(&json!({}), &obj("Object", vec![]), &schema).unwrap_err();
    assert!(err
        .to_string()
        .ends_with("no corresponding type for autoscaling/v1, Kind=Scale"));
}

#[test]
fn null_bytes_and_uint_values_are_refused_with_their_go_form() {
    let label = |v| labels(vec![("x", v)]);
    let err = |config| {
        apply_configuration(&pod(), &config, &pod_schema())
            .unwrap_err()
            .to_string()
    };
    let prefix = "error applying patch: failed to convert patch object to typed object: ";
    assert_eq!(
        err(label(ApplyNode::Null)),
        format!(
            "{prefix}.metadata.labels.x: expected string, got &value.valueUnstructured{{Value:0}}"
        )
    );
    assert_eq!(
        err(label(ApplyNode::Bytes(b"ab".to_vec()))),
        format!("{prefix}.metadata.labels.x: expected string, got &value.valueUnstructured{{Value:[]uint8{{0x61, 0x62}}}}")
    );
    assert_eq!(
        err(label(ApplyNode::Uint(10))),
        format!("{prefix}.metadata.labels.x: expected string, got &value.valueUnstructured{{Value:0xa}}")
    );
    assert_eq!(
        err(spec(vec![("priority", ApplyNode::Null)])),
        format!("{prefix}.spec.priority: expected numeric (int or float), got structpb.NullValue")
    );
}

#[test]
fn a_plain_map_works_for_a_struct_field() {
    let config = spec(vec![(
        "securityContext",
        map(vec![("runAsUser", ApplyNode::Int(5))]),
    )]);
    let out = apply_configuration(&pod(), &config, &pod_schema()).unwrap();
    assert_eq!(out["spec"]["securityContext"], json!({"runAsUser": 5}));
}

#[test]
fn list_map_items_keep_the_object_order_and_new_ones_follow_their_neighbours() {
    let mut object = pod();
    object["spec"]["containers"] = json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]);
    let c = |n: &str| {
        obj(
            "Object.spec.containers",
            vec![("name", s(n)), ("image", s("x"))],
        )
    };
    let config = spec(vec![("containers", list(vec![c("n"), c("b")]))]);
    let out = apply_configuration(&object, &config, &pod_schema()).unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "n", "b", "c"]);
    assert_eq!(
        out["spec"]["containers"][2],
        json!({"name": "b", "image": "x"})
    );
}

#[test]
fn core_list_map_keys_take_their_default() {
    // `name` defaults to "" in the core schema, so a container without a name is keyed by it.
    let config = spec(vec![(
        "containers",
        list(vec![obj("Object.spec.containers", vec![("image", s("x"))])]),
    )]);
    let out = apply_configuration(&pod(), &config, &pod_schema()).unwrap();
    assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 2);
}

#[test]
fn non_string_map_keys_fail_the_conversion() {
    let config = obj(
        "Object",
        vec![("data", ApplyNode::Map(vec![(ApplyNode::Int(1), s("a"))]))],
    );
    let err = apply_configuration(&pod(), &config, &pod_schema()).unwrap_err();
    assert_eq!(err.to_string(), "invalid return type: *dynamic.ObjectVal");
}

#[test]
fn several_errors_are_listed() {
    let config = spec(vec![("priority", s("x")), ("hostname", ApplyNode::Int(1))]);
    let err = apply_configuration(&pod(), &config, &pod_schema()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "error applying patch: failed to convert patch object to typed object: errors:\n  \
         .spec.priority: expected numeric (int or float), got string\n  \
         .spec.hostname: expected string, got &value.valueUnstructured{Value:1}"
    );
}

#[test]
fn native_data_is_used_as_is() {
    // `object.metadata.labels` passed back: native JSON, not a CEL-built map.
    let config = obj(
        "Object",
        vec![(
            "metadata",
            obj(
                "Object.metadata",
                vec![("annotations", ApplyNode::Json(json!({"k": "v"})))],
            ),
        )],
    );
    let out = apply_configuration(&pod(), &config, &pod_schema()).unwrap();
    assert_eq!(out["metadata"]["annotations"], json!({"k": "v"}));
    assert_eq!(out["metadata"]["labels"], json!({"a": "1"}));
}

#[test]
fn inputs_deeper_than_the_limit_are_refused() {
    let mut node = ApplyNode::Int(1);
    for _ in 0..50 {
        node = list(vec![node]);
    }
    let config = obj("Object", vec![("data", node)]);
    let schema = pod_schema().with_max_depth(20);
    let err = apply_configuration(&pod(), &config, &schema).unwrap_err();
    assert_eq!(err, ApplyError::TooDeep(20));
    // Within the limit the same input is typed (and refused for its shape).
    let err = apply_configuration(&pod(), &config, &pod_schema()).unwrap_err();
    assert!(matches!(err, ApplyError::PatchNotTyped(_)), "{err}");
}

fn arb_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        "[a-c]{0,2}".prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::vec(("[a-c]|name|image|labels|spec|containers", inner), 0..4)
                .prop_map(|e| Json::Object(e.into_iter().collect())),
        ]
    })
}

fn arb_node() -> impl Strategy<Value = ApplyNode> {
    let leaf = prop_oneof![
        Just(ApplyNode::Null),
        any::<bool>().prop_map(ApplyNode::Bool),
        any::<i64>().prop_map(ApplyNode::Int),
        any::<u64>().prop_map(ApplyNode::Uint),
        any::<f64>().prop_map(ApplyNode::Double),
        "[a-c]{0,2}".prop_map(ApplyNode::String),
        prop::collection::vec(any::<u8>(), 0..3).prop_map(ApplyNode::Bytes),
        arb_json().prop_map(ApplyNode::Json),
    ];
    let field = "[a-c]|name|image|labels|metadata|spec|containers|env|tags|ports|extra|settings";
    leaf.prop_recursive(6, 48, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(ApplyNode::List),
            prop::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(ApplyNode::Map),
            (
                "Object(\\.[a-c])?|Object\\.spec(\\.containers)?",
                prop::collection::vec((field, inner), 0..4)
            )
                .prop_map(|(type_name, fields)| ApplyNode::Object { type_name, fields }),
        ]
    })
}

fn crd_schema() -> MergeSchema {
    let c = case("037-ac-crd-set-list");
    schema_of(&c)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_merge_never_panics(object in arb_json(), fields in prop::collection::vec(("[a-c]|metadata|spec|data", arb_node()), 0..4)) {
        let config = ApplyNode::Object { type_name: "Object".into(), fields };
        for schema in [pod_schema(), crd_schema(), MergeSchema::builtin(&Gvk::new("", "v1", "ConfigMap"))] {
            let _ = apply_configuration(&object, &config, &schema);
            let _ = apply_configuration(&pod(), &config, &schema);
        }
    }

    #[test]
    fn deep_inputs_never_panic(depth in 1usize..1500, as_map in any::<bool>()) {
        let mut node = ApplyNode::String("x".into());
        let mut object = json!("x");
        for _ in 0..depth {
            node = if as_map { map(vec![("extra", node)]) } else { list(vec![node]) };
            object = json!({"extra": object});
        }
        let config = spec(vec![("extra", node)]);
        let object = json!({"apiVersion": "v1", "kind": "K", "spec": {"extra": object}});
        let _ = apply_configuration(&object, &config, &crd_schema());
    }
}
