//! CRD validation benchmarks (issue 14): the create path of a custom resource (defaulting,
//! pruning, OpenAPI validation, CEL rules) for a 50-field object under 20 rules and for a
//! 1,000-item list-map with a rule per item (time per object), and checking a CRD of 200
//! rules (structural checks, compilation and cost estimation; time per CRD).

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::{json, Map, Value as Json};

use celgate::crd::rules::{compile, compile_with_costs, CompiledCrd};
use celgate::crd::schema::{parse_crd, Crd};

fn crd(group: &str, kind: &str, plural: &str, spec_schema: Json) -> Json {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": spec_schema}
                }}
            }]
        }
    })
}

fn parsed(doc: &Json) -> Crd {
    parse_crd(doc).expect("the bench CRD reads")
}

fn compiled(doc: &Json) -> CompiledCrd {
    compile(&parsed(doc)).unwrap_or_else(|c| panic!("the bench CRD compiles: {c:?}"))
}

/// 50 fields (20 strings, 20 integers, 5 booleans, 5 string lists) and 20 rules: 10 on
/// fields, 10 across fields at `spec`.
fn fifty_fields() -> (Json, Json) {
    let mut props = Map::new();
    let mut spec = Map::new();
    for i in 0..20 {
        let mut s = json!({"type": "string", "maxLength": 64});
        let mut n = json!({"type": "integer", "minimum": 0, "maximum": 1000});
        if i < 5 {
            s["x-kubernetes-validations"] = json!([{"rule": "self.matches('^[a-z][a-z0-9-]*$')", "message": "lower-case name"}]);
            n["x-kubernetes-validations"] = json!([{"rule": "self % 2 == 0", "message": "even"}]);
        }
        props.insert(format!("s{i}"), s);
        props.insert(format!("n{i}"), n);
        spec.insert(format!("s{i}"), json!(format!("name-{i}")));
        spec.insert(format!("n{i}"), json!(i * 2));
    }
    for i in 0..5 {
        props.insert(format!("b{i}"), json!({"type": "boolean"}));
        props.insert(
            format!("l{i}"),
            json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 32}}),
        );
        spec.insert(format!("b{i}"), json!(i % 2 == 0));
        spec.insert(format!("l{i}"), json!(["a", "bb", "ccc", "dddd"]));
    }
    let cross: Vec<Json> = (0..10)
        .map(|i| {
            let rule = match i % 5 {
                0 => format!("self.n{i} <= self.n{}", i + 1),
                1 => format!("self.s{i}.startsWith('name') || self.b{}", i % 5),
                2 => format!("self.l{}.all(x, x.size() < 20)", i % 5),
                3 => format!("size(self.l{}) <= 10 && self.n{i} >= 0", i % 5),
                _ => format!("!self.b{} || self.s{i} != self.s{}", i % 5, i + 1),
            };
            json!({"rule": rule})
        })
        .collect();
    let schema = json!({
        "type": "object",
        "properties": props,
        "x-kubernetes-validations": cross,
    });
    let doc = crd("bench.example.com", "Wide", "wides", schema);
    let obj = json!({
        "apiVersion": "bench.example.com/v1",
        "kind": "Wide",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": spec,
    });
    (doc, obj)
}

/// A 1,000-item list-map keyed by name, with a rule on each item.
fn list_map() -> (Json, Json) {
    let schema = json!({
        "type": "object",
        "properties": {"entries": {
            "type": "array",
            "maxItems": 1000,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "maxLength": 63},
                    "weight": {"type": "integer"}
                },
                "x-kubernetes-validations": [{
                    "rule": "self.weight >= 0 && self.name.startsWith('e')",
                    "message": "weights are positive"
                }]
            }
        }}
    });
    let doc = crd("bench.example.com", "Table", "tables", schema);
    let entries: Vec<Json> = (0..1000)
        .map(|i| json!({"name": format!("e{i}"), "weight": i}))
        .collect();
    let obj = json!({
        "apiVersion": "bench.example.com/v1",
        "kind": "Table",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"entries": entries},
    });
    (doc, obj)
}

/// A CRD of 200 rules: 100 bounded strings and 100 integers, each with a rule of its own
/// kind (patterns, sizes, arithmetic, formats).
fn two_hundred_rules() -> Json {
    let mut props = Map::new();
    for i in 0..100 {
        let string_rule = match i % 4 {
            0 => "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
            1 => "self.size() <= 32 && !self.contains('..')",
            2 => "self.split('.').all(p, p.size() > 0)",
            _ => "isURL(self) || self.startsWith('/')",
        };
        let int_rule = match i % 3 {
            0 => "self >= 0 && self <= 65535",
            1 => "self % 8 == 0",
            _ => "int(string(self)) == self",
        };
        props.insert(
            format!("s{i}"),
            json!({"type": "string", "maxLength": 253,
                   "x-kubernetes-validations": [{"rule": string_rule}]}),
        );
        props.insert(
            format!("n{i}"),
            json!({"type": "integer",
                   "x-kubernetes-validations": [{"rule": int_rule}]}),
        );
    }
    crd(
        "bench.example.com",
        "Many",
        "manies",
        json!({"type": "object", "properties": props}),
    )
}

fn bench(c: &mut Criterion) {
    let (doc, obj) = fifty_fields();
    let wide = compiled(&doc);
    assert!(
        wide.create(obj.clone()).is_ok(),
        "the 50-field object is valid"
    );
    c.bench_function("crd validate: 50 fields, 20 rules (per object)", |b| {
        b.iter_batched(
            || obj.clone(),
            |o| black_box(wide.create(o)),
            BatchSize::SmallInput,
        )
    });

    let (doc, obj) = list_map();
    let table = compiled(&doc);
    assert!(
        table.create(obj.clone()).is_ok(),
        "the 1,000-item object is valid"
    );
    c.bench_function(
        "crd validate: 1,000-item list-map, a rule per item (per object)",
        |b| {
            b.iter_batched(
                || obj.clone(),
                |o| black_box(table.create(o)),
                BatchSize::LargeInput,
            )
        },
    );

    let many = parsed(&two_hundred_rules());
    let mut costs = Vec::new();
    assert!(compile_with_costs(&many, &mut costs).is_ok());
    assert_eq!(costs.len(), 200, "every rule is compiled and estimated");
    c.bench_function("crd check: compile and estimate 200 rules (per CRD)", |b| {
        b.iter(|| {
            let mut costs = Vec::with_capacity(200);
            black_box(compile_with_costs(black_box(&many), &mut costs).is_ok())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
