//! The example policies of `deploy/examples/` are valid, compile, and decide as their
//! comments say (evaluated offline, with a namespace that opts in).

use celgate::source::{add_cluster_defaults, folder, snapshot};
use serde_json::{json, Value as Json};

fn answer(pod: Json, user: &str, groups: &[&str]) -> Json {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/examples");
    let mut objects = folder::load(&dir, celgate::source::read::DEFAULT_MAX_FILE_BYTES)
        .expect("examples load")
        .objects;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"celgate.dev/registries": "enforced"}}});
    objects.push(folder::Loaded {
        file: "test".into(),
        document: 0,
        field_errors: Vec::new(),
        object: ns,
    });
    add_cluster_defaults(&mut objects);
    let snap = snapshot(objects, celgate::cel::NEWEST_MINOR, true).expect("examples are valid");
    for entry in &snap.policies {
        assert_eq!(
            entry.policy.problems(),
            Vec::<String>::new(),
            "{}",
            entry.policy.name
        );
    }
    let (kind, resource, group) = if pod["kind"] == "Pod" {
        ("Pod", "pods", "")
    } else {
        ("Deployment", "deployments", "apps")
    };
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "1", "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": resource},
            "name": pod["metadata"]["name"], "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": user, "groups": groups},
            "object": pod, "oldObject": null, "dryRun": false
        }
    });
    let body = serde_json::to_vec(&review).unwrap();
    let answer = celgate::review::answer(&snap, &body, &Default::default(), Default::default());
    answer.unwrap().review()["response"].clone()
}

fn pod(image: &str, host_network: bool) -> Json {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
           "spec": {"hostNetwork": host_network, "containers": [{"name": "c", "image": image}]}})
}

#[test]
fn registries_come_from_the_namespace_param() {
    let ok = answer(pod("ghcr.io/example/app:1", false), "alice", &[]);
    assert_eq!(ok["allowed"], true, "{ok}");
    let denied = answer(pod("docker.io/library/nginx", false), "alice", &[]);
    assert_eq!(denied["allowed"], false);
    assert_eq!(
        denied["status"]["message"],
        "ValidatingAdmissionPolicy 'allowed-registries.celgate.dev' with binding 'allowed-registries.celgate.dev' denied request: images must come from registry.example.com, ghcr.io/example: docker.io/library/nginx"
    );
}

#[test]
fn host_network_needs_node_update_rights() {
    let denied = answer(pod("registry.example.com/agent", true), "alice", &[]);
    assert_eq!(denied["allowed"], false);
    assert!(denied["status"]["message"]
        .as_str()
        .unwrap()
        .contains("hostNetwork needs permission to update nodes; alice has none"));
    let admin = answer(
        pod("registry.example.com/agent", true),
        "root",
        &["system:masters"],
    );
    assert_eq!(admin["allowed"], true, "{admin}");
}

#[test]
fn owner_label_warns() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team-a"}, "spec": {}});
    let r = answer(d, "alice", &[]);
    assert_eq!(r["allowed"], true);
    assert_eq!(
        r["warnings"],
        json!(["Validation failed for ValidatingAdmissionPolicy 'require-owner-label.celgate.dev' with binding 'require-owner-label.celgate.dev': Deployment web needs an owner label"])
    );
}
