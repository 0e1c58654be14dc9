"""Writes the load harness's policy folder and AdmissionReview body."""
import json
import os
import sys

shared, work = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(work, "policies"), exist_ok=True)
with open(os.path.join(shared, "bench", "pss-validations.yaml")) as f:
    validations = f.read()
docs = []
rule = lambda group, resource: f"{{apiGroups: ['{group}'], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [{resource}]}}"
indented = "\n".join("  " + line for line in validations.splitlines())
docs.append(f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: pod-security-restricted}}
spec:
  matchConstraints: {{resourceRules: [{rule('', 'pods')}]}}
{indented}""")
docs.append("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: pod-security-restricted}\nspec: {policyName: pod-security-restricted, validationActions: [Deny]}")
for i in range(9):
    docs.append(f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: other-{i}}}
spec:
  matchConstraints: {{resourceRules: [{rule('example.com', f'widgets{i}')}]}}
  validations: [{{expression: "object.spec.size > 0"}}]""")
    docs.append(f"apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: other-{i}}}\nspec: {{policyName: other-{i}, validationActions: [Deny]}}")
with open(os.path.join(work, "policies", "policies.yaml"), "w") as f:
    f.write("\n---\n".join(docs) + "\n")
with open(os.path.join(shared, "bench", "pod.json")) as f:
    pod = json.load(f)
review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
    "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
    "requestKind": {"group": "", "version": "v1", "kind": "Pod"}, "requestResource": {"group": "", "version": "v1", "resource": "pods"},
    "name": pod["metadata"]["name"], "namespace": pod["metadata"].get("namespace", "default"), "operation": "CREATE",
    "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller", "groups": ["system:serviceaccounts", "system:authenticated"]},
    "object": pod, "oldObject": None, "dryRun": False, "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}
with open(os.path.join(work, "review.json"), "w") as f:
    json.dump(review, f, separators=(",", ":"))
