//! Each defaulter on the smallest object that shows it, with the Go function it follows.

use serde_json::{json, Value as Json};

use super::default_object;
use crate::matching::registry::Gvk;

fn defaulted(gvk: (&str, &str, &str), mut object: Json) -> Json {
    default_object(&mut object, &Gvk::new(gvk.0, gvk.1, gvk.2));
    object
}

fn pod(spec: Json) -> Json {
    defaulted(
        ("", "v1", "Pod"),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}),
    )
}

#[test]
fn containers_set_defaults_container() {
    let p = pod(json!({"containers": [
        {"name": "a", "image": "busybox:1.36"},
        {"name": "b", "image": "busybox"},
        {"name": "c", "image": "busybox:latest", "imagePullPolicy": "Never"},
    ], "initContainers": [{"name": "i", "image": "x:latest"}],
       "ephemeralContainers": [{"name": "e", "image": "x:1"}]}));
    let c = &p["spec"]["containers"];
    assert_eq!(
        c[0],
        json!({"name": "a", "image": "busybox:1.36", "resources": {},
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
    );
    assert_eq!(c[1]["imagePullPolicy"], "Always");
    assert_eq!(c[2]["imagePullPolicy"], "Never");
    assert_eq!(p["spec"]["initContainers"][0]["imagePullPolicy"], "Always");
    // SetDefaults_EphemeralContainer.
    let e = &p["spec"]["ephemeralContainers"][0];
    assert_eq!(e["imagePullPolicy"], "IfNotPresent");
    assert_eq!(e["terminationMessagePolicy"], "File");
}

#[test]
fn pod_spec_set_defaults_pod_spec_and_pod() {
    let p = pod(json!({"containers": []}));
    assert_eq!(
        p["spec"],
        json!({"containers": [], "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
            "securityContext": {}, "terminationGracePeriodSeconds": 30,
            "schedulerName": "default-scheduler", "enableServiceLinks": true})
    );
    assert_eq!(p["metadata"]["creationTimestamp"], Json::Null);
    // A Pod without spec: the value struct is made and defaulted (SetObjectDefaults_Pod).
    let bare = defaulted(
        ("", "v1", "Pod"),
        json!({"apiVersion": "v1", "kind": "Pod"}),
    );
    assert_eq!(bare["spec"]["dnsPolicy"], "ClusterFirst");
}

#[test]
fn pod_requests_default_to_limits_set_defaults_pod() {
    let p = pod(json!({"containers": [{"name": "a", "image": "x:1",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}}}]}));
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "100m", "memory": "1Gi"})
    );
    // Not on a template (SetDefaults_Pod only).
    let t = defaulted(
        ("", "v1", "PodTemplate"),
        json!({"apiVersion": "v1", "kind": "PodTemplate", "template": {"spec": {"containers": [
            {"name": "a", "image": "x:1", "resources": {"limits": {"cpu": "1"}}}]}}}),
    );
    assert!(t["template"]["spec"]["containers"][0]["resources"]
        .get("requests")
        .is_none());
    assert_eq!(t["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        t["template"]["metadata"],
        json!({"creationTimestamp": null})
    );
}

#[test]
fn host_network_ports_default_host_ports_set_defaults_pod() {
    let p = pod(
        json!({"hostNetwork": true, "containers": [{"name": "a", "image": "x:1",
        "ports": [{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]}]}),
    );
    let ports = &p["spec"]["containers"][0]["ports"];
    assert_eq!(
        ports[0],
        json!({"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"})
    );
    assert_eq!(ports[1]["hostPort"], 9091);
}

#[test]
fn probes_and_http_get_set_defaults_probe_http_get_action() {
    let p = pod(json!({"containers": [{"name": "a", "image": "x:1",
        "livenessProbe": {"httpGet": {"port": 80}},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}}]}));
    let c = &p["spec"]["containers"][0];
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
            "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(
        c["lifecycle"]["preStop"]["httpGet"],
        json!({"port": 80, "path": "/stop", "scheme": "HTTP"})
    );
}

