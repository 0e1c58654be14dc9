"""Writes the AdmissionReviews of `server-cpu.sh`: a Pod CREATE in namespace `default` that
the bundled example policies (examples/policies) allow, and one they deny (a privileged
container)."""
import json
import os
import sys

work = sys.argv[1]


def review(name, security_context):
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web", "team": "shop"}},
        "spec": {"containers": [{
            "name": "web", "image": "registry.example.com/shop/web:1.4.2",
            "ports": [{"containerPort": 8080}],
            "securityContext": security_context,
        }]},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": pod, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


for kind, ctx in [("allowed", {"allowPrivilegeEscalation": False, "runAsNonRoot": True}),
                  ("denied", {"privileged": True, "allowPrivilegeEscalation": True})]:
    with open(os.path.join(work, f"{kind}.json"), "w") as f:
        json.dump(review(f"web-{kind}", ctx), f, separators=(",", ":"))