#[test]
fn volumes_set_defaults_volume_and_sources() {
    let p = pod(json!({"containers": [], "volumes": [
        {"name": "none"},
        {"name": "s", "secret": {"secretName": "x"}},
        {"name": "c", "configMap": {"name": "x", "defaultMode": 256}},
        {"name": "h", "hostPath": {"path": "/x"}},
        {"name": "p", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
    ]}));
    let v = &p["spec"]["volumes"];
    // SetDefaults_Volume.
    assert_eq!(v[0], json!({"name": "none", "emptyDir": {}}));
    // SetDefaults_SecretVolumeSource, SetDefaults_ConfigMapVolumeSource.
    assert_eq!(v[1]["secret"]["defaultMode"], 420);
    assert_eq!(v[2]["configMap"]["defaultMode"], 256);
    // SetDefaults_HostPathVolumeSource.
    assert_eq!(v[3]["hostPath"], json!({"path": "/x", "type": ""}));
    // SetDefaults_ProjectedVolumeSource, SetDefaults_ServiceAccountTokenProjection,
    // SetDefaults_ObjectFieldSelector.
    let proj = &v[4]["projected"];
    assert_eq!(proj["defaultMode"], 420);
    assert_eq!(
        proj["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3600
    );
    assert_eq!(
        proj["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    // SetDefaults_PersistentVolumeClaimSpec in an ephemeral volume's template.
    assert_eq!(
        v[5]["ephemeral"]["volumeClaimTemplate"],
        json!({"metadata": {"creationTimestamp": null}, "spec": {"volumeMode": "Filesystem"}})
    );
}

#[test]
fn env_field_refs_set_defaults_object_field_selector() {
    let p = pod(json!({"containers": [{"name": "a", "image": "x:1", "env": [
        {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}));
    assert_eq!(
        p["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
        "v1"
    );
}

fn deployment(spec: Json) -> Json {
    defaulted(
        ("apps", "v1", "Deployment"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec}),
    )
}

#[test]
fn deployments_set_defaults_deployment() {
    let d = deployment(
        json!({"replicas": null, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}),
    );
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert_eq!(
        spec["template"]["metadata"]["creationTimestamp"],
        Json::Null
    );
    // Recreate has no rolling update.
    let r = deployment(json!({"strategy": {"type": "Recreate"}}));
    assert_eq!(r["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn daemon_sets_stateful_sets_replica_sets() {
    // SetDefaults_DaemonSet.
    let ds = defaulted(
        ("apps", "v1", "DaemonSet"),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet"}),
    );
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    // SetDefaults_StatefulSet (StatefulSetAutoDeletePVC on in 1.32), and the claim
    // templates' SetDefaults_PersistentVolumeClaim{,Spec}.
    let ss = defaulted(
        ("apps", "v1", "StatefulSet"),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]}}),
    );
    let spec = &ss["spec"];
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(
        spec["volumeClaimTemplates"][0],
        json!({"metadata": {"name": "data", "creationTimestamp": null},
            "spec": {"volumeMode": "Filesystem"}, "status": {"phase": "Pending"}})
    );
    // SetDefaults_ReplicaSet.
    let rs = defaulted(
        ("apps", "v1", "ReplicaSet"),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet"}),
    );
    assert_eq!(rs["spec"]["replicas"], 1);
    assert_eq!(rs["spec"]["template"]["spec"]["restartPolicy"], "Always");
}

#[test]
fn jobs_and_cron_jobs_set_defaults_job_cron_job() {
    let job = defaulted(
        ("batch", "v1", "Job"),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
            "template": {"metadata": {"labels": {"app": "j"}}, "spec": {"restartPolicy": "Never"}},
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}),
    );
    let spec = &job["spec"];
    assert_eq!(job["metadata"]["labels"], json!({"app": "j"}));
    assert_eq!(spec["completions"], 1);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["manualSelector"], false);
    assert_eq!(spec["podReplacementPolicy"], "Failed");
    assert_eq!(
        spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
        "True"
    );
    let parallel = defaulted(
        ("batch", "v1", "Job"),
        json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 3, "backoffLimitPerIndex": 1}}),
    );
    assert!(parallel["spec"].get("completions").is_none());
    assert_eq!(parallel["spec"]["backoffLimit"], i64::from(i32::MAX));
    assert_eq!(
        parallel["spec"]["podReplacementPolicy"],
        "TerminatingOrFailed"
    );

    let cron = defaulted(
        ("batch", "v1", "CronJob"),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": "* * * * *"}}),
    );
    let spec = &cron["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    // The job template is a JobSpec: no SetDefaults_Job there, its Pod template defaulted.
    let job_spec = &spec["jobTemplate"]["spec"];
    assert!(job_spec.get("backoffLimit").is_none());
    assert_eq!(job_spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
}

#[test]
fn services_set_defaults_service() {
    let svc = |spec: Json| {
        defaulted(
            ("", "v1", "Service"),
            json!({"apiVersion": "v1", "kind": "Service", "spec": spec}),
        )
    };
    let s = svc(
        json!({"ports": [{"port": 80}, {"port": 81, "targetPort": "http", "protocol": "UDP"}]}),
    );
    assert_eq!(
        s["spec"],
        json!({"ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"},
            {"port": 81, "targetPort": "http", "protocol": "UDP"}],
            "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster"})
    );
    let lb = svc(json!({"type": "LoadBalancer", "sessionAffinity": "ClientIP"}));
    assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
    assert_eq!(
        lb["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );
    let ext = svc(json!({"externalIPs": ["1.2.3.4"], "sessionAffinityConfig": {"clientIP": {}}}));
    assert_eq!(ext["spec"]["externalTrafficPolicy"], "Cluster");
    assert!(ext["spec"].get("sessionAffinityConfig").is_none());
    let external_name = svc(json!({"type": "ExternalName", "externalName": "x.example"}));
    assert!(external_name["spec"].get("internalTrafficPolicy").is_none());
}

#[test]
fn namespaces_secrets_claims_set_defaults() {
    // SetDefaults_Namespace, SetDefaults_NamespaceStatus.
    let ns = defaulted(
        ("", "v1", "Namespace"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {"kubernetes.io/metadata.name": "old"}}}),
    );
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "n");
    assert_eq!(ns["status"], json!({"phase": "Active"}));
    // SetDefaults_Secret.
    let s = defaulted(
        ("", "v1", "Secret"),
        json!({"apiVersion": "v1", "kind": "Secret"}),
    );
    assert_eq!(s["type"], "Opaque");
    // SetDefaults_PersistentVolumeClaim.
    let pvc = defaulted(
        ("", "v1", "PersistentVolumeClaim"),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"}),
    );
    assert_eq!(pvc["status"]["phase"], "Pending");
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    // ConfigMap: SetDefaults_ConfigMap's empty data is not encoded.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "creationTimestamp": null}});
    assert_eq!(defaulted(("", "v1", "ConfigMap"), cm.clone()), cm);
}

#[test]
fn replication_controllers_set_defaults_replication_controller() {
    let rc = defaulted(
        ("", "v1", "ReplicationController"),
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"},
            "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {}}}}),
    );
    assert_eq!(rc["spec"]["selector"], json!({"a": "b"}));
    assert_eq!(rc["metadata"]["labels"], json!({"a": "b"}));
    assert_eq!(rc["spec"]["replicas"], 1);
    assert_eq!(
        rc["spec"]["template"]["spec"]["schedulerName"],
        "default-scheduler"
    );
}

#[test]
fn other_groups() {
    // autoscaling/v2 SetDefaults_HorizontalPodAutoscaler{,Behavior}.
    let hpa = defaulted(
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
    );
    let spec = &hpa["spec"];
    assert_eq!(spec["minReplicas"], 1);
    assert_eq!(
        spec["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert_eq!(
        spec["behavior"]["scaleUp"]["policies"][0],
        json!({"type": "Pods", "value": 4, "periodSeconds": 15})
    );
    assert_eq!(
        spec["behavior"]["scaleDown"],
        json!({"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})
    );
    // autoscaling/v1.
    let v1 = defaulted(
        ("autoscaling", "v1", "HorizontalPodAutoscaler"),
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "spec": {"maxReplicas": 3}}),
    );
    assert_eq!(v1["spec"]["minReplicas"], 1);
    // networking/v1 SetDefaults_NetworkPolicy, SetDefaults_NetworkPolicyPort.
    let np = defaulted(
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "spec": {
            "egress": [{"ports": [{"port": 53}]}]}}),
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
    // rbac/v1 SetDefaults_RoleBinding, SetDefaults_Subject.
    let rb = defaulted(
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
    );
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    assert!(rb["subjects"][1].get("apiGroup").is_none());
}

#[test]
fn custom_resources_and_unknown_kinds_are_left_alone() {
    let widget =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"replicas": null}});
    assert_eq!(
        defaulted(("example.com", "v1", "Widget"), widget.clone()),
        widget
    );
    // A custom resource patched to say it is a Pod stays unstructured: not defaulted.
    let pod_like = json!({"apiVersion": "v1", "kind": "Pod", "spec": {}});
    assert_eq!(
        defaulted(("example.com", "v1", "Widget"), pod_like.clone()),
        pod_like
    );
}

#[test]
fn a_changed_kind_is_defaulted_as_that_kind() {
    // 103: a ConfigMap patched into a Secret is decoded, and defaulted, as a Secret.
    let s = defaulted(
        ("", "v1", "ConfigMap"),
        json!({"apiVersion": "v1", "kind": "Secret"}),
    );
    assert_eq!(s["type"], "Opaque");
}
